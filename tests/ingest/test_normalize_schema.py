"""The normalizer's typed fields agree with the schema's column types (one statement of a
column's type: a field typed one way and stored another would cast or lose values silently)."""
from __future__ import annotations

import pytest
import sqlalchemy as sa

from ingest import normalize
from warehouse import schema

KIND_TYPES = {"str": sa.String, "id": sa.String, "text": sa.String, "int": sa.Integer,
              "bigint": sa.BigInteger, "float": sa.Float, "bool": sa.Boolean, "json": sa.JSON}
TABLES = {"node": schema.nodes, "summary": schema.task_rounds, "timing": schema.steps,
          "step_metric": schema.step_metrics}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_typed_field_lands_in_a_column_of_its_type(kind):
    table = TABLES[kind]
    checked = 0
    for field in normalize.FIELDS[kind]:
        columns = [(col, sa.Float) for _, col in field.parts] if field.kind == "dict" \
            else [(field.column, KIND_TYPES.get(field.kind))]
        for name, want in columns:
            if not name or want is None or name not in table.c:
                continue  # payload-only fields live in node_payloads
            got = table.c[name].type
            assert isinstance(got, want), f"{kind}.{field.key}: {field.kind} field, {table.name}.{name} is {got!r}"
            assert field.kind != "int" or not isinstance(got, sa.BigInteger), f"{name} needs the bigint kind"
            checked += 1
    assert checked >= 4
