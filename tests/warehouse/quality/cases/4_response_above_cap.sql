-- One token past the arm's response cap of 24576.
-- expect: 4 r1 1 textnorm b2
UPDATE nodes SET n_response_tokens = 24577, n_response_logprobs = 24577 WHERE node_id = 'b2';
