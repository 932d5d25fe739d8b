"""The registry of training data variants: name -> function editing a batch's windows.

:data:`DATA_VARIANTS` maps a variant's name to a function that edits the windows of a batch in
place and returns a mask of the positions it wrote; :data:`VARIANT_CHECKS` holds the optional
option checks run before training. The copy variants (``natural``, ``copy_spans``,
``fixed_rate_copies``: :mod:`ih_kedro.science.data.variants.copies`) are built in; other
experiments register their variants with :func:`register_variant` when their module is imported
(:data:`VARIANT_PROVIDERS`), so the training loop stays generic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ih_kedro.science.data.variants.copies import (
    check_fixed_rate_copies,
    copy_spans,
    fixed_rate_copies,
    natural,
)

VariantFn = Callable[[np.ndarray, np.random.Generator, Mapping[str, Any], int], np.ndarray]
"""``fn(windows, rng, options, step)``: edit ``windows`` (B, C+1) in place; return a bool mask
(B, C+1) of the positions written. ``step`` is the 0-based optimizer step (for schedules such as
an annealed mix ratio); ``rng`` is already seeded by (seed, step)."""

VariantCheck = Callable[[Mapping[str, Any], int], None]
"""``check(options, context_length)``: raise ``ValueError`` naming the parameter when a variant's
options cannot work (called before any training)."""


DATA_VARIANTS: dict[str, VariantFn] = {
    "natural": natural,
    "copy_spans": copy_spans,
    "fixed_rate_copies": fixed_rate_copies,
}
"""Registry of data variants: name -> in-place window editor. Add Bi-Induct snippets here."""

VARIANT_CHECKS: dict[str, VariantCheck] = {"fixed_rate_copies": check_fixed_rate_copies}
"""Optional per-variant option checks, run by ``validate_run_config`` before training."""

# Science modules that register further variants when imported (one line each). They are
# imported on first use, so a fresh process (a Ray worker, a DeepSpeed rank) sees every variant.
VARIANT_PROVIDERS: tuple[str, ...] = (
    "ih_kedro.science.data.variants.semi_natural",
    "ih_kedro.science.data.variants.markov",
    "ih_kedro.science.data.variants.snippets",
)


def load_variant_providers() -> None:
    """Import every module of :data:`VARIANT_PROVIDERS` (each registers its variants)."""
    import importlib

    for module in VARIANT_PROVIDERS:
        importlib.import_module(module)


def register_variant(name: str, fn: VariantFn, check: VariantCheck | None = None) -> None:
    """Add a data variant (and optionally its option check) to the registry.

    Experiments that live in their own science modules (semi-natural or Markov sequences,
    Bi-Induct snippets) register themselves here, so the training loop stays generic.
    """
    DATA_VARIANTS[name] = fn
    if check is not None:
        VARIANT_CHECKS[name] = check


def lookup_variant(name: str) -> VariantFn:
    """The variant registered as ``name``, importing the :data:`VARIANT_PROVIDERS` first when
    it is not registered yet; raises ``ValueError`` listing the variants when there is none."""
    if name not in DATA_VARIANTS:
        load_variant_providers()
    if name not in DATA_VARIANTS:
        raise ValueError(
            f"training.data_variants: unknown data variant {name!r}; "
            f"choose one of {sorted(DATA_VARIANTS)}"
        )
    return DATA_VARIANTS[name]


__all__ = [
    "DATA_VARIANTS",
    "VARIANT_CHECKS",
    "VARIANT_PROVIDERS",
    "VariantCheck",
    "VariantFn",
    "load_variant_providers",
    "lookup_variant",
    "register_variant",
]
