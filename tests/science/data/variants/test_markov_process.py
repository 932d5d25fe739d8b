"""The Markov-process designer hits its targets on small vocabularies and fails loudly."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.variants.markov_process import (
    DesignTargetMissed,
    MarkovProcess,
    MarkovSpec,
    design_process,
    sample_chain,
    state_groups,
    target_marginal,
)


def _power_stationary(transition: np.ndarray) -> np.ndarray:
    """An independent reference: power iteration from the uniform distribution."""
    pi = np.full(transition.shape[0], 1.0 / transition.shape[0])
    for _ in range(5000):
        pi = pi @ transition
    return pi / pi.sum()


def _cosine_means(transition: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    rows = transition / np.linalg.norm(transition, axis=1, keepdims=True)
    cosine = rows @ rows.T
    within, across = [], []
    for i in range(len(groups)):
        for j in range(len(groups)):
            if i == j:
                continue
            (within if groups[i] == groups[j] else across).append(cosine[i, j])
    return float(np.mean(within)), float(np.mean(across))


def test_target_marginals_have_known_values():
    zipf = target_marginal("zipf", 4, zipf_exponent=1.0)
    harmonic = 1 + 1 / 2 + 1 / 3 + 1 / 4
    np.testing.assert_allclose(
        zipf, [1 / harmonic, 0.5 / harmonic, 1 / 3 / harmonic, 0.25 / harmonic]
    )
    np.testing.assert_allclose(target_marginal("uniform", 5), np.full(5, 0.2))
    gaussian = target_marginal("gaussian", 16)
    assert int(np.argmax(gaussian)) == 8 and gaussian[8] > 10 * gaussian[0]
    np.testing.assert_array_equal(state_groups(6, 3), [0, 1, 2, 0, 1, 2])


def test_no_local_dependency_rows_equal_the_marginal():
    process = design_process(MarkovSpec(name="nold", vocab_size=8, marginal="zipf"))
    q = target_marginal("zipf", 8)
    np.testing.assert_allclose(process.transition, np.tile(q, (8, 1)))
    assert process.properties["entropy_ratio"] == pytest.approx(1.0, abs=1e-9)
    assert process.properties["kl_to_target"] == pytest.approx(0.0, abs=1e-9)
    # identical rows: every cosine similarity is 1
    assert process.properties["within_similarity"] == pytest.approx(1.0)
    assert process.properties["across_similarity"] == pytest.approx(1.0)


@pytest.mark.parametrize("marginal", ["uniform", "gaussian", "zipf"])
def test_design_hits_marginal_and_entropy_rate_targets(marginal):
    spec = MarkovSpec(name=f"ld_{marginal}", vocab_size=16, marginal=marginal, entropy_ratio=0.5)
    process = design_process(spec)
    # Re-measure independently of the designer's own measurement.
    pi = _power_stationary(process.transition)
    q = target_marginal(marginal, 16)
    kl = float(np.sum(q * np.log(q / pi)))
    assert kl <= spec.kl_tolerance
    rows_entropy = -(process.transition * np.log(process.transition)).sum(axis=1)
    ratio = float(pi @ rows_entropy) / float(-(q * np.log(q)).sum())
    assert ratio == pytest.approx(0.5, abs=spec.entropy_tolerance)
    assert process.properties["entropy_ratio"] == pytest.approx(ratio, abs=1e-6)
    np.testing.assert_allclose(process.transition.sum(axis=1), 1.0)


def test_design_hits_categoriality_targets():
    spec = MarkovSpec(
        name="cat",
        vocab_size=16,
        marginal="zipf",
        entropy_ratio=0.5,
        n_groups=4,
        within_similarity=0.5,
        across_similarity=0.1,
    )
    process = design_process(spec)
    within, across = _cosine_means(process.transition, state_groups(16, 4))
    assert within == pytest.approx(0.5, abs=spec.similarity_tolerance)
    assert across == pytest.approx(0.1, abs=spec.similarity_tolerance)
    assert process.properties["categoriality"] == pytest.approx(within - across, abs=1e-6)
    # without the CAT target the same process has no group structure to speak of
    plain = design_process(
        MarkovSpec(name="plain", vocab_size=16, marginal="zipf", entropy_ratio=0.5)
    )
    assert plain.properties["categoriality"] < 0.1


def test_impossible_entropy_ratio_fails_naming_the_target():
    # Conditioning never raises entropy: the entropy rate cannot exceed H(marginal).
    spec = MarkovSpec(name="hot", vocab_size=8, marginal="uniform", entropy_ratio=1.3, steps=200)
    with pytest.raises(
        DesignTargetMissed, match=r"'hot'.*entropy_ratio: achieved 1\.0000, target 1\.3"
    ):
        design_process(spec)
    # check=False returns the process with what it achieved
    process = design_process(spec, check=False)
    assert process.properties["entropy_ratio"] == pytest.approx(1.0, abs=1e-3)


def test_impossible_kl_tolerance_fails_naming_the_marginal():
    spec = MarkovSpec(
        name="tight", vocab_size=8, marginal="zipf", entropy_ratio=0.2, steps=5, kl_tolerance=1e-12
    )
    with pytest.raises(DesignTargetMissed, match=r"marginal 'zipf': KL"):
        design_process(spec)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"marginal": "pareto"}, r"\.marginal: unknown marginal 'pareto'"),
        ({"within_similarity": 0.5, "across_similarity": 0.1}, r"needs local dependency"),
        ({"entropy_ratio": 0.5, "within_similarity": 0.5}, r"give both or neither"),
        ({"n_groups": 9}, r"\.n_groups"),
        ({"entropy_ratio": -0.1}, r"\.entropy_ratio: must be positive"),
    ],
)
def test_malformed_specs_fail_before_design(options, message):
    with pytest.raises(ValueError, match=message):
        design_process(MarkovSpec(name="bad", vocab_size=16, **options))


def test_unknown_option_is_named():
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['entropy'\]"):
        MarkovSpec.from_dict("x", {"vocab_size": 8, "entropy": 0.5})


def test_save_load_round_trip_and_sampling(tmp_path):
    process = design_process(
        MarkovSpec(name="rt", vocab_size=8, marginal="zipf", entropy_ratio=0.5)
    )
    process.token_ids = np.arange(100, 108)
    loaded = MarkovProcess.load(process.save(tmp_path / "rt.npz"))
    np.testing.assert_array_equal(loaded.transition, process.transition)
    np.testing.assert_array_equal(loaded.token_ids, np.arange(100, 108))
    assert loaded.spec == process.spec
    assert loaded.properties == process.properties
    states = sample_chain(loaded, 2000, 50, np.random.default_rng(0))  # (2000, 50)
    frequencies = np.bincount(states.reshape(-1), minlength=8) / states.size
    np.testing.assert_allclose(frequencies, loaded.stationary, atol=0.01)  # 100k draws
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        MarkovProcess.load(tmp_path / "missing.npz")
