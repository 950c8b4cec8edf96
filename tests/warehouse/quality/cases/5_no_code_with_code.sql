-- A no_code node that still carries code.
-- expect: 5 r1 1 textnorm b2
UPDATE nodes SET code_chars = 12 WHERE node_id = 'b2';
