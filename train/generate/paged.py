"""Paged KV cache and continuous batching: the `hf` backend's generation path.

Memory follows the live tokens, not the cap:
- `BlockPool`: per layer, one flat K and one flat V tensor of `num_blocks * block_size` token
  slots. A row holds a list of blocks (its block table), one more each `block_size` tokens,
  all returned when it ends. Siblings share the full blocks of their prompt (reference counts);
  the prompt's last, partial block is copied per row, since each row writes its own tokens
  after it.
- `PagedGenerator`: a scheduler. Rows wait in request order; up to `max_running` run at once.
  Each iteration admits waiting rows while blocks are free, keeping one free block per running
  row (a prompt runs once; its siblings take its blocks and its last logits, no forward), then
  decodes every running row `lookahead` tokens (1 on CPU, 8 on GPU: one host sync per run of
  steps, the sampled tokens fed back on the device). A row that ends frees its blocks, and the
  next waiting row joins at the following iteration (continuous batching).
- Preemption by recompute (vLLM's policy): when a running row needs a block and none is free,
  the latest-admitted running row is preempted, its blocks freed; it waits at the head of the
  queue and is later prefilled again with its prompt and the tokens it had. A single row that
  cannot fit in the whole pool is an error naming the setting to raise.

Each row's sampling noise depends only on (seed, row index, step) (`sampler.row_noise`), so the
tokens do not depend on which rows share a forward, nor on preemption: the paged path yields
the tokens of the plain (unpaged) path, and a tiny KV budget the tokens of an unconstrained one.

The model itself is unchanged: it runs with `use_cache=False`, and its attention is swapped
(transformers' AttentionInterface, name `paged`) for `paged_attention`, which writes each
layer's new K/V into the pool and attends over the row's blocks. A prefill (one row, many
tokens, nothing cached before them) attends causally over its own K/V (SDPA, flash); a decode
step (many rows, one token) reads each row's slots through its block table: on the GPU with the
Triton kernel of :mod:`train.generate.paged_kernel` (in place, split-K), elsewhere by gathering
them (torch, a reference the kernel is tested against).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from train.generate import paged_kernel
from train.generate.decode_attention import use_attention
from train.generate.sampler import row_keys, sample_next

NAME = "paged"
BLOCK_SIZE = 16
LOOKAHEAD = 8
RESERVE_TOKENS = 40_960  # the longest prefill the activation reserve covers (prompt + response caps)
GATHER_SLOTS = 1 << 18  # decode attention gathers at most this many token slots per chunk of rows


class KVBudgetError(RuntimeError):
    """The KV pool cannot hold one row (the message names the setting to raise)."""


# --- the pool -------------------------------------------------------------------------


class BlockPool:
    """K/V slots of every layer, handed out in blocks of `block_size` tokens."""

    def __init__(self, config, num_blocks: int, block_size: int, device, dtype):
        import torch

        heads = config.num_key_value_heads or config.num_attention_heads
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        slots = num_blocks * block_size
        self.keys = [torch.zeros((slots, heads, dim), device=device, dtype=dtype) for _ in range(config.num_hidden_layers)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.block_size, self.num_blocks = block_size, num_blocks
        self.refs = [0] * num_blocks
        # block 0 is never handed out: padding rows of a captured decode step write and read it
        self.free = list(range(num_blocks - 1, 0, -1))  # pop() hands out block 1 first
        self.usable = num_blocks - 1

    @staticmethod
    def bytes_per_block(config, block_size: int, dtype) -> int:
        import torch

        heads = config.num_key_value_heads or config.num_attention_heads
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return 2 * config.num_hidden_layers * block_size * heads * dim * torch.empty((), dtype=dtype).element_size()

    def take(self, n: int, reserve: int = 0) -> list[int] | None:
        if n + reserve > len(self.free):
            return None
        blocks = [self.free.pop() for _ in range(n)]
        for b in blocks:
            self.refs[b] = 1
        return blocks

    def share(self, blocks: list[int]) -> list[int]:
        for b in blocks:
            self.refs[b] += 1
        return list(blocks)

    def release(self, blocks: list[int]) -> None:
        for b in blocks:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free.append(b)

    def copy_block(self, src: int, dst: int) -> None:
        bs = self.block_size
        for pool in (*self.keys, *self.values):
            pool[dst * bs:(dst + 1) * bs] = pool[src * bs:(src + 1) * bs]

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)


# --- attention over the pool ------------------------------------------------------------


@dataclass
class Step:
    """What the attention of one forward needs: where new K/V go, which slots each row reads."""

    pool: BlockPool
    slots: object  # (N,) long: the pool slot of every new token, in input order
    prefill: bool  # one row of many tokens (causal over themselves) or many rows of one token
    tables: object = None  # decode: (N, M) long block tables, padded with block 0
    lengths: object = None  # decode: (N,) long tokens each row attends to (new one included)
    max_length: int = 0


_step: Step | None = None


def paged_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """query (B, Hq, L, D), key/value (B, Hkv, L, D) of the new tokens -> ((B, L, Hq, D), None)."""
    import torch

    step, layer = _step, module.layer_idx
    pool_k, pool_v = step.pool.keys[layer], step.pool.values[layer]
    batch, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    pool_k[step.slots] = key.transpose(1, 2).reshape(-1, kv_heads, dim).to(pool_k.dtype)
    pool_v[step.slots] = value.transpose(1, 2).reshape(-1, kv_heads, dim).to(pool_v.dtype)
    scale = scaling if scaling is not None else dim ** -0.5
    if step.prefill:  # nothing cached before these tokens: causal over themselves
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scale,
                                                               enable_gqa=kv_heads != heads)
        return out.transpose(1, 2), None
    if query.is_cuda and paged_kernel.available() and paged_kernel.supports(dim):
        out = paged_kernel.paged_decode(query[:, :, 0], pool_k, pool_v, step.tables, step.lengths, step.max_length,
                                        step.pool.block_size, scale)
        return out.reshape(batch, 1, heads, dim), None
    outs = [_decode_rows(query[rows], pool_k, pool_v, step, rows, scale)
            for rows in _row_chunks(batch, step.max_length)]
    return torch.cat(outs).reshape(batch, 1, heads, dim), None


def _row_chunks(rows: int, max_length: int) -> list[slice]:
    per = max(1, GATHER_SLOTS // max(max_length, 1))
    return [slice(i, min(i + per, rows)) for i in range(0, rows, per)]


def _decode_rows(query, pool_k, pool_v, step: Step, rows: slice, scale: float):
    """One query token per row against its block table: (n, Hq, 1, D) -> (n, Hq, D)."""
    import torch

    bs = step.pool.block_size
    blocks = -(-step.max_length // bs)
    tables = step.tables[rows, :blocks]  # (n, M)
    index = (tables[:, :, None] * bs + torch.arange(bs, device=tables.device)).reshape(len(tables), -1)  # (n, S)
    keys, values = pool_k[index], pool_v[index]  # (n, S, Hkv, D)
    n, heads, _, dim = query.shape
    kv_heads = keys.shape[2]
    q = query.reshape(n, kv_heads, heads // kv_heads, dim)  # (n, Hkv, G, D)
    scores = torch.matmul(q, keys.permute(0, 2, 3, 1)).float() * scale  # (n, Hkv, G, S)
    visible = torch.arange(index.shape[1], device=index.device)[None, :] < step.lengths[rows, None]  # (n, S)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, -1).to(values.dtype)
    return torch.matmul(probs, values.transpose(1, 2)).reshape(n, heads, dim)  # (n, Hkv, G, D) -> (n, Hq, D)


def _no_mask(*args, **kwargs):
    return None


_registered = False


def register() -> None:
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(NAME, paged_attention)
        AttentionMaskInterface.register(NAME, _no_mask)
        _registered = True


@contextlib.contextmanager
def _stepping(step: Step):
    global _step
    _step = step
    try:
        yield
    finally:
        _step = None


# --- rows and the scheduler -------------------------------------------------------------


@dataclass
class Row:
    index: int  # position in the request order: its noise key
    prompt: list
    budget: int
    tokens: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    blocks: list = field(default_factory=list)
    cached: int = 0  # tokens whose K/V are in its blocks
    slot: int = 0  # its row in the generator's block-table tensor
    ended: bool = False  # sampled an EOS token

    @property
    def finished(self) -> bool:
        return self.ended or len(self.tokens) >= self.budget


@dataclass
class SharedPrompt:
    """A prefilled prompt that waiting siblings can take: its full blocks, its last partial
    block and its next-token logits. Holds a reference on the blocks until dropped."""

    full: list
    tail: int | None
    logits: object  # (V,)
    waiting: int  # fresh rows of this prompt not admitted yet


class PagedGenerator:
    """Samples rows to EOS or their budget over a paged KV pool (see the module docstring)."""

    def __init__(self, model, eos_ids: list[int], num_blocks: int, block_size: int = BLOCK_SIZE,
                 max_running: int = 256, budget_setting: str = "gpu_memory_utilization", use_graphs: bool | None = None,
                 lookahead: int | None = None):
        import torch

        self.model = model
        self.eos_ids = set(eos_ids)
        self.device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        self.config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.pool = BlockPool(self.config, num_blocks, block_size, self.device, dtype)
        self.max_running = max_running
        self.budget_setting = budget_setting
        # decode steps per host sync: on the GPU the host queues several steps ahead instead of
        # waiting for each one (a row that ends at EOS inside a run wastes at most lookahead - 1 steps)
        self.lookahead = lookahead or (LOOKAHEAD if self.device.type == "cuda" else 1)
        # a 4D mask is passed through untouched by transformers' mask builders (no host sync, so
        # the decode step can be captured); paged_attention ignores it
        self._no_mask = torch.ones((1, 1, 1, 1), dtype=torch.bool, device=self.device)
        self.use_graphs = self.device.type == "cuda" if use_graphs is None else use_graphs
        self.graphs: dict[tuple[int, int], DecodeGraph] = {}
        self._graph_pool = None
        self.preemptions = 0
        self._torch = torch

    def generate(self, prompts: list[list[int]], budgets: list[int], sampling,
                 rows: list[int] | None = None, progress=None,
                 on_finished=None) -> list[tuple[list[int], list[float]]]:
        """(token ids, logprobs) per prompt; `rows` are the noise indices (default 0..n-1).
        `progress(generated, running, waiting)` is called after every host sync;
        `on_finished(k, tokens, logprobs)` as soon as prompt k's row has ended (its final tokens)."""
        rows = list(range(len(prompts))) if rows is None else rows
        pending = [Row(r, list(p), b) for r, p, b in zip(rows, prompts, budgets)]
        self.keys = dict(zip(rows, row_keys(sampling.seed, rows, self.device).tolist()))
        for i, row in enumerate(pending):
            row.slot = i
        width = _bucket(max(self.pool.blocks_for(len(r.prompt) + r.budget) for r in pending) if pending else 1, 16)
        self.tables = self._torch.zeros((len(pending), width), dtype=self._torch.long, device=self.device)
        self._table_writes: list[tuple[int, int, int]] = []
        self.sampling = sampling
        self.on_finished = on_finished
        self.shared: dict[tuple, SharedPrompt] = {}
        for row in pending:
            key = tuple(row.prompt)
            if key in self.shared:
                self.shared[key].waiting += 1
            else:
                self.shared[key] = SharedPrompt([], None, None, 1)
        register()
        waiting, running = list(pending), []
        with self._torch.inference_mode(), use_attention(self.model, NAME):
            while waiting or running:
                self._admit(waiting, running)
                self._decode(waiting, running)
                if progress is not None:
                    progress(sum(len(r.tokens) for r in pending), len(running), len(waiting))
        for prompt in list(self.shared):
            self._drop_shared(prompt)
        return [(row.tokens, row.logprobs) for row in pending]

    # -- admission ----------------------------------------------------------------------

    def _admit(self, waiting: list, running: list) -> None:
        while waiting and len(running) < self.max_running:
            row = waiting[0]
            if not self._start(row, reserve=len(running)):
                return
            waiting.pop(0)
            self._table_writes += [(row.slot, j, b) for j, b in enumerate(row.blocks)]
            if row.finished:
                self.pool.release(row.blocks)
                row.blocks = []
                self._finished(row)
            else:
                running.append(row)

    def _start(self, row: Row, reserve: int) -> bool:
        """Give `row` its K/V and sample its next token; False when the pool cannot take it now
        and still leave `reserve` blocks free (one for each running row's next block: without
        it a readmitted row would be preempted again at once, vLLM's watermark)."""
        shared = self.shared.get(tuple(row.prompt)) if not row.tokens else None
        if shared is not None and shared.logits is not None:
            return self._start_shared(row, shared, reserve)
        context = row.prompt + row.tokens
        blocks = self._take(self.pool.blocks_for(len(context)), idle=reserve == 0, reserve=reserve)
        if blocks is None:
            return False
        row.blocks, row.cached = blocks, len(context)
        logits = self._prefill(context, blocks)
        if shared is not None:
            shared.waiting -= 1
            if shared.waiting > 0:
                self._keep_shared(row, shared, logits)
            else:
                self._drop_shared(tuple(row.prompt))
        self._sample([row], logits[None])
        return True

    def _start_shared(self, row: Row, shared: SharedPrompt, reserve: int) -> bool:
        tail = None
        if shared.tail is not None:
            tail = self.pool.take(1, reserve)  # never evicts: the prompt it would drop is this one
            if tail is None:
                return False
            self.pool.copy_block(shared.tail, tail[0])
        row.blocks = self.pool.share(shared.full) + (tail or [])
        row.cached = len(row.prompt)
        shared.waiting -= 1
        logits = shared.logits
        if shared.waiting == 0:
            self._drop_shared(tuple(row.prompt))
        self._sample([row], logits[None])
        return True

    def _keep_shared(self, row: Row, shared: SharedPrompt, logits) -> None:
        bs, length = self.pool.block_size, len(row.prompt)
        full = length // bs
        shared.full = self.pool.share(row.blocks[:full])
        shared.tail = None
        if length % bs:
            shared.tail = row.blocks[full]
            self.pool.share([shared.tail])
        shared.logits = logits

    def _drop_shared(self, prompt: tuple) -> None:
        shared = self.shared.pop(prompt, None)
        if shared is not None and shared.logits is not None:
            self.pool.release(shared.full + ([shared.tail] if shared.tail is not None else []))

    def _take(self, n: int, idle: bool, reserve: int = 0) -> list[int] | None:
        """n free blocks (leaving `reserve` free), dropping kept prompts first when short."""
        blocks = self.pool.take(n, reserve)
        while blocks is None and self._evict_shared():
            blocks = self.pool.take(n, reserve)
        if blocks is None and idle:
            raise KVBudgetError(f"the KV pool ({self.pool.usable} blocks of {self.pool.block_size} tokens) cannot hold one row of {n} blocks; "
                                f"raise --set {self.budget_setting}=... or lower --set response_cap=...")
        return blocks

    def _evict_shared(self) -> bool:
        """Drop one kept prompt (its waiting siblings will prefill it again); False if none."""
        for prompt, shared in self.shared.items():
            if shared.logits is not None:
                self._drop_shared(prompt)
                self.shared[prompt] = SharedPrompt([], None, None, shared.waiting)
                return True
        return False

    def _prefill(self, context: list[int], blocks: list[int]):
        torch = self._torch
        slots = self._slots(blocks, 0, len(context))
        ids = torch.tensor([context], dtype=torch.long, device=self.device)
        positions = torch.arange(len(context), device=self.device)[None]
        with _stepping(Step(self.pool, slots, prefill=True)):
            out = self.model(input_ids=ids, position_ids=positions, attention_mask=self._no_mask, use_cache=False,
                             logits_to_keep=1)
        return out.logits[0, -1]

    def _slots(self, blocks: list[int], start: int, end: int):
        bs = self.pool.block_size
        table = self._torch.tensor(blocks, dtype=self._torch.long, device=self.device)
        pos = self._torch.arange(start, end, device=self.device)
        return table[pos // bs] * bs + pos % bs

    # -- decode -------------------------------------------------------------------------

    def _decode(self, waiting: list, running: list) -> None:
        """Up to `lookahead` tokens for every running row, with one host sync at the end
        (preempting the latest admitted when blocks run out). The steps in between feed each
        row's sampled token back on the device; a row that hits EOS before the end of the run
        keeps only its tokens up to the EOS. Rows join and leave only between runs."""
        steps = min([self.lookahead] + [row.budget - len(row.tokens) for row in running]) if running else 1
        self._grow(waiting, running, steps)
        if not running:
            return
        torch, bs = self._torch, self.pool.block_size
        self._flush_tables()
        width = max(len(row.blocks) for row in running)
        slots_of = torch.tensor([row.slot for row in running], dtype=torch.long, device=self.device)
        tables = self.tables[slots_of, :width]
        host = torch.tensor([[row.tokens[-1], row.cached, self.keys[row.index], len(row.tokens)] for row in running],
                            dtype=torch.long)
        ids, pos, keys, drawn = host.to(self.device).unbind(1)
        graph = self._graph(len(running), width) if self.use_graphs else None
        s, tokens, logprobs = self.sampling, [], []
        for j in range(steps):
            slots = tables.gather(1, (pos // bs)[:, None])[:, 0] * bs + pos % bs
            if graph is not None:
                logits = graph.replay(ids, pos, slots, tables, self.tables, slots_of)
            else:
                step = Step(self.pool, slots, prefill=False, tables=tables, lengths=pos + 1, max_length=width * bs)
                with _stepping(step):
                    logits = self.model(input_ids=ids[:, None], position_ids=pos[:, None],
                                        attention_mask=self._no_mask, use_cache=False).logits[:, -1]
            ids, lps = sample_next(logits, s.temperature, s.top_k, s.top_p, keys, drawn + j)
            tokens.append(ids)
            logprobs.append(lps)
            pos = pos + 1
        tokens, logprobs = torch.stack(tokens, 1).tolist(), torch.stack(logprobs, 1).float().tolist()  # the sync
        for row, row_tokens, row_logprobs in zip(running, tokens, logprobs):
            for token, logprob in zip(row_tokens, row_logprobs):
                row.cached += 1
                self._append(row, token, logprob)
                if row.finished:
                    break
        for row in [r for r in running if r.finished]:
            running.remove(row)
            self.pool.release(row.blocks)
            row.blocks = []
            self._finished(row)

    def _finished(self, row: Row) -> None:
        if self.on_finished is not None:
            self.on_finished(row.slot, row.tokens, row.logprobs)

    def _grow(self, waiting: list, running: list, steps: int = 1) -> None:
        """Every running row gets the blocks its next `steps` tokens need; preempt from the back
        if short."""
        i = 0
        while i < len(running):
            row = running[i]
            missing = self.pool.blocks_for(row.cached + steps) - len(row.blocks)
            if missing <= 0:
                i += 1
                continue
            blocks = self._take(missing, idle=len(running) == 1)
            if blocks is not None:
                self._table_writes += [(row.slot, len(row.blocks) + j, b) for j, b in enumerate(blocks)]
                row.blocks += blocks
                i += 1
                continue
            victim = running.pop()  # the latest admitted
            self._preempt(victim, waiting)
            # rows before i keep their new blocks; if the victim was row i, move on

    def _graph(self, rows: int, width: int):
        """The captured decode step for this many rows and block-table width (buckets of powers
        of two); None (eager) where capture fails."""
        key = (_bucket(rows, 8), min(_bucket(width, 16), self.tables.shape[1]))
        if key not in self.graphs:
            try:
                if self._graph_pool is None:
                    self._graph_pool = self._torch.cuda.graph_pool_handle()
                self.graphs[key] = DecodeGraph(self, *key)
            except Exception as exc:  # noqa: BLE001 - capture is an optimisation: decode eagerly instead
                import warnings

                warnings.warn(f"paged decode: CUDA graph capture failed ({type(exc).__name__}: {exc}); decoding eagerly")
                self.use_graphs = False
                return None
        return self.graphs[key]

    def _flush_tables(self) -> None:
        """Blocks handed out since the last step, into the device block tables (one copy)."""
        if self._table_writes:
            torch = self._torch
            rows, cols, blocks = torch.tensor(self._table_writes, dtype=torch.long).T.to(self.device)
            self.tables[rows, cols] = blocks
            self._table_writes = []

    def _preempt(self, row: Row, waiting: list) -> None:
        self.pool.release(row.blocks)
        row.blocks, row.cached = [], 0
        waiting.insert(0, row)
        self.preemptions += 1

    # -- sampling -----------------------------------------------------------------------

    def _sample(self, rows: list, logits) -> None:
        torch = self._torch
        keys = torch.tensor([self.keys[r.index] for r in rows], dtype=torch.long, device=self.device)
        steps = torch.tensor([len(r.tokens) for r in rows], dtype=torch.long, device=self.device)
        s = self.sampling
        tokens, logprobs = sample_next(logits, s.temperature, s.top_k, s.top_p, keys, steps)
        for row, tok, lp in zip(rows, tokens.tolist(), logprobs.float().tolist()):
            self._append(row, tok, lp)

    def _append(self, row: Row, token: int, logprob: float) -> None:
        row.tokens.append(token)
        row.logprobs.append(logprob)
        row.ended = token in self.eos_ids


def _bucket(n: int, least: int) -> int:
    return max(least, 1 << (max(n, 1) - 1).bit_length())


class DecodeGraph:
    """One decode step captured as a CUDA graph for `rows` rows and `width` blocks per table.

    Static buffers hold the inputs; rows beyond the live ones are padding: they feed token 0,
    write their K/V to slot 0 of block 0 (never handed out: the generator reserves it) and read
    one slot of it. The Triton kernel's split count follows from `width`, so it is fixed too."""

    def __init__(self, generator: PagedGenerator, rows: int, width: int):
        import torch

        device, bs = generator.device, generator.pool.block_size
        self.rows, self.width = rows, width
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.pos = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.slots = torch.zeros(rows, dtype=torch.long, device=device)
        self.tables = torch.zeros((rows, width), dtype=torch.long, device=device)
        self.lengths = torch.ones(rows, dtype=torch.long, device=device)
        step = Step(generator.pool, self.slots, prefill=False, tables=self.tables, lengths=self.lengths,
                    max_length=width * bs)
        model, mask = generator.model, generator._no_mask

        def forward():
            with _stepping(step):
                return model(input_ids=self.ids, position_ids=self.pos, attention_mask=mask,
                             use_cache=False).logits[:, -1]

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                forward()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=generator._graph_pool):
            self.logits = forward()

    def replay(self, ids, pos, slots, tables, all_tables, slots_of):
        n = len(ids)
        self.ids.zero_()
        self.pos.zero_()
        self.slots.zero_()
        self.tables.zero_()
        self.lengths.fill_(1)
        self.ids[:n, 0] = ids
        self.pos[:n, 0] = pos
        self.slots[:n] = slots
        self.tables[:n] = all_tables[slots_of, :self.width]
        self.lengths[:n] = pos + 1
        self.graph.replay()
        return self.logits[:n]


def kv_blocks_for(model, gpu_memory_utilization: float, block_size: int = BLOCK_SIZE,
                  reserve_bytes: int | None = None) -> int:
    """Blocks that fit in `gpu_memory_utilization` of the GPU, after what is already allocated
    (weights, optimizer state of a co-located learner) and a reserve for activations."""
    import torch

    device = next(model.parameters()).device
    total = torch.cuda.get_device_properties(device).total_memory
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if reserve_bytes is None:  # one prefill of RESERVE_TOKENS (a recompute at the caps), sampling, graphs
        width = 6 * config.hidden_size + 3 * config.intermediate_size  # live activations per token, roughly
        reserve_bytes = 2 * 2**30 + RESERVE_TOKENS * width * 2 + 32 * 256 * config.vocab_size * 4
    free = gpu_memory_utilization * total - torch.cuda.memory_allocated(device) - reserve_bytes
    per = BlockPool.bytes_per_block(config, block_size, next(model.parameters()).dtype)
    blocks = int(free // per)
    if blocks < 1:
        raise KVBudgetError(f"gpu_memory_utilization={gpu_memory_utilization} leaves no room for the KV cache "
                            f"({torch.cuda.memory_allocated(device) / 2**30:.1f} GiB already allocated of "
                            f"{total / 2**30:.0f} GiB); raise --set gpu_memory_utilization=...")
    return blocks
