"""Predict when induction heads will emerge for a configuration, before training it.

Reads a fitted emergence law (the ``law_fit_summary.json`` that ``kedro run --pipeline=law_fit``
writes) and prints the predicted emergence step and tokens with a prediction interval::

    .venv/bin/python -m ih_kedro.predict --batch-size 512 --context-length 64
    .venv/bin/python -m ih_kedro.predict -B 32 64 -C 32 32 --level 0.9 \\
        --summary data/08_reporting/law_fit/law_fit_summary.json

The same prediction runs inside the pipeline for ``law_fit.statistics.predict_for``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ih_kedro.science.statistics.emergence_prediction import predict_emergence

DEFAULT_SUMMARY = Path("data/08_reporting/law_fit/law_fit_summary.json")

logger = logging.getLogger("ih_kedro.predict")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-B", "--batch-size", type=float, nargs="+", required=True)
    parser.add_argument("-C", "--context-length", type=float, nargs="+", required=True)
    parser.add_argument("--level", type=float, default=0.95, help="prediction-interval level")
    parser.add_argument("--summary", type=Path, default=DEFAULT_SUMMARY)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    if not args.summary.exists():
        parser.error(f"--summary: {args.summary} not found; run `make run` first")
    summary = json.loads(args.summary.read_text())
    if summary.get("status") != "ok":
        parser.error(f"--summary: the law was not fitted ({summary.get('status')})")
    prediction = predict_emergence(summary, args.batch_size, args.context_length, args.level)
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
