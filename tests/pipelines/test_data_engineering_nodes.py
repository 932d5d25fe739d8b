"""Value tests of the data_engineering nodes' own logic, on tiny hand-built inputs.

The science underneath (datatrove dedup, BPE training, packing, the compact vocabulary) is
tested in ``tests/science``; here ``sharded_deduplicate``, ``train_bpe_tokenizer`` and
``sharded_packing_from_selection`` are replaced by recorders where the node only passes
values on, so each test checks what the node reads, validates, passes on and returns.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer

from ih_kedro.pipelines.data_engineering import nodes
from ih_kedro.pipelines.data_engineering.nodes import (
    MIN_VALIDATION_DOCUMENTS,
    _dedup_params,
    _held_out_fraction,
    compact_token_streams,
    deduplicate_documents,
    pack_tokens,
    split_documents,
    train_tokenizer,
)
from ih_kedro.science.data.corpus import BadInputError, Document, DocumentSelection, DocumentStream
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.sharded.dedup import ShardedSelection
from ih_kedro.science.data.sharded.executor import ExecutorSettings
from ih_kedro.science.data.tokenization import TokenChunks, train_bpe_tokenizer

LOGGER = "ih_kedro.pipelines.data_engineering.nodes"
EOS = "<|endoftext|>"
SEP = "<|sep|>"
DEDUP_KEYS = [
    "false_negative_weight",
    "max_examples",
    "near",
    "num_perm",
    "seed",
    "shingle_size",
    "threshold",
]


# --------------------------------------------------------------------------- helpers


def _tokenizer(special_tokens: list[str]) -> Tokenizer:
    return train_bpe_tokenizer(
        ["ab ab ab cd cd"] * 3, vocab_size=262, special_tokens=special_tokens
    )


def _doc(text: str, ordinal: int) -> Document:
    return Document(f"s.jsonl:{ordinal + 1}", text, "unknown", "s.jsonl", ordinal + 1, ordinal)


def _report(
    bad_fraction: float = 0.0,
    bad_total: int = 0,
    validation: int = 12,
    per_file: tuple[int, ...] = (2, 1),
) -> dict[str, Any]:
    return {
        "documents_in": 5,
        "documents_out": 3,
        "exact_duplicates": {"documents_removed": 1},
        "near_duplicates": {"documents_removed": 1},
        "ingestion": {
            "bad_fraction": bad_fraction,
            "bad_total": bad_total,
            "documents_per_file": list(per_file),
        },
        "split": {"validation_documents": validation},
        "engine": {"tasks": 2},
    }


class _Recorder:
    """A stand-in for ``sharded_deduplicate`` that records its call."""

    def __init__(self, keep: Any, report: dict[str, Any]) -> None:
        self.keep = keep
        self.report = report
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.work_dir_existed: bool | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.calls.append((args, kwargs))
        self.work_dir_existed = Path(args[1]).parent.is_dir()
        return self.keep, self.report


@pytest.fixture()
def stream(tmp_path: Path) -> DocumentStream:
    return DocumentStream([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])


def _dedup_run(
    monkeypatch: pytest.MonkeyPatch,
    raw: DocumentStream,
    params: dict[str, Any],
    keep: Any = None,
    report: dict[str, Any] | None = None,
) -> tuple[_Recorder, DocumentSelection, dict[str, Any]]:
    recorder = _Recorder([True, False, True] if keep is None else keep, report or _report())
    monkeypatch.setattr(nodes, "sharded_deduplicate", recorder)
    selection, out = deduplicate_documents(raw, params)
    return recorder, selection, out


# --------------------------------------------------------------------------- _held_out_fraction


@pytest.mark.parametrize(("value", "expected"), [(0.0, 0.0), ("0.25", 0.25), (0.999, 0.999)])
def test_held_out_fraction_accepts_zero_to_below_one(value: Any, expected: float) -> None:
    got = _held_out_fraction({"held_out_fraction": value})
    assert got == expected and type(got) is float


@pytest.mark.parametrize(("value", "shown"), [(1.0, "1.0"), (-0.1, "-0.1"), (2, "2.0")])
def test_held_out_fraction_rejects_outside_the_interval(value: Any, shown: str) -> None:
    with pytest.raises(ValueError) as err:
        _held_out_fraction({"held_out_fraction": value})
    assert str(err.value) == f"data_engineering.held_out_fraction: must be in [0, 1), got {shown}"


# --------------------------------------------------------------------------- _dedup_params


def test_dedup_params_default_empty_and_copied() -> None:
    assert _dedup_params({}) == {}
    given = {"num_perm": 64, "seed": 3, "near": False}
    params = {"dedup": given}
    out = _dedup_params(params)
    assert out == {"num_perm": 64, "seed": 3, "near": False}
    out["num_perm"] = 1
    assert given["num_perm"] == 64  # the node's dict is a copy


def test_dedup_params_accepts_every_boundary_value() -> None:
    dedup = {
        "num_perm": 1,
        "threshold": 0.5,
        "shingle_size": 1,
        "false_negative_weight": 0.5,
        "max_examples": 0,
        "seed": 0,
        "near": True,
    }
    assert _dedup_params({"dedup": dedup}) == dedup
    as_strings = {"num_perm": "2", "threshold": "0.999", "false_negative_weight": "0.001"}
    assert _dedup_params({"dedup": as_strings}) == as_strings  # values passed on as given


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_perm", 0),
        ("num_perm", -1),
        ("threshold", 0.0),
        ("threshold", 1.0),
        ("threshold", 1.5),
        ("shingle_size", 0),
        ("false_negative_weight", 0.0),
        ("false_negative_weight", 1.0),
        ("max_examples", -1),
        ("threshold", "0"),
        ("near", "false"),  # a YAML string: truthy, would have run near dedup
        ("near", 0),
        ("seed", -1),
        ("seed", 1.5),
        ("seed", True),
        ("seed", "3"),
    ],
)
def test_dedup_params_rejects_invalid_values(key: str, value: Any) -> None:
    dedup = {"num_perm": 8, "threshold": 0.5, key: value}
    with pytest.raises(ValueError) as err:
        _dedup_params({"dedup": dedup})
    assert str(err.value) == f"data_engineering.dedup.{key}: invalid value {value!r}"


def test_dedup_params_checks_keys_in_order() -> None:
    """The first invalid key in check order is named (num_perm before threshold)."""
    with pytest.raises(ValueError) as err:
        _dedup_params({"dedup": {"threshold": 2.0, "num_perm": 0}})
    assert str(err.value) == "data_engineering.dedup.num_perm: invalid value 0"


def test_dedup_params_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError) as err:
        _dedup_params({"dedup": {"zeta": 1, "bands": 2, "seed": 1}})
    assert str(err.value) == (
        f"data_engineering.dedup: unknown keys ['bands', 'zeta']; expected some of {DEDUP_KEYS}"
    )


# --------------------------------------------------------------------------- deduplicate_documents


def test_deduplicate_rejects_a_non_stream() -> None:
    with pytest.raises(TypeError) as err:
        deduplicate_documents([], {"held_out_fraction": 0.1})
    assert str(err.value) == "raw_documents must be a DocumentStream (PileShardsDataset), got list"


def test_deduplicate_validates_before_running(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream
) -> None:
    recorder = _Recorder([True], _report())
    monkeypatch.setattr(nodes, "sharded_deduplicate", recorder)
    with pytest.raises(ValueError, match=r"^data_engineering\.held_out_fraction: "):
        deduplicate_documents(stream, {"held_out_fraction": 1.0})
    with pytest.raises(ValueError, match=r"^data_engineering\.dedup\.num_perm: "):
        deduplicate_documents(stream, {"held_out_fraction": 0.1, "dedup": {"num_perm": 0}})
    with pytest.raises(ValueError, match=r"^data_engineering\.executor: unknown keys \['x'\]"):
        deduplicate_documents(stream, {"held_out_fraction": 0.1, "executor": {"x": 1}})
    assert recorder.calls == []


def test_deduplicate_passes_every_setting_on(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream, tmp_path: Path
) -> None:
    keep = np.array([True, False, True])
    params = {
        "held_out_fraction": "0.25",
        "max_bad_fraction": 0.03,
        "work_dir": str(tmp_path / "wd"),
        "executor": {"kind": "local", "tasks": 3, "workers": 2},
        "dedup": {"num_perm": 16, "threshold": 0.6, "seed": 5, "near": False},
    }
    recorder, selection, report = _dedup_run(monkeypatch, stream, params, keep=keep)
    [(args, kwargs)] = recorder.calls
    assert args == (stream.paths, tmp_path / "wd")
    assert isinstance(args[1], Path)
    assert kwargs == {
        "num_perm": 16,
        "threshold": 0.6,
        "seed": 5,
        "near": False,
        "executor": ExecutorSettings(kind="local", tasks=3, workers=2, options={}),
        "held_out_fraction": 0.25,
        "max_bad_fraction": 0.03,
        "max_bad_fraction_name": "data_engineering.max_bad_fraction",
    }
    assert report is recorder.report
    assert type(selection) is ShardedSelection
    assert selection.stream is stream
    assert selection.keep is keep  # a given work_dir keeps the returned mask as it is
    assert selection.split == "all" and selection.held_out_fraction == 0.0
    assert list(selection.documents_per_file) == [2, 1]


def test_deduplicate_defaults_a_temporary_work_dir(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream
) -> None:
    recorder, selection, _ = _dedup_run(monkeypatch, stream, {"held_out_fraction": 0.1})
    [(args, kwargs)] = recorder.calls
    work = args[1]
    assert isinstance(work, Path) and work.name == "work"
    assert work.parent.name.startswith("ih_dedup_")
    assert recorder.work_dir_existed is True  # inside the temporary folder while it runs
    assert not work.parent.exists()  # removed after the node
    assert kwargs == {
        "executor": ExecutorSettings(),
        "held_out_fraction": 0.1,
        "max_bad_fraction": None,
        "max_bad_fraction_name": "data_engineering.max_bad_fraction",
    }
    # The mask is copied into memory (the temporary folder's memmap goes away).
    assert isinstance(selection.keep, np.ndarray)
    assert selection.keep.tolist() == [True, False, True]


def test_deduplicate_empty_work_dir_means_temporary(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream
) -> None:
    recorder, selection, _ = _dedup_run(
        monkeypatch, stream, {"held_out_fraction": 0.1, "work_dir": ""}
    )
    assert recorder.calls[0][0][1].parent.name.startswith("ih_dedup_")
    assert isinstance(selection.keep, np.ndarray)


@pytest.mark.parametrize("allowed", [0.01, 0.02])
def test_deduplicate_dataset_bad_fraction_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, allowed: float
) -> None:
    raw = DocumentStream([tmp_path / "a.jsonl"], max_bad_fraction=allowed)
    report = _report(bad_fraction=0.02, bad_total=3)
    if allowed < 0.02:
        with pytest.raises(BadInputError) as err:
            _dedup_run(monkeypatch, raw, {"held_out_fraction": 0.1}, report=report)
        assert str(err.value) == (
            "max_bad_fraction: 3 bad records exceed the dataset's allowed 1.0000%"
        )
    else:  # equal to the limit: accepted
        _, _, out = _dedup_run(monkeypatch, raw, {"held_out_fraction": 0.1}, report=report)
        assert out is report


def test_deduplicate_without_a_dataset_limit_ignores_the_bad_fraction(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream
) -> None:
    report = _report(bad_fraction=0.9, bad_total=99)
    _, _, out = _dedup_run(monkeypatch, stream, {"held_out_fraction": 0.1}, report=report)
    assert out is report


def test_deduplicate_logs(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    report = _report(validation=MIN_VALIDATION_DOCUMENTS - 1)
    report["engine"]["tasks"] = 4
    report["exact_duplicates"]["documents_removed"] = 2
    report["near_duplicates"]["documents_removed"] = 7
    _dedup_run(monkeypatch, stream, {"held_out_fraction": 0.125}, report=report)
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert records == [
        (
            logging.WARNING,
            "data_engineering.held_out_fraction=0.125 leaves 9 validation documents of 3: too "
            "few for validation perplexity or ICL scores",
        ),
        (
            logging.INFO,
            "dedup (datatrove, local executor, 4 tasks): 5 documents in, 3 out (2 exact, 7 near "
            "duplicates removed)",
        ),
    ]


def test_deduplicate_no_warning_at_the_minimum(
    monkeypatch: pytest.MonkeyPatch, stream: DocumentStream, caplog: pytest.LogCaptureFixture
) -> None:
    assert MIN_VALIDATION_DOCUMENTS == 10
    caplog.set_level(logging.INFO, logger=LOGGER)
    _dedup_run(monkeypatch, stream, {"held_out_fraction": 0.1}, report=_report(validation=10))
    levels = [r.levelno for r in caplog.records if r.name == LOGGER]
    assert levels == [logging.INFO]


# --------------------------------------------------------------------------- split_documents


def test_split_documents_returns_train_and_validation() -> None:
    docs = [_doc("alpha", 0), _doc("beta", 1)]
    keep = np.array([True, True])
    selection = ShardedSelection(docs, keep, documents_per_file=[2])
    train, validation = split_documents(selection, {"held_out_fraction": "0.5"})
    assert (train.split, train.held_out_fraction) == ("train", 0.5)
    assert (validation.split, validation.held_out_fraction) == ("validation", 0.5)
    for part in (train, validation):
        assert type(part) is ShardedSelection
        assert part.stream is docs and part.keep is keep
        assert list(part.documents_per_file) == [2]


def test_split_documents_validates_the_fraction() -> None:
    with pytest.raises(ValueError) as err:
        split_documents(DocumentSelection([]), {"held_out_fraction": 1})
    assert str(err.value) == "data_engineering.held_out_fraction: must be in [0, 1), got 1.0"


# --------------------------------------------------------------------------- train_tokenizer


class _TrainRecorder:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.texts: list[str] = []
        self.kwargs: dict[str, Any] = {}

    def __call__(self, texts: Any, **kwargs: Any) -> Tokenizer:
        self.texts = list(texts)
        self.kwargs = kwargs
        return self.tokenizer


def test_train_tokenizer_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = _tokenizer([EOS])
    recorder = _TrainRecorder(tok)
    monkeypatch.setattr(nodes, "train_bpe_tokenizer", recorder)
    docs = [_doc("first text", 0), _doc("second text", 1)]
    out = train_tokenizer(docs, {"tokenizer": {"vocab_size": "300"}})
    assert out is tok
    assert recorder.texts == ["first text", "second text"]
    assert recorder.kwargs == {
        "vocab_size": 300,
        "special_tokens": [EOS],
        "min_frequency": 2,
        "max_documents": None,
    }
    assert type(recorder.kwargs["vocab_size"]) is int
    assert type(recorder.kwargs["special_tokens"]) is list


def test_train_tokenizer_passes_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _TrainRecorder(_tokenizer([SEP, "<x>"]))
    monkeypatch.setattr(nodes, "train_bpe_tokenizer", recorder)
    cfg = {
        "vocab_size": 512,
        "special_tokens": (SEP, "<x>"),
        "eos_token": SEP,  # a custom EOS that the tokenizer has (it lacks the default one)
        "min_frequency": "3",
        "max_documents": 7,
        "path": "",
    }
    train_tokenizer([_doc("t", 0)], {"tokenizer": cfg})
    assert recorder.kwargs == {
        "vocab_size": 512,
        "special_tokens": [SEP, "<x>"],
        "min_frequency": 3,
        "max_documents": 7,
    }
    assert type(recorder.kwargs["special_tokens"]) is list
    assert type(recorder.kwargs["min_frequency"]) is int


def test_train_tokenizer_special_tokens_must_hold_the_eos(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _TrainRecorder(_tokenizer([EOS]))
    monkeypatch.setattr(nodes, "train_bpe_tokenizer", recorder)
    with pytest.raises(ValueError) as err:
        train_tokenizer([], {"tokenizer": {"vocab_size": 300, "special_tokens": [SEP]}})
    assert str(err.value) == (
        "data_engineering.tokenizer.special_tokens: must contain the eos_token '<|endoftext|>'"
    )
    with pytest.raises(ValueError) as err:
        train_tokenizer([], {"tokenizer": {"vocab_size": 300, "eos_token": SEP}})
    assert str(err.value) == (
        "data_engineering.tokenizer.special_tokens: must contain the eos_token '<|sep|>'"
    )
    assert recorder.kwargs == {}  # nothing trained


def test_train_tokenizer_checks_the_trained_eos(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokenizer without the EOS fails in the node (here a stand-in trainer's result)."""
    monkeypatch.setattr(nodes, "train_bpe_tokenizer", _TrainRecorder(_tokenizer([SEP])))
    with pytest.raises(ValueError) as err:
        train_tokenizer([], {"tokenizer": {"vocab_size": 300}})
    assert str(err.value) == (
        "data_engineering.tokenizer.eos_token: the tokenizer has no token '<|endoftext|>'"
    )


