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


def test_two_experiments_sharing_a_doc_are_both_rendered(copied_docs: Path) -> None:
    """law_mechanisms and law_mechanisms_reference render into one doc: a change to the first
    survives the second's rendering (it was overwritten once, and `check` could not see it)."""
    path = copied_docs / "docs" / "results" / "law_mechanisms.json"
    summary = json.loads(path.read_text())
    summary["verdicts"][0]["verdict"] = "changed verdict"
    path.write_text(json.dumps(summary))
    doc = report.rendered_documents(copied_docs)[copied_docs / "docs" / "law_mechanisms.md"]
    assert "**changed verdict**" in doc
    assert "<!-- results:law_mechanisms_reference:start -->\n*Rendered by" in doc


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
    design = report.design_of("law_fit", parameters)
    previous = {"wall": [{"cpu": "earlier CPU", "minutes": 31.0}], "design": design}
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
    # A changed default design drops the earlier wall times: they timed another run.
    other = {**previous, "design": {**design, "law_fit.training.seeds": [0]}}
    recollected = report.collect("law_fit", tmp_path, parameters, other, wall_minutes=2.5)
    assert [w["minutes"] for w in recollected["wall"]] == [2.5]


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


BOTH_LOOKS = (
    "compact: looks at [3, 5] seeds, continue; full vocabulary: looks at [3, 5] seeds, continue"
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
        ("LD necessary", "undecided", "supported", False, BOTH_LOOKS),
        ("LD sufficient at high repetition", "undecided", "undecided", True, BOTH_LOOKS),
        ("CAT and Zipf needed near the frontier", "contradicted", "not judged", None,
         "looks at [3, 5] seeds, continue"),
    ]  # fmt: skip
    parameters = report.base_parameters(ROOT / "conf" / "base")
    summary = report.collect("markov", tmp_path, parameters)
    section = report.render_section(summary)
    assert (
        "| LD necessary | **undecided** | **supported** | no | compact: looks at [3, 5]" in section
    )
    assert "| LD sufficient at high repetition | **undecided** | **undecided** | yes |" in section
    assert "| **contradicted** | **not judged** | — |" in section
    assert "LD necessary: **undecided** (full vocabulary: **supported**)" in (
        report.render_readme_table([summary])
    )
    # A summary without full-vocabulary fields (collected before they existed) keeps the
    # three-column table.
    committed = json.loads((ROOT / "docs/results/markov.json").read_text())
    for verdict in committed["verdicts"]:
        for key in ("full_vocab_verdict", "vocabularies_agree"):
            verdict.pop(key, None)
    assert "| claim | verdict | why |" in report.render_section(committed)


def test_an_undecided_claim_says_the_seeds_it_would_need(tmp_path: Path) -> None:
    """Issue 37, item 5: undecided at the cap, the report gives the projection's seeds, and for
    Markov the seeds that disagree on formed / not formed (more seeds cannot undo them)."""
    verdicts = _markov_verdicts(COMPACT)
    verdicts["claims"]["ld_necessary"]["sequential"] = {
        "status": "undecided_at_cap", "looks": [{"n": 3}, {"n": 5}, {"n": 7}],
        "projection": {"seeds_needed": 3.0}, "seeds_disagreeing": [0]}  # fmt: skip
    verdicts["claims"]["ld_sufficient_at_high_repetition"]["sequential"] = {
        "status": "undecided_at_cap", "looks": [{"n": 3}, {"n": 5}, {"n": 7}],
        "projection": {"seeds_needed": 12.0}, "seeds_disagreeing": []}  # fmt: skip
    verdicts["claims"]["cat_and_zipf_needed_near_frontier"]["sequential"] = {
        "status": "decided",
        "looks": [{"n": 3}],
        "projection": {"seeds_needed": 9.0},
    }
    _write_verdicts(tmp_path, "markov", verdicts)
    details = [v["detail"] for v in report.COLLECTORS["markov"](tmp_path)["verdicts"]]
    assert details == [
        "looks at [3, 5, 7] seeds, undecided at the cap; the CI alone decides (its effect and "
        "spread need 3 seeds), but seed(s) 0 disagree with the others on formed / not formed, "
        "which added seeds cannot undo",
        "looks at [3, 5, 7] seeds, undecided at the cap; the observed effect and spread imply 12 "
        "seeds for the CI",
        "looks at [3] seeds, decided",
    ]


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


def _law_row(arm: str, a: tuple, b: tuple, n_runs: int, n_emerged: int) -> dict:
    return {"arm": arm, "n_runs": n_runs, "n_emerged": n_emerged, "a": a[0], "a_ci_low": a[1],
            "a_ci_high": a[2], "b": b[0], "b_ci_low": b[1], "b_ci_high": b[2]}  # fmt: skip


