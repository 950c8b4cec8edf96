"""Run the suites against a warehouse and collect one outcome per expectation.

DuckDB builds the lean frames (see `frames`); Great Expectations validates them through
its pandas datasource in an in-memory (ephemeral) context: GE 1.24's SQL datasource over
duckdb_engine fails with `MetricResolutionError: list index out of range`, so it is not
used (the package docstring says more). `--docs DIR` adds a Data Docs site at DIR.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.quality.frames import FRAMES, KEY_COLUMNS
from warehouse.quality.suites import Suite, get_suites

DOCS_SITE = "warehouse_check"


@dataclass
class Outcome:
    """One expectation's verdict: how many rows offend, and some of them by key."""

    suite: str
    check_no: int
    expectation: str
    description: str
    success: bool
    unexpected_count: int
    examples: list[dict] = field(default_factory=list)  # KEY_COLUMNS of offending rows
    error: str | None = None  # GE could not evaluate the expectation


@dataclass
class CheckReport:
    outcomes: list[Outcome]
    run: str | None = None
    docs_index: str | None = None

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.success]


def run_checks(url: str, run: str | None = None, suite: str | None = None,
               docs_dir: str | Path | None = None, examples: int | None = 5) -> CheckReport:
    """Validate the warehouse at `url` (optionally one run, one suite).

    `examples` caps the offending rows listed per expectation; None lists all of them.
    """
    suites = get_suites(suite)
    frames = load_frames(url, run, {s.frame for s in suites})
    outcomes = validate_frames(frames, suites, examples, docs_dir)
    docs_index = str(Path(docs_dir).resolve() / "index.html") if docs_dir is not None else None
    return CheckReport(outcomes, run, docs_index)


def validate_frames(frames: dict, suites: list[Suite], examples: int | None = 5,
                    docs_dir: str | Path | None = None) -> list[Outcome]:
    """Run each suite over its frame (`frames[suite.frame]`), in one GE context."""
    context = _context(docs_dir)
    outcomes: list[Outcome] = []
    for s in suites:
        result = _validate(context, s, frames[s.frame], examples, docs=docs_dir is not None)
        outcomes.extend(_outcomes(s, result))
    outcomes.sort(key=lambda o: o.check_no)  # stable: GE's order within a check
    return outcomes


def load_frames(url: str, run: str | None, names) -> dict:
    """The named frames, read in one short read-only DuckDB session."""
    from warehouse.db import connect
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        if run is not None:
            _require_run(con, run)
        return {name: FRAMES[name](con, run) for name in names}


def _require_run(con, run: str) -> None:
    from warehouse.errors import TerminalError

    known = con.execute(
        'SELECT count(*) FROM (SELECT "run_id" FROM "runs" UNION SELECT "run_id" FROM "nodes" '
        'UNION SELECT "run_id" FROM "steps") WHERE "run_id" = ?', [run]).fetchall()[0][0]
    if not known:
        raise TerminalError(f"no run {run!r} in the warehouse. List runs with "
                            "'warehouse sql \"SELECT run_id FROM runs\"'.")


def _context(docs_dir):
    """An in-memory GE context: no files, no usage statistics, no progress bars."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig, InMemoryStoreBackendDefaults, ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    context = gx.get_context(mode="ephemeral", project_config=config)
    if docs_dir is not None:
        Path(docs_dir).mkdir(parents=True, exist_ok=True)
        context.add_data_docs_site(site_name=DOCS_SITE, site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": str(Path(docs_dir).resolve())},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        })
    return context


def _result_format(examples: int | None) -> dict:
    if examples is None:
        return {"result_format": "COMPLETE", "unexpected_index_column_names": KEY_COLUMNS}
    return {"result_format": "SUMMARY", "unexpected_index_column_names": KEY_COLUMNS,
            "partial_unexpected_count": max(examples, 1)}


def _validate(context, suite: Suite, frame, examples: int | None, docs: bool):
    """Run one suite over its frame through a checkpoint; the suite's validation result."""
    import great_expectations as gx

    source = context.data_sources.add_or_update_pandas("warehouse")
    batch = source.add_dataframe_asset(suite.name).add_batch_definition_whole_dataframe("all")
    gx_suite = context.suites.add(gx.ExpectationSuite(name=suite.name, expectations=suite.build()))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=suite.name, data=batch, suite=gx_suite))
    actions = [gx.checkpoint.UpdateDataDocsAction(name="docs", site_names=[DOCS_SITE])] if docs else []
    checkpoint = context.checkpoints.add(gx.Checkpoint(
        name=suite.name, validation_definitions=[definition], actions=actions,
        result_format=_result_format(examples)))
    result = checkpoint.run(batch_parameters={"dataframe": frame})
    return next(iter(result.run_results.values()))


def _outcomes(suite: Suite, validation) -> list[Outcome]:
    outcomes = []
    for r in validation.results:
        config = r.expectation_config
        outcomes.append(Outcome(
            suite=suite.name,
            check_no=int(config.meta["check_no"]),
            expectation=config.type,
            description=config.description or config.type,
            success=bool(r.success),
            unexpected_count=int(r.result.get("unexpected_count") or 0),
            examples=_examples(r.result),
            error=_error(r),
        ))
    return outcomes


def _examples(result: dict) -> list[dict]:
    rows = result.get("unexpected_index_list")
    if rows is None:
        rows = result.get("partial_unexpected_index_list") or []
    return [{k: _plain(row.get(k)) for k in KEY_COLUMNS} for row in rows]


def _plain(value):
    """numpy scalars and NaN as plain Python values (int, str, None)."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return None if math.isnan(value) else (int(value) if value.is_integer() else value)
    return value


def _error(result) -> str | None:
    info = result.exception_info or {}
    infos = [info] if "raised_exception" in info else list(info.values())
    for item in infos:
        if isinstance(item, dict) and item.get("raised_exception"):
            return str(item.get("exception_message") or "expectation raised an error")
    return None
