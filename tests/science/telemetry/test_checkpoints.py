"""Finding and loading a run's checkpoints: which folders count, in which order, with which step
and token count."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ih_kedro.science.telemetry.checkpoints import list_checkpoints, load_checkpoint
from ih_kedro.science.training.models import build_model


def _folder(path: Path, config: bool = True, state: dict | None = None) -> Path:
    path.mkdir(parents=True)
    if config:
        (path / "config.json").write_text("{}")
    if state is not None:
        (path / "trainer_state.json").write_text(json.dumps(state))
    return path


def test_our_layout_sorted_by_step_with_tokens_from_trainer_state(tmp_path: Path) -> None:
    ckpts = tmp_path / "checkpoints"
    _folder(ckpts / "step_10", state={"step": 10, "tokens_seen": 640})
    _folder(ckpts / "step_2", state={"step": 2, "tokens_seen": 128})
    _folder(ckpts / "step_100", state={"step": 100, "tokens_seen": 6400.5})
    _folder(ckpts / "step_5", config=False)  # no config.json: not a checkpoint
    (ckpts / "step_7").write_text("a file, not a folder")
    _folder(ckpts / "final_step_9")  # the name must start with the step prefix
    _folder(tmp_path / "step_3")  # the root is only searched when checkpoints/ has none
    rows = list_checkpoints(tmp_path)
    assert [(s, p.name, t) for s, p, t in rows] == [
        (2, "step_2", 128.0),
        (10, "step_10", 640.0),
        (100, "step_100", 6400.5),
    ]


def test_hf_folder_names_in_the_root_and_nan_tokens_without_state(tmp_path: Path) -> None:
    for name in ("step1000", "checkpoint-5", "global_step_20", "step-7", "stepX", "ckpt_3"):
        _folder(tmp_path / name)
    rows = list_checkpoints(str(tmp_path))
    assert [(s, p.name) for s, p, _ in rows] == [
        (5, "checkpoint-5"),
        (7, "step-7"),
        (20, "global_step_20"),
        (1000, "step1000"),
    ]
    assert all(math.isnan(t) for _, _, t in rows)


def test_trainer_state_step_wins_over_the_folder_name_and_orders_the_list(tmp_path: Path) -> None:
    ckpts = tmp_path / "checkpoints"
    _folder(ckpts / "step_1", state={"step": 50})  # no tokens_seen: NaN
    _folder(ckpts / "step_2", state={"tokens_seen": 9})  # no step: the folder's
    rows = list_checkpoints(tmp_path)
    assert [(s, p.name) for s, p, _ in rows] == [(2, "step_2"), (50, "step_1")]
    assert rows[0][2] == 9.0 and math.isnan(rows[1][2])


def test_empty_and_missing_run_dirs(tmp_path: Path) -> None:
    assert list_checkpoints(tmp_path) == []
    with pytest.raises(ValueError, match="is not a directory"):
        list_checkpoints(tmp_path / "missing")


def test_load_checkpoint_round_trips_weights_in_eval_mode(tmp_path: Path) -> None:
    model = build_model("attn-only-2l-d128", 40, 16, seed=0)
    model.save_pretrained(tmp_path / "step_1")
    loaded = load_checkpoint(tmp_path / "step_1")
    assert not loaded.training
    for (name, a), (_, b) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    half = load_checkpoint(tmp_path / "step_1", dtype=torch.bfloat16)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}


def test_equal_steps_keep_the_folder_order(tmp_path: Path) -> None:
    # Two folders whose trainer_state reports the same step: ordered by folder step (9 before 10),
    # not by path ("step_10" < "step_9").
    ckpts = tmp_path / "checkpoints"
    _folder(ckpts / "step_10", state={"step": 5, "tokens_seen": 2})
    _folder(ckpts / "step_9", state={"step": 5, "tokens_seen": 1})
    assert [p.name for _, p, _ in list_checkpoints(tmp_path)] == ["step_9", "step_10"]


def test_load_checkpoint_moves_to_the_device(tmp_path: Path) -> None:
    build_model("attn-only-2l-d128", 40, 16, seed=0).save_pretrained(tmp_path / "step_1")
    model = load_checkpoint(tmp_path / "step_1", device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
