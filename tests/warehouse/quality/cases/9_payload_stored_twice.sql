-- Node c1's payload stored twice and a2's trained tokens twice (the tables of token arrays have
-- no key: migration 0011): each node offends once; c2's single payload is fine.
-- expect: 9 r2 3 cactus c1
-- expect: 9 r1 1 cactus a2
INSERT INTO node_payloads (source_id, line_no, response_token_ids, response_logprobs)
VALUES (7, 1, [1, 2], [-0.1, -0.2]), (7, 1, [1, 2], [-0.1, -0.2]), (7, 2, [3], [-0.3]);
INSERT INTO node_train_tokens (source_id, line_no, run_id, step, trainer_logprobs)
VALUES (1, 2, 'r1', 1, [-0.1]), (1, 2, 'r1', 1, [-0.1]);
