"""The documents' results are renderings of docs/results/*.json, and those quote conf/base."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ih_kedro import report
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import fit_summary_dict

ROOT = Path(__file__).resolve().parents[1]


def test_committed_documents_equal_their_rendering() -> None:
    stale = report.stale_documents(ROOT)
    assert stale == [], f"run `python -m ih_kedro.report render`: {stale}"


def test_every_experiment_has_a_committed_summary_and_a_results_section() -> None:
    summaries = report.load_summaries(ROOT / report.RESULTS_DIR)
    assert [s["experiment"] for s in summaries] == list(report.EXPERIMENTS)
    for summary in summaries:
        start, end = report.section_markers(summary["experiment"])
        text = (ROOT / summary["doc"]).read_text()
        assert text.count(start) == 1 and text.count(end) == 1


def test_quoted_defaults_equal_conf_base() -> None:
    parameters = report.base_parameters(ROOT / "conf" / "base")
    drift = {
        s["experiment"]: report.design_drift(s, parameters)
        for s in report.load_summaries(ROOT / report.RESULTS_DIR)
    }
    assert drift == dict.fromkeys(report.EXPERIMENTS, [])
    # Every design key an experiment quotes is quoted by its committed summary.
    for summary in report.load_summaries(ROOT / report.RESULTS_DIR):
        assert list(summary["design"]) == report.EXPERIMENTS[summary["experiment"]]["design"]


def test_design_drift_names_the_changed_default() -> None:
    parameters = {"law_fit": {"training": {"seeds": [0, 1, 2]}}}
    summary = {"design": {"law_fit.training.seeds": [0, 1], "law_fit.training.gone": 3}}
    assert report.design_drift(summary, parameters) == [
        "law_fit.training.seeds: the results quote [0, 1], conf/base has [0, 1, 2]",
        "law_fit.training.gone: no parameter law_fit.training.gone",
    ]


@pytest.fixture
def copied_docs(tmp_path: Path) -> Path:
    """README.md, docs/ (with results/) copied, so a test may edit them."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


def test_a_hand_edited_number_is_caught(copied_docs: Path) -> None:
    readme = copied_docs / "README.md"
    text = readme.read_text()
    assert "0.87 [0.73, 1.01]" in text
    readme.write_text(text.replace("0.87 [0.73, 1.01]", "0.88 [0.73, 1.01]", 1))
    assert report.stale_documents(copied_docs) == [readme]


def test_a_changed_summary_is_rendered_into_readme_and_doc(copied_docs: Path) -> None:
    path = copied_docs / "docs" / "results" / "law_fit.json"
    summary = json.loads(path.read_text())
    summary["numbers"][0] |= {"estimate": 0.5, "ci_low": 0.25, "ci_high": 0.75}
    path.write_text(json.dumps(summary))
    rendered = report.rendered_documents(copied_docs)
    row = "a (batch exponent) 0.50 [0.25, 0.75]"
    assert row in rendered[copied_docs / "README.md"]
    assert (
        "| a (batch exponent) | 0.50 [0.25, 0.75] | 95% |"
        in rendered[copied_docs / "docs" / "law_fit.md"]
    )


def test_missing_markers_fail_naming_the_document() -> None:
    with pytest.raises(ValueError, match=r"docs/x.md: no <!-- a --> \.\.\. <!-- b --> markers"):
        report.replace_between("no markers here", "<!-- a -->", "<!-- b -->", "x", "docs/x.md")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.871, "0.87"),
        (-0.07, "−0.07"),
        (258.0, "258"),
        (26000.0, "26,000"),
        (2.6e5, "2.6e5"),
        (None, "—"),
    ],
)
def test_numbers_are_printed_as_the_documents_print_them(value, text) -> None:
    assert report.fmt(value) == text


def test_small_numbers_keep_two_significant_digits() -> None:
    assert report.fmt(3e-6) == "3e−6"


