"""Bi-Induct snippet injection: exact counts, placement, annealing, determinism, checks."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants.registry import DATA_VARIANTS
from ih_kedro.science.data.variants.snippets import (
    VARIANT,
    average_mix_ratio,
    check_snippet_options,
    expected_snippet_tokens,
    mix_ratio,
    snippet_count,
)
from ih_kedro.science.training.config import TrainingRunConfig, validate_run_config

SEP = 1


@pytest.fixture()
def stream() -> np.ndarray:
    # Distinct tokens >= 2: SEP (1) never occurs naturally, and every source span is readable.
    return np.arange(2, 20_002, dtype=np.uint32)


def _options(**extra) -> dict:
    return {"sep_token_id": SEP, "span_length": 5, "total_steps": 100, **extra}


def _snippets(row: np.ndarray, mask: np.ndarray, span: int) -> list[np.ndarray]:
    """The snippets written into one row, as arrays of 2L+1 tokens."""
    length = 2 * span + 1
    positions = np.flatnonzero(mask)
    assert len(positions) % length == 0
    return [row[positions[i : i + length]] for i in range(0, len(positions), length)]


def test_registered_as_a_data_variant() -> None:
    sample_batch(np.arange(2, 200), 1, 8, 0, 0)  # imports the provider modules
    assert VARIANT in DATA_VARIANTS


def test_exact_replacement_counts_follow_the_annealed_mix_ratio(stream) -> None:
    batch_size, context = 16, 32  # W = 33: 3 slots of 11 tokens per window
    for step, expected_snippets in ((0, 24), (50, 12), (99, 0), (100, 0)):
        # m(step) = 0.5 (1 - step/100); n = round(m * 16 * 33 / 11)
        options = _options(mix_ratio=0.5)
        assert snippet_count(step, batch_size, context + 1, options) == expected_snippets
        batch = sample_batch(stream, batch_size, context, 7, step, data_variant=VARIANT,
                             variant_options=options)  # fmt: skip
        assert int(batch.copied.sum()) == expected_snippets * 11
    # Step 99: m = 0.005 -> round(0.24) = 0 snippets.


def test_mix_ratio_schedule() -> None:
    assert mix_ratio(0, 1000, 0.5) == 0.5
    assert mix_ratio(250, 1000, 0.5) == pytest.approx(0.375)
    assert mix_ratio(1000, 1000, 0.5) == 0.0
    # Annealed over the first half of the run, then zero.
    assert mix_ratio(250, 1000, 0.5, anneal_fraction=0.5) == pytest.approx(0.25)
    assert mix_ratio(600, 1000, 0.5, anneal_fraction=0.5) == 0.0
    assert mix_ratio(900, 1000, 0.4, anneal_fraction=0.0) == 0.4  # no annealing
    assert average_mix_ratio({"mix_ratio": 0.5, "anneal_fraction": 1.0}) == 0.25
    # 100 steps of B=16, W=33: sum_s 11 * round(0.5 (1 - s/100) * 48)
    total = expected_snippet_tokens(100, 16, 32, _options())
    manual = sum(11 * round(0.5 * (1 - s / 100) * 48) for s in range(100))
    assert total == manual == 13_332  # 1212 snippets (round half to even)


@pytest.mark.parametrize("direction", ["induction", "anti_induction", "balanced"])
def test_snippet_format_and_direction(stream, direction) -> None:
    span = 5
    batch = sample_batch(stream, 32, 32, 3, 0, data_variant=VARIANT,
                         variant_options=_options(direction=direction))  # fmt: skip
    rows = batch.tokens.numpy()
    kinds = []
    for row, mask in zip(rows, batch.copied, strict=True):
        for snippet in _snippets(row, mask, span):
            first, sep, second = snippet[:span], snippet[span], snippet[span + 1 :]
            assert sep == SEP
            # S is a contiguous span of natural text (consecutive ids in this stream).
            assert np.all(np.diff(first.astype(np.int64)) == 1)
            if np.array_equal(second, first):
                kinds.append("induction")
            else:
                assert np.array_equal(second, first[::-1])
                kinds.append("anti_induction")
        # Tokens outside snippets are untouched natural text: each run of unmasked tokens is
        # contiguous in the stream.
        natural = np.where(~mask, row.astype(np.int64), -1)
        for a, b in zip(natural[:-1], natural[1:], strict=True):
            if a >= 0 and b >= 0:
                assert b == a + 1
    assert len(kinds) == 48  # round(0.5 * 32 * 33 / 11)
    if direction == "balanced":
        n_induction = kinds.count("induction")
        assert 0 < n_induction < len(kinds)  # a coin flip per snippet
    else:
        assert set(kinds) == {direction}


def test_deterministic_by_seed_and_step_for_resume(stream) -> None:
    options = _options(direction="balanced")
    a = sample_batch(stream, 8, 32, 5, 17, data_variant=VARIANT, variant_options=options)
    sample_batch(stream, 8, 32, 5, 18, data_variant=VARIANT, variant_options=options)
    b = sample_batch(stream, 8, 32, 5, 17, data_variant=VARIANT, variant_options=options)
    assert np.array_equal(a.tokens.numpy(), b.tokens.numpy())
    assert np.array_equal(a.copied, b.copied)
    c = sample_batch(stream, 8, 32, 6, 17, data_variant=VARIANT, variant_options=options)
    assert not np.array_equal(a.copied, c.copied)


def test_sep_in_natural_text_fails(stream) -> None:
    natural = np.tile(np.arange(0, 20), 100)  # every window holds token 3
    with pytest.raises(ValueError, match="sep_token_id: token 3 occurs in natural text"):
        sample_batch(natural, 8, 32, 0, 0, data_variant=VARIANT,
                     variant_options=_options(sep_token_id=3))  # fmt: skip


@pytest.mark.parametrize(
    ("options", "context", "message"),
    [
        ({"direction": "sideways"}, 64, "direction"),
        ({"span_length": 0}, 64, "span_length"),
        ({"sep_token_id": None}, 64, "sep_token_id"),
        ({"mix_ratio": 1.5}, 64, "mix_ratio"),
        ({"anneal_fraction": 2.0}, 64, "anneal_fraction"),
        ({"span_length": 20}, 32, "does not fit"),
        # W = 41: one snippet of 41 tokens per window -> capacity 1.0; W = 50 -> 0.82.
        ({"span_length": 20, "mix_ratio": 0.9}, 49, "at most 0.820"),
        ({"span_length": [8, 4]}, 64, "min <= max"),
        ({"span_length": [0, 4]}, 64, "positive integer"),
        ({"span_length": [4, 5, 6]}, 64, r"\[min, max\] pair"),
        ({"span_length": [4, 20]}, 32, "2 x 20 \\+ 1 = 41 tokens does not fit"),
        # W = 41, one slot of 41 for spans 4-20: mean snippet 25 tokens -> capacity 0.610.
        ({"span_length": [4, 20], "mix_ratio": 0.7}, 40, "at most 0.610"),
    ],
)
def test_impossible_options_fail_before_training(options, context, message) -> None:
    with pytest.raises(ValueError, match=message):
        check_snippet_options({**_options(), **options}, context)


def test_validate_run_config_runs_the_snippet_check_with_total_steps() -> None:
    config = TrainingRunConfig(run_name="x", preset="llama-tiny", batch_size=4, context_length=32,
                               data_variant=VARIANT, variant_options={"sep_token_id": SEP},
                               max_steps=10)  # fmt: skip
    assert config.run_variant_options["total_steps"] == 10
    with pytest.raises(ValueError, match="does not fit"):
        validate_run_config(config, vocab_size=300, corpus_tokens=10_000)
    config.variant_options["span_length"] = 5
    validate_run_config(config, vocab_size=300, corpus_tokens=10_000)


def test_training_with_snippets_resumes_exactly_and_logs_snippet_tokens(tmp_path) -> None:
    from ih_kedro.science.training.checkpoints import CheckpointStore
    from ih_kedro.science.training.run import train_run
    from tests.science.training.test_run import (
        RecordingTracker,
        assert_same_state,
        final_state,
        make_config,
        make_packed,
    )

    options = {"sep_token_id": 0, "span_length": 3, "direction": "balanced"}  # EOS 0 never occurs
    config = {"data_variant": VARIANT, "variant_options": options}
    packed = make_packed()
    straight = CheckpointStore(tmp_path / "straight")
    tracker = RecordingTracker()
    summary = train_run(make_config(**config), packed, straight, tracker)

    class Interrupt(RuntimeError):
        pass

    def interrupt(step: int) -> None:
        if step == 6:
            raise Interrupt

    resumed = CheckpointStore(tmp_path / "resumed")
    with pytest.raises(Interrupt):
        train_run(make_config(**config), packed, resumed, step_hook=interrupt)
    train_run(make_config(**config), packed, resumed)
    assert_same_state(final_state(straight, "tiny"), final_state(resumed, "tiny"))

    # 12 steps of B=8, W=17: exactly the snippet tokens the schedule asks for, logged per window.
    expected = expected_snippet_tokens(12, 8, 16, {**options, "total_steps": 12})
    assert summary["copied_token_fraction"] * 12 * 8 * 17 == pytest.approx(expected)
    logged = [m["variant_tokens_per_step"] * 2 for _, m in tracker.metrics if "lr" in m]
    assert sum(logged) == pytest.approx(expected)  # log_every = 2 steps per window
    first = [m for _, m in tracker.metrics if "variant_batch_share" in m][0]
    # steps 0 and 1: round(0.5 * 136 / 7) = 10 and round(0.4583 * 136 / 7) = 9 snippets
    assert first["variant_batch_share"] == pytest.approx((10 + 9) * 7 / (2 * 136))


def test_a_span_range_draws_each_snippets_span_and_keeps_the_format(stream) -> None:
    """``span_length: [min, max]``: every snippet is S ‖ SEP ‖ S (or reversed) with its own
    |S| in [min, max], so no single offset back finds the copy; the count follows the mean span."""
    options = _options(span_length=[3, 9], direction="balanced")
    batch_size, context = 64, 63  # W = 64: 3 slots of 19 tokens; mean snippet 13 tokens
    assert snippet_count(0, batch_size, context + 1, options) == round(0.5 * 64 * 64 / 13)
    batch = sample_batch(stream, batch_size, context, 2, 0, data_variant=VARIANT,
                         variant_options=options)  # fmt: skip
    spans, kinds = [], []
    for row, mask in zip(batch.tokens.numpy(), batch.copied, strict=True):
        positions = np.flatnonzero(mask)
        # Runs of written positions hold whole snippets back to back: read them one by one,
        # each first half ending at its SEP.
        tokens = row[positions]
        while tokens.size:
            sep_at = int(np.flatnonzero(tokens == SEP)[0])
            first, second = tokens[:sep_at], tokens[sep_at + 1 : 2 * sep_at + 1]
            tokens = tokens[2 * sep_at + 1 :]
            assert len(second) == sep_at and 3 <= sep_at <= 9
            assert np.all(np.diff(first.astype(np.int64)) == 1)  # a natural span
            if np.array_equal(second, first):
                kinds.append("induction")
            else:
                assert np.array_equal(second, first[::-1])
                kinds.append("anti_induction")
            spans.append(sep_at)
    assert len(spans) == 158  # round(0.5 * 64 * 64 / 13)
    assert int(batch.copied.sum()) == sum(2 * s + 1 for s in spans)
    assert set(spans) == set(range(3, 10))  # every span of the range occurs
    assert abs(np.mean(spans) - 6.0) < 0.5 and 0 < kinds.count("induction") < len(kinds)
    # Deterministic by (seed, step) as for a fixed span (resume sees the same snippets).
    again = sample_batch(stream, batch_size, context, 2, 0, data_variant=VARIANT,
                         variant_options=options)  # fmt: skip
    assert np.array_equal(again.tokens.numpy(), batch.tokens.numpy())
    # A degenerate range [5, 5] is the fixed span 5, batch for batch.
    fixed = sample_batch(stream, 16, 32, 7, 3, data_variant=VARIANT, variant_options=_options())
    same = sample_batch(stream, 16, 32, 7, 3, data_variant=VARIANT,
                        variant_options=_options(span_length=[5, 5]))  # fmt: skip
    assert np.array_equal(fixed.tokens.numpy(), same.tokens.numpy())
    assert expected_snippet_tokens(10, 64, 63, options) == round(13 * sum(
        snippet_count(s, 64, 64, {**options, "total_steps": 10}) for s in range(10)))  # fmt: skip


def _snippet_starts(row: np.ndarray, mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, span)`` of every snippet in one row (runs of the mask read snippet by snippet)."""
    out = []
    positions = np.flatnonzero(mask)
    i = 0
    while i < positions.size:
        sep_at = int(np.flatnonzero(row[positions[i:]] == SEP)[0])
        out.append((int(positions[i]), sep_at))
        i += 2 * sep_at + 1
    return out


