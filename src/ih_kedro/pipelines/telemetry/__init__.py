"""Telemetry: score every checkpoint of a sweep, detect emergence, log to MLflow, plot."""

from ih_kedro.pipelines.telemetry.pipeline import create_pipeline

__all__ = ["create_pipeline"]
