"""Every seed-004 figure, read off a view with the one query docs/bi.md gives for it.

The queries are taken from docs/bi.md itself (its "Seed 004" block), so the documented
readings are the ones tested; each is run on the sample's reward-model run and compared
with the value the seed publishes.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.rm_fixtures import *  # noqa: F403 - fixtures

BI_MD = Path(__file__).resolve().parents[2] / "docs" / "bi.md"
T, F, N = True, False, None

# title of the reading in docs/bi.md -> the rows the seed's figures give
EXPECTED = {
    "the best official final score against the shipped reference":
        [(3072, 38.3250, 0.9680, 2985, 3, 74.568936, 38.3250 - 74.568936, 38.3250 / 74.568936)],
    "the proxy conclusion did not survive (two-member soup 72.2013 +- 2.1070 on the":
        [("U-05/soup2", 72.2013, 2.1070, 3072, 34.9698, 2.2306, F)],
    "the numerical exploration best (78.0483 at progress 64 of U-03) was not submitted":
        [("U-03/len256", 64, 78.0483, F)],
    "the same artifact on the proxy rows against the full final split":
        [(3072, "proxy_rows", 512, 34.9698, 2.2306, 2985, 38.3250, 0.9680)],
    "formal snapshots by progress, non-monotonic (2880 37.3628, 2976 36.9610, 3072 38.3250)":
        [(2880, 37.3628, 0.9585, 2985, T, N, F), (2976, 36.9610, 0.9639, 2985, T, "down", F),
         (3072, 38.3250, 0.9680, 2985, T, "up", F)],
    "U-03, 256 steps at 3e-5: an early peak (78.0483, 73.8710, 73.7588, 73.9477)":
        [(64, 78.0483, N, F), (128, 73.8710, "down", F), (192, 73.7588, "down", F),
         (256, 73.9477, "up", F)],
    "U-03's Chat and Safety did not keep rising after progress 64":
        [("Chat", 90.1, 87.6, 87.6 - 90.1), ("Safety", 80.5, 76.1, 76.1 - 80.5)],
    "U-02, the learning-rate scan at 64 steps (67.0851, 67.8677, 70.9538; SE about 2.1)":
        [(5e-6, 67.0851, "about 2.1"), (1.5e-5, 67.8677, "about 2.1"),
         (3e-5, 70.9538, "about 2.1")],
    "U-01, smoke run and micro-batch probe (112.2 s, 19.58 GB, 56.9188 +- 2.2956;":
        [("U-01/smoke", 256, 4, 1, 64, 112.2, 19.58, 56.9188, 2.2956),
         ("U-01/mb8", 512, 6, 8, 8, 90.4, 39.28, N, N)],
    "U-04, the CPU accumulator's host-memory OOM (64 GiB) and the GPU one that worked":
        [("U-04/cpu-accumulator", 2, "oom", 64.0), ("U-04/tiny-soup", 2, "completed", N)],
    "U-05, one member 66.5338 +- 2.2180, the two-member soup 72.2013 +- 2.1070, the":
        [("U-05/member1", 1, 64, 64, "completed", N, 66.5338, 2.2180),
         ("U-05/member3", 1, 15, 64, "killed", 41 * 60 + 52, N, N),
         ("U-05/soup2", 2, N, N, "completed", N, 72.2013, 2.1070)],
    "U-05's sections: Chat Hard fell 63.51 -> 54.56, Reasoning jumped":
        "sections",
    "the formal budget (42,600 s wall clock, 600 s reserve, 40,688.220 s training,":
        [(42600, 600, 40688.220, 40737.569, "wall_clock_budget_exhausted", 3072, 32, 96, T,
          40688.220 / (42600 - 600))],
    "32 cumulative snapshots published, 3 retained, all loadable, 7.11 B parameters, bf16":
        [(32, 3, 3, 7.11, "bfloat16")],
    "the exploration phase (four hours; submitted after about 3 h 23 min)":
        [(4 * 3600, 3 * 3600 + 23 * 60, "submitted")],
}


def readings() -> dict[str, str]:
    """title -> SQL of each data-root-004 reading in docs/bi.md."""
    text = BI_MD.read_text("utf-8")
    block = text.split("### Data root 004", 1)[1].split("```sql", 1)[1].split("```", 1)[0]
    out = {}
    for chunk in re.split(r"\n\s*\n", block.strip()):
        lines = chunk.strip().splitlines()
        title = lines[0].removeprefix("-- data root 004: ").strip()
        out[title] = "\n".join(line for line in lines if not line.startswith("--"))
    return out


def test_every_documented_reading_has_its_expected_figures():
    assert set(readings()) == set(EXPECTED)


@pytest.mark.parametrize("title", list(EXPECTED))
def test_seed_004_figure(rm_url, title):
    from warehouse.query import run_query

    rows = [tuple(r) for r in run_query(rm_url, readings()[title]).rows]
    expected = EXPECTED[title]
    if expected == "sections":
        by_section = {r[0]: r[1:] for r in rows}
        assert by_section["Chat Hard"][:2] == (63.51, 54.56)
        assert by_section["Chat Hard"][2] == pytest.approx(54.56 - 63.51)
        assert by_section["Reasoning"][2] > 20  # "Reasoning jumped"
        assert set(by_section) == {"Chat", "Chat Hard", "Safety", "Reasoning"}
        return
    assert len(rows) == len(expected), rows
    for got, want in zip(rows, expected):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if w == "about 2.1":
                assert 2.0 <= g <= 2.2
            elif isinstance(w, float):
                assert g == pytest.approx(w, rel=1e-12, abs=1e-12), (title, got)
            else:
                assert g == w, (title, got)


def test_sections_average_to_their_score(rm_url):
    """The sample's sections follow RewardBench v1's aggregation: the mean of the four."""
    from warehouse.query import run_query

    rows = run_query(rm_url, 'SELECT e."score", avg(s."score"), count(*) FROM "rm_evaluations" '
                             'e JOIN "rm_eval_sections" s USING ("run_id", "evaluation_id") '
                             "GROUP BY ALL").rows
    assert len(rows) == 14
    for score, mean, count in rows:
        assert count == 4 and mean == pytest.approx(score, abs=1e-4)
