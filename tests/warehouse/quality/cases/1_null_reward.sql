-- A node without a reward.
-- expect: 1 r1 2 cactus a6
UPDATE nodes SET reward = NULL WHERE node_id = 'a6';
