"""``benchmarks/gpu_acceptance.py --cpu-tiny``: the GPU acceptance command's code paths on a CPU.

The GPU run is one command on a lent machine; CI runs its tiny CPU mode (tiny presets, a few
steps, every loss path through ``train_run``) so the script cannot rot where no GPU is.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Four tiny training runs through DeepSpeed: ~10 s, ~45 s on 2 loaded cores.
pytestmark = [pytest.mark.slow, pytest.mark.ci]


def test_cpu_tiny_mode_writes_the_record_and_the_table(tmp_path: Path) -> None:
    command = [sys.executable, "benchmarks/gpu_acceptance.py", "--cpu-tiny", "--out", str(tmp_path)]
    done = subprocess.run(
        command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "gpu_acceptance.json").read_text())
    assert record["device"] == "cpu"
    rows = record["throughput"]
    assert [(r["preset"], r["loss"]) for r in rows] == [
        ("gpt2-tiny", "full"),
        ("gpt2-tiny", "chunked"),
        ("llama-tiny", "full"),
        ("llama-tiny", "chunked"),
    ]
    assert all(r["status"] == "ok" and r["tokens_per_second"] > 0 for r in rows)
    assert all(r["peak_memory_gib"] > 0 and r["mfu"] is None for r in rows)
    # The two loss paths train the same model on the same batches: the same loss.
    for full, chunked in (rows[0:2], rows[2:4]):
        assert chunked["final_loss"] == pytest.approx(full["final_loss"], abs=1e-3)
    assert record["full_stack"]["status"].startswith("skipped")
    assert record["two_ranks"]["status"].startswith("skipped")
    with (tmp_path / "gpu_acceptance.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 4
    assert "| gpt2-tiny | 4 x 32 | chunked | ok |" in done.stdout
