"""The report of a reward-model run (data root 004): one HTML page and its score-by-progress plot.

Every number comes from the reward-model views (rm_scores_by_progress, rm_best_final,
rm_exploration_vs_formal, rm_budget_use) and the rm tables, so the page and a SQL query can
never disagree. The plot draws each evaluation series (run, job, split) as score against
progress with its standard error as error bars, proxy and final apart, and the run's
reference as a horizontal line; exploration and formal progress differ by orders of
magnitude, so each phase has its own panel on a shared score axis.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.errors import TerminalError
from warehouse.html_table import html_table
from warehouse.run_state import life_line, read_life, read_run_row
from warehouse.vocabulary import RM_JOB_FIELDS

SECTIONS = ("Chat", "Chat Hard", "Safety", "Reasoning")
PLOT = "scores_by_progress.png"
SPLIT_STYLE = {"proxy": ("o", "--"), "proxy_rows": ("s", ":"), "full": ("D", "-")}


@dataclass
class RmRunData:
    run_id: str
    run: dict
    points: list[dict]        # rm_scores_by_progress rows of the run
    sections: list[dict]      # evaluation_id, section, score
    best: list[dict]          # rm_best_final (0 or 1 row)
    survival: list[dict]      # rm_exploration_vs_formal rows
    budgets: list[dict]       # rm_budget_use rows
    jobs: list[dict]          # rm_jobs rows
    reference: dict | None    # rm_references row
    life: dict = field(default_factory=dict)  # run_state row: state, times, whose clock


def is_reward_model_run(con, run_id: str) -> bool:
    has_rows = con.execute('SELECT count(*) FROM "rm_runs" WHERE "run_id" = ?',
                           [run_id]).fetchone()[0]
    return bool(has_rows) or read_run_row(con, run_id).get("kind") == "reward_model"


def write_rm_report(url: str, run_id: str, out_dir: str | Path) -> Path:
    """Write `out_dir/index.html` and its plot for reward-model run `run_id`."""
    data = load_rm_run(url, run_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_scores(data, out / PLOT)
    index = out / "index.html"
    index.write_text(_page(data), encoding="utf-8")
    return index


def load_rm_run(url: str, run_id: str) -> RmRunData:
    from warehouse.db import connect
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        return read_rm_run(con, run_id)


def read_rm_run(con, run_id: str) -> RmRunData:
    """`load_rm_run` on an open connection (the dashboard opens its own, with a short lock wait)."""
    run = _rows(con, 'SELECT r.*, rr."task", rr."agent", rr."base_model", rr."train_pairs", '
                     'rr."reference_id" FROM "runs" AS r LEFT JOIN "rm_runs" AS rr USING '
                     '("run_id") WHERE r."run_id" = ?', run_id)
    if not run:
        raise TerminalError(f"no run {run_id!r} in the warehouse. List reward-model runs "
                            "with 'warehouse sql \"SELECT run_id FROM rm_runs\"'.")
    reference = _rows(con, 'SELECT * FROM "rm_references" WHERE "reference_id" = ?',
                      run[0]["reference_id"])
    return RmRunData(
        run_id, run[0],
        _rows(con, 'SELECT * FROM "rm_scores_by_progress" WHERE "run_id" = ? '
                   'ORDER BY "phase", "job", "split", "progress"', run_id),
        _rows(con, 'SELECT "evaluation_id", "section", "score" FROM "rm_eval_sections" '
                   'WHERE "run_id" = ?', run_id),
        _rows(con, 'SELECT * FROM "rm_best_final" WHERE "run_id" = ?', run_id),
        _rows(con, 'SELECT * FROM "rm_exploration_vs_formal" WHERE "run_id" = ? '
                   'ORDER BY "exploration_evaluation_id"', run_id),
        _rows(con, 'SELECT * FROM "rm_budget_use" WHERE "run_id" = ? ORDER BY "phase"', run_id),
        _rows(con, 'SELECT * FROM "rm_jobs" WHERE "run_id" = ? ORDER BY "source_id", '
                   '"line_no"', run_id),
        reference[0] if reference else None, read_life(con, run_id))


def _rows(con, sql: str, *params) -> list[dict]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


# --- the plot ------------------------------------------------------------------------------

def plot_scores(data: RmRunData, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = score_figure(data)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def score_figure(data: RmRunData):
    """Score by progress with error bars, one panel per phase, the reference as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = [p for p in ("exploration", "formal") if any(r["phase"] == p for r in data.points)]
    fig, axes = plt.subplots(1, max(len(phases), 1), figsize=(7 * max(len(phases), 1), 5),
                             sharey=True, squeeze=False)
    for ax, phase in zip(axes[0], phases or ["(no evaluations)"]):
        for (job, split), points in job_series(data.points, phase).items():
            marker, line = SPLIT_STYLE.get(split, ("o", "-"))
            ax.errorbar([p["progress"] for p in points], [p["score"] for p in points],
                        yerr=[p["se"] or 0 for p in points], marker=marker, linestyle=line,
                        capsize=3, label=f"{job} ({split})")
        if data.reference:
            ax.axhline(data.reference["score"], color="tab:red", linestyle="-.",
                       label=f"reference {data.reference['score']:g}")
        ax.set_title(f"{phase}: score by progress (+/- 1 SE)")
        ax.set_xlabel("progress (optimizer steps)")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("score")
    fig.suptitle(data.run_id, fontsize=9)
    fig.tight_layout()
    return fig


