"""docs/coverage.md is the rendering of docs/results/coverage.json, and the rendering says what
each row is."""

from __future__ import annotations

import json
from pathlib import Path

from ih_kedro import coverage_report

ROOT = Path(__file__).resolve().parents[1]


def test_committed_doc_equals_the_rendering_of_the_committed_json() -> None:
    assert (ROOT / coverage_report.DOC).read_text() == coverage_report.rendered_doc(ROOT), (
        "run `python -m ih_kedro.coverage_report render`"
    )


def test_committed_results_cover_every_reported_interval() -> None:
    data = json.loads((ROOT / coverage_report.RESULTS).read_text())
    names = [row["name"] for row in data["results"]]
    for needed in (
        "law: a CI",
        "law: b CI",
        "law: T CI",
        "law: Wald test vs aoyama_sqrt_BC",
        "law: Wald test vs seed_study",
        "law: prediction interval, inside (B 48, C 90)",
        "law (tobit): a CI",
        "law_mechanisms: contrast delta_b CI",
        "paired seeds: mean difference CI (5 seeds, normal)",
        "pareto (seed bootstrap): ratio b1/b2 CI",
        "pareto (cell bootstrap): contour band at f 1",
    ):
        assert needed in names, needed
    assert all(row["draws"] >= 200 for row in data["results"])


def test_a_row_reads_nominal_measured_error_draws_design_and_verdict() -> None:
    data = {
        "command": "python -m ih_kedro.coverage_report run --draws 10",
        "seed": 0,
        "cpu": "a CPU",
        "wall_seconds": 12.0,
        "results": [
            {"name": "law: a CI", "kind": "interval", "nominal": 0.95, "measured": 0.9,
             "mc_se": 0.01, "draws": 10, "design": "grid", "flagged": True},
            {"name": "law: Wald test vs x", "kind": "test", "nominal": 0.05, "measured": 0.04,
             "mc_se": 0.002, "draws": 10, "design": "grid", "flagged": False},
        ],
        "before": [{"name": "law: a CI", "measured": 0.8, "mc_se": 0.02, "draws": 300,
                    "design": "old grid"}],
    }  # fmt: skip
    table = coverage_report.render_table(data).splitlines()
    assert table[2] == (
        "| law: a CI | 95.0 % coverage | 90.0 % ± 1.0 % | 10 | (1) | 80.0 % ± 2.0 % (300) "
        "| **under-covers** |"
    )
    assert (
        table[3] == "| law: Wald test vs x | 5.0 % size | 4.0 % ± 0.2 % | 10 | (1) |  | keeps it |"
    )
    assert table[5] == "Designs: (1) grid."
    assert table[6] == "Before the fix: old grid."
    assert table[7].endswith("on a CPU in 12 s (seed 0).")
