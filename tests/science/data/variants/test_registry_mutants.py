"""Value tests for the data-variant registry, written against mutation-testing survivors:
the unknown-variant message, the provider modules imported on first use."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants import copies, registry


def test_unknown_variant_message_lists_the_variants(monkeypatch):
    monkeypatch.setattr(registry, "DATA_VARIANTS", {"natural": copies.natural, "b": copies.natural})
    monkeypatch.setattr(registry, "VARIANT_PROVIDERS", ())
    with pytest.raises(ValueError) as info:
        sample_batch(np.arange(20), 1, 4, 0, 0, data_variant="zzz")
    assert str(info.value) == (
        "training.data_variants: unknown data variant 'zzz'; choose one of ['b', 'natural']"
    )


def test_unknown_variant_is_looked_up_in_the_providers(monkeypatch, tmp_path):
    name = "tdata_fake_provider_mod"
    (tmp_path / f"{name}.py").write_text(
        "import numpy as np\n"
        "from ih_kedro.science.data.variants import registry\n"
        "def _ones(windows, rng, options, step):\n"
        "    windows[:] = 1\n"
        "    return np.ones(windows.shape, dtype=bool)\n"
        "registry.register_variant('fake_ones', _ones)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(registry, "DATA_VARIANTS", dict(registry.DATA_VARIANTS))
    monkeypatch.setattr(registry, "VARIANT_PROVIDERS", (name,))
    batch = sample_batch(np.arange(30), 2, 3, 0, 0, data_variant="fake_ones")
    assert batch.tokens.numpy().tolist() == [[1, 1, 1, 1]] * 2
    assert batch.copied_fraction == 1.0
    sys.modules.pop(name, None)


def test_load_variant_providers_registers_the_provider_variants():
    registry.load_variant_providers()
    for module in registry.VARIANT_PROVIDERS:
        assert sys.modules[module].VARIANT in registry.DATA_VARIANTS
    assert registry.VARIANT_PROVIDERS == (
        "ih_kedro.science.data.variants.semi_natural",
        "ih_kedro.science.data.variants.markov",
        "ih_kedro.science.data.variants.snippets",
    )
