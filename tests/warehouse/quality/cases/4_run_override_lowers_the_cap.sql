-- A run whose overrides set response_cap 100: nodes above it offend, the one at 100 does not.
-- expect: 4 r1 1 cactus a2
-- expect: 4 r1 1 cactus a3
-- expect: 4 r1 1 textnorm b2
UPDATE runs SET overrides = '{"response_cap": 100}' WHERE run_id = 'r1';
