"""Why the gate feeds GE DataFrames: its pandas path works here, its SQL path does not."""
from __future__ import annotations

import pytest

from warehouse.db import connect


def _context():
    from warehouse.quality.runner import _context

    return _context(None)


def _suite(gx):
    import great_expectations.expectations as gxe

    return gx.ExpectationSuite(name="probe", expectations=[
        gxe.ExpectColumnValuesToBeBetween(column="reward", min_value=-1, max_value=1)])


def test_pandas_path_validates_a_duckdb_frame(clean_url):
    import great_expectations as gx

    from tests.warehouse.quality.conftest import plant

    plant(clean_url, "UPDATE nodes SET reward = 5 WHERE node_id = 'a4'")
    with connect(clean_url, read_only=True) as con:
        frame = con.execute('SELECT "reward" FROM "nodes"').df()
    context = _context()
    batch = (context.data_sources.add_pandas("pd").add_dataframe_asset("nodes")
             .add_batch_definition_whole_dataframe("all"))
    definition = gx.ValidationDefinition(name="v", data=batch, suite=context.suites.add(_suite(gx)))
    result = context.validation_definitions.add(definition).run(
        batch_parameters={"dataframe": frame})
    (outcome,) = result.results
    assert not outcome.success
    assert outcome.result["element_count"] == 13  # the clean fixture's node records
    assert outcome.result["unexpected_count"] == 1 and outcome.result["partial_unexpected_list"] == [5]


def test_sql_path_over_duckdb_engine_fails(clean_url):
    """The pitfall: GE 1.24's SQL datasource over duckdb_engine cannot resolve metrics."""
    import great_expectations as gx

    context = _context()
    batch = (context.data_sources.add_sql("sql", connection_string=clean_url)
             .add_table_asset("nodes", table_name="nodes").add_batch_definition_whole_table("all"))
    definition = gx.ValidationDefinition(name="v", data=batch, suite=context.suites.add(_suite(gx)))
    try:
        result = context.validation_definitions.add(definition).run()
    except Exception as exc:  # noqa: BLE001 - either way of failing proves the point
        message = str(exc)
    else:
        (outcome,) = result.results
        if outcome.success:
            pytest.xfail("GE's SQL path works with this GE/duckdb_engine: the pandas path "
                         "is no longer required")
        message = str(outcome.exception_info)
    assert "list index out of range" in message
