-- A test_metric on a node whose source is not grade.
-- expect: 6 r1 1 cactus a2
UPDATE nodes SET test_metric = 0.5, oriented = 0.5 WHERE node_id = 'a2';
