"""Tests of ih_kedro.science.data.dedup_keys: the exact-dedup key and word shingles."""

from __future__ import annotations

from ih_kedro.science.data.dedup_keys import content_hash, shingles


def test_content_hash_uses_normalised_text() -> None:
    assert (
        content_hash("Hello   World.")
        == content_hash("hello world.")
        == content_hash("HELLO WORLD.\n")
    )
    assert content_hash("a  b") == content_hash("A b")
    assert content_hash("a b") != content_hash("a b.")
    assert shingles("one two three", 5) == {b"one two three"}
    assert shingles("a b c d e f", 5) == {b"a b c d e", b"b c d e f"}
