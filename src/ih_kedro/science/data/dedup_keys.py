"""Deduplication keys of a document: the normalised text, its hash and its word shingles.

:func:`content_hash` is the exact-dedup key; :func:`shingles` / :func:`shingle_hashes` are the
word n-grams the MinHash signatures are built from (:mod:`ih_kedro.science.data.sharded.dedup`).
No Kedro imports here.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache

import numpy as np

_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


def normalize_text(text: str) -> str:
    """NFKC, lower case, whitespace runs collapsed to one space, stripped."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def content_hash(text: str) -> bytes:
    """16-byte BLAKE2b digest of :func:`normalize_text` (the exact-dedup key)."""
    return hashlib.blake2b(normalize_text(text).encode("utf-8"), digest_size=16).digest()


def shingles(text: str, shingle_size: int = 5) -> set[bytes]:
    """Word ``shingle_size``-grams of the normalised text (words = ``\\w+`` runs), as bytes.

    A text shorter than ``shingle_size`` words yields one shingle of all its words.
    """
    words = _WORD.findall(normalize_text(text))
    if len(words) <= shingle_size:
        return {" ".join(words).encode("utf-8")}
    return {
        " ".join(words[i : i + shingle_size]).encode("utf-8")
        for i in range(len(words) - shingle_size + 1)
    }


_SHINGLE_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@lru_cache(maxsize=1 << 20)
def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def shingle_hashes(text: str, shingle_size: int = 5) -> np.ndarray:
    """Distinct 32-bit hashes of the word ``shingle_size``-grams of the normalised text.

    The same shingles as :func:`shingles`, hashed without building the strings: a 64-bit
    BLAKE2b hash per word (cached), combined over the window as a polynomial mod 2**64 and
    folded to 32 bits. Deterministic across processes (unlike Python's ``hash``).

    Returns:
        A sorted ``uint32`` array ``(n_distinct_shingles,)``.
    """
    words = _WORD.findall(normalize_text(text))
    if not words:
        words = [""]
    h = np.fromiter((_word_hash(w) for w in words), dtype=np.uint64, count=len(words))
    k = min(shingle_size, len(words))
    n = len(words) - k + 1
    acc = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(k):
            acc = acc * _SHINGLE_MULTIPLIER + h[i : i + n]
    folded = (acc >> np.uint64(32)) ^ (acc & np.uint64(0xFFFFFFFF))
    return np.unique(folded.astype(np.uint32))
