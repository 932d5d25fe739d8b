"""The process group and the DeepSpeed engine of a run.

The engine's optimizer and LR schedule (``build_engine``, checked against the arguments given to
``deepspeed.initialize``), the gradient all-reduce switch, and the one-rank gloo group that
``init_distributed`` starts without a launcher (also in a child that inherits a taken port).
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from typing import Any

import deepspeed
import pytest

from ih_kedro.science.training import distributed
from ih_kedro.science.training.distributed import build_engine, init_distributed
from ih_kedro.science.training.models import build_model
from ih_kedro.science.training.schedules import lr_factor

from .test_run_engine import TINY, VOCAB, C, make_config


def test_build_engine_wraps_adamw_and_the_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decay on matrices only, the run's betas/eps/lr, lr_factor over decay_steps or the budget,
    the run's batch as the micro-batch, no gradient all-reduce in a world of one."""
    init_distributed()
    model = build_model(TINY, VOCAB, C, seed=0)
    model.blocks[0].attn.q_proj.weight.requires_grad_(False)
    frozen = model.blocks[0].attn.q_proj.weight
    config = make_config(
        "engine",
        learning_rate=2e-3,
        weight_decay=0.05,
        betas=(0.8, 0.9),
        eps=1e-6,
        schedule="cosine",
        warmup_steps=2,
        min_lr_ratio=0.2,
        batch_size=8,
        deepspeed={"zero_optimization": {"stage": 0}, "train_batch_size": 999},
    )
    seen: list[dict[str, Any]] = []
    initialize = deepspeed.initialize

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return initialize(**kwargs)

    monkeypatch.setattr(deepspeed, "initialize", spy)
    engine, optimizer, scheduler = build_engine(model, config, 10, 1)
    try:
        assert seen[0]["config"] == {
            "zero_optimization": {"stage": 0},
            "train_micro_batch_size_per_gpu": 8,
            "gradient_accumulation_steps": 1,
            "steps_per_print": 10**12,
            "wall_clock_breakdown": False,
        }
        assert seen[0]["model"] is model and seen[0]["dist_init_required"] is False
        assert engine.train_micro_batch_size_per_gpu() == 8
        assert engine.enable_backward_allreduce is False
        assert optimizer is engine.optimizer and scheduler is engine.lr_scheduler
        decay, no_decay = optimizer.param_groups
        trainable = [p for p in model.parameters() if p is not frozen]
        assert [id(p) for p in decay["params"]] == [id(p) for p in trainable if p.dim() >= 2]
        assert [id(p) for p in no_decay["params"]] == [id(p) for p in trainable if p.dim() < 2]
        assert all(p.dim() == 2 for p in decay["params"]) and no_decay["params"]
        assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.05, 0.0)
        assert decay["betas"] == (0.8, 0.9) and decay["eps"] == 1e-6
        assert decay["initial_lr"] == 2e-3
        assert decay["lr"] == pytest.approx(2e-3 * 0.5)  # lr_factor(0) with 2 warm-up steps
        for step in range(12):
            assert scheduler.lr_lambdas[0](step) == lr_factor(step, 2, "cosine", 10, 0.2)
    finally:
        engine.destroy()
    config.decay_steps = 6
    engine, _, scheduler = build_engine(build_model(TINY, VOCAB, C, seed=0), config, 10, 1)
    try:
        for step in range(12):
            assert scheduler.lr_lambdas[0](step) == lr_factor(step, 2, "cosine", 6, 0.2)
    finally:
        engine.destroy()


@pytest.mark.parametrize(
    ("world_size", "zero_stage", "skipped"),
    [(1, 0, True), (2, 0, False), (1, 1, False), (1, 2, False), (2, 2, False)],
)
def test_allreduce_is_skipped_only_for_one_rank_without_zero(
    world_size: int, zero_stage: int, skipped: bool
) -> None:
    engine = types.SimpleNamespace(
        enable_backward_allreduce=True, zero_optimization_stage=lambda: zero_stage
    )
    distributed.skip_allreduce_in_world_of_one(engine, world_size)
    assert engine.enable_backward_allreduce is (not skipped)


def test_free_port_is_an_unprivileged_bindable_port() -> None:
    import socket

    port = distributed._free_port()
    assert type(port) is int and 1024 <= port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def _destroy_world() -> None:
    """Tear down this process's group so ``init_distributed`` starts one again."""
    import deepspeed.comm.comm as ds_comm
    import torch.distributed as dist

    if ds_comm.cdb is not None and ds_comm.cdb.is_initialized():
        ds_comm.destroy_process_group()  # also drops DeepSpeed's cached groups
    elif dist.is_initialized():
        dist.destroy_process_group()
    ds_comm.cdb = None


