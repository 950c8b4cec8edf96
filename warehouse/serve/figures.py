"""Plotly figures (plain JSON-able dicts: no plotly import on the server) for the pages.

The per-task panels are the static report's (warehouse/report.py) drawn interactively: reward
distribution, status rates, groups with signal, response length against the cap, rewards per
round. The report's sixth panel, the step's phase times, is the run's and not a task's, so the
run page draws it once, beside the step metrics.
"""
from __future__ import annotations

from collections import Counter

from warehouse.report import PHASES, RunData
from warehouse.serve.data import COMPARE_METRICS, STEP_METRICS, ComparePage
from warehouse.vocabulary import CRASHED, NO_CODE, OK, TIMEOUT

REWARDS = ("valid_reward_mean", "draft_reward_mean", "reward_best", "reward_node_mean")
#: a colour per node status, the same in every chart (the rest take Plotly's palette)
STATUS_COLOURS = {OK: "#2ca02c", CRASHED: "#d62728", TIMEOUT: "#ff7f0e", NO_CODE: "#9467bd",
                  "idle": "#7f7f7f", "infra": "#8c564b", "NULL": "#bbbbbb"}


def task_panels(data: RunData, task: str, axes: dict | None = None) -> list[dict]:
    """The five per-task panels, in the report's order. `axes`: round -> its other x values
    (data.round_axes), so the page can redraw against global step or wall time; a point
    clicked opens the nodes behind it (the rollout browser, or the node itself)."""
    metrics = [r for r in data.task_rounds if r["task"] == task]
    nodes = [n for n in data.nodes if n["task"] == task]
    rounds = [m["round"] for m in metrics]
    link = {"url": f"/runs/{quote(data.run_id)}/nodes", "params": {"task": task}}
    rewarded = [n for n in nodes if n["reward"] is not None]
    box = {"type": "box", "x": [n["round"] for n in rewarded], "y": [n["reward"] for n in rewarded],
           "boxpoints": "all", "jitter": 0.4, "pointpos": 0, "name": "reward",
           "customdata": [[n["node_id"], n["round"]] for n in rewarded],
           "hovertemplate": "round %{customdata[1]}<br>reward %{y}<br>node %{customdata[0]}<extra></extra>"}
    return [
        _figure("reward distribution per round (click a point: its node)", "round", "reward",
                [_on_axes(box, axes, link)], rounds),
        _status_shares(nodes, axes, link),
        _figure("groups_with_signal_rate", "round", "groups with reward spread",
                [_on_axes({"type": "bar", "x": rounds, "y": [m["groups_with_signal_rate"] for m in metrics],
                           "name": "groups_with_signal_rate", "marker": {"color": "#2ca02c"}}, axes, link)],
                rounds, yrange=[0, 1.05]),
        _response_lengths(nodes, data.response_cap, link),
        _figure("rewards per round", "round", "reward",
                [_on_axes(_line(rounds, [m[c] for m in metrics], c), axes, link) for c in REWARDS], rounds,
                smooth=True),
    ]


def _status_shares(nodes: list[dict], axes: dict | None, link: dict) -> dict:
    """Each round's nodes by status, stacked: every status the round has (NULL included), so
    the bars sum to 1."""
    counts = Counter((n["round"], n["status"] or "NULL") for n in nodes)
    per_round = Counter(n["round"] for n in nodes)
    rounds = sorted(per_round)
    statuses = sorted({status for _, status in counts}, key=lambda s: (s != "ok", s))
    traces = []
    for status in statuses:
        y = [counts[r, status] / per_round[r] for r in rounds]
        trace = {"type": "bar", "x": rounds, "y": y, "name": status,
                 "marker": {"color": STATUS_COLOURS.get(status)} if status in STATUS_COLOURS else {}}
        traces.append(_on_axes(trace, axes, {**link, "params": {**link["params"], "status": status}}))
    fig = _figure("node status shares per round", "round", "fraction of nodes", traces, rounds, yrange=[0, 1.0])
    fig["layout"]["barmode"] = "stack"
    return fig


