"""Run tasks and progress: the token handle a worker receives, progress reporting, manifest rows."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training import tasks
from ih_kedro.science.training.tasks import (
    ProgressBoard,
    RunTask,
    TokenSource,
    TrackingSpec,
    manifest_row,
    report_progress,
    step_reporter,
)

TOKENS = np.array([3, 1, 4, 1, 5, 9, 2, 6, 0, 5, 3, 5], dtype=np.uint16)


def _packed(tokens: np.ndarray, checksum: str = "abc123") -> PackedTokens:
    return PackedTokens(tokens, vocab_size=10, eos_token_id=0, checksum=checksum, meta={"k": 1})


def _memmap(path: Path, values: np.ndarray) -> np.memmap:
    values.tofile(path)
    return np.memmap(path, dtype=values.dtype, mode="r")


def test_tracking_spec_is_frozen_with_no_parent_by_default() -> None:
    spec = TrackingSpec("sqlite:////tmp/m.db")
    assert spec.parent_run_id is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.parent_run_id = "x"  # type: ignore[misc]


def test_an_in_memory_corpus_travels_as_its_array() -> None:
    source = TokenSource.of(_packed(TOKENS))
    assert (source.vocab_size, source.eos_token_id, source.checksum) == (10, 0, "abc123")
    assert (source.path, source.dtype, source.n_tokens, source.meta) == (None, "<u2", 12, {"k": 1})
    opened = pickle.loads(pickle.dumps(source)).open()
    assert np.array_equal(opened.tokens, TOKENS) and opened.tokens.dtype == np.uint16
    assert (opened.vocab_size, opened.eos_token_id, opened.checksum) == (10, 0, "abc123")
    assert opened.meta == {"k": 1}


def test_a_whole_memmap_travels_as_its_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    tokens = _memmap(Path("tokens.bin"), TOKENS.astype(np.uint32))
    source = TokenSource.of(_packed(tokens))
    assert source.path == str(tmp_path.resolve() / "tokens.bin")  # absolute for other workers
    assert source.array is None and source.dtype == "<u4" and source.n_tokens == 12
    wire = pickle.dumps(source)
    assert TOKENS.astype(np.uint32).tobytes() not in wire
    opened = pickle.loads(wire).open()
    assert isinstance(opened.tokens, np.memmap)
    assert opened.tokens.dtype == np.uint32 and opened.tokens.tolist() == TOKENS.tolist()
    # A path-backed source is already a file: to_file hands back the same source.
    assert source.to_file(tmp_path / "elsewhere") is source
    assert not (tmp_path / "elsewhere").exists()


def test_part_of_a_memmap_travels_as_a_copy(tmp_path: Path) -> None:
    TOKENS.tofile(tmp_path / "tokens.bin")
    offset = np.memmap(tmp_path / "tokens.bin", dtype=np.uint16, mode="r", offset=4)
    shorter = np.memmap(tmp_path / "tokens.bin", dtype=np.uint16, mode="r", shape=(10,))
    for tokens, expected in ((offset, TOKENS[2:]), (shorter, TOKENS[:10])):
        source = TokenSource.of(_packed(tokens))
        assert source.path is None and source.n_tokens == len(expected)
        assert type(source.array) is np.ndarray
        assert np.array_equal(source.open().tokens, expected)


def test_to_file_writes_the_tokens_for_a_multi_process_job(tmp_path: Path) -> None:
    source = TokenSource.of(_packed(TOKENS))
    on_file = source.to_file(tmp_path / "run")
    assert on_file.path == str(tmp_path / "run" / "tokens-12-abc123.bin")
    assert on_file.array is None
    assert (on_file.dtype, on_file.n_tokens, on_file.checksum, on_file.meta) == (
        "<u2",
        12,
        "abc123",
        {"k": 1},
    )
    assert Path(on_file.path).read_bytes() == TOKENS.tobytes()
    assert on_file.open().tokens.tolist() == TOKENS.tolist()
    # Without a checksum the file is named "mem".
    nameless = TokenSource.of(_packed(TOKENS, checksum="")).to_file(tmp_path / "run")
    assert Path(nameless.path).name == "tokens-12-mem.bin"


def test_a_run_task_pickles_with_one_thread_and_one_rank_by_default() -> None:
    task = RunTask(
        config=None,  # type: ignore[arg-type]  # the config's own tests cover it
        tokens=TokenSource.of(_packed(TOKENS)),
        store_root="/store",
        tracking=TrackingSpec("sqlite:////m.db", "parent"),
        evaluator_factory=None,
    )
    again = pickle.loads(pickle.dumps(task))
    assert (again.threads, again.ranks, again.hostfile, again.workdir) == (1, 1, None, None)
    assert again.tracking == TrackingSpec("sqlite:////m.db", "parent")
    assert again.tokens.open().tokens.tolist() == TOKENS.tolist()


def test_the_progress_board_keeps_the_last_step_of_each_run() -> None:
    board = ProgressBoard()
    board.update("a", np.int64(3), np.int64(10))
    board.update("b", 1, 4)
    board.update("a", 5, 10)
    snapshot = board.snapshot()
    assert snapshot == {"a": (5, 10), "b": (1, 4)}
    assert all(type(n) is int for pair in snapshot.values() for n in pair)
    snapshot["a"] = (0, 0)
    assert board.snapshot()["a"] == (5, 10)  # a copy


class _Actor:
    """A Ray actor handle's shape: ``update.remote(...)`` records the call."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.update = SimpleNamespace(remote=lambda *args: self.calls.append(args))


