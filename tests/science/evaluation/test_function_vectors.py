"""Function-vector probe generation (Todd et al. 2024) and few-shot scoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from ih_kedro.science.evaluation.function_vectors import (
    FewShotPrompt,
    bootstrap_mean_ci,
    build_prompts,
    encode_prompts,
    generate_tasks,
    number_words,
    prompt_correct,
    sequences,
)


def test_sequences_come_from_packages_with_wrap_around() -> None:
    words = number_words()
    assert len(words) == 21 and words[0] == "zero" and words[13] == "thirteen"
    assert words[-1] == "twenty"
    seqs = sequences()
    assert seqs["weekdays"][0] == "monday" and len(seqs["months"]) == 12
    tasks = generate_tasks(n_words=50, n_list_pairs=20)
    assert ("sunday", "monday") in tasks["next_item_weekdays"]
    assert ("monday", "sunday") in tasks["prev_item_weekdays"]
    assert ("december", "january") in tasks["next_item_months"]
    assert ("z", "a") in tasks["next_item_letters"] and ("0", "9") in tasks["prev_item_digits"]
    assert ("twenty", "zero") in tasks["next_item_number_words"]
    assert len(tasks) == 18


def test_word_and_list_tasks_have_the_right_answers() -> None:
    tasks = generate_tasks(n_words=50, n_list_pairs=30, seed=3)
    assert len(tasks["capitalize"]) == 50
    for x, y in tasks["capitalize"]:
        assert x.isalpha() and x.islower() and y == x[0].upper() + x[1:]
    assert all(y == x[0] for x, y in tasks["first_letter"])
    assert all(y == x[-1] for x, y in tasks["last_letter"])
    for name, pick in (("choose_first", 0), ("choose_middle", 1), ("choose_last", 2)):
        for x, y in tasks[name]:
            items = x.split(", ")
            assert len(set(items)) == 3 and y == items[pick]
    assert all(y == min(x.split(", ")) for x, y in tasks["alphabetically_first"])
    assert all(y == max(x.split(", ")) for x, y in tasks["alphabetically_last"])
    assert generate_tasks(n_words=50, n_list_pairs=30, seed=3) == tasks


def test_prompts_format_shots_and_no_leak() -> None:
    tasks = generate_tasks(n_words=50, n_list_pairs=20)
    prompts = build_prompts(tasks, shots=10, n_prompts=3, seed=1)
    assert len(prompts) == 18 * 3
    weekday = [p for p in prompts if p.task == "next_item_weekdays"][0]
    blocks = weekday.prompt.split("\n\n")
    assert len(blocks) == 11 and blocks[-1].startswith("Q: ") and blocks[-1].endswith("\nA:")
    query = blocks[-1][3:-3]
    assert weekday.target == " " + dict(tasks["next_item_weekdays"])[query]
    for block in blocks[:-1]:
        q, a = block.split("\n")
        assert q[3:] != query  # the query never appears among its demonstrations
        assert (q[3:], a[3:]) in tasks["next_item_weekdays"]
    one_shot = build_prompts(tasks, shots=1, n_prompts=2)
    assert all(p.prompt.count("Q: ") == 2 for p in one_shot)
    assert build_prompts(tasks, shots=1, n_prompts=2) == one_shot


def _char_tokenizer() -> Tokenizer:
    vocab = {chr(i): i - 31 for i in range(32, 127)} | {"\n": 96, "[UNK]": 0}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return tok


class _ScriptedModel(torch.nn.Module):
    """Its argmax after position ``t`` is ``script[t]``: checks the exact-match scoring."""

    def __init__(self, script: list[int]) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.script = torch.tensor(script)

    def forward(self, tokens: torch.Tensor):  # noqa: ANN201 - HF-style output
        logits = torch.zeros(*tokens.shape, 128)  # (B, T, V)
        logits[:, torch.arange(tokens.shape[1]), self.script[: tokens.shape[1]]] = 1.0
        return type("Out", (), {"logits": logits})()


def test_encode_truncates_oldest_shots_and_scores_exact_match() -> None:
    tok = _char_tokenizer()
    prompt = FewShotPrompt("t", 2, "Q: a\nA: b\n\nQ: c\nA: d\n\nQ: e\nA:", " f")
    full = encode_prompts([prompt], tok, 64)
    assert full.shots_used.tolist() == [2]
    target_ids = full.tokens[0][full.target_mask[0]].tolist()
    assert target_ids == [tok.token_to_id(" "), tok.token_to_id("f")]
    short = encode_prompts([prompt], tok, 24)  # "Q: c\nA: d\n\nQ: e\nA:" + " f" = 22 chars
    assert short.shots_used.tolist() == [1]
    assert int(short.target_mask.sum()) == 2

    # A model whose argmax after every position is the target's tokens scores 1; else 0.
    tokens = short.tokens[0].tolist()
    n = len(tokens)
    right = [0] * (n - 3) + [tok.token_to_id(" "), tok.token_to_id("f"), 0]
    wrong = [0] * (n - 3) + [tok.token_to_id(" "), tok.token_to_id("g"), 0]
    assert prompt_correct(_ScriptedModel(right), short).tolist() == [1.0]
    assert prompt_correct(_ScriptedModel(wrong), short).tolist() == [0.0]


def test_bootstrap_mean_ci_covers_the_mean() -> None:
    values = np.array([0.0, 1.0] * 50)
    mean, low, high = bootstrap_mean_ci(values, n_bootstrap=500, seed=0)
    assert mean == 0.5 and low < 0.5 < high and high - low == pytest.approx(0.2, abs=0.06)
    assert bootstrap_mean_ci(np.ones(10))[1:] == (1.0, 1.0)
