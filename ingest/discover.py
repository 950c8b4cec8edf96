"""Walk a data root (docs/data-roots.md layout) into runs and the files to load, without reading them.

The walk has a fixed depth (root / run / round_<N> / file, and wandb_exports / <run> / file),
so a symlink loop cannot recurse: it shows up as an unreadable entry and becomes a problem
row, like a dangling file link. A dangling *run* link is a LOST run, reported, not fatal.
Entries skipped on purpose are problems too (`skipped=True`: a warning and an ingest_errors
row, but not a failure): a directory named like a round that is not one (`round_x`), a
directory link inside a round that points back at the round or above it, and a file that is
a symlink to another file of the root (its rows land once, under the real file's name).
"""
from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.errors import TerminalError

ROUND_DIR = re.compile(r"^round_(\d+)$")
NODE_FILE = re.compile(r"^(?P<task>.+?)__(?P<ts>\d+)\.jsonl$")
SUMMARY_FILE = re.compile(r"^(?P<task>.+?)__summary_(?P<ts>\d+)\.json$")
TREE_FILE = re.compile(r"^(?P<task>.+?)__(?P<ts>\d+)__tree\.txt$")
TRANSCRIPT_FILE = re.compile(r"^(?P<task>.+?)__(?P<ts>\d+)__transcript\.md$")
WANDB_FILES = {"config.json": "wandb_config", "history.jsonl": "wandb_history",
               "summary.json": "wandb_summary"}
WANDB_DIR = "wandb_exports"
# a training run's own files beside its round directories (docs/data-roots.md)
RUN_FILES = {"timing.jsonl": "timing", "step_metrics.jsonl": "step_metrics"}
RM_MANIFEST, RM_EVALUATIONS = "manifest.json", "evaluations"
RM_FILES = {RM_MANIFEST: "rm_manifest", "outcome.json": "rm_outcome", "jobs.jsonl": "rm_jobs",
            "artifacts.jsonl": "rm_artifacts", "steps.jsonl": "rm_steps"}


@dataclass(frozen=True)
class RunDir:
    run_id: str
    path: str
    lost: bool = False
    target: str | None = None  # where a LOST run's link points


@dataclass(frozen=True)
class FileJob:
    path: str
    kind: str   # nodes | summary | tree | transcript | timing | step_metrics | wandb_* | rm_* (ingest/rm_ingest.py)
    size: int
    mtime_ns: int
    run_id: str | None = None
    round: int | None = None
    task: str | None = None
    wandb_run: str | None = None

    @property
    def round_path(self) -> str | None:
        return os.path.dirname(self.path) if self.round is not None else None


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str
    run_id: str | None = None
    skipped: bool = False  # skipped on purpose (a warning); else the entry failed to load


@dataclass
class Layout:
    root: str
    runs: list[RunDir] = field(default_factory=list)
    files: list[FileJob] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # directories that are not runs
    rounds: list[tuple[str, int, str]] = field(default_factory=list)  # (run, round, path)
    rm_runs: list[RunDir] = field(default_factory=list)  # reward-model runs (manifest.json)


def discover(root: str | os.PathLike) -> Layout:
    """Every run, file and unreadable entry under `root`."""
    root_path = Path(os.path.abspath(root))
    if not root_path.is_dir():
        raise TerminalError(f"data root {root_path} is not a directory. Pass the folder that "
                            "holds the run directories.")
    layout = Layout(str(root_path))
    for entry in _entries(root_path, layout):
        if entry.name.startswith("."):
            continue
        if entry.name == WANDB_DIR:
            _walk_wandb(Path(entry.path), layout)
        else:
            _walk_run_entry(entry, layout)
    _skip_linked_copies(layout)
    return layout


def require_runs(layout: Layout) -> None:
    """A root with nothing to load is a mistake to name, not "0 runs": most often the path
    of one run (or one round) given for the folder that holds the runs."""
    if layout.runs or layout.rm_runs or layout.files or layout.problems:
        return
    root = Path(layout.root)
    names = {p.name for p in root.iterdir()}
    if ROUND_DIR.match(root.name):
        run = root.parent
        raise TerminalError(f"{root} is a round of run {run.name}, not a data root. Ingest the folder that "
                            f"holds the runs: warehouse ingest {run.parent}")
    if any(ROUND_DIR.match(n) for n in names) or {"timing.jsonl", RM_MANIFEST} & names:
        raise TerminalError(f"{root} is a run folder, not a data root. Ingest the folder that holds "
                            f"it: warehouse ingest {root.parent}")
    raise TerminalError(f"no runs in {root}: a data root holds run folders (each with round_<N>/ or "
                        "timing.jsonl, or a reward-model run's manifest.json). Pass the folder that "
                        "holds them.")


def _entries(path: Path, layout: Layout, run_id: str | None = None) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        layout.problems.append(Problem(str(path), _os_reason(exc), run_id))
        return []


def _stat(entry: os.DirEntry, layout: Layout, run_id: str | None) -> os.stat_result | None:
    try:
        return os.stat(entry.path)
    except OSError as exc:
        layout.problems.append(Problem(entry.path, _os_reason(exc), run_id))
        return None


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop: the link points back at itself; remove or fix the link"
    if exc.errno == errno.ENOENT:
        return "dangling symlink: its target does not exist"
    if exc.errno == errno.EACCES:
        return "permission denied: make it readable to this user"
    return f"unreadable: {exc.strerror or exc}"


