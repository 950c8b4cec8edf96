"""The project's modules import in one direction, by layers declared in pyproject.toml
(`[tool.rollout-warehouse.import-layers]`): warehouse <- ingest <- train, inside train/ a
declared order of subpackages, and inside warehouse/ its base below its applications. Every import counts: at the top, inside a function (a lazy
import hides an edge, it does not remove it) and by name (a string naming a project module,
as the CLIs' plugin lists load their commands through importlib). No module reaches itself
through its own imports either: `train/distributed.py` <-> `train/run.py` and the loader <->
the tiny policy were such circles."""
import ast
import graphlib
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("train", "warehouse", "ingest")
LAYERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["rollout-warehouse"]["import-layers"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _imports(path: Path, known: set[str]) -> dict[str, str]:
    """The project modules `path` imports anywhere in its body, each with how: "import" (`from
    a.b import c` counts a.b.c when that is a module, else a.b) or "name" (a string constant that
    is a module's dotted name, which importlib loads; a bare top-level name such as "train" is
    a word, not a plugin)."""
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                     for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
                and node.value in known:
            out.setdefault(node.value, "name")
            continue
        else:
            continue
        out.update((n, "import") for n in names if n in known)
    return out


def import_edges() -> dict[str, dict[str, str]]:
    modules = _modules()
    known = set(modules)
    # a package's __init__ importing its own submodules is not a circle through the package
    return {name: {m: how for m, how in _imports(path, known).items() if m != name and not name.startswith(m + ".")}
            for name, path in modules.items()}


def import_graph() -> dict[str, set[str]]:
    return {name: set(edges) for name, edges in import_edges().items()}


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def package_layer(module: str) -> int:
    return LAYERS["packages"].index(module.split(".")[0])


def inner_layer(module: str, package: str = "train") -> int:
    """The index of the `package` layer declaring `module` (its longest declared prefix)."""
    best = max(((len(p), i) for i, layer in enumerate(LAYERS[package]) for p in layer if _within(module, p)),
               default=None)
    if best is None:
        raise AssertionError(f"{module} is in no layer of [tool.rollout-warehouse.import-layers] {package}")
    return best[1]


def layer_violations(edges: dict[str, dict[str, str]]) -> list[str]:
    plugins = {tuple(edge) for edge in LAYERS["plugins"]}
    out = []
    for module, imported in sorted(edges.items()):
        for target, how in sorted(imported.items()):
            if (module, target) in plugins and how == "name":
                continue
            if package_layer(target) > package_layer(module):
                out.append(f"{module} -> {target} ({how}): {target.split('.')[0]} is above {module.split('.')[0]}")
                continue
            for package in ("train", "warehouse"):
                if _within(module, package) and _within(target, package) \
                        and inner_layer(target, package) > inner_layer(module, package):
                    out.append(f"{module} -> {target} ({how}): layer {inner_layer(target, package)} is above layer "
                               f"{inner_layer(module, package)}")
    return out


def test_the_project_modules_have_no_import_circle():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_every_import_follows_the_declared_layers():
    assert layer_violations(import_edges()) == []


def test_every_train_module_is_in_a_declared_layer():
    for module in _modules():
        if _within(module, "train"):
            inner_layer(module)


def test_the_declared_plugin_edges_are_there_and_loaded_by_name_only():
    edges = import_edges()
    for module, target in LAYERS["plugins"]:
        assert edges[module].get(target) == "name", f"{module} no longer loads {target} by name: drop the edge"


def test_the_checks_see_lazy_imports_and_names(tmp_path):
    """The reader itself: an import inside a function and a plugin string are edges, and the
    layer rules reject them where they point up."""
    source = tmp_path / "m.py"
    source.write_text('def f():\n    from train.run import run\n\nPLUGINS = [("ingest.cli", "ingest")]\n')
    assert _imports(source, {"train.run", "ingest.cli"}) == {"train.run": "import", "ingest.cli": "name"}
    assert layer_violations({"warehouse.db": {"ingest.cli": "name", "warehouse.report": "import"},
                             "train.policy.loader": {"train.rollout": "import"},
                             "warehouse.cli": {"ingest.cli": "import", "warehouse.db": "import"}}) == [
        "train.policy.loader -> train.rollout (import): layer 4 is above layer 0",
        "warehouse.cli -> ingest.cli (import): ingest is above warehouse",
        "warehouse.db -> ingest.cli (name): ingest is above warehouse",
        "warehouse.db -> warehouse.report (import): layer 1 is above layer 0"]


@pytest.mark.parametrize("module, never", [("train.distributed", "train.run"),
                                           ("train.policy.loader", "train.tiny.policy"),
                                           ("train.policy.loader", "train.learn.lora")])
def test_the_named_circles_stay_one_way(module, never):
    assert never not in import_graph()[module]
