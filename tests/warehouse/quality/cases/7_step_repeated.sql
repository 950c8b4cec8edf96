-- A timing row that repeats step 3 after step 3.
-- expect: 7 r1 3 - -
INSERT INTO steps (source_id, line_no, run_id, step, total_s, gen_s)
VALUES (9, 4, 'r1', 3, 10.0, 10.0);