def test_report_progress_to_a_board_an_actor_or_nobody() -> None:
    board = ProgressBoard()
    report_progress(board, "run", 2, 8)
    assert board.snapshot() == {"run": (2, 8)}
    actor = _Actor()
    report_progress(actor, "run", 3, 8)
    assert actor.calls == [("run", 3, 8)]
    report_progress(None, "run", 4, 8)  # nothing to tell, nothing raised


def test_step_reporter_reports_at_most_every_interval_and_the_last_step(monkeypatch) -> None:
    clock = iter([10.0, 10.5, 11.0, 11.2, 11.3, 13.0])
    monkeypatch.setattr(tasks, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    actor = _Actor()
    hook = step_reporter(actor, "run", total=5, every=1.0)
    for step in (1, 2, 3, 4, 5):
        hook(step)
    # 1: first call; 2: 0.5 s later; 3: 1.0 s after step 1; 4: 0.2 s later; 5: the last step.
    assert actor.calls == [("run", 1, 5), ("run", 3, 5), ("run", 5, 5)]
    hook(6)  # past the end (a resumed run's replay): always reported
    assert actor.calls[-1] == ("run", 6, 5)


def test_manifest_row_has_every_column_in_order() -> None:
    summary = {
        "run_name": "tiny_B4",
        "preset": "attn-only-2l-d64",
        "batch_size": 4,
        "steps_trained": 24,
        "stop_reason": "budget",
        "n_parameters": 36352,
        "not_a_column": "dropped",
    }
    row = manifest_row(summary)
    assert row == {
        "run_name": "tiny_B4",
        "preset": "attn-only-2l-d64",
        "family": None,
        "batch_size": 4,
        "context_length": None,
        "seed": None,
        "data_variant": None,
        "copy_rate": None,
        "copy_events_per_sequence": None,
        "copied_token_fraction": None,
        "learning_rate": None,
        "max_steps": None,
        "steps_trained": 24,
        "tokens_seen": None,
        "flops": None,
        "stop_reason": "budget",
        "online_emergence_step": None,
        "run_dir": None,
        "mlflow_run_id": None,
        "wall_seconds": None,
        "n_parameters": 36352,
    }
    assert list(row) == list(tasks.MANIFEST_COLUMNS)