def _walk_run_entry(entry: os.DirEntry, layout: Layout) -> None:
    run_id = entry.name
    if entry.is_symlink() and not os.path.exists(entry.path):
        try:
            os.stat(entry.path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                layout.problems.append(Problem(entry.path, _os_reason(exc), run_id))
                return
        layout.runs.append(RunDir(run_id, entry.path, lost=True, target=os.readlink(entry.path)))
        return
    if not entry.is_dir():
        return  # README.md, FILES.txt, images
    children = _entries(Path(entry.path), layout, run_id)
    names = {c.name for c in children}
    if RM_MANIFEST in names:
        _walk_rm_run(entry, children, layout)
        return
    if not any(ROUND_DIR.match(n) for n in names) and not names & set(RUN_FILES):
        layout.skipped.append(entry.path)
        return
    layout.runs.append(RunDir(run_id, entry.path))
    for child in children:
        match = ROUND_DIR.match(child.name)
        if match:
            _walk_round(child, int(match.group(1)), run_id, layout)
        elif child.name.startswith("round_") and child.is_dir():
            layout.problems.append(Problem(child.path, "not a round directory: expected round_<N> "
                                           "with N a whole number; its files are not ingested",
                                           run_id, skipped=True))
        elif child.name in RUN_FILES:
            _add_file(child, layout, kind=RUN_FILES[child.name], run_id=run_id)
        elif child.name == WANDB_DIR and child.is_dir():
            _walk_wandb(Path(child.path), layout)


def _walk_rm_run(entry: os.DirEntry, children: list[os.DirEntry], layout: Layout) -> None:
    """A reward-model run (docs/reward_model.md): its files, each a job of its own kind;
    a receipt is read with its summary, never alone."""
    run_id = entry.name
    layout.rm_runs.append(RunDir(run_id, entry.path))
    for child in children:
        if child.name in RM_FILES:
            _add_file(child, layout, kind=RM_FILES[child.name], run_id=run_id)
        elif child.name == RM_EVALUATIONS and child.is_dir():
            for item in _entries(Path(child.path), layout, run_id):
                if item.name.endswith(".json"):
                    _add_file(item, layout, kind="rm_evaluation", run_id=run_id)


def _walk_round(entry: os.DirEntry, rnd: int, run_id: str, layout: Layout) -> None:
    if _stat(entry, layout, run_id) is None:
        return
    layout.rounds.append((run_id, rnd, entry.path))
    for child in _entries(Path(entry.path), layout, run_id):
        kind, task = classify(child.name)
        if kind:
            _add_file(child, layout, kind=kind, run_id=run_id, round=rnd, task=task)
        elif child.is_symlink() and child.is_dir() and _points_above(child.path, entry.path):
            layout.problems.append(Problem(child.path, "directory symlink cycle: it points back at "
                                           f"{os.path.realpath(child.path)}, the round or a directory "
                                           "above it; not followed", run_id, skipped=True))


def _points_above(link: str, round_path: str) -> bool:
    """True when `link` resolves to `round_path` or one of its ancestors (a cycle to walk)."""
    target, here = os.path.realpath(link), os.path.realpath(round_path)
    return here == target or here.startswith(target.rstrip(os.sep) + os.sep)


def classify(name: str) -> tuple[str | None, str | None]:
    """(kind, task) of a file in a round directory; (None, None) for anything else."""
    for kind, pattern in (("summary", SUMMARY_FILE), ("tree", TREE_FILE),
                          ("transcript", TRANSCRIPT_FILE), ("nodes", NODE_FILE)):
        match = pattern.match(name)
        if match:
            return kind, match.group("task")
    if name.endswith(".jsonl"):  # a node file named without a timestamp
        return "nodes", name[: -len(".jsonl")].split("__")[0]
    return None, None


def _walk_wandb(path: Path, layout: Layout) -> None:
    for run_entry in _entries(path, layout):
        if not run_entry.is_dir():
            continue
        for child in _entries(Path(run_entry.path), layout):
            kind = WANDB_FILES.get(child.name)
            if kind:
                _add_file(child, layout, kind=kind, wandb_run=run_entry.name)


def _add_file(entry: os.DirEntry, layout: Layout, **job) -> None:
    st = _stat(entry, layout, job.get("run_id"))
    if st is None:
        return
    if not os.path.isfile(entry.path):
        layout.problems.append(Problem(entry.path, "not a regular file", job.get("run_id")))
        return
    layout.files.append(FileJob(entry.path, size=st.st_size, mtime_ns=st.st_mtime_ns, **job))


def _skip_linked_copies(layout: Layout) -> None:
    """A file that is a symlink to another file of the root is skipped: its rows land once,
    under the real file's name. (Links to files outside the root, as git-annex makes, are
    the only name of their content there, and load as usual.)"""
    real = {os.path.realpath(job.path): job.path for job in layout.files if not os.path.islink(job.path)}
    kept = []
    for job in layout.files:
        target = real.get(os.path.realpath(job.path)) if os.path.islink(job.path) else None
        if target is None:
            kept.append(job)
        else:
            layout.problems.append(Problem(job.path, f"a symlink to {target}, which is ingested under "
                                           "its own name; this name is skipped", job.run_id, skipped=True))
    layout.files = kept
