"""The rollout browser's reads: a run's nodes filtered and paged, a node's family (parent,
siblings, children) and its response token by token.

Each function takes a connection the caller opened (:func:`warehouse.serve.data.reading`).
Filters are bound as parameters, never formatted into the SQL.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from warehouse.report import rows

PAGE_SIZE = 100
#: sort keys the browser offers -> the ORDER BY it runs (fixed text, never user input)
SORTS = {"round": '"round", "task", "line_no"', "reward": '"reward" DESC NULLS LAST, "round"',
         "-reward": '"reward" ASC NULLS LAST, "round"', "exec_time": '"exec_time" DESC NULLS LAST',
         "tokens": '"n_response_tokens" DESC NULLS LAST', "mismatch": '"mult_prob_error" DESC NULLS LAST'}
FILTERS = ("task", "round", "status", "mode", "sibling_group", "reward_min", "reward_max",
           "tokens_min", "tokens_max", "mismatch_min")


@dataclass
class NodeQuery:
    """What the browser's form asks for; every field optional."""

    task: str | None = None
    round: int | None = None
    status: str | None = None       # "NULL" selects records without a status
    mode: str | None = None
    sibling_group: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    tokens_min: int | None = None
    tokens_max: int | None = None
    mismatch_min: float | None = None  # the node's mult_prob_error (sampler vs trainer) at least this
    sort: str = "round"
    offset: int = 0

    @classmethod
    def from_params(cls, params) -> "NodeQuery":
        from warehouse.serve.params import INT32, INT64, query_int

        def num(name):
            text = (params.get(name) or "").strip()
            try:
                value = float(text) if text else None
            except ValueError:
                return None
            return value if value is None or math.isfinite(value) else None

        # an integer the warehouse's column cannot hold is a 400 (BadRequestError), not a 500
        return cls(task=params.get("task") or None, round=query_int(params, "round", INT32),
                   status=params.get("status") or None,
                   mode=params.get("mode") or None, sibling_group=params.get("sibling_group") or None,
                   reward_min=num("reward_min"), reward_max=num("reward_max"),
                   tokens_min=query_int(params, "tokens_min", INT64), tokens_max=query_int(params, "tokens_max", INT64),
                   mismatch_min=num("mismatch_min"), sort=params.get("sort") if params.get("sort") in SORTS else "round",
                   offset=max(query_int(params, "offset", (INT64[0], 2**62)) or 0, 0))

    def params(self, **change) -> dict:
        """The query as URL parameters (empty ones left out), with `change` applied."""
        values = {name: getattr(self, name) for name in (*FILTERS, "sort", "offset")}
        values.update(change)
        return {k: v for k, v in values.items() if v not in (None, "", 0) or (k == "round" and v == 0)}


@dataclass
class NodeList:
    run_id: str
    query: NodeQuery
    nodes: list[dict]
    total: int
    choices: dict[str, list] = field(default_factory=dict)  # task, round, status, mode -> values


WHERE = '''
WHERE "run_id" = ?
  AND (CAST(? AS VARCHAR) IS NULL OR "task" = ?)
  AND (CAST(? AS INTEGER) IS NULL OR "round" = ?)
  AND (CAST(? AS VARCHAR) IS NULL OR coalesce("status", 'NULL') = ?)
  AND (CAST(? AS VARCHAR) IS NULL OR "mode" = ?)
  AND (CAST(? AS VARCHAR) IS NULL OR "sibling_group" = ?)
  AND (CAST(? AS DOUBLE) IS NULL OR "reward" >= ?)
  AND (CAST(? AS DOUBLE) IS NULL OR "reward" <= ?)
  AND (CAST(? AS INTEGER) IS NULL OR "n_response_tokens" >= ?)
  AND (CAST(? AS INTEGER) IS NULL OR "n_response_tokens" <= ?)
  AND (CAST(? AS DOUBLE) IS NULL OR "mult_prob_error" >= ?)
'''
# the run's nodes with each trained node's mult_prob_error, from node_train_tokens' per-node sums
NODES = ('(SELECT n.*, tt."mult_prob_error_sum" / NULLIF(tt."compared_tokens", 0) AS "mult_prob_error" '
         'FROM "nodes" AS n LEFT JOIN "node_train_tokens" AS tt USING ("source_id", "line_no") '
         'WHERE n."run_id" = ?) AS n')


