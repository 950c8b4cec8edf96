-- run_status_counts: one row per run and node status (column n = how many records).
--
-- Counted over every record of the run, including its partial last round (data root 002 counts
-- "over every archived node"). A record without a status is counted under status NULL.
-- Runs with no records have no rows.
CREATE OR REPLACE VIEW "run_status_counts" AS
SELECT
    "run_id",
    "status",
    count(*) AS "n"
FROM "nodes"
GROUP BY "run_id", "status";
