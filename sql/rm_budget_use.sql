-- rm_budget_use: one row per reward-model run and phase: how much of the wall-clock budget
-- (less the reserve held back for scoring and publishing) the phase used.
--   usable_s        : wall_clock_s - reserve_s (reserve 0 when not stated)
--   budget_use      : train_s / usable_s
--   elapsed_use     : elapsed_s / wall_clock_s
--   steps_consistent: steps = members x steps_per_member (NULL when one is not stated)
CREATE OR REPLACE VIEW "rm_budget_use" AS
SELECT
    b."run_id",
    b."phase",
    b."wall_clock_s",
    b."reserve_s",
    b."wall_clock_s" - coalesce(b."reserve_s", 0) AS "usable_s",
    b."train_s",
    b."elapsed_s",
    b."train_s" / NULLIF(b."wall_clock_s" - coalesce(b."reserve_s", 0), 0) AS "budget_use",
    b."elapsed_s" / NULLIF(b."wall_clock_s", 0) AS "elapsed_use",
    b."stop_reason",
    b."steps",
    b."members",
    b."steps_per_member",
    b."steps" = b."members" * b."steps_per_member" AS "steps_consistent",
    b."snapshots_published",
    b."snapshots_retained"
FROM "rm_budgets" AS b;
