"""The paged-decode kernel's launch settings, measured: achieved bandwidth per setting against the
shipped one, on the shapes an arm-mix round decodes through.

One decode-attention call of one layer (`train.generate.paged_kernel.paged_decode`, the split-K
Triton kernel plus its log-sum-exp merge), over a pool whose blocks are handed out in random
order (a long run's fragmentation). Scenarios follow a cap-24,576/32,768 round: the bulk (64 rows
of 4k-14k tokens), the middle, and the long tail (a few rows of 25k-40k tokens), each with the
table width the decode graph would use (the power-of-two bucket of the longest row). Head shapes:
the Qwen3-1.7B's (16 query / 8 K/V heads, 128) and the Qwen3-8B's (32 / 8, 128).

Variants: the pool's layout (token-major `nhd`, as the pool was first written, or head-major
blocks `hnd`, vLLM's and FlashInfer's), programs to aim for, tile, warps, pipeline stages, and
what a split covers (`row`: each row's own length cut into the grid's splits; `width`: the
table's width cut, so a row shorter than the width leaves its last splits empty).
Baseline: the module's settings when the run starts (`--baseline`, default the shipped ones).
Each variant's time is the median of `--reps` CUDA-event-timed calls; GB/s counts the K and V
bytes of the live tokens (the floor any kernel must read). A variant whose output differs from
the baseline's by more than 2e-2 is reported and never chosen.

    PYTHONPATH=. python3 benchmarks/paged_kernel_bench.py --out paged_kernel.json
"""
from __future__ import annotations

import argparse
import itertools
import json

SCENARIOS = [  # (name, rows, shortest, longest, table width in tokens)
    ("bulk", 64, 4_000, 14_000, 16_384),
    ("middle", 32, 10_000, 20_000, 32_768),
    ("tail16", 16, 20_000, 30_000, 32_768),
    ("tail8", 8, 25_000, 32_000, 32_768),
    ("tail7", 7, 19_000, 43_000, 65_536),  # the cap-32,768 round's last ~300 s (1.7B: 7 rows at 19k-43k)
    ("tail4", 4, 30_000, 34_000, 65_536),
    ("tail2", 2, 38_000, 42_000, 65_536),
]
HEADS = {"1.7b": (16, 8, 128), "8b": (32, 8, 128)}


