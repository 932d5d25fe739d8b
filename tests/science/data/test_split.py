"""The MD5 held-out split, pinned: literal decisions and scores computed by hand here.

A change to the hash, the byte order, the number of bytes read, the encoding or the comparison
moves documents between train and validation and silently changes every corpus; these literal
values catch it.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ih_kedro.science.data.split import held_out_score, is_held_out

# (text, first 8 bytes of MD5(UTF-8) as hex, score = int(hex, 16) / 2**64), from hashlib by hand.
PINNED = [
    ("In the beginning", "9032a785f996b7c3", 0.5632729246222777),
    ("And God said, Let there be light", "db0a287869e9f3b5", 0.8556237501124213),
    ("", "d41d8cd98f00b204", 0.8285759001873909),
    ("a", "0cc175b9c0f1b6a8", 0.049826963281652016),
    ("Ünïcödé text", "499bb566f409f7d3", 0.2875321747160696),
    ("held out?", "cd8f41bd6b8696df", 0.8029671752406337),
]


def test_pinned_literals_match_hashlib():
    for text, prefix, score in PINNED:
        digest = hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest()
        assert digest[:8].hex() == prefix
        assert int.from_bytes(digest[:8], "big") / 2.0**64 == score


@pytest.mark.parametrize(("text", "prefix", "score"), PINNED)
def test_held_out_score_is_the_pinned_md5_score(text, prefix, score):
    assert held_out_score(text) == score


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        # Scores: 0.563, 0.856, 0.829, 0.050, 0.288, 0.803 (PINNED order).
        (0.0, [False, False, False, False, False, False]),
        (0.05, [False, False, False, True, False, False]),
        (0.2875321747160696, [False, False, False, True, False, False]),  # strict: score < f
        (0.2875321747160697, [False, False, False, True, True, False]),
        (0.6, [True, False, False, True, True, False]),
        (0.83, [True, False, True, True, True, True]),
        (1.0, [True, True, True, True, True, True]),
    ],
)
def test_held_out_decisions_are_pinned(fraction, expected):
    assert [is_held_out(text, fraction) for text, _, _ in PINNED] == expected


@pytest.mark.parametrize("fraction", [-0.01, 1.01])
def test_fraction_outside_unit_interval_names_the_parameter(fraction):
    with pytest.raises(ValueError, match=rf"held_out_fraction must be in \[0, 1\], got {fraction}"):
        is_held_out("x", fraction)


def test_hash_split_is_stable_and_near_target() -> None:
    texts = [f"document {i} with some words" for i in range(20_000)]
    held = np.array([is_held_out(t, 0.02) for t in texts])
    # Binomial(20000, 0.02): mean 400, sd 19.8.
    assert 320 < held.sum() < 480
    again = np.array([is_held_out(t, 0.02) for t in texts])
    assert (held == again).all()
    # Nested: a smaller fraction holds out a subset.
    small = np.array([is_held_out(t, 0.002) for t in texts])
    assert (small <= held).all() and 15 < small.sum() < 70
    assert not any(is_held_out(t, 0.0) for t in texts[:100])
    assert all(is_held_out(t, 1.0) for t in texts[:100])
    # Pinned: the split is part of the data contract.
    assert is_held_out("In the beginning", 0.5) == is_held_out("In the beginning", 0.5)
    with pytest.raises(ValueError, match="held_out_fraction"):
        is_held_out("x", 1.5)
