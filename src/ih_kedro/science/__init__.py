"""The science of ih-kedro: plain Python + torch, no Kedro, importable from a notebook.

One package per stage of the study, each importing only the stages below it (checked by
``lint-imports``; docs/architecture.md):

- ``statistics`` / ``evaluation``: the estimates and figures / what checkpoints can do
- ``telemetry``: head scores, ablation and emergence detection on checkpoints
- ``training``: models, runs and sweeps through DeepSpeed, tracked in MLflow
- ``data``: from Pile-format shards to training batches and their variants
"""
