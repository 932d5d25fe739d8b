"""The ``markov`` nodes on tiny hand-built inputs (no training, no ``kedro run``).

Parameter reading and its messages, the expansion of the training grid into markov cells, the
process, condition and runs tables (formation scores from hand-built score samples), the verdict
document, the figures' data and what goes to MLflow.
The science underneath (designing processes, the verdict logic, the plots, the repetition
generator) is tested in tests/science/; here each node's own wiring is pinned by values.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from ih_kedro.pipelines.markov.nodes import (
    _check_probe_pools,
    _read_frontier_table,
    design_processes,
    plan_variant_data,
    process_specs,
    processes_figure,
    run_cells,
)
from ih_kedro.pipelines.markov.report_nodes import (
    _realised_repetition,
    build_conditions,
    conditions_figure,
    judge,
    log_markov_to_mlflow,
)
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.markov import markov_sequences
from ih_kedro.science.data.variants.markov_process import MarkovProcess, MarkovSpec
from ih_kedro.science.data.variants.repetition_stats import measure_repetition
from ih_kedro.science.statistics.markov_verdicts import PAIRED_RULE, judge_claims

ALL_DEFAULTS = {
    "zipf_exponent": 2.0,
    "n_groups": 2,
    "steps": 7,
    "learning_rate": 0.2,
    "kl_tolerance": 0.5,
    "entropy_tolerance": 0.4,
    "similarity_tolerance": 0.3,
    "seed": 5,
}


# --------------------------------------------------------------------------------------------
# process_specs
# --------------------------------------------------------------------------------------------
def test_process_specs_merge_vocab_size_defaults_and_entries_in_that_order() -> None:
    design = {
        "vocab_size": "6",  # cast to int
        "defaults": ALL_DEFAULTS,  # every known default key is accepted
        "processes": {
            "flat": None,  # an entry without options takes the defaults
            "peaky": {"marginal": "zipf", "zipf_exponent": 1.5, "entropy_ratio": 0.5},
            7: {"vocab_size": 8},  # an entry overrides vocab_size; its name becomes a string
        },
    }
    specs = process_specs(design)
    assert specs == [
        MarkovSpec(name="flat", vocab_size=6, **ALL_DEFAULTS),
        MarkovSpec(
            name="peaky",
            vocab_size=6,
            **{**ALL_DEFAULTS, "zipf_exponent": 1.5},
            marginal="zipf",
            entropy_ratio=0.5,
        ),
        MarkovSpec(name="7", vocab_size=8, **ALL_DEFAULTS),
    ]
    assert [type(s.vocab_size) for s in specs] == [int, int, int]


def test_process_specs_without_defaults_use_the_spec_defaults() -> None:
    assert process_specs({"vocab_size": 4, "processes": {"a": {"n_groups": 2}}}) == [
        MarkovSpec(name="a", vocab_size=4, n_groups=2)
    ]
    assert process_specs(
        {"vocab_size": 4, "defaults": None, "processes": {"a": {"n_groups": 2}}}
    ) == [MarkovSpec(name="a", vocab_size=4, n_groups=2)]


@pytest.mark.parametrize("processes", [None, {}, "missing"])
def test_process_specs_need_a_process(processes: Any) -> None:
    design: dict[str, Any] = {"vocab_size": 4}
    if processes != "missing":
        design["processes"] = processes
    with pytest.raises(ValueError) as error:
        process_specs(design)
    assert str(error.value) == "markov.design.processes: no process to design"


def test_process_specs_name_unknown_defaults_sorted() -> None:
    design = {
        "vocab_size": 4,
        "defaults": {"zzz": 1, "seed": 0, "aaa": 2},
        "processes": {"a": {"n_groups": 2}},
    }
    with pytest.raises(ValueError) as error:
        process_specs(design)
    assert str(error.value) == "markov.design.defaults: unknown option(s) ['aaa', 'zzz']"


def test_process_specs_validate_each_spec() -> None:
    design = {"vocab_size": 4, "processes": {"bad": {"marginal": "bogus", "n_groups": 2}}}
    with pytest.raises(ValueError) as error:
        process_specs(design)
    assert str(error.value) == (
        "markov.processes['bad'].marginal: unknown marginal 'bogus'; choose one of "
        "('uniform', 'gaussian', 'zipf')"
    )


# --------------------------------------------------------------------------------------------
# _check_probe_pools
# --------------------------------------------------------------------------------------------
_FREQUENT = {"probe": {"source": "frequent", "top_k": 16}}


def test_probe_pools_default_to_500_online_tokens_and_enabled() -> None:
    with pytest.raises(ValueError) as error:
        _check_probe_pools(16, {}, _FREQUENT)
    assert str(error.value) == (
        "markov.training.online_emergence.token_pool_size: 500 probe tokens but the processes "
        "emit only 16 (markov.design.vocab_size); set it <= 16"
    )
    with pytest.raises(ValueError, match="token_pool_size: 17 probe tokens but the processes"):
        _check_probe_pools(16, {"online_emergence": {"token_pool_size": "17"}}, _FREQUENT)
    with pytest.raises(ValueError, match="token_pool_size: 500 probe tokens"):
        _check_probe_pools(16, {"online_emergence": None}, _FREQUENT)


def test_probe_pools_accept_a_pool_equal_to_the_states_or_a_disabled_evaluator() -> None:
    assert _check_probe_pools(16, {"online_emergence": {"token_pool_size": 16}}, _FREQUENT) is None
    assert _check_probe_pools(16, {"online_emergence": {"enabled": False}}, _FREQUENT) is None
    assert _check_probe_pools(500, {}, {"probe": {"top_k": 500}}) is None  # source: frequent


@pytest.mark.parametrize(
    ("probe", "got"),
    [
        ({"source": "uniform", "top_k": 4}, "got source 'uniform', top_k 4"),
        ({"source": "frequent", "top_k": 17}, "got source 'frequent', top_k 17"),
        ({"top_k": "17"}, "got source None, top_k 17"),
    ],
)
def test_telemetry_probes_must_come_from_the_states(probe: dict[str, Any], got: str) -> None:
    online = {"online_emergence": {"token_pool_size": 16}}
    with pytest.raises(ValueError) as error:
        _check_probe_pools(16, online, {"probe": probe})
    assert str(error.value) == (
        "markov.telemetry.probe: probes must come from the 16 tokens the processes emit "
        f"(source: frequent, top_k <= 16); {got}"
    )


def test_telemetry_probe_defaults_pass() -> None:
    online = {"online_emergence": {"token_pool_size": 16}}
    assert _check_probe_pools(16, online, {}) is None  # source frequent, top_k 0
    assert _check_probe_pools(16, online, {"probe": None}) is None
    assert _check_probe_pools(16, online, {"probe": {"top_k": 16}}) is None


# --------------------------------------------------------------------------------------------
# design_processes
# --------------------------------------------------------------------------------------------
def _stream(compact_size: int | None) -> PackedTokens:
    """EOS (9) and the compact vocabulary's other id (8) are the most frequent ids; then
    5 > 2 > 7 > 0 > 1."""
    counts = {9: 20, 8: 15, 5: 10, 2: 8, 7: 6, 0: 4, 1: 2}
    tokens = np.concatenate([np.full(n, t, dtype=np.uint16) for t, n in counts.items()])
    meta = {}
    if compact_size is not None:
        meta = {"compact_vocabulary": {"size": compact_size, "other_token_id": 8}}
    return PackedTokens(tokens=tokens, vocab_size=10, eos_token_id=9, meta=meta)


_DESIGN = {
    "vocab_size": 4,
    "defaults": {
        "n_groups": 2,
        "steps": 20,
        "kl_tolerance": 10.0,
        "entropy_tolerance": 1.0,
        "similarity_tolerance": 1.0,
    },
    "processes": {
        "flat": {"marginal": "zipf"},
        "cat": {"entropy_ratio": 0.5, "within_similarity": 0.5, "across_similarity": 0.1},
    },
}
_POOLS = ({"online_emergence": {"token_pool_size": 4}}, {"probe": {"top_k": 4}})


def test_design_processes_map_states_and_tabulate_targets_and_properties() -> None:
    processes, table = design_processes(_stream(compact_size=4), _DESIGN, *_POOLS)
    assert list(processes) == ["flat", "cat"]
    for process in processes.values():  # the 4 most frequent content tokens, most frequent first
        np.testing.assert_array_equal(process.token_ids, [5, 2, 7, 0])
    zipf = 1.0 / np.arange(1, 5)
    np.testing.assert_allclose(processes["flat"].transition, np.tile(zipf / zipf.sum(), (4, 1)))
    assert processes["cat"].spec.entropy_ratio == 0.5
    flat, cat = processes["flat"].properties, processes["cat"].properties
    expected = pd.DataFrame(
        [
            {
                "process": "flat",
                "marginal": "zipf",
                "local_dependency": False,
                "categorical": False,
                "target_entropy_ratio": 1.0,
                "target_within_similarity": None,
                "target_across_similarity": None,
                **flat,
            },
            {
                "process": "cat",
                "marginal": "uniform",
                "local_dependency": True,
                "categorical": True,
                "target_entropy_ratio": 0.5,
                "target_within_similarity": 0.5,
                "target_across_similarity": 0.1,
                **cat,
            },
        ]
    )
    pd.testing.assert_frame_equal(table, expected)
    assert list(table.columns[7:]) == [
        "kl_to_target",
        "entropy_rate",
        "marginal_entropy",
        "target_entropy",
        "entropy_ratio",
        "row_peak",
        "within_similarity",
        "across_similarity",
        "categoriality",
    ]
    assert flat["entropy_ratio"] == pytest.approx(1.0)


def test_design_processes_without_a_compact_vocabulary_exclude_only_eos() -> None:
    design = {**_DESIGN, "processes": {"flat": {"marginal": "zipf"}}}
    processes, table = design_processes(_stream(compact_size=None), design, *_POOLS)
    np.testing.assert_array_equal(processes["flat"].token_ids, [8, 5, 2, 7])
    assert list(table["process"]) == ["flat"]


def test_design_processes_refuse_a_compact_vocabulary_smaller_than_the_states() -> None:
    with pytest.raises(ValueError) as error:
        design_processes(_stream(compact_size=3), _DESIGN, *_POOLS)
    assert str(error.value) == (
        "markov.vocabulary.size: 3 tokens cannot hold the processes' 4 states "
        "(markov.design.vocab_size); set it >= 4"
    )


def test_design_processes_check_the_probe_pools_before_designing() -> None:
    with pytest.raises(ValueError, match="token_pool_size: 5 probe tokens but the processes emit"):
        design_processes(
            _stream(compact_size=4),
            _DESIGN,
            {"online_emergence": {"token_pool_size": 5}},
            {"probe": {"top_k": 4}},
        )
    with pytest.raises(ValueError, match=r"probes must come from the 4 tokens .* top_k 5"):
        design_processes(_stream(compact_size=4), _DESIGN, _POOLS[0], {"probe": {"top_k": 5}})


# --------------------------------------------------------------------------------------------
# plan_variant_data
# --------------------------------------------------------------------------------------------
def _process(
    name: str, vocab: int = 16, path: str | None = "x.npz", peak: float = 0.0
) -> MarkovProcess:
    """A no-LD process over ``vocab`` states: every row the same (uniform + ``peak`` on 0)."""
    row = np.full(vocab, 1.0)
    row[0] += peak
    row /= row.sum()
    return MarkovProcess(
        spec=MarkovSpec(name=name, vocab_size=vocab),
        transition=np.tile(row, (vocab, 1)),
        stationary=row.copy(),
        target=row.copy(),
        groups=np.arange(vocab) % 4,
        properties={
            "kl_to_target": 0.0,
            "entropy_ratio": 1.0,
            "within_similarity": 1.0,
            "across_similarity": 1.0,
        },
        token_ids=np.arange(vocab),
        path=path,
    )


_LEVELS = {
    "high": {"frequency": 1.0, "reliability": 1.0},
    "near": {
        "frequency": 0.5,
        "reliability": "frontier",
        "margin": 1.25,
        "fallback_reliability": 0.9,
    },
}


def test_plan_variant_data_falls_back_without_a_frontier_table(tmp_path: Path) -> None:
    processes = {"a": _process("a", path="/p/a.npz"), "b": _process("b", path="/p/b.npz", peak=1.0)}
    missing = str(tmp_path / "frontier_table.csv")
    plan = plan_variant_data(processes, {"frontier_table": missing, "levels": _LEVELS})
    assert plan == {
        "process_paths": {"a": "/p/a.npz", "b": "/p/b.npz"},
        "process_checksums": {"a": processes["a"].checksum(), "b": processes["b"].checksum()},
        "levels": {
            "high": {"frequency": 1.0, "reliability": 1.0, "source": "parameter"},
            "near": {
                "frequency": 0.5,
                "reliability": 0.9,
                "source": "fallback_reliability (no pareto frontier table)",
            },
        },
    }
    assert plan["process_checksums"]["a"] != plan["process_checksums"]["b"]
    assert plan_variant_data(processes, {"levels": _LEVELS})["levels"] == plan["levels"]


def test_plan_variant_data_logs_every_resolved_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ih_kedro.pipelines.markov.nodes")
    plan_variant_data({"a": _process("a")}, {"levels": _LEVELS})
    assert [
        r.getMessage() for r in caplog.records if r.name == "ih_kedro.pipelines.markov.nodes"
    ] == [
        "markov level high: frequency 1, reliability 1 (parameter)",
        "markov level near: frequency 0.5, reliability 0.9 "
        "(fallback_reliability (no pareto frontier table))",
    ]


def test_plan_variant_data_reads_the_frontier_table(tmp_path: Path) -> None:
    path = tmp_path / "frontier_table.csv"
    pd.DataFrame(
        {"kind": ["contour", "contour"], "frequency": [0.25, 1.0], "reliability": [0.4, 0.4]}
    ).to_csv(path, index=False)
    plan = plan_variant_data({"a": _process("a")}, {"frontier_table": str(path), "levels": _LEVELS})
    near = plan["levels"]["near"]
    assert near["reliability"] == pytest.approx(0.5)  # 0.4 x margin 1.25
    assert near["source"] == "pareto frontier at frequency 0.5 x margin 1.25"


def test_plan_variant_data_needs_levels_and_process_files() -> None:
    with pytest.raises(ValueError, match="markov.repetition.levels: no repetition level given"):
        plan_variant_data({"a": _process("a")}, {"levels": None})
    processes = {"z": _process("z", path=None), "a": _process("a"), "b": _process("b", path="")}
    with pytest.raises(ValueError) as error:
        plan_variant_data(processes, {"levels": _LEVELS})
    assert str(error.value) == (
        "markov.processes: ['z', 'b'] have no file path (load them from disk)"
    )


def test_read_frontier_table(tmp_path: Path) -> None:
    assert _read_frontier_table(None) is None
    assert _read_frontier_table("") is None
    assert _read_frontier_table(str(tmp_path)) is None  # a folder, not a file
    assert _read_frontier_table(str(tmp_path / "none.csv")) is None
    path = tmp_path / "t.csv"
    path.write_text("kind,frequency\ncontour,0.5\n")
    pd.testing.assert_frame_equal(
        _read_frontier_table(str(path)), pd.DataFrame({"kind": ["contour"], "frequency": [0.5]})
    )


# --------------------------------------------------------------------------------------------
# run_cells
# --------------------------------------------------------------------------------------------
def _training(**overrides: Any) -> dict[str, Any]:
    return {
        "presets": ["m"],
        "batch_sizes": [2],
        "context_lengths": [8],
        "seeds": [0, 1],
        "data_variants": [
            {"variant": "markov", "label": "A.hi", "options": {"process": "A", "level": "hi"}},
            {"variant": "markov", "label": "B.lo", "options": {"process": "B", "level": "lo"}},
        ],
        **overrides,
    }


def test_run_cells_keep_the_markov_cells_of_the_grid() -> None:
    training = _training(
        seeds=[3],
        data_variants=[
            {"variant": "markov", "label": "A.hi", "options": {"process": "A", "level": "hi"}},
            "natural",
            {"variant": "markov", "label": "bare"},
        ],
    )
    expected = pd.DataFrame(
        {
            "run_name": ["m_B2_C8_A.hi_s3", "m_B2_C8_bare_s3"],
            "seed": [3, 3],
            "process": ["A", "None"],
            "level": ["hi", "None"],
        }
    )
    pd.testing.assert_frame_equal(run_cells(training), expected)


def test_run_cells_need_a_markov_cell() -> None:
    with pytest.raises(ValueError) as error:
        run_cells(_training(data_variants=["natural"]))
    assert str(error.value) == "markov.training.data_variants: no cell uses the markov variant"


# --------------------------------------------------------------------------------------------
# build_conditions
# --------------------------------------------------------------------------------------------
_NAN = math.nan
_RUNS = ["m_B2_C8_A.hi_s0", "m_B2_C8_A.hi_s1", "m_B2_C8_B.lo_s0", "m_B2_C8_B.lo_s1"]


def _emergence_table() -> pd.DataFrame:
    """The selected rows (prefix_matching, threshold) plus two decoy blocks."""
    chosen = pd.DataFrame(
        {
            "run_name": _RUNS,
            "metric": "prefix_matching",
            "method": "threshold",
            "status": ["emerged", "emerged", "censored", "emerged"],
            "step": [100.0, 200.0, _NAN, 300.0],
            "ci_low": [90.0, 150.0, _NAN, 280.0],
            "ci_high": [110.0, 260.0, _NAN, 330.0],
            "last_step": [400, 500, 600, 600],
        }
    )
    other_method = chosen.assign(method="logistic", status="censored", last_step=9999)
    other_metric = chosen.assign(
        metric="other", status="emerged", step=1.0, ci_low=1.0, ci_high=1.0, last_step=7777
    )
    return pd.concat([other_method, chosen, other_metric], ignore_index=True)


def _samples(curve: list[float], decoy: float = 0.9) -> np.ndarray:
    """``(K, n=2, layers=2, heads=2)`` samples whose layer->=1 best head has mean ``curve``:
    layer 0 holds ``decoy`` everywhere (read only with min_layer 0), layer 1 head 0 the
    curve +/- 0.1 over the two probe samples, head 1 zeros."""
    curve = np.asarray(curve, dtype=float)  # (K,)
    samples = np.zeros((curve.size, 2, 2, 2))  # (K, n, layers, heads)
    samples[:, :, 0, :] = decoy
    samples[:, 0, 1, 0] = curve - 0.1
    samples[:, 1, 1, 0] = curve + 0.1
    return samples


_STEPS = [0.0, 100.0, 200.0, 400.0]
_CURVES = {  # run -> (steps, best layer>=1 head's curve); the budget is max_steps = 400
    # 170 / 400: 100 (0 + .2) / 2 + 100 (.2 + .6) / 2 + 200 x .6; crosses .3/.4/.5 at 125/150/175
    _RUNS[0]: (_STEPS, [0.0, 0.2, 0.6, 0.6]),
    # 120 / 400: 5 + 15 + 200 (.2 + .8) / 2; crosses at 200 + 200 x (.1, .2, .3) / .6
    _RUNS[1]: (_STEPS, [0.0, 0.1, 0.2, 0.8]),
    # stopped at 200: 10 + 27.5 + .35 x 200 carried to 400 = 107.5 / 400; crosses .3 at 166.7,
    # .4 and .5 unobserved (stopped before the budget below them)
    _RUNS[2]: (_STEPS[:3], [0.0, 0.2, 0.35]),
    # 25 / 400: 0 + 5 + 200 x .1; never crosses, reached the budget: not formed
    _RUNS[3]: (_STEPS, [0.0, 0.0, 0.1, 0.1]),
}
_SCORES = [170 / 400, 120 / 400, 107.5 / 400, 25 / 400]


def _score_samples() -> dict[str, dict[str, np.ndarray]]:
    """Telemetry's samples: ``prefix_matching`` as :data:`_CURVES`, ``other`` flat at 0.5."""
    return {
        name: {
            "steps": np.asarray(steps),
            "prefix_matching": _samples(curve),
            "other": _samples([0.5] * len(steps), decoy=0.0),
        }
        for name, (steps, curve) in _CURVES.items()
    }


