"""DeepSpeed engine overhead vs plain PyTorch on the calibration-sized models (CPU or GPU).

Trains the same model from the same initialisation on the same batches with the same
``torch.optim.AdamW``, once with a plain ``loss.backward(); optimizer.step()`` loop and once
through ``deepspeed.initialize`` (ZeRO-0 fp32, as ``conf/base/parameters_training.yml``).
Repeats alternate between the two to share the machine's noise. Target: DeepSpeed's tokens/s
within 5% of plain PyTorch.

    .venv/bin/python benchmarks/deepspeed_overhead.py --steps 100 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ih_kedro.science.training.distributed import init_distributed, skip_allreduce_in_world_of_one
from ih_kedro.science.training.models import build_model

MODELS = {
    "attn-only-2l-d128": "attn-only-2l-d128",
    "gpt2-2l-d128": {"family": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 128},
}


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98), weight_decay=0.01)


def loss_of(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),  # (B·C, vocab)
        tokens[:, 1:].reshape(-1),  # (B·C,)
    )


def tokens_per_second(train_step, batches: torch.Tensor, context: int, warmup: int) -> float:
    """Tokens/s of ``train_step(tokens)`` over ``batches`` (B, C+1), timed after ``warmup`` steps."""
    start = 0.0
    for step, tokens in enumerate(batches):
        if step == warmup:
            start = time.perf_counter()
        train_step(tokens)
    elapsed = time.perf_counter() - start
    return (len(batches) - warmup) * batches.shape[1] * context / elapsed


def time_plain(preset, batches: torch.Tensor, vocab: int, context: int, warmup: int) -> float:
    """Tokens/s of a plain PyTorch loop over ``batches`` (B, C+1) after ``warmup`` steps."""
    model = build_model(preset, vocab, context, seed=0)
    optimizer = make_optimizer(model)

    def train_step(tokens: torch.Tensor) -> None:
        logits = model(input_ids=tokens[:, :-1]).logits  # (B, C, vocab)
        loss = loss_of(logits, tokens)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return tokens_per_second(train_step, batches, context, warmup)


def time_deepspeed(preset, batches: torch.Tensor, vocab: int, context: int, warmup: int) -> float:
    """Tokens/s of the same loop through a DeepSpeed engine (ZeRO-0, fp32)."""
    import deepspeed

    model = build_model(preset, vocab, context, seed=0)
    engine, _, _, _ = deepspeed.initialize(
        model=model,
        optimizer=make_optimizer(model),
        config={
            "train_micro_batch_size_per_gpu": batches.shape[1],
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": 0},
            # As conf/base/parameters_training.yml: the plain loop does not clip either.
            "gradient_clipping": 0.0,
            "steps_per_print": 10**12,
        },
        dist_init_required=False,
    )
    skip_allreduce_in_world_of_one(engine, world_size=1)  # as the training pipeline does

    def train_step(tokens: torch.Tensor) -> None:
        logits = engine(input_ids=tokens[:, :-1]).logits  # (B, C, vocab)
        engine.backward(loss_of(logits, tokens))
        engine.step()

    rate = tokens_per_second(train_step, batches, context, warmup)
    engine.destroy()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.threads:
        # On a shared 2-core machine 2 threads collapse under contention; 1 is steadier.
        torch.set_num_threads(args.threads)

    init_distributed()
    generator = torch.Generator().manual_seed(0)
    batches = torch.randint(
        0,
        args.vocab,
        (args.warmup + args.steps, args.batch_size, args.context + 1),
        generator=generator,
    )  # (steps, B, C+1)
    print(
        f"threads={torch.get_num_threads()} B={args.batch_size} C={args.context} "
        f"vocab={args.vocab} steps={args.steps} repeats={args.repeats}"
    )
    for name in args.models:
        preset = MODELS[name]
        plain, ds = [], []
        for _ in range(args.repeats):
            plain.append(time_plain(preset, batches, args.vocab, args.context, args.warmup))
            ds.append(time_deepspeed(preset, batches, args.vocab, args.context, args.warmup))
        ratios = [d / p for d, p in zip(ds, plain, strict=True)]
        print(
            f"{name}: plain {statistics.median(plain):,.0f} tok/s "
            f"[{min(plain):,.0f}-{max(plain):,.0f}], deepspeed {statistics.median(ds):,.0f} "
            f"tok/s [{min(ds):,.0f}-{max(ds):,.0f}], ratio median {statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}-{max(ratios):.3f}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
