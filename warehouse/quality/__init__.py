"""The data-quality gate: docs/metrics.md's nine invariants as Great Expectations suites.

* `invariants`: the nine invariants, numbered as docs/metrics.md numbers them.
* `suites`: the expectation suites, kept as code, one per table family.
* `frames`: the lean DataFrames the suites validate, produced by DuckDB.
* `runner`: `run_checks(url, ...)` runs the suites and returns a `CheckReport`.
* `cli`: the `warehouse check` command.

Why Great Expectations' pandas path, fed by DuckDB, and not its SQL datasource: GE 1.24's
SQL datasource over duckdb_engine fails on every expectation with `MetricResolutionError:
list index out of range` (tests/warehouse/quality/test_ge_paths.py reproduces it), while
its pandas datasource works. DuckDB therefore does the heavy lifting (joins, the lineage
recursion, the cross-row invariants in the `invariant_violations` view) and hands GE only
the lean columns it needs: never the token arrays of `node_payloads`, whose lengths already
sit on `nodes` (n_response_tokens, n_response_logprobs, code_chars).
"""
