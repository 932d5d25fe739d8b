"""``conf/paper`` is the reference recipe: the tables of ``docs/paper_scale.md`` read as data.

Every row names a field, the reference's value and source, the conf key that sets ours and our
value, and why we differ (empty when we do not). The test resolves each conf key in the
parameters Kedro loads for ``--env paper`` (``conf/base`` with ``conf/paper`` merged key by key,
as ``settings.py`` configures) or in the HF config a preset builds (``model:<preset>.<field>``),
and fails when ``conf/paper`` drifts from the table, or when a row that claims no difference
has a reference value other than ours.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kedro.config import OmegaConfigLoader

from ih_kedro.science.training.config import validate_run_config
from ih_kedro.science.training.grid import expand_grid
from ih_kedro.science.training.models import load_model_presets, model_config

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "paper_scale.md"
HEADER = ["field", "reference", "source", "conf key", "ours", "why we differ"]
NOT_A_KEY = "—"
PROSE = object()  # a cell without a backticked value
# The recipe fields each experiment's table must cover: a change to any of them in conf/paper
# is either in the table or fails here.
_OPTIMIZER_KEYS = {
    "presets",
    "learning_rate",
    "betas",
    "eps",
    "weight_decay",
    "schedule",
    "min_lr_ratio",
    "warmup_steps",
    "warmup_fraction",
    "max_tokens",
    "deepspeed.gradient_clipping",
    "deepspeed.bf16.enabled",
    "online_emergence.early_stop",
}
REQUIRED_KEYS = {
    "law_fit": _OPTIMIZER_KEYS | {"n_positions", "horizon_tokens", "decay_steps", "max_steps"},
    "bi_induct": _OPTIMIZER_KEYS
    | {
        "context_lengths",
        "batch_sizes",
        "variant_options.bi_induct_snippets.span_length",
        "variant_options.bi_induct_snippets.mix_ratio",
        "variant_options.bi_induct_snippets.anneal_fraction",
    },
}


def _cells(line: str) -> list[str]:
    """The cells of a markdown table row (``\\|`` is a pipe inside a cell)."""
    parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [part.strip().replace("\\|", "|") for part in parts]


def recipe_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """``{section title: rows}`` of every table under a ``## Recipe: …`` heading."""
    tables: dict[str, list[dict[str, str]]] = {}
    section = None
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip() if line.startswith("## Recipe:") else None
            header = None
        elif section and line.startswith("|"):
            cells = _cells(line)
            if header is None:
                header = cells
                assert header == HEADER, f"{section}: table header {header}"
            elif not set("".join(cells)) <= set("-: "):
                tables.setdefault(section, []).append(dict(zip(HEADER, cells, strict=True)))
    return tables


