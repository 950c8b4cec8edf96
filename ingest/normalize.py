"""The one normalization: raw JSON text per line -> typed rows, as SQL that DuckDB runs.

Files and the trainer's in-memory records take the same road: each is turned into a relation
`(line_no, line, pre_error)` of raw JSON text (a file's lines, or `json.dumps` of each dict,
registered as an Arrow table), and the SELECTs built here type it. So a record loaded by the
trainer and the same record read back from a file land identically.

Each record kind (node, summary, timing row, step metrics row, W&B history row) is a list of `Field`s,
declared in warehouse.vocabulary (the history row's is empty: it is kept whole). A field
is *strict* when the metrics depend on it: a wrong JSON type (or NaN/Infinity in a number)
rejects the line with a reason naming the field. Other fields are lenient: a value that fits
no typed column leaves the column NULL and is kept verbatim in `extra`, with every unknown key.
"""
from __future__ import annotations

from functools import lru_cache

from warehouse.db import quote_identifier as qi
from warehouse import vocabulary as vocab
from warehouse.vocabulary import (ARRAY_KINDS, NODE_FIELDS, STEP_METRIC_FIELDS, SUMMARY_FIELDS, TIMING_FIELDS, Field,
                                  node_keys)

MAX_REASONS = 3  # a line's reason lists at most this many field problems


# the keys that tell a node record of schema B or C from one of schema A
SCHEMA_B_KEYS, SCHEMA_C_KEYS = node_keys("B"), node_keys("C")

HISTORY_FIELDS: tuple[Field, ...] = ()  # a history row is kept whole; its step is read below


# --- SQL building ----------------------------------------------------------------------------
# Three layers keep the expression trees small (DuckDB plans them quickly):
#   rec    -> raw:   each field's JSON text (`k__j`) and JSON type (`k__t`), parsed once
#   raw    -> typed: each field's typed value, named after its column
#   typed  -> final: derived lengths, `extra` and `reject_reason` from the layers above

def _structure(fields: tuple[Field, ...]) -> str:
    """The json_transform structure: big arrays typed directly, everything else as JSON text."""
    parts = []
    for f in fields:
        typ = {"ints": "INTEGER[]", "floats": "DOUBLE[]", "float32s": "DOUBLE[]", "text": "VARCHAR"}.get(f.kind, "JSON")
        parts.append(f'"{f.key}": "{typ}"')
    return "{" + ", ".join(parts) + "}"


def _j(f: Field) -> str:
    return qi(f.key + "__j")


def _t(f: Field) -> str:
    return qi(f.key + "__t")


def _out(f: Field) -> str:
    """A field's name in `_typed`: its column, or p_<key> for one kept in another table."""
    return qi("p_" + f.key if f.table or f.column is None else f.column)


def _raw_columns(f: Field) -> list[str]:
    src = f"r.{qi(f.key)}"
    if f.kind == "text":  # big free text (completions, code): taken as is, never re-encoded
        return [f"{src} AS {_j(f)}"]
    if f.kind in ARRAY_KINDS:
        # json_transform gives NULL for a non-array: look at the line only in that rare case.
        kind = (f"CASE WHEN {src} IS NULL AND list_contains(keys, '{f.key}') "
                f"THEN json_type(line, '$.\"{f.key}\"') END")
    else:
        kind = f"json_type({src})"
    return [f"{src} AS {_j(f)}", f"{kind} AS {_t(f)}"]


def _value(f: Field) -> str:
    """The typed value of a field (NULL when the JSON type does not fit)."""
    j, t = _j(f), _t(f)
    num = f"TRY_CAST({j} AS DOUBLE)"
    return {
        "str": f"CASE WHEN {t} = 'VARCHAR' THEN json_extract_string({j}, '$') END",
        "id": (f"CASE WHEN {t} = 'VARCHAR' THEN json_extract_string({j}, '$') "
               f"WHEN {t} IN ('BIGINT', 'UBIGINT') THEN CAST({j} AS VARCHAR) END"),
        "int": (f"CASE WHEN {t} IN ('BIGINT', 'UBIGINT') OR ({t} = 'DOUBLE' AND {num} = "
                f"floor({num})) THEN TRY_CAST({j} AS INTEGER) END"),
        "bigint": (f"CASE WHEN {t} IN ('BIGINT', 'UBIGINT') OR ({t} = 'DOUBLE' AND {num} = "
                   f"floor({num})) THEN TRY_CAST({j} AS BIGINT) END"),
        "float": (f"CASE WHEN {t} IN ('BIGINT', 'UBIGINT', 'DOUBLE') AND isfinite({num}) "
                  f"THEN {num} END"),
        "bool": f"CASE WHEN {t} = 'BOOLEAN' THEN CAST({j} AS BOOLEAN) END",
        "json": f"CASE WHEN {t} <> 'NULL' THEN {j} END",
        **{kind: j for kind in ARRAY_KINDS},
        "text": j,
    }[f.kind]


