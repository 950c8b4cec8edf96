"""`warehouse serve`: the dashboard, a small Starlette app over the views, fully offline.

Pages are rendered on the server (Jinja2, autoescaped) with their Plotly figures as JSON;
`static/app.js` draws them with the plotly.js that the `plotly` Python package ships, served
from the installed package: nothing is loaded from a CDN. Handlers are plain functions, which
Starlette runs in its thread pool, and each one reads through :mod:`warehouse.serve.data`
(one short read-only connection per request on the file, a cursor of the one attached
lake on DuckLake). A locked warehouse is a 503 "busy" page that
retries by itself; the live run page polls `/api/runs/{run}/version` and redraws when a round,
step or timing row lands.
"""
from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from warehouse.errors import DatabaseLockedError
from warehouse.serve import data, figures

HERE = Path(__file__).parent
DEFAULT_REFRESH_S = 5.0


def create_app(url: str, refresh_s: float = DEFAULT_REFRESH_S) -> Starlette:
    """The dashboard over the warehouse at `url` (a duckdb:/// URL); nothing is opened yet."""
    pages = Pages(url, refresh_s)
    routes = [
        Route("/", pages.runs, name="runs"),
        Route("/runs/{run_id:path}/nodes/{node_id}", pages.node, name="node"),
        Route("/runs/{run_id:path}/nodes", pages.nodes, name="nodes"),
        Route("/runs/{run_id:path}", pages.run, name="run"),
        Route("/api/runs/{run_id:path}/version", pages.version, name="version"),
        Route("/compare", pages.compare, name="compare"),
        Route("/quality", pages.quality, name="quality"),
        Route("/quality/expectations", pages.expectations, name="expectations"),
        Route("/static/plotly.min.js", plotly_js, name="plotly"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)], exception_handlers={
        DatabaseLockedError: pages.busy, data.NotFoundError: pages.not_found,
        data.BadRequestError: pages.bad_request})


