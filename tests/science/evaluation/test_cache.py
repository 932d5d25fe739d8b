"""Evaluations cached beside their checkpoint: same inputs, one computation; other inputs or a
rewritten checkpoint, a new one; an unreadable file is recomputed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from ih_kedro.science.evaluation.cache import CACHE_PREFIX, cached, fingerprint, options_key


@dataclasses.dataclass
class Inputs:
    validation: np.ndarray
    probes: torch.Tensor
    prompts: dict


def _inputs(**change) -> Inputs:
    base = {"validation": np.arange(12).reshape(3, 4), "probes": torch.ones(2, 3, dtype=torch.long),
            "prompts": {1: [1, 2], 10: [3]}}  # fmt: skip
    return Inputs(**{**base, **change})


def test_fingerprint_is_equal_for_equal_inputs_and_differs_for_any_change() -> None:
    reference = fingerprint(_inputs(), {"a": 1, "b": [2, 3]})
    assert fingerprint(_inputs(), {"b": [2, 3], "a": 1}) == reference  # key order
    changed = [
        fingerprint(_inputs(validation=np.arange(1, 13).reshape(3, 4)), {"a": 1, "b": [2, 3]}),
        fingerprint(_inputs(validation=np.arange(12).reshape(4, 3)), {"a": 1, "b": [2, 3]}),
        fingerprint(_inputs(validation=np.arange(12.0).reshape(3, 4)), {"a": 1, "b": [2, 3]}),
        fingerprint(_inputs(probes=torch.zeros(2, 3, dtype=torch.long)), {"a": 1, "b": [2, 3]}),
        fingerprint(_inputs(prompts={1: [1, 2], 10: [4]}), {"a": 1, "b": [2, 3]}),
        fingerprint(_inputs(), {"a": 2, "b": [2, 3]}),
        fingerprint(_inputs(), {"a": 1, "b": [3, 2]}),
    ]
    assert len({reference, *changed}) == 1 + len(changed)


def test_options_key_is_canonical() -> None:
    assert options_key({"b": 1, "a": {"y": 2, "x": None}}) == '{"a": {"x": null, "y": 2}, "b": 1}'


def _checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "step_00000010"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_a_second_call_reads_the_stored_result(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    calls = []

    def evaluate() -> dict:
        calls.append(1)
        return {"copy": np.array([0.5, 1.0]), "loss": 2.5}

    first = cached(checkpoint, "key", evaluate)
    second = cached(checkpoint, "key", evaluate)
    assert len(calls) == 1
    np.testing.assert_array_equal(second["copy"], [0.5, 1.0])
    assert second["loss"] == first["loss"] == 2.5
    assert [p.name.startswith(CACHE_PREFIX) for p in checkpoint.iterdir()].count(True) == 1
    cached(checkpoint, "another key", evaluate)  # other options: computed again
    assert len(calls) == 2


def test_a_rewritten_checkpoint_is_evaluated_again(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    values = iter([1.0, 2.0])
    assert cached(checkpoint, "key", lambda: next(values)) == 1.0
    (checkpoint / "model.safetensors").write_bytes(b"other weights")
    assert cached(checkpoint, "key", lambda: next(values)) == 2.0


def test_an_unreadable_cache_file_is_recomputed(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    cached(checkpoint, "key", lambda: 1.0)
    (path,) = [p for p in checkpoint.iterdir() if p.name.startswith(CACHE_PREFIX)]
    path.write_bytes(b"not a pickle")
    assert cached(checkpoint, "key", lambda: 3.0) == 3.0
    assert cached(checkpoint, "key", lambda: pytest.fail("not read back")) == 3.0
    assert not [p for p in checkpoint.iterdir() if p.name.endswith(".tmp")]