def test_a_span_range_places_each_snippet_anywhere_in_its_slot(stream) -> None:
    """One slot of 2 x 15 + 1 = 31 tokens per window of 33: the grid shift alone puts every
    snippet's start at 0-2; a shorter snippet must start anywhere in the slot's free room
    (uniform on [0, 2 (15 - s)] plus the shift), so its position is not fixed either."""
    options = _options(span_length=[4, 15], mix_ratio=0.6)
    starts: dict[int, list[int]] = {}
    for step in range(8):
        batch = sample_batch(stream, 64, 32, 3, step, data_variant=VARIANT,
                             variant_options=options)  # fmt: skip
        for row, mask in zip(batch.tokens.numpy(), batch.copied, strict=True):
            for start, span in _snippet_starts(row, mask):
                assert start + 2 * span + 1 <= 33  # the snippet stays inside its window
                assert row[start + span] == SEP
                starts.setdefault(span, []).append(start)
    short = [s for span in (4, 5) for s in starts[span]]
    # Room for a 4-token span: starts 0..24 (+ shift 0..2); drawn uniformly, the 2.5 % and
    # 97.5 % quantiles of ~100 draws lie far from the grid's 0..2.
    assert max(short) >= 18 and min(short) <= 3 and len(set(short)) >= 15
    assert max(starts[15]) <= 2  # the longest span fills the slot: only the grid shift moves it


