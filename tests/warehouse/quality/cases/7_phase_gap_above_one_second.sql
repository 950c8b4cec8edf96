-- Phases 2 s short of total_s on a 100 s step (the bound is max(1 s, 1 s)).
-- expect: 7 r1 1 - -
UPDATE steps SET total_s = 102.0 WHERE step = 1;