def job_series(points: list[dict], phase: str) -> dict[tuple, list[dict]]:
    series: dict[tuple, list[dict]] = {}
    for p in points:
        if p["phase"] == phase and p["score"] is not None and p["progress"] is not None:
            series.setdefault((p["job"], p["split"]), []).append(p)
    return series


# --- the page ------------------------------------------------------------------------------

EVALUATION_COLUMNS = ("evaluation_id", "phase", "job", "progress", "split", "evaluator", "n",
                      "score", "se", "official", "trend", *SECTIONS)
# a job's record fields but the plan, the seed and the notes
JOB_COLUMNS = tuple(f.key for f in RM_JOB_FIELDS if f.key not in ("steps_planned", "seed", "notes"))


def _page(data: RmRunData) -> str:
    esc = html.escape
    run = data.run
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Reward-model run: {esc(data.run_id)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "font-size:12px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:right}img{max-width:100%}</style></head><body>",
        f"<h1>Reward-model run {esc(data.run_id)}</h1>",
        life_line(data.life),
        f"<p>task {esc(str(run.get('task')))}, base model {esc(str(run.get('base_model')))}, "
        f"{esc(str(run.get('train_pairs')))} training pairs, agent {esc(str(run.get('agent')))}</p>",
        "<h2>Best official final score against the reference</h2>",
        _rm_table(["evaluation_id", "progress", "score", "se", "n", "reference_score", "gap",
                "ratio", "official_finals"], data.best),
        "<h2>Scores by progress</h2>",
        f"<img src='{PLOT}' alt='score by progress, proxy and final, with error bars'>",
        "<h2>Evaluations and section scores</h2>",
        _rm_table(list(EVALUATION_COLUMNS), evaluation_rows(data)),
        "<h2>Exploration proxy against the formal artifact's proxy-row diagnostic</h2>",
        _rm_table(["exploration_evaluation_id", "submitted", "exploration_best",
                "exploration_score", "exploration_se", "formal_evaluation_id", "formal_score",
                "formal_se", "delta", "survived"], data.survival),
        "<h2>Budget</h2>",
        _rm_table(["phase", "wall_clock_s", "reserve_s", "usable_s", "train_s", "elapsed_s",
                "budget_use", "stop_reason", "steps", "members", "steps_per_member",
                "snapshots_published", "snapshots_retained"], data.budgets),
        "<h2>Training jobs</h2>",
        _rm_table(list(JOB_COLUMNS), data.jobs),
        "</body></html>",
    ]) + "\n"


def evaluation_rows(data: RmRunData) -> list[dict]:
    by_eval: dict[str, dict] = {}
    for s in data.sections:
        by_eval.setdefault(s["evaluation_id"], {})[s["section"]] = s["score"]
    return [{**p, **{name: by_eval.get(p["evaluation_id"], {}).get(name) for name in SECTIONS}}
            for p in data.points]


def _rm_table(columns: list[str], rows: list[dict]) -> str:
    return html_table(columns, rows, digits=6)
