"""Seeds until a verdict settles: re-run an experiment with the seeds its last look asks for.

A Kedro pipeline is a graph without loops, so the loop of ``adaptive_seeds`` (train the planned
seeds, judge, train more seeds where a verdict is undecided, judge again) runs here, outside it:
``bi_induct``'s claims node and ``markov``'s judge node write ``sequential.next_look`` (the seeds
the undecided claims' next look needs, or None) into ``claims.json`` / ``verdicts.json``
(:mod:`ih_kedro.science.statistics.sequential_claims`). :func:`run_until_settled` runs

    kedro run --pipeline=<experiment> --params="<experiment>.training.seeds=[...]"

reads the report, and runs again with ``next_look.seeds`` until no claim asks for more (each is
decided, or undecided at the cap) or ``max_rounds`` runs. The sweep skips the runs it already
has, so each round trains only the new seeds (the grid trains them in every arm / cell: it cannot
yet restrict a seed to the cells ``next_look`` names); the stages after it re-read every run.

    python -m ih_kedro.adaptive_seeds --pipeline=bi_induct
    python -m ih_kedro.adaptive_seeds --pipeline=markov --max-rounds=3
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

REPORTS = {
    "bi_induct": "data/08_reporting/bi_induct/claims.json",
    "markov": "data/08_reporting/markov/verdicts.json",
}
"""Experiment -> the report (``conf/base`` catalog path) whose ``sequential`` block leads."""


def seeds_override(experiment: str, seeds: Sequence[int]) -> str:
    """``--params`` value that sets the experiment's training seeds."""
    return f"{experiment}.training.seeds=[{','.join(str(int(s)) for s in seeds)}]"


def next_seeds(report: Mapping[str, Any]) -> list[int] | None:
    """The seeds the report's next look needs, or None (no ``adaptive_seeds``, or settled)."""
    following = (report.get("sequential") or {}).get("next_look")
    return [int(s) for s in following["seeds"]] if following else None


def run_until_settled(
    experiment: str,
    run: Callable[[list[int] | None], None],
    read: Callable[[], Mapping[str, Any]],
    *,
    seeds: Sequence[int] | None = None,
    max_rounds: int = 10,
) -> list[dict[str, Any]]:
    """Run ``experiment`` (``run(seeds)``; None: the configured seeds) and follow its next looks.

    Returns one entry per round: ``{round, seeds, next_seeds}``. Stops when the report asks for
    no more seeds, asks for the seeds it just had (nothing to add), or after ``max_rounds``.
    """
    if experiment not in REPORTS:
        raise ValueError(f"adaptive seeds: {experiment!r} is not one of {sorted(REPORTS)}")
    rounds: list[dict[str, Any]] = []
    current = list(seeds) if seeds is not None else None
    for number in range(1, int(max_rounds) + 1):
        run(current)
        following = next_seeds(read())
        rounds.append({"round": number, "seeds": current, "next_seeds": following})
        logger.info("adaptive seeds %s round %d: seeds %s -> next %s", experiment, number,
                    current, following)  # fmt: skip
        if not following or following == current:
            break
        current = following
    return rounds


def _kedro_run(project: Path, experiment: str, extra: Sequence[str]):
    def run(seeds: list[int] | None) -> None:
        command = [sys.executable, "-m", "kedro", "run", f"--pipeline={experiment}", *extra]
        if seeds is not None:
            command.append(f"--params={seeds_override(experiment, seeds)}")
        logger.info("adaptive seeds: %s", " ".join(command))
        subprocess.run(command, cwd=project, check=True)

    return run


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", required=True, choices=sorted(REPORTS))
    parser.add_argument("--project", default=".", help="the Kedro project's root")
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--seeds", default=None, help="first round's seeds, e.g. 0,1,2,3,4")
    parser.add_argument("kedro_args", nargs="*", help="more `kedro run` arguments (after --)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    project = Path(args.project).resolve()
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    report = project / REPORTS[args.pipeline]
    rounds = run_until_settled(args.pipeline, _kedro_run(project, args.pipeline, args.kedro_args),
                               lambda: json.loads(report.read_text()), seeds=seeds,
                               max_rounds=args.max_rounds)  # fmt: skip
    logger.info("adaptive seeds %s: %d round(s), last %s", args.pipeline, len(rounds), rounds[-1])
    return rounds


if __name__ == "__main__":
    main()
