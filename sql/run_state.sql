-- run_state: one row per run (run_id), with where its trainer stands and its last activity.
--
-- `train run` and `train rm` record a run_lifecycle row when they start, beat it while they
-- live (heartbeat_at, every heartbeat_every_s seconds) and close it when they end, so state is:
--   running   started, not ended, and beat recently;
--   finished  ended normally; failed: ended on an exception; stopped: ended on an interrupt
--             (Ctrl-C, SIGTERM) - exit_reason says which;
--   lost      not ended and no beat for lost_after_s (the process died unseen: killed, OOM,
--             the machine lost), or the run directory is a dangling link (runs.lost);
--   imported  loaded from files by `warehouse ingest`: no trainer recorded its life here.
-- A run whose row a trainer claimed (source_path train://) but whose start record never got in
-- was killed before it began, or has not begun yet: running while its last commit (or its
-- start, from its id) is within lost_after_s, lost after that, with exit_reason saying so.
-- last_activity_at is the run's own time, never the time it was ingested: its last beat, its
-- end or its newest round's commit (a trainer's), else the time stamped in its round files'
-- names (round_times), and only when its files carry no time at all their newest mtime, which
-- for a copied or downloaded root is the copy's time. last_activity_from says which one it is:
-- 'trainer', 'file names' or 'file time'. Times are UTC.
CREATE OR REPLACE VIEW "run_state" AS
WITH
ids AS (
    SELECT "run_id" FROM "runs"
    UNION SELECT "run_id" FROM "rm_runs"
    UNION SELECT "run_id" FROM "run_lifecycle"
),
files AS (
    SELECT "run_id", make_timestamp(max("mtime_ns") // 1000) AS "newest_file_at"
    FROM "sources"
    WHERE "mtime_ns" IS NOT NULL
    GROUP BY "run_id"
),
rounds AS (
    SELECT "run_id",
           max("written_at") FILTER (WHERE "written_from" = 'trainer') AS "committed_at",
           max("written_at") FILTER (WHERE "written_from" = 'file names') AS "named_at"
    FROM "round_times"
    GROUP BY "run_id"
),
timed AS (
    SELECT i."run_id", r."lost" AS "dangling", l."trainer",
           coalesce(l."started_at", r."started_at") AS "started_at",
           l."heartbeat_at", l."ended_at", l."end_status", l."exit_reason", l."host", l."pid",
           -- a few missed beats (a long commit, a busy warehouse) are not yet a lost run
           greatest(3 * coalesce(l."heartbeat_every_s", 60), 120) AS "lost_after_s",
           epoch(now()) - epoch(coalesce(l."heartbeat_at", l."started_at")) AS "silent_s",
           l."run_id" IS NOT NULL AS "recorded",
           coalesce(r."source_path" LIKE 'train://%', false) AS "claimed",
           epoch(now()) - epoch(coalesce(o."committed_at", r."started_at")) AS "unrecorded_silent_s",
           greatest(l."heartbeat_at", l."ended_at", o."committed_at") AS "trainer_at",
           o."named_at",
           f."newest_file_at"
    FROM ids AS i
    LEFT JOIN "runs" AS r USING ("run_id")
    LEFT JOIN "run_lifecycle" AS l USING ("run_id")
    LEFT JOIN files AS f USING ("run_id")
    LEFT JOIN rounds AS o USING ("run_id")
)
SELECT
    "run_id",
    CASE
        WHEN "dangling" THEN 'lost'
        WHEN "end_status" IS NOT NULL THEN "end_status"
        WHEN NOT "recorded" AND "claimed" AND "unrecorded_silent_s" <= "lost_after_s" THEN 'running'
        WHEN NOT "recorded" AND "claimed" THEN 'lost'
        WHEN NOT "recorded" THEN 'imported'
        WHEN "silent_s" > "lost_after_s" THEN 'lost'
        ELSE 'running'
    END AS "state",
    "trainer",
    "started_at",
    "heartbeat_at",
    "ended_at",
    "end_status",
    CASE
        WHEN NOT "recorded" AND "claimed" AND coalesce("unrecorded_silent_s" > "lost_after_s", true)
            THEN 'its trainer claimed the run but never recorded its start: killed before it began'
        ELSE "exit_reason"
    END AS "exit_reason",
    coalesce(greatest("trainer_at", "named_at"), "newest_file_at") AS "last_activity_at",
    CASE
        WHEN "trainer_at" >= coalesce("named_at", "trainer_at") THEN 'trainer'
        WHEN "named_at" IS NOT NULL THEN 'file names'
        WHEN "newest_file_at" IS NOT NULL THEN 'file time'
    END AS "last_activity_from",
    CASE WHEN "recorded" AND "end_status" IS NULL THEN "silent_s" END AS "silent_s",  -- seconds since the last beat
    "lost_after_s",
    "host",
    "pid"
FROM timed;
