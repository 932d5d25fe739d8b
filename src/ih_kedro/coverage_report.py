"""Measured coverage of every interval the project reports: run the harness, render the doc.

``docs/coverage.md``'s table, between ``<!-- coverage:start -->`` and ``<!-- coverage:end -->``,
is rendered from ``docs/results/coverage.json``, which the harness
(:mod:`ih_kedro.science.statistics.coverage`) writes::

    .venv/bin/python -m ih_kedro.coverage_report run --draws 1000 --frontier-draws 200
    .venv/bin/python -m ih_kedro.coverage_report render     # the doc from the committed JSON

``tests/test_coverage_report.py`` fails when the committed doc differs from the rendering of
the committed JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ih_kedro.report import cpu_name, replace_between
from ih_kedro.science.statistics.coverage import (
    MECHANISM_DESIGN,
    PAIRED_DESIGN,
    EmergenceDesign,
    FrontierDesign,
    LawDesign,
    default_checks,
    emergence_checks,
    frontier_checks,
    mechanism_checks,
    paired_checks,
    run_harness,
)

RESULTS = Path("docs/results/coverage.json")
DOC = Path("docs/coverage.md")
START, END = "<!-- coverage:start -->", "<!-- coverage:end -->"

logger = logging.getLogger("ih_kedro.coverage_report")


def measure(draws: int, frontier_draws: int, seed: int = 0, n_bootstrap: int = 200) -> dict:
    """Run every check; the JSON-able results with the command, seed, CPU and wall time."""
    law, frontier = LawDesign(), FrontierDesign()
    started = time.perf_counter()
    results = run_harness(default_checks(law), draws, seed=seed, design=law.describe())
    results += run_harness(mechanism_checks(), draws, seed=seed, design=MECHANISM_DESIGN.describe())
    results += run_harness(paired_checks(), draws, seed=seed, design=PAIRED_DESIGN)
    emergence = EmergenceDesign()
    results += run_harness(
        {"emergence": lambda rng: emergence_checks(emergence, rng, n_bootstrap=n_bootstrap)},
        draws,
        seed=seed,
        design=f"{emergence.describe()}; {n_bootstrap} bootstrap refits",
    )
    results += run_harness(
        {"frontier": lambda rng: frontier_checks(frontier, rng, n_bootstrap=n_bootstrap)},
        frontier_draws,
        seed=seed,
        design=f"{frontier.describe()}; {n_bootstrap} bootstrap refits",
    )
    return {
        "command": (
            f"python -m ih_kedro.coverage_report run --draws {draws} "
            f"--frontier-draws {frontier_draws} --seed {seed}"
        ),
        "seed": seed,
        "cpu": cpu_name(),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "results": [r.to_dict() for r in results],
    }


def _share(value: float) -> str:
    return f"{100 * value:.1f} %"


def render_table(data: Mapping[str, Any]) -> str:
    """The markdown table of ``data`` (:func:`measure`'s layout, plus an optional ``before``
    list of ``{name, measured, mc_se, draws, design}`` measured before a fix)."""
    before = {row["name"]: row for row in data.get("before", [])}
    lines = [
        "| interval or test | nominal | measured ± MC error | draws | design | before the fix "
        "| verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    designs = list(dict.fromkeys(row["design"] for row in data["results"]))
    for row in data["results"]:
        what = "coverage" if row["kind"] == "interval" else "size"
        old = before.get(row["name"])
        old_text = (
            f"{_share(old['measured'])} ± {_share(old['mc_se'])} ({old['draws']})" if old else ""
        )
        verdict = "**under-covers**" if row["flagged"] else "keeps it"
        if row["flagged"] and row["kind"] == "test":
            verdict = "**rejects too often**"
        lines.append(
            f"| {row['name']} | {_share(row['nominal'])} {what} | "
            f"{_share(row['measured'])} ± {_share(row['mc_se'])} | {row['draws']} | "
            f"({designs.index(row['design']) + 1}) | {old_text} | {verdict} |"
        )
    lines.append("")
    lines.append("Designs: " + "; ".join(f"({i + 1}) {d}" for i, d in enumerate(designs)) + ".")
    old_designs = list(dict.fromkeys(row["design"] for row in before.values()))
    if old_designs:
        lines.append("Before the fix: " + "; ".join(old_designs) + ".")
    lines.append(
        f"Measured by `{data['command']}` on {data['cpu']} in {data['wall_seconds']:.0f} s "
        f"(seed {data['seed']})."
    )
    return "\n".join(lines)


def rendered_doc(root: Path) -> str:
    """``docs/coverage.md`` as it should read, from the committed ``coverage.json``."""
    data = json.loads((root / RESULTS).read_text())
    return replace_between((root / DOC).read_text(), START, END, render_table(data), str(DOC))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ih_kedro.coverage_report", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the harness, write the JSON, render the doc")
    run.add_argument("--draws", type=int, default=1000, help="simulated data sets per law check")
    run.add_argument("--frontier-draws", type=int, default=200, help="per frontier check")
    run.add_argument("--seed", type=int, default=0)
    commands.add_parser("render", help="render the doc from the committed JSON")
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    # Thousands of simulated fits: their per-fit warnings (extrapolation, censored runs) would
    # bury the result.
    logging.getLogger("ih_kedro.science").setLevel(logging.ERROR)
    if args.command == "run":
        path = args.root / RESULTS
        previous = json.loads(path.read_text()) if path.exists() else {}
        data = measure(args.draws, args.frontier_draws, args.seed)
        if "before" in previous:  # the superseded measurements stay beside the new ones
            data["before"] = previous["before"]
        path.write_text(json.dumps(data, indent=2) + "\n")
        logger.info("wrote %s (%.0f s on %s)", path, data["wall_seconds"], data["cpu"])
    (args.root / DOC).write_text(rendered_doc(args.root))
    logger.info("rendered %s", args.root / DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
