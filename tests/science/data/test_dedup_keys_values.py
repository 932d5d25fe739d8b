"""Value tests of ih_kedro.science.data.dedup_keys, written against mutmut survivors.

Every expected value is literal or computed here independently (hashlib, a pure-Python
re-implementation of the shingle hash), never through the function under test.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np
import pytest

from ih_kedro.science.data.dedup_keys import content_hash, shingle_hashes, shingles


def test_content_hash_is_blake2b_16_of_the_normalised_text() -> None:
    expected = hashlib.blake2b(b"hello world", digest_size=16).digest()
    assert content_hash("  Hello \n World ") == expected
    assert (
        content_hash("\ufb01 \u00c9t\u00e9")
        == hashlib.blake2b("fi \u00e9t\u00e9".encode(), digest_size=16).digest()
    )


def test_shingles_boundaries_and_default_size() -> None:
    assert shingles("a b c d e") == {b"a b c d e"}
    assert shingles("a b c d e f") == {b"a b c d e", b"b c d e f"}
    assert shingles("a b c", 2) == {b"a b", b"b c"}
    assert shingles("") == {b""}
    assert shingles("\u00e9t\u00e9 x", 1) == {"\u00e9t\u00e9".encode(), b"x"}


def _reference_shingle_hashes(text: str, k: int) -> list[int]:
    normalised = " ".join(unicodedata.normalize("NFKC", text).lower().split())
    words = re.findall(r"\w+", normalised) or [""]
    hashes = [
        int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") for w in words
    ]
    k = min(k, len(words))
    out = set()
    for i in range(len(words) - k + 1):
        acc = 0
        for j in range(k):
            acc = (acc * 0x9E3779B97F4A7C15 + hashes[i + j]) % 2**64
        out.add((acc >> 32) ^ (acc & 0xFFFFFFFF))
    return sorted(out)


@pytest.mark.parametrize(
    ("text", "k"),
    [
        ("a b c d e a b c d e", 5),  # 6 windows, 5 distinct
        ("The Quick brown fox jumps over the lazy dog", 3),
        ("one two", 5),  # shorter than k: one shingle of all words
        ("", 5),
        ("!!! ...", 5),  # no words: the empty word
        ("\u00c9t\u00e9 caf\u00e9 na\u00efve r\u00e9sum\u00e9 x y", 2),
    ],
)
def test_shingle_hashes_match_an_independent_implementation(text: str, k: int) -> None:
    got = shingle_hashes(text, k)
    assert got.dtype == np.uint32
    assert got.tolist() == _reference_shingle_hashes(text, k)
    assert len(got) == len(shingles(text, k))


def test_shingle_hashes_default_size_is_5() -> None:
    text = "a b c d e f g"
    assert shingle_hashes(text).tolist() == _reference_shingle_hashes(text, 5)
    assert len(shingle_hashes(text)) == 3