#: the gen phase's parts (round_metrics: generation_s, execution_s, gen_overlap_s, gen_other_s),
#: stacked in place of its one bar where the round's summaries give them
GEN_PARTS = ("generation", "generation ∥ execution", "execution", "gen: other")
GEN_COLOURS = {"generation": "#1f77b4", "generation ∥ execution": "#2ca02c", "execution": "#ff7f0e",
               "gen: other": "#c7c7c7"}
#: the other phases' colours, none of them one of the gen parts'
PHASE_COLOURS = {"update_weights": "#8c564b", "gen": "#1f77b4", "old_log_prob": "#9467bd", "ref": "#e377c2",
                 "adv": "#bcbd22", "update_actor": "#7f7f7f", "save_checkpoint": "#17becf"}


def phase_times(data: RunData, axes: dict | None = None) -> dict:
    """Stacked seconds per phase of each logged step. The gen phase is generation and execution
    together: where the round's summaries split it, its bar is four: generation alone, the
    seconds both ran at once, execution alone and the rest (planning, recording), each hover
    giving the whole generation and execution seconds (round_metrics)."""
    logged = [r for r in data.rounds if r["total_s"] is not None]
    steps = [r["round"] for r in logged]
    link = {"url": f"/runs/{quote(data.run_id)}/nodes", "params": {}}
    split = [r["gen_overlap_s"] is not None for r in logged]
    traces = []
    for p in PHASES:
        if p == "gen" and any(split):
            traces += [_on_axes(trace, axes, link) for trace in _gen_parts(logged, split)]
        y = [0.0 if p == "gen" and cut else r[f"{p}_s"] or 0.0 for r, cut in zip(logged, split)]  # unsplit gen
        if any(y):
            traces.append(_on_axes({"type": "bar", "x": steps, "y": y, "name": p,
                                    "marker": {"color": PHASE_COLOURS.get(p, "#d62728")}}, axes, link))
    fig = _figure("step phase times (gen split into generation and execution)" if any(split) else "step phase times",
                  "step (= round)", "seconds", traces, steps, loggable=True)
    fig["layout"]["barmode"] = "stack"
    return fig


def _gen_parts(logged: list[dict], split: list[bool]) -> list[dict]:
    """The four parts of each split gen bar (0 on the steps that are not split)."""
    def parts(r):
        overlap = r["gen_overlap_s"]
        return {"generation": r["generation_s"] - overlap, "generation ∥ execution": overlap,
                "execution": r["execution_s"] - overlap, "gen: other": r["gen_other_s"]}

    shares = [parts(r) if cut else dict.fromkeys(GEN_PARTS, 0.0) for r, cut in zip(logged, split)]
    hover = [f"gen {r['gen_s']:.3g} s: generation {r['generation_s']:.3g} s, execution {r['execution_s']:.3g} s, "
             f"both at once {r['gen_overlap_s']:.3g} s" if cut else "" for r, cut in zip(logged, split)]
    return [{"type": "bar", "x": [r["round"] for r in logged], "y": [max(s[name], 0.0) for s in shares],
             "name": name, "marker": {"color": GEN_COLOURS[name]}, "text": hover,
             "hovertemplate": f"{name} %{{y:.3g}} s<br>%{{text}}<extra></extra>", "textposition": "none"}
            for name in GEN_PARTS if any(s[name] for s in shares)]


