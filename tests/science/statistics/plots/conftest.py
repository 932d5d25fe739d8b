from __future__ import annotations

from collections.abc import Iterator

import matplotlib.pyplot as plt
import pytest


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    """The plotting functions use pyplot; do not let the figures pile up."""
    yield
    plt.close("all")
