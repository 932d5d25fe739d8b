"""``make smoke``: a micro study in a few minutes, then where to look.

A throw-away Kedro project is laid out in ``build/smoke`` (the project's own ``conf/base``, a
``conf/local`` from ``smoke_parameters.yml``, a Pile-format shard of a few hundred KJV
chapters), and ``kedro run --pipeline=law_fit`` runs in it as a user runs it: data engineering,
a four-run DeepSpeed sweep on Ray, telemetry of every checkpoint, the law fitted on the four
runs, the figures, an MLflow store. Nothing under the repository's own ``data/`` or
``mlflow.db`` is touched. It ends by printing the fit, the figures' paths, and the commands that
open the MLflow UI and kedro-viz on it::

    python -m ih_kedro.smoke                 # build/smoke
    python -m ih_kedro.smoke --dir /tmp/s    # elsewhere
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any

import yaml

from ih_kedro.science.data.corpus import write_pile_shards
from ih_kedro.science.data.embedded_corpus import kjv_documents

logger = logging.getLogger("ih_kedro.smoke")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE_DOCUMENTS = 300


def smoke_parameters() -> dict[str, Any]:
    """The micro study's overrides (``smoke_parameters.yml``), one block per parameters file."""
    text = resources.files("ih_kedro").joinpath("smoke_parameters.yml").read_text()
    return yaml.safe_load(text)


def new_project(
    folder: Path,
    n_documents: int = SMOKE_DOCUMENTS,
    docs_per_shard: int = 100,
    conf_source: Path | None = None,
) -> Path:
    """A Kedro project in ``folder``: conf/base, an empty conf/local and a raw KJV shard.

    The package itself is installed, so the project needs only its ``pyproject.toml``, an
    (empty) ``src`` and its configuration. ``folder`` must not exist yet.
    """
    conf_source = conf_source or PROJECT_ROOT / "conf" / "base"
    folder.mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "pyproject.toml", folder / "pyproject.toml")
    (folder / "src").mkdir()
    shutil.copytree(conf_source, folder / "conf" / "base")
    (folder / "conf" / "local").mkdir()
    records = [
        {"text": doc["text"], "meta": doc.get("meta", {"pile_set_name": "KJV"})}
        for doc in islice(kjv_documents(), n_documents)
    ]
    write_pile_shards(records, folder / "data" / "01_raw" / "corpus", docs_per_shard=docs_per_shard)
    return folder


def write_local_parameters(project: Path, overrides: dict[str, Any]) -> None:
    """One ``conf/local/parameters_<key>.yml`` per top-level key (merged key by key into base)."""
    for key, value in overrides.items():
        path = project / "conf" / "local" / f"parameters_{key}.yml"
        path.write_text(yaml.safe_dump({key: value}, sort_keys=False))


def where_to_look(project: Path) -> str:
    """What the micro study produced and how to open it, as the lines printed at its end."""
    reporting = project / "data" / "08_reporting" / "law_fit"
    lines = ["", "Smoke study done. Where to look:"]
    summary_path = reporting / "law_fit_summary.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        if summary.get("status", "ok") == "ok" and summary.get("a"):
            a, b = summary["a"], summary["b"]
            lines.append(
                f"  law (4 configurations, 1 seed: a demonstration, not a finding): "
                f"a = {a['estimate']:.2f} "
                f"[{a['ci_low']:.2f}, {a['ci_high']:.2f}], b = {b['estimate']:.2f} "
                f"[{b['ci_low']:.2f}, {b['ci_high']:.2f}]"
            )
        else:
            lines.append(f"  law: not fitted ({summary.get('status')}): see {summary_path}")
    emergence = project / "data" / "07_model_output" / "law_fit" / "emergence_table.parquet"
    if emergence.exists():
        import pandas as pd

        table = pd.read_parquet(emergence)
        pm = table[(table["metric"] == "prefix_matching") & (table["method"] == "threshold")]
        lines.append(
            f"  runs that formed an induction head: {int((pm['status'] == 'emerged').sum())} "
            f"of {len(pm)}"
        )
    figures = sorted(reporting.glob("*.png"))
    lines.append(f"  figures ({len(figures)}): {reporting}/")
    lines += [f"    {path.name}" for path in figures]
    lines += [
        f"  tables: {reporting}/law_fit_table.csv, emergence_prediction.csv",
        "  MLflow UI (then open http://127.0.0.1:5000):",
        f"    .venv/bin/mlflow ui --backend-store-uri sqlite:///{project}/mlflow.db "
        "--host 127.0.0.1 --port 5000",
        "  pipeline graph (kedro-viz):",
        f"    cd {project} && {Path(sys.executable).parent}/kedro viz run",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ih_kedro.smoke", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--dir", type=Path, default=Path("build/smoke"), help="project folder")
    parser.add_argument(
        "--documents", type=int, default=SMOKE_DOCUMENTS, help="KJV chapters in the corpus"
    )
    args = parser.parse_args(argv)
    if args.documents < 20:
        parser.error(f"--documents: at least 20 chapters are needed, got {args.documents}")
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    project = args.dir.resolve()
    if project.exists():
        shutil.rmtree(project)  # a fresh micro study each time
    new_project(project, n_documents=args.documents)
    write_local_parameters(project, smoke_parameters())
    logger.info("micro study in %s: kedro run --pipeline=law_fit", project)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--pipeline=law_fit"],
        cwd=project,
        env=env,
        check=False,
    )
    minutes = (time.monotonic() - started) / 60
    if result.returncode != 0:
        logger.error("the micro study failed (exit %d) after %.1f min", result.returncode, minutes)
        return result.returncode
    logger.info(where_to_look(project))
    logger.info("  wall time: %.1f min", minutes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
