"""No code imports another package's private (underscore) names or modules: a name with a
leading underscore is free to change with its own package, so the product (warehouse, ingest,
train, migrations, sql) and the benchmarks reach across packages through public names only.

Tests are white-box: a test may import a private helper of the product module it exercises
(e.g. the sampler's `_prefill`), never one of another test package."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("warehouse", "ingest", "train", "migrations", "sql", "benchmarks")
PRODUCT = ("warehouse", "ingest", "train", "migrations", "sql")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package_of(module: str) -> str:
    """The package a dotted module lives in (a package is its own)."""
    path = ROOT.joinpath(*module.split("."))
    return module if path.is_dir() else module.rpartition(".")[0]


def private_imports(path: Path) -> list[str]:
    """`path`'s imports of a private name or module from outside its own package."""
    own = ".".join(path.relative_to(ROOT).parent.parts)
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError:  # a test case that is broken on purpose
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            pairs = [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            pairs = [(alias.name.rpartition(".")[0], alias.name.rpartition(".")[2]) for alias in node.names]
        else:
            continue
        for module, name in pairs:
            full = f"{module}.{name}" if module else name
            if not any(_private(part) for part in full.split(".")):
                continue
            top = full.split(".")[0]
            if top not in CODE and (path.parent / f"{top}.py").is_file():  # a script's sibling module
                continue
            where = _package_of(module) if module else own
            if where != own and not (own.startswith("tests") and top in PRODUCT):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {full}")
    return found


def test_no_private_name_is_imported_across_packages():
    files = [p for top in (*CODE, "tests") for p in (ROOT / top).rglob("*.py")]
    assert [hit for p in files for hit in private_imports(p)] == []


def test_the_check_sees_a_private_import(tmp_path, monkeypatch):
    """The reader itself, on files laid out like the repository's."""
    import sys

    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "train" / "rm").mkdir(parents=True)
    (tmp_path / "train" / "learn").mkdir()
    (tmp_path / "train" / "learn" / "attention.py").write_text("def _repeat_kv(): ...\n")
    cross = tmp_path / "train" / "rm" / "attention.py"
    cross.write_text("def f():\n    from train.learn.attention import _repeat_kv\n")
    same = tmp_path / "train" / "learn" / "step.py"
    same.write_text("from train.learn.attention import _repeat_kv\n")
    assert private_imports(cross) == ["train/rm/attention.py:2: train.learn.attention._repeat_kv"]
    assert private_imports(same) == []
