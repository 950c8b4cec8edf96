-- The probe reuses id a1 of run r1: ids need only be unique within a run.
-- expect: none
UPDATE nodes SET node_id = 'a1' WHERE node_id = 'd1';
