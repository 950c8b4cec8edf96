#!/usr/bin/env bash
# The `train run` loop on two GPUs (torchrun ranks, FSDP over NCCL) against one process on one
# GPU, same seed and settings, into one warehouse; then a 2-rank run resumed from the
# 1-process checkpoint (checkpoints are world-size free). Prints the comparison
# (benchmarks/multi_gpu_compare.py): round 1 node by node, step 1's metrics, the update's
# seconds per step (2 ranks over 1 process), the resumed run's lineage.
#
#   bash benchmarks/multi_gpu_run.sh OUT_DIR [ROUNDS]
#
# --set total_cap=8192 makes the micro-batch budget 8192 tokens, so a round's 64 nodes pack
# into several micro-batches that the ranks share (at the arm's 36864 they fit in one).
set -euo pipefail
out=${1:?usage: multi_gpu_run.sh OUT_DIR [ROUNDS]}
rounds=${2:-3}
mkdir -p "$out"
db="duckdb:///$out/multi_gpu.duckdb"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
common=(--arm hr24k_u6 --model tiny --device cuda --seed 0 --db "$db" --checkpoint-dir "$out/checkpoints"
        --set total_cap=8192)
warehouse --db "$db" init
nvidia-smi -L
start=$(date +%s)
train run --nproc 2 "${common[@]}" --rounds "$rounds" --run-id nproc2 2>&1 | tee "$out/nproc2.log"
echo "nproc2 wall: $(( $(date +%s) - start )) s"
start=$(date +%s)
train run "${common[@]}" --rounds "$rounds" --run-id nproc1 2>&1 | tee "$out/nproc1.log"
echo "nproc1 wall: $(( $(date +%s) - start )) s"
train run --nproc 2 "${common[@]}" --rounds 1 --resume-from "nproc1:$((rounds - 1))" --run-id nproc2_resumed \
    2>&1 | tee "$out/resumed.log"
python3 "$(dirname "$0")/multi_gpu_compare.py" "$out/multi_gpu.duckdb" --rounds "$rounds" | tee "$out/compare.txt"
