"""Seeds until a verdict settles: re-run an experiment with the seeds its last look asks for.

A Kedro pipeline is a graph without loops, so the loop of ``adaptive_seeds`` (train the planned
seeds, judge, train more seeds where a verdict is undecided, judge again) runs here, outside it:
``bi_induct``'s claims node and ``markov``'s judge node (also in ``markov_full_vocab``, the same
pipeline over the tokenizer's full vocabulary) write ``sequential.next_look`` (the seeds
the undecided claims' next look needs, or None) into ``claims.json`` / ``verdicts.json``
(:mod:`ih_kedro.science.statistics.sequential_claims`). :func:`run_until_settled` runs

    kedro run --pipeline=<experiment> --params='<experiment>.training.seeds=[...],
        <experiment>.training.seed_cells=[{seeds: [...], labels: [...]}]'

reads the report, and runs again with ``next_look``'s seeds until no claim asks for more (each
is decided, or undecided at the cap) or ``max_rounds`` runs. The sweep skips the runs it already
has, and ``training.seed_cells`` trains each seed beyond the planned ones only in the arms /
cells whose claims were open when it was added, so each round trains only the new runs; the
stages after the sweep re-read every run.

    python -m ih_kedro.adaptive_seeds --pipeline=bi_induct
    python -m ih_kedro.adaptive_seeds --pipeline=bi_induct --resume   # after a planned run
    python -m ih_kedro.adaptive_seeds --pipeline=markov --max-rounds=3
    python -m ih_kedro.adaptive_seeds --pipeline=markov_full_vocab
    python -m ih_kedro.adaptive_seeds --pipeline=markov -- --params=markov.training.max_steps=4000
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
    "markov_full_vocab": "data/08_reporting/markov_full_vocab/verdicts.json",
}
"""Experiment (the pipeline, and its parameters' namespace) -> the report (``conf/base`` catalog
path) whose ``sequential`` block leads."""


def seeds_override(experiment: str, seeds: Sequence[int]) -> str:
    """``--params`` item that sets the experiment's training seeds."""
    return f"{experiment}.training.seeds=[{','.join(str(int(s)) for s in seeds)}]"


def seed_cells_override(experiment: str, seed_cells: Sequence[Mapping[str, Any]]) -> str:
    """``--params`` item that sets ``training.seed_cells`` (YAML flow: ``[{seeds: [5, 6],
    labels: [a, b]}]``)."""
    entries = ", ".join(
        f"{{seeds: [{', '.join(str(int(s)) for s in e['seeds'])}], "
        f"labels: [{', '.join(str(label) for label in e['labels'])}]}}"
        for e in seed_cells
    )
    return f"{experiment}.training.seed_cells=[{entries}]"


def look_overrides(experiment: str, look: Mapping[str, Any]) -> list[str]:
    """The ``--params`` items of a ``next_look``: its seeds, and where the later seeds train
    (when it says)."""
    items = [seeds_override(experiment, look["seeds"])]
    if look.get("seed_cells"):
        items.append(seed_cells_override(experiment, look["seed_cells"]))
    return items


def look_command(experiment: str, look: Mapping[str, Any]) -> str:
    """The ``kedro run`` that trains a ``next_look`` (for claims.json / verdicts.json)."""
    return (
        f"kedro run --pipeline={experiment} --params='{','.join(look_overrides(experiment, look))}'"
    )


def next_look(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report's ``sequential.next_look`` (None: no ``adaptive_seeds``, or settled)."""
    following = (report.get("sequential") or {}).get("next_look")
    return dict(following) if following else None


def next_seeds(report: Mapping[str, Any]) -> list[int] | None:
    """The seeds the report's next look needs, or None."""
    following = next_look(report)
    return [int(s) for s in following["seeds"]] if following else None


def run_until_settled(
    experiment: str,
    run: Callable[[Mapping[str, Any] | None], None],
    read: Callable[[], Mapping[str, Any]],
    *,
    look: Mapping[str, Any] | None = None,
    max_rounds: int = 10,
) -> list[dict[str, Any]]:
    """Run ``experiment`` (``run(look)``; None: the configured seeds) and follow its next looks.

    Returns one entry per round: ``{round, seeds, next_seeds, next_seed_cells}``. Stops when the report asks for
    no more seeds, asks for the seeds it just had (nothing to add), or after ``max_rounds``.
    """
    if experiment not in REPORTS:
        raise ValueError(f"adaptive seeds: {experiment!r} is not one of {sorted(REPORTS)}")
    rounds: list[dict[str, Any]] = []
    current = dict(look) if look is not None else None
    for number in range(1, int(max_rounds) + 1):
        run(current)
        following = next_look(read())
        seeds = current["seeds"] if current else None
        rounds.append({"round": number, "seeds": seeds,
                       "next_seeds": following["seeds"] if following else None,
                       "next_seed_cells": following.get("seed_cells") if following else None})  # fmt: skip
        logger.info("adaptive seeds %s round %d: seeds %s -> next %s", experiment, number,
                    seeds, rounds[-1]["next_seeds"])  # fmt: skip
        if not following or following["seeds"] == seeds:
            break
        current = following
    return rounds


def _kedro_run(project: Path, experiment: str, extra: Sequence[str]):
    # `kedro run` takes one --params: the caller's (e.g. a longer budget) join the look's.
    given = [a.removeprefix("--params=") for a in extra if a.startswith("--params=")]
    others = [a for a in extra if not a.startswith("--params=")]

    def run(look: Mapping[str, Any] | None) -> None:
        command = [sys.executable, "-m", "kedro", "run", f"--pipeline={experiment}", *others]
        items = given + (look_overrides(experiment, look) if look is not None else [])
        if items:
            command.append(f"--params={','.join(items)}")
        logger.info("adaptive seeds: %s", " ".join(command))
        subprocess.run(command, cwd=project, check=True)

    return run


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", required=True, choices=sorted(REPORTS))
    parser.add_argument("--project", default=".", help="the Kedro project's root")
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--seeds", default=None, help="first round's seeds, e.g. 0,1,2,3,4")
    parser.add_argument("--resume", action="store_true",
                        help="start from the existing report's next look instead of re-running "
                        "the configured seeds (nothing to do when it asks for none)")  # fmt: skip
    parser.add_argument("kedro_args", nargs="*", help="more `kedro run` arguments (after --)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    project = Path(args.project).resolve()
    look = {"seeds": [int(s) for s in args.seeds.split(",")]} if args.seeds else None
    report = project / REPORTS[args.pipeline]
    if args.resume:
        if args.seeds:
            parser.error("--resume starts from the report's next look; drop --seeds")
        if not report.exists():
            parser.error(f"--resume: no report at {report}; run the pipeline first")
        look = next_look(json.loads(report.read_text()))
        if look is None:
            logger.info("adaptive seeds %s: %s asks for no more seeds", args.pipeline, report)
            return []
    rounds = run_until_settled(args.pipeline, _kedro_run(project, args.pipeline, args.kedro_args),
                               lambda: json.loads(report.read_text()), look=look,
                               max_rounds=args.max_rounds)  # fmt: skip
    logger.info("adaptive seeds %s: %d round(s), last %s", args.pipeline, len(rounds), rounds[-1])
    return rounds


if __name__ == "__main__":
    main()
