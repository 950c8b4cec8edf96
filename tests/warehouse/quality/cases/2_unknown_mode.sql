-- A mode outside the known set (the node has a parent, so only the mode is wrong).
-- expect: 2 r1 2 cactus a5
UPDATE nodes SET mode = 'explore' WHERE node_id = 'a5';
