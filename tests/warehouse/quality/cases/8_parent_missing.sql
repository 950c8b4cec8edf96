-- A parent id that names no node at all.
-- expect: 8 r2 3 cactus c1
UPDATE nodes SET parent_id = 'nope' WHERE node_id = 'c1';
