"""configure_runtime: the environment it sets, what a user set first, and its one-line summary."""

from __future__ import annotations

import os

import pytest
import torch

from ih_kedro.science.training.runtime import configure_runtime

VARIABLES = ("KEDRO_DISABLE_TELEMETRY", "TOKENIZERS_PARALLELISM", "DS_ACCELERATOR")


@pytest.fixture()
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """None of the variables set (monkeypatch restores the session's values afterwards)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture()
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_without_cuda_deepspeed_gets_the_cpu_accelerator(bare_environment, two_threads) -> None:
    bare_environment.setattr(torch.cuda, "is_available", lambda: False)
    described = configure_runtime()
    assert {name: os.environ[name] for name in VARIABLES} == {
        "KEDRO_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "DS_ACCELERATOR": "cpu",
    }
    assert described == f"torch {torch.__version__}, cuda=False, DS_ACCELERATOR=cpu, threads=2"


def test_with_cuda_deepspeed_picks_its_accelerator(bare_environment, two_threads) -> None:
    bare_environment.setattr(torch.cuda, "is_available", lambda: True)
    described = configure_runtime()
    assert "DS_ACCELERATOR" not in os.environ
    assert os.environ["KEDRO_DISABLE_TELEMETRY"] == "1"
    assert described == f"torch {torch.__version__}, cuda=True, DS_ACCELERATOR=auto, threads=2"


def test_what_the_user_set_wins(bare_environment, two_threads) -> None:
    bare_environment.setattr(torch.cuda, "is_available", lambda: False)
    bare_environment.setenv("DS_ACCELERATOR", "cuda")
    bare_environment.setenv("TOKENIZERS_PARALLELISM", "true")
    bare_environment.setenv("KEDRO_DISABLE_TELEMETRY", "0")
    described = configure_runtime()
    assert {name: os.environ[name] for name in VARIABLES} == {
        "KEDRO_DISABLE_TELEMETRY": "0",
        "TOKENIZERS_PARALLELISM": "true",
        "DS_ACCELERATOR": "cuda",
    }
    assert described.endswith(", cuda=False, DS_ACCELERATOR=cuda, threads=2")


def test_the_summary_reports_torchs_thread_count(bare_environment) -> None:
    bare_environment.setattr(torch.cuda, "is_available", lambda: False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert configure_runtime().endswith("threads=1")
        torch.set_num_threads(3)
        assert configure_runtime().endswith("threads=3")
        # configure_runtime reports the thread count; it never changes it.
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