def test_collect_law_fit_reads_the_fitted_summary(tmp_path: Path) -> None:
    """A law fitted on a planted grid, written as the pipeline writes it, then collected."""
    rng = np.random.default_rng(0)
    rows = [
        {
            "run_name": f"B{b}_C{c}_s{s}",
            "batch_size": b,
            "context_length": c,
            "seed": s,
            "step": 3e4 * b**-0.8 * c**-0.1 * np.exp(rng.normal(0, 0.05)),
            "status": "emerged",
        }
        for b in (32, 64, 128)
        for c in (32, 64, 128)
        for s in (0, 1)
    ]
    fit = fit_emergence_law(pd.DataFrame(rows), leave_one_out=True)
    summary = {"status": "ok", **fit_summary_dict(fit)}
    folder = tmp_path / "law_fit"
    folder.mkdir()
    (folder / "law_fit_summary.json").write_text(json.dumps(summary, default=float))
    parameters = report.base_parameters(ROOT / "conf" / "base")
    previous = {"wall": [{"cpu": "earlier CPU", "minutes": 31.0}]}
    collected = report.collect("law_fit", tmp_path, parameters, previous, wall_minutes=2.5)

    a, b = collected["numbers"][0], collected["numbers"][1]
    assert a["name"].startswith("a ") and a["estimate"] == pytest.approx(fit.a)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx(fit.a_ci)
    assert b["estimate"] == pytest.approx(fit.b) and 0.0 < b["estimate"] < 0.2
    assert collected["runs"] == {"total": 18, "emerged": 18}
    assert collected["verdicts"][0]["verdict"] == "rejected"  # planted a = 0.8, not 0.37
    assert (
        collected["design"]["law_fit.training.seeds"] == parameters["law_fit"]["training"]["seeds"]
    )
    assert collected["wall"][0] == {"cpu": "earlier CPU", "minutes": 31.0}
    assert collected["wall"][1]["minutes"] == 2.5 and collected["provenance"]["source"] == "outputs"