def _dict_parts(f: Field) -> list[str]:
    j, t = _j(f), _t(f)
    cols = []
    for sub, col in f.parts:
        path = f"'$.\"{sub}\"'"
        cols.append(f"CASE WHEN {t} = 'OBJECT' AND json_type({j}, {path}) IN "
                    f"('BIGINT', 'UBIGINT', 'DOUBLE') THEN TRY_CAST(json_extract({j}, {path}) "
                    f"AS DOUBLE) END AS {qi(col)}")
    return cols


def _misfit(f: Field) -> str:
    """True when the key is present, not null, and its value did not fit the typed column."""
    j, t = _j(f), _t(f)
    if f.kind in ARRAY_KINDS:
        return f"(coalesce({t} <> 'NULL', false) OR list_count({j}) <> len({j}))"
    if f.kind in ("json", "text"):
        return "false"
    if f.kind == "dict":
        known = ", ".join(f"'{k}'" for k, _ in f.parts)
        subs = ", ".join(f"'{k}'" for k, _ in f.parts)
        return (f"({t} IS NOT NULL AND {t} <> 'NULL' AND ({t} <> 'OBJECT' OR "
                f"len(list_filter(json_keys({j}), lambda k: k NOT IN ({known}))) > 0 OR "
                f"len(list_filter(json_type({j}, list_transform([{subs}], lambda k: '$.' || k)),"
                f" lambda x: x IS NOT NULL AND x NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE')))"
                f" > 0))")
    return f"({t} IS NOT NULL AND {t} <> 'NULL' AND {_out(f)} IS NULL)"


def _reason(fields: tuple[Field, ...]) -> str:
    """A readable list of the strict problems of a line; NULL when it may land."""
    checks = []
    for f in fields:
        if f.required:
            checks.append(f"CASE WHEN {_t(f)} IS NULL OR {_t(f)} = 'NULL' THEN "
                          f"'missing {f.key}' END")
        if f.strict:
            want = {"str": "a string", "id": "a string", "int": "an integer", "bigint": "an integer",
                    "bool": "true or false", "float": "a finite number", "ints": "a list of integers",
                    "floats": "a list of numbers", "float32s": "a list of numbers"}[f.kind]
            num = f"TRY_CAST({_j(f)} AS DOUBLE)"
            fraction = (f"WHEN {_t(f)} = 'DOUBLE' AND isfinite({num}) AND {num} <> floor({num}) THEN 'a fraction' "
                        if f.kind in ("int", "bigint") else "")
            got = ("'wrong element types'" if f.kind in ARRAY_KINDS
                   else f"CASE {fraction}WHEN {_t(f)} = 'DOUBLE' THEN 'NaN/Infinity/out of range' "
                   f"ELSE lower({_t(f)}) END")
            checks.append(f"CASE WHEN {_misfit(f)} THEN '{f.key} is ' || {got} || "
                          f"', expected {want}' END")
        if f.closed:  # the value, quoted: phase 'warmup' is not one of exploration, formal
            allowed = ", ".join(f"'{v}'" for v in f.values)
            checks.append(f"CASE WHEN {_out(f)} NOT IN ({allowed}) THEN '{f.key} ' || "
                          f"chr(39) || {_out(f)} || chr(39) || ' is not one of {', '.join(f.values)}' END")
    checks.append("CASE WHEN len(keys) <> len(list_distinct(keys)) THEN 'duplicate keys' END")
    return f"NULLIF(concat_ws('; ', {', '.join(checks)}), '')"


def _extra(fields: tuple[Field, ...]) -> str:
    """Unknown keys, plus lenient values that fit no typed column, as one JSON object."""
    known = ", ".join(f"'{f.key}'" for f in fields)
    unknown = (f"list_transform(list_filter(list_distinct(keys), lambda k: k NOT IN ({known})), "
               "lambda k: {'k': k, 'v': json_extract(line, '$.\"' || replace(k, '\"', '\\\"') "
               "|| '\"')})")
    misfits = [f"CASE WHEN {_misfit(f)} THEN {{'k': '{f.key}', 'v': {_j(f)}}} END"
               for f in fields if not f.strict and f.kind not in ("json", "text")]
    kept = f"list_filter([{', '.join(misfits)}], lambda e: e IS NOT NULL)" if misfits else "[]"
    entries = f"list_concat({unknown}, {kept})"
    return (f"CASE WHEN len({entries}) > 0 THEN "
            f"CAST(to_json(map_from_entries({entries})) AS JSON) END")


def _schema_kind() -> str:
    c = ", ".join(f"'{k}'" for k in SCHEMA_C_KEYS)
    b = ", ".join(f"'{k}'" for k in SCHEMA_B_KEYS)
    return (f"CASE WHEN list_has_any(keys, [{c}]) THEN 'C' "
            f"WHEN list_has_any(keys, [{b}]) THEN 'B' ELSE 'A' END AS schema_kind")


