"""What fits one H200 and one H100 at each arm's caps: train.fit's estimate as a Markdown table.

For each model shape (train.model_shapes) and arm (warehouse/arms.py) and card, the first of
these settings under which every phase fits: the defaults (the policy's weights beside an
engine at `gpu_memory_utilization` 0.6), then `policy_offload=host` at 0.6, then at 0.85 (a
larger KV pool: more of the round's rows decode at once). Cards by the memory torch reports:
H200 140.4 GiB, H100 79.2 GiB.

    PYTHONPATH=. python3 benchmarks/fit_table.py [README.md]
"""
from __future__ import annotations

from train.fit import GIB, MARGIN, RESERVED, Plan, estimate
from train.model_shapes import shape_config
from warehouse.arms import get_arm

CARDS = {"H200": 140.4, "H100": 79.2}
SHAPES = {"qwen3_8b": "Qwen3-8B", "qwen3_14b": "Qwen3-14B", "qwen3_5_27b": "Qwen3.5-27B (hybrid)",
          "qwen3_32b": "Qwen3-32B"}
ARMS = ("hr", "hr16k", "hr24k_u6", "hr32k")
TRIES = ((False, 0.6), (True, 0.6), (True, 0.85))
ROWS = 64  # 4 tasks x 16 siblings
# (shape, arm, card) -> what a device run showed (benchmarks/RESULTS.md); the rest are estimates
MEASURED = {
    ("qwen3_8b", "hr24k_u6", "H200"): "measured: `train run`, two rounds in one process, 87.1 / 85.2 s, no OOM "
                                      "(RESULTS.md, vLLM section, 2026-12-04)",
    **{("qwen3_5_27b", arm, "H100"): "measured (the update alone, big_bench.py): the step ran at 8,192 and 10,240 "
                                     "tokens (69.0 / 68.9 GiB) and ran out of memory at 12,288 (70.6 GiB allocated)"
       for arm in ("hr", "hr16k", "hr24k_u6", "hr32k")},
}
MEAN_ROW = 10000  # tokens of an average row (prompt + response) for the rows decoding at once


def best(shape: str, arm_name: str, card_gib: float):
    arm = get_arm(arm_name)
    result = None
    for offload, util in TRIES:
        plan = Plan(total_cap=arm.total_cap, rows=ROWS, rank=arm.lora_rank or 32, utilization=util,
                    offload=offload, mean_row_tokens=min(MEAN_ROW, arm.total_cap))
        result = estimate(shape_config(shape), plan, int(card_gib * GIB))
        if result.fits:
            return result
    return result


def row(shape: str, arm_name: str, card: str) -> str:
    result = best(shape, arm_name, CARDS[card])
    phases = {p.name: p.peak / GIB for p in result.phases}
    arm = get_arm(arm_name)
    caps = f"{arm.prompt_cap:,} / {arm.response_cap:,} / {arm.total_cap:,}"
    if result.fits:
        plan = result.plan
        setting = ("policy_offload=host, " if plan.offload else "") + f"util {plan.utilization}"
        verdict = f"**fits** ({setting}; {result.kv_rows_at_once} rows of {min(MEAN_ROW, arm.total_cap):,} at once)"
    else:
        problem = result.problems[-1]
        verdict = f"**no**: {problem.split(' (')[0]} over {MARGIN * CARDS[card] - RESERVED / GIB:.0f}; {problem.split(': ', 1)[-1]}"
    return (f"| {SHAPES[shape]} | {arm_name} ({caps}) | {card} | {phases['gen']:.0f} | {phases['step']:.0f} | "
            f"{phases['sync']:.0f} | {verdict} | {MEASURED.get((shape, arm_name, card), 'estimated')} |")


def table() -> list[str]:
    lines = ["| model | arm (caps) | card | gen GiB | step GiB | sync GiB | verdict | source |",
             "|---|---|---|---:|---:|---:|---|---|"]
    return lines + [row(shape, arm, card) for shape in SHAPES for arm in ARMS for card in CARDS]


def main() -> None:
    """Print the table; with a file argument (README.md), replace the table between its
    `<!-- fit-table -->` markers (indented as the list item it sits in)."""
    import re
    import sys
    from pathlib import Path

    lines = table()
    if len(sys.argv) < 2:
        print("\n".join(lines))
        return
    path = Path(sys.argv[1])
    text = path.read_text()
    block = "\n".join("  " + line for line in lines)
    new, count = re.subn(r"(<!-- fit-table -->\n).*?(\n *<!-- /fit-table -->)", lambda m: m[1] + block + m[2], text,
                         flags=re.S)
    if count != 1:
        sys.exit(f"{path}: no <!-- fit-table --> ... <!-- /fit-table --> block to replace")
    path.write_text(new)


if __name__ == "__main__":
    main()
