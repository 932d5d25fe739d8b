"""Telemetry: what a checkpoint's heads do, and when an induction signature emerges.

Probes (repeated random tokens, Bi-Induct snippets) go through a model whose attention is
instrumented; per-head scores (prefix matching, previous-token, logit attribution, OV copying)
and model scores (associative recall, in-context loss drop) come out per probe sample, so every
score has a spread. Ablation zeroes or mean-replaces chosen heads. Emergence detection turns a
run's score curve over checkpoints into an emergence step with a bootstrap CI, or says why not
(censored, left-censored, fit failed).

- ``probes``: ``repeated_token_probes``, ``snippet_probes``, ``make_probe_set``, ``ProbeSet``,
  ``uniform_token_pool``, ``default_probe_length``
- ``instrumentation``: ``instrument``, ``Instrumentation``, ``hook_name``, ``n_layers_heads``
- ``scores``: ``prefix_matching_scores``, ``head_pattern_scores``, ``repeated_probe_scores``,
  ``associative_recall``, ``ov_copying_scores``, ``icl_score``, ``top_heads``
- ``checkpoint_scores``: ``score_checkpoint``
- ``ablation``: ``ablate_heads``, ``random_head_control``, ``ablation_effect``, ``all_heads``
- ``checkpoints``: ``list_checkpoints``, ``load_checkpoint``
- ``emergence``: ``estimate_emergence``, ``emergence_curve``, ``threshold_crossing``,
  ``logistic_midpoint``, ``piecewise_breakpoint``, ``EmergenceEstimate``
- ``emergence_table``: ``detect_emergence_table``, ``validate_min_layers``, ``check_min_layer``,
  ``emergence_min_layer``, ``select_emergence_rows``, ``EMERGENCE_COLUMNS``
- ``formation``: ``formation_score``, ``threshold_outcomes``, ``formation_table``,
  ``formed_column``, ``step_column``
- ``online``: ``make_online_evaluator`` (what a training run watches for its early stop)
"""
