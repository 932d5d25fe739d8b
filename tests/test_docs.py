"""The repository stands alone: its docs name nothing outside it, and their links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".md", ".py", ".yml", ".yaml", ".toml", ".ipynb", ".cfg", ".txt"}
# Places a user reads or the code runs from; generated data and the venv are not scanned.
SCANNED = [
    "README.md",
    "Makefile",
    "pyproject.toml",
    "docs",
    "conf",
    "src",
    "notebooks",
    "tests",
    "benchmarks",
    ".ci",
]
OUTSIDE = re.compile(r"\.\./shared|/work/|STUDY\.md|CALIBRATION\.md|PLATFORM\.md|STYLE\.md")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _files() -> list[Path]:
    files = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [
                p
                for p in path.rglob("*")
                if p.is_file()
                and (p.suffix in TEXT_SUFFIXES or p.name == "run")
                and "__pycache__" not in p.parts
            ]
    return sorted(files)


def test_nothing_refers_outside_the_repository() -> None:
    offenders = []
    for path in _files():
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert offenders == []


@pytest.mark.parametrize(
    "doc", ["README.md", *[f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")]]
)
def test_relative_links_resolve(doc: str) -> None:
    path = ROOT / doc
    broken = [
        target
        for target in LINK.findall(path.read_text())
        if not target.startswith(("http://", "https://", "mailto:"))
        and not (path.parent / target).exists()
    ]
    assert broken == []


def test_study_and_calibration_pages_exist_and_are_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docs/study.md" in readme and "docs/calibration.md" in readme
    study = (ROOT / "docs" / "study.md").read_text()
    for section in ("## Experiment 1", "## Experiment 2", "## Experiment 3", "## Bi-Induct"):
        assert section in study


# Terms a newcomer meets that need a definition; whichever of them the README uses must have an
# entry (a bold "- **term**" line) in docs/glossary.md.
JARGON = [
    "induction head", "anti-induction", "prefix matching", "S*", "censored", "cluster-robust",
    "Wald", "Tobit", "Firth", "load-bearing", "excess drop", "MFU", "formation score",
    "by-parity", "LD", "CAT", "Zipf", "seed study", "today", "ICL", "copy accuracy",
    "Pareto frontier", "coverage", "KJV", "degenerate", "undecided", "micro study",
    "paper scale", "embedded default", "repetition-enriched", "prediction interval", "snippet",
    "preset", "compact vocabulary", "LOO r", "Bi-Induct",
]  # fmt: skip


def _normalise(text: str) -> str:
    return re.sub(r"[-_\\`]", " ", text.lower())


def test_glossary_defines_every_term_the_readme_uses() -> None:
    readme = (ROOT / "README.md").read_text()
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    entries = [_normalise(m) for m in re.findall(r"^- \*\*(.+?)\*\*", glossary, re.MULTILINE)]
    used = [t for t in JARGON if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", readme, re.I)]
    assert len(used) >= 10  # the README does use jargon; the check is not vacuous
    undefined = [t for t in used if not any(_normalise(t) in entry for entry in entries)]
    assert undefined == []