def test_collect_without_outputs_keeps_the_committed_summary(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    (results / "pareto.json").write_text('{"kept": true}')
    code = report.main(
        ["collect", "--reporting", str(tmp_path / "none"), "--conf", str(ROOT / "conf" / "base")]
    )
    assert code == 0
    assert json.loads((results / "pareto.json").read_text()) == {"kept": True}
    assert sorted(p.name for p in results.iterdir()) == ["pareto.json"]


def test_check_exits_1_on_a_stale_document(copied_docs: Path, monkeypatch) -> None:
    monkeypatch.chdir(copied_docs)
    assert report.main(["check"]) == 0
    doc = copied_docs / "docs" / "pareto.md"
    doc.write_text(doc.read_text().replace("0.41 [0.20, 0.62]", "0.41 [0.21, 0.62]"))
    assert report.main(["check"]) == 1
    assert report.main(["render"]) == 0
    assert report.main(["check"]) == 0


def test_the_readmes_description_of_make_run_quotes_conf_base() -> None:
    """The one default the README states in prose (make run's grid) is conf/base's."""
    training = report.base_parameters(ROOT / "conf" / "base")["law_fit"]["training"]
    runs = len(training["batch_sizes"]) * len(training["context_lengths"]) * len(training["seeds"])
    readme = (ROOT / "README.md").read_text()

    def braces(values: list[int]) -> str:
        return "{" + ", ".join(str(v) for v in values) + "}"

    expected = (
        f"{runs} runs (B {braces(training['batch_sizes'])} ×\n"
        f"  C {braces(training['context_lengths'])} × {len(training['seeds'])} seeds)"
    )
    assert expected in readme


def test_the_committed_law_is_the_refit_of_the_committed_runs() -> None:
    """docs/results/law_fit.json's numbers are today's fit of docs/results/law_fit_runs.csv."""
    refit = report.law_fit_summary_from_runs(ROOT / "docs" / "results" / "law_fit_runs.csv")
    committed = json.loads((ROOT / "docs" / "results" / "law_fit.json").read_text())
    numbers = {n["name"].split(" ")[0]: n for n in committed["numbers"]}
    for name in ("a", "b", "T"):
        assert numbers[name]["estimate"] == pytest.approx(refit[name]["estimate"], rel=1e-9)
        assert numbers[name]["ci_low"] == pytest.approx(refit[name]["ci_low"], rel=1e-9)
        assert numbers[name]["ci_high"] == pytest.approx(refit[name]["ci_high"], rel=1e-9)
    assert committed["runs"] == {"total": 18, "emerged": 18}


def test_a_results_csv_is_rendered_into_its_doc(copied_docs: Path) -> None:
    table = copied_docs / "docs" / "results" / "base_calibration.csv"
    text = table.read_text()
    assert "\n16,0.375,3,893.1," in text
    table.write_text(text.replace("\n16,0.375,3,893.1,", "\n16,0.375,2,893.1,"))
    doc = copied_docs / "docs" / "bi_induct.md"
    assert report.stale_documents(copied_docs) == [doc]
    assert "| 16 | 0.38 | 2 | 893 |" in report.rendered_documents(copied_docs)[doc]


def test_collect_bi_induct_labels_a_degenerate_comparison(tmp_path: Path) -> None:
    folder = tmp_path / "bi_induct"
    folder.mkdir()
    claim = {
        "id": "ablation_hurts_base_more",
        "verdict": "undecided",
        "reason": "degenerate: ...",
        "difference": {"mean": 0.06, "ci_low": -0.04, "ci_high": 0.16},
        "base_excess_drop": {"mean": 0.07, "ci_low": -0.02, "ci_high": 0.15},
        "load_bearing_in_base": False,
        "sequential": {"status": "continue", "looks": [{"seeds": [0, 1, 2, 3, 4]}]},
    }
    (folder / "claims.json").write_text(json.dumps({"claims": [claim]}))
    body = report.COLLECTORS["bi_induct"](tmp_path)
    assert body["verdicts"][0]["verdict"] == (
        "undecided: degenerate (the base's top heads are not load-bearing)"
    )
    assert body["verdicts"][0]["detail"].startswith("looks at [5] seeds, continue; ")
    assert [(n["name"], n["estimate"]) for n in body["numbers"]] == [
        ("4. Δ excess ablation drop (base − induction)", 0.06),
        ("4. the base's top-head excess drop", 0.07),
    ]
    assert "notes" not in body  # no base description: the committed notes stay


def test_collect_bi_induct_names_the_base_and_its_precondition_per_seed(tmp_path: Path) -> None:
    folder = tmp_path / "bi_induct"
    folder.mkdir()
    claim = {"id": "ablation_hurts_base_more", "verdict": "supported", "reason": "d = ...",
             "difference": {"mean": 0.2, "ci_low": 0.12, "ci_high": 0.3},
             "load_bearing_in_base": True, "precondition_seeds": "5 of 5"}  # fmt: skip
    base = {"arm": "minimally_enriched", "variant": "fixed_rate_copies",
            "label": "natural, minimally enriched (one copy per 16 tokens)"}  # fmt: skip
    (folder / "claims.json").write_text(json.dumps({"claims": [claim], "base": base}))
    body = report.COLLECTORS["bi_induct"](tmp_path)
    assert body["verdicts"][0]["verdict"] == "supported"
    assert body["verdicts"][0]["detail"].startswith(
        "the base's top heads are load-bearing in 5 of 5 seeds; d = "
    )
    assert body["notes"] == [
        "Base arm `minimally_enriched`: natural, minimally enriched (one copy per 16 tokens)."
    ]


def _markov_verdicts(verdicts: dict[str, str], agree: bool = True) -> dict:
    """A verdicts.json as markov's judge node writes it (claims under ``claims``)."""
    claims = {
        name: {
            "verdict": verdict,
            "reason": "...",
            "by_threshold": {
                "0.3": verdict,
                "0.4": verdict,
                "0.5": verdict if agree else "undecided",
            },
            "agrees_across_thresholds": agree,
            "sequential": {"status": "continue", "looks": [{"n": 3}, {"n": 5}]},
        }
        for name, verdict in verdicts.items()
    }
    return {"sequential": {"next_look": None}, "claims": claims, "paired_rule": "...",
            "budget_steps": 3000}  # fmt: skip


def _write_verdicts(reporting: Path, pipeline: str, verdicts: dict) -> None:
    folder = reporting / pipeline
    folder.mkdir(parents=True)
    (folder / "verdicts.json").write_text(json.dumps(verdicts))


COMPACT = {
    "ld_necessary": "undecided",
    "ld_sufficient_at_high_repetition": "undecided",
    "cat_and_zipf_needed_near_frontier": "contradicted",
}


def test_collect_markov_without_the_full_vocabulary_run(tmp_path: Path) -> None:
    _write_verdicts(tmp_path, "markov", _markov_verdicts(COMPACT, agree=False))
    body = report.COLLECTORS["markov"](tmp_path)
    assert body["verdicts"] == [
        {
            "claim": report.MARKOV_CLAIMS[claim],
            "verdict": verdict,
            "full_vocab_verdict": "not run",
            "vocabularies_agree": None,
            "detail": f"by threshold: 0.3 {verdict}, 0.4 {verdict}, 0.5 undecided; "
            "looks at [3, 5] seeds, continue",
        }
        for claim, verdict in COMPACT.items()
    ]
    # Rendered: the full vocabulary column says so; the README cell shows the compact verdicts.
    summary = {**json.loads((ROOT / "docs/results/markov.json").read_text()), **body}
    section = report.render_section(summary)
    assert "| claim | verdict (compact vocabulary) | full vocabulary | agree | why |" in section
    assert "| LD necessary | **undecided** | **not run** | — | by threshold: " in section
    assert report._verdict_cell(summary) == (
        "LD necessary: **undecided**; LD sufficient at high repetition: **undecided**; "
        "CAT and Zipf needed near the frontier: **contradicted**"
    )


def test_collect_markov_sets_the_full_vocabulary_verdicts_beside(tmp_path: Path) -> None:
    _write_verdicts(tmp_path, "markov", _markov_verdicts(COMPACT))
    full = {"ld_necessary": "supported", "ld_sufficient_at_high_repetition": "undecided"}
    _write_verdicts(tmp_path, "markov_full_vocab", _markov_verdicts(full))
    body = report.COLLECTORS["markov"](tmp_path)
    assert [
        (v["claim"], v["verdict"], v["full_vocab_verdict"], v["vocabularies_agree"], v["detail"])
        for v in body["verdicts"]
    ] == [
        ("LD necessary", "undecided", "supported", False, "looks at [3, 5] seeds, continue"),
        ("LD sufficient at high repetition", "undecided", "undecided", True,
         "looks at [3, 5] seeds, continue"),
        ("CAT and Zipf needed near the frontier", "contradicted", "not judged", None,
         "looks at [3, 5] seeds, continue"),
    ]  # fmt: skip
    parameters = report.base_parameters(ROOT / "conf" / "base")
    summary = report.collect("markov", tmp_path, parameters)
    section = report.render_section(summary)
    assert "| LD necessary | **undecided** | **supported** | no | looks at [3, 5] seeds" in section
    assert "| LD sufficient at high repetition | **undecided** | **undecided** | yes |" in section
    assert "| **contradicted** | **not judged** | — |" in section
    assert "LD necessary: **undecided** (full vocabulary: **supported**)" in (
        report.render_readme_table([summary])
    )
    # The committed summary (no full-vocabulary fields) keeps its three-column table.
    committed = json.loads((ROOT / "docs/results/markov.json").read_text())
    assert "| claim | verdict | why |" in report.render_section(committed)


def test_collect_tables_writes_the_documented_tables_from_the_outputs(tmp_path: Path) -> None:
    """dose_response.csv and model_choice.csv become docs/results tables: numbers rounded the
    way the docs print them, per-seed lists joined, missing sources left alone."""
    reporting = tmp_path / "reporting"
    (reporting / "model_choice").mkdir(parents=True)
    pd.DataFrame([{
        "preset": "gpt2-x", "flops": 7.4648e12, "n_seeds": 3, "n_formed": 3,
        "n_within_margin": 0, "emergence_step_median": 1232.45, "emergence_step_max": 1265.0,
        "budget_steps": 1500.0, "within_steps": 1000.0, "excess_drop": 0.11413,
        "excess_drop_ci_low": 0.02812, "excess_drop_ci_high": 0.2001,
        "seed_steps": [1232.5, None, 1030.5], "seed_excess": [0.1254, 0.1416, 0.0753],
        "seed_ci_low": [0.1089, 0.1141, 0.0559], "n_load_bearing": 3, "qualifies": False,
        "chosen": False, "reason": "heads after 1000 steps in seeds [0, 2]",
    }]).to_csv(reporting / "model_choice" / "model_choice.csv", index=False)  # fmt: skip
    written = report.collect_tables(reporting, tmp_path / "results")
    assert written == [tmp_path / "results" / "model_choice.csv"]  # no dose_response: skipped
    row = pd.read_csv(written[0]).iloc[0]
    assert row["model"] == "gpt2-x" and row["FLOPs per run (1e12)"] == 7.46
    assert row["formed by step 1000 (of 3)"] == 0
    assert row["S* per seed (steps)"] == "1232; —; 1030"  # 1232.5 rounds half to even
    assert row["top heads' excess drop, mean [95 % CI]"] == "0.114 [0.028, 0.200]"
    assert row["per seed: excess (CI low)"] == "0.125 (0.109); 0.142 (0.114); 0.075 (0.056)"
    assert row["load-bearing seeds (of 3)"] == 3


def test_dose_response_rows_match_the_committed_table_format() -> None:
    rows = report.dose_response_rows([{
        "tokens_per_event": "16.0", "copy_share": "0.375", "n_seeds": "3", "n_formed": "3",
        "emergence_step_median": "893.0754", "excess_drop": "0.0238979",
        "excess_drop_ci_low": "-0.0465054", "excess_drop_ci_high": "0.0943013", "chosen": "True",
    }])  # fmt: skip
    assert rows == [{"one copy per N tokens": "16", "copied share": "0.375",
                     "seeds formed (of 3)": "3", "median S* (steps)": "893.1",
                     "top head's excess drop [95 % CI]": "0.024 [-0.047, 0.094]",
                     "chosen": "True"}]  # fmt: skip
