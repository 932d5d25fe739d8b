"""Bi-Induct snippet injection: a training data variant (``bi_induct_snippets``).

A snippet is ``S ‖ SEP ‖ S`` (induction), ``S ‖ SEP ‖ reverse(S)`` (anti-induction) or either
one by a fair coin per snippet (balanced): ``2·L + 1`` tokens with ``L = span_length``
(default 20, the paper's). ``span_length: [min, max]`` draws ``L`` uniformly per snippet
instead: with one fixed ``L`` the copy always sits ``L`` tokens back, and a model with relative
positions can solve every snippet with a head that attends a fixed distance back, which is not
an induction head (what the default run showed; docs/bi_induct.md). ``S`` is a span of ``L``
natural tokens drawn from the batch itself before any edit (a random row and offset), so
snippet tokens follow the corpus' unigram distribution; the paper leaves the source of ``S``
open. ``SEP`` is a dedicated special token of the tokenizer
(``<|sep|>``, trained with the tokenizer; its id is the option ``sep_token_id``).

Snippets **replace** natural tokens, so every variant sees the same number of tokens and FLOPs.
The share of a batch's tokens that snippets replace follows the mix ratio

    m(step) = m0 · max(0, 1 − step / (anneal_fraction · total_steps))

(linear annealing from ``m0`` to 0 over the first ``anneal_fraction`` of the run; default the
whole run). The batch of ``B`` windows of ``W = C + 1`` tokens gets exactly
``n = round(m · B · W / (2L̄ + 1))`` snippets (``L̄`` the mean span: ``L``, or
``(min + max) / 2``), i.e. ``n · (2L + 1)`` replaced tokens for a fixed span (in expectation
for a range). Each window has ``floor(W / (2L_max + 1))`` slots on a grid shifted by a random
offset per window; the ``n`` snippets take ``n`` slots drawn without replacement over the whole
batch. A fixed-span snippet fills its slot; with a span range a shorter snippet starts at a
uniformly drawn offset inside its slot, so neither its span nor its position in the window is
fixed.

**A base other than natural text** (``base``, default ``natural``): the name of another data
variant (e.g. ``fixed_rate_copies``) applied to the windows first with ``base_options``, then
the snippets are written over it. The base's draws come first from the same generator, so a
snippet arm and the base arm of one seed share the same base stream (natural windows and base
edits), and only the snippets differ. The returned mask is the union of both.

Everything is drawn from the (seed, step) generator of
:func:`ih_kedro.science.data.batches.sample_batch`, so a resumed run sees the same snippets.
``total_steps`` is the run's step budget; the training loop adds it to the options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ih_kedro.science.data.variants.registry import (
    VARIANT_CHECKS,
    lookup_variant,
    register_variant,
)

VARIANT = "bi_induct_snippets"
DIRECTIONS = ("induction", "anti_induction", "balanced")
SEP_TOKEN = "<|sep|>"
DEFAULTS: dict[str, Any] = {
    "base": "natural",
    "direction": "induction",
    "span_length": 20,
    "mix_ratio": 0.5,
    "anneal_fraction": 1.0,
}


def _option(options: Mapping[str, Any], key: str) -> Any:
    return options.get(key, DEFAULTS.get(key))


def mix_ratio(step: int, total_steps: int, m0: float, anneal_fraction: float = 1.0) -> float:
    """The share of a batch's tokens replaced by snippets at 0-based ``step``.

    Linear from ``m0`` at step 0 to 0 at ``anneal_fraction · total_steps`` (and 0 after);
    ``anneal_fraction = 0`` keeps ``m0`` for the whole run (no annealing).
    """
    if anneal_fraction <= 0:
        return float(m0)
    horizon = anneal_fraction * total_steps
    return float(m0) * max(0.0, 1.0 - step / horizon)


def span_bounds(options: Mapping[str, Any]) -> tuple[int, int]:
    """``(shortest, longest)`` span ``L``: ``span_length`` is one int or a ``[min, max]`` pair."""
    span = _option(options, "span_length")
    if isinstance(span, list | tuple):
        return int(span[0]), int(span[1])
    return int(span), int(span)


def mean_snippet_length(options: Mapping[str, Any]) -> float:
    """Mean tokens per snippet, ``2 L̄ + 1`` (``L`` uniform on ``[min, max]`` for a range)."""
    low, high = span_bounds(options)
    return low + high + 1.0


def snippet_count(step: int, batch_size: int, width: int, options: Mapping[str, Any]) -> int:
    """Number of snippets in the batch of ``step``: ``round(m(step) · B · W / (2L̄ + 1))``."""
    length = mean_snippet_length(options)
    ratio = mix_ratio(
        step,
        int(options["total_steps"]),
        float(_option(options, "mix_ratio")),
        float(_option(options, "anneal_fraction")),
    )
    return round(ratio * batch_size * width / length)


def check_snippet_options(options: Mapping[str, Any], context_length: int) -> None:
    """Raise ``ValueError`` naming the option when snippets cannot be placed; else ``None``."""
    where = "training.variant_options.bi_induct_snippets"
    direction = _option(options, "direction")
    if direction not in DIRECTIONS:
        raise ValueError(f"{where}.direction: {direction!r} is not one of {DIRECTIONS}")
    span = _option(options, "span_length")
    pair = isinstance(span, list | tuple)
    values = list(span) if pair else [span]
    if (
        (pair and len(values) != 2)
        or not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values)
        or min(values) <= 0
        or (pair and values[0] > values[1])
    ):
        raise ValueError(
            f"{where}.span_length: must be a positive integer or a [min, max] pair of them "
            f"with min <= max, got {span!r}"
        )
    base = str(_option(options, "base"))
    if base == VARIANT:
        raise ValueError(f"{where}.base: snippets cannot be their own base; name another variant")
    base_check = VARIANT_CHECKS.get(base)
    lookup_variant(base)  # an unknown base fails here, listing the variants
    if base_check is not None:
        base_check(options.get("base_options") or {}, context_length)
    sep = options.get("sep_token_id")
    if not isinstance(sep, int | np.integer) or sep < 0:
        raise ValueError(
            f"{where}.sep_token_id: the id of the tokenizer's {SEP_TOKEN} special token is "
            f"required (a non-negative integer), got {sep!r}"
        )
    m0 = float(_option(options, "mix_ratio"))
    if not 0.0 <= m0 <= 1.0:
        raise ValueError(f"{where}.mix_ratio: must be in [0, 1], got {m0}")
    fraction = float(_option(options, "anneal_fraction"))
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"{where}.anneal_fraction: must be in [0, 1], got {fraction}")
    width = context_length + 1
    longest = max(values)
    length = 2 * int(longest) + 1
    slots = width // length
    if slots == 0:
        raise ValueError(
            f"{where}.span_length: a snippet of 2 x {longest} + 1 = {length} tokens does not fit "
            f"in a window of context_length + 1 = {width} tokens"
        )
    capacity = slots * mean_snippet_length(options) / width
    if m0 > capacity:
        raise ValueError(
            f"{where}.mix_ratio: {m0} of the tokens cannot be snippets; at most {capacity:.3f} "
            f"fit ({slots} snippet slot(s) of {length} tokens per window of {width})"
        )


def _snippets(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Replace ``snippet_count`` slots of ``windows`` (B, W) with snippets; return the mask."""
    if "total_steps" not in options:
        raise ValueError(
            "training.variant_options.bi_induct_snippets.total_steps: the run's step budget is "
            "needed for the annealed mix ratio (train_run adds it)"
        )
    base = str(_option(options, "base"))
    # The base's draws come first, so the base stream is the base arm's own (module docstring).
    written = lookup_variant(base)(windows, rng, options.get("base_options") or {}, step)
    batch, width = windows.shape
    shortest, span = span_bounds(options)
    sep = int(options["sep_token_id"])
    length = 2 * span + 1  # a slot holds the longest snippet
    slots = width // length
    n = snippet_count(step, batch, width, options)
    if n > batch * slots:
        raise ValueError(
            f"training.variant_options.bi_induct_snippets.mix_ratio: {n} snippets do not fit in "
            f"{batch * slots} slots"
        )
    if bool((windows == sep).any()):
        raise ValueError(
            f"training.variant_options.bi_induct_snippets.sep_token_id: token {sep} occurs in "
            f"natural text, so it is not the dedicated {SEP_TOKEN} special token (train the "
            "tokenizer with it: data_engineering.tokenizer.special_tokens)"
        )
    # Draws happen in a fixed order for every step, whatever n is.
    shift = rng.integers(0, width - slots * length + 1, size=batch)  # (B,)
    chosen = rng.permutation(batch * slots)[:n]  # (n,) slot ids
    source_row = rng.integers(0, batch, size=n)  # (n,)
    source_start = rng.integers(0, width - span + 1, size=n)  # (n,)
    direction = str(_option(options, "direction"))
    if direction == "balanced":
        reverse = rng.random(n) < 0.5  # (n,) a coin flip per snippet
    else:
        reverse = np.full(n, direction == "anti_induction")  # (n,)
    # One span per snippet; drawn only for a range, so fixed-span runs keep their stream.
    lengths = (
        rng.integers(shortest, span + 1, size=n) if shortest < span else np.full(n, span)
    )  # (n,)
    offset = np.arange(span)  # (L_max,)
    spans = windows[source_row[:, None], source_start[:, None] + offset[None, :]]  # (n, L_max)
    # Snippet i is spans[i, :s] ‖ SEP ‖ (spans[i, :s] or its reverse), s = lengths[i].
    j = np.arange(length)[None, :]  # (1, 2L_max+1) position inside the slot
    own = lengths[:, None]  # (n, 1) the snippet's span
    k = j - own - 1  # (n, 2L_max+1) index into the second half
    source = np.where(j < own, j, np.where(reverse[:, None], own - 1 - k, k))
    snippet = np.take_along_axis(spans, np.clip(source, 0, span - 1), axis=1)
    snippet = np.where(j == own, sep, snippet).astype(windows.dtype)  # (n, 2L_max+1)
    inside = j < 2 * own + 1  # (n, 2L_max+1) the snippet's own tokens
    rows = chosen // slots  # (n,)
    starts = shift[rows] + (chosen % slots) * length  # (n,)
    if shortest < span:  # a shorter snippet anywhere inside its slot (fixed spans: no draw)
        starts = starts + (rng.random(n) * (length - 2 * lengths)).astype(np.int64)  # (n,)
    positions = starts[:, None] + np.arange(length)[None, :]  # (n, 2L_max+1)
    row_index = np.broadcast_to(rows[:, None], positions.shape)
    windows[row_index[inside], positions[inside]] = snippet[inside]
    written = np.asarray(written, dtype=bool).copy()  # (B, W) the base's edits
    written[row_index[inside], positions[inside]] = True
    return written


def expected_snippet_tokens(
    total_steps: int, batch_size: int, context_length: int, options: Mapping[str, Any]
) -> int:
    """Snippet tokens a run of ``total_steps`` steps sees (for reports): exact for a fixed span,
    the expectation (rounded) for a ``[min, max]`` range."""
    width = context_length + 1
    opts = {**options, "total_steps": total_steps}
    count = sum(snippet_count(s, batch_size, width, opts) for s in range(total_steps))
    return round(mean_snippet_length(options) * count)


def average_mix_ratio(options: Mapping[str, Any]) -> float:
    """The mix ratio averaged over the run: ``m0 · f / 2`` for anneal fraction ``f > 0``."""
    m0 = float(_option(options, "mix_ratio"))
    fraction = float(_option(options, "anneal_fraction"))
    if fraction <= 0:
        return m0
    return m0 * fraction / 2


register_variant(VARIANT, _snippets, check_snippet_options)

__all__ = [
    "DEFAULTS",
    "DIRECTIONS",
    "SEP_TOKEN",
    "VARIANT",
    "average_mix_ratio",
    "check_snippet_options",
    "expected_snippet_tokens",
    "mean_snippet_length",
    "mix_ratio",
    "snippet_count",
    "span_bounds",
]
