"""`train rm`: a thin click command over :func:`train.rm.run.run_rm`. No torch at import time."""
from __future__ import annotations

import click

from warehouse.options import db_option


@click.command("rm")
@click.option("--model", default="tiny", show_default=True,
              help="'tiny' (the CPU policy; a CPU-sized recipe: 64 steps of 8 pairs, LoRA r16, 256 tokens, "
                   "lr 2e-3, overridable with --set) or a local Hugging Face causal-LM directory, loaded as a "
                   "scalar sequence classifier with a fresh head (data root 004's recipe as defaults).")
@click.option("--pairs", type=click.Path(dir_okay=False), default=None,
              help="Training pairs, JSONL in the UltraFeedback shape (prompt, chosen, rejected). "
                   "Default: the bundled synthetic pairs.")
@click.option("--eval", "eval_file", type=click.Path(dir_okay=False), default=None,
              help="Evaluation rows, JSONL in the RewardBench shape (prompt, chosen, rejected, subset or "
                   "section). Default: the bundled four-section synthetic set.")
@click.option("--proxy-rows", type=click.IntRange(min=1), default=None,
              help="Rows of the fixed proxy subset scored on every artifact (default 512; 128 with --model tiny).")
@click.option("--members", type=click.IntRange(min=1), default=1, show_default=True,
              help="Soup members (>1: seeded members from the fresh base, averaged into bf16 full models).")
@click.option("--steps-per-member", type=click.IntRange(min=1), default=None,
              help="Optimizer steps per member (default: max_steps, 252).")
@click.option("--wall-clock", type=click.FloatRange(min=0), default=None,
              help="Seconds the whole run may take; training stops at wall clock minus reserve.")
@click.option("--reserve", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds kept back from the wall clock for scoring and publishing.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a setting (recorded on the run), e.g. --set lr=3e-5 --set grad_accum=8 "
                   "--set max_length=512 --set save_at=126 --set soup_device=cpu --set pack_tokens=0 (one pair per "
                   "forward, the seed's micro-batch 1; the default packs consecutive pairs up to 8192 tokens a row, "
                   "same gradients).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of member 0 (member m uses seed+m).")
@click.option("--device", default="auto", show_default=True, help="cpu, cuda, cuda:N or auto.")
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help="Where artifacts and evaluation summaries go (default: ./rm_runs/<run>).")
@db_option("Warehouse to write the run's steps, artifacts and evaluations into (must be initialised).")
@click.option("--no-db", is_flag=True, help="Write no warehouse rows (use with --export-root).")
@click.option("--export-root", type=click.Path(file_okay=False), default=None,
              help="Also write the run as reward-model data-root files under this directory "
                   "(warehouse ingest loads them into the same rows).")
@click.option("--run-id", default=None, help="Run id (default: <UTC timestamp>_rm_<model>).")
def rm_command(model, pairs, eval_file, proxy_rows, members, steps_per_member, wall_clock, reserve, sets, seed,
               device, out_dir, db, no_db, export_root, run_id) -> None:
    """Train a Bradley-Terry reward model (data root 004: LoRA + scalar head), or a soup of seeded
    members, score it on the proxy and final evaluators and write every step, artifact and
    evaluation into the warehouse."""
    from train.rm.run import TINY_SETTINGS, RMOptions, apply_sets, run_rm
    from train.settings import check_warehouse, parse_sets
    from warehouse.config import resolve_db_url

    db_url = None if no_db else resolve_db_url(db)
    if db_url is not None:
        check_warehouse(db_url)
    settings = {**(TINY_SETTINGS if model == "tiny" else {}), **parse_sets(sets)}
    if proxy_rows is not None:
        settings["proxy_rows"] = str(proxy_rows)
    opts = apply_sets(RMOptions(model=model, pairs=pairs, eval=eval_file, members=members,
                                steps_per_member=steps_per_member, wall_clock=wall_clock, reserve=reserve,
                                seed=seed, device=device, out_dir=out_dir, db_url=db_url, export_root=export_root,
                                run_id=run_id), settings)
    report = run_rm(opts, log=click.echo)
    best = max((e for e in report.evaluations if e["split"] == "full"), key=lambda e: e["score"], default=None)
    click.echo(f"Done: run {report.run_id}, {report.steps} step(s), {report.members} member(s), "
               f"stop {report.stop_reason}" + (f", best final {best['score']:.4f} at progress {best['progress']}"
                                               if best else "") + ".")
