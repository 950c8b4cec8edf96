"""GPU nodes on CPU: the pool's leases and waits, and the sandbox's NVML sampling and idle
kill against a fake NVML whose utilisation the test sets."""
from __future__ import annotations

import dataclasses
import threading
import time
from types import SimpleNamespace

import pytest

from train.env import LocalExecutor, evaluate, load_task
from train.env.gpu import GpuMonitor, GpuPool, default_exec_gpus, parse_exec_gpus


class FakeNvml:
    """The few pynvml calls we make, for ``count`` GPUs at a settable utilisation."""

    def __init__(self, count=4, util=0, used=3 * 2**30):
        self.count, self.util, self.used, self.asked = count, util, used, []

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        self.asked.append(i)
        return i

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self.util, memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=self.used, total=80 * 2**30)

    def nvmlDeviceGetName(self, handle):
        return b"Fake H200"


def test_pool_leases_whole_gpus_and_makes_the_rest_wait():
    pool = GpuPool([2, 3])
    order = []

    def node(k):
        with pool.lease(1) as gpus:
            order.append(("start", k, gpus))
            time.sleep(0.05)
            order.append(("end", k, gpus))

    threads = [threading.Thread(target=node, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    running, most = set(), 0
    for event, k, gpus in order:
        assert len(gpus) == 1 and gpus[0] in (2, 3)
        if event == "start":
            assert not any(g == gpus for _, g in running)  # never two nodes on one GPU
            running.add((k, gpus))
        else:
            running.discard((k, gpus))
        most = max(most, len(running))
    assert most == 2 and sorted(pool._free) == [2, 3]


def test_exec_gpus_option_and_default_rule():
    assert parse_exec_gpus(None) is None and parse_exec_gpus("none") == [] and parse_exec_gpus("1,3") == [1, 3]
    with pytest.raises(Exception, match="expected GPU indices"):
        parse_exec_gpus("one")
    assert default_exec_gpus({0}, FakeNvml(count=4)) == [1, 2, 3]
    assert default_exec_gpus(set(), FakeNvml(count=0)) == []


def test_monitor_summarises_utilisation_memory_and_name():
    monitor = GpuMonitor((1,), FakeNvml(util=40))
    monitor.sample()
    monitor.lib.util = 80
    monitor.sample()
    assert monitor.summary() == {"gpu_util": 60.0, "gpu_util_peak": 80.0, "gpu_mem_used_gi": 3.0, "gpu_name": "Fake H200"}


GPU_SLEEPER = ("Plan.\n```python\n# /// script\n# [tool.resources]\n# gpu = 1\n# ///\n"
               "import os, time\nprint('visible', os.environ['CUDA_VISIBLE_DEVICES'])\ntime.sleep(30)\n```\n")
CPU_BUSY = ("Plan.\n```python\n# /// script\n# [tool.resources]\n# gpu = 1\n# ///\n"
            "import os, time\nprint('visible', os.environ['CUDA_VISIBLE_DEVICES'])\nend = time.time() + 3\n"
            "while time.time() < end:\n    pass\n```\n")


@pytest.fixture
def fake_nvml(monkeypatch):
    fake = FakeNvml()
    monkeypatch.setattr("train.env.gpu.nvml", lambda: fake)
    return fake


def test_a_node_that_leaves_its_gpu_idle_is_killed_as_gpu_idle(limits, fake_nvml):
    task = load_task("mini-tabular-accuracy")
    limits = dataclasses.replace(limits, idle_window_s=1.5)  # judged on the (fake) GPU's utilisation
    record = evaluate(task, [GPU_SLEEPER], executor=LocalExecutor(gpus=[3]), limits=limits)[0]
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "GpuIdleError", -0.2)
    assert "visible 3" in record["term_tail"] and fake_nvml.asked[0] == 3
    assert (record["gpu_util"], record["gpu_util_peak"], record["gpu_name"]) == (0.0, 0.0, "Fake H200")


def test_a_busy_gpu_keeps_the_node_alive_though_its_cpu_idles(limits, fake_nvml):
    fake_nvml.util = 55
    code = CPU_BUSY.replace("end = time.time() + 3\nwhile time.time() < end:\n    pass", "time.sleep(3)")
    limits = dataclasses.replace(limits, idle_window_s=1.5)
    record = evaluate(load_task("mini-tabular-accuracy"), [code], executor=LocalExecutor(gpus=[0]), limits=limits)[0]
    assert record["exc_type"] is None and record["returncode"] == 0  # 3 s asleep > the 1.5 s window
    assert (record["gpu_util"], record["gpu_mem_used_gi"]) == (55.0, 3.0)


def test_nodes_wait_for_the_gpu_and_the_wait_is_pending_time(limits, fake_nvml):
    fake_nvml.util = 90
    code = CPU_BUSY.replace("+ 3", "+ 1")
    records = evaluate(load_task("mini-tabular-accuracy"), [code, code],
                       executor=LocalExecutor(max_workers=2, gpus=[1]), limits=limits)
    assert all(r["returncode"] == 0 for r in records)
    first, second = sorted(records, key=lambda r: r["exec_timings"]["pending"])
    # One GPU: the second node waited at least as long as the first one ran (pending is wall
    # clock and exec_time monotonic, hence the slack for the two clocks).
    assert second["exec_timings"]["pending"] >= 0.9 * first["exec_time"]


def test_without_execution_gpus_a_gpu_node_runs_without_one(limits, fake_nvml):
    code = CPU_BUSY.replace("+ 3", "+ 0.5").replace("os.environ['CUDA_VISIBLE_DEVICES']", "repr(os.environ['CUDA_VISIBLE_DEVICES'])")
    record = evaluate(load_task("mini-tabular-accuracy"), [code], executor=LocalExecutor(), limits=limits)[0]
    assert record["returncode"] == 0 and "visible ''" in record["term_tail"] and record["gpu_util"] is None
