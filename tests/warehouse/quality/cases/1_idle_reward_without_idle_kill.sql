-- -0.2 on a NameError crash, and on a crash with no exc_type: only idle kills get -0.2.
-- expect: 1 r1 1 cactus a2
-- expect: 1 r1 2 cactus a6
UPDATE nodes SET reward = -0.2 WHERE node_id IN ('a2', 'a6');
