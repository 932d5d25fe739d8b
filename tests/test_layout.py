"""The layout a newcomer relies on (docs/architecture.md), checked so it cannot drift.

The science library is one folder per stage of the study, its modules and functions stay short
enough to read in one sitting, node files stay thin, every stage package says what it holds
(and the names it lists exist), and the tests mirror the tree. The import direction between
the stages is checked by ``lint-imports`` (pyproject.toml), run by ``make test``.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCIENCE = ROOT / "src" / "ih_kedro" / "science"
STAGES = ("data", "training", "telemetry", "evaluation", "statistics")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
MAX_NODE_FILE_LINES = 300
# ``module``: ``name``, ``name`` lines of a stage docstring (see science/data/__init__.py).
LISTED = re.compile(r"^\s*[-*]\s+``([\w.]+)``\s*:?\s*(.*)$")
NAME = re.compile(r"``([A-Za-z_]\w*)``")


def _modules() -> list[Path]:
    return sorted(p for p in SCIENCE.rglob("*.py") if "__pycache__" not in p.parts)


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_the_science_folder_holds_only_its_stage_packages() -> None:
    top_level = sorted(p.name for p in SCIENCE.glob("*.py"))
    assert top_level == ["__init__.py"]
    packages = sorted(p.name for p in SCIENCE.iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted(STAGES)


def test_no_science_module_is_longer_than_a_sitting() -> None:
    long = {
        str(p.relative_to(SCIENCE)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_in_the_package_is_over_a_hundred_lines() -> None:
    long = {
        f"{p.relative_to(ROOT)}:{name}": n
        for p in sorted((ROOT / "src").rglob("*.py"))
        for name, n in _functions(p)
        if n > MAX_FUNCTION_LINES
    }
    assert long == {}


def test_node_files_stay_thin() -> None:
    thick = {
        p.parent.name: n
        for p in sorted((ROOT / "src" / "ih_kedro" / "pipelines").glob("*/nodes.py"))
        if (n := len(p.read_text().splitlines())) > MAX_NODE_FILE_LINES
    }
    assert thick == {}


def _listed_names(package: str) -> dict[str, list[str]]:
    """``module -> names`` from the ``- ``module``: ``name``, ...`` lines of a docstring."""
    doc = importlib.import_module(package).__doc__ or ""
    listed: dict[str, list[str]] = {}
    module = None
    for line in doc.splitlines():
        if match := LISTED.match(line):
            module = match.group(1)
            listed[module] = NAME.findall(match.group(2))
        elif module is not None and line.startswith("  ") and line.strip():
            listed[module] += NAME.findall(line)  # the entry's continuation line
        else:
            module = None
    return listed


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_says_what_it_holds_and_its_names_exist(stage: str) -> None:
    package = f"ih_kedro.science.{stage}"
    listed = _listed_names(package)
    folder = SCIENCE / stage
    modules = {
        ".".join(p.relative_to(folder).with_suffix("").parts)
        for p in folder.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    # Every module of the stage is listed, with at least one public name, and nothing else is.
    assert set(listed) == modules
    missing = [
        f"{module}.{name}"
        for module, names in listed.items()
        for name in names or ["<no name listed>"]
        if not hasattr(importlib.import_module(f"{package}.{module}"), name)
    ]
    assert missing == []


def test_tests_mirror_the_science_tree() -> None:
    """Every science module has a test file named for it in the mirrored folder."""
    untested = []
    for path in _modules():
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(SCIENCE)
        folder = ROOT / "tests" / "science" / relative.parent
        stem = relative.stem
        if not any(folder.glob(f"test_{stem}.py")) and not any(folder.glob(f"test_{stem}_*.py")):
            untested.append(str(relative))
    assert untested == []
