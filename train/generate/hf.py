"""Generation with Hugging Face transformers.

Two paths, with the same per-row sampler (a row's draws depend only on the seed, its index in
the request order and the step, `sampler.row_noise`), so they yield the same tokens:
- paged (the default): a paged KV cache with continuous batching and preemption by recompute
  (:mod:`train.generate.paged`); its KV memory follows the live tokens, its budget is
  `gpu_memory_utilization` of the GPU (or `kv_blocks` blocks, e.g. on CPU);
- plain (`paged=False`): every sibling of every request in one left-padded batch over
  transformers' dynamic KV cache (:mod:`train.generate.sampler`): the reference the paged path
  is tested against.
On a GPU, `train run` generates with vLLM (`--backend auto`, train.generate.choice); this
backend is the CPU path, the reference, and the generator of multi-rank runs.
"""
from __future__ import annotations

import dataclasses

from train.generate.base import (Capabilities, Completion, GenRequest, SamplingConfig, completion_from_tokens,
                                 failed, plan_prompts)
from train.generate.sampler import decode, make_batch, row_keys


class HFBackend:
    """`Backend` over a loaded transformers model (optionally PEFT-wrapped)."""

    # the trained module itself (no weights of its own, no adapter swap), a share of a call on
    # every rank; an instance streams only on the paged path
    capabilities = Capabilities(logprobs=True, ranks=True)

    def __init__(self, model, tokenizer, max_batch: int | None = None,
                 paged: bool = True, gpu_memory_utilization: float = 0.6, kv_blocks: int | None = None,
                 max_running: int = 256, lookahead: int | None = None):
        self.model = model
        self.paged = paged
        self.gpu_memory_utilization = gpu_memory_utilization
        self.kv_blocks = kv_blocks  # None: from gpu_memory_utilization on GPU, every row's full length on CPU
        self.max_running = max_running
        self.lookahead = lookahead  # decode steps per host sync (None: the paged module's default)
        self.last_generator = None  # the PagedGenerator of the last call (its preemption count)
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.max_batch = max_batch
        self.notes: list[str] = []
        # only the paged path hands requests out as they end
        self.capabilities = dataclasses.replace(HFBackend.capabilities, streaming=paged)

    def generate(self, requests: list[GenRequest], sampling: SamplingConfig,
                 indices: list[int] | None = None, on_request=None) -> list[list[Completion]]:
        """One list of completions per request; with `indices`, only for those requests (in that
        order), each row sampled with the noise it has in the whole call (its index among all
        the call's rows), so a rank that generates a share of the call (train.generate.ranks)
        yields the tokens one process yields for those requests.

        `on_request(i, completions)`: called on the paged path as soon as every row of request
        `i` has ended, while the other requests still generate (the round executes a finished
        sibling group meanwhile); requests it was not called for are in the returned lists only.
        """
        plans = plan_prompts(self.tokenizer, requests, sampling)
        wanted = range(len(requests)) if indices is None else indices
        noise = _noise_rows(requests, plans)
        rows = [(i, row) for i in wanted for row in noise[i]]  # a failed prompt has no rows
        out = {i: failed(requests[i].messages, plans[i], requests[i].n) if plans[i].error else [] for i in wanted}
        done: dict[int, list] = {}

        def completion(i: int, ids, lps) -> Completion:
            return completion_from_tokens(self.tokenizer, requests[i].messages, plans[i].token_ids, ids, lps)

        on_row = None
        if on_request is not None:
            left = {i: len(noise[i]) for i in wanted if noise[i]}
            got: dict[int, dict] = {i: {} for i in left}

            def on_row(k: int, ids, lps) -> None:  # row k of `rows` has ended
                i = rows[k][0]
                got[i][k] = completion(i, list(ids), list(lps))
                left[i] -= 1
                if left[i] == 0:
                    done[i] = [got[i][j] for j in sorted(got[i])]
                    on_request(i, done[i])

        row_plans = [plans[i] for i, _ in rows]
        if sampling.forced_lengths != "off":  # each row stops at its drawn length, EOS ignored
            from train.generate.lengths import forced_lengths

            budgets = [p.max_new_tokens for i in range(len(requests)) for p in [plans[i]] * len(noise[i])]
            lengths = forced_lengths(sampling.forced_lengths, budgets, sampling.seed)
            row_plans = [dataclasses.replace(plans[i], max_new_tokens=lengths[row]) for i, row in rows]
        self.forcing = sampling.forced_lengths != "off"
        try:
            sampled = self._sample_rows(row_plans, sampling, [row for _, row in rows], on_row)
        finally:
            self.forcing = False
        for (i, _), (ids, lps) in zip(rows, sampled):
            if i not in done:
                out[i].append(completion(i, ids, lps))
        return [done.get(i, out[i]) for i in wanted]

    def _sample_rows(self, plans, sampling: SamplingConfig, rows: list[int],
                     on_row=None) -> list[tuple[list[int], list[float]]]:
        """Sample each planned row; `rows` are their noise indices. `on_row(k, ids, logprobs)`:
        row k has ended (the paged path calls it as rows end; the plain path, never)."""
        if not plans:
            return []
        was_training = self.model.training
        self.model.eval()  # a model left in train mode after an update would run checkpointing, no KV cache
        try:
            if self.paged:
                return self._sample_paged(plans, sampling, rows, on_row)
            return self._sample_sorted(plans, sampling, rows)
        finally:
            self.model.train(was_training)

    def _sample_sorted(self, plans, sampling: SamplingConfig, rows: list[int]) -> list[tuple[list[int], list[float]]]:
        """Rows sorted by prompt length (less padding), in batches of `max_batch`."""
        order = sorted(range(len(plans)), key=lambda i: len(plans[i].token_ids))
        size = self.max_batch or len(plans)
        results: dict[int, tuple] = {}
        for start in range(0, len(order), size):
            chunk = order[start:start + size]
            batch = make_batch([plans[i].token_ids for i in chunk], [plans[i].max_new_tokens for i in chunk],
                               self.pad_id, self.device)
            keys = row_keys(sampling.seed, [rows[i] for i in chunk], self.device)
            ids, lps = decode(self.model, batch, self.eos_ids, self.pad_id, sampling, keys)
            results.update({i: (a, b) for i, a, b in zip(chunk, ids, lps)})
        return [results[i] for i in range(len(plans))]

    def _sample_paged(self, plans, sampling: SamplingConfig, rows: list[int],
                      on_row=None) -> list[tuple[list[int], list[float]]]:
        from train.generate.paged import BLOCK_SIZE, PagedGenerator, kv_blocks_for

        blocks = self.kv_blocks
        if blocks is None and self.device.type == "cuda":
            blocks = kv_blocks_for(self.model, self.gpu_memory_utilization)
        if blocks is None:
            blocks = 1 + sum(-(-(len(p.token_ids) + p.max_new_tokens) // BLOCK_SIZE) for p in plans)
        generator = PagedGenerator(self.model, self.eos_ids, num_blocks=blocks, max_running=self.max_running,
                                   lookahead=self.lookahead)
        self.last_generator = generator
        try:
            return generator.generate([p.token_ids for p in plans], [p.max_new_tokens for p in plans], sampling,
                                      rows=rows, on_finished=on_row)
        finally:
            generator.pool = None  # the pool's memory goes back before the learner's phases
            if self.device.type == "cuda":
                import torch

                torch.cuda.empty_cache()

    @property
    def eos_ids(self) -> list[int]:
        if getattr(self, "forcing", False):  # forced lengths: no row ends early
            return []
        ids = {self.tokenizer.eos_token_id}
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
        return sorted(i for i in ids if i is not None)

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.eos_ids[0]


def _noise_rows(requests: list[GenRequest], plans) -> list[range]:
    """Each request's rows' noise indices: the call's runnable rows numbered in request order
    (a request whose prompt failed its caps has none and takes no numbers)."""
    out, start = [], 0
    for request, plan in zip(requests, plans):
        n = 0 if plan.error else request.n
        out.append(range(start, start + n))
        start += n
    return out
