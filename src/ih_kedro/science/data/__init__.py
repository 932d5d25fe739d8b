"""Data: from Pile-format shards to the token windows a training step sees.

Raw documents are read with error accounting, deduplicated (exactly and by MinHash, in memory
or out of core with datatrove), split by a content hash into train and held-out text, encoded
with a byte-level BPE and packed into token streams. Training batches are a pure function of
(seed, step); a data variant edits their windows (copies, Bi-Induct snippets, semi-natural or
Markov sequences). Nothing here knows of models or training.

- ``corpus``: ``iter_pile_documents``, ``write_pile_shards``, ``DocumentStream``,
  ``DocumentSelection``, ``BadInputError``
- ``embedded_corpus``: ``kjv_documents``, ``write_embedded_corpus``
- ``dedup_keys``: ``normalize_text``, ``content_hash``, ``shingles``, ``shingle_hashes``
- ``split``: ``is_held_out``, ``held_out_score``
- ``sharded.executor``: ``ExecutorSettings``, ``stage_executor``, ``run_stage``, ``plan_blocks``
- ``sharded.steps``: ``PileShardReader``, ``MinhashSignatures``, ``VerifiedMinhashCluster``,
  ``KeepMaskWriter``
- ``sharded.dedup``: ``sharded_deduplicate``, ``ShardedSelection``, ``lsh_bands``
- ``sharded.packing``: ``sharded_packing_from_selection``, ``write_sharded_tokens``,
  ``ShardedPacking``
- ``tokenization``: ``train_bpe_tokenizer``, ``load_tokenizer``, ``eos_token_id``,
  ``write_packed_tokens``, ``read_packed_tokens``
- ``packed``: ``PackedTokens``, ``ShardedTokenArray``
- ``repetition_curve``: ``repetition_curve``, ``predictable_share``, ``induction_predictable``,
  ``iid_uniform_share``, ``log_spaced_lengths``, ``growth_exponent``
- ``vocabulary``: ``frequent_token_pool``, ``compact_vocabulary``, ``relabel``,
  ``CompactVocabulary``
- ``batches``: ``sample_batch``, ``batch_rng``, ``Batch``
- ``variants.registry``: ``register_variant``, ``lookup_variant``, ``load_variant_providers``,
  ``DATA_VARIANTS``, ``VARIANT_PROVIDERS``
- ``variants.copies``: ``natural``, ``copy_spans``, ``fixed_rate_copies``,
  ``expected_copy_events``, ``count_copy_events``, ``effective_tokens_per_event``
- ``variants.snippets``: ``mix_ratio``, ``snippet_count``, ``check_snippet_options``
- ``variants.bigram_model``: ``BigramModel``, ``estimate_bigram_model``
- ``variants.repetition``: ``generate_repetition_sequences``, ``transition_cdf``
- ``variants.repetition_stats``: ``measure_repetition``, ``check_repetition``,
  ``select_chunks_by_repetition``, ``RepetitionStats``
- ``variants.semi_natural``: ``semi_natural_variant``, ``check_semi_natural_options``,
  ``load_model``
- ``variants.markov_process``: ``MarkovSpec``, ``MarkovProcess``, ``design_process``,
  ``measure_process``
- ``variants.markov``: ``markov_variant``, ``markov_sequences``, ``state_token_ids``,
  ``resolve_levels``
"""
