"""A node the sandbox stopped is judged by warehouse.vocabulary's one table, for the names the
sandbox gives today and for those its per-node limits will give (memory_limit, disk_limit):
the status and exc_type come from the table, the reward from the vocabulary's sentinels."""
from __future__ import annotations

import pytest

from train.env.extract import Extraction
from train.env.node import node_record
from train.env.reward import reward_for
from train.env.sandbox import ExecResult
from warehouse import vocabulary as vocab

EXPECTED = {  # outcome -> (status, exc_type, reward): the spec's table, written out
    "timeout": ("timeout", "TimeoutError", -0.5),
    "idle": ("crashed", "CpuIdleError", -0.2),
    "gpu_idle": ("crashed", "GpuIdleError", -0.2),
    "memory": ("crashed", "MemoryError", -0.5),
    "infra": ("crashed", "InfrastructureError", -1.0),
    "memory_limit": ("crashed", "MemoryLimitError", -0.5),
    "disk_limit": ("crashed", "DiskLimitError", -0.5),
}


def test_every_stopped_outcome_is_in_the_table():
    assert set(vocab.VERDICTS) == set(EXPECTED) and set(vocab.VERDICTS) <= set(vocab.OUTCOMES)


@pytest.mark.parametrize("outcome", sorted(EXPECTED))
def test_a_stopped_node_gets_the_tables_status_exc_type_and_reward(outcome):
    # the exit status a killed process has (-9): the table decides, not the return code
    record = node_record(None, Extraction("print(1)", "", True), ExecResult(outcome=outcome, returncode=-9))
    assert (record["status"], record["exc_type"], record["reward"]) == EXPECTED[outcome]
    assert record["status"] in vocab.STATUSES and record["is_buggy"]


def test_a_cpu_time_kill_is_a_timeout_and_other_failures_keep_their_traceback():
    sigxcpu = node_record(None, Extraction("x", "", True), ExecResult(outcome="exited", returncode=-24,
                                                                      exc_type="SIGXCPU"))
    assert (sigxcpu["status"], sigxcpu["exc_type"], sigxcpu["reward"]) == ("timeout", "TimeoutError", -0.5)
    crash = node_record(None, Extraction("x", "", True), ExecResult(outcome="exited", returncode=1,
                                                                    exc_type="KeyError"))
    assert (crash["status"], crash["exc_type"], crash["reward"]) == ("crashed", "KeyError", -0.5)
    none = node_record(None, Extraction("", "", False), None)
    assert (none["status"], none["reward"]) == ("no_code", -0.5)


def test_the_sentinels_are_the_vocabularys():
    assert reward_for("ok", None, 0.25) == 0.25
    assert {reward_for("crashed", exc, None) for exc in vocab.IDLE_EXC_TYPES} == {vocab.IDLE_REWARD}
    assert reward_for("crashed", vocab.INFRASTRUCTURE_EXC_TYPE, None) == vocab.INFRASTRUCTURE_REWARD
    assert reward_for("crashed", vocab.MEMORY_LIMIT_ERROR, None) == vocab.FAILED_REWARD
    assert vocab.SENTINEL_REWARDS == (-0.5, -0.2, -1.0)
