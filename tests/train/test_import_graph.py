"""The trainer's modules import in one direction: no module reaches itself through its own
imports, lazy imports inside functions counted too (a lazy import hides a circle, it does not
remove it). `train/distributed.py` <-> `train/run.py` and `train/policy/loader.py` <->
`train/policy/tiny.py` were such circles."""
import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("train", "warehouse", "ingest")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _imports(path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports anywhere in its body (`from a.b import c` counts a.b.c
    when that is a module, else a.b)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                     for alias in node.names]
        else:
            continue
        out.update(n for n in names if n in known)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    # a package's __init__ importing its own submodules is not a circle through the package
    return {name: {m for m in _imports(path, known) if m != name and not name.startswith(m + ".")}
            for name, path in modules.items()}


def test_the_project_modules_have_no_import_circle():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


@pytest.mark.parametrize("module, never", [("train.distributed", "train.run"),
                                           ("train.policy.tiny", "train.policy.loader")])
def test_the_named_circles_stay_one_way(module, never):
    assert never not in import_graph()[module]
