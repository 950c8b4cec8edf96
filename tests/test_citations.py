"""Nothing in the repository cites a file outside it. The metric and data-root definitions the
code relies on live in docs/ (metrics.md, data-roots.md); a citation of the original spec
files or of the shared folder beside the checkout would send a reader to a file a clone does
not have. Markdown links must land on a file of the repository too."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\b(?:METRICS|DATA|STYLE)\.md\b|\.\./shared\b|/work/shared\b|\bshared/(?:spec|seeds)\b")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TEXT = {".py", ".md", ".sql", ".html", ".toml", ".sh", ".txt", ".cfg", ".ini", ".yaml", ".yml", ".js", ".css", ""}


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in listed.splitlines() if (ROOT / line).is_file()]


def outside_citations(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except UnicodeDecodeError:  # an image or another binary file
        return []
    return [f"{path.relative_to(ROOT)}:{n}: {m.group(0)}" for n, line in enumerate(text.splitlines(), 1)
            for m in OUTSIDE.finditer(line)]


def broken_links(path: Path) -> list[str]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL, or an anchor in the same page
            where = (path.parent / target.split("#", 1)[0]).resolve()
            if not where.is_relative_to(ROOT) or not where.exists():
                out.append(f"{path.relative_to(ROOT)}:{n}: {target}")
    return out


def test_no_file_cites_the_spec_or_the_shared_folder():
    mine = Path(__file__).resolve()
    files = [p for p in tracked_files() if p.suffix in TEXT and p.resolve() != mine]
    assert [hit for p in files for hit in outside_citations(p)] == []


def test_every_markdown_link_lands_in_the_repository():
    assert [hit for p in tracked_files() if p.suffix == ".md" for hit in broken_links(p)] == []


def test_the_checks_see_a_citation_and_a_link_out(tmp_path, monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("As METRICS.md says; see [spec](../../shared/spec/DATA.md) and [ok](page.md#top).\n")
    assert outside_citations(page) == ["docs/page.md:1: METRICS.md", "docs/page.md:1: ../shared",
                                       "docs/page.md:1: DATA.md"]
    assert broken_links(page) == ["docs/page.md:1: ../../shared/spec/DATA.md"]
