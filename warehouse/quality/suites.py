"""The expectation suites, kept as code: one per table family.

* `nodes` (node records): invariants 1, 2, 4, 5, 6 and 9 as native row-level expectations.
* `summaries` (round summaries): invariant 3.  * `timing` (timing rows): invariant 7.
* `lineage` (parents across runs): invariant 8.
* `mismatch` (trained task-rounds): check 16, sampler vs trainer logprobs (logprob_mismatch).
* `rm_evaluations`, `rm_sections`, `rm_artifacts`, `rm_splits`: the reward-model checks
  10-15 (docs/reward_model.md); 13-15 are cross-row, read from the `rm_violations` view.

The last three are cross-row (a recount, a walk of runs.resumed_from_run, file order), so
DuckDB computes their offending rows in the `invariant_violations` view and the suite
expects that view to hold no row of that check: the SQL view and the gate agree by
construction. Every expectation carries `meta.check_no`, docs/metrics.md's number.

Row conditions use GE's typed `Column` conditions, evaluated by pandas: a NULL compared
with `!=` or `not in` is True there, so a NULL status counts as "not ok", a NULL mode as
"not draft", a NULL source as "not grade", as the view's `IS DISTINCT FROM` does.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from warehouse.quality.invariants import INVARIANTS, SE_RATIO_BOUNDS
from warehouse.vocabulary import DRAFT, IDLE_EXC_TYPES, IDLE_REWARD, MODES, NO_CODE, OK, SENTINEL_REWARDS, STATUSES


@dataclass(frozen=True)
class Suite:
    name: str
    frame: str  # a key of warehouse.quality.frames.FRAMES
    checks: tuple[int, ...]
    build: Callable[[], list]  # -> list of GE expectations

    @property
    def description(self) -> str:
        return "; ".join(f"{n}. {INVARIANTS[n]}" for n in self.checks)


def _meta(check_no: int, description: str) -> dict:
    return {"meta": {"check_no": check_no}, "description": f"({check_no}) {description}"}


def _reward_expectations(gxe, Column) -> list:
    not_ok = Column("status") != OK
    return [
        gxe.ExpectColumnValuesToNotBeNull(column="reward", **_meta(1, "every node has a reward")),
        gxe.ExpectColumnValuesToBeBetween(
            column="reward", min_value=0, max_value=1, row_condition=Column("status") == OK,
            **_meta(1, "an ok node's reward is in [0, 1]")),
        gxe.ExpectColumnValuesToBeInSet(
            column="reward", value_set=list(SENTINEL_REWARDS), row_condition=not_ok,
            **_meta(1, "a node that is not ok has a sentinel reward")),
        gxe.ExpectColumnValuesToBeInSet(
            column="reward", value_set=[IDLE_REWARD],
            row_condition=not_ok & Column("exc_type").is_in(IDLE_EXC_TYPES),
            **_meta(1, "an idle kill's reward is -0.2")),
        gxe.ExpectColumnValuesToNotBeNull(
            column="exc_type", row_condition=not_ok & (Column("reward") == IDLE_REWARD),
            **_meta(1, "a -0.2 reward names its exc_type")),
        gxe.ExpectColumnValuesToBeInSet(
            column="exc_type", value_set=list(IDLE_EXC_TYPES),
            row_condition=not_ok & (Column("reward") == IDLE_REWARD),
            **_meta(1, "a -0.2 reward only on an idle kill")),
    ]


def _status_mode_expectations(gxe, Column) -> list:
    return [
        gxe.ExpectColumnValuesToNotBeNull(column="status", **_meta(2, "every node has a status")),
        gxe.ExpectColumnValuesToBeInSet(column="status", value_set=list(STATUSES),
                                        **_meta(2, "status is a known status")),
        gxe.ExpectColumnValuesToNotBeNull(column="mode", **_meta(2, "every node has a mode")),
        gxe.ExpectColumnValuesToBeInSet(column="mode", value_set=list(MODES),
                                        **_meta(2, "mode is a known mode")),
        gxe.ExpectColumnValuesToBeNull(column="parent_id", row_condition=Column("mode") == DRAFT,
                                       **_meta(2, "a draft has no parent")),
        gxe.ExpectColumnValuesToNotBeNull(
            column="parent_id", row_condition=Column("mode") != DRAFT,
            **_meta(2, "a node that is not a draft has a parent")),
    ]


def _payload_expectations(gxe, Column) -> list:
    return [
        gxe.ExpectColumnPairValuesToBeEqual(
            column_A="n_response_tokens", column_B="n_response_logprobs",
            ignore_row_if="both_values_are_missing",
            **_meta(4, "as many response logprobs as response token ids")),
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="response_cap", column_B="n_response_tokens", or_equal=True,
            ignore_row_if="either_value_is_missing",
            **_meta(4, "response tokens within the arm's response cap (when known)")),
        gxe.ExpectColumnValuesToBeInSet(
            column="code_chars", value_set=[0], row_condition=Column("status") == NO_CODE,
            **_meta(5, "a no_code node has empty code")),
    ]


def _grading_expectations(gxe, Column) -> list:
    return [
        gxe.ExpectColumnValuesToNotBeNull(
            column="test_metric", row_condition=Column("source") == "grade",
            **_meta(6, "a graded node has a test_metric")),
        gxe.ExpectColumnValuesToBeNull(
            column="test_metric", row_condition=Column("source") != "grade",
            **_meta(6, "a node that is not graded has no test_metric")),
        gxe.ExpectColumnPairValuesToBeEqual(
            column_A="oriented_abs", column_B="test_metric_abs",
            ignore_row_if="both_values_are_missing",
            **_meta(6, "oriented is +/- test_metric (NULL with it)")),
        gxe.ExpectColumnPairValuesToBeEqual(
            column_A="oriented", column_B="oriented_by_task",
            ignore_row_if="either_value_is_missing",
            **_meta(6, "oriented has the sign the task's other graded nodes give it")),
    ]


def _nodes() -> list:
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    unique_ids = gxe.ExpectCompoundColumnsToBeUnique(
        column_list=["run_id", "node_id"], **_meta(9, "node ids unique within a run"))
    return [*_reward_expectations(gxe, Column), *_status_mode_expectations(gxe, Column),
            *_payload_expectations(gxe, Column), *_grading_expectations(gxe, Column),
            unique_ids]


def _no_violations(check_no: int, what: str, view: str = "invariant_violations"
                   ) -> Callable[[], list]:
    def build() -> list:
        import great_expectations.expectations as gxe

        return [gxe.ExpectColumnValuesToNotBeInSet(
            column="check_no", value_set=[check_no],
            **_meta(check_no, f"{what} (no check {check_no} row in {view})"))]

    return build


def _rm_evaluations() -> list:
    """Checks 10-12 on each reward-model evaluation (docs/reward_model.md)."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    low, high = SE_RATIO_BOUNDS
    return [
        gxe.ExpectColumnValuesToNotBeNull(column="score",
                                          **_meta(10, "every evaluation has a score")),
        gxe.ExpectColumnValuesToBeBetween(column="score", min_value=0, max_value=100,
                                          **_meta(10, "an evaluation's score is in [0, 100]")),
        gxe.ExpectColumnValuesToNotBeNull(column="n", **_meta(11, "every evaluation states n")),
        gxe.ExpectColumnValuesToBeBetween(column="n", min_value=1, **_meta(11, "n > 0")),
        gxe.ExpectColumnValuesToNotBeNull(column="se",
                                          **_meta(11, "every evaluation has a standard error")),
        gxe.ExpectColumnValuesToBeBetween(
            column="se_ratio", min_value=low - 1e-9, max_value=high + 1e-9,
            **_meta(11, f"the standard error is {low}x-{high}x the binomial SE of its n")),
        gxe.ExpectColumnPairValuesToBeEqual(
            column_A="official", column_B="receipt_matches",
            **_meta(12, "official exactly when a receipt matches the summary")),
        gxe.ExpectColumnValuesToBeInSet(
            column="official", value_set=[True],
            row_condition=Column("is_final") == True,  # noqa: E712 - GE's condition syntax
            **_meta(12, "every final (formal, full-split) score is official")),
    ]