def headline(data: RunData, axes: dict | None = None) -> dict:
    """The whole run at a glance, the run page's top chart: per round, the mean valid reward
    over its tasks and its best reward (left axis), and its valid rate (right axis, 0-1), all
    read from round_metrics."""
    rounds = [r for r in data.rounds if r["nodes"]]
    x = [r["round"] for r in rounds]
    link = {"url": f"/runs/{quote(data.run_id)}/nodes", "params": {}}
    traces = [_on_axes(_line(x, [r["valid_reward_mean"] for r in rounds], "valid_reward_mean"), axes, link),
              _on_axes(_line(x, [r["reward_best"] for r in rounds], "reward_best"), axes, link)]
    rate = _on_axes(_line(x, [r["valid_rate"] for r in rounds], "valid_rate (right axis)"), axes, link)
    rate.update({"yaxis": "y2", "line": {"dash": "dot", "color": "#2ca02c"}, "marker": {"color": "#2ca02c"}})
    fig = _figure("the run: reward and valid rate per round (mean over tasks)", "round", "reward",
                  [*traces, rate], x, smooth=True)
    if fig["data"]:
        fig["layout"]["yaxis2"] = {"title": {"text": "valid rate"}, "overlaying": "y", "side": "right",
                                   "range": [0, 1.05], "showgrid": False,
                                   "tickmode": "linear", "tick0": 0, "dtick": 0.2}
        fig["layout"]["margin"]["r"] = 55
        fig["layout"]["height"] = 320
        fig["layout"]["legend"] = {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}}
    return fig


def step_metrics(steps: list[dict], run_id: str = "", axes: dict | None = None) -> list[dict]:
    """One small chart per step metric (loss, KL, entropy, learning rate, clip fraction)."""
    x = [s["step"] for s in steps]
    link = {"url": f"/runs/{quote(run_id)}/nodes", "params": {}}
    figures = []
    for name in STEP_METRICS:
        y = [s[name] for s in steps]
        figures.append(_figure(name, "step", name, [_on_axes(_line(x, y, name), axes, link)], x, legend=False,
                               yrange=_flat_range(y), smooth=True, loggable=True))
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
                        **({"range": [min(rounds) - 0.3, max(rounds) + 0.3]} if rounds else {})},
              "meta": {"smooth": True, "loggable": True, "panels": n}}
    traces = []
    for i, metric in enumerate(COMPARE_METRICS, start=1):
        top = 1 - (i - 1) * (height + gap)
        layout["yaxis" if i == 1 else f"yaxis{i}"] = {"title": {"text": metric, "font": {"size": 11}},
                                                      "domain": [top - height, top], "anchor": "x",
                                                      "exponentformat": "e"}
        for colour, s in enumerate(page.series):
            trace = _line(s.rounds, s.values[metric], _label(s), group=s.run_id)
            trace.update({"yaxis": "y" if i == 1 else f"y{i}", "showlegend": i == 1,
                          "line": {"color": PALETTE[colour % len(PALETTE)], "dash": DASHES[colour % len(DASHES)]},
                          "marker": _marker(colour)})
            link = {"url": f"/runs/{quote(s.run_id)}/nodes", "params": {"task": page.task} if page.task else {}}
            traces.append(_on_axes(trace, s.axes, link))
    return {"data": traces, "layout": layout}


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


#: per run a marker of its own, open, and smaller for each later run: where two runs' points
#: coincide, each one's outline still shows around or inside the other's
SYMBOLS = ("circle-open", "square-open", "diamond-open", "triangle-up-open", "x-thin-open", "cross-thin-open",
           "star-open", "hexagon-open", "pentagon-open", "triangle-down-open")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _marker(k: int) -> dict:
    colour = PALETTE[k % len(PALETTE)]
    return {"color": colour, "symbol": SYMBOLS[k % len(SYMBOLS)], "size": max(14 - 2 * (k % 5), 6),
            "line": {"color": colour, "width": 2}}


def _label(series) -> str:
    return f"{series.run_id} ({series.arm})" if series.arm else series.run_id


