-- oriented = -test_metric on a higher-is-better task whose other graded nodes (a1, a5) use
-- oriented = +test_metric.
-- expect: 6 r2 3 cactus c1
UPDATE nodes SET oriented = -0.97 WHERE node_id = 'c1';