# Everything the pages load is the server's own (plotly.js and app.js from /static, the
# figures as inline JSON data); plotly.js writes its own <style> rules and style attributes.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
                           "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
                    (b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin")]


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every HTTP response: pages, API answers, assets and errors.

    An exception no handler took would reach Starlette's outermost error middleware, whose 500
    passes no user middleware: it is answered here instead, headers on, and raised on to be
    logged."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        started = False

        async def send_with_headers(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                named = {name for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in named]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if not started:
                await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send_with_headers)
            raise


def plotly_js(request: Request) -> Response:
    """plotly.js from the installed `plotly` package (the same file its offline HTML embeds)."""
    path = resources.files("plotly") / "package_data" / "plotly.min.js"
    return FileResponse(str(path), media_type="application/javascript",
                        headers={"Cache-Control": "max-age=86400"})


class Pages:
    """One method per page; each reads, builds figures and renders one template."""

    def __init__(self, url: str, refresh_s: float):
        from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

        self.url = url
        self.refresh_s = refresh_s
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(["html"]), undefined=StrictUndefined)
        self.env.filters["cell"] = cell
        self.env.filters["breakable"] = breakable
        self.env.filters["seconds"] = seconds
        self.env.filters["ago"] = ago
        self.env.filters["minute"] = minute
        from warehouse.config import display_name
        from warehouse.run_state import ACTIVITY_FROM

        self.env.globals["db_name"] = display_name(url)  # the file's name, or the DuckLake catalog
        self.env.globals["activity_from"] = ACTIVITY_FROM  # whose clock a last activity is

    def runs(self, request: Request) -> Response:
        q = request.query_params
        page = data.runs_page(self.url, q.get("question") or None, q.get("arm") or None,
                              q.get("kind") or None, q.get("state") or None,
                              columns=[c for c in q.getlist("col") if c], group=q.get("group") or None)
        return self.render(request, "runs.html", page=page, groups=data.GROUPS, metrics=data.RUN_METRICS,
                           lower_is_better=data.LOWER_IS_BETTER)

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        page = data.any_run_page(self.url, run_id)
        if isinstance(page, data.RmPage):
            return self.rm_run(request, page)
        charts = {f"task-{i}-{j}": fig for i, task in enumerate(page.data.tasks)
                  for j, fig in enumerate(figures.task_panels(page.data, task, page.axes))}
        charts["headline"] = figures.headline(page.data, page.axes)
        charts["phases"] = figures.phase_times(page.data, page.axes)
        shown = [m for m in data.STEP_METRICS if any(s.get(m) is not None for s in page.steps)]
        charts.update({f"step-{name}": fig for name, fig in
                       zip(data.STEP_METRICS, figures.step_metrics(page.steps, run_id, page.axes)) if name in shown})
        return self.render(request, "run.html", page=page, charts=charts, refresh_s=self.refresh_s,
                           step_metrics=shown)

    def rm_run(self, request: Request, page: data.RmPage) -> Response:
        phases = [p for p in ("exploration", "formal") if any(r["phase"] == p for r in page.data.points)]
        charts = {f"rm-{phase}": figures.rm_scores_by_progress(page.data, phase) for phase in phases}
        charts["rm-proxy-final"] = figures.rm_proxy_vs_final(page.proxy_vs_final, page.data.reference)
        from warehouse.rm_report import SECTIONS, evaluation_rows

        return self.render(request, "rm_run.html", page=page, charts=charts, sections=SECTIONS,
                           evaluations=evaluation_rows(page.data))

    def version(self, request: Request) -> Response:
        return JSONResponse({"version": data.run_version(self.url, request.path_params["run_id"])},
                            headers={"Cache-Control": "no-store"})

    def compare(self, request: Request) -> Response:
        q = request.query_params
        page = data.compare_page(self.url, q.getlist("run"), q.getlist("arm"), q.get("task") or None,
                                 data.query_int(q, "k"), models=q.getlist("model"), task_sets=q.getlist("task_set"))
        charts = {"compare": figures.compare(page)} if page.series else {}
        return self.render(request, "compare.html", page=page, charts=charts)

    def quality(self, request: Request) -> Response:
        return self.render(request, "quality.html", violations=data.violations(self.url), report=None)

    def expectations(self, request: Request) -> Response:
        """Every expectation of `warehouse check` with its result, passed ones too (the same
        run_checks; seconds, not milliseconds, so a page of its own, linked from /quality)."""
        from warehouse.quality.report import example_label

        return self.render(request, "quality.html", violations=data.violations(self.url),
                           report=data.expectations(self.url), example_label=example_label)

    def node(self, request: Request) -> Response:
        from urllib.parse import urlencode

        rnd = data.query_int(request.query_params, "round")
        part = "tokens" if request.query_params.get("part") == "tokens" else "page"
        page = data.node(self.url, request.path_params["run_id"], request.path_params["node_id"],
                         rnd if rnd is not None and rnd >= 0 else None,
                         all_tokens=request.query_params.get("tokens") == "all",
                         shade_by=request.query_params.get("shade") or "sampler", part=part)
        asked = {k: v for k, v in request.query_params.items() if k != "part"}
        every = "?" + urlencode({**asked, "tokens": "all"})  # this page, every token drawn
        if part == "tokens":  # the token section alone, which the page fetches after it shows
            return self.render(request, "node_tokens.html", node=page.node, tokens=page.tokens,
                               all_tokens_href=every)
        return self.render(request, "node.html", node=page.node, family=page.family,
                           tokens_href="?" + urlencode({**asked, "part": "tokens"}))

    def nodes(self, request: Request) -> Response:
        from urllib.parse import urlencode

        page = data.nodes_page(self.url, request.path_params["run_id"], request.query_params)
        return self.render(request, "nodes.html", page=page, urlencode=urlencode)

    def busy(self, request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"busy": True, "error": str(exc)}, status_code=503)
        return self.render(request, "busy.html", status_code=503, error=str(exc),
                           headers={"Retry-After": "2"})

    def not_found(self, request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": str(exc)}, status_code=404)
        return self.render(request, "error.html", status_code=404, error=str(exc))

    def bad_request(self, request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": str(exc)}, status_code=400)
        return self.render(request, "error.html", status_code=400, error=str(exc), heading="Bad request")

    def render(self, request: Request, template: str, status_code: int = 200,
               headers: dict | None = None, **context) -> Response:
        charts = context.get("charts", {})
        body = self.env.get_template(template).render(
            request=request, charts_json=charts_json(charts), **context)
        return HTMLResponse(body, status_code=status_code, headers=headers)


def charts_json(charts: dict) -> str:
    """The figures as JSON safe inside a <script> element (NaN as null, no '</'). Most figures
    hold no NaN or infinity: they are written as they are, and only one that does is walked
    value by value."""
    try:
        text = json.dumps(charts, default=jsonable, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere
        text = json.dumps(_finite(charts), default=jsonable, allow_nan=False)
    return text.replace("</", "<\\/")


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def jsonable(value):
    """JSON for what DuckDB returns: Decimal -> float, dates -> ISO text."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return float(value)


def breakable(name: str):
    """A column name that may wrap after its underscores (status names as table headers)."""
    from markupsafe import Markup, escape

    return Markup(str(escape(name)).replace("_", "_<wbr>"))


def cell(value) -> str:
    """A table cell as the terminal and the report write it (NULL, true/false, 4 significant digits)."""
    from warehouse.formatting import format_value

    return format_value(value)


def seconds(value) -> str:
    """A duration with its unit: 0.042 s, 3.1 s, 4 min 12 s, 2 h 05 min; NULL when absent."""
    if value is None:
        return "NULL"
    value = float(value)
    if value < 60:
        return f"{value:.3g} s"
    if value < 3600:
        return f"{int(value // 60)} min {int(value % 60):02d} s"
    return f"{int(value // 3600)} h {int(value % 3600 // 60):02d} min"


def ago(value) -> str:
    """How long before now (UTC) a naive-UTC timestamp was: "5 s ago", "3 h 02 min ago"."""
    from datetime import datetime, timezone

    if value is None or not hasattr(value, "year"):
        return ""
    delta = (datetime.now(timezone.utc).replace(tzinfo=None) - value).total_seconds()
    return f"{seconds(max(delta, 0))} ago" if delta < 86400 * 2 else f"{int(delta // 86400)} days ago"


def minute(value) -> str:
    """A timestamp to the minute (the runs table's compact form; the tooltip has the rest)."""
    return value.strftime("%Y-%m-%d %H:%M") if hasattr(value, "strftime") else "–"
