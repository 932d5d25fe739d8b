"""Training: decoder-only transformers trained through a real DeepSpeed engine, with dense
checkpoints, one run or a sweep of them.

A run is a :class:`config.TrainingRunConfig` (model preset, B, C, seed, data variant, LR
schedule, checkpoint schedule), validated before any compute. :func:`run.train_run` is a short
sequence of named steps: set up, build the engine, resume from the last checkpoint, the step
loop (deterministic batches from ``data.batches``, online emergence check, early stop), the
checkpoints, the summary. A sweep is a grid of runs, each a Ray task (locally or on a cluster)
or a multi-rank job under the ``deepspeed`` launcher; every run is tracked in MLflow.

- ``models``: ``build_model``, ``load_model_presets``, ``count_parameters``,
  ``training_flops_per_token``, ``AttentionOnlyForCausalLM``
- ``config``: ``TrainingRunConfig``, ``validate_run_config``
- ``schedules``: ``checkpoint_schedule``, ``lr_factor``, ``EarlyStopOnEmergence``
- ``checkpoints``: ``CheckpointStore``
- ``distributed``: ``init_distributed``, ``build_engine``, ``deepspeed_config_for_run``
- ``run``: ``train_run``, ``MANIFEST_COLUMNS``
- ``chunked_cross_entropy``: ``linear_cross_entropy``, ``chunked_linear_cross_entropy``,
  ``ChunkedLinearCrossEntropy``, ``hidden_states_instead_of_logits``, ``LOSS_IMPLEMENTATIONS``
- ``grid``: ``expand_grid``, ``run_name``, ``with_variant_data``, ``sweep_probe_length``
- ``tasks``: ``RunTask``, ``TokenSource``, ``TrackingSpec``, ``manifest_row``
- ``sweep``: ``run_sweep``, ``execute_run``, ``ExecutorConfig``, ``SweepFailedError``,
  ``ray_instance``
- ``launcher``: ``launcher_command``, ``run_rank_job``, ``rank_main``
- ``tracking``: ``MlflowTracker``, ``NullTracker``, ``Tracker``, ``describe_experiment``,
  ``reparent_runs``
- ``runtime``: ``configure_runtime``
"""