_PROCESS_TABLE = pd.DataFrame(
    {
        "process": ["A", "B"],
        "marginal": ["uniform", "zipf"],
        "local_dependency": [False, True],
        "categorical": [False, True],
        "kl_to_target": [0.001, 0.002],
    }
)
_VARIANT_DATA = {
    "levels": {
        "hi": {"frequency": 1.0, "reliability": 1.0, "source": "parameter"},
        "lo": {"frequency": 0.5, "reliability": 0.75, "source": "parameter"},
    }
}
_TELEMETRY = {"emergence": {"metrics": [{"metric": "prefix_matching", "min_layer": 1}]}}
_T_975_1 = math.tan(0.475 * math.pi)  # Student t quantile 0.975, 1 df (Cauchy: tan(pi (p - .5)))


def _conditions_of(
    emergence: pd.DataFrame | None = None,
    conditions: dict[str, Any] | None = None,
    telemetry: dict[str, Any] | None = None,
    score_samples: dict[str, Any] | None = None,
    processes: dict[str, MarkovProcess] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return build_conditions(
        _emergence_table() if emergence is None else emergence,
        _score_samples() if score_samples is None else score_samples,
        _PROCESS_TABLE,
        processes or {"A": _process("A"), "B": _process("B")},
        _VARIANT_DATA,
        _training(max_steps=400),
        _TELEMETRY if telemetry is None else telemetry,
        conditions or {},
    )


def _expected_realised(process: MarkovProcess, frequency: float, reliability: float) -> tuple:
    sample = markov_sequences(process, 512, 9, frequency, reliability, np.random.default_rng(0))
    stats = measure_repetition(sample)
    return stats.frequency, stats.reliability


def test_build_conditions_assemble_one_row_per_process_and_level() -> None:
    processes = {"A": _process("A"), "B": _process("B", peak=2.0)}
    table, _ = _conditions_of(processes=processes)
    assert list(table.columns) == [
        "condition",
        "process",
        "level",
        "marginal",
        "local_dependency",
        "categorical",
        "frequency",
        "reliability",
        "n_seeds",
        "n_formed",
        "formed",
        "formed_share",
        "s_star",
        "ci_low",
        "ci_high",
        "status",
        "seed_statuses",
        "budget_steps",
        "formation_score",
        "formation_score_ci_low",
        "formation_score_ci_high",
        "n_formed_at_0.3",
        "n_formed_at_0.4",
        "n_formed_at_0.5",
        "kl_to_target",
        "realised_frequency",
        "realised_reliability",
    ]
    assert list(table["condition"]) == ["A@hi", "B@lo"]
    assert list(table["marginal"]) == ["uniform", "zipf"]
    assert list(table["local_dependency"]) == [False, True]
    assert list(table["categorical"]) == [False, True]
    assert list(table["frequency"]) == [1.0, 0.5]
    assert list(table["reliability"]) == [1.0, 0.75]
    assert list(table["n_formed"]) == [2, 1]
    assert list(table["formed"]) == ["yes", "mixed"]
    assert list(table["s_star"]) == [150.0, 300.0]
    assert list(table["ci_low"]) == [90.0, 280.0]
    assert list(table["ci_high"]) == [260.0, 330.0]
    assert list(table["seed_statuses"]) == ["s0:emerged;s1:emerged", "s0:censored;s1:emerged"]
    assert list(table["budget_steps"]) == [500, 600]  # the emergence table's last steps
    assert list(table["kl_to_target"]) == [0.001, 0.002]
    # Mean over the two seeds; two values a, b: t interval mean +/- t(.975, 1) |a - b| / 2.
    a0, a1, b0, b1 = _SCORES
    assert table["formation_score"].tolist() == pytest.approx([0.3625, 0.165625])
    half = [_T_975_1 * (a0 - a1) / 2, _T_975_1 * (b0 - b1) / 2]
    assert table["formation_score_ci_low"].tolist() == pytest.approx(
        [0.3625 - half[0], 0.165625 - half[1]]
    )
    assert table["formation_score_ci_high"].tolist() == pytest.approx(
        [0.3625 + half[0], 0.165625 + half[1]]
    )
    # B.lo s0 formed at 0.3 only (unobserved above it), s1 at none.
    assert list(table["n_formed_at_0.3"]) == [2, 1]
    assert list(table["n_formed_at_0.4"]) == [2, 0]
    assert list(table["n_formed_at_0.5"]) == [2, 0]
    low_f, low_r = _expected_realised(processes["B"], 0.5, 0.75)
    assert list(table["realised_frequency"]) == [1.0, low_f]
    assert list(table["realised_reliability"]) == [1.0, low_r]
    assert 0.3 < low_f < 0.7 and 0.5 < low_r < 0.95


def test_build_conditions_return_one_run_per_seed_with_its_formation() -> None:
    _, runs = _conditions_of()
    assert list(runs.columns) == [
        "run_name",
        "seed",
        "process",
        "level",
        "status",
        "step",
        "ci_low",
        "ci_high",
        "last_step",
        "marginal",
        "local_dependency",
        "categorical",
        "frequency",
        "reliability",
        "budget_steps",
        "formation_score",
        "peak",
        "step_at_0.3",
        "formed_at_0.3",
        "step_at_0.4",
        "formed_at_0.4",
        "step_at_0.5",
        "formed_at_0.5",
    ]
    assert list(runs["run_name"]) == _RUNS
    assert list(runs["seed"]) == [0, 1, 0, 1]
    assert list(runs["process"]) == ["A", "A", "B", "B"]
    assert list(runs["level"]) == ["hi", "hi", "lo", "lo"]
    assert list(runs["status"]) == ["emerged", "emerged", "censored", "emerged"]
    assert list(runs["last_step"]) == [400, 500, 600, 600]  # the emergence table's, not telemetry's
    assert list(runs["marginal"]) == ["uniform", "uniform", "zipf", "zipf"]
    assert list(runs["local_dependency"]) == [False, False, True, True]
    assert list(runs["frequency"]) == [1.0, 1.0, 0.5, 0.5]
    assert list(runs["reliability"]) == [1.0, 1.0, 0.75, 0.75]
    assert list(runs["budget_steps"]) == [400.0] * 4  # training.max_steps, every run
    assert runs["formation_score"].tolist() == pytest.approx(_SCORES)
    assert runs["peak"].tolist() == pytest.approx([0.6, 0.8, 0.35, 0.1])
    assert runs["step_at_0.3"].tolist() == pytest.approx(
        [125.0, 200 + 200 / 6, 100 + 100 / 1.5, _NAN], nan_ok=True
    )
    assert runs["step_at_0.4"].tolist() == pytest.approx(
        [150.0, 200 + 400 / 6, _NAN, _NAN], nan_ok=True
    )
    assert runs["step_at_0.5"].tolist() == pytest.approx([175.0, 300.0, _NAN, _NAN], nan_ok=True)
    assert runs["formed_at_0.3"].tolist() == [True, True, True, False]
    assert runs["formed_at_0.4"].tolist() == [True, True, pd.NA, False]
    assert runs["formed_at_0.5"].tolist() == [True, True, pd.NA, False]
    assert str(runs["formed_at_0.4"].dtype) == "boolean"


def test_build_conditions_read_min_layer_of_the_metric_from_telemetry() -> None:
    # min_layer 0 lets layer 0 (0.9 everywhere) win: every run scores 0.9.
    telemetry = {"emergence": {"metrics": [{"metric": "prefix_matching", "min_layer": 0}]}}
    table, runs = _conditions_of(telemetry=telemetry)
    assert runs["formation_score"].tolist() == pytest.approx([0.9] * 4)
    assert table["formation_score"].tolist() == pytest.approx([0.9, 0.9])
    assert table["formation_score_ci_low"].tolist() == pytest.approx([0.9, 0.9])  # sd 0
    # Another metric's spec, or none at all: min_layer 1.
    for telemetry in (
        {"emergence": {"metrics": [{"metric": "other", "min_layer": 0}, {"metric": "x"}]}},
        {"emergence": {"metrics": [{"metric": "prefix_matching"}]}},
        {"emergence": None},
        {},
    ):
        _, runs = _conditions_of(telemetry=telemetry)
        assert runs["formation_score"].tolist() == pytest.approx(_SCORES)


def test_build_conditions_read_the_configured_metric_method_and_thresholds() -> None:
    table, runs = _conditions_of(conditions={"metric": "other", "method": "threshold"})
    assert list(table["formed"]) == ["yes", "yes"]
    assert list(table["s_star"]) == [1.0, 1.0]
    assert list(table["budget_steps"]) == [7777, 7777]
    # "other" is 0.5 at every step; B.lo s0 stopped at 200 and carries 0.5 to 400.
    assert runs["formation_score"].tolist() == pytest.approx([0.5] * 4)
    assert list(table["n_formed_at_0.5"]) == [2, 2]
    table, _ = _conditions_of(conditions={"metric": "prefix_matching", "method": "logistic"})
    assert list(table["formed"]) == ["no", "no"]
    assert list(table["budget_steps"]) == [9999, 9999]
    table, runs = _conditions_of(conditions={"thresholds": ["0.4", 0.55]})
    assert [c for c in table.columns if c.startswith("n_formed_at")] == [
        "n_formed_at_0.4",
        "n_formed_at_0.55",
    ]
    assert [c for c in runs.columns if c.startswith("formed_at")] == [
        "formed_at_0.4",
        "formed_at_0.55",
    ]
    assert list(table["n_formed_at_0.55"]) == [2, 0]
    assert runs["step_at_0.55"].tolist() == pytest.approx(
        [187.5, 200 + 200 * 0.35 / 0.6, _NAN, _NAN], nan_ok=True
    )


def test_build_conditions_derive_the_status_when_the_table_has_none() -> None:
    emergence = _emergence_table().drop(columns="status")
    emergence["censored"] = emergence["step"].isna()
    table, runs = _conditions_of(emergence=emergence)
    assert list(table["formed"]) == ["yes", "mixed"]
    assert list(runs["status"]) == ["emerged", "emerged", "censored", "emerged"]


def test_build_conditions_messages() -> None:
    with pytest.raises(ValueError) as error:
        _conditions_of(conditions={"metric": "nope"})
    assert str(error.value) == (
        "markov.conditions: no emergence rows for metric 'nope', method 'threshold'"
    )
    emergence = _emergence_table()
    emergence = emergence[~emergence["run_name"].isin([_RUNS[3], _RUNS[0]])]
    with pytest.raises(ValueError) as error:
        _conditions_of(emergence=emergence)
    assert str(error.value) == (
        "markov.conditions: runs missing from the emergence table: "
        "['m_B2_C8_A.hi_s0', 'm_B2_C8_B.lo_s1']"
    )
    samples = _score_samples()
    del samples[_RUNS[2]], samples[_RUNS[1]]
    samples["not_a_cell"] = samples[_RUNS[0]]
    with pytest.raises(ValueError) as error:
        _conditions_of(score_samples=samples)
    assert str(error.value) == (
        "markov.conditions: runs missing from the score samples: "
        "['m_B2_C8_A.hi_s1', 'm_B2_C8_B.lo_s0']"
    )


def test_build_conditions_ignore_score_samples_of_other_runs() -> None:
    samples = {**_score_samples(), "calibration_run_s0": _score_samples()[_RUNS[0]]}
    _, runs = _conditions_of(score_samples=samples)
    assert list(runs["run_name"]) == _RUNS


def test_realised_repetition_samples_512_sequences_of_the_given_width() -> None:
    process = _process("B", peak=2.0)
    level = {"frequency": "0.5", "reliability": 0.75}
    got = _realised_repetition(process, level, 9)
    frequency, reliability = _expected_realised(process, 0.5, 0.75)
    assert got == {"realised_frequency": frequency, "realised_reliability": reliability}


# --------------------------------------------------------------------------------------------
# judge
# --------------------------------------------------------------------------------------------
def _runs_table(high: str = "high", near: str = "near_frontier") -> pd.DataFrame:
    """Seeds 0-2 of five conditions (and two seeds of one no claim reads): at 0.4 every claim
    is supported; at 0.3 LD_CAT_uniform formed in seed 0 and at 0.5 LD_CAT_zipf did not form
    in seed 2, so claim 3 is undecided there."""
    T, F = True, False
    conditions = [  # process, level, marginal, LD, CAT, scores, formed at .3 / .4 / .5
        ("noLD_zipf", high, "zipf", F, F, [0.05, 0.06, 0.04], [F, F, F], [F, F, F], [F, F, F]),
        ("LD_uniform", high, "uniform", T, F, [0.5, 0.6, 0.55], [T, T, T], [T, T, T], [T, T, T]),
        ("LD_CAT_zipf", near, "zipf", T, T, [0.45, 0.5, 0.4], [T, T, T], [T, T, T], [T, T, F]),
        ("LD_zipf", near, "zipf", T, F, [0.1, 0.12, 0.08], [F, F, F], [F, F, F], [F, F, F]),
        ("LD_CAT_uniform", near, "uniform", T, T, [0.2, 0.18, 0.22], [T, F, F], [F, F, F],
         [F, F, F]),
        ("LD_uniform", "mid", "uniform", T, F, [0.3, 0.3], [T, T], [T, T], [T, T]),
    ]  # fmt: skip
    rows = [
        {
            "process": process,
            "level": level,
            "seed": seed,
            "marginal": marginal,
            "local_dependency": ld,
            "categorical": cat,
            "budget_steps": 400.0,
            "formation_score": scores[seed],
            "formed_at_0.3": at3[seed],
            "formed_at_0.4": at4[seed],
            "formed_at_0.5": at5[seed],
        }
        for process, level, marginal, ld, cat, scores, at3, at4, at5 in conditions
        for seed in range(len(scores))
    ]
    runs = pd.DataFrame(rows)
    for column in ("formed_at_0.3", "formed_at_0.4", "formed_at_0.5"):
        runs[column] = runs[column].astype("boolean")
    return runs


_FRONTIER_LEVEL = {
    "level": "near_frontier",
    "process": "LD_CAT_zipf",
    "frequency": 0.5,
    "reliability": 0.85,
    "source": "calibration sweep: ...",
}
_ALL_SUPPORTED = {
    "ld_necessary": "supported",
    "ld_sufficient_at_high_repetition": "supported",
    "cat_and_zipf_needed_near_frontier": "supported",
}
_BY_THRESHOLD = {
    "ld_necessary": {"0.3": "supported", "0.4": "supported", "0.5": "supported"},
    "ld_sufficient_at_high_repetition": {
        "0.3": "supported",
        "0.4": "supported",
        "0.5": "supported",
    },
    "cat_and_zipf_needed_near_frontier": {
        "0.3": "undecided",
        "0.4": "supported",
        "0.5": "undecided",
    },
}


def _robustness(claim: str, by_threshold: dict[str, str], decision: str) -> list[dict]:
    return [
        {
            "claim": claim,
            "threshold": float(t),
            "verdict": v,
            "decision": t == decision,
            "agrees": v == by_threshold[decision],
        }
        for t, v in by_threshold.items()
    ]


def test_judge_with_the_default_levels_thresholds_and_metric() -> None:
    runs = _runs_table()
    verdicts = judge(runs, _FRONTIER_LEVEL, {})
    assert list(verdicts) == [
        "claims",
        "paired_rule",
        "threshold_robustness",
        "budget_steps",
        "n_seeds",
        "near_frontier_level",
        "metric",
        "method",
    ]
    claims = verdicts["claims"]
    assert claims == judge_claims(runs)
    assert {name: v["verdict"] for name, v in claims.items()} == _ALL_SUPPORTED
    assert {name: v["threshold"] for name, v in claims.items()} == dict.fromkeys(claims, 0.4)
    assert {name: v["by_threshold"] for name, v in claims.items()} == _BY_THRESHOLD
    assert {name: v["agrees_across_thresholds"] for name, v in claims.items()} == {
        "ld_necessary": True,
        "ld_sufficient_at_high_repetition": True,
        "cat_and_zipf_needed_near_frontier": False,
    }
    # ld_necessary: T = LD_uniform (the only LD process at high) vs K = noLD_zipf, paired by
    # seed: d = (.45, .54, .51), mean .5, sd sqrt(.0042 / 2), t(.975, 2) = .95 / sqrt(.04875).
    (comparison,) = claims["ld_necessary"]["comparisons"]
    assert (comparison["treatment"], comparison["control"]) == ("LD_uniform@high", "noLD_zipf@high")
    assert [row["difference"] for row in comparison["seeds"]] == pytest.approx([0.45, 0.54, 0.51])
    half = 0.95 / math.sqrt(0.04875) * math.sqrt(0.0042 / 2) / math.sqrt(3)
    assert comparison["mean"] == pytest.approx(0.5)
    assert (comparison["ci_low"], comparison["ci_high"]) == pytest.approx((0.5 - half, 0.5 + half))
    assert verdicts["paired_rule"] == PAIRED_RULE
    assert verdicts["threshold_robustness"] == [
        row for name, by in _BY_THRESHOLD.items() for row in _robustness(name, by, "0.4")
    ]
    assert verdicts["budget_steps"] == 400 and type(verdicts["budget_steps"]) is int
    assert verdicts["n_seeds"] == [2, 3]
    assert [type(n) for n in verdicts["n_seeds"]] == [int, int]
    assert verdicts["near_frontier_level"] == _FRONTIER_LEVEL
    assert (verdicts["metric"], verdicts["method"]) == ("prefix_matching", "threshold")
    json.dumps(verdicts)  # verdicts.json


def test_judge_logs_the_verdicts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ih_kedro.pipelines.markov.report_nodes")
    judge(_runs_table(), _FRONTIER_LEVEL, {})
    messages = [r.getMessage() for r in caplog.records if r.name.endswith("markov.report_nodes")]
    assert messages == [f"markov verdicts: {_ALL_SUPPORTED}"]


def test_judge_reads_the_configured_levels_thresholds_and_metric() -> None:
    runs = _runs_table(high="hi", near="nf")
    conditions = {
        "high_level": "hi",
        "frontier_level": "nf",
        "thresholds": ["0.5"],
        "decision_threshold": "0.3",  # judged though not listed
        "level": 0.9,
        "floor": 0.1,
        "metric": "prefix_matching_by_parity",
        "method": "logistic",
    }
    verdicts = judge(runs, _FRONTIER_LEVEL, conditions)
    claims = verdicts["claims"]
    assert claims == judge_claims(
        runs,
        high_level="hi",
        frontier_level="nf",
        thresholds=(0.5,),
        decision_threshold=0.3,
        level=0.9,
        floor=0.1,
    )
    assert {name: v["verdict"] for name, v in claims.items()} == {
        **_ALL_SUPPORTED,
        "cat_and_zipf_needed_near_frontier": "undecided",
    }
    assert {name: v["by_threshold"] for name, v in claims.items()} == {
        name: {t: by[t] for t in ("0.3", "0.5")} for name, by in _BY_THRESHOLD.items()
    }
    assert claims["ld_necessary"]["comparisons"][0]["level"] == 0.9
    assert "floor 0.1" in claims["ld_sufficient_at_high_repetition"]["rule"]
    assert verdicts["threshold_robustness"] == [
        row
        for name, by in _BY_THRESHOLD.items()
        for row in _robustness(name, {t: by[t] for t in ("0.3", "0.5")}, "0.3")
    ]
    assert verdicts["metric"] == "prefix_matching_by_parity"
    assert verdicts["method"] == "logistic"
    with pytest.raises(ValueError) as error:
        judge(runs, _FRONTIER_LEVEL, {"frontier_level": "nf"})
    assert str(error.value) == (
        "markov.verdicts: level 'high' is not in the runs table (levels: ['hi', 'mid', 'nf'])"
    )
    with pytest.raises(ValueError, match="level 'near_frontier' is not in the runs table"):
        judge(runs, _FRONTIER_LEVEL, {"high_level": "hi"})


def test_judge_an_empty_table_has_no_budget() -> None:
    verdicts = judge(_runs_table().iloc[0:0], None, {})
    assert verdicts["budget_steps"] is None
    assert verdicts["n_seeds"] == []
    assert verdicts["near_frontier_level"] is None
    assert {name: v["verdict"] for name, v in verdicts["claims"].items()} == dict.fromkeys(
        _ALL_SUPPORTED, "undecided"
    )


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
def test_conditions_figure_plots_the_table() -> None:
    table = pd.DataFrame(
        {
            "condition": ["A@hi", "B@lo"],
            "process": ["A", "B"],
            "level": ["hi", "lo"],
            "formed": ["yes", "no"],
            "s_star": [150.0, _NAN],
            "ci_low": [90.0, _NAN],
            "ci_high": [260.0, _NAN],
        }
    )
    figure = conditions_figure(table)
    left, right = figure.axes
    assert [t.get_text() for t in left.texts] == ["yes\nS* 150 [90, 260]", "no"]
    assert [t.get_text() for t in right.get_yticklabels()] == ["A@hi"]


def test_processes_figure_plots_every_process() -> None:
    processes = {"b": _process("b", vocab=4), "a": _process("a", vocab=4, peak=1.0)}
    figure = processes_figure(processes)
    titles = [ax.get_title() for ax in figure.axes]
    assert titles[:2] == [
        "a\nH ratio 1.00, within 1.00, across 1.00",
        "b\nH ratio 1.00, within 1.00, across 1.00",
    ]
    stationary = figure.axes[2].get_lines()[1].get_ydata()
    np.testing.assert_allclose(stationary, [0.4, 0.2, 0.2, 0.2])


# --------------------------------------------------------------------------------------------
# log_markov_to_mlflow
# --------------------------------------------------------------------------------------------
_VERDICTS = {
    "claims": {
        "ld_necessary": {
            "verdict": "supported",
            "reason": "r",
            "agrees_across_thresholds": True,
        },
        "ld_sufficient_at_high_repetition": {
            "verdict": "contradicted",
            "reason": "r",
            "agrees_across_thresholds": False,
        },
    }
}
_LOGGED_TABLE = pd.DataFrame(
    {
        "condition": ["A@hi", "B@lo"],
        "formed_share": [1, 0.0],
        "s_star": [150.0, _NAN],
        "formation_score": [_NAN, 0.25],
    }
)
_VERDICT_TAGS = {
    "markov.ld_necessary": "supported",
    "markov.ld_sufficient_at_high_repetition": "contradicted",
}
_AGREEMENT_TAGS = {
    "markov.ld_necessary.agrees_across_thresholds": "True",
    "markov.ld_sufficient_at_high_repetition.agrees_across_thresholds": "False",
}
_EXPECTED_TAGS = {**_VERDICT_TAGS, **_AGREEMENT_TAGS}
_EXPECTED_METRICS = {  # NaN scores and S* are left out
    "markov.A.hi.formed_share": 1.0,
    "markov.A.hi.s_star": 150.0,
    "markov.B.lo.formed_share": 0.0,
    "markov.B.lo.formation_score": 0.25,
}


class _FakeMlflow:
    """Records the calls the node makes (a fast stand-in for the store; see the real-store
    tests below)."""

    def __init__(self, active: object | None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self._active = active

    def active_run(self) -> object | None:
        return self._active

    def start_run(self, **kwargs: Any) -> None:
        self.calls.append(("start_run", kwargs))
        self._active = "started"

    def set_tags(self, tags: dict[str, str]) -> None:
        self.calls.append(("set_tags", tags))

    def log_metrics(self, metrics: dict[str, float]) -> None:
        self.calls.append(("log_metrics", metrics))
        assert [type(v) for v in metrics.values()] == [float] * len(metrics)

    def end_run(self, **kwargs: Any) -> None:
        self.calls.append(("end_run", kwargs))
        self._active = None


def test_log_markov_to_mlflow_starts_and_ends_a_run_when_none_is_active(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeMlflow(active=None)
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    log_markov_to_mlflow(_VERDICTS, _LOGGED_TABLE)
    assert fake.calls == [
        ("start_run", {"run_name": "markov"}),
        ("set_tags", _VERDICT_TAGS),
        ("set_tags", _AGREEMENT_TAGS),
        ("log_metrics", _EXPECTED_METRICS),
        ("end_run", {}),
    ]


def test_log_markov_to_mlflow_logs_into_an_active_run(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMlflow(active="outer")
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    log_markov_to_mlflow(_VERDICTS, _LOGGED_TABLE)
    assert fake.calls == [
        ("set_tags", _VERDICT_TAGS),
        ("set_tags", _AGREEMENT_TAGS),
        ("log_metrics", _EXPECTED_METRICS),
    ]
    assert fake.active_run() == "outer"


def _markov_data(run_id: str) -> tuple[dict[str, str], dict[str, float], str]:
    run = MlflowClient().get_run(run_id)
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("markov.")}
    return tags, dict(run.data.metrics), run.info.run_name


def test_log_markov_to_mlflow_real_store_own_run() -> None:
    assert mlflow.active_run() is None
    log_markov_to_mlflow(_VERDICTS, _LOGGED_TABLE)
    assert mlflow.active_run() is None
    run = mlflow.last_active_run()
    assert run is not None
    assert _markov_data(run.info.run_id) == (_EXPECTED_TAGS, _EXPECTED_METRICS, "markov")
    assert run.info.status == "FINISHED"


def test_log_markov_to_mlflow_real_store_active_run() -> None:
    with mlflow.start_run(run_name="outer") as outer:
        log_markov_to_mlflow(_VERDICTS, _LOGGED_TABLE)
        active = mlflow.active_run()
        assert active is not None and active.info.run_id == outer.info.run_id
    assert _markov_data(outer.info.run_id) == (_EXPECTED_TAGS, _EXPECTED_METRICS, "outer")