def _response_lengths(nodes: list[dict], cap: int | None, link: dict) -> dict:
    lengths = [n["n_response_tokens"] for n in nodes if n["n_response_tokens"] is not None]
    title = "response length vs cap" if cap is not None else "response length (arm cap unknown)"
    trace = {"type": "histogram", "x": lengths, "nbinsx": 30, "name": "nodes",
             "meta": {"link": link, "bins": "tokens"}}
    fig = _figure(title, "len(response_token_ids)", "nodes", [trace])
    if cap is not None and lengths:
        fig["layout"]["shapes"] = [{"type": "line", "x0": cap, "x1": cap, "y0": 0, "y1": 1,
                                    "yref": "paper", "line": {"color": "#d62728", "dash": "dash"}}]
        fig["layout"]["annotations"] = [{"x": cap, "y": 1, "yref": "paper", "text": f"cap {cap}",
                                         "showarrow": False, "xanchor": "right", "yanchor": "top"}]
    return fig


def _on_axes(trace: dict, axes: dict | None, link: dict | None = None) -> dict:
    """The trace's x (rounds) also as global step and wall time (trace.meta.xs, which app.js
    swaps in), each point carrying its round (customdata) so a click finds its nodes. Where a
    wall time is the files' mtime, not the run's own clock, meta.wall_from says so and the
    axis title warns."""
    rounds = trace["x"]
    if "customdata" not in trace:
        trace["customdata"] = list(rounds)
    meta = trace.setdefault("meta", {})
    if link:
        meta["link"] = link
    if axes:
        meta["xs"] = {"round": list(rounds),
                      "global": [axes.get(r, {}).get("global", r) for r in rounds],
                      "wall": [axes.get(r, {}).get("wall") for r in rounds]}
        meta["wall_from"] = sorted({axes[r]["wall_from"] for r in rounds if axes.get(r, {}).get("wall_from")})
    return trace


def quote(text: str) -> str:
    from urllib.parse import quote as url_quote

    return url_quote(text, safe="")


def _line(x: list, y: list, name: str, group: str | None = None) -> dict:
    trace = {"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "name": name}
    if group:
        trace["legendgroup"] = group
    return trace


def _has_points(trace: dict) -> bool:
    values = trace.get("y") if trace.get("type") != "histogram" else trace.get("x")
    return any(v is not None for v in values or [])


def _figure(title: str, xlabel: str, ylabel: str, traces: list[dict], ticks: list | None = None,
            yrange: list | None = None, legend: bool = True, smooth: bool = False,
            loggable: bool = False) -> dict:
    """A panel. Series with no value at all are left out (a legend entry with no line); a
    panel with nothing to draw says so instead of drawing empty axes. The title is drawn by
    app.js above the plot, clear of Plotly's mode bar; y ticks are plain exponents (4e-4, not
    SI's "400μ")."""
    traces = [t for t in traces if _has_points(t)]
    xaxis = {"title": {"text": xlabel}, "exponentformat": "e"}
    if ticks and traces:
        xaxis.update({"tickmode": "linear", "dtick": 1} if len(set(ticks)) <= 20 else {"tickformat": "d"})
    yaxis = {"title": {"text": ylabel}, "exponentformat": "e"}
    if yrange:
        yaxis["range"] = yrange
    layout = {"title": {"text": title}, "xaxis": xaxis, "yaxis": yaxis,
              # the top margin holds Plotly's mode bar, so it never covers the plot or its legend
              "margin": {"l": 55, "r": 10, "t": 28, "b": 45}, "height": 290,
              "showlegend": legend and len(traces) > 1, "legend": {"font": {"size": 10}},
              "meta": {"smooth": smooth, "loggable": loggable}}
    if not traces:
        layout.update(_EMPTY)
        layout["meta"]["empty"] = True
    return {"data": traces, "layout": layout}


_EMPTY = {"xaxis": {"visible": False}, "yaxis": {"visible": False},
          "annotations": [{"text": "no rows yet", "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                           "showarrow": False, "font": {"size": 14, "color": "#888"}}]}


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
