-- Phases 12 s short of a 1012 s step (the bound is max(1 s, 10.12 s)).
-- expect: 7 r1 3 - -
UPDATE steps SET total_s = 1012.0 WHERE step = 3;
