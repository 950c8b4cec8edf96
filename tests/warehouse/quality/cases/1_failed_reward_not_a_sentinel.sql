-- A crashed node with an ok-looking reward.
-- expect: 1 r1 2 cactus a6
UPDATE nodes SET reward = 0.0 WHERE node_id = 'a6';
