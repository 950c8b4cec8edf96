-- round_times: one row per run and round that has a source (a file, or a trainer's commit),
-- with when the round was written: by the run's own clock wherever one is known.
--
-- A data root copied or downloaded elsewhere keeps its files' names but not their
-- modification times, so a file's mtime is the copy's time, not the run's. In order:
--   trainer     `train run` committed the round's rows itself: the commit time (ingested_at
--               of its train:// sources);
--   file names  the epoch seconds in the round files' names (`<task>__<ts>.jsonl`,
--               `__summary_<ts>.json`, `__<ts>__tree.txt`, `__<ts>__transcript.md`:
--               docs/data-roots.md), which the harness stamps when it writes them;
--   file time   else the newest modification time of the round's files.
-- written_from says which one written_at is. Times are UTC.
CREATE OR REPLACE VIEW "round_times" AS
WITH
named AS (
    SELECT "run_id", "round", "path", "mtime_ns", "ingested_at",
           TRY_CAST(regexp_extract("path",
                                   '__(summary_)?([0-9]+)(__tree[.]txt|__transcript[.]md|[.]jsonl|[.]json)$',
                                   2) AS BIGINT) AS "name_s"
    FROM "sources"
    WHERE "run_id" IS NOT NULL AND "round" IS NOT NULL
),
per_round AS (
    SELECT "run_id", "round",
           max(CASE WHEN "path" LIKE 'train://%' THEN "ingested_at" END) AS "committed_at",
           -- a number in a name that is no time from 2000 to 2100 is not a stamp
           max(CASE WHEN "name_s" BETWEEN 946684800 AND 4102444800
                    THEN make_timestamp("name_s" * 1000000) END) AS "named_at",
           make_timestamp(max("mtime_ns") // 1000) AS "file_at"
    FROM named
    GROUP BY "run_id", "round"
)
SELECT
    "run_id",
    "round",
    coalesce(greatest("committed_at", "named_at"), "file_at") AS "written_at",
    CASE
        WHEN "committed_at" >= coalesce("named_at", "committed_at") THEN 'trainer'
        WHEN "named_at" IS NOT NULL THEN 'file names'
        WHEN "file_at" IS NOT NULL THEN 'file time'
    END AS "written_from"
FROM per_round;
