-- run_caps: one row per run, with the response cap (and total cap) its nodes were generated under.
--
-- The cap reaches a run through its arm (arms.response_cap). A run that changed it for itself
-- (`train run --set response_cap=N`, or a manifest entry's overrides) records the new value in
-- runs.overrides, and that value wins. A run of unknown arm with no override has a NULL cap:
-- cap-based metrics and checks are NULL / skipped there, never guessed.
CREATE OR REPLACE VIEW "run_caps" AS
SELECT
    r."run_id",
    r."arm",
    COALESCE(
        TRY_CAST(json_extract_string(r."overrides", '$.response_cap') AS INTEGER),
        a."response_cap"
    ) AS "response_cap",
    COALESCE(
        TRY_CAST(json_extract_string(r."overrides", '$.total_cap') AS INTEGER),
        a."total_cap"
    ) AS "total_cap"                      -- prompt + response budget, the same way
FROM "runs" AS r
LEFT JOIN "arms" AS a ON a."name" = r."arm";
