"""Calibrate one law_fit cell: steps to online emergence, tokens, wall time, tokens/s.

Runs a single cell of ``conf/base/parameters_law_fit.yml``'s design through the project's own
training path (``expand_grid`` -> ``train_run`` with the DeepSpeed engine and the online
evaluator), with any training parameter overridden, into a scratch checkpoint folder. No MLflow.
Needs ``data/05_model_input/train_tokens`` (``kedro run --pipeline data_engineering``).

    python benchmarks/calibrate_law_fit.py --batch-size 64 --context-length 32 --seed 0 \
        --set data_variants='["fixed_rate_copies"]' --max-steps 3000

Prints one JSON line per cell (the manifest columns plus tokens/s); docs/calibration.md records
the results.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ih_kedro.datasets.packed_tokens import PackedTokensDataset
from ih_kedro.science.telemetry.online import make_online_evaluator
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.grid import expand_grid, sweep_probe_length
from ih_kedro.science.training.run import train_run

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--context-length", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--params", default=str(ROOT / "conf/base/parameters_law_fit.yml"))
    parser.add_argument("--tokens", default=str(ROOT / "data/05_model_input/train_tokens"))
    parser.add_argument(
        "--set", action="append", default=[], help="training.<key>=<YAML value> override"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    params = yaml.safe_load(Path(args.params).read_text())["law_fit"]["training"]
    for item in args.set:
        key, value = item.split("=", 1)
        params[key] = yaml.safe_load(value)
    # The probe length of the whole grid (its smallest C), not of this one cell.
    online = {**params["online_emergence"], "probe_length": sweep_probe_length(params)}
    params["online_emergence"] = online
    params.update(
        batch_sizes=[args.batch_size],
        context_lengths=[args.context_length],
        seeds=[args.seed],
        mlflow=False,
    )
    if args.max_steps is not None:
        params["max_steps"] = args.max_steps
    (config,) = expand_grid(params)
    packed = PackedTokensDataset(path=args.tokens).load()
    online_evaluate = make_online_evaluator(packed, config.context_length, online)
    started = time.perf_counter()

    def evaluate(model):  # noqa: ANN001, ANN202 - the evaluator's signature
        # Each evaluation on stderr as it happens, so a run cut short still shows its curve.
        metrics = online_evaluate(model)
        sys.stderr.write(f"eval {time.perf_counter() - started:.1f}s {json.dumps(metrics)}\n")
        sys.stderr.flush()
        return metrics

    scratch = Path(tempfile.mkdtemp(prefix="ih_calibrate_"))
    try:
        start = time.perf_counter()
        summary = train_run(config, packed, CheckpointStore(scratch), None, evaluate)
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys = ("run_name", "online_emergence_step", "steps_trained", "tokens_seen", "stop_reason",
            "copy_events_per_sequence", "copied_token_fraction", "final_loss")  # fmt: skip
    result = {key: summary.get(key) for key in keys}
    result.update(probe_length=online["probe_length"], wall_seconds=round(wall, 1),
                  tokens_per_second=round(summary["tokens_seen"] / wall),
                  evaluations=[(e["step"], round(e["prefix_matching_best_layer1"], 3))
                               for e in summary.get("evaluations", [])])  # fmt: skip
    print(json.dumps(result))  # noqa: T201 - a command-line tool's output


if __name__ == "__main__":
    main()