FIELDS = {"node": NODE_FIELDS, "summary": SUMMARY_FIELDS, "timing": TIMING_FIELDS,
          "step_metric": STEP_METRIC_FIELDS,
          # the reward-model records (ingest.rm_records)
          "rm_run": vocab.RM_RUN_FIELDS, "rm_reference": vocab.RM_REFERENCE_FIELDS,
          "rm_budget": vocab.RM_BUDGET_FIELDS, "rm_job": vocab.RM_JOB_FIELDS, "rm_step": vocab.RM_STEP_FIELDS,
          "rm_artifact": vocab.RM_ARTIFACT_FIELDS, "rm_evaluation": vocab.RM_EVALUATION_FIELDS,
          "rm_section": vocab.RM_SECTION_FIELDS}


def _outputs(fields: tuple[Field, ...]) -> list[str]:
    cols = []
    for f in fields:
        cols += [qi(c) for _, c in f.parts] if f.kind == "dict" else [_out(f)]
    return cols


@lru_cache(maxsize=None)
def typed_select(kind: str) -> str:
    """The SELECT that types the good lines of `_raw` (those `_bad` does not list)."""
    fields = FIELDS[kind]
    raw = [c for f in fields for c in _raw_columns(f)]
    typed = [c for f in fields for c in (_dict_parts(f) if f.kind == "dict"
                                         else [f"{_value(f)} AS {_out(f)}"])]
    final = ["key", "line_no", *_outputs(fields), f"{_extra(fields)} AS extra",
             f"{_reason(fields)} AS reject_reason"]
    if kind == "node":
        final += [_schema_kind(), "len(p_response_token_ids) AS n_response_tokens",
                  "len(p_response_logprobs) AS n_response_logprobs",
                  "length(p_code) AS code_chars"]
    return (f"WITH rec AS ({parse_select(kind)}),\n"
            f"raw AS (SELECT key, line_no, line, keys, {', '.join(raw)} FROM rec),\n"
            f"typed AS (SELECT *, {', '.join(typed)} FROM raw)\n"
            f"SELECT {', '.join(final)} FROM typed")


GOOD_LINES = ("FROM _raw ANTI JOIN _bad USING (key, line_no) "
              "WHERE line IS NOT NULL")


@lru_cache(maxsize=None)
def parse_select(kind: str) -> str:
    """Parse each good line once: its fields (json_transform) and its keys."""
    if kind == "history":
        return f"SELECT key, line_no, line, json_keys(line) AS keys {GOOD_LINES}"
    return (f"SELECT key, line_no, line, json_transform(line, '{_structure(FIELDS[kind])}') "
            f"AS r, json_keys(line) AS keys {GOOD_LINES}")


HISTORY_SELECT = f"""
WITH rec AS ({parse_select("history")})
SELECT key, line_no,
  TRY_CAST(coalesce(json_extract(line, '$._step'), json_extract(line, '$.step')) AS INTEGER)
    AS step,
  CAST(line AS JSON) AS row,
  CASE WHEN len(keys) <> len(list_distinct(keys)) THEN 'duplicate keys' END AS reject_reason
FROM rec
"""

# Lines that cannot be parsed at all, with the line kept only when a finer reason is wanted.
# The optimistic form skips json_valid (a full parse): if a bad line slips through, the
# parse raises and `normalize` runs again with the validating form.
_BAD_TEMPLATE = """
SELECT key, line_no, error, CASE WHEN error = 'not valid JSON' THEN line END AS line
FROM (
  SELECT key, line_no, line,
    CASE WHEN pre_error IS NOT NULL THEN pre_error
         {valid}
         WHEN NOT starts_with(ltrim(line), '{{') THEN 'not a JSON object'
    END AS error
  FROM _raw
)
WHERE error IS NOT NULL
"""
BAD_SELECT = _BAD_TEMPLATE.format(valid="WHEN NOT json_valid(line) THEN 'not valid JSON'")
BAD_SELECT_OPTIMISTIC = _BAD_TEMPLATE.format(valid="")


def normalize(con, kind: str, optimistic: bool = True) -> None:
    """Type the registered relation `_raw(key, line_no, line, pre_error)` into temp tables.

    `key` tells the sources of one batch apart. `_bad(key, line_no, error, line)` lists the
    lines that could not be parsed; `_typed` holds one row per parsed line with typed
    columns, `extra` and `reject_reason`. Each line is parsed once for its fields, and no
    intermediate copy of the payloads is made. Inside a caller's transaction pass
    `optimistic=False`: a failed statement would abort that transaction.
    """
    select = HISTORY_SELECT if kind == "history" else typed_select(kind)
    if not optimistic:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _bad AS {BAD_SELECT}")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _typed AS {select}")
        return
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _bad AS {BAD_SELECT_OPTIMISTIC}")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _typed AS {select}")
    except Exception as exc:  # an invalid line: validate every line, then type
        if "json" not in str(exc).lower():
            raise
        con.execute(f"CREATE OR REPLACE TEMP TABLE _bad AS {BAD_SELECT}")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _typed AS {select}")


def drop_temp(con) -> None:
    for name in ("_bad", "_typed"):
        con.execute(f"DROP TABLE IF EXISTS {name}")
