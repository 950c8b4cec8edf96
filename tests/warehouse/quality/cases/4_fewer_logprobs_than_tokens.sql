-- One logprob missing.
-- expect: 4 r1 1 cactus a2
UPDATE nodes SET n_response_logprobs = 119 WHERE node_id = 'a2';
