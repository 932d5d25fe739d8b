"""The results the documents quote, rendered from the experiments' outputs: drift is impossible.

Each experiment's pipeline writes its numbers under ``data/08_reporting/`` (the law's
``law_fit_summary.json``, pareto's ``frontier_summary.json``, markov's ``verdicts.json``,
bi_induct's ``claims.json``, law_mechanisms' ``law_mechanisms.csv`` ...). This module turns them
into one small, reviewable summary per experiment, ``docs/results/<experiment>.json`` (committed,
refreshed after a default run), and renders from those files alone:

- the README's "Results at a glance" table, between ``<!-- results:start -->`` and
  ``<!-- results:end -->``;
- each ``docs/<experiment>.md``'s results section, between ``<!-- results:<experiment>:start -->``
  and ``<!-- results:<experiment>:end -->``.

Commands (``make report`` runs the first two)::

    python -m ih_kedro.report collect   # data/08_reporting -> docs/results/*.json (what exists)
    python -m ih_kedro.report render    # docs/results/*.json -> README.md and docs/*.md
    python -m ih_kedro.report check     # exit 1 when a document differs from its rendering

A summary also quotes the default design it was measured at (``design``: dotted parameter
names -> values); ``tests/test_report.py`` fails when one differs from ``conf/base``, so a
changed default cannot sit beside numbers measured with the old one.
"""

from __future__ import annotations

import argparse
import ast
import csv
import datetime as dt
import json
import logging
import math
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

ROOT = Path.cwd()
RESULTS_DIR = Path("docs/results")
REPORTING_DIR = Path("data/08_reporting")
README = Path("README.md")

# The experiments in the order the README lists them, with the design keys each one quotes.
EXPERIMENTS: dict[str, dict[str, Any]] = {
    "law_fit": {
        "title": "Exp. 1: the emergence law `S* = T / (B^a C^b)`",
        "command": "make run",
        "doc": "docs/law_fit.md",
        "design": [
            "law_fit.training.presets",
            "law_fit.training.batch_sizes",
            "law_fit.training.context_lengths",
            "law_fit.training.seeds",
            "law_fit.training.max_steps",
            "law_fit.training.online_emergence.threshold",
        ],
    },
    "pareto": {
        "title": "Exp. 2: how frequent and how reliable must repetition be?",
        "command": "kedro run --pipeline=pareto",
        "doc": "docs/pareto.md",
        "design": [
            "pareto.training.seeds",
            "pareto.training.max_steps",
            "pareto.frontier.decision_threshold",
            "pareto.frontier.thresholds",
        ],
    },
    "markov": {
        "title": "Exp. 3: which data properties make heads form (Markov processes)",
        "command": "kedro run --pipeline=markov",
        "doc": "docs/markov.md",
        # The same experiment over the tokenizer's full vocabulary (`kedro run
        # --pipeline=markov_full_vocab`): its verdicts are set beside the compact ones.
        "compared_with": "markov_full_vocab",
        "design": [
            "markov.training.seeds",
            "markov.training.max_steps",
            "markov.conditions.decision_threshold",
            "markov.conditions.thresholds",
        ],
    },
    "law_mechanisms": {
        "title": "Why C does (not) act in the law",
        "command": "kedro run --pipeline=law_mechanisms",
        "doc": "docs/law_mechanisms.md",
        "design": [
            "law_mechanisms.today.training.batch_sizes",
            "law_mechanisms.today.training.context_lengths",
            "law_mechanisms.today.training.seeds",
        ],
    },
    "law_mechanisms_reference": {
        "title": "Why C does (not) act: the reference's token-fixed schedule",
        "command": "kedro run --pipeline=law_mechanisms_reference",
        "doc": "docs/law_mechanisms.md",
        "design": [
            "law_mechanisms.reference_schedule.training.batch_sizes",
            "law_mechanisms.reference_schedule.training.context_lengths",
            "law_mechanisms.reference_schedule.training.seeds",
            "law_mechanisms.reference_schedule.training.horizon_tokens",
            "law_mechanisms.reference_schedule.training.warmup_fraction",
        ],
    },
    "bi_induct": {
        "title": "Bi-Induct: are engineered induction signatures load-bearing?",
        "command": "kedro run --pipeline=bi_induct",
        "doc": "docs/bi_induct.md",
        "design": [
            "bi_induct.training.presets",
            "bi_induct.training.seeds",
            "bi_induct.training.max_steps",
            "bi_induct.training.batch_sizes",
            "bi_induct.training.context_lengths",
        ],
    },
}

START, END = "<!-- results:start -->", "<!-- results:end -->"


def section_markers(experiment: str) -> tuple[str, str]:
    """The markers around an experiment's results section in its doc."""
    return f"<!-- results:{experiment}:start -->", f"<!-- results:{experiment}:end -->"


# --------------------------------------------------------------------------------------------
# Parameters (conf/base), read as plain YAML: the design a summary quotes.


