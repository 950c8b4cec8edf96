"""The figures' JSON: written as they are when finite, NaN and infinities as null otherwise,
and never a '</' that would end the <script> element holding it."""
from __future__ import annotations

import json
import math
from datetime import datetime
from decimal import Decimal

from warehouse.serve.app import charts_json


def test_finite_figures_are_written_as_they_are():
    charts = {"a": {"data": [{"x": [1, 2], "y": [0.5, Decimal("1.5")], "name": "</script>"}],
                    "layout": {"at": datetime(2026, 12, 6, 8, 0)}}}
    text = charts_json(charts)
    assert "</" not in text
    assert json.loads(text) == {"a": {"data": [{"x": [1, 2], "y": [0.5, 1.5], "name": "</script>"}],
                                      "layout": {"at": "2026-12-06T08:00:00"}}}


def test_nan_and_infinities_become_null_wherever_they_are():
    charts = {"a": {"data": [{"y": [1.0, math.nan, math.inf, -math.inf], "meta": {"v": (math.nan, 2.0)}}]}}
    assert json.loads(charts_json(charts)) == {"a": {"data": [{"y": [1.0, None, None, None],
                                                               "meta": {"v": [None, 2.0]}}]}}
