-- A parent that lives only in a run resumed from this one (not in this run's lineage).
-- expect: 8 r1 2 cactus a7
UPDATE nodes SET parent_id = 'c2' WHERE node_id = 'a7';
