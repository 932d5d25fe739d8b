"""Statistics: the study's estimates, each with its CI, and the figures that show them.

The emergence law regresses the log emergence step on log B and log C (OLS, or Tobit with the
censored runs), with cluster-robust CIs by configuration, leave-one-configuration-out r, Wald
tests against published exponents and prediction intervals. The Pareto frontier is a logistic
model of head formation over frequency x reliability, with a bootstrap contour band, the
Pareto-minimal cells and the growth of S* toward the frontier, its seed bootstrap and its
verdicts at several thresholds and on a threshold-free formation score. The Markov verdicts judge the
study's claims from the runs, conditions paired by seed (``paired_seeds``: the paired t interval
and the rule that asks every seed to agree), at several thresholds; ``sequential_seeds`` adds
seeds to undecided verdicts look by look under a stated correction, and ``base_calibration``
picks the least repetition enrichment that still forms heads, ``model_choice`` the cheapest
model whose top heads carry the base's copying. ``plots`` draws every figure
the pipelines publish.

- ``law_design``: ``build_design``, ``validate_table``, ``censored_mask``, ``Design``
- ``censored_regression``: ``fit_ols``, ``fit_tobit``, ``coefficient_ci``, ``RegressionFit``
- ``emergence_law``: ``fit_emergence_law``, ``EmergenceLawFit``, ``SEED_EXPONENTS``
- ``emergence_prediction``: ``predict_emergence``, ``fit_summary_table``, ``fit_summary_dict``,
  ``observed_vs_predicted``
- ``law_mechanisms``: ``mechanism_fit_table``, ``mechanism_contrasts``, ``contrast_verdict``,
  ``CONTRAST_COLUMNS``, ``size_term_fit``, ``table_columns``,
  ``emerged_mask``, ``PUBLISHED_FORMS``, ``DEFAULT_OPTIONS``
- ``pareto_frontier``: ``fit_frontier``, ``pareto_minimal_cells``, ``fit_sstar_growth``,
  ``budget_shift``, ``FrontierFit``
- ``pareto_bootstrap``: ``bootstrap_frontier``, ``bootstrap_contour``, ``FrontierBootstrap``,
  ``BOOTSTRAP_UNITS``
- ``pareto_cells``: ``build_cell_table``, ``aggregate_cells``, ``cell_summary``,
  ``thresholds_of``, ``CELL_COLUMNS``
- ``pareto_robustness``: ``robustness_table``, ``robustness_verdicts``, ``threshold_fit``,
  ``formation_score_fit``, ``RULES``
- ``pareto_summary``: ``estimate_frontier``, ``TABLE_COLUMNS``
- ``bi_induct_claims``: ``decide_claims``, ``claims_table``, ``directional_verdict``,
  ``equivalence_verdict``, ``bound_verdict``
- ``paired_seeds``: ``paired_difference``, ``PairedDifference``, ``judge_pair``,
  ``mean_interval``, ``equivalence``, ``json_safe``, ``PAIRED_RULE``
- ``markov_verdicts``: ``condition_table``, ``judge_claims``, ``threshold_robustness_table``,
  ``verdict_summary``, ``compare_conditions``, ``RULES``
- ``sequential_seeds``: ``SequentialPlan``, ``sequential_verdict``, ``seeds_needed``,
  ``projection``, ``simulate_plan``, ``obrien_fleming_boundary``, ``SEEDS_NEEDED_FORMULA``
- ``sequential_claims``: ``bi_induct_sequential``, ``markov_sequential``,
  ``attach_bi_induct_looks``, ``adopt_sequential``, ``ADAPTIVE_DEFAULTS``
- ``base_calibration``: ``choose_dose``, ``dose_response_table``, ``dose_options``,
  ``base_label``, ``DOSE_RULE``
- ``model_choice``: ``choose_model``, ``model_table``, ``outcomes_from_runs``, ``MODEL_RULE``
- ``coverage``: ``run_harness``, ``default_checks``, ``law_checks``, ``LawDesign``,
  ``CoverageResult``
- ``markov_calibration``: ``frontier_level``, ``calibration_outcomes``, ``calibration_levels``,
  ``calibration_level_name``
- ``plots.law``: ``plot_trajectories``, ``plot_predicted_vs_observed``,
  ``plot_residuals_vs_model_size``, ``plot_repetition_curves``, ``plot_mechanism_exponents``
- ``plots.pareto``: ``plot_frontier_heatmap``, ``plot_sstar_vs_distance``,
  ``plot_threshold_robustness``
- ``plots.markov``: ``plot_processes``, ``plot_conditions``, ``plot_paired_comparisons``
- ``plots.base_calibration``: ``plot_dose_response``
- ``plots.model_choice``: ``plot_model_choice``
- ``plots.telemetry``: ``plot_prefix_matching_over_training``, ``plot_head_heatmaps``
- ``plots.bi_induct``: ``plot_signatures``, ``plot_ablation_over_training``,
  ``plot_perplexity_gap``, ``plot_load_bearing``
"""
