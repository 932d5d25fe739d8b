"""``train_sweep``'s optional ``variant_data`` input is wired only when the pipeline asks.

That its options reach every run is tested with ``with_variant_data`` in
``tests/science/training/test_grid.py``.
"""

from __future__ import annotations

from ih_kedro.pipelines.training import create_pipeline


def test_training_pipeline_reads_variant_data_only_when_asked():
    plain = create_pipeline().nodes[0]
    extended = create_pipeline(variant_data=True).nodes[0]
    assert plain.inputs == ["train_tokens", "checkpoint_store", "params:training"]
    assert extended.inputs == plain.inputs + ["variant_data"]
