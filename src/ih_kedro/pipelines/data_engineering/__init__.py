"""``data_engineering``: Pile-format shards → dedup → hash split → BPE tokenizer → packed tokens."""

from ih_kedro.pipelines.data_engineering.pipeline import create_pipeline

__all__ = ["create_pipeline"]
