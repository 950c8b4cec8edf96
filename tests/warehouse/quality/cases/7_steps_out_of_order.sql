-- Steps 2 and 3 swapped in the file: the row of step 2 (now line 3) does not increase.
-- expect: 7 r1 2 - -
UPDATE steps SET step = 5 - step WHERE line_no IN (2, 3);
UPDATE steps SET total_s = 200.0 WHERE line_no = 3;
UPDATE steps SET total_s = 1000.0 WHERE line_no = 2;
UPDATE steps SET gen_s = 600, old_log_prob_s = 100, ref_s = 100, update_weights_s = 50,
    update_actor_s = 140, save_checkpoint_s = NULL WHERE line_no = 2;
UPDATE steps SET gen_s = 120, old_log_prob_s = 20, ref_s = 20, update_weights_s = 10,
    update_actor_s = 18.5, save_checkpoint_s = 10 WHERE line_no = 3;