def test_train_tokenizer_loads_a_given_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    tok = _tokenizer([SEP])
    path = tmp_path / "tok.json"
    tok.save(str(path))
    recorder = _TrainRecorder(tok)
    monkeypatch.setattr(nodes, "train_bpe_tokenizer", recorder)
    # special_tokens without the EOS are not checked: nothing is trained.
    cfg = {"path": str(path), "eos_token": SEP, "special_tokens": [EOS], "vocab_size": 1}
    loaded = train_tokenizer([], {"tokenizer": cfg})
    assert loaded.to_str() == tok.to_str()
    assert recorder.kwargs == {}
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages == [f"using the existing tokenizer {path}"]
    # The loaded tokenizer's EOS is checked too.
    with pytest.raises(ValueError) as err:
        train_tokenizer([], {"tokenizer": {"path": str(path)}})
    assert str(err.value) == (
        "data_engineering.tokenizer.eos_token: the tokenizer has no token '<|endoftext|>'"
    )


# --------------------------------------------------------------------------- pack_tokens


def test_pack_tokens_one_process_for_a_plain_selection() -> None:
    tok = _tokenizer([SEP, EOS])  # EOS is id 1
    docs = [_doc("ab", 0), _doc("cd", 1)]
    selection = DocumentSelection(docs, None, "validation", 0.5)
    chunks = pack_tokens(selection, tok, {"tokenizer": {}})
    assert type(chunks) is TokenChunks
    assert chunks.texts is selection and chunks.tokenizer is tok
    assert chunks.eos_token_id == 1 and chunks.vocab_size == tok.get_vocab_size() == 262
    assert chunks.batch_size == 256
    assert chunks.meta == {
        "source": {
            "corpus": "list",
            "split": "validation",
            "held_out_fraction": 0.5,
            "deduplicated": False,
            "tokenizer": "trained byte-level BPE",
        }
    }


