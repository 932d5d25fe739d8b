"""Function-vector probes (Todd et al. 2024) generated in code, and few-shot accuracy.

Tasks (``{input, output}`` pairs, as in ``ericwtodd/function_vectors``):

- ``next_item_<seq>`` / ``prev_item_<seq>`` over number words (zero–twenty), digits (0–9),
  letters (a–z), weekdays and months, with wrap-around (``sunday`` → ``monday``);
- ``capitalize`` (``apple`` → ``Apple``), ``first_letter``, ``last_letter``;
- ``choose_first`` / ``choose_middle`` / ``choose_last`` of a list of three words
  (``apple, river, green`` → ``river`` for middle);
- ``alphabetically_first`` / ``alphabetically_last`` of a list of three words.

Word lists come from packages, not hand-typed lists: common English words from ``wordfreq``
(alphabetic, 3–8 letters), number words from the Unicode character names (``DIGIT ZERO`` …
``CIRCLED NUMBER TWENTY``), weekdays and months from :mod:`calendar`, letters and digits from
:mod:`string`.

Prompts are ``Q: x\\nA: y\\n\\n`` repeated for ``k`` shots, then ``Q: x\\nA:``; the target is
`` y``. A prompt counts as correct when the model's greedy continuation reproduces every
token of the target (teacher-forced argmax at each target position: one forward pass). When a
prompt does not fit the model's context, its oldest shots are dropped (``shots_used``).
"""

from __future__ import annotations

import calendar
import logging
import string
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

logger = logging.getLogger(__name__)

TEMPLATE_SHOT = "Q: {x}\nA: {y}\n\n"
TEMPLATE_QUERY = "Q: {x}\nA:"


def number_words() -> list[str]:
    """``zero`` … ``twenty`` from the Unicode names of ``0``–``9`` and ``⑩``–``⑳``."""
    chars = [chr(c) for c in range(0x30, 0x3A)] + [chr(c) for c in range(0x2469, 0x2474)]
    return [unicodedata.name(c).split()[-1].lower() for c in chars]


def sequences() -> dict[str, list[str]]:
    """The ordered sequences of the next/previous-item tasks."""
    return {
        "number_words": number_words(),
        "digits": list(string.digits),
        "letters": list(string.ascii_lowercase),
        "weekdays": [day.lower() for day in calendar.day_name],
        "months": [month.lower() for month in calendar.month_name[1:]],
    }


def common_words(n: int = 2000, min_length: int = 3, max_length: int = 8) -> list[str]:
    """The most frequent English words (``wordfreq``) that are lowercase ASCII letters only."""
    from wordfreq import top_n_list

    words = []
    for word in top_n_list("en", n * 3):
        if min_length <= len(word) <= max_length and word.isascii() and word.isalpha():
            words.append(word.lower())
        if len(words) == n:
            break
    return sorted(set(words))


def _list_task(words: Sequence[str], pick: Callable[[list[str]], str], n: int, seed: int):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        chosen = [words[i] for i in rng.choice(len(words), size=3, replace=False)]
        pairs.append((", ".join(chosen), pick(chosen)))
    return pairs


def generate_tasks(
    n_words: int = 500, n_list_pairs: int = 200, seed: int = 0
) -> dict[str, list[tuple[str, str]]]:
    """Every task's ``(input, output)`` pairs, deterministic in ``seed``.

    Next/previous-item tasks enumerate their sequence (one pair per element, with
    wrap-around); word tasks use the ``n_words`` most frequent words; list tasks draw
    ``n_list_pairs`` lists of three distinct words.
    """
    tasks: dict[str, list[tuple[str, str]]] = {}
    for name, seq in sequences().items():
        n = len(seq)
        tasks[f"next_item_{name}"] = [(seq[i], seq[(i + 1) % n]) for i in range(n)]
        tasks[f"prev_item_{name}"] = [(seq[i], seq[(i - 1) % n]) for i in range(n)]
    words = common_words(n_words)
    tasks["capitalize"] = [(w, w.capitalize()) for w in words]
    tasks["first_letter"] = [(w, w[0]) for w in words]
    tasks["last_letter"] = [(w, w[-1]) for w in words]
    pickers: dict[str, Callable[[list[str]], str]] = {
        "choose_first": lambda ws: ws[0],
        "choose_middle": lambda ws: ws[1],
        "choose_last": lambda ws: ws[-1],
        "alphabetically_first": min,
        "alphabetically_last": max,
    }
    for offset, (name, pick) in enumerate(pickers.items()):
        tasks[name] = _list_task(words, pick, n_list_pairs, seed + 1 + offset)
    return tasks


@dataclass(frozen=True)
class FewShotPrompt:
    """One few-shot prompt: the text before the answer and the answer (with its space)."""

    task: str
    shots: int
    prompt: str
    target: str


