-- A draft that names a parent.
-- expect: 2 r1 2 cactus a5
UPDATE nodes SET mode = 'draft' WHERE node_id = 'a5';
