-- A graded node without a test_metric (and so without oriented).
-- expect: 6 r2 3 cactus c1
UPDATE nodes SET test_metric = NULL, oriented = NULL WHERE node_id = 'c1';
