"""Plotly figures (plain JSON-able dicts: no plotly import on the server) for the pages.

The per-task panels are the static report's (warehouse/report.py) drawn interactively: reward
distribution, status rates, groups with signal, response length against the cap, rewards per
round. The report's sixth panel, the step's phase times, is the run's and not a task's, so the
run page draws it once, beside the step metrics.
"""
from __future__ import annotations

from warehouse.report import PHASES, RunData
from warehouse.serve.data import COMPARE_METRICS, STEP_METRICS, ComparePage

RATES = (("valid_rate", "valid"), ("crash_rate", "crashed"), ("no_code_rate", "no_code"),
         ("timeout_rate", "timeout"))
REWARDS = ("valid_reward_mean", "draft_reward_mean", "reward_best", "reward_node_mean")


def task_panels(data: RunData, task: str) -> list[dict]:
    """The five per-task panels, in the report's order."""
    metrics = [r for r in data.task_rounds if r["task"] == task]
    nodes = [n for n in data.nodes if n["task"] == task]
    rounds = [m["round"] for m in metrics]
    return [
        _figure("reward distribution per round", "round", "reward", [{
            "type": "box", "x": [n["round"] for n in nodes if n["reward"] is not None],
            "y": [n["reward"] for n in nodes if n["reward"] is not None],
            "boxpoints": "all", "jitter": 0.4, "pointpos": 0, "name": "reward"}], rounds),
        _figure("status rates per round", "round", "fraction of nodes",
                [_line(rounds, [m[c] for m in metrics], label) for c, label in RATES], rounds,
                yrange=[-0.05, 1.05]),
        _figure("groups_with_signal_rate", "round", "groups with reward spread",
                [{"type": "bar", "x": rounds, "y": [m["groups_with_signal_rate"] for m in metrics],
                  "name": "groups_with_signal_rate", "marker": {"color": "#2ca02c"}}], rounds,
                yrange=[0, 1.05]),
        _response_lengths(nodes, data.response_cap),
        _figure("rewards per round", "round", "reward",
                [_line(rounds, [m[c] for m in metrics], c) for c in REWARDS], rounds),
    ]


def phase_times(data: RunData) -> dict:
    """Stacked seconds per phase of each logged step."""
    logged = [r for r in data.rounds if r["total_s"] is not None]
    steps = [r["round"] for r in logged]
    traces = [{"type": "bar", "x": steps, "y": [r[f"{p}_s"] or 0.0 for r in logged], "name": p}
              for p in PHASES if any(r[f"{p}_s"] for r in logged)]
    title = "step phase times" if logged else "step phase times (no timing rows yet)"
    fig = _figure(title, "step (= round)", "seconds", traces, steps)
    fig["layout"]["barmode"] = "stack"
    return fig


def step_metrics(steps: list[dict]) -> list[dict]:
    """One small chart per step metric (loss, KL, entropy, learning rate, clip fraction)."""
    x = [s["step"] for s in steps]
    figures = []
    for name in STEP_METRICS:
        y = [s[name] for s in steps]
        figures.append(_figure(name, "step", name, [_line(x, y, name)], x, legend=False, yrange=_flat_range(y)))
    return figures


def _flat_range(values: list) -> list | None:
    """A range around a constant non-zero series (a fixed learning rate): Plotly's own is
    [-1, 1] there, which draws 3e-3 on the zero line."""
    finite = {v for v in values if v is not None}
    if len(finite) != 1 or not next(iter(finite)):
        return None
    v = next(iter(finite))
    return [v - abs(v) / 2, v + abs(v) / 2]


def compare(page: ComparePage) -> dict:
    """One figure: a panel per metric stacked on ONE shared round axis, every picked run a
    line of the same colour in each panel, one legend."""
    rounds = sorted({r for s in page.series for r in s.rounds})
    n = len(COMPARE_METRICS)
    gap = 0.03
    height = (1 - gap * (n - 1)) / n
    layout = {"height": 180 * n + 80, "margin": {"l": 70, "r": 20, "t": 30, "b": 45},
              "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}},
              "hovermode": "x unified",
              "xaxis": {"title": {"text": "round"}, "anchor": f"y{n}",
                        **({"tickmode": "linear", "dtick": 1} if len(rounds) <= 20 else {"tickformat": "d"}),
                        **({"range": [min(rounds) - 0.3, max(rounds) + 0.3]} if rounds else {})}}
    traces = []
    for i, metric in enumerate(COMPARE_METRICS, start=1):
        top = 1 - (i - 1) * (height + gap)
        layout["yaxis" if i == 1 else f"yaxis{i}"] = {"title": {"text": metric, "font": {"size": 11}},
                                                      "domain": [top - height, top], "anchor": "x"}
        for colour, s in enumerate(page.series):
            trace = _line(s.rounds, s.values[metric], _label(s), group=s.run_id)
            trace.update({"yaxis": "y" if i == 1 else f"y{i}", "showlegend": i == 1,
                          "line": {"color": PALETTE[colour % len(PALETTE)]},
                          "marker": {"color": PALETTE[colour % len(PALETTE)]}})
            traces.append(trace)
    return {"data": traces, "layout": layout}


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def _label(series) -> str:
    return f"{series.run_id} ({series.arm})" if series.arm else series.run_id


