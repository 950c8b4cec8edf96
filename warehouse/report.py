"""A run report from the warehouse: one HTML page and one dashboard PNG per task.

Like the data roots' viz_dashboard images, but every number comes from the metric views
(task_round_metrics, round_metrics, run_metrics) and the lean `nodes` columns, so the report
and `warehouse metrics` can never disagree. The output directory is self-contained:
`index.html` plus the PNGs it links, to open in a browser or attach to a note.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.errors import TerminalError
from warehouse.html_table import html_table
from warehouse.run_state import life_line, read_life
from warehouse.vocabulary import CRASHED, NO_CODE, TIMEOUT
from warehouse.vocabulary import STEP_PHASES as PHASES  # the name warehouse.serve.figures imports
TASK_COLUMNS = ("round", "nodes", "valid", "valid_rate", "crash_rate", "valid_reward_mean",
                "reward_best", "groups", "groups_with_signal_rate", "mean_response_tokens",
                "resp_clip_rate", "clipped_at_cap", "complete")


class RunNotFoundError(TerminalError):
    """The run id names no run of the warehouse."""


@dataclass
class RunData:
    run_id: str
    run: dict
    task_rounds: list[dict]      # task_round_metrics rows of the run
    rounds: list[dict]           # round_metrics rows of the run
    nodes: list[dict]            # round, task, node_id, status, reward, n_response_tokens
    response_cap: int | None
    tasks: list[str] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)  # step_metrics rows (trainer runs), by step
    life: dict = field(default_factory=dict)         # run_state row: state, times, whose clock


def write_report(url: str, run_id: str, out_dir: str | Path) -> Path:
    """Write `out_dir/index.html` and its PNGs for run `run_id`; returns the index path.

    A reward-model run (data root 004) gets its own page: `warehouse.rm_report`.
    """
    if _reward_model_run(url, run_id):
        from warehouse.rm_report import write_rm_report

        return write_rm_report(url, run_id, out_dir)
    data = load_run(url, run_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images = {task: _task_dashboard(data, task, out) for task in data.tasks}
    training = _training_dashboard(data, out) if data.steps else None
    index = out / "index.html"
    index.write_text(_page(data, images, training), encoding="utf-8")
    return index


def _reward_model_run(url: str, run_id: str) -> bool:
    from warehouse.db import connect
    from warehouse.revision import require_head
    from warehouse.rm_report import is_reward_model_run

    with connect(url, read_only=True) as con:
        require_head(con, url)
        return is_reward_model_run(con, run_id)


def load_run(url: str, run_id: str) -> RunData:
    """Everything the report draws, read from the views and the lean node columns."""
    from warehouse.db import connect
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        return read_run(con, run_id)


def read_run(con, run_id: str, run: dict | None = None) -> RunData:
    """`load_run` on an open connection (the dashboard opens its own, with a short lock wait).
    `run`: the run's run_metrics row when it is read elsewhere (`run_metrics_row`; the
    dashboard reads it on a cursor of its own, at once with the rest)."""
    if run is None:
        run = run_metrics_row(con, run_id)
    task_rounds = rows(con, 'SELECT * FROM "task_round_metrics" WHERE "run_id" = ? '
                             'ORDER BY "task", "round"', run_id)
    rounds = rows(con, 'SELECT * FROM "round_metrics" WHERE "run_id" = ? ORDER BY "round"',
                   run_id)
    nodes = rows(con, 'SELECT "round", "task", "node_id", "status", "reward", "n_response_tokens" '
                       'FROM "nodes" WHERE "run_id" = ? ORDER BY "round", "task"', run_id)
    steps = rows(con, 'SELECT "step", "kl", "entropy", "lr", "loss", "clip_frac", '
                       'TRY_CAST(json_extract("extra", \'$.kl_coef\') AS DOUBLE) AS "kl_coef" '
                       'FROM "step_metrics" WHERE "run_id" = ? ORDER BY "step"', run_id)
    cap = next((r["response_cap"] for r in task_rounds if r["response_cap"] is not None), None)
    tasks = sorted({r["task"] for r in task_rounds})
    return RunData(run_id, run, task_rounds, rounds, nodes, cap, tasks, steps, read_life(con, run_id))


def run_metrics_row(con, run_id: str) -> dict:
    """The run's run_metrics row; RunNotFoundError when it has none."""
    run = rows(con, 'SELECT * FROM "run_metrics" WHERE "run_id" = ?', run_id)
    if not run:
        raise RunNotFoundError(
            f"no run {run_id!r} in the warehouse. List runs with "
            "'warehouse metrics --view run_metrics'."
        )
    return run[0]


