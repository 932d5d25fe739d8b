"""law_mechanisms end to end: ``kedro run --pipeline=law_mechanisms`` on the micro corpus.

The repetition curves of the corpus and of two copy variants, through the real CLI, catalog and
sampler; values checked against what the curve must show: the copy variants repeat more than
the corpus at every C, every share and CI lies in [0, 1], and the corpus's curve grows with C
(a longer window of natural text holds more earlier occurrences).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from tests.micro_project import (
    base_parameters,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)


def test_registry_has_law_mechanisms(project_root: Path) -> None:
    bootstrap_project(project_root)
    nodes = {n.name for n in pipelines["law_mechanisms"].nodes}
    assert {"law_mechanisms.repetition_curves", "law_mechanisms.plot_repetition_curves"} <= nodes


def test_law_mechanisms_kedro_run_end_to_end(tmp_path: Path) -> None:
    project = new_micro_project(tmp_path, n_documents=40, docs_per_shard=20)
    params = base_parameters(project, "law_mechanisms")
    params["repetition_curve"].update({"max_context": 128, "n_lengths": 4, "n_windows": 40})
    write_local_parameters(
        project,
        {"data_engineering": micro_data_engineering(project), "law_mechanisms": params},
    )
    result = kedro_run(project, "--pipeline=law_mechanisms")
    assert result.returncode == 0, run_output(result)
    reporting = project / "data" / "08_reporting" / "law_mechanisms"
    curves = pd.read_csv(reporting / "repetition_curve.csv")
    labels = [s["label"] for s in params["repetition_curve"]["sources"]]
    assert curves["source"].drop_duplicates().tolist() == labels
    assert set(curves["context_length"]) == {16, 32, 64, 128}
    assert (curves["n_windows"] == 40).all()
    assert curves["share"].between(0, 1).all()
    assert (curves["ci_low"] <= curves["share"]).all() and (
        curves["share"] <= curves["ci_high"]
    ).all()
    by = curves.pivot(index="context_length", columns="source", values="share")
    corpus = by[labels[0]].to_numpy()
    for label in labels[1:]:
        assert (by[label].to_numpy() > corpus).all(), label
    assert np.all(np.diff(corpus) > 0)
    assert (reporting / "repetition_curve.png").stat().st_size > 0
