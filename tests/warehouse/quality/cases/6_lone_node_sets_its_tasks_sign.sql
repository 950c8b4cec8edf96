-- A task with one graded node has no other nodes to disagree with: a sign flip there is
-- not detectable, and the gate does not guess.
-- expect: none
UPDATE nodes SET oriented = 0.12 WHERE node_id = 'b1';