def node_list(con, run_id: str, q: NodeQuery) -> NodeList:
    params = [run_id, run_id]
    for name in FILTERS:
        params += [getattr(q, name)] * 2
    total = con.execute(f'SELECT count(*) FROM {NODES} {WHERE}', params).fetchone()[0]
    found = rows(con, f'''
        SELECT "round", "task", "node_id", "mode", "status", "reward", "exec_time", "n_response_tokens",
               "sibling_group", "parent_id", "exc_type", "test_metric", "source_id", "line_no", "mult_prob_error"
        FROM {NODES} {WHERE} ORDER BY {SORTS[q.sort]}, "source_id", "line_no" LIMIT {PAGE_SIZE} OFFSET ?''',
                 *params, q.offset)
    _parent_links(con, run_id, found)
    choices = {c: [r[0] for r in con.execute(
        f'SELECT DISTINCT {expr} FROM "nodes" WHERE "run_id" = ? ORDER BY 1', [run_id]).fetchall()]
        for c, expr in (("task", '"task"'), ("round", '"round"'), ("status", 'coalesce("status", \'NULL\')'),
                        ("mode", '"mode"'))}
    choices = {k: [v for v in vs if v is not None] for k, vs in choices.items()}
    return NodeList(run_id, q, found, total, choices)


def _parent_links(con, run_id: str, found: list[dict]) -> None:
    """Each listed node's parent run and round (node_parents), read for this page's rows only
    (the run's: node_parents reads one run's nodes when its run_id is given)."""
    keys = [(n["source_id"], n["line_no"]) for n in found if n["parent_id"]]
    links = {}
    if keys:
        marks = ", ".join("(?, ?)" for _ in keys)
        links = {(r[0], r[1]): (r[2], r[3]) for r in con.execute(
            f'SELECT "source_id", "line_no", "parent_run_id", "parent_round" FROM "node_parents" '
            f'WHERE "run_id" = ? AND ("source_id", "line_no") IN ({marks})',
            [run_id, *(v for k in keys for v in k)]).fetchall()}
    for n in found:
        n["parent_run_id"], n["parent_round"] = links.get((n["source_id"], n["line_no"]), (None, None))


# --- one node: its family and its tokens -----------------------------------------------------

def family(con, record: dict) -> dict:
    """The node's parent (through node_parents, so across a resumed run's lineage), its sibling
    group (every sibling, itself marked) and its children, each child with its own count."""
    key = (record["source_id"], record["line_no"])
    # the parent's run and round (node_parents, filtered to the record's run so it reads that
    # run's nodes), then its record by (run, round, id): a join of nodes to node_parents built
    # its hash table from every node of the warehouse
    link = rows(con, 'SELECT "parent_run_id", "parent_round" FROM "node_parents" '
                     'WHERE "run_id" = ? AND "source_id" = ? AND "line_no" = ?', record["run_id"], *key)
    parent = rows(con, '''
        SELECT "run_id", "round", "task", "node_id", "mode", "status", "reward"
        FROM "nodes" WHERE "run_id" = ? AND "round" = ? AND "node_id" = ?
        ORDER BY "source_id", "line_no" LIMIT 1''', link[0]["parent_run_id"], link[0]["parent_round"],
                  record["parent_id"]) if link and link[0]["parent_run_id"] is not None else []
    siblings = rows(con, '''
        SELECT "run_id", "round", "task", "node_id", "mode", "status", "reward", "n_response_tokens",
               "source_id" = ? AND "line_no" = ? AS "is_self"
        FROM "nodes" WHERE "run_id" = ? AND "round" = ? AND "task" = ? AND "sibling_group" = ?
        ORDER BY "line_no"''', *key, record["run_id"], record["round"], record["task"],
                    record["sibling_group"]) if record["sibling_group"] else []
    # a child lives in the node's run or in a run resumed from it: node_parents is read for
    # each of those runs by `run_id = ?`, which reaches its nodes scan (an IN list does not),
    # so the page reads what the lineage holds, not every child of the node id in the warehouse
    runs = [r["run_id"] for r in rows(con, 'SELECT "run_id" FROM "run_lineage" WHERE "ancestor_run_id" = ?',
                                        record["run_id"])] or [record["run_id"]]
    of_runs = " UNION ALL ".join('SELECT * FROM "node_parents" WHERE "run_id" = ?' for _ in runs)
    children = rows(con, f'''
        SELECT c."run_id", c."round", c."task", c."node_id", c."mode", c."status", c."reward", c."sibling_group"
        FROM ({of_runs}) AS np
        JOIN "nodes" AS c ON c."source_id" = np."source_id" AND c."line_no" = np."line_no"
        WHERE np."parent_id" = ? AND np."parent_run_id" = ? AND np."parent_round" = ?
        ORDER BY c."round", c."sibling_group", c."line_no"''', *runs, record["node_id"], record["run_id"],
                    record["round"])
    group = rows(con, 'SELECT "expansion_step", "size" FROM "sibling_groups" WHERE "run_id" = ? AND "round" = ? '
                      'AND "task" = ? AND "sibling_group" = ?', record["run_id"], record["round"], record["task"],
                 record["sibling_group"]) if record["sibling_group"] else []
    return {"parent": parent[0] if parent else None, "siblings": siblings, "children": children,
            "group": group[0] if group else None}