def _contrast_row(arm: str, reference: str, da: tuple, db: tuple, va: str, vb: str) -> dict:
    return {"arm": arm, "reference": reference, "delta_a": da[0], "delta_a_ci_low": da[1],
            "delta_a_ci_high": da[2], "delta_b": db[0], "delta_b_ci_low": db[1],
            "delta_b_ci_high": db[2], "verdict_a": va, "verdict_b": vb}  # fmt: skip


def test_collect_law_mechanisms_reference_answers_in_plain_words(tmp_path: Path) -> None:
    """The reference arm's law and its two contrasts become numbers, verdicts and a note that
    names each contrast's verdict in words; the other arms' numbers stay out of the headline."""
    folder = tmp_path / "law_mechanisms"
    folder.mkdir()
    pd.DataFrame([
        _law_row("today", (0.9, 0.8, 1.0), (-0.05, -0.2, 0.1), 12, 12),
        _law_row("setup_check", (0.7, 0.5, 0.9), (0.4, 0.0, 0.8), 12, 11),
        _law_row("reference_schedule", (1.2, 1.0, 1.4), (0.6, 0.45, 0.75), 18, 17),
    ]).to_csv(folder / "law_mechanisms_reference.csv", index=False)  # fmt: skip
    pd.DataFrame([
        _contrast_row("setup_check", "today", (-0.2, -0.4, 0.0), (0.45, 0.01, 0.88), "undecided", "moves toward"),
        _contrast_row("reference_schedule", "today", (0.3, 0.1, 0.5), (0.65, 0.4, 0.9), "moves away", "moves toward"),
        _contrast_row("reference_schedule", "setup_check", (0.5, 0.2, 0.8), (0.05, -0.1, 0.15), "moves away", "no effect"),
    ]).to_csv(folder / "law_mechanisms_reference_contrasts.csv", index=False)  # fmt: skip
    pd.DataFrame([
        {"batch_size": 32, "context_length": 32, "warmup_share": 0.5818},
        {"batch_size": 32, "context_length": 64, "warmup_share": None},
        {"batch_size": 128, "context_length": 128, "warmup_share": 0.0444},
    ]).to_csv(folder / "law_mechanisms_reference_warmup.csv", index=False)  # fmt: skip
    body = report.COLLECTORS["law_mechanisms_reference"](tmp_path)
    assert body["runs"] == {"emerged": 40, "total": 42}
    headline = [(n["name"], n["estimate"], n["ci_low"], n["ci_high"])
                for n in body["numbers"] if n["headline"]]  # fmt: skip
    assert headline == [
        ("b `reference_schedule`", 0.6, 0.45, 0.75),
        ("Δb `reference_schedule` − `today`", 0.65, 0.4, 0.9),
        ("Δb `reference_schedule` − `setup_check`", 0.05, -0.1, 0.15),
    ]
    assert [(v["claim"], v["verdict"], v["headline"]) for v in body["verdicts"]] == [
        (
            "the token-fixed schedule gives the published b = 0.5",
            "consistent (its CI includes 0.5)",
            True,
        ),
        ("`setup_check` moves b toward 0.5 (against `today`)", "moves toward", True),
        ("`reference_schedule` moves b toward 0.5 (against `today`)", "moves toward", True),
        ("`reference_schedule` moves b toward 0.5 (against `setup_check`)", "no effect", True),
    ]
    assert (
        body["verdicts"][3]["detail"] == "Δb 0.05 [−0.10, 0.15]; Δa 0.50 [0.20, 0.80] (moves away)"
    )
    assert body["notes"] == [
        "The design check: the warm-up lasted 0.58 of the median emergence step at B 32 × C 32 "
        "and 0.04 at B 128 × C 128 (the reference's range: about 0.6 to 0.03; "
        "`law_mechanisms_reference_warmup.csv`).",
        "In plain words: with warm-up and cosine fixed in tokens (so both last ∝ 1/(B·C) steps), "
        "the fitted context exponent is b = 0.60 [0.45, 0.75]; its CI includes the published "
        "0.5; against `today` it moves b toward "
        "the published 0.5; against `setup_check` it leaves b where it is (its difference lies "
        "inside the margin).",
    ]
    # b's CI below the published 0.5 is said so.
    pd.DataFrame([_law_row("reference_schedule", (0.7, 0.6, 0.9), (-0.22, -0.42, -0.01), 18, 18)]
                 ).to_csv(folder / "law_mechanisms_reference.csv", index=False)  # fmt: skip
    below = report.COLLECTORS["law_mechanisms_reference"](tmp_path)
    assert (
        "b = −0.22 [−0.42, −0.01]; its CI lies below the published 0.5; against"
        in (below["notes"][-1])
    )
    assert below["verdicts"][0]["verdict"] == "contradicted (b below 0.5)"
    # A missing table means "not run here": collect keeps the committed summary.
    with pytest.raises(FileNotFoundError):
        report.COLLECTORS["law_mechanisms_reference"](tmp_path / "elsewhere")


