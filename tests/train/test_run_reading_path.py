"""A newcomer follows one round of `train run` (generate, execute, grade, update, update_weights,
checkpoint, record) in train/run.py and at most five project modules it calls directly.

The rule, over train/run.py's source: every project module (under train/, ingest/ or warehouse/)
it imports anywhere counts, at the top, inside a function or for annotations only (a reader
follows each of them the same way), as the import-graph test reads imports. Only the shared
base is left out: warehouse.vocabulary (the record values) and warehouse.errors (the error
types), which every layer reads and which hold no step of the round. docs/trainer.md's reading
path names exactly these modules, so the page and the loop cannot drift apart."""
from __future__ import annotations

import re
from pathlib import Path

from tests.train.test_import_graph import import_edges

ROOT = Path(__file__).resolve().parents[2]
BASE = {"warehouse.vocabulary", "warehouse.errors"}
MOST = 5
DOC = ROOT / "docs" / "trainer.md"


def called_modules(edges: dict[str, dict[str, str]], module: str = "train.run") -> set[str]:
    """The project modules `module` reads a round through: all it imports, less the base."""
    return set(edges[module]) - BASE


def reading_path(text: str) -> set[str]:
    """The modules the numbered steps of the page's "Following one round" section open with."""
    section = text.split("## Following one round", 1)[1].split("\n## ", 1)[0]
    paths = re.findall(r"^\d+\. `([a-z_/]+)\.py`", section, flags=re.M)
    return {p.replace("/", ".") for p in paths}


def test_train_run_reads_a_round_through_at_most_five_modules():
    called = called_modules(import_edges())
    assert len(called) <= MOST, f"train/run.py calls {len(called)} project modules: {sorted(called)}"


def test_the_reading_path_names_each_module_the_loop_calls():
    assert reading_path(DOC.read_text()) == called_modules(import_edges())


def test_the_rule_counts_every_import_but_the_base(tmp_path):
    """The count itself: a top-level import, one inside a function and one for annotations only
    each count once; the base modules do not."""
    from tests.train.test_import_graph import _imports

    source = tmp_path / "run.py"
    source.write_text("from typing import TYPE_CHECKING\nfrom train.writer import RoundWrite\n"
                      "from warehouse.vocabulary import OK\nfrom warehouse.errors import TerminalError\n"
                      "if TYPE_CHECKING:\n    from train.settings import RunOptions\n"
                      "def f():\n    import train.distributed\n    from train.writer import RoundWriter\n")
    known = {"train.writer", "warehouse.vocabulary", "warehouse.errors", "train.settings", "train.distributed"}
    edges = {"train.run": _imports(source, known)}
    assert called_modules(edges) == {"train.writer", "train.settings", "train.distributed"}
    assert reading_path("## Following one round\n1. `train/writer.py`, the record\n2. `train/x.py`: y\n"
                        "not a step: `train/z.py`\n## Next\n1. `train/w.py`\n") == {"train.writer", "train.x"}
