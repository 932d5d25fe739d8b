"""The project ships as a package: a built wheel carries every file the code reads.

``test_wheel_carries_every_package_file`` builds the wheel exactly as ``pip wheel`` does (from a
copy of the sources, so the work tree stays clean) and runs the packaged code from it.
``test_kedro_package_runs_law_fit_from_the_installed_wheel`` (slow) does what a deployment does:
``kedro package``, install the wheel into a fresh virtualenv, unpack the exported conf, and
``python -m ih_kedro --pipeline=law_fit`` on a micro grid, outside the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ih_kedro"


def _clean_env() -> dict[str, str]:
    """The test's environment without the work tree on ``PYTHONPATH`` (the wheel must be used)."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MLFLOW_TRACKING_URI"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _copy_sources(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "src",
        dest / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"),
    )
    return dest


def _package_files() -> set[str]:
    """Every file of the package in the source tree, as wheel paths (``ih_kedro/...``)."""
    return {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _copy_sources(tmp_path_factory.mktemp("wheel_src"))
    out = tmp_path_factory.mktemp("wheel_out")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(out)],
        cwd=src, env=_clean_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    wheels = list(out.glob("ih_kedro-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_carries_every_package_file(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = {n for n in archive.namelist() if n.startswith("ih_kedro/")}
        archive.extractall(tmp_path / "site")
    expected = _package_files()
    # The data files are the point: a wheel without them fails in build_model.
    assert "ih_kedro/science/training/model_presets.yml" in expected
    assert names == expected

    # The packaged code reads its presets from the wheel (importlib.resources), not the source.
    probe = textwrap.dedent(
        """
        import json, ih_kedro
        from ih_kedro.science.training.models import load_model_presets
        print(json.dumps({"file": ih_kedro.__file__, "presets": sorted(load_model_presets())}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**_clean_env(), "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["file"] == str(tmp_path / "site" / "ih_kedro" / "__init__.py")
    presets = yaml.safe_load((PACKAGE / "science" / "training" / "model_presets.yml").read_text())
    assert loaded["presets"] == sorted(presets)


@pytest.mark.slow
def test_kedro_package_runs_law_fit_from_the_installed_wheel(tmp_path: Path) -> None:
    from ih_kedro.pipelines.law_fit.pipeline import EXPERIMENT
    from ih_kedro.science.data.corpus import write_pile_shards
    from ih_kedro.science.data.embedded_corpus import kjv_documents
    from tests.pipelines.test_law_fit import MICRO_TELEMETRY, MICRO_TRAINING, _deep_merge

    project = _copy_sources(tmp_path / "project")
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    env = _clean_env()
    package = subprocess.run(
        [sys.executable, "-m", "kedro", "package"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert package.returncode == 0, package.stdout[-2000:] + package.stderr[-2000:]
    wheels = list((project / "dist").glob("ih_kedro-*.whl"))
    conf_archive = project / "dist" / "conf-ih_kedro.tar.gz"
    assert len(wheels) == 1 and conf_archive.is_file()

    # A fresh virtualenv that sees this one's dependencies (no downloads) but not its
    # editable ih_kedro: the wheel is installed into it and is what runs.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "zz_parent_env.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(site), str(wheels[0])],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]

    # The deployment: an empty folder, the exported conf, a corpus, micro overrides in local/.
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    with tarfile.open(conf_archive) as archive:
        archive.extractall(deploy, filter="data")
    conf = deploy / "conf"
    assert (conf / "base" / "parameters_law_fit.yml").is_file()
    law_fit = yaml.safe_load((conf / "base" / "parameters_law_fit.yml").read_text())[EXPERIMENT]
    data = yaml.safe_load((conf / "base" / "parameters_data_engineering.yml").read_text())
    overrides = {
        "data_engineering": _deep_merge(
            data["data_engineering"], {"tokenizer": {"vocab_size": 300}, "held_out_fraction": 0.2}
        ),
        EXPERIMENT: {
            **law_fit,
            "training": _deep_merge(
                law_fit["training"], {**MICRO_TRAINING, "batch_sizes": [4], "context_lengths": [8]}
            ),
            "telemetry": _deep_merge(law_fit["telemetry"], MICRO_TELEMETRY),
        },
    }
    (conf / "local").mkdir(exist_ok=True)
    for key, value in overrides.items():
        (conf / "local" / f"parameters_{key}.yml").write_text(yaml.safe_dump({key: value}))
    records = [{"text": d["text"], "meta": {"pile_set_name": "KJV"}} for d in kjv_documents()]
    write_pile_shards(records[:40], deploy / "data" / "01_raw" / "corpus", docs_per_shard=40)

    run = subprocess.run(
        [venv / "bin" / "python", "-m", "ih_kedro", "--pipeline=law_fit", "--conf-source=conf"],
        cwd=deploy, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import ih_kedro; print(ih_kedro.__file__)"],
        cwd=deploy, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert where == str(site / "ih_kedro" / "__init__.py")
    summary = json.loads(
        (deploy / "data" / "08_reporting" / EXPERIMENT / "law_fit_summary.json").read_text()
    )
    assert summary["n_runs"] == 1
    assert (deploy / "mlflow.db").is_file()