def base_parameters(conf_dir: Path) -> dict[str, Any]:
    """Every ``parameters*.yml`` of ``conf_dir`` merged at the top level (one key per file)."""
    merged: dict[str, Any] = {}
    for path in sorted(conf_dir.glob("parameters*.yml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def parameter(parameters: Mapping[str, Any], dotted: str) -> Any:
    """``parameters["a"]["b"]["c"]`` for ``"a.b.c"``; KeyError naming the missing part."""
    value: Any = parameters
    for i, part in enumerate(dotted.split(".")):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(f"{dotted}: no parameter {'.'.join(dotted.split('.')[: i + 1])}")
        value = value[part]
    return value


def design_of(experiment: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The design keys of ``experiment`` with their values in ``parameters``."""
    return {key: parameter(parameters, key) for key in EXPERIMENTS[experiment]["design"]}


def design_drift(summary: Mapping[str, Any], parameters: Mapping[str, Any]) -> list[str]:
    """One line per design value a summary quotes that differs from ``parameters``."""
    drift = []
    for key, quoted in summary.get("design", {}).items():
        try:
            current = parameter(parameters, key)
        except KeyError as error:
            drift.append(str(error.args[0]))
            continue
        if current != quoted:
            drift.append(f"{key}: the results quote {quoted!r}, conf/base has {current!r}")
    return drift


# --------------------------------------------------------------------------------------------
# Collect: outputs -> normalised summaries.


def number(name: str, block: Mapping[str, Any] | None, level: float = 0.95, **extra: Any) -> dict:
    """A reported number: ``{"name", "estimate", "ci_low", "ci_high", "level"}``."""
    block = block or {}
    estimate = block.get("estimate", block.get("mean"))
    return {
        "name": name,
        "estimate": estimate,
        "ci_low": block.get("ci_low"),
        "ci_high": block.get("ci_high"),
        "level": level,
        **extra,
    }


def _law_fit(reporting: Path) -> dict[str, Any]:
    summary = json.loads((reporting / "law_fit" / "law_fit_summary.json").read_text())
    level = float(summary.get("level") or 0.95)
    wald = summary.get("wald", {})
    return {
        "numbers": [
            number("a (batch exponent)", summary["a"], level),
            number("b (context exponent)", summary["b"], level),
            number("T (steps)", summary["T"], level),
            number("leave-one-configuration-out r (log)", {"estimate": summary["loo_r_log"]}),
        ],
        "verdicts": [
            {
                "claim": (
                    f"the seed study's exponents a = {wald.get('null_a')}, "
                    f"b = {wald.get('null_b')} hold here"
                ),
                "verdict": "rejected" if (wald.get("p_value") or 1) < 0.05 else "not rejected",
                "detail": (
                    f"cluster-robust {wald.get('test')} test, p = {fmt(wald.get('p_value'))}"
                ),
            }
        ],
        "runs": {
            "total": summary.get("n_runs"),
            "emerged": (summary.get("n_runs") or 0)
            - (summary.get("n_censored") or 0)
            - (summary.get("n_left_censored") or 0)
            - (summary.get("n_fit_failed") or 0),
        },
    }


def law_fit_summary_from_runs(runs: Path) -> dict[str, Any]:
    """The law's summary refitted, with today's statistics, from a per-run table of emergence
    steps (``batch_size, context_length, seed, step, status``), such as the committed
    ``docs/results/law_fit_runs.csv`` of the last default run."""
    import pandas as pd

    from ih_kedro.science.statistics.emergence_law import fit_emergence_law
    from ih_kedro.science.statistics.emergence_prediction import fit_summary_dict

    table = pd.read_csv(runs)
    table["run_name"] = [
        f"B{r.batch_size}_C{r.context_length}_s{r.seed}" for r in table.itertuples(index=False)
    ]
    fit = fit_emergence_law(table, leave_one_out=True)
    return {"status": "ok", **fit_summary_dict(fit)}


def _pareto(reporting: Path) -> dict[str, Any]:
    summary = json.loads((reporting / "pareto" / "frontier_summary.json").read_text())
    verdicts = summary.get("verdicts", {})
    rows = []
    for claim, verdict in verdicts.items() if isinstance(verdicts, Mapping) else []:
        decided = verdict.get("verdict") if isinstance(verdict, Mapping) else verdict
        rows.append({"claim": claim.replace("_", " "), "verdict": str(decided), "detail": ""})
    return {
        "numbers": [number("ratio b_f / b_r", summary.get("coefficient_ratio"))],
        "verdicts": rows,
        "runs": {"total": summary.get("n_runs"), "emerged": summary.get("n_runs_formed")},
    }


NOT_RUN = "not run"
MARKOV_CLAIMS = {
    "ld_necessary": "LD necessary",
    "ld_sufficient_at_high_repetition": "LD sufficient at high repetition",
    "cat_and_zipf_needed_near_frontier": "CAT and Zipf needed near the frontier",
}


def _markov_claim_label(name: str) -> str:
    """A markov claim's name as the documents print it."""
    return MARKOV_CLAIMS.get(name, name.replace("_", " "))


def _full_vocab_verdicts(reporting: Path) -> Path:
    """The full-vocabulary run's ``verdicts.json``, set beside markov's compact one."""
    return reporting / EXPERIMENTS["markov"]["compared_with"] / "verdicts.json"


def _markov_claims(path: Path) -> dict[str, Mapping[str, Any]]:
    """``verdicts.json``'s claims (``{claim: {verdict, by_threshold, sequential, ...}}``)."""
    claims = json.loads(path.read_text()).get("claims") or {}
    return {name: v for name, v in claims.items() if isinstance(v, Mapping) and "verdict" in v}


def _markov_detail(claim: Mapping[str, Any]) -> str:
    """Where a verdict is fragile: its verdicts at other thresholds, its looks over seeds."""
    parts = []
    by_threshold = claim.get("by_threshold") or {}
    if claim.get("agrees_across_thresholds") is False:
        parts.append("by threshold: " + ", ".join(f"{t} {v}" for t, v in by_threshold.items()))
    parts.extend(_looks_text(claim.get("sequential") or {}))
    return "; ".join(parts)


# A sequential claim's status (science.statistics.sequential_claims) in words.
_STATUS_TEXT = {
    "undecided_at_cap": "undecided at the cap",
    "undecided_futile": "undecided, stopped before the cap (added seeds cannot decide it)",
}


def _looks_text(sequential: Mapping[str, Any]) -> list[str]:
    """A claim's looks (``sequential``, as markov's and bi_induct's reports write it): the seeds
    at each look and the status, and for a claim not decided (issue 37, item 5) the seeds its
    observed effect and spread imply (``projection``) and the seeds whose formed / not formed
    disagree, which more seeds cannot undo (``seeds_disagreeing``, Markov's rule)."""
    looks = sequential.get("looks") or []
    if not looks:
        return []
    sizes = [look.get("n", len(look.get("seeds") or [])) for look in looks]
    status = str(sequential.get("status", ""))
    status = _STATUS_TEXT.get(status, status)
    text = [f"looks at {sizes} seeds, {status}"]
    if sequential.get("status") == "decided":
        return text
    needs = []
    needed = (sequential.get("projection") or {}).get("seeds_needed")
    used = sizes[-1]
    if needed is not None and math.isfinite(float(needed)):
        if used and int(needed) <= int(used):
            needs.append(f"the CI alone decides (its effect and spread need {int(needed)} seeds)")
        else:
            needs.append(f"the observed effect and spread imply {int(needed)} seeds for the CI")
    disagreeing = sequential.get("seeds_disagreeing") or []
    if disagreeing:
        needs.append(f"seed(s) {', '.join(str(s) for s in disagreeing)} disagree with the others "
                     "on formed / not formed, which added seeds cannot undo")  # fmt: skip
    return text + ([", but ".join(needs)] if needs else [])


def _markov(reporting: Path) -> dict[str, Any]:
    """The compact-vocabulary verdicts (``markov``), each with the full-vocabulary verdict of
    ``markov_full_vocab`` (``EXPERIMENTS["markov"]["compared_with"]``; ``not run`` without its
    report, ``not judged`` for a claim it lacks) and whether the two agree."""
    claims = _markov_claims(reporting / "markov" / "verdicts.json")
    full_path = _full_vocab_verdicts(reporting)
    full = _markov_claims(full_path) if full_path.exists() else None
    rows = []
    for name, claim in claims.items():
        verdict = str(claim["verdict"])
        detail = _markov_detail(claim)[:300]
        if full is None:
            full_verdict, agree = NOT_RUN, None
        elif name in full:
            full_verdict = str(full[name]["verdict"])
            agree = full_verdict == verdict
            # Each vocabulary's looks: where one decided and the other did not, the why differs.
            detail = (f"compact: {detail or '—'}; full vocabulary: "
                      f"{_markov_detail(full[name])[:300] or '—'}")  # fmt: skip
        else:
            full_verdict, agree = "not judged", None
        rows.append({"claim": _markov_claim_label(name), "verdict": verdict,
                     "full_vocab_verdict": full_verdict, "vocabularies_agree": agree,
                     "detail": detail})  # fmt: skip
    return {"numbers": [], "verdicts": rows, "runs": {}}


def _law_mechanisms(reporting: Path) -> dict[str, Any]:
    contrasts = _csv(reporting / "law_mechanisms" / "law_mechanisms_contrasts.csv")
    numbers = [
        _exponent(f"Δb `{row.get('arm', '?')}` − `today`", row, "delta_b") for row in contrasts
    ]
    rows = [
        {"claim": f"`{row.get('arm', '?')}` moves b toward 0.5", "verdict": row.get("verdict_b")}
        for row in contrasts
    ]
    return {"numbers": numbers, "verdicts": rows, "runs": {}}


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _exponent(name: str, row: Mapping[str, str], column: str, **extra: Any) -> dict[str, Any]:
    """``column`` of a law/contrast row with its ``_ci_low`` / ``_ci_high`` as a number."""
    return number(name, {"estimate": _float(row.get(column)),
                         "ci_low": _float(row.get(f"{column}_ci_low")),
                         "ci_high": _float(row.get(f"{column}_ci_high"))}, **extra)  # fmt: skip


# A contrast verdict (science.statistics.law_mechanisms.contrast_verdict) in plain words.
_MOVES = {
    "moves toward": "moves b toward the published 0.5",
    "moves away": "moves b away from the published 0.5",
    "no effect": "leaves b where it is (its difference lies inside the margin)",
    "undecided": "leaves it open whether b moves (the CI crosses the margin)",
}


def _law_mechanisms_reference(reporting: Path) -> dict[str, Any]:
    """``reference_schedule``'s law (a, b with CIs) and its contrasts with ``today`` and
    ``setup_check`` (``law_mechanisms_reference*.csv``), with the answer in plain words."""
    folder = reporting / "law_mechanisms"
    laws = {row["arm"]: row for row in _csv(folder / "law_mechanisms_reference.csv")}
    contrasts = _csv(folder / "law_mechanisms_reference_contrasts.csv")
    numbers = []
    for arm, row in laws.items():
        headline = arm == "reference_schedule"
        numbers.append(_exponent(f"b `{arm}`", row, "b", headline=headline))
        numbers.append(_exponent(f"a `{arm}`", row, "a", headline=False))
    rows, answer = [], []
    for row in contrasts:
        arm, reference = row.get("arm", "?"), row.get("reference", "?")
        numbers.append(_exponent(f"Δb `{arm}` − `{reference}`", row, "delta_b",
                                 headline=arm == "reference_schedule"))  # fmt: skip
        verdict = row.get("verdict_b", "")
        rows.append({"claim": f"`{arm}` moves b toward 0.5 (against `{reference}`)",
                     "verdict": verdict, "headline": True,
                     "detail": f"Δb {_interval_text(row, 'delta_b')}; "
                               f"Δa {_interval_text(row, 'delta_a')} ({row.get('verdict_a')})"})  # fmt: skip
        if arm == "reference_schedule":
            answer.append(f"against `{reference}` it {_MOVES.get(verdict, verdict)}")
    reference_law = laws.get("reference_schedule", {})
    total = sum(int(_float(r.get("n_runs")) or 0) for r in laws.values())
    emerged = sum(int(_float(r.get("n_emerged")) or 0) for r in laws.values())
    notes = []
    warmup_path = folder / "law_mechanisms_reference_warmup.csv"
    warmup = _csv(warmup_path) if warmup_path.exists() else []
    shares = [row for row in warmup if _float(row.get("warmup_share")) is not None]
    if shares:
        first, last = shares[0], shares[-1]
        notes.append(
            "The design check: the warm-up lasted "
            f"{fmt(_float(first['warmup_share']))} of the median emergence step at "
            f"B {first['batch_size']} × C {first['context_length']} and "
            f"{fmt(_float(last['warmup_share']))} at B {last['batch_size']} × C "
            f"{last['context_length']} (the reference's range: about 0.6 to 0.03; "
            "`law_mechanisms_reference_warmup.csv`)."
        )
    high, low = _float(reference_law.get("b_ci_high")), _float(reference_law.get("b_ci_low"))
    published, verdict = (
        ("its CI lies below the published 0.5", "contradicted (b below 0.5)")
        if high is not None and high < 0.5
        else ("its CI lies above the published 0.5", "contradicted (b above 0.5)")
        if low is not None and low > 0.5
        else ("its CI includes the published 0.5", "consistent (its CI includes 0.5)")
    )  # fmt: skip
    if reference_law:
        rows.insert(0, {"claim": "the token-fixed schedule gives the published b = 0.5",
                        "verdict": verdict, "headline": True,
                        "detail": f"b {_interval_text(reference_law, 'b')}"})  # fmt: skip
    if answer:
        notes.append(
            "In plain words: with warm-up and cosine fixed in tokens (so both last ∝ 1/(B·C) "
            f"steps), the fitted context exponent is b = {_interval_text(reference_law, 'b')}; "
            f"{published}; " + "; ".join(answer) + "."
        )
    return {"numbers": numbers, "verdicts": rows, "runs": {"emerged": emerged, "total": total},
            "notes": notes}  # fmt: skip


def _interval_text(row: Mapping[str, str], column: str) -> str:
    """``estimate [low, high]`` of a CSV row's ``column`` as the documents print it."""
    return fmt_number(_exponent(column, row, column))


BI_INDUCT_CLAIMS = {
    "earlier_emergence": ("1. snippets make heads appear earlier", "Δ steps to PS 0.4 (induction − base)"),
    "icl_not_improved": ("2. ICL not improved", "Δ copy accuracy (induction − base)"),
    "anti_induction_near_zero": ("3. anti-induction stays near 0", "anti-induction score, anti arm"),
    "ablation_hurts_base_more": ("4. ablation costs the base more", "Δ excess ablation drop (base − induction)"),
    "perplexity_cost": ("5. snippets cost perplexity", "Δ loss, nats per token (induction − base)"),
}  # fmt: skip


def _bi_induct(reporting: Path) -> dict[str, Any]:
    claims = json.loads((reporting / "bi_induct" / "claims.json").read_text())
    numbers, rows = [], []
    for i, claim in enumerate(claims.get("claims", []), 1):
        short, quantity = BI_INDUCT_CLAIMS.get(claim["id"], (f"{i}. {claim['id']}", claim["id"]))
        block = claim.get("difference") or claim
        numbers.append(number(f"{short.split('.')[0]}. {quantity}", block, headline=False))
        if "base_excess_drop" in claim:
            numbers.append(
                number(
                    "4. the base's top-head excess drop", claim["base_excess_drop"], headline=False
                )
            )
        detail = "; ".join([*_looks_text(claim.get("sequential") or {}),
                            str(claim.get("reason", ""))])  # fmt: skip
        if claim.get("precondition_seeds"):
            detail = (f"the base's top heads are load-bearing in {claim['precondition_seeds']} "
                      "seeds; " + detail)  # fmt: skip
        verdict = str(claim["verdict"])
        # A comparison that cannot say anything at this scale is labelled so, never a finding.
        if claim.get("load_bearing_in_base") is False:
            verdict += ": degenerate (the base's top heads are not load-bearing)"
        elif claim.get("estimable") is False:
            verdict += ": not estimable"
        rows.append({"claim": short, "verdict": verdict, "detail": detail[:300]})
    body: dict[str, Any] = {"numbers": numbers, "verdicts": rows, "runs": {}}
    base = claims.get("base") or {}
    if base.get("label"):
        body["notes"] = [f"Base arm `{base['arm']}`: {base['label']}."]
    return body


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


COLLECTORS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "law_fit": _law_fit,
    "pareto": _pareto,
    "markov": _markov,
    "law_mechanisms": _law_mechanisms,
    "law_mechanisms_reference": _law_mechanisms_reference,
    "bi_induct": _bi_induct,
}


def cpu_name() -> str:
    """The CPU this machine runs on, as the documents name it beside a time."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    fields = dict(
        line.split(":", 1) for line in info.splitlines()[:30] if ":" in line and line.strip()
    )
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = info.split("flags", 1)[-1].split("\n", 1)[0]
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    model = fields.get("model name", "unknown CPU")
    family = fields.get("cpu family", "?")
    return (
        f"{model} (family {family} model {fields.get('model', '?')}, {isa}), {os.cpu_count()} cores"
    )


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def collect(
    experiment: str,
    reporting: Path,
    parameters: Mapping[str, Any],
    previous: Mapping[str, Any] | None = None,
    wall_minutes: float | None = None,
) -> dict[str, Any]:
    """A normalised summary of ``experiment`` from its outputs under ``reporting``.

    The wall times measured earlier (``previous["wall"]``) are kept while the default design is
    the one they timed (a changed design drops them: they timed another run); ``wall_minutes``
    adds this machine's, named with its CPU.
    """
    spec = EXPERIMENTS[experiment]
    body = COLLECTORS[experiment](reporting)
    design = design_of(experiment, parameters)
    same_design = previous is not None and previous.get("design") == design
    wall = [dict(w) for w in previous.get("wall", [])] if same_design else []
    if wall_minutes is not None:
        wall.append({"cpu": cpu_name(), "minutes": round(float(wall_minutes), 1)})
    return {
        "experiment": experiment,
        "title": spec["title"],
        "command": spec["command"],
        "doc": spec["doc"],
        "provenance": {
            "source": "outputs",
            "measured": dt.date.today().isoformat(),
            "commit": _git_commit(),
            "cpu": cpu_name(),
        },
        "design": design,
        "wall": wall,
        "runs": body.get("runs", {}),
        "numbers": body["numbers"],
        "verdicts": body["verdicts"],
        # Notes the outputs give replace the earlier ones; else the committed notes are kept.
        "notes": list(body.get("notes") or (previous or {}).get("notes", [])),
    }


# --------------------------------------------------------------------------------------------
# Render: summaries -> markdown.


def fmt(value: Any) -> str:
    """A number as the documents print it: two decimals below 100, whole numbers with
    thousands separators above, powers of ten beyond 1e5; a true minus sign."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 5e-3):
        text = f"{value:.2g}".replace("e+0", "e").replace("e-0", "e-")
    elif abs(value) >= 100 or float(value).is_integer():
        text = f"{round(value):,}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text.replace("-", "−")


def fmt_number(entry: Mapping[str, Any]) -> str:
    """``estimate [low, high]`` (or the estimate alone without a CI)."""
    text = fmt(entry.get("estimate"))
    if entry.get("ci_low") is not None and entry.get("ci_high") is not None:
        text += f" [{fmt(entry['ci_low'])}, {fmt(entry['ci_high'])}]"
    return text


def _level(entry: Mapping[str, Any]) -> str:
    """The CI's level, or a dash for a number reported without a CI."""
    return "—" if entry.get("ci_low") is None else f"{entry.get('level', 0.95):.0%}"


def fmt_design(value: Any) -> str:
    """A design value: lists as ``[a, b]`` without quotes."""
    if isinstance(value, list):
        return "[" + ", ".join(fmt_design(v) for v in value) + "]"
    return fmt(value) if isinstance(value, float) else str(value)


def fmt_wall(wall: Sequence[Mapping[str, Any]]) -> str:
    """Measured wall times, each with its CPU."""
    if not wall:
        return "not measured"
    return "; ".join(f"{_minutes(w['minutes'])} ({w['cpu']})" for w in wall)


def _minutes(minutes: float) -> str:
    hours, rest = divmod(round(minutes), 60)
    return f"{hours} h {rest:02d} min" if hours else f"{rest} min"


def _headline(summary: Mapping[str, Any]) -> str:
    shown = [n for n in summary["numbers"] if n.get("headline", True)]
    return "; ".join(f"{n['name']} {fmt_number(n)}" for n in shown) or "—"


def _verdict_cell(summary: Mapping[str, Any]) -> str:
    rows = [v for v in summary["verdicts"] if v.get("headline", True)]
    return "; ".join(f"{v['claim']}: **{v['verdict']}**{_full_vocab(v)}" for v in rows) or "—"


def _full_vocab(verdict: Mapping[str, Any]) -> str:
    """markov's full-vocabulary verdict beside the compact one (nothing when it was not run)."""
    full = verdict.get("full_vocab_verdict")
    return "" if full in (None, NOT_RUN) else f" (full vocabulary: **{full}**)"


def render_readme_table(summaries: Sequence[Mapping[str, Any]]) -> str:
    """The README's "Results at a glance" table (one row per experiment)."""
    lines = [
        "| experiment | command | wall (2 cores) | headline, 95 % CI | verdicts | details |",
        "|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s['title']} | `{s['command']}` | {fmt_wall(s['wall'])} | {_headline(s)} | "
            f"{_verdict_cell(s)} | [{Path(s['doc']).name}]({s['doc']}) |"
        )
    dates = sorted({s["provenance"]["measured"] for s in summaries})
    lines += [
        "",
        f"Rendered by `make report` from `docs/results/*.json` (measured {', '.join(dates)}; "
        "each doc names the commit, CPU and source of its numbers).",
    ]
    return "\n".join(lines)


def render_section(summary: Mapping[str, Any]) -> str:
    """An experiment doc's results section."""
    prov = summary["provenance"]
    source = (
        "from the run's outputs"
        if prov.get("source") == "outputs"
        else f"transcribed from {prov.get('source')}"
    )
    lines = [
        f"*Rendered by `make report` from `docs/results/{summary['experiment']}.json`; "
        f"measured {prov['measured']} at commit `{prov.get('commit')}` on {prov.get('cpu')}, "
        f"{source}.*",
        "",
        "Default design: "
        + ", ".join(
            f"`{k.split('.', 1)[1]}` = {fmt_design(v)}" for k, v in summary["design"].items()
        )
        + ".",
        "",
        f"Wall time, end to end: {fmt_wall(summary['wall'])}.",
    ]
    runs = summary.get("runs") or {}
    if runs.get("total") is not None and runs.get("emerged") is not None:
        lines += ["", f"Runs: {runs.get('emerged')} of {runs['total']} formed a head."]
    if summary["numbers"]:
        lines += ["", "| quantity | estimate [CI] | level |", "|---|---|---|"]
        lines += [f"| {n['name']} | {fmt_number(n)} | {_level(n)} |" for n in summary["numbers"]]
    if any("full_vocab_verdict" in v for v in summary["verdicts"]):
        lines += [
            "",
            "| claim | verdict (compact vocabulary) | full vocabulary | agree | why |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {v['claim']} | **{v['verdict']}** | **{v.get('full_vocab_verdict')}** | "
            f"{_agree(v.get('vocabularies_agree'))} | {v.get('detail') or ''} |"
            for v in summary["verdicts"]
        ]
    elif summary["verdicts"]:
        lines += ["", "| claim | verdict | why |", "|---|---|---|"]
        lines += [
            f"| {v['claim']} | **{v['verdict']}** | {v.get('detail') or ''} |"
            for v in summary["verdicts"]
        ]
    for note in summary.get("notes", []):
        lines += ["", note]
    return "\n".join(lines)


def _agree(value: bool | None) -> str:
    """Whether two verdicts agree: yes, no, or a dash when one of them is missing."""
    return "—" if value is None else "yes" if value else "no"


def replace_between(text: str, start: str, end: str, body: str, where: str) -> str:
    """``text`` with what lies between the markers ``start`` and ``end`` replaced by ``body``."""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{where}: no {start} ... {end} markers")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text, count=1)


def load_summaries(results_dir: Path) -> list[dict[str, Any]]:
    """The committed summaries in the README's order (experiments without one are skipped)."""
    found = []
    for name in EXPERIMENTS:
        path = results_dir / f"{name}.json"
        if path.exists():
            found.append(json.loads(path.read_text()))
    return found


def rendered_documents(root: Path) -> dict[Path, str]:
    """Every document the summaries render into, as it should read (path -> text)."""
    summaries = load_summaries(root / RESULTS_DIR)
    documents = {}
    readme = root / README
    documents[readme] = replace_between(
        readme.read_text(), START, END, render_readme_table(summaries), str(README)
    )
    for summary in summaries:
        doc = root / summary["doc"]
        start, end = section_markers(summary["experiment"])
        documents[doc] = replace_between(  # two experiments may share a doc
            documents.get(doc, doc.read_text()), start, end, render_section(summary), summary["doc"]
        )
    for doc in sorted((root / "docs").glob("*.md")):
        text = documents.get(doc, doc.read_text())
        if CSV_MARKER.search(text):
            for match in CSV_MARKER.finditer(text):
                relative = match.group("path")
                text = replace_between(
                    text,
                    match.group(0),
                    f"<!-- csv:{relative}:end -->",
                    render_csv(doc.parent / relative),
                    str(doc.relative_to(root)),
                )
            documents[doc] = text
    return documents


CSV_MARKER = re.compile(r"<!-- csv:(?P<path>[^ ]+?):start -->")


def _interval(row: dict[str, str], name: str) -> str:
    """``estimate [low, high]`` of ``name``, ``name_ci_low`` and ``name_ci_high`` (3 decimals)."""
    values = [_float(row.get(k, "")) for k in (name, f"{name}_ci_low", f"{name}_ci_high")]
    if values[0] is None:
        return ""
    low, high = ("—" if v is None else f"{v:.3f}" for v in values[1:])
    return f"{values[0]:.3f} [{low}, {high}]"


def _steps(text: str) -> str:
    value = _float(text)
    return "" if value is None else f"{value:.1f}"


def dose_response_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``base_calibration``'s ``dose_response.csv`` as ``docs/results/base_calibration.csv``."""
    n = rows[0]["n_seeds"] if rows else "?"
    return [{
        "one copy per N tokens": f"{_float(r['tokens_per_event']):g}",
        "copied share": f"{_float(r['copy_share']):.3f}",
        f"seeds formed (of {n})": r["n_formed"],
        "median S* (steps)": _steps(r["emergence_step_median"]),
        "top head's excess drop [95 % CI]": _interval(r, "excess_drop"),
        "chosen": r["chosen"],
    } for r in rows]  # fmt: skip


def model_choice_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``model_choice``'s ``model_choice.csv`` as ``docs/results/model_choice.csv``."""
    n = rows[0]["n_seeds"] if rows else "?"
    within = f"{_float(rows[0]['within_steps']):g}" if rows else "?"
    out = []
    for r in rows:
        excess = ast.literal_eval(r["seed_excess"]) if r.get("seed_excess") else []
        lows = ast.literal_eval(r["seed_ci_low"]) if r.get("seed_ci_low") else []
        steps = ast.literal_eval(r["seed_steps"]) if r.get("seed_steps") else []
        out.append({
            "model": r["preset"],
            "FLOPs per run (1e12)": f"{_float(r['flops']) / 1e12:.2f}",
            f"seeds formed (of {n})": r["n_formed"],
            f"formed by step {within} (of {n})": r["n_within_margin"],
            "S* per seed (steps)": "; ".join("—" if v is None else f"{v:.0f}" for v in steps),
            "top heads' excess drop, mean [95 % CI]": _interval(r, "excess_drop"),
            "per seed: excess (CI low)": "; ".join(
                f"{e:.3f} ({lo:.3f})" for e, lo in zip(excess, lows, strict=True)
            ),
            f"load-bearing seeds (of {n})": r["n_load_bearing"],
            "qualifies": r["qualifies"],
        })  # fmt: skip
    return out


def reference_warmup_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``law_mechanisms_reference_warmup.csv`` as ``docs/results/law_mechanisms_reference_warmup.csv``."""
    out = []
    for r in rows:
        share = _float(r["warmup_share"])
        out.append({
            "B": r["batch_size"], "C": r["context_length"], "B·C": r["tokens_per_step"],
            "warm-up (steps)": r["warmup_steps"], "cosine horizon (steps)": r["horizon_steps"],
            "runs formed": f"{r['n_emerged']} of {r['n_runs']}",
            "median S* (steps)": _steps(r["emergence_step_median"]),
            "warm-up / S*": "" if share is None else f"{share:.3f}",
        })  # fmt: skip
    return out


def markov_looks_rows(path: Path) -> list[dict[str, str]]:
    """Each markov claim's last look, a row per comparison, compact vocabulary (``path``, markov's
    ``verdicts.json``) then the full one (``markov_full_vocab``'s, beside it, when it exists).

    What the claim's verdict was read from: the seeds and CI level of the look it stopped at,
    each comparison's paired difference with its CI at that level, and in how many of those
    seeds each side formed a head (from the claim's per-seed comparisons; a dash where the look
    compared a pair the claim's final comparisons do not hold).
    """
    sources = [("compact", path)]
    full = _full_vocab_verdicts(path.parent.parent)
    if full.exists():
        sources.append(("full", full))
    rows = []
    for vocabulary, source in sources:
        for name, claim in _markov_claims(source).items():
            sequential = claim.get("sequential") or {}
            looks = sequential.get("looks") or []
            if not looks:
                continue
            look = looks[-1]
            seeds = set(look.get("seeds") or [])
            status = str(sequential.get("status", ""))
            status = _STATUS_TEXT.get(status, f"{status} at look {look.get('look')}")
            per_seed = {(c.get("treatment"), c.get("control")): c.get("seeds") or []
                        for c in claim.get("comparisons") or []}  # fmt: skip
            for detail in look.get("details") or []:
                pair = (detail.get("treatment"), detail.get("control"))
                chosen = [s for s in per_seed.get(pair, []) if s.get("seed") in seeds]
                formed = "—"
                if len(chosen) == len(seeds):
                    formed = (f"{sum(bool(s['treatment_formed']) for s in chosen)} / "
                              f"{sum(bool(s['control_formed']) for s in chosen)}")  # fmt: skip
                rows.append({
                    "vocabulary": vocabulary,
                    "claim": _markov_claim_label(name),
                    "claim's status": status,
                    "seeds": str(look.get("n", len(seeds))),
                    "CI level": f"{100 * float(look['level']):.1f} %",  # text: fmt would round
                    "T − K (treatment − control)": f"{pair[0]} − {pair[1]}",
                    "difference [CI]": (f"{float(detail['mean']):.2f} "
                                        f"[{float(detail['ci_low']):.2f}, "
                                        f"{float(detail['ci_high']):.2f}]"),
                    "formed, T / K": formed,
                    "comparison's verdict": str(detail.get("verdict")),
                })  # fmt: skip
    return rows


def bi_induct_seed_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """bi_induct's ``runs_table.csv`` as claim 4 reads it: per arm and seed, when the heads
    formed and whether the top heads are load-bearing (the excess drop of copy accuracy over
    equal-count random heads, zero ablation, with its 95 % bootstrap CI; load-bearing when the
    CI lies above 0)."""
    out = []
    for r in rows:
        low = _float(r["ablation_excess_copy_zero_ci_low"])
        out.append({
            "arm": r["variant"], "seed": r["seed"],
            "S* (steps to PS 0.4)": _steps(r["emergence_step"]),
            "top heads' excess drop [95 % CI]": _interval(r, "ablation_excess_copy_zero"),
            "load-bearing": "" if low is None else str(low > 0),
        })  # fmt: skip
    return out


def _csv_rows(
    transform: Callable[[list[dict[str, str]]], list[dict[str, str]]],
) -> Callable[[Path], list[dict[str, str]]]:
    """A row transform of a CSV output as a table builder of its path."""
    return lambda path: transform(_csv(path))


RESULT_TABLES: dict[str, tuple[str, Callable[[Path], list[dict[str, str]]]]] = {
    "base_calibration.csv": ("base_calibration/dose_response.csv", _csv_rows(dose_response_rows)),
    "model_choice.csv": ("model_choice/model_choice.csv", _csv_rows(model_choice_rows)),
    "law_mechanisms_reference_warmup.csv": (
        "law_mechanisms/law_mechanisms_reference_warmup.csv",
        _csv_rows(reference_warmup_rows),
    ),
    "markov_looks.csv": ("markov/verdicts.json", markov_looks_rows),
    "bi_induct_seeds.csv": ("bi_induct/runs_table.csv", _csv_rows(bi_induct_seed_rows)),
}
"""``docs/results/<name>`` -> (its source under the reporting folder, the table builder)."""


def collect_tables(reporting: Path, results_dir: Path) -> list[Path]:
    """Write each :data:`RESULT_TABLES` entry whose source exists; returns what was written."""
    written = []
    for name, (source, transform) in RESULT_TABLES.items():
        path = reporting / source
        if not path.exists():
            logger.info("%s: no %s; kept the committed table", name, path)
            continue
        rows = transform(path)
        target = results_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else [])
            writer.writeheader()
            writer.writerows(rows)
        written.append(target)
    return written


def render_csv(path: Path) -> str:
    """A committed results CSV as a markdown table (numbers as the documents print them)."""
    with path.open() as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]

    def cell(text: str) -> str:
        value = _float(text)
        if value is None or text.strip().lower() in {"true", "false"}:
            return {"True": "yes", "False": "no", "": "—"}.get(text, text)
        return fmt(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def stale_documents(root: Path) -> list[Path]:
    """The documents whose text differs from their rendering."""
    return [path for path, text in rendered_documents(root).items() if path.read_text() != text]


# --------------------------------------------------------------------------------------------
# CLI.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ih_kedro.report", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    collect_cmd = sub.add_parser("collect", help="outputs -> docs/results/*.json")
    collect_cmd.add_argument("--reporting", type=Path, default=REPORTING_DIR)
    collect_cmd.add_argument("--conf", type=Path, default=Path("conf/base"))
    collect_cmd.add_argument("--experiments", nargs="+", choices=list(EXPERIMENTS))
    collect_cmd.add_argument(
        "--wall-minutes", type=float, help="this run's wall time, recorded with this machine's CPU"
    )
    sub.add_parser("render", help="docs/results/*.json -> README.md and docs/*.md")
    sub.add_parser("check", help="exit 1 when a document differs from its rendering")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    root = Path.cwd()

    if args.command == "collect":
        parameters = base_parameters(args.conf)
        names = args.experiments or list(EXPERIMENTS)
        written = 0
        for name in names:
            try:
                previous_path = root / RESULTS_DIR / f"{name}.json"
                previous = json.loads(previous_path.read_text()) if previous_path.exists() else {}
                summary = collect(name, args.reporting, parameters, previous, args.wall_minutes)
            except FileNotFoundError as error:
                logger.info("%s: no outputs (%s); kept the committed summary", name, error)
                continue
            previous_path.parent.mkdir(parents=True, exist_ok=True)
            previous_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
            logger.info("%s -> %s", name, previous_path)
            written += 1
        if not args.experiments:
            for table in collect_tables(args.reporting, root / RESULTS_DIR):
                logger.info("table -> %s", table)
        logger.info("%d summaries written; `python -m ih_kedro.report render` next", written)
        return 0
    if args.command == "render":
        for path, text in rendered_documents(root).items():
            if path.read_text() != text:
                path.write_text(text)
                logger.info("rendered %s", path.relative_to(root))
        return 0
    stale = stale_documents(root)
    for path in stale:
        logger.info("stale: %s (run `make report` or `python -m ih_kedro.report render`)", path)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