RENDEZVOUS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def test_init_distributed_starts_a_one_rank_gloo_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """No launcher environment: rank 0 of 1 on 127.0.0.1 with a fresh port (an inherited one is
    replaced), values already set are kept, no shared-memory op is built; later calls reuse it."""
    import importlib

    import torch.distributed as dist

    ds_torch = importlib.import_module("deepspeed.comm.torch")  # the attribute is torch itself
    built: list[bool] = []
    monkeypatch.setattr(ds_torch, "build_shm_op", lambda: built.append(True))
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    import logging

    monkeypatch.setattr(logging.getLogger("DeepSpeed"), "level", logging.INFO)
    for key in RENDEZVOUS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MASTER_PORT", "1")
    _destroy_world()
    try:
        assert init_distributed() == (0, 1)
        assert {k: os.environ[k] for k in RENDEZVOUS[:4]} == {
            "RANK": "0",
            "WORLD_SIZE": "1",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
        }
        assert int(os.environ["MASTER_PORT"]) >= 1024
        assert dist.get_backend() == "gloo" and dist.get_world_size() == 1
        assert built == []
        assert logging.getLogger("DeepSpeed").level == logging.WARNING
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
        monkeypatch.setenv("MASTER_PORT", "2")
        assert init_distributed() == (0, 1)  # already initialised: nothing is re-read
        assert os.environ["MASTER_PORT"] == "2"

        _destroy_world()
        monkeypatch.setenv("WORLD_SIZE", "1")
        monkeypatch.setenv("LOCAL_RANK", "7")
        monkeypatch.setenv("MASTER_ADDR", "localhost")
        assert init_distributed() == (0, 1)
        assert os.environ["LOCAL_RANK"] == "7" and os.environ["MASTER_ADDR"] == "localhost"
        assert int(os.environ["MASTER_PORT"]) >= 1024
        assert built == []
    finally:
        _destroy_world()
        for key in RENDEZVOUS:
            monkeypatch.delenv(key, raising=False)
        init_distributed()  # leave a group for the tests that follow in this process


def test_a_world_of_one_ignores_an_inherited_port_that_is_taken(tmp_path):
    """A child of a process that trained inherits its WORLD_SIZE=1 and MASTER_PORT, whose port
    the parent's group still holds: the child's own one-rank group must start anyway."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
        code = (
            "import os; from ih_kedro.science.training.distributed import init_distributed; "
            "print(init_distributed(), os.environ['MASTER_PORT'])"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    world, chosen = result.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert world == "(0, 1)" and int(chosen) != port


def test_the_shm_allreduce_op_is_skipped_on_cpu_for_any_world_size(monkeypatch):
    """DeepSpeed's CPU shared-memory all-reduce op leaks a 66 MB /dev/shm file per rank and
    training never calls it: it is not built on CPU even with two ranks; other devices keep it."""
    import importlib

    ds_torch = importlib.import_module("deepspeed.comm.torch")
    monkeypatch.setattr(ds_torch, "build_shm_op", lambda: "built")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with distributed._no_shm_allreduce_op_on_cpu("cpu"):
        assert ds_torch.build_shm_op() is None
    assert ds_torch.build_shm_op() == "built"  # restored
    with distributed._no_shm_allreduce_op_on_cpu("cuda"):
        assert ds_torch.build_shm_op() == "built"


def test_leaked_allreduce_buffers_are_freed_and_live_ones_kept(tmp_path, caplog):
    """This user's buffers that no process maps are deleted (their bytes returned and logged);
    one mapped by a live process (this one), another user's and other files are kept."""
    import logging
    import mmap

    shm = tmp_path / "shm"
    shm.mkdir()
    uid = os.getuid()
    leaked = [shm / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_4000{r}_{r}" for r in (0, 1)]
    for rank, path in enumerate(leaked):
        path.write_bytes(b"\0" * (1000 + rank))
    live = shm / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_50000_0"
    live.write_bytes(b"\0" * 4096)
    others = [shm / f"deepspeed_allreduce_buffer_{uid + 1}_127.0.0.1_1_0", shm / "torch_123"]
    for path in others:
        path.write_bytes(b"x")
    with live.open("r+b") as handle, mmap.mmap(handle.fileno(), 4096):
        with caplog.at_level(logging.WARNING, logger=distributed.__name__):
            assert distributed.remove_leaked_allreduce_buffers(shm) == 2001
        assert sorted(shm.iterdir()) == sorted([live, *others])
    assert "freed 0.0 GB" in caplog.text
    assert distributed.remove_leaked_allreduce_buffers(shm) == 4096  # unmapped now
    assert distributed.remove_leaked_allreduce_buffers(tmp_path / "absent") == 0
