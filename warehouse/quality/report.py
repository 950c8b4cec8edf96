"""Render a `CheckReport` as a table (people) or JSON (machines)."""
from __future__ import annotations

import json
from dataclasses import asdict

from warehouse.quality.runner import CheckReport, Outcome


def render_report(report: CheckReport, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(report_dict(report), indent=2, ensure_ascii=False) + "\n"
    return _table(report) + _verdict(report)


def report_dict(report: CheckReport) -> dict:
    return {"success": report.success, "run": report.run, "docs_index": report.docs_index,
            "expectations": [asdict(o) for o in report.outcomes]}


def example_label(example: dict) -> str:
    """`run round N task node`, leaving out what the row does not have."""
    parts = [example["run_id"]]
    if example["round"] is not None:
        parts.append(f"round {example['round']}")
    parts += [v for v in (example["task"], example["node_id"]) if v is not None]
    return " ".join(str(p) for p in parts)


def _result(outcome: Outcome) -> str:
    if outcome.error:
        return f"ERROR: {outcome.error}"
    return "pass" if outcome.success else "FAIL"


def _table(report: CheckReport) -> str:
    from warehouse.query import Result
    from warehouse.terminal import render

    rows = [(o.check_no, o.suite, o.description.split(") ", 1)[-1], _result(o),
             o.unexpected_count, "; ".join(example_label(e) for e in o.examples))
            for o in report.outcomes]
    return render(Result(["check", "suite", "expectation", "result", "rows", "examples"], rows),
                  "table")


def _verdict(report: CheckReport) -> str:
    docs = f"\nData Docs: {report.docs_index}" if report.docs_index else ""
    if report.success:
        return f"PASSED: all {len(report.outcomes)} expectations hold.{docs}\n"
    failed = report.failed
    numbers = sorted({o.check_no for o in failed})
    checks = ", ".join(str(n) for n in numbers)
    views = [view for view, wanted in (("invariant_violations", any(n < 10 for n in numbers)),
                                       ("rm_violations", any(10 <= n <= 15 for n in numbers)),
                                       ("logprob_mismatch", 16 in numbers)) if wanted]
    where = " and ".join(f'warehouse sql "SELECT * FROM {v}"' for v in views)
    return (f"FAILED: {len(failed)} of {len(report.outcomes)} expectations (invariants {checks}). "
            f"Every offending row: {where}.{docs}\n")
