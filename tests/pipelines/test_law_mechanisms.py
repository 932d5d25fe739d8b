"""law_mechanisms end to end: ``kedro run --pipeline=law_mechanisms`` on the micro corpus.

The repetition curves of the corpus and of two copy variants, through the real CLI, catalog and
sampler; values checked against what the curve must show: the copy variants repeat more than
the corpus at every C, every share and CI lies in [0, 1], and the corpus's curve grows with C
(a longer window of natural text holds more earlier occurrences).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.law_mechanisms.nodes import repetition_curves, size_term
from ih_kedro.science.data.packed import PackedTokens
from tests.micro_project import (
    MICRO_LAW_ARM,
    MICRO_LAW_TELEMETRY,
    base_parameters,
    deep_merge,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)

ARMS = ["today", "growing_repetition", "distance_window", "both", "setup_check"]


def test_registry_has_law_mechanisms(project_root: Path) -> None:
    bootstrap_project(project_root)
    nodes = {n.name for n in pipelines["law_mechanisms"].nodes}
    assert {"law_mechanisms.repetition_curves", "law_mechanisms.plot_repetition_curves",
            "law_mechanisms.corpus_growth", "law_mechanisms.mechanism_fits",
            "law_mechanisms.mechanism_contrasts",
            "law_mechanisms.size_term"} <= nodes  # fmt: skip
    # Every arm (and the size arm) is a training sweep + telemetry in its own namespace.
    namespaces = {n.namespace for n in pipelines["law_mechanisms"].nodes}
    for arm in [*ARMS, "size"]:
        assert {f"law_mechanisms.{arm}.training", f"law_mechanisms.{arm}.telemetry"} <= namespaces


def test_law_mechanisms_kedro_run_end_to_end(tmp_path: Path) -> None:
    project = new_micro_project(tmp_path, n_documents=40, docs_per_shard=20)
    params = base_parameters(project, "law_mechanisms")
    params["repetition_curve"].update({"max_context": 128, "n_lengths": 4, "n_windows": 40})
    params["growth"].update({"min_context": 16, "max_context": 64})
    for arm in [*ARMS, "size"]:
        params[arm]["training"] = deep_merge(params[arm]["training"], MICRO_LAW_ARM)
        params[arm]["telemetry"] = deep_merge(params[arm]["telemetry"], MICRO_LAW_TELEMETRY)
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
    # Every source spans C 16-128 but arm (a)'s, whose copy events stop fitting above 64.
    lengths = curves.groupby("source")["context_length"].apply(set).to_dict()
    grows = next(s["label"] for s in params["repetition_curve"]["sources"] if "max_context" in s)
    assert lengths.pop(grows) == {16, 32, 64}
    assert all(found == {16, 32, 64, 128} for found in lengths.values())
    assert (curves["n_windows"] == 40).all()
    assert curves["share"].between(0, 1).all()
    assert (curves["ci_low"] <= curves["share"]).all() and (
        curves["share"] <= curves["ci_high"]
    ).all()
    by = curves.pivot(index="context_length", columns="source", values="share")
    corpus = by[labels[0]].to_numpy()
    for label in labels[1:]:
        shares = by[label].to_numpy()
        assert (shares[~np.isnan(shares)] > corpus[~np.isnan(shares)]).all(), label
    assert np.all(np.diff(corpus) > 0)
    assert (reporting / "repetition_curve.png").stat().st_size > 0

    # The corpus's growth over C 16-64 is the slope of log share on log C of its curve.
    growth = json.loads((reporting / "corpus_growth.json").read_text())
    corpus_rows = curves[(curves["source"] == labels[0]) & curves["context_length"].between(16, 64)]
    slope = np.polyfit(np.log(corpus_rows["context_length"]), np.log(corpus_rows["share"]), 1)[0]
    assert growth["exponent"] == pytest.approx(slope)
    assert growth["configured_exponent"] == 0.55
    # Each arm trained its own variant: the growing arm's copy events equal today's at its
    # reference C = 32 and are sparser below it (one every 16 (C / 32)^-0.55 tokens).
    model_output = project / "data" / "07_model_output"
    manifests = {arm: pd.read_parquet(model_output / f"law_mechanisms.{arm}" /
                                      "sweep_manifest.parquet") for arm in [*ARMS, "size"]}  # fmt: skip
    assert all(len(manifests[arm]) == 2 for arm in ARMS)  # B 4 x C 16, 32
    # The size arm trains only the other size; the today arm gives the size term its d 128.
    assert manifests["size"]["preset"].tolist() == ["attn-only-2l-d64"] * 2
    events = {arm: m.set_index("context_length")["copy_events_per_sequence"]
              for arm, m in manifests.items()}  # fmt: skip
    assert events["growing_repetition"][32] == pytest.approx(events["today"][32])  # C_ref = 32
    # At C = 16 today places exactly one event per sequence, the growing arm one with
    # probability 16 / 23.4 = 0.68 (realised counts of 8 sequences, so at most today's).
    assert events["today"][16] == 1.0 and events["growing_repetition"][16] <= 1.0
    # Two steps form no head: every arm's law is "not fitted"/"not identifiable", with a note.
    fits = pd.read_csv(reporting / "law_mechanisms.csv")
    assert fits["arm"].tolist() == ARMS
    assert fits["b"].isna().all() and fits["note"].str.len().gt(0).all()
    contrasts = pd.read_csv(reporting / "law_mechanisms_contrasts.csv")
    assert contrasts["arm"].tolist() == ARMS[1:] and (contrasts["reference"] == "today").all()
    assert (contrasts["verdict_b"] == "undecided").all()
    assert contrasts["note"].str.startswith("not fitted").all()
    size = json.loads((reporting / "size_term.json").read_text())
    assert size["status"] == "not fitted" and size["reason"]
    assert (reporting / "mechanism_exponents.png").stat().st_size > 0


# --------------------------------------------------------------------------------------------
# The size term node: the size arm's runs plus the reference (today) arm's at the same cells
# --------------------------------------------------------------------------------------------
FIT_PARAMS = {"metric": "prefix_matching", "method": "threshold", "threshold": None,
              "level": 0.95, "size_margin": 0.1}  # fmt: skip


def _law_arm(
    size: float,
    c_size: float,
    cells: list[tuple[int, int]],
    prefix: str,
    seeds: tuple[int, ...] = (0, 1),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Emergence rows of S* = 2e4 B^-0.8 C^-0.1 size^-c (x a seed wiggle) and the manifest."""
    rows = []
    for (batch, context), seed in itertools.product(cells, seeds):
        wiggle = 1.0 + 0.03 * (seed - 0.5) * (1 if (batch + context) % 3 else -1)
        step = 2e4 * batch**-0.8 * context**-0.1 * size**-c_size * wiggle
        rows.append({"run_name": f"{prefix}_B{batch}_C{context}_s{seed}", "batch_size": batch,
                     "context_length": context, "seed": seed, "metric": "prefix_matching",
                     "method": "threshold", "threshold": 0.4, "step": step,
                     "status": "emerged", "censored": False})  # fmt: skip
    table = pd.DataFrame(rows)
    # Learned positions: a model has C x 4 more parameters at context C (not part of its size).
    manifest = pd.DataFrame({"run_name": table["run_name"], "preset": f"{prefix}-preset",
                             "n_parameters": size + 4 * (table["context_length"] - 32)})  # fmt: skip
    return table, manifest


