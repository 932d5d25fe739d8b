"""The checkpoint store's layout, atomic writes and tag bookkeeping, exactly
(mutation-testing kills). No engine is built here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ih_kedro.science.training.checkpoints import (
    COMPLETE_MARKER,
    CheckpointStore,
    _atomic_write_text,
    _json_default,
)


class FakeModel:
    """Anything with ``save_pretrained`` will do for the store."""

    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "model.txt").write_text("weights")


def test_store_layout_and_repr(tmp_path):
    root = tmp_path / "a" / "b"
    store = CheckpointStore(root)
    assert root.is_dir() and store.root == root.resolve()
    assert CheckpointStore(root).root == store.root  # an existing root is fine
    assert repr(store) == f"CheckpointStore({str(root.resolve())!r})"
    assert store.run_dir("r") == root / "r"
    assert store.checkpoints_dir("r") == root / "r" / "checkpoints"
    assert store.deepspeed_dir("r") == root / "r" / "deepspeed"
    assert store.summary_path("r") == root / "r" / "run_summary.json"
    assert store.checkpoint_dir("r", 42) == root / "r" / "checkpoints" / "step_0000042"
    assert store.runs() == []
    (root / "zeta").mkdir()
    (root / "alpha").mkdir()
    (root / "file.txt").write_text("x")
    assert store.runs() == ["alpha", "zeta"]


def test_checkpoint_steps_only_complete_and_sorted(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.checkpoint_steps("r") == []
    folder = store.checkpoints_dir("r")
    for name in ("step_0000010", "step_0000002", "step_0000100"):
        (folder / name).mkdir(parents=True)
        (folder / name / "trainer_state.json").write_text("{}")
    (folder / "step_0000050").mkdir()  # torn: no trainer_state.json
    (folder / "step_0000060.tmp").mkdir()
    (folder / "step_0000060.tmp" / "trainer_state.json").write_text("{}")
    (folder / "step_0000070").mkdir()
    (folder / "step_0000070" / "trainer_state.json").mkdir()  # not a file
    assert store.checkpoint_steps("r") == [2, 10, 100]


def test_summary_round_trip(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.read_summary("r") is None
    store.run_dir("r").mkdir()
    summary = {"n": np.int64(3), "x": np.float32(0.5), "dir": Path("a/b"), "t": (1, 2)}
    path = store.write_summary("r", summary)
    assert path == store.summary_path("r")
    expected = {"n": 3, "x": 0.5, "dir": "a/b", "t": [1, 2]}
    assert path.read_text() == json.dumps(expected, indent=2)
    assert store.read_summary("r") == expected
    assert sorted(p.name for p in store.run_dir("r").iterdir()) == ["run_summary.json"]


def test_save_hf_checkpoint_is_atomic_and_restores_progress_bars(tmp_path):
    from transformers.utils import logging as hf_logging

    store = CheckpointStore(tmp_path)
    was_enabled = hf_logging.is_progress_bar_enabled()
    try:
        hf_logging.enable_progress_bar()
        final = store.save_hf_checkpoint("r", 5, FakeModel(), {"step": 5})
        assert hf_logging.is_progress_bar_enabled()
        assert final == store.checkpoint_dir("r", 5)
        assert (final / "model.txt").read_text() == "weights"
        assert (final / "trainer_state.json").read_text() == json.dumps({"step": 5}, indent=2)
        # A stale temp folder and an existing final folder are replaced.
        stale = final.with_name(final.name + ".tmp")
        stale.mkdir()
        (stale / "junk").write_text("x")
        (final / "old").write_text("x")
        hf_logging.disable_progress_bar()
        assert store.save_hf_checkpoint("r", 5, FakeModel(), {"step": 6}) == final
        assert not hf_logging.is_progress_bar_enabled()
        assert sorted(p.name for p in final.iterdir()) == ["model.txt", "trainer_state.json"]
        assert json.loads((final / "trainer_state.json").read_text()) == {"step": 6}
        assert sorted(p.name for p in store.checkpoints_dir("r").iterdir()) == ["step_0000005"]
        assert store.checkpoint_steps("r") == [5]
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
        else:
            hf_logging.disable_progress_bar()


def test_latest_deepspeed_tag_and_prune(tmp_path, caplog):
    store = CheckpointStore(tmp_path)
    assert store.latest_deepspeed_tag("r") is None
    folder = store.deepspeed_dir("r")
    folder.mkdir(parents=True)
    assert store.latest_deepspeed_tag("r") is None
    for name in ("step_0000004", "step_0000012", "step_0000008", "other"):
        (folder / name).mkdir()
        (folder / name / "mp_rank_00_model_states.pt").write_bytes(b"states")
    # Tags without the marker (an older ih-kedro's, or torn): none counts, and the log says so.
    with caplog.at_level("WARNING"):
        assert store.latest_deepspeed_tag("r") is None
    assert "no DeepSpeed checkpoint" in caplog.text and "step_0000012" in caplog.text
    for name in ("step_0000004", "step_0000012", "step_0000008", "other"):
        store.mark_deepspeed_complete("r", name)
    assert (folder / "step_0000012" / COMPLETE_MARKER).read_text() == "step_0000012"
    (folder / "step_0000099").write_text("a file, not a tag")
    (folder / "step_0000016").mkdir()  # being written when the run was killed: no model states
    # Killed after rank 0 wrote its files and DeepSpeed's ``latest``, before rank 1's shard: the
    # tag looks whole to rank 0 but is not marked.
    (folder / "step_0000020").mkdir()
    (folder / "step_0000020" / "mp_rank_00_model_states.pt").write_bytes(b"states")
    (folder / "step_0000020" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"0")
    for latest in ("step_0000020", "step_0000016", "step_0000008", "step_0000030", "  ", None):
        if latest is None:
            (folder / "latest").unlink()
        else:
            (folder / "latest").write_text(latest)
        assert store.latest_deepspeed_tag("r") == "step_0000012", latest  # the highest marked
    # A tag that cannot be deleted (rmtree refuses a symlink) is left, not an error.
    (folder / "step_0000003").symlink_to(folder / "other", target_is_directory=True)
    store.prune_deepspeed("r", keep="step_0000008")
    assert sorted(p.name for p in folder.iterdir()) == [
        "other",
        "step_0000003",
        "step_0000008",
        "step_0000099",
    ]


def test_atomic_write_and_json_default(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")
    _atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
    value = _json_default(np.float32(0.25))
    assert value == 0.25 and type(value) is float
    assert _json_default(Path("x") / "y") == "x/y"
    assert _json_default((1, "a")) == [1, "a"]
    with pytest.raises(TypeError) as error:
        _json_default({1, 2})
    assert str(error.value) == "not JSON serialisable: <class 'set'>"