def build_prompts(
    tasks: dict[str, list[tuple[str, str]]], shots: int, n_prompts: int, seed: int = 0
) -> list[FewShotPrompt]:
    """``n_prompts`` prompts per task with ``shots`` demonstrations each (deterministic).

    Each prompt draws a query pair and ``shots`` demonstrations among the task's *other* pairs,
    without replacement when there are enough (with replacement for the short sequences, e.g.
    the 7 weekdays at 10 shots), so the query's answer never appears as a demonstration of it.
    """
    if shots < 0 or n_prompts <= 0:
        raise ValueError(
            f"function_vectors: shots >= 0 and n_prompts > 0, got {shots}, {n_prompts}"
        )
    prompts = []
    for index, (task, pairs) in enumerate(sorted(tasks.items())):
        if len(pairs) < 2:
            raise ValueError(f"function_vectors: task {task!r} needs at least 2 pairs")
        rng = np.random.default_rng([seed, index, shots])
        for _ in range(n_prompts):
            q = int(rng.integers(len(pairs)))
            others = [i for i in range(len(pairs)) if i != q]
            picks = rng.choice(others, size=shots, replace=len(others) < shots)
            demos = "".join(TEMPLATE_SHOT.format(x=pairs[i][0], y=pairs[i][1]) for i in picks)
            query, answer = pairs[q]
            prompts.append(
                FewShotPrompt(task, shots, demos + TEMPLATE_QUERY.format(x=query), " " + answer)
            )
    return prompts


@dataclass
class EncodedPrompts:
    """Prompts as token ids, ready for batched scoring.

    ``tokens`` (n, T) right-padded with 0; ``target_mask`` (n, T) marks the target tokens (the
    positions whose *previous* position must predict them); ``shots_used`` (n,).
    """

    tasks: list[str]
    shots: int
    tokens: torch.Tensor  # (n, T) int64
    target_mask: torch.Tensor  # (n, T) bool
    shots_used: np.ndarray  # (n,)


def encode_prompts(prompts: Sequence[FewShotPrompt], tokenizer, max_length: int) -> EncodedPrompts:
    """Tokenize prompts (``tokenizers.Tokenizer``); drop the oldest shots until one fits."""
    rows, masks, used = [], [], []
    for p in prompts:
        blocks = p.prompt.split("\n\n")  # shots..., query
        shots = len(blocks) - 1
        target = tokenizer.encode(p.target, add_special_tokens=False).ids
        while True:
            text = "\n\n".join(blocks[len(blocks) - 1 - shots :])
            ids = tokenizer.encode(text, add_special_tokens=False).ids
            if len(ids) + len(target) <= max_length or shots == 0:
                break
            shots -= 1
        ids = ids[-(max_length - len(target)) :] if len(ids) + len(target) > max_length else ids
        rows.append(ids + target)
        masks.append([False] * len(ids) + [True] * len(target))
        used.append(shots)
    width = max(len(r) for r in rows)
    tokens = torch.zeros(len(rows), width, dtype=torch.long)  # (n, T)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)  # (n, T)
    for i, (r, m) in enumerate(zip(rows, masks, strict=True)):
        tokens[i, : len(r)] = torch.tensor(r)
        mask[i, : len(m)] = torch.tensor(m)
    shots = prompts[0].shots if prompts else 0
    return EncodedPrompts([p.task for p in prompts], shots, tokens, mask, np.array(used))


@torch.no_grad()
def prompt_correct(model: nn.Module, encoded: EncodedPrompts, batch_size: int = 64) -> np.ndarray:
    """Per prompt: 1.0 if every target token is the argmax given the tokens before it, ``(n,)``."""
    device = next(model.parameters()).device
    out = []
    for start in range(0, encoded.tokens.shape[0], batch_size):
        tokens = encoded.tokens[start : start + batch_size].to(device)  # (B, T)
        mask = encoded.target_mask[start : start + batch_size].to(device)  # (B, T)
        logits = model(tokens[:, :-1]).logits  # (B, T-1, V)
        predicted = logits.argmax(-1)  # (B, T-1)
        hit = (predicted == tokens[:, 1:]) | ~mask[:, 1:]  # (B, T-1)
        out.append(hit.all(dim=1).float().cpu())  # (B,)
    return torch.cat(out).numpy()


def bootstrap_mean_ci(
    values: np.ndarray, n_bootstrap: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``values`` with a percentile bootstrap CI over its entries."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(n_bootstrap, values.size))  # (n_boot, n)
    means = values[idx].mean(axis=1)  # (n_boot,)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(values.mean()), float(low), float(high)


__all__ = [
    "EncodedPrompts",
    "FewShotPrompt",
    "bootstrap_mean_ci",
    "build_prompts",
    "common_words",
    "encode_prompts",
    "generate_tasks",
    "number_words",
    "prompt_correct",
    "sequences",
]
