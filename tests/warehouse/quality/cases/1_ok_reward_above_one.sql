-- An ok node whose reward left [0, 1].
-- expect: 1 r1 1 cactus a1
UPDATE nodes SET reward = 1.2 WHERE node_id = 'a1';