#: What the node page's token view can shade by (?shade=...).
SHADES = ("sampler", "trainer", "mismatch", "advantage")

# The node page draws this many tokens (a span of its own, shaded, with a tooltip, each) and
# the rest on request: a 24,576-token response drawn whole is 4 MB of HTML.
SHOWN_TOKENS = 2048


@dataclass
class Tokens:
    tokens: list[dict]          # position, token_id, logprob, prob, trainer_logprob, mismatch, text, shade (the ones drawn)
    lowest: list[dict]          # the least likely spans: start, end, logprob (sum), text
    decoded: bool               # text came from the run's tokenizer (else ids are shown)
    tokenizer: str | None       # where that tokenizer was read from
    mean_logprob: float | None = None
    shade_by: str = "sampler"   # one of SHADES
    trained: bool = False       # the node has the GRPO step's per-token record
    advantage: float | None = None
    mult_prob_error: float | None = None  # mean exp(|trainer - sampler|) over its tokens
    worst: list[dict] = field(default_factory=list)  # the worst-mismatch spans: start, end, delta (sum |d|), text
    total: int = 0              # tokens in the response; `tokens` holds the first of them


def tokens(record: dict, run: dict, spans: int = 10, shade_by: str = "sampler",
           shown: int | None = None) -> Tokens:
    """The response token by token with its sampler logprob, the trainer's where the node was
    trained, and a shade for it (`shade_by`: SHADES), the first `shown` tokens (all when None);
    over the whole response: the `spans` least likely runs of consecutive tokens whose
    probability is under one half, the `spans` worst-mismatch runs and the mean logprob."""
    ids = list(record.get("response_token_ids") or [])
    logprobs = list(record.get("response_logprobs") or [])
    trainer = list(record.get("trainer_logprobs") or [])
    advantage = record.get("advantage")
    found = find_tokenizer(run)
    texts = decode_each(str(found), tuple(ids)) if found else None
    items = []
    for i, token_id in enumerate(ids):
        lp = logprobs[i] if i < len(logprobs) else None
        tlp = trainer[i] if i < len(trainer) else None
        prob = math.exp(lp) if lp is not None and math.isfinite(lp) else None
        mismatch = math.exp(abs(tlp - lp)) if lp is not None and tlp is not None and math.isfinite(lp) else None
        items.append({"position": i, "token_id": token_id, "logprob": lp, "prob": prob, "trainer_logprob": tlp,
                      "mismatch": mismatch, "text": texts[i] if texts else f"⟨{token_id}⟩"})
    shade_by = shade_by if shade_by in SHADES else "sampler"
    for t in items[:shown]:  # only the drawn tokens get a colour (0.03 s for 21 K tokens)
        t["shade"] = token_shade(t, shade_by, advantage)
    finite = [t["logprob"] for t in items if t["prob"] is not None]
    errors = [t["mismatch"] for t in items if t["mismatch"] is not None]
    return Tokens(items[:shown] if shown is not None else items, lowest_spans(items, spans),
                  texts is not None, str(found) if found else None,
                  sum(finite) / len(finite) if finite else None, shade_by, bool(trainer), advantage,
                  sum(errors) / len(errors) if errors else None, worst_mismatch_spans(items, spans),
                  len(items))