def _response_lengths(nodes: list[dict], cap: int | None) -> dict:
    lengths = [n["n_response_tokens"] for n in nodes if n["n_response_tokens"] is not None]
    title = "response length vs cap" if cap is not None else "response length (arm cap unknown)"
    fig = _figure(title, "len(response_token_ids)", "nodes",
                  [{"type": "histogram", "x": lengths, "nbinsx": 30, "name": "nodes"}])
    if cap is not None:
        fig["layout"]["shapes"] = [{"type": "line", "x0": cap, "x1": cap, "y0": 0, "y1": 1,
                                    "yref": "paper", "line": {"color": "#d62728", "dash": "dash"}}]
        fig["layout"]["annotations"] = [{"x": cap, "y": 1, "yref": "paper", "text": f"cap {cap}",
                                         "showarrow": False, "xanchor": "right", "yanchor": "top"}]
    return fig


def _line(x: list, y: list, name: str, group: str | None = None) -> dict:
    trace = {"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "name": name}
    if group:
        trace["legendgroup"] = group
    return trace


def _figure(title: str, xlabel: str, ylabel: str, traces: list[dict], ticks: list | None = None,
            yrange: list | None = None, legend: bool = True) -> dict:
    xaxis = {"title": {"text": xlabel}}
    if ticks is not None:
        xaxis.update({"tickmode": "linear", "dtick": 1} if len(set(ticks)) <= 20 else {"tickformat": "d"})
    yaxis = {"title": {"text": ylabel}}
    if yrange:
        yaxis["range"] = yrange
    # the title sits left, clear of the mode bar (zoom, pan, PNG) at the top right
    layout = {"title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
              "xaxis": xaxis, "yaxis": yaxis,
              "margin": {"l": 55, "r": 10, "t": 40, "b": 45}, "height": 300,
              "showlegend": legend and len(traces) > 1, "legend": {"font": {"size": 10}}}
    return {"data": traces, "layout": layout}


# --- reward-model runs ----------------------------------------------------------------------

SPLIT_DASH = {"proxy": "dash", "proxy_rows": "dot", "full": "solid"}


def rm_scores_by_progress(data, phase: str) -> dict:
    """Score against progress for each (job, split) of one phase, +/- 1 SE, the reference line."""
    from warehouse.rm_report import job_series

    traces = [{"type": "scatter", "mode": "lines+markers", "name": f"{job} ({split})",
               "x": [p["progress"] for p in points], "y": [p["score"] for p in points],
               "error_y": {"type": "data", "array": [p["se"] or 0 for p in points], "visible": True},
               "line": {"dash": SPLIT_DASH.get(split, "solid")}}
              for (job, split), points in job_series(data.points, phase).items()]
    fig = _figure(f"{phase}: score by progress (± 1 SE)", "progress (optimizer steps)", "score", traces)
    _reference_line(fig, data.reference)
    return fig


def rm_proxy_vs_final(pairs: list[dict], reference: dict | None) -> dict:
    """Each artifact scored on the proxy rows (x) and on the full final split (y), with the
    y = x diagonal: above it, the final beat the proxy."""
    points = [p for p in pairs if p["proxy_score"] is not None and p["final_score"] is not None]
    scores = [v for p in points for v in (p["proxy_score"], p["final_score"])]
    traces = [{"type": "scatter", "mode": "markers+text", "name": "artifact",
               "x": [p["proxy_score"] for p in points], "y": [p["final_score"] for p in points],
               "text": [f"{p['job']} @ {p['progress']}" for p in points], "textposition": "top center",
               "error_x": {"type": "data", "array": [p["proxy_se"] or 0 for p in points], "visible": True},
               "error_y": {"type": "data", "array": [p["final_se"] or 0 for p in points], "visible": True}}]
    if scores:
        lo, hi = min(scores) - 5, max(scores) + 5
        traces.append({"type": "scatter", "mode": "lines", "name": "final = proxy", "x": [lo, hi], "y": [lo, hi],
                       "line": {"color": "#999", "dash": "dot"}, "hoverinfo": "skip"})
    fig = _figure("proxy against final (± 1 SE)", "proxy score", "final score (full split)", traces)
    _reference_line(fig, reference)
    return fig


def _reference_line(fig: dict, reference: dict | None) -> None:
    if not reference or reference.get("score") is None:
        return
    score = reference["score"]
    fig["layout"]["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": score, "y1": score,
                                "line": {"color": "#d62728", "dash": "dashdot"}}]
    fig["layout"]["annotations"] = [{"xref": "paper", "x": 1, "y": score, "text": f"reference {score:g}",
                                     "showarrow": False, "xanchor": "right", "yanchor": "bottom",
                                     "font": {"color": "#d62728"}}]