def _rm_sections() -> list:
    import great_expectations.expectations as gxe

    return [gxe.ExpectColumnValuesToBeBetween(
        column="score", min_value=0, max_value=100,
        **_meta(10, "a section score is in [0, 100]"))]


def _mismatch() -> list:
    """Check 16 per trained task-round, against the run's limits (warehouse.quality.mismatch)."""
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectColumnValuesToBeInSet(
            column="mult_within", value_set=[True],
            **_meta(16, "mult_prob_error (mean exp|trainer - sampler logprob|) <= the run's mismatch_max")),
        gxe.ExpectColumnValuesToBeInSet(
            column="share_within", value_set=[True],
            **_meta(16, "share of tokens with |trainer - sampler logprob| > 1 <= the run's mismatch_share_gt1_max")),
    ]


SUITES: dict[str, Suite] = {
    "nodes": Suite("nodes", "nodes", (1, 2, 4, 5, 6, 9), _nodes),
    "summaries": Suite("summaries", "violations", (3,),
                       _no_violations(3, "summaries agree with their recount")),
    "timing": Suite("timing", "violations", (7,),
                    _no_violations(7, "steps increase, phases sum to total_s")),
    "lineage": Suite("lineage", "violations", (8,),
                     _no_violations(8, "every parent is a node of the run's lineage")),
    "mismatch": Suite("mismatch", "mismatch", (16,), _mismatch),
    "rm_evaluations": Suite("rm_evaluations", "rm_evaluations", (10, 11, 12), _rm_evaluations),
    "rm_sections": Suite("rm_sections", "rm_sections", (10,), _rm_sections),
    "rm_artifacts": Suite("rm_artifacts", "rm_violations", (13, 14), lambda: [
        *_no_violations(13, "at most three retained artifacts per run", "rm_violations")(),
        *_no_violations(14, "progress increases within a job", "rm_violations")()]),
    "rm_splits": Suite("rm_splits", "rm_violations", (15,),
                       _no_violations(15, "the proxy rows are a subset of the full split",
                                      "rm_violations")),
}


def get_suites(name: str | None = None) -> list[Suite]:
    """Every suite, or the one called `name` (a clear error names the known ones)."""
    if name is None:
        return list(SUITES.values())
    if name not in SUITES:
        from warehouse.errors import TerminalError

        raise TerminalError(f"unknown suite {name!r}; known suites: {', '.join(SUITES)}")
    return [SUITES[name]]
