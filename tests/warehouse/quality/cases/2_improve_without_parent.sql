-- An improve node with no parent; a NULL mode with no parent is no draft either.
-- expect: 2 r1 1 cactus a2
-- expect: 2 r1 1 cactus a4
UPDATE nodes SET mode = 'improve' WHERE node_id = 'a2';
UPDATE nodes SET mode = NULL WHERE node_id = 'a4';
