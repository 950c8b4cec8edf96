-- oriented that is neither test_metric nor its negation.
-- expect: 6 r2 3 cactus c1
UPDATE nodes SET oriented = 0.5 WHERE node_id = 'c1';
