"""The compact model vocabulary: ranks, relabelling, and that every downstream "most frequent
tokens" consumer sees the same tokens, renamed."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.datasets.packed_tokens import PackedTokensDataset
from ih_kedro.pipelines.data_engineering.nodes import compact_token_streams
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.bigram_model import estimate_bigram_model
from ih_kedro.science.data.variants.markov import state_token_ids
from ih_kedro.science.data.vocabulary import (
    META_KEY,
    CompactVocabulary,
    compact_vocabulary,
    frequent_token_pool,
    relabel,
)

EOS = 0


def _stream(seed: int = 0, n: int = 4_000, vocab: int = 60) -> PackedTokens:
    """A Zipf-ish stream over ids 1..vocab-1 with EOS (0) between documents: a long tail whose
    total count exceeds the most frequent type's (so a naive ranking would put "other" first)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab) ** 0.7
    tokens = rng.choice(np.arange(1, vocab), size=n, p=weights / weights.sum())
    tokens[rng.choice(n, size=n // 50, replace=False)] = EOS
    return PackedTokens(tokens.astype(np.uint16), vocab, EOS, checksum="src", meta={})


def test_kept_ids_are_the_most_frequent_tokens_ties_by_smaller_id() -> None:
    # counts: 7 x5, 3 x5, 9 x4, 2 x1, EOS 0 x6 (never kept)
    tokens = np.array([7] * 5 + [3] * 5 + [9] * 4 + [2] + [0] * 6, dtype=np.uint16)
    vocab = compact_vocabulary(PackedTokens(tokens, 10, 0), 3)
    np.testing.assert_array_equal(vocab.original_ids, [3, 7, 9])
    assert (vocab.size, vocab.other_token_id, vocab.eos_token_id, vocab.vocab_size) == (3, 3, 4, 5)
    np.testing.assert_array_equal(vocab.lookup, [4, 3, 3, 0, 3, 3, 3, 1, 3, 2])
    np.testing.assert_array_equal(vocab.encode([9, 2, 0, 3, 7]), [2, 3, 4, 0, 1])
    np.testing.assert_array_equal(vocab.decode([2, 3, 4, 0, 1]), [9, -1, 0, 3, 7])
    assert vocab.encode(np.array([9, 2])).dtype == np.uint16  # what the token files hold
    one = compact_vocabulary(PackedTokens(tokens, 10, 0), 1)  # a single kept type is allowed
    np.testing.assert_array_equal(one.original_ids, [3])


def test_ranking_the_relabelled_stream_gives_the_compact_ids_in_order() -> None:
    source = _stream()
    vocab = compact_vocabulary(source, 20)
    compact = relabel(source, vocab)
    tokens = np.asarray(compact.tokens)
    other = vocab.other_token_id
    # the tail outweighs the most frequent kept type: without excluding the other id it would rank first
    assert np.count_nonzero(tokens == other) > np.count_nonzero(tokens == 0)
    assert (
        frequent_token_pool(tokens, compact.vocab_size, 1, exclude=(compact.eos_token_id,))[0]
        == other
    )
    assert compact.non_content_token_ids == (21, 20)
    pool = frequent_token_pool(
        tokens, compact.vocab_size, 20, exclude=compact.non_content_token_ids
    )
    np.testing.assert_array_equal(pool, np.arange(20))
    # the same tokens as the source's top 20, renamed
    top = frequent_token_pool(np.asarray(source.tokens), 60, 20, exclude=(EOS,))
    np.testing.assert_array_equal(vocab.original_ids, top)
    np.testing.assert_array_equal(vocab.decode(pool), top)
    ids = state_token_ids(tokens, compact.vocab_size, 16, compact.eos_token_id,
                          exclude=compact.non_content_token_ids)  # fmt: skip
    np.testing.assert_array_equal(ids, np.arange(16))


def test_bigram_model_on_the_compact_stream_is_the_source_model_renamed() -> None:
    source = _stream(seed=1)
    n_types = 15
    original = estimate_bigram_model(np.asarray(source.tokens), 60, n_types, 0.01, eos_token_id=EOS)
    vocab = compact_vocabulary(source, n_types + 1)
    compact = relabel(source, vocab)
    renamed = estimate_bigram_model(
        np.asarray(compact.tokens), compact.vocab_size, n_types, 0.01,
        eos_token_id=compact.eos_token_id, pooled_token_ids=compact.non_content_token_ids[1:],
    )  # fmt: skip
    np.testing.assert_array_equal(renamed.counts, original.counts)
    np.testing.assert_allclose(renamed.transition, original.transition)
    np.testing.assert_allclose(renamed.initial, original.initial)
    np.testing.assert_array_equal(renamed.token_ids, np.arange(n_types + 1))
    np.testing.assert_array_equal(vocab.decode(renamed.token_ids), original.token_ids)
    # without pooling the other id it would become a state of its own (the most frequent one)
    unpooled = estimate_bigram_model(
        np.asarray(compact.tokens), compact.vocab_size, n_types, 0.01,
        eos_token_id=compact.eos_token_id,
    )  # fmt: skip
    assert unpooled.token_ids[0] == vocab.other_token_id


def test_relabelled_stream_saves_loads_and_keeps_its_provenance(tmp_path) -> None:
    source = _stream(seed=2)
    source.meta.update({"source": {"split": "train"}, "shards": [{"sha256": "x"}]})
    vocab = compact_vocabulary(source, 10)
    compact = relabel(source, vocab)
    # lazy: any slice reads encoded, as uint16 unless asked otherwise
    assert np.asarray(compact.tokens).dtype == np.uint16
    assert np.asarray(compact.tokens, dtype=np.int64).dtype == np.int64
    np.testing.assert_array_equal(compact.tokens[5:40], vocab.encode(source.tokens[5:40]))
    dataset = PackedTokensDataset(str(tmp_path / "compact"))
    dataset.save(compact)
    loaded = dataset.load()
    np.testing.assert_array_equal(np.asarray(loaded.tokens), vocab.encode(source.tokens))
    assert loaded.vocab_size == 12 and loaded.eos_token_id == 11
    assert loaded.meta["n_documents"] == int(np.count_nonzero(np.asarray(source.tokens) == EOS))
    assert loaded.meta["source"] == {"split": "train"} and "shards" not in loaded.meta
    assert loaded.meta["source_sha256"] == "src"
    restored = CompactVocabulary.from_meta(loaded.meta[META_KEY])
    np.testing.assert_array_equal(restored.original_ids, vocab.original_ids)
    assert (restored.source_vocab_size, restored.source_eos_token_id) == (60, EOS)
    assert loaded.non_content_token_ids == (11, 10)
    with pytest.raises(ValueError, match="already in a compact vocabulary"):
        compact_vocabulary(loaded, 5)
    # a recorded document count is carried over, not recounted
    source.meta["n_documents"] = 7
    assert relabel(source, vocab).meta["n_documents"] == 7


def test_bad_sizes_and_mismatched_streams_fail_clearly() -> None:
    source = _stream(seed=3, vocab=30)
    with pytest.raises(ValueError, match="vocabulary.size: must be a positive integer"):
        compact_vocabulary(source, 0)
    with pytest.raises(ValueError, match="40 token types asked, the training stream has 29"):
        compact_vocabulary(source, 40)
    vocab = compact_vocabulary(source, 5)
    with pytest.raises(ValueError, match="built on a 30-token vocabulary, the stream has 31"):
        relabel(PackedTokens(np.zeros(4, np.uint16), 31, EOS), vocab)
    with pytest.raises(ValueError, match="built with EOS 0, the stream's EOS is 1"):
        relabel(PackedTokens(np.zeros(4, np.uint16), 30, 1), vocab)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 30\)"):
        vocab.encode([30])
    with pytest.raises(ValueError, match=r"compact ids must lie in \[0, 7\)"):
        vocab.decode([7])


def test_the_node_relabels_both_streams_with_the_training_ranks() -> None:
    train, validation = _stream(seed=4), _stream(seed=5)
    same = compact_token_streams(train, validation, {"compact": False, "size": 8})
    assert same[0] is train and same[1] is validation
    new_train, new_validation = compact_token_streams(
        train, validation, {"compact": True, "size": 8}
    )
    vocab = compact_vocabulary(train, 8)
    np.testing.assert_array_equal(np.asarray(new_train.tokens), vocab.encode(train.tokens))
    # validation takes the training stream's ranks, not its own
    np.testing.assert_array_equal(
        np.asarray(new_validation.tokens), vocab.encode(validation.tokens)
    )
    assert new_validation.vocab_size == 10
    with pytest.raises(ValueError, match="vocabulary.size: must be an integer"):
        compact_token_streams(train, validation, {"compact": True, "size": None})


def test_experiments_refuse_a_vocabulary_smaller_than_their_states() -> None:
    from ih_kedro.pipelines.markov.nodes import design_processes
    from ih_kedro.pipelines.pareto.nodes import build_bigram_model

    compact = relabel(_stream(seed=6), compact_vocabulary(_stream(seed=6), 12))
    with pytest.raises(
        ValueError, match=r"pareto.vocabulary.size: 12 tokens cannot hold .* 13 states"
    ):
        build_bigram_model(compact, {"n_types": 12, "other_bucket": True})
    model = build_bigram_model(compact, {"n_types": 11, "other_bucket": True})  # 12 states fit
    np.testing.assert_array_equal(model.token_ids, np.arange(12))
    design = {"vocab_size": 16, "processes": {"noLD_zipf": {"marginal": "zipf"}}}
    with pytest.raises(ValueError, match=r"markov.vocabulary.size: 12 tokens cannot hold .* 16"):
        design_processes(compact, design, {}, {})


def test_frequent_pool_orders_by_count_and_excludes():
    tokens = np.array([5, 5, 5, 2, 2, 7, 0, 0, 0, 0], dtype=np.uint16)
    assert frequent_token_pool(tokens, 10, 3, exclude=(0,)).tolist() == [5, 2, 7]
    with pytest.raises(ValueError, match="top_k"):
        frequent_token_pool(tokens, 10, 0)


def test_frequent_pool_breaks_ties_by_id_and_drops_unseen_ids():
    # counts: 0 -> 1, 1 -> 0, 2 -> 2, 3 -> 2, 4 -> 1, 5 -> 0 (ids 1 and 5 never occur)
    tokens = np.array([3, 2, 4, 3, 0, 2], dtype=np.int32)
    pool = frequent_token_pool(tokens, 6, 10)
    assert pool.tolist() == [2, 3, 0, 4]  # count desc, then id asc; unseen ids never returned
    assert pool.dtype == np.int64
    assert frequent_token_pool(tokens, 6, 1).tolist() == [2]  # top_k = 1 is allowed
    assert frequent_token_pool(tokens, 6, 3, exclude=(2,)).tolist() == [3, 0, 4]


def test_frequent_pool_reads_a_2d_stream_and_ignores_out_of_range_excludes():
    tokens = np.array([[1, 1, 1], [0, 2, 2]], dtype=np.uint16)  # a (2, 3) block of the stream
    assert frequent_token_pool(tokens, 3, 3).tolist() == [1, 2, 0]
    # Ids outside [0, vocab_size) in exclude are ignored, including vocab_size itself.
    assert frequent_token_pool(tokens, 3, 3, exclude=(3, -1, 7)).tolist() == [1, 2, 0]


def test_frequent_pool_rejects_ids_at_or_above_the_vocabulary():
    with pytest.raises(ValueError, match="token id 10 is outside the vocabulary of 10"):
        frequent_token_pool(np.array([0, 10, 3]), 10, 2)
    assert frequent_token_pool(np.array([9, 9, 3]), 10, 2).tolist() == [9, 3]
    assert frequent_token_pool(np.array([], dtype=np.int64), 4, 2).tolist() == []
