-- A parent that lives in another lineage (the probe).
-- expect: 8 r2 3 cactus c1
UPDATE nodes SET parent_id = 'd2' WHERE node_id = 'c1';
