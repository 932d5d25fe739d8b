"""Probe sequences for induction-head telemetry.

Two probe families:

- **Repeated random tokens** (Olsson et al. 2022; the reference detector): ``L`` *unique*
  tokens followed by the same ``L`` tokens again, shape ``(n, 2L)``. Every second-half token
  has exactly one previous occurrence, so "the token after the previous occurrence" is known.
- **Bi-Induct snippets**: ``S ‖ SEP ‖ S`` (induction) and ``S ‖ SEP ‖ reverse(S)``
  (anti-induction), shape ``(n, 2L + 1)``.

Tokens are drawn from a *pool*. The default pool is the ``top_k`` most frequent token ids of
the training stream: rare BPE merges are (almost) never seen in training, so their embeddings
stay at initialisation and probes made of them measure noise rather than the circuit. The
reference code draws uniformly over the vocabulary (``uniform_token_pool``); keep it for
replication.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

logger = logging.getLogger(__name__)

PROBE_KINDS = ("repeated", "induction_snippet", "anti_induction_snippet")
REFERENCE_PROBE_LENGTH = 50  # the reference detector's half length L (at C >= 100)


def uniform_token_pool(vocab_size: int, exclude: Iterable[int] = ()) -> np.ndarray:
    """Every token id except ``exclude``: the reference code's uniform probe source, (V',) int64."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    keep = np.ones(vocab_size, dtype=bool)
    for e in exclude:
        if 0 <= int(e) < vocab_size:
            keep[int(e)] = False
    return np.flatnonzero(keep).astype(np.int64)