def main() -> None:
    import torch

    from train.generate import paged_kernel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="nhd,hnd",
                        help="pool layouts: nhd (slots, K/V heads, dim), hnd (blocks, K/V heads, block size, dim)")
    parser.add_argument("--targets", default="528,1056,2112,4224,8448", help="programs to aim for")
    parser.add_argument("--tiles", default="64,128")
    parser.add_argument("--warps", default="4,8")
    parser.add_argument("--stages", default="2,3,4")
    parser.add_argument("--splits", default="row,width", help="what a split covers: row, width")
    parser.add_argument("--baseline", default=None,
                        help="layout,target,tile,warps,stages,split (default: the module's)")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--bandwidth", type=float, default=4.8e12)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    base = tuple(x if i in (0, 5) else int(x) for i, x in enumerate(args.baseline.split(","))) if args.baseline else (
        paged_kernel.LAYOUT, paged_kernel.TARGET_PROGRAMS, paged_kernel.TILE, paged_kernel.WARPS, paged_kernel.STAGES,
        paged_kernel.SPLIT)
    grid = [base] + [v for v in itertools.product(args.layouts.split(","), *(
        tuple(int(x) for x in a.split(",")) for a in (args.targets, args.tiles, args.warps, args.stages)),
        args.splits.split(",")) if v != base]
    device, bs = "cuda", 16
    torch.manual_seed(0)
    results: dict = {"baseline": dict(zip(("layout", "target", "tile", "warps", "stages", "split"), base)),
                     "scenarios": {}}
    totals = {v: 0.0 for v in grid}
    for size, (heads, kv_heads, dim) in HEADS.items():
        most = max(rows * longest for _, rows, _, longest, _ in SCENARIOS)
        blocks = most // bs + 64
        pools = {"nhd": (torch.randn((blocks * bs, kv_heads, dim), device=device, dtype=torch.bfloat16),
                         torch.randn((blocks * bs, kv_heads, dim), device=device, dtype=torch.bfloat16))}
        if "hnd" in args.layouts:  # the same K/V, head-major within each block
            pools["hnd"] = tuple(p.view(blocks, bs, kv_heads, dim).transpose(1, 2).contiguous() for p in pools["nhd"])
        for name, rows, shortest, longest, width in SCENARIOS:
            lengths = torch.randint(shortest, longest + 1, (rows,), device=device)
            order = torch.randperm(blocks - 1, device=device) + 1
            tables = torch.zeros((rows, width // bs), dtype=torch.long, device=device)
            used = 0
            for r, n in enumerate(lengths.tolist()):
                need = -(-n // bs)
                tables[r, :need] = order[used:used + need]
                used += need
            query = torch.randn((rows, heads, dim), device=device, dtype=torch.bfloat16)
            live = int(lengths.sum()) * kv_heads * dim * 2 * 2
            want = None
            entry: dict = {"rows": rows, "tokens": int(lengths.sum()), "width": width, "variants": {}}
            for v in grid:
                layout, target, tile, warps, stages, split = v
                pool_k, pool_v = pools[layout]

                def call():
                    return paged_kernel.paged_decode(query, pool_k, pool_v, tables, lengths, width, bs, dim ** -0.5,  # noqa: F821 - bound above; the del after the loop frees them
                                                     target=target, tile=tile, warps=warps, stages=stages,
                                                     split=split)

                try:
                    got = call()
                except Exception as exc:  # noqa: BLE001 - a setting Triton cannot build (shared memory)
                    entry["variants"][str(v)] = {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}
                    totals[v] = float("inf")
                    continue
                if want is None:
                    want = got.float()
                err = (got.float() - want).abs().max().item()
                times = []
                for _ in range(args.reps):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    call()
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) / 1e3)
                seconds = sorted(times)[len(times) // 2]
                entry["variants"][str(v)] = {"ms": round(seconds * 1e3, 4), "gb_s": round(live / seconds / 1e9, 1),
                                             "of_peak": round(live / seconds / args.bandwidth, 3),
                                             "max_err": round(err, 5)}
                totals[v] = totals[v] + seconds if err <= 2e-2 else float("inf")
            base_ms = entry["variants"][str(base)]["ms"]
            best = min((x for x in entry["variants"].items() if "ms" in x[1] and x[1]["max_err"] <= 2e-2),
                       key=lambda x: x[1]["ms"])
            entry["best"] = {"variant": best[0], **best[1], "vs_baseline": round(base_ms / best[1]["ms"], 2)}
            results["scenarios"][f"{size}/{name}"] = entry
            print(f"{size:>4} {name:<7} rows {rows:>2}, {entry['tokens']:>7,} tokens: baseline {base_ms:.3f} ms "
                  f"({entry['variants'][str(base)]['of_peak']:.2f} of peak); best {best[0]} {best[1]['ms']:.3f} ms "
                  f"({best[1]['of_peak']:.2f} of peak) = {base_ms / best[1]['ms']:.2f}x", flush=True)
        del pools, pool_k, pool_v
        torch.cuda.empty_cache()
    ranked = sorted((t, v) for v, t in totals.items())
    results["ranking"] = [{"variant": str(v), "total_ms": round(t * 1e3, 3),
                           "vs_baseline": round(totals[base] / t, 3)} for t, v in ranked[:10]]
    print("summed over every scenario and both shapes (baseline "
          f"{base}: {totals[base] * 1e3:.2f} ms):")
    for row in results["ranking"]:
        print(f"  {row['variant']:<30} {row['total_ms']:>8.2f} ms  {row['vs_baseline']:.3f}x the baseline")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
