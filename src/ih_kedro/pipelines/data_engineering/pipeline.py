"""Wiring of the ``data_engineering`` pipeline; the logic lives in ``nodes.py``."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.data_engineering.nodes import (
    deduplicate_documents,
    pack_tokens,
    split_documents,
    train_tokenizer,
)


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ARG001 - Kedro's signature
    """raw_documents → deduplicated_documents (+ dedup_report) → train/validation documents
    → tokenizer → train_tokens, validation_tokens."""
    return Pipeline(
        [
            Node(
                deduplicate_documents,
                inputs=["raw_documents", "params:data_engineering"],
                outputs=["deduplicated_documents", "dedup_report"],
                name="deduplicate_documents",
            ),
            Node(
                split_documents,
                inputs=["deduplicated_documents", "params:data_engineering"],
                outputs=["train_documents", "validation_documents"],
                name="split_train_validation",
            ),
            Node(
                train_tokenizer,
                inputs=["train_documents", "params:data_engineering"],
                outputs="tokenizer",
                name="train_tokenizer",
            ),
            Node(
                pack_tokens,
                inputs=["train_documents", "tokenizer", "params:data_engineering"],
                outputs="train_tokens",
                name="pack_train_tokens",
            ),
            Node(
                pack_tokens,
                inputs=["validation_documents", "tokenizer", "params:data_engineering"],
                outputs="validation_tokens",
                name="pack_validation_tokens",
            ),
        ]
    )
