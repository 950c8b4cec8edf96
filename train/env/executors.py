"""Where nodes run: an ``Executor`` maps sandbox jobs to results, in order.

``LocalExecutor`` (the default) runs siblings in parallel on a thread pool sized to the
machine; each thread only waits on its node's subprocess. Given execution GPUs, it leases
them to the nodes that declare ``gpu = N`` (``train/env/gpu.py``): such a node waits for a
free GPU, and the wait shows in its ``exec_timings.pending``. ``RayExecutor`` runs the same jobs
as Ray tasks across a cluster; it assumes the tasks root is on a filesystem every Ray node
sees (the job carries paths, not data).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from train.env.sandbox import ExecResult, SandboxJob, SandboxUnavailableError, require_sandbox, run_job

log = logging.getLogger(__name__)


class Executor(Protocol):
    def run(self, jobs: list[SandboxJob]) -> list[ExecResult]:
        """Run every job; results in the jobs' order. Must not raise for a failing node."""


class LocalExecutor:
    """A pool of ``max_workers`` concurrent nodes (default: the machine's CPU count), and the
    GPUs ``gpus`` (host indices) for the nodes that declare one."""

    def __init__(self, max_workers: int | None = None, gpus: list[int] | tuple[int, ...] = ()):
        from train.env.gpu import GpuPool

        self.max_workers = max_workers or os.cpu_count() or 1
        self.gpu_pool = GpuPool(gpus)
        self._warned = False
        # calls may come from several threads at once (a round's groups executing while others
        # generate): together they still run at most max_workers nodes
        self._slots = threading.BoundedSemaphore(self.max_workers)

    def run(self, jobs: list[SandboxJob]) -> list[ExecResult]:
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(jobs))) as pool:
            return list(pool.map(self._run_slot, jobs))

    def _run_slot(self, job: SandboxJob) -> ExecResult:
        with self._slots:
            return self._run_one(job)

    def _run_one(self, job: SandboxJob) -> ExecResult:
        if job.gpu_request <= 0:
            return run_job(job)
        if not len(self.gpu_pool):
            if not self._warned:
                log.warning("a node declares gpu = %d but no execution GPU is configured "
                            "(--exec-gpus): it runs without one", job.gpu_request)
                self._warned = True
            return run_job(job)
        with self.gpu_pool.lease(job.gpu_request) as gpus:
            return run_job(dataclasses.replace(job, gpus=gpus))


class RayExecutor:
    """Jobs as Ray tasks (one CPU each by default); connects with ``ray.init(address)``."""

    def __init__(self, address: str | None = None, num_cpus_per_node: float = 1, **init_kwargs):
        import ray

        if not ray.is_initialized():
            ray.init(address=address, **init_kwargs)
        self._remote = ray.remote(num_cpus=num_cpus_per_node)(_run_on_ray)

    def run(self, jobs: list[SandboxJob]) -> list[ExecResult]:
        import ray

        # A GPU node asks Ray for its GPUs when the cluster has any (else it would wait forever).
        has_gpus = ray.cluster_resources().get("GPU", 0) > 0
        try:
            return ray.get([self._remote.options(num_gpus=job.gpu_request).remote(job)
                            if has_gpus and job.gpu_request > 0 else self._remote.remote(job) for job in jobs])
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, SandboxUnavailableError):  # one line, not the worker's traceback
                raise exc.cause from None
            raise


def _run_on_ray(job: SandboxJob) -> ExecResult:
    import ray

    if job.gpu_request > 0 and ray.get_gpu_ids():
        job = dataclasses.replace(job, gpus=tuple(int(g) for g in ray.get_gpu_ids()))
    return run_on_worker(job, f"ray:{ray.util.get_node_ip_address()}:{os.getpid()}")


def run_on_worker(job: SandboxJob, where: str) -> ExecResult:
    """``job`` on a machine other than the one whose sandbox ``train run`` checked: refused
    there, as the driver refuses, when that machine cannot build the allow-list sandbox (a worker
    without bubblewrap would otherwise run the node in the deny-list fallback, unasked)."""
    require_sandbox(job.limits, where=f"worker {where}")
    result = run_job(job)
    result.where = where
    return result
