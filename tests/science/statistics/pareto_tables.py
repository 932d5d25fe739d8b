"""Hand-built inputs of the pareto experiment, shared by its science and node tests: a saved
bigram model, grid cells and training parameters, a token stream, the realised knobs of a run's
batches and a small cell table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.bigram_model import BigramModel
from ih_kedro.science.data.variants.repetition_stats import measure_repetition


def saved_model(tmp_path: Path, n: int, *, other_bucket: bool, vocab_size: int = 64) -> BigramModel:
    rng = np.random.default_rng(0)
    model = BigramModel(
        transition=rng.random((n, n)), initial=np.ones(n), token_ids=np.arange(n) + 5,
        counts=np.zeros((n, n), dtype=np.int64), smoothing=0.0, other_bucket=other_bucket,
        vocab_size=vocab_size,
    )  # fmt: skip
    return BigramModel.load(model.save(tmp_path / f"m{n}_{other_bucket}.npz"))


def variant_cell(label: str, frequency: float, reliability: float) -> dict[str, Any]:
    return {"variant": "semi_natural", "label": label,
            "options": {"frequency": frequency, "reliability": reliability}}  # fmt: skip


def training_grid(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "presets": ["p"], "batch_sizes": [4], "context_lengths": [16], "seeds": [0, 1],
        "data_variants": [variant_cell("fA", 0.5, 1.0), variant_cell("fB", 0.0, 0.0)], "max_steps": 10,
    }  # fmt: skip
    params.update(overrides)
    return params


def token_stream() -> PackedTokens:
    return PackedTokens(tokens=np.arange(500, dtype=np.uint16) % 64, vocab_size=64, eos_token_id=0)


def measured(path: str, f: float, r: float, seed: int, n_batches: int, batch_size: int = 4):
    options = {"model_path": path, "frequency": f, "reliability": r}
    batches = [
        sample_batch(token_stream().tokens, batch_size, 16, seed, s, data_variant="semi_natural",
                     variant_options=options).tokens.numpy()
        for s in range(n_batches)
    ]  # fmt: skip
    return measure_repetition(np.concatenate(batches))


def status_of(formed: Any) -> list[str]:
    """An emergence status consistent with each ``formed`` value (1 -> emerged, 0 -> censored,
    NaN -> fit_failed), as the cell table's ``formed`` / ``status`` check requires."""
    return ["fit_failed" if np.isnan(f) else "emerged" if f == 1 else "censored"
            for f in np.asarray(formed, dtype=float)]  # fmt: skip


def frontier_cells() -> pd.DataFrame:
    """7 runs over 5 cells; one with f = 0 and one with an unknown outcome are not fitted."""
    rows = [  # run, label, seed, f, r, formed, step, budget steps
        ("d_s2", "d", 2, 0.0, 1.0, 1.0, 10.0, 1000),
        ("a_s0", "a", 0, 0.25, 0.5, 1.0, 100.0, 1000),
        ("a_s1", "a", 1, 0.25, 0.5, 0.0, 1000.0, 1000),
        ("b_s0", "b", 0, 1.0, 0.5, 1.0, 50.0, 2000),
        ("b_s1", "b", 1, 1.0, 0.5, 1.0, 70.0, 1000),
        ("c_s0", "c", 0, 0.5, 0.25, 0.0, 1000.0, 1000),
        ("e_s0", "e", 0, 0.5, 1.0, np.nan, np.nan, 1000),
    ]
    table = pd.DataFrame(
        rows,
        columns=["run_name", "label", "seed", "frequency", "reliability", "formed", "step",
                 "budget_steps"],
    )  # fmt: skip
    return table.assign(
        ci_low=table["step"] - 5, ci_high=table["step"] + 5,
        budget_tokens=table["budget_steps"] * 64, metric="m", method="t",
        status=status_of(table["formed"]),
    )  # fmt: skip
