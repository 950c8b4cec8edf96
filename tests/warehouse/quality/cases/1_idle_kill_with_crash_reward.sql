-- A CpuIdleError node rewarded -0.5 instead of -0.2.
-- expect: 1 r1 1 cactus a3
UPDATE nodes SET reward = -0.5 WHERE node_id = 'a3';
