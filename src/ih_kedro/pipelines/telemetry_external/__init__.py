"""Telemetry for any local folder of HF checkpoints (e.g. saved Pythia revisions).

``kedro run --pipeline=telemetry_external --params=telemetry.external_checkpoints=/path``
"""

from ih_kedro.pipelines.telemetry_external.pipeline import create_pipeline

__all__ = ["create_pipeline"]
