-- A status outside the known set, and a NULL status.
-- expect: 2 r1 2 cactus a6
-- expect: 2 r1 1 cactus a4
UPDATE nodes SET status = 'exploded' WHERE node_id = 'a6';
UPDATE nodes SET status = NULL WHERE node_id = 'a4';