def test_a_base_variant_runs_first_and_the_snippets_overwrite_it(stream) -> None:
    """``base: fixed_rate_copies``: the snippet arm's batch equals the base arm's batch of the same
    (seed, step) everywhere the snippets did not write, and the mask is the union of both."""
    base_options = {"tokens_per_event": 16, "span_min": 4, "span_max": 8}
    options = _options(span_length=[4, 12], base="fixed_rate_copies", base_options=base_options)
    for step in (0, 40):
        base = sample_batch(stream, 32, 64, 5, step, data_variant="fixed_rate_copies",
                            variant_options=base_options)  # fmt: skip
        arm = sample_batch(stream, 32, 64, 5, step, data_variant=VARIANT, variant_options=options)
        base_tokens, arm_tokens = base.tokens.numpy(), arm.tokens.numpy()
        n = snippet_count(step, 32, 65, options)
        assert int((arm_tokens == SEP).sum()) == n > 0
        # Outside what either wrote, the arm's windows are the base arm's windows.
        assert np.array_equal(arm_tokens[~arm.copied], base_tokens[~arm.copied])
        assert not (base.copied & ~arm.copied).any()  # the base's copies stay marked
        snippet_only = arm.copied & ~base.copied
        assert snippet_only.any() and (arm_tokens != base_tokens).sum() > 0
        assert not ((arm_tokens != base_tokens) & ~arm.copied).any()
    # Past the anneal horizon no snippet is left: the arm's batch is the base arm's, exactly.
    late = sample_batch(stream, 32, 64, 5, 100, data_variant=VARIANT, variant_options=options)
    base = sample_batch(stream, 32, 64, 5, 100, data_variant="fixed_rate_copies",
                        variant_options=base_options)  # fmt: skip
    assert np.array_equal(late.tokens.numpy(), base.tokens.numpy())
    assert np.array_equal(late.copied, base.copied) and base.copied.any()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"base": "no_such_variant"}, "unknown data variant 'no_such_variant'"),
        ({"base": VARIANT}, "base: snippets cannot be their own base"),
        ({"base": "fixed_rate_copies", "base_options": {"span_min": 4, "span_max": 40}},
         "fixed_rate_copies: up to"),
    ],
)  # fmt: skip
def test_an_impossible_base_fails_before_training(extra, message) -> None:
    with pytest.raises(ValueError, match=message):
        check_snippet_options(_options(**extra), 64)