def test_pack_tokens_settings_of_a_plain_selection(tmp_path: Path) -> None:
    tok = _tokenizer([EOS, SEP])  # SEP is id 1
    raw = DocumentStream([tmp_path / "a.jsonl"], description="the corpus")
    selection = DocumentSelection(raw, np.array([True]), "train", 0.25)
    params = {
        "tokenizer": {"eos_token": SEP, "path": "tok.json"},
        "packing": {"batch_size": "1"},
    }
    chunks = pack_tokens(selection, tok, params)
    assert type(chunks) is TokenChunks
    assert chunks.eos_token_id == 1 and chunks.batch_size == 1
    assert chunks.meta == {
        "source": {
            "corpus": "the corpus",
            "split": "train",
            "held_out_fraction": 0.25,
            "deduplicated": True,
            "tokenizer": "tok.json",
        }
    }
    # A packing section without a batch size: the default.
    chunks = pack_tokens(selection, tok, {"tokenizer": {}, "packing": {}})
    assert chunks.batch_size == 256 and chunks.eos_token_id == 0


@pytest.mark.parametrize("batch_size", [0, -3])
def test_pack_tokens_rejects_a_non_positive_batch_size(batch_size: int) -> None:
    with pytest.raises(ValueError) as err:
        pack_tokens(
            DocumentSelection([]),
            _tokenizer([EOS]),
            {"tokenizer": {}, "packing": {"batch_size": batch_size}},
        )
    assert str(err.value) == (
        f"data_engineering.packing.batch_size: must be positive, got {batch_size}"
    )