def test_reference_warmup_rows_print_the_design_check() -> None:
    rows = report.reference_warmup_rows([
        {"batch_size": "32", "context_length": "32", "tokens_per_step": "1024",
         "warmup_steps": "640", "horizon_steps": "64000", "n_runs": "3", "n_emerged": "3",
         "emergence_step_median": "1100.26", "warmup_share": "0.58168"},
        {"batch_size": "128", "context_length": "128", "tokens_per_step": "16384",
         "warmup_steps": "40", "horizon_steps": "4000", "n_runs": "3", "n_emerged": "0",
         "emergence_step_median": "", "warmup_share": ""},
    ])  # fmt: skip
    assert rows == [
        {"B": "32", "C": "32", "B·C": "1024", "warm-up (steps)": "640",
         "cosine horizon (steps)": "64000", "runs formed": "3 of 3",
         "median S* (steps)": "1100.3", "warm-up / S*": "0.582"},
        {"B": "128", "C": "128", "B·C": "16384", "warm-up (steps)": "40",
         "cosine horizon (steps)": "4000", "runs formed": "0 of 3", "median S* (steps)": "",
         "warm-up / S*": ""},
    ]  # fmt: skip


def test_a_claim_stopped_before_the_cap_says_so() -> None:
    """A Markov claim that added seeds can no longer decide (status ``undecided_futile``)."""
    text = report._looks_text({"status": "undecided_futile", "looks": [{"n": 3}],
                               "seeds_disagreeing": [0]})  # fmt: skip
    assert text == [
        "looks at [3] seeds, undecided, stopped before the cap (added seeds cannot decide it)",
        "seed(s) 0 disagree with the others on formed / not formed, which added seeds cannot undo",
    ]


def _seed(seed: int, treatment: bool, control: bool) -> dict:
    return {"seed": seed, "treatment_formed": treatment, "control_formed": control}


def _look(n: int, level: float, details: list[tuple]) -> dict:
    return {"look": (n - 1) // 2, "n": n, "seeds": list(range(n)), "level": level,
            "details": [{"treatment": t, "control": k, "verdict": v, "mean": m, "ci_low": lo,
                         "ci_high": hi, "n": n} for t, k, v, m, lo, hi in details]}  # fmt: skip


def test_markov_looks_rows_read_each_claims_last_look_and_its_seeds(tmp_path: Path) -> None:
    """One row per comparison of the look a claim stopped at, compact then full; formed counts
    over that look's seeds only (the claim's comparisons may hold more), a dash for a pair
    they do not hold."""
    compact = _markov_verdicts({"ld_necessary": "undecided"})
    compact["claims"]["ld_necessary"].update(
        sequential={"status": "undecided_at_cap", "looks": [
            _look(3, 0.998, [("LD@high", "noLD@high", "undecided", 0.5, -0.1, 1.1)]),
            _look(5, 0.9587, [("LD@high", "noLD@high", "undecided", 0.3812, 0.2649, -0.0449)]),
        ]},
        comparisons=[{"treatment": "LD@high", "control": "noLD@high",
                      "seeds": [_seed(s, True, s == 0) for s in range(7)]}],  # 7 > the look's 5
    )  # fmt: skip
    full = _markov_verdicts({"ld_sufficient_at_high_repetition": "contradicted"})
    full["claims"]["ld_sufficient_at_high_repetition"].update(
        sequential={"status": "decided", "looks": [
            _look(3, 0.984, [("LD@high", "noLD@high", "undecided", 0.1, -0.05, 0.25),
                             ("full@high", "LD@high", "supported", 0.2, 0.14, 0.26)]),
        ]},
        comparisons=[{"treatment": "full@high", "control": "LD@high",
                      "seeds": [_seed(s, True, False) for s in range(3)]}],
    )  # fmt: skip
    _write_verdicts(tmp_path, "markov", compact)
    rows = report.markov_looks_rows(tmp_path / "markov" / "verdicts.json")
    assert [(r["vocabulary"], r["seeds"], r["CI level"], r["difference [CI]"], r["formed, T / K"])
            for r in rows] == [("compact", "5", "95.9 %", "0.38 [0.26, -0.04]", "5 / 1")]  # fmt: skip
    _write_verdicts(tmp_path, "markov_full_vocab", full)
    rows = report.markov_looks_rows(tmp_path / "markov" / "verdicts.json")
    assert rows[1:] == [
        {"vocabulary": "full", "claim": "LD sufficient at high repetition",
         "claim's status": "decided at look 1", "seeds": "3", "CI level": "98.4 %",
         "T − K (treatment − control)": "LD@high − noLD@high",
         "difference [CI]": "0.10 [-0.05, 0.25]", "formed, T / K": "—",
         "comparison's verdict": "undecided"},
        {"vocabulary": "full", "claim": "LD sufficient at high repetition",
         "claim's status": "decided at look 1", "seeds": "3", "CI level": "98.4 %",
         "T − K (treatment − control)": "full@high − LD@high",
         "difference [CI]": "0.20 [0.14, 0.26]", "formed, T / K": "3 / 0",
         "comparison's verdict": "supported"},
    ]  # fmt: skip
    assert rows[0]["claim's status"] == "undecided at the cap"