def default_probe_length(context_length: int) -> int:
    """The reference half-length ``L = min(50, C // 2)`` in tokens, so ``2L <= C``."""
    if context_length < 2:
        raise ValueError(f"context_length must be at least 2, got {context_length}")
    return min(REFERENCE_PROBE_LENGTH, context_length // 2)


def _unique_halves(n_samples: int, length: int, token_pool: np.ndarray, seed: int) -> torch.Tensor:
    if n_samples <= 0:
        raise ValueError(f"telemetry.probe.n_samples must be positive, got {n_samples}")
    if length <= 0:
        raise ValueError(f"telemetry.probe.length must be positive, got {length}")
    pool = np.unique(np.asarray(token_pool, dtype=np.int64))  # (P,) sorted distinct ids
    if pool.size < length:
        raise ValueError(
            f"telemetry.probe: the token pool has {pool.size} distinct ids, fewer "
            f"than the {length} unique tokens a probe half needs"
        )
    rng = np.random.default_rng(seed)
    halves = np.stack([rng.choice(pool, size=length, replace=False) for _ in range(n_samples)])
    return torch.from_numpy(halves.astype(np.int64))  # (n, L)


def repeated_token_probes(
    n_samples: int, length: int, token_pool: np.ndarray, seed: int
) -> torch.LongTensor:
    """Repeated random-token probes, ``LongTensor (n_samples, 2 * length)``.

    The first half is ``length`` unique tokens sampled without replacement from
    ``token_pool``; the second half repeats it. Deterministic in ``seed``.
    """
    half = _unique_halves(n_samples, length, token_pool, seed)  # (n, L)
    return torch.cat([half, half], dim=1)  # (n, 2L)


def snippet_probes(
    first_halves: torch.Tensor, sep_token: int, reverse: bool = False
) -> torch.LongTensor:
    """Bi-Induct probes ``S ‖ SEP ‖ S`` (or ``S ‖ SEP ‖ reverse(S)``), ``(n, 2L + 1)``.

    ``first_halves`` is ``(n, L)`` unique tokens per row; ``sep_token`` must not occur in it.
    """
    if bool((first_halves == sep_token).any()):
        raise ValueError(f"sep_token {sep_token} occurs inside the snippet tokens")
    sep = torch.full((first_halves.shape[0], 1), int(sep_token), dtype=torch.long)  # (n, 1)
    second = first_halves.flip(1) if reverse else first_halves  # (n, L)
    return torch.cat([first_halves, sep, second], dim=1)  # (n, 2L+1)


def induction_snippet_probes(
    n_samples: int, length: int, token_pool: np.ndarray, seed: int, sep_token: int
) -> torch.LongTensor:
    """``S ‖ SEP ‖ S`` with ``S`` = ``length`` unique pool tokens, ``(n, 2L + 1)``."""
    return snippet_probes(_unique_halves(n_samples, length, token_pool, seed), sep_token)


def anti_induction_snippet_probes(
    n_samples: int, length: int, token_pool: np.ndarray, seed: int, sep_token: int
) -> torch.LongTensor:
    """``S ‖ SEP ‖ reverse(S)`` with ``S`` = ``length`` unique pool tokens, ``(n, 2L + 1)``."""
    halves = _unique_halves(n_samples, length, token_pool, seed)
    return snippet_probes(halves, sep_token, reverse=True)


def _snippet_variants(
    half: torch.Tensor, sep_token: int | None, snippet_length: int | None = None
) -> dict[str, torch.Tensor]:
    """Bi-Induct variants of the first ``snippet_length`` tokens (default all ``L``) of the
    halves ``(n, L)``: ``{kind: (n, 2 l + 1)}``; {} without SEP."""
    if sep_token is None:
        return {}
    if snippet_length is not None:
        half = half[:, :snippet_length]  # (n, l)
    return {
        "induction_snippet": snippet_probes(half, sep_token),
        "anti_induction_snippet": snippet_probes(half, sep_token, reverse=True),
    }


@dataclass
class ProbeSet:
    """A fixed, picklable probe set.

    Attributes:
        tokens: ``(n, 2L)`` repeated-token probes (``kind == "repeated"``).
        source: where the tokens came from: ``"frequent"`` or ``"uniform"``.
        seed: the sampling seed.
        length: ``L``, the half length in tokens.
        kind: ``"repeated"``.
        sep_token: the Bi-Induct separator id, or None when there are no snippet variants.
        variants: Bi-Induct probes built from the *same* first halves (their first
            ``snippet_length`` tokens),
            ``{"induction_snippet": (n, 2l+1), "anti_induction_snippet": (n, 2l+1)}``.
        snippet_length: ``l``, the span of the snippet probes; None = ``L``. Set it to the
            training snippets' span: a model can solve fixed-span snippets with a head that
            attends a fixed distance back, which scores on probes of that span only
            (docs/bi_induct.md, "What the default measured").
    """

    tokens: torch.Tensor
    source: str
    seed: int
    length: int
    kind: str = "repeated"
    sep_token: int | None = None
    variants: dict[str, torch.Tensor] = field(default_factory=dict)
    snippet_length: int | None = None

    @property
    def n_samples(self) -> int:
        return int(self.tokens.shape[0])

    def with_length(self, length: int) -> ProbeSet:
        """The same probes with half length ``length <= self.length`` (first ``length`` tokens).

        Prefixes of unique-token halves stay unique, so shorter runs (small context sizes)
        are scored on a nested subset of the same tokens.
        """
        if length == self.length:
            return self
        if not 0 < length <= self.length:
            raise ValueError(
                f"telemetry.probe.length: cannot shorten probes of half length {self.length} "
                f"to {length}"
            )
        half = self.tokens[:, :length]  # (n, length)
        snippet = None if self.snippet_length is None else min(self.snippet_length, length)
        return replace(
            self,
            tokens=torch.cat([half, half], dim=1),  # (n, 2 * length)
            length=length,
            variants=_snippet_variants(half, self.sep_token, snippet),
            snippet_length=snippet,
        )


def make_probe_set(  # noqa: PLR0917
    token_pool: np.ndarray,
    n_samples: int,
    length: int,
    seed: int,
    source: str,
    sep_token: int | None = None,
    snippet_length: int | None = None,
) -> ProbeSet:
    """Repeated probes plus (when ``sep_token`` is given) Bi-Induct variants of the same halves
    (their first ``snippet_length`` tokens; None = all ``length``)."""
    if snippet_length is not None and not 0 < snippet_length <= length:
        raise ValueError(
            f"telemetry.probe.snippet_length: must be in [1, {length}] (the probe length), "
            f"got {snippet_length}"
        )
    half = _unique_halves(n_samples, length, token_pool, seed)  # (n, L)
    logger.info(
        "probe set: %d samples of %d unique %s tokens (seed %d)", n_samples, length, source, seed
    )
    return ProbeSet(
        tokens=torch.cat([half, half], dim=1),  # (n, 2L)
        source=source,
        seed=seed,
        length=length,
        kind="repeated",
        sep_token=sep_token,
        variants=_snippet_variants(half, sep_token, snippet_length),
        snippet_length=snippet_length,
    )
