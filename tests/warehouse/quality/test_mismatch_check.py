"""Check 16 in `warehouse check`: sampler-vs-trainer logprobs within the run's limits."""
from __future__ import annotations

from click.testing import CliRunner

from tests.warehouse.quality.conftest import plant
from warehouse.cli import main

# node a1 (r1, round 1, cactus) trained, its sampler and trainer 0.5 apart on each of 4 tokens
# (exp(0.5) = 1.65 > 1.1), b1 (r1, round 1, textnorm) in exact agreement
TRAINED = """
INSERT INTO node_train_tokens (source_id, line_no, run_id, step, compared_tokens, mult_prob_error_sum,
                               mult_prob_error_max, abs_delta_gt_1, kl_to_ref_sum)
SELECT source_id, line_no, run_id, 1, 4, CASE node_id WHEN 'a1' THEN 4 * exp(0.5) ELSE 4 END,
       CASE node_id WHEN 'a1' THEN exp(0.5) ELSE 1 END, 0, 0
FROM nodes WHERE node_id IN ('a1', 'b1') AND run_id = 'r1'
"""


def check(url: str, *args: str):
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, ["--db", url, "check", "--suite", "mismatch", *args])


def test_a_task_round_over_the_default_limit_fails_check_16(clean_url):
    plant(clean_url, TRAINED)
    result = check(clean_url)
    assert result.exit_code == 1, result.output
    failed = [ln for ln in result.output.splitlines() if "  FAIL  " in ln]
    assert len(failed) == 1 and failed[0].split()[0] == "16" and "r1 round 1 cactus" in failed[0]
    assert ('FAILED: 1 of 2 expectations (invariants 16). Every offending row: warehouse sql '
            '"SELECT * FROM logprob_mismatch"') in result.output


def test_the_runs_own_limits_replace_the_defaults(clean_url):
    plant(clean_url, TRAINED)
    plant(clean_url, """UPDATE runs SET overrides = '{"mismatch_max": 1.7}' WHERE run_id = 'r1'""")
    result = check(clean_url)
    assert result.exit_code == 0, result.output
    plant(clean_url, """UPDATE runs SET overrides = '{"mismatch_max": 1.6}' WHERE run_id = 'r1'""")
    assert check(clean_url).exit_code == 1


def test_the_arms_limits_apply_unless_the_run_sets_its_own(clean_url):
    plant(clean_url, TRAINED)
    plant(clean_url, "UPDATE arms SET mismatch_max = 1.7 WHERE name = 'hr24k_u6'")  # r1's arm
    assert check(clean_url).exit_code == 0
    plant(clean_url, """UPDATE runs SET overrides = '{"mismatch_max": 1.6}' WHERE run_id = 'r1'""")
    assert check(clean_url).exit_code == 1


def test_limits_out_of_range_are_one_clear_error():
    import pytest

    from train.settings import RunOptions, resolve_settings
    from warehouse.errors import TerminalError

    with pytest.raises(TerminalError, match=r"mismatch_max=0.9: needs at least 1"):
        resolve_settings(RunOptions(model="tiny", sets={"mismatch_max": "0.9"}))
    with pytest.raises(TerminalError, match=r"mismatch_share_gt1_max=2.0: a share of tokens, in \[0, 1\]"):
        resolve_settings(RunOptions(model="tiny", sets={"mismatch_share_gt1_max": "2"}))
    arm, _, overrides = resolve_settings(RunOptions(model="tiny", sets={"mismatch_max": "1.2"}))
    assert arm.mismatch_max == 1.2 and overrides["mismatch_max"] == 1.2  # recorded on the run row


def test_untrained_warehouses_pass(clean_url):
    result = check(clean_url)
    assert result.exit_code == 0, result.output
    assert "all 2 expectations hold" in result.output
