-- summary.best_test_metric differs from its best node's test_metric.
-- expect: 3 r1 2 cactus a5
UPDATE task_rounds SET best_test_metric = 0.96 WHERE run_id = 'r1' AND round = 2;