def test_size_term_fits_the_size_arm_with_the_reference_arms_runs_at_its_cells() -> None:
    # The size arm (d64-like, 1e5 parameters) on a 2 x 2 subset; the reference arm (4e5) on a
    # 2 x 3 grid whose C = 48 cell must not enter. Planted size exponent 0.3.
    small = _law_arm(1e5, 0.3, [(64, 32), (64, 64), (128, 32), (128, 64)], "d64")
    large = _law_arm(4e5, 0.3, [(b, c) for b in (64, 128) for c in (32, 48, 64)], "d128")
    fit = size_term(*small, FIT_PARAMS, *large)
    assert fit["status"] == "fitted"
    assert fit["n_runs"] == 16  # 8 + the reference's 8 at the shared cells, not its 12
    assert fit["sizes"] == [1e5, 4e5]
    assert fit["c"] == pytest.approx(0.3, abs=0.02)
    assert fit["a"] == pytest.approx(0.8, abs=0.05)
    assert not fit["inside_margin"]
    # Without the reference arm there is one size: reported as not fitted, not a crash.
    alone = size_term(*small, FIT_PARAMS)
    assert alone["status"] == "not fitted" and "model size" in alone["reason"]


def test_size_term_refuses_a_reference_arm_of_the_same_size() -> None:
    small = _law_arm(1e5, 0.0, [(64, 32), (64, 64), (128, 32), (128, 64)], "a")
    same = _law_arm(1e5, 0.0, [(64, 32), (64, 64), (128, 32), (128, 64)], "b")
    with pytest.raises(ValueError, match=r"model size\(s\) \[100000.0\]"):
        size_term(*small, FIT_PARAMS, *same)


def test_a_source_curve_stops_at_its_own_max_context_and_refuses_one_below_every_length() -> None:
    corpus = PackedTokens(tokens=np.arange(5000, dtype=np.uint16) % 97, vocab_size=97,
                          eos_token_id=0)  # fmt: skip
    params = {"context_lengths": [16, 32, 64], "n_windows": 8,
              "sources": [{"label": "all", "variant": "natural"},
                          {"label": "short", "variant": "natural", "max_context": 32}]}  # fmt: skip
    curves = repetition_curves(corpus, params)
    assert curves.groupby("source")["context_length"].apply(list).to_dict() == {
        "all": [16, 32, 64], "short": [16, 32]}  # fmt: skip
    params["sources"][1]["max_context"] = 8
    with pytest.raises(ValueError, match=r"sources\['short'\].max_context: 8 is below every"):
        repetition_curves(corpus, params)
