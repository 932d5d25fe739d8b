"""Predict when induction heads will emerge for a configuration, before training it.

Reads a fitted emergence law (the ``law_fit_summary.json`` that ``kedro run --pipeline=law_fit``
writes) and prints the predicted emergence step and tokens with a prediction interval::

    .venv/bin/python -m ih_kedro.predict --batch-size 512 --context-length 64
    .venv/bin/python -m ih_kedro.predict -B 32 64 -C 32 32 --level 0.9 \\
        --summary data/08_reporting/law_fit/law_fit_summary.json

A configuration outside the B and C range the law was fitted on is marked ``extrapolated``
(with the axis) and named in a warning line: its interval assumes the law holds beyond the
data. Bad input (a non-positive or non-numeric size, a level outside (0, 1)) is a one-line
error naming the argument, exit code 2.

The same prediction runs inside the pipeline for ``law_fit.statistics.predict_for``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ih_kedro.science.statistics.emergence_prediction import predict_emergence

DEFAULT_SUMMARY = Path("data/08_reporting/law_fit/law_fit_summary.json")

logger = logging.getLogger("ih_kedro.predict")


class _OneLineParser(argparse.ArgumentParser):
    """argparse without the usage block on an error: one line naming the argument, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _number(check: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    """An argparse ``type``: a float for which ``check`` holds, else an error saying ``wanted``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if not check(value):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    return parse


_positive = _number(lambda v: 0 < v < float("inf"), "a positive number")
_level = _number(lambda v: 0 < v < 1, "a level in (0, 1)")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="ih_kedro.predict", description=__doc__.splitlines()[0])
    parser.add_argument("-B", "--batch-size", type=_positive, nargs="+", required=True)
    parser.add_argument("-C", "--context-length", type=_positive, nargs="+", required=True)
    parser.add_argument("--level", type=_level, default=0.95, help="prediction-interval level")
    parser.add_argument("--summary", type=Path, default=DEFAULT_SUMMARY)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if len(args.batch_size) != len(args.context_length) and 1 not in (
        len(args.batch_size),
        len(args.context_length),
    ):
        parser.error(
            f"argument -C/--context-length: {len(args.context_length)} values for "
            f"{len(args.batch_size)} batch sizes; give one, or one per batch size"
        )
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    if not args.summary.exists():
        parser.error(f"argument --summary: {args.summary} not found; run `make run` first")
    summary = json.loads(args.summary.read_text())
    if summary.get("status") != "ok":
        parser.error(f"argument --summary: the law was not fitted ({summary.get('status')})")
    try:
        prediction = predict_emergence(summary, args.batch_size, args.context_length, args.level)
    except ValueError as error:  # e.g. the law has extra covariates this command cannot give
        parser.error(f"argument --summary: {error}")
    logger.info(
        "S* = T / (B^a C^b): a = %.3f, b = %.3f, fitted on %s runs; %.0f%% prediction intervals",
        summary["a"]["estimate"],
        summary["b"]["estimate"],
        summary.get("n_runs"),
        100 * args.level,
    )
    shown = prediction.drop(columns=["log_se", "level"])
    logger.info("%s", shown.to_string(index=False, float_format=lambda v: f"{v:,.0f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
