"""What a figure shows as text, read back from its artists."""

from __future__ import annotations

from matplotlib.axes import Axes


def legend_texts(ax: Axes) -> list[str]:
    """The entries of ``ax``'s legend, in order."""
    return [text.get_text() for text in ax.get_legend().get_texts()]


def tick_texts(labels: list) -> list[str]:
    """The strings of tick labels (``ax.get_xticklabels()``)."""
    return [label.get_text() for label in labels]