def test_bi_induct_seed_rows_mark_a_ci_reaching_below_0_as_not_load_bearing() -> None:
    row = {"variant": "base", "seed": "8", "emergence_step": "1340.84",
           "ablation_excess_copy_zero": "0.014858", "ablation_excess_copy_zero_ci_low": "-0.0024",
           "ablation_excess_copy_zero_ci_high": "0.03314"}  # fmt: skip
    assert report.bi_induct_seed_rows([row, {**row, "ablation_excess_copy_zero_ci_low": "0.0001"},
                                       {**row, "ablation_excess_copy_zero_ci_low": ""}]) == [
        {"arm": "base", "seed": "8", "S* (steps to PS 0.4)": "1340.8",
         "top heads' excess drop [95 % CI]": "0.015 [-0.002, 0.033]", "load-bearing": "False"},
        {"arm": "base", "seed": "8", "S* (steps to PS 0.4)": "1340.8",
         "top heads' excess drop [95 % CI]": "0.015 [0.000, 0.033]", "load-bearing": "True"},
        {"arm": "base", "seed": "8", "S* (steps to PS 0.4)": "1340.8",
         "top heads' excess drop [95 % CI]": "0.015 [—, 0.033]", "load-bearing": ""},
    ]  # fmt: skip


def _results_csv(name: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / report.RESULTS_DIR / name, dtype=str, keep_default_na=False)


def test_the_prose_beside_the_per_seed_tables_says_what_they_hold() -> None:
    """The sentences under docs/bi_induct.md's and docs/markov.md's rendered per-seed tables
    count seeds; each count is read here from the committed table it describes."""
    seeds = _results_csv("bi_induct_seeds.csv")
    base = seeds[seeds["arm"] == "minimally_enriched"]
    not_bearing = base.loc[base["load-bearing"] != "True", "seed"].tolist()
    assert (len(base), base["S* (steps to PS 0.4)"].ne("").sum(), not_bearing) == (9, 9, ["8"])
    bi_induct = " ".join((ROOT / "docs" / "bi_induct.md").read_text().split())
    assert ("formed heads in all 9 seeds, and its top heads are load-bearing in 8 of 9 seeds: "
            "seed 8's CI reaches just below 0") in bi_induct  # fmt: skip
    seven = base[base["seed"].astype(int) <= 6]
    assert (seven["load-bearing"] == "True").all()  # "seeds 0-6, all load-bearing in the base"

    looks = _results_csv("markov_looks.csv")
    formed = {(r["vocabulary"], r["claim"], r["T − K (treatment − control)"]): r["formed, T / K"]
              for _, r in looks.iterrows()}  # fmt: skip
    cat = "CAT and Zipf needed near the frontier"
    near = "LD_CAT_zipf@near_frontier − LD_zipf@near_frontier"
    assert formed["compact", cat, near] == "1 / 3"  # "LD + Zipf … every seed, the full … one"
    assert formed["full", cat, near] == "7 / 6"  # "LD + Zipf formed in all but one seed"
    sufficient = "LD sufficient at high repetition"
    assert formed["full", sufficient, "LD_CAT_zipf@high − LD_uniform@high"] == "5 / 0"
    necessary = "LD necessary"
    for vocabulary, pair in (("compact", "LD_uniform@high − noLD_zipf@high"),
                             ("full", "LD_CAT_zipf@high − noLD_zipf@high")):  # fmt: skip
        treatment, control = formed[vocabulary, necessary, pair].split(" / ")
        assert treatment == "7" and 0 < int(control) < 7  # "formed in some seeds too"
    markov = " ".join((ROOT / "docs" / "markov.md").read_text().split())
    assert "LD + Zipf without CAT formed in every seed and the full process in only one" in markov
    assert "LD + Zipf formed in all but one seed" in markov