def cell_value(cell: str) -> Any:
    """The cell's first backticked value as data (YAML; ``1e-8`` as a float), else ``PROSE``."""
    match = re.search(r"`([^`]*)`", cell)
    if match is None:
        return PROSE
    value = yaml.safe_load(match.group(1))
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def same(a: Any, b: Any) -> bool:
    """Equal as data: numbers within 1e-12 relative, lists item by item, bools only to bools."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.fixture(scope="module")
def paper_parameters() -> dict[str, Any]:
    loader = OmegaConfigLoader(
        conf_source=str(ROOT / "conf"),
        base_env="base",
        default_run_env="paper",
        merge_strategy={"parameters": "soft"},
    )
    return loader["parameters"]


def resolve(key: str, parameters: dict[str, Any]) -> Any:
    """The value at ``key``: a dotted path into the parameters, or ``model:<preset>.<path>``
    into the HF config the preset builds (vocabulary 50,257, 1,024 positions)."""
    if key.startswith("model:"):
        name = key.removeprefix("model:")
        # Preset names hold dots (llama-0.13b): the longest preset the key starts with.
        preset = max((p for p in load_model_presets() if name.startswith(f"{p}.")), key=len)
        path = name.removeprefix(f"{preset}.").split(".")
        node: Any = model_config(preset, 50257, 1024)
    else:
        path = key.split(".")
        node = parameters
    for part in path:
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def test_the_doc_has_both_recipe_tables() -> None:
    tables = recipe_tables(DOC.read_text())
    assert sorted(tables) == ["Recipe: `bi_induct` (Study 2)", "Recipe: `law_fit` (Experiment 1)"]
    assert all(len(rows) >= 20 for rows in tables.values())


def _rows() -> list[tuple[str, dict[str, str]]]:
    return [(t, row) for t, rows in recipe_tables(DOC.read_text()).items() for row in rows]


@pytest.mark.parametrize(
    ("table", "row"), _rows(), ids=[f"{t.split('`')[1]}:{r['field']}" for t, r in _rows()]
)
def test_each_row_holds(table: str, row: dict[str, str], paper_parameters) -> None:
    key = cell_value(row["conf key"]) if row["conf key"] != NOT_A_KEY else None
    ours = cell_value(row["ours"])
    if key is not None:
        actual = resolve(key, paper_parameters)
        assert same(actual, ours), f"{table} / {row['field']}: {key} is {actual!r}, table {ours!r}"
    why = row["why we differ"].strip()
    reference = cell_value(row["reference"])
    if not why:
        assert PROSE not in (reference, ours), f"{row['field']}: no values to match"
        assert same(reference, ours), f"{table} / {row['field']}: {reference!r} != {ours!r}"
    elif PROSE not in (reference, ours):
        # A row that gives a reason must really differ, or the reason is stale.
        assert not same(reference, ours), f"{table} / {row['field']}: equal but says it differs"


@pytest.mark.parametrize("experiment", sorted(REQUIRED_KEYS))
def test_every_recipe_field_is_in_the_table(experiment: str) -> None:
    keys = {str(cell_value(row["conf key"])) for _, row in _rows() if row["conf key"] != NOT_A_KEY}
    prefix = f"{experiment}.training."
    covered = {k.removeprefix(prefix) for k in keys if k.startswith(prefix)}
    assert REQUIRED_KEYS[experiment] - covered == set()


def test_a_drifted_field_fails(paper_parameters) -> None:
    """The check itself: a changed learning rate no longer matches its row."""
    (row,) = [
        r for t, r in _rows() if t.endswith("(Experiment 1)") and r["field"] == "learning rate"
    ]
    key = cell_value(row["conf key"])
    drifted = {**paper_parameters, "law_fit": {**paper_parameters["law_fit"]}}
    drifted["law_fit"]["training"] = {
        **paper_parameters["law_fit"]["training"],
        "learning_rate": 1e-3,
    }
    assert same(resolve(key, paper_parameters), cell_value(row["ours"]))
    assert not same(resolve(key, drifted), cell_value(row["ours"]))


def test_the_paper_grids_validate_with_the_reference_steps(paper_parameters) -> None:
    """Every law_fit cell trains int(1e9 / (B·C)) steps with int(1 %) of them warming up;
    every bi_induct run warms up for 3 % of its 2B-token budget."""
    law_fit = expand_grid(paper_parameters["law_fit"]["training"])
    assert len(law_fit) == 5 * 4 * 3
    for config in law_fit:
        validate_run_config(config, vocab_size=50257, corpus_tokens=10**7)
        max_steps = int(1e9 / config.tokens_per_step)
        assert config.lr_schedule_steps() == (int(max_steps * 0.01), max_steps)
        assert config.total_steps == max_steps
    bi_induct = expand_grid(paper_parameters["bi_induct"]["training"])
    for config in bi_induct:
        validate_run_config(config, vocab_size=50257, corpus_tokens=10**7)
        assert config.tokens_per_step == 2**16
        assert config.total_steps == 30518  # ceil(2e9 / 2^16)
        assert config.lr_schedule_steps() == (915, 30518)  # floor(0.03 x 30,518)


def test_the_generic_paper_sweep_trains_the_law_fit_recipe(paper_parameters) -> None:
    """``kedro run --env paper`` (the training pipeline) uses the same recipe as law_fit."""
    law_fit, training = paper_parameters["law_fit"]["training"], paper_parameters["training"]
    for key in sorted(REQUIRED_KEYS["law_fit"] - {"online_emergence.early_stop"}):
        path = key.split(".")
        assert same(resolve(".".join(["training", *path]), paper_parameters),
                    resolve(".".join(["law_fit", "training", *path]), paper_parameters)), key  # fmt: skip
    assert law_fit["presets"] == training["presets"]