def rows(con, sql: str, *params) -> list[dict]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


# --- the per-task dashboard ----------------------------------------------------------------

def _task_dashboard(data: RunData, task: str, out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [r for r in data.task_rounds if r["task"] == task]
    nodes = [n for n in data.nodes if n["task"] == task]
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    _plot_rewards(axes[0][0], nodes)
    _plot_rates(axes[0][1], metrics)
    _plot_signal(axes[0][2], metrics)
    _plot_response_lengths(axes[1][0], nodes, data.response_cap)
    _plot_reward_means(axes[1][1], metrics)
    _plot_phases(axes[1][2], data.rounds)
    fig.suptitle(f"{data.run_id} / {task}")
    fig.tight_layout()
    name = f"dashboard_{_safe(task)}.png"
    fig.savefig(out / name, dpi=80)
    plt.close(fig)
    return name


def _plot_rewards(ax, nodes: list[dict]) -> None:
    rounds = sorted({n["round"] for n in nodes})
    series = [[n["reward"] for n in nodes if n["round"] == r and n["reward"] is not None]
              for r in rounds]
    if any(series):
        ax.boxplot(series, positions=list(range(len(rounds))), widths=0.6)
        for i, values in enumerate(series):
            ax.scatter([i] * len(values), values, s=8, alpha=0.5)
        ax.set_xticks(range(len(rounds)), [str(r) for r in rounds])
    _labels(ax, "reward distribution per round", "round", "reward")


def _plot_rates(ax, metrics: list[dict]) -> None:
    rounds = [m["round"] for m in metrics]
    for column, label in (("valid_rate", "valid"), ("crash_rate", CRASHED),
                          ("no_code_rate", NO_CODE), ("timeout_rate", TIMEOUT)):
        ax.plot(rounds, [_nan(m[column]) for m in metrics], marker="o", label=label)
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    _labels(ax, "status rates per round", "round", "fraction of nodes", rounds)


def _plot_signal(ax, metrics: list[dict]) -> None:
    rounds = [m["round"] for m in metrics]
    ax.bar(rounds, [_nan(m["groups_with_signal_rate"]) for m in metrics], color="tab:green")
    ax.set_ylim(0, 1.05)
    _labels(ax, "groups_with_signal_rate", "round", "groups with reward spread", rounds)


def _plot_response_lengths(ax, nodes: list[dict], cap: int | None) -> None:
    lengths = [n["n_response_tokens"] for n in nodes if n["n_response_tokens"] is not None]
    if lengths:
        ax.hist(lengths, bins=30, color="tab:blue")
    if cap is not None:
        ax.axvline(cap, color="tab:red", linestyle="--", label=f"response cap {cap}")
        ax.legend(fontsize=8)
    title = "response length vs cap" if cap is not None else "response length (arm cap unknown)"
    _labels(ax, title, "len(response_token_ids)", "nodes")


def _plot_reward_means(ax, metrics: list[dict]) -> None:
    rounds = [m["round"] for m in metrics]
    for column in ("valid_reward_mean", "draft_reward_mean", "reward_best", "reward_node_mean"):
        ax.plot(rounds, [_nan(m[column]) for m in metrics], marker="o", label=column)
    ax.legend(fontsize=8)
    _labels(ax, "rewards per round", "round", "reward", rounds)


def _plot_phases(ax, rounds: list[dict]) -> None:
    logged = [r for r in rounds if r["total_s"] is not None]
    bottom = [0.0] * len(logged)
    steps = [r["round"] for r in logged]
    for phase in PHASES:
        values = [r[f"{phase}_s"] or 0.0 for r in logged]
        if any(values):
            ax.bar(steps, values, bottom=bottom, label=phase)
            bottom = [b + v for b, v in zip(bottom, values)]
    if logged:
        ax.legend(fontsize=7)
    title = "step phase times" if logged else "step phase times (no timing rows)"
    _labels(ax, title, "step (= round)", "seconds", steps)


def _labels(ax, title: str, xlabel: str, ylabel: str, ticks: list | None = None) -> None:
    """Title and axis labels; `ticks`: the rounds or steps on x (integers, never 0.5)."""
    from matplotlib.ticker import MaxNLocator

    if ticks is not None:
        if len(ticks) <= 20:
            ax.set_xticks(ticks)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _nan(value):
    return float("nan") if value is None else value


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


# --- the training steps (trainer runs) -----------------------------------------------------

def _training_dashboard(data: RunData, out: Path) -> str:
    """KL (and the coefficient in force), entropy, learning rate and valid rate per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [s["step"] for s in data.steps]
    valid = _round_valid_rates(data)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    axes[0].plot(steps, [_nan(s["kl"]) for s in data.steps], marker="o", label="KL (k3, token mean)")
    if any(s["kl_coef"] is not None for s in data.steps):
        twin = axes[0].twinx()
        twin.plot(steps, [_nan(s["kl_coef"]) for s in data.steps], color="tab:gray", linestyle="--",
                  marker=".", label="kl_coef")
        twin.set_ylabel("kl_coef")
        twin.legend(fontsize=8, loc="upper right")
    axes[0].legend(fontsize=8, loc="upper left")
    _labels(axes[0], "KL to the reference", "step", "KL", steps)
    axes[1].plot(steps, [_nan(s["entropy"]) for s in data.steps], marker="o", color="tab:purple")
    _labels(axes[1], "entropy", "step", "nats per token", steps)
    axes[2].plot(steps, [_nan(s["lr"]) for s in data.steps], marker="o", color="tab:orange")
    _labels(axes[2], "learning rate", "step", "lr", steps)
    axes[3].plot(steps, [_nan(valid.get(s)) for s in steps], marker="o", color="tab:green")
    axes[3].set_ylim(-0.05, 1.05)
    _labels(axes[3], "valid rate of the step's round", "step (= round)", "valid nodes / nodes", steps)
    fig.suptitle(f"{data.run_id} / training steps")
    fig.tight_layout()
    name = "training_steps.png"
    fig.savefig(out / name, dpi=80)
    plt.close(fig)
    return name


def _round_valid_rates(data: RunData) -> dict:
    """round -> valid nodes / nodes over every task (task_round_metrics' valid / nodes, summed)."""
    sums: dict = {}
    for r in data.task_rounds:
        valid, nodes = sums.get(r["round"], (0, 0))
        sums[r["round"]] = (valid + (r["valid"] or 0), nodes + (r["nodes"] or 0))
    return {k: v / n if n else None for k, (v, n) in sums.items()}


# --- the page ------------------------------------------------------------------------------

def _page(data: RunData, images: dict[str, str], training: str | None = None) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Run report: {esc(data.run_id)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "img{max-width:100%}</style></head><body>",
        f"<h1>Run {esc(data.run_id)}</h1>",
        life_line(data.life),
        "<h2>Run metrics</h2>",
        html_table(list(data.run), [data.run]),
    ]
    if training:
        parts += ["<h2 id='training'>Training steps</h2>",
                  f"<img src='{esc(training)}' alt='KL, entropy, learning rate and valid rate per step'>",
                  html_table(["step", "loss", "kl", "kl_coef", "entropy", "lr", "clip_frac"], data.steps)]
    for task in data.tasks:
        rows = [r for r in data.task_rounds if r["task"] == task]
        parts += [f"<h2 id='{esc(_safe(task))}'>{esc(task)}</h2>",
                  f"<img src='{esc(images[task])}' alt='dashboard of {esc(task)}'>",
                  html_table(list(TASK_COLUMNS), rows)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