def test_pack_tokens_missing_eos_fails() -> None:
    with pytest.raises(ValueError, match=r"has no token '<\|endoftext\|>'"):
        pack_tokens(DocumentSelection([]), _tokenizer([SEP]), {"tokenizer": {}})


def test_pack_tokens_shards_a_sharded_selection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake(*args: Any) -> str:
        calls.append(args)
        return "packing"

    monkeypatch.setattr(nodes, "sharded_packing_from_selection", fake)
    tok = _tokenizer([EOS, SEP])
    raw = DocumentStream([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    selection = ShardedSelection(raw, None, "validation", 0.2, [3, 4])
    params = {
        "tokenizer": {"eos_token": SEP},
        "packing": {"batch_size": 9},
        "executor": {"kind": "local", "tasks": 2},
    }
    assert pack_tokens(selection, tok, params) == "packing"
    [args] = calls
    assert args[0] is selection and args[1] is tok
    assert args[2:6] == (
        1,
        9,
        ExecutorSettings(kind="local", tasks=2),
        {
            "source": {
                "corpus": "2 shard(s)",
                "split": "validation",
                "held_out_fraction": 0.2,
                "deduplicated": False,
                "tokenizer": "trained byte-level BPE",
            }
        },
    )
    assert list(args[6]) == [3, 4] and len(args) == 7


def test_pack_tokens_sharded_default_executor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(nodes, "sharded_packing_from_selection", lambda *a: calls.append(a))
    selection = ShardedSelection(DocumentStream([tmp_path / "a"]), None, "train", 0.0, [1])
    pack_tokens(selection, _tokenizer([EOS]), {"tokenizer": {}})
    assert calls[0][2:5] == (0, 256, ExecutorSettings())


def test_pack_tokens_sharded_end_to_end(tmp_path: Path) -> None:
    """The real sharded packing gets the node's values."""
    tok = _tokenizer([EOS])
    raw = DocumentStream([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], description="c")
    selection = ShardedSelection(raw, np.array([True, True, False]), "train", 0.1, [2, 1])
    packing = pack_tokens(selection, tok, {"tokenizer": {}, "packing": {"batch_size": 4}})
    assert packing.paths == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert packing.file_offsets == [0, 2]
    assert (packing.eos_token_id, packing.batch_size) == (0, 4)
    assert packing.vocab_size == tok.get_vocab_size()
    assert packing.meta["source"]["deduplicated"] is True
    assert packing.meta["source"]["corpus"] == "c"


# --------------------------------------------------------------------------- compact_token_streams


def _packed(tokens: list[int]) -> PackedTokens:
    return PackedTokens(np.array(tokens, dtype=np.uint16), vocab_size=10, eos_token_id=0)


@pytest.mark.parametrize("params", [{}, {"compact": False, "size": 2}, {"compact": 0}])
def test_compact_off_returns_the_streams(params: dict[str, Any]) -> None:
    train, val = _packed([3, 0]), _packed([5, 0])
    out = compact_token_streams(train, val, params)
    assert out[0] is train and out[1] is val and len(out) == 2


@pytest.mark.parametrize(("size", "shown"), [(None, "None"), (True, "True"), (2.0, "2.0")])
def test_compact_needs_an_integer_size(size: Any, shown: str) -> None:
    params = {"compact": True} if size is None else {"compact": True, "size": size}
    with pytest.raises(ValueError) as err:
        compact_token_streams(_packed([3, 0]), _packed([3, 0]), params)
    assert str(err.value) == (
        f"vocabulary.size: must be an integer with compact: true, got {shown}"
    )


def test_compact_relabels_both_streams_with_the_training_vocabulary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    # Training counts: 3 x4, 5 x3, 7 x1 -> kept [3, 5]; other = 2, EOS = 3.
    train = _packed([3, 3, 3, 5, 5, 7, 0, 3, 5, 0])
    # Validation is most often 7: a vocabulary built on it would keep 7.
    val = _packed([7, 7, 7, 3, 0, 5, 9, 0])
    new_train, new_val = compact_token_streams(train, val, {"compact": True, "size": 2})
    assert np.asarray(new_train.tokens).tolist() == [0, 0, 0, 1, 1, 2, 3, 0, 1, 3]
    assert np.asarray(new_val.tokens).tolist() == [2, 2, 2, 0, 3, 1, 2, 3]
    assert (new_train.vocab_size, new_train.eos_token_id) == (4, 3)
    assert (new_val.vocab_size, new_val.eos_token_id) == (4, 3)
    assert new_train.meta["compact_vocabulary"]["original_ids"] == [3, 5]
    assert new_val.meta["compact_vocabulary"]["original_ids"] == [3, 5]
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages == ["compact vocabulary: 2 of 10 token types (+ other, EOS)"]
