-- A summary that counts 16 nodes where the file holds 2.
-- expect: 3 r1 1 textnorm -
UPDATE task_rounds SET nodes = 16 WHERE run_id = 'r1' AND round = 1 AND task = 'textnorm';
