"""The MD5 hash split: whether a document is held out for validation, from its text alone.

No Kedro imports here.
"""

from __future__ import annotations

import hashlib

_MD5_SPACE = float(1 << 64)


def held_out_score(text: str) -> float:
    """A uniform number in [0, 1) from the first 8 bytes of the MD5 of the UTF-8 text."""
    digest = hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big") / _MD5_SPACE


def is_held_out(text: str, fraction: float) -> bool:
    """Whether a document belongs to the held-out split: MD5 score < ``fraction``.

    Depends only on the text, so the split is stable across runs, machines and shard orders,
    and identical documents always fall on the same side.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"held_out_fraction must be in [0, 1], got {fraction}")
    return held_out_score(text) < fraction
