-- A second record with id c1 in run r2: both copies offend.
-- expect: 9 r2 3 cactus c1
-- expect: 9 r2 3 cactus c1
INSERT INTO nodes (source_id, line_no, run_id, round, task, node_id, mode, status, reward,
                   n_response_tokens, n_response_logprobs, code_chars)
VALUES (7, 3, 'r2', 3, 'cactus', 'c1', 'draft', 'crashed', -0.5, 10, 10, 5);
