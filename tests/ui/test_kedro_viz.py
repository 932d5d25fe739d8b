"""``kedro viz build`` output, served on localhost, renders the law_fit graph in Chromium."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from tests.ui.conftest import free_port, serve

ROOT = Path(__file__).resolve().parents[2]
STAGES = {"law_fit.training", "law_fit.telemetry", "law_fit.statistics"}


@pytest.fixture(scope="module")
def viz_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The static site ``kedro viz build`` writes for this project (conf/base, no data needed)."""
    if shutil.which("chromium") is None:
        pytest.skip("no Chromium: install Debian's package (apt-get install -y chromium)")
    project = tmp_path_factory.mktemp("viz") / "project"
    project.mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "src").mkdir()  # the package is installed; bootstrap wants the folder
    shutil.copytree(ROOT / "conf" / "base", project / "conf" / "base")
    (project / "conf" / "local").mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "kedro", "viz", "build"],
        cwd=project, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (project / "build" / "index.html").is_file()
    return project / "build"


def _labels(page, selector: str) -> set[str]:  # noqa: ANN001 - a Playwright page
    return set(page.eval_on_selector_all(selector, "els => els.map(e => e.textContent.trim())"))


def test_law_fit_graph_renders_with_its_stage_super_nodes(
    viz_build: Path, browser_page, tmp_path: Path
) -> None:
    bootstrap_project(ROOT)
    law_fit = pipelines["law_fit"]
    # kedro-viz labels task nodes by their name without the namespace, datasets in full.
    tasks = {node.name.rsplit(".", 1)[-1] for node in law_fit.nodes}
    datasets = {name for name in law_fit.datasets() if not name.startswith("params:")}
    datasets -= {"parameters"}

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    command += ["--directory", str(viz_build)]
    with serve(command, f"{url}/index.html", tmp_path / "http.log"):
        page = browser_page
        # Collapsed: the experiment and the shared data stage are super-nodes.
        page.goto(f"{url}/?pid=law_fit")
        page.wait_for_selector(".pipeline-node--modularPipeline")
        assert _labels(page, ".pipeline-node--modularPipeline") == {"data_engineering", "law_fit"}
        # Opening law_fit shows its three stages as super-nodes.
        page.locator(".pipeline-node--modularPipeline", has_text="law_fit").first.click()
        page.wait_for_function(
            "n => document.querySelectorAll('.pipeline-node--modularPipeline').length === n", arg=4
        )
        assert _labels(page, ".pipeline-node--modularPipeline") == {"data_engineering", *STAGES}

        # Expanded: every node of the registered pipeline is drawn, and nothing else.
        page.goto(f"{url}/?pid=law_fit&expandAllPipelines=true")
        page.wait_for_function(
            "n => document.querySelectorAll('.pipeline-node--task').length === n", arg=len(tasks)
        )
        assert _labels(page, ".pipeline-node--task") == tasks
        assert _labels(page, ".pipeline-node--data") == datasets
        assert "train_sweep" in tasks and "law_fit.emergence_table" in datasets
