-- best_node_id names no node.
-- expect: 3 p0 0 denoise zz
UPDATE task_rounds SET best_node_id = 'zz' WHERE run_id = 'p0';
