-- A summary that counts one valid node too many.
-- expect: 3 r1 1 cactus -
UPDATE task_rounds SET valid = 2 WHERE run_id = 'r1' AND round = 1 AND task = 'cactus';
