"""The online emergence evaluator a training run calls every ``eval_every`` steps.

Plain science (no Kedro): the training node, the benchmarks and a notebook build it the same
way, ``make_online_evaluator(train_tokens, C, options)``, and hand it to
:func:`ih_kedro.science.training.run.train_run` or a sweep.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.grid import ONLINE_METRIC, ONLINE_METRICS, online_metric_key


def make_online_evaluator(
    train_tokens: PackedTokens, context_length: int, options: Mapping[str, Any]
) -> Callable[[torch.nn.Module], dict[str, float]]:
    """Build ``evaluate(model)``: the best prefix-matching score of a head in layers ≥ 1.

    Probes: ``n_probes`` sequences of ``probe_length`` unique tokens (``train_sweep`` fills it
    with :func:`sweep_probe_length`, one length for the whole sweep; absent: ``min(50, C // 2)``)
    drawn from the ``token_pool_size`` most frequent training tokens, repeated twice
    (docs/calibration.md). Returns ``{"prefix_matching_best_layer1", "prefix_matching_best_layer0",
    "prefix_matching_by_parity_best_layer1", "probe_length"}``: the best head's mean score, and
    the best (head, query parity) one, whose mean over even or odd second-half queries finds a
    head gated to every other position (for a one-layer model "layer1" is layer 0's best).
    ``options["metric"]`` picks which of them the early stop watches (:func:`online_metric_key`).
    """
    from ih_kedro.science.data.vocabulary import frequent_token_pool
    from ih_kedro.science.telemetry.probes import repeated_token_probes
    from ih_kedro.science.telemetry.scores import head_pattern_scores

    online_metric_key(options)  # an unknown metric fails here, before any training

    pool = frequent_token_pool(
        np.asarray(train_tokens.tokens),
        train_tokens.vocab_size,
        int(options.get("token_pool_size", 500)),
        exclude=train_tokens.non_content_token_ids,
    )
    length = int(options.get("probe_length") or min(50, context_length // 2))
    if 2 * length > context_length:
        raise ValueError(
            f"training.online_emergence.probe_length: 2 x {length} tokens exceed the context "
            f"length {context_length}"
        )
    probes = repeated_token_probes(
        int(options.get("n_probes", 64)), int(length), pool, int(options.get("probe_seed", 0))
    )  # (n, 2L)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        per_sample = head_pattern_scores(model, probes, batch_size=64)  # {metric: (n, l, H)}
        scores = per_sample["prefix_matching"].mean(0)  # (n_layers, n_heads)
        by_parity = torch.stack(
            [per_sample["prefix_matching_even"], per_sample["prefix_matching_odd"]]
        ).mean(1)  # (2, n_layers, n_heads)
        later = slice(1, None) if scores.shape[0] > 1 else slice(None)
        return {
            ONLINE_METRIC: float(scores[later].max()),
            "prefix_matching_best_layer0": float(scores[0].max()),
            ONLINE_METRICS["prefix_matching_by_parity"]: float(by_parity[:, later].max()),
            "probe_length": float(length),
        }

    return evaluate