def token_shade(t: dict, shade_by: str, advantage: float | None) -> str:
    if shade_by == "trainer":
        tlp = t["trainer_logprob"]
        return shade(math.exp(tlp) if tlp is not None else None)
    if shade_by == "mismatch":  # white where the two agree, red by |delta| up to 2 (7.4x)
        m = t["mismatch"]
        return shade(None if m is None else max(0.0, 1 - math.log(m) / 2))
    if shade_by == "advantage":  # the node's one advantage: green above 0, red below
        if advantage is None:
            return shade(None)
        light = 100 - round(45 * min(abs(advantage), 1.0))
        return f"hsl({120 if advantage > 0 else 0}, 60%, {light}%)"
    return shade(t["prob"])


def shade(prob: float | None) -> str:
    """A background colour: white for a sure token, deepening red as its probability falls."""
    if prob is None:
        return "#eeeeee"
    light = 100 - round(45 * (1 - prob))  # 55 % (p = 0) .. 100 % (p = 1) lightness
    return f"hsl(0, 85%, {light}%)"


def worst_mismatch_spans(items: list[dict], limit: int, over: float = 0.1) -> list[dict]:
    """Runs of consecutive tokens each with |trainer - sampler logprob| > `over`, the largest
    summed |delta| first; a lone token is a span of one."""
    spans, current = [], []
    for t in items + [{"mismatch": None}]:
        if t["mismatch"] is not None and math.log(t["mismatch"]) > over:
            current.append(t)
            continue
        if current:
            spans.append({"start": current[0]["position"], "end": current[-1]["position"],
                          "delta": sum(math.log(c["mismatch"]) for c in current),
                          "text": "".join(c["text"] for c in current)})
        current = []
    return sorted(spans, key=lambda s: -s["delta"])[:limit]


def lowest_spans(items: list[dict], limit: int, under: float = 0.5) -> list[dict]:
    """Runs of consecutive tokens each with probability < `under`, least likely first (by their
    summed logprob); a lone unlikely token is a span of one."""
    spans, current = [], []
    for t in items + [{"prob": None}]:
        if t["prob"] is not None and t["prob"] < under:
            current.append(t)
            continue
        if current:
            spans.append({"start": current[0]["position"], "end": current[-1]["position"],
                          "logprob": sum(c["logprob"] for c in current),
                          "text": "".join(c["text"] for c in current)})
        current = []
    return sorted(spans, key=lambda s: s["logprob"])[:limit]


def find_tokenizer(run: dict) -> Path | None:
    """The run's tokenizer.json, looked up on this machine only (never downloaded): the model
    directory train run recorded (runs.overrides.model_dir), runs.model as a directory, or the
    model id in the Hugging Face cache."""
    from warehouse.serve.details import overrides_of

    candidates = [overrides_of(run).get("model_dir"), run.get("model")]
    for c in candidates:
        if c and (Path(c).expanduser() / "tokenizer.json").is_file():
            return Path(c).expanduser() / "tokenizer.json"
    model = run.get("model") or ""
    if "/" in model and not model.startswith(("/", ".")):
        hub = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
        snapshots = sorted((hub.expanduser() / f"models--{model.replace('/', '--')}" / "snapshots").glob("*/tokenizer.json"))
        if snapshots:
            return snapshots[-1]
    return None


@lru_cache(maxsize=256)
def decode_each(tokenizer_json: str, ids: tuple) -> list[str] | None:
    """Each id's text, decoded alone (the `tokenizers` package, which transformers brings);
    None when it is not installed or the file does not load."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    try:
        tok = _load(tokenizer_json)
    except Exception:  # noqa: BLE001 - any unreadable tokenizer falls back to showing ids
        return None
    return [tok.decode([i], skip_special_tokens=False) for i in ids] if isinstance(tok, Tokenizer) else None


@lru_cache(maxsize=8)
def _load(tokenizer_json: str):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(tokenizer_json)


def prompt_messages(value) -> list:
    return json.loads(value) if isinstance(value, str) else (value or [])
