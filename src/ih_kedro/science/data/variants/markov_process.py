"""Designed Markov processes: transition matrices with a chosen marginal, local dependency and
categoriality (Experiment 3, ``markov``).

A process over ``V`` states is a row-stochastic matrix ``T`` (V, V), ``T[i, j] = P(x_t = j |
x_{t-1} = i)``. It is designed by gradient descent (Adam) on row logits ``T = softmax(Z)`` for
three properties, each measured on the result and checked against its target:

- **marginal**: the stationary distribution ``pi`` (``pi T = pi``, solved exactly with a linear
  system, so it is differentiable) should match a target ``q``: ``uniform``, ``gaussian`` (over
  the state index, centre ``V/2``, sd ``V/8``) or ``zipf`` (``q_r ∝ 1/r^s`` over ranks
  ``r = 1..V``; state 0 is the most frequent). Achieved: ``KL(q || pi)`` in nats.
- **local dependency (LD)**: how much the previous state tells about the next. The target is the
  entropy rate ``H(x_t | x_{t-1}) = -sum_i pi_i sum_j T_ij log T_ij`` as a fraction of the
  marginal's entropy ``H(q)`` (the ``entropy_ratio``; 1 = no information, lower = peakier rows).
  "No LD" is built directly, without optimisation: every row equals ``q`` (ratio exactly 1).
  Achieved: the ratio, the entropy rate in nats and the rows' mean peak ``sum_i pi_i max_j T_ij``.
- **categoriality (CAT)**: states are split into ``n_groups`` groups (round-robin by rank, so
  every group spans frequent and rare states); rows of states in one group should be alike
  (mean cosine similarity ``within``) and rows of different groups unlike (``across``).
  Achieved: both means, measured on every process (also those without a CAT target).

A target missed by more than its tolerance raises :class:`DesignTargetMissed`, whose message
names the target, the achieved value and the tolerance. Plain torch and NumPy (no Kedro), so a
notebook can design and inspect processes directly.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

MARGINALS = ("uniform", "gaussian", "zipf")
# Weight of the squared entropy-ratio and similarity errors against the KL term: large enough
# that competing targets (peaky rows vs similar rows) settle inside their tolerances.
_WEIGHT = 10.0


class DesignTargetMissed(ValueError):
    """A designed process misses one of its targets by more than the tolerance."""


@dataclass(frozen=True)
class MarkovSpec:
    """What a process should look like, and how hard to try.

    Attributes:
        name: short identifier (used in file and run names), ``[A-Za-z0-9_-]``.
        vocab_size: number of states ``V``.
        marginal: ``uniform`` | ``gaussian`` | ``zipf``.
        zipf_exponent: ``s`` of the Zipf marginal ``1/r^s``.
        entropy_ratio: target entropy rate / marginal entropy in (0, 1]; ``None`` = no local
            dependency (every row equals the marginal).
        n_groups: number of state groups for categoriality (measured on every process).
        within_similarity, across_similarity: CAT targets (mean cosine similarity of rows in
            the same / in different groups); both ``None`` = no categoriality target.
        seed: seeds the logits' initialisation.
        steps, learning_rate: Adam steps and step size on the logits.
        kl_tolerance: largest accepted ``KL(q || pi)`` (nats).
        entropy_tolerance: largest accepted ``|ratio - target|``.
        similarity_tolerance: largest accepted ``|within - target|`` and ``|across - target|``.
    """

    name: str
    vocab_size: int
    marginal: str = "uniform"
    zipf_exponent: float = 1.0
    entropy_ratio: float | None = None
    n_groups: int = 4
    within_similarity: float | None = None
    across_similarity: float | None = None
    seed: int = 0
    steps: int = 1500
    learning_rate: float = 0.05
    kl_tolerance: float = 0.01
    entropy_tolerance: float = 0.03
    similarity_tolerance: float = 0.05

    @property
    def local_dependency(self) -> bool:
        return self.entropy_ratio is not None

    @property
    def categorical(self) -> bool:
        return self.within_similarity is not None

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field when the spec cannot be designed at all.

        Targets that are well-formed but unreachable (e.g. an entropy ratio above 1, which no
        process has: conditioning never raises entropy) are left to the design, which then
        fails with :class:`DesignTargetMissed` and the achieved value.
        """
        where = f"markov.processes[{self.name!r}]"
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ValueError(f"{where}.name: must be non-empty [A-Za-z0-9_-], got {self.name!r}")
        if not isinstance(self.vocab_size, int | np.integer) or self.vocab_size < 2:
            raise ValueError(f"{where}.vocab_size: must be an integer >= 2, got {self.vocab_size}")
        if self.marginal not in MARGINALS:
            raise ValueError(
                f"{where}.marginal: unknown marginal {self.marginal!r}; choose one of {MARGINALS}"
            )
        if self.zipf_exponent <= 0:
            raise ValueError(f"{where}.zipf_exponent: must be positive, got {self.zipf_exponent}")
        if self.entropy_ratio is not None and self.entropy_ratio <= 0:
            raise ValueError(
                f"{where}.entropy_ratio: must be positive (or null for no local dependency), "
                f"got {self.entropy_ratio}"
            )
        if not 2 <= self.n_groups <= self.vocab_size // 2:
            raise ValueError(
                f"{where}.n_groups: need 2 <= n_groups <= vocab_size / 2 (two states per group), "
                f"got {self.n_groups} for vocab_size {self.vocab_size}"
            )
        if (self.within_similarity is None) != (self.across_similarity is None):
            raise ValueError(f"{where}.within_similarity / across_similarity: give both or neither")
        if self.categorical and not self.local_dependency:
            raise ValueError(
                f"{where}.within_similarity: categoriality needs local dependency "
                "(entropy_ratio): with every row equal to the marginal all rows are identical"
            )
        for key in ("steps",):
            if getattr(self, key) < 1:
                raise ValueError(f"{where}.{key}: must be >= 1")
        for key in ("learning_rate", "kl_tolerance", "entropy_tolerance", "similarity_tolerance"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{where}.{key}: must be positive, got {getattr(self, key)}")

    @classmethod
    def from_dict(cls, name: str, options: dict[str, Any]) -> MarkovSpec:
        """Build a spec from a parameters mapping; unknown keys raise naming the key."""
        known = {f for f in cls.__dataclass_fields__ if f != "name"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(
                f"markov.processes[{name!r}]: unknown option(s) {unknown}; known: {sorted(known)}"
            )
        return cls(name=name, **options)


@dataclass
class MarkovProcess:
    """A designed process: the matrix, its target and what it achieved."""

    spec: MarkovSpec
    transition: np.ndarray  # (V, V) float64, rows sum to 1
    stationary: np.ndarray  # (V,) float64
    target: np.ndarray  # (V,) float64, the target marginal q
    groups: np.ndarray  # (V,) int64 group of each state
    properties: dict[str, float] = field(default_factory=dict)
    token_ids: np.ndarray | None = None  # (V,) int64 token id of each state, once mapped
    path: str | None = None  # the file it was loaded from (not part of the process)

    @property
    def vocab_size(self) -> int:
        return int(self.transition.shape[0])

    def checksum(self) -> str:
        """SHA-256 of the transition matrix and the token ids (what training reads)."""
        digest = hashlib.sha256(np.ascontiguousarray(self.transition, dtype=np.float64).tobytes())
        token_ids = self.token_ids if self.token_ids is not None else np.arange(self.vocab_size)
        digest.update(np.ascontiguousarray(token_ids, dtype=np.int64).tobytes())
        return digest.hexdigest()[:16]

    def save(self, path: str | Path) -> Path:
        """Write the process to one ``.npz`` file (arrays + spec and properties as JSON)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        token_ids = self.token_ids if self.token_ids is not None else np.arange(self.vocab_size)
        with path.open("wb") as handle:
            np.savez(
                handle,
                transition=self.transition,
                stationary=self.stationary,
                target=self.target,
                groups=self.groups,
                token_ids=np.asarray(token_ids, dtype=np.int64),
                spec=np.array(json.dumps(asdict(self.spec))),
                properties=np.array(json.dumps(self.properties)),
            )
        return path

    @classmethod
    def load(cls, path: str | Path) -> MarkovProcess:
        """Read a process written by :meth:`save`; a missing file raises naming the path."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"markov process file not found: {path}")
        with np.load(path, allow_pickle=False) as data:
            spec = MarkovSpec(**json.loads(str(data["spec"])))
            return cls(
                spec=spec,
                transition=np.asarray(data["transition"], dtype=np.float64),
                stationary=np.asarray(data["stationary"], dtype=np.float64),
                target=np.asarray(data["target"], dtype=np.float64),
                groups=np.asarray(data["groups"], dtype=np.int64),
                properties=json.loads(str(data["properties"])),
                token_ids=np.asarray(data["token_ids"], dtype=np.int64),
                path=str(path.resolve()),
            )


def target_marginal(kind: str, vocab_size: int, zipf_exponent: float = 1.0) -> np.ndarray:
    """The target marginal ``q`` (V,): ``uniform``, ``gaussian`` or ``zipf`` (state 0 first)."""
    ranks = np.arange(vocab_size, dtype=np.float64)  # (V,)
    if kind == "uniform":
        weights = np.ones(vocab_size)
    elif kind == "gaussian":
        mean, sd = vocab_size / 2, vocab_size / 8
        weights = np.exp(-0.5 * ((ranks - mean) / sd) ** 2) + 1e-4  # floor keeps pi > 0 reachable
    elif kind == "zipf":
        weights = 1.0 / (ranks + 1.0) ** zipf_exponent
    else:
        raise ValueError(f"marginal: unknown marginal {kind!r}; choose one of {MARGINALS}")
    return weights / weights.sum()


def state_groups(vocab_size: int, n_groups: int) -> np.ndarray:
    """Group of each state, round-robin by rank (state ``i`` is in group ``i mod K``)."""
    return np.arange(vocab_size, dtype=np.int64) % n_groups  # (V,)


def stationary_distribution(transition: torch.Tensor) -> torch.Tensor:
    """The stationary distribution ``pi`` (V,) of an irreducible chain, by one linear solve.

    Solves ``(T^T - I) pi = 0`` with one equation replaced by ``sum(pi) = 1``; differentiable.
    """
    vocab = transition.shape[0]
    system = transition.T - torch.eye(vocab, dtype=transition.dtype)  # (V, V)
    system = torch.cat([system[:-1], torch.ones(1, vocab, dtype=transition.dtype)])  # (V, V)
    rhs = torch.zeros(vocab, dtype=transition.dtype)  # (V,)
    rhs[-1] = 1.0
    return torch.linalg.solve(system, rhs)  # (V,)


def entropy_rate(transition: torch.Tensor, stationary: torch.Tensor) -> torch.Tensor:
    """``H(x_t | x_{t-1}) = -sum_i pi_i sum_j T_ij log T_ij`` in nats."""
    row_entropy = -(transition * torch.log(transition.clamp_min(1e-300))).sum(dim=1)  # (V,)
    return (stationary * row_entropy).sum()


def group_similarities(
    transition: torch.Tensor, groups: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cosine similarity of rows in the same group (``within``) and in different groups
    (``across``), self-pairs excluded."""
    rows = torch.nn.functional.normalize(transition, dim=1)  # (V, V)
    cosine = rows @ rows.T  # (V, V)
    same = groups[:, None] == groups[None, :]  # (V, V)
    off_diagonal = ~torch.eye(len(groups), dtype=torch.bool)  # (V, V)
    within = cosine[same & off_diagonal].mean()
    across = cosine[~same].mean()
    return within, across


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def measure_process(
    transition: np.ndarray, target: np.ndarray, groups: np.ndarray
) -> dict[str, float]:
    """The achieved properties of ``transition`` (V, V).

    Returns ``kl_to_target`` (``KL(q || pi)``, nats), ``entropy_rate`` (nats),
    ``marginal_entropy`` (``H(pi)``), ``target_entropy`` (``H(q)``), ``entropy_ratio``
    (entropy rate / ``H(q)``), ``row_peak`` (``sum_i pi_i max_j T_ij``),
    ``within_similarity``, ``across_similarity`` and ``categoriality`` (within - across).
    """
    t = torch.as_tensor(transition, dtype=torch.float64)  # (V, V)
    pi = stationary_distribution(t)  # (V,)
    pi_np = pi.clamp_min(0).numpy()
    pi_np = pi_np / pi_np.sum()
    q = np.asarray(target, dtype=np.float64)
    rate = float(entropy_rate(t, pi))
    within, across = group_similarities(t, torch.as_tensor(groups))
    kl = float(np.sum(q * (np.log(q) - np.log(np.maximum(pi_np, 1e-300)))))
    return {
        "kl_to_target": kl,
        "entropy_rate": rate,
        "marginal_entropy": _entropy(pi_np),
        "target_entropy": _entropy(q),
        "entropy_ratio": rate / _entropy(q),
        "row_peak": float((pi_np * transition.max(axis=1)).sum()),
        "within_similarity": float(within),
        "across_similarity": float(across),
        "categoriality": float(within - across),
    }


def check_targets(spec: MarkovSpec, properties: dict[str, float]) -> None:
    """Raise :class:`DesignTargetMissed` naming every target missed beyond its tolerance."""
    missed = []
    if properties["kl_to_target"] > spec.kl_tolerance:
        missed.append(
            f"marginal {spec.marginal!r}: KL(target || stationary) = "
            f"{properties['kl_to_target']:.4f} nats > kl_tolerance {spec.kl_tolerance}"
        )
    ratio = spec.entropy_ratio if spec.local_dependency else 1.0
    if abs(properties["entropy_ratio"] - ratio) > spec.entropy_tolerance:
        missed.append(
            f"entropy_ratio: achieved {properties['entropy_ratio']:.4f}, target {ratio} "
            f"(tolerance {spec.entropy_tolerance})"
        )
    if spec.categorical:
        for key in ("within_similarity", "across_similarity"):
            goal = getattr(spec, key)
            if abs(properties[key] - goal) > spec.similarity_tolerance:
                missed.append(
                    f"{key}: achieved {properties[key]:.4f}, target {goal} "
                    f"(tolerance {spec.similarity_tolerance})"
                )
    if missed:
        raise DesignTargetMissed(
            f"markov process {spec.name!r} (V={spec.vocab_size}) misses its target(s): "
            + "; ".join(missed)
        )


def design_process(spec: MarkovSpec, *, check: bool = True) -> MarkovProcess:
    """Design a process for ``spec``; with ``check`` (default) raise when a target is missed.

    No local dependency: every row is the target marginal (exact, no optimisation). Otherwise
    Adam on the row logits ``Z`` (V, V) minimises

        KL(q || pi) + 10 (H_rate / H(q) - ratio)^2 + 10 [(within - w)^2 + (across - a)^2]

    (the bracket only with a CAT target), from ``Z = log q + N(0, 1)`` seeded by ``spec.seed``.
    """
    spec.validate()
    vocab = int(spec.vocab_size)
    q_np = target_marginal(spec.marginal, vocab, spec.zipf_exponent)  # (V,)
    groups_np = state_groups(vocab, spec.n_groups)  # (V,)
    if not spec.local_dependency:
        transition = np.tile(q_np, (vocab, 1))  # (V, V): the next state ignores the previous one
    else:
        transition = _optimise(spec, q_np, groups_np)
    properties = measure_process(transition, q_np, groups_np)
    stationary = stationary_distribution(torch.as_tensor(transition)).clamp_min(0).numpy()
    process = MarkovProcess(
        spec=spec,
        transition=transition,
        stationary=stationary / stationary.sum(),
        target=q_np,
        groups=groups_np,
        properties=properties,
    )
    logger.info(
        "markov process %s: KL %.4f, entropy ratio %.3f, within %.3f, across %.3f",
        spec.name,
        properties["kl_to_target"],
        properties["entropy_ratio"],
        properties["within_similarity"],
        properties["across_similarity"],
    )
    if check:
        check_targets(spec, properties)
    return process


def _optimise(spec: MarkovSpec, q_np: np.ndarray, groups_np: np.ndarray) -> np.ndarray:
    vocab = int(spec.vocab_size)
    generator = torch.Generator().manual_seed(int(spec.seed))
    q = torch.as_tensor(q_np, dtype=torch.float64)  # (V,)
    log_q = torch.log(q)  # (V,)
    groups = torch.as_tensor(groups_np)  # (V,)
    target_entropy = float(-(q * log_q).sum())
    noise = torch.randn(vocab, vocab, generator=generator, dtype=torch.float64)  # (V, V)
    logits = (log_q[None, :] + noise).requires_grad_(True)  # (V, V)
    optimizer = torch.optim.Adam([logits], lr=spec.learning_rate)
    # Small matrices: one thread is ~10x faster than two contending ones on a shared CPU.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(int(spec.steps)):
            transition = torch.softmax(logits, dim=1)  # (V, V)
            pi = stationary_distribution(transition)  # (V,)
            kl = (q * (log_q - torch.log(pi.clamp_min(1e-12)))).sum()
            ratio = entropy_rate(transition, pi) / target_entropy
            loss = kl + _WEIGHT * (ratio - spec.entropy_ratio) ** 2
            done = kl < spec.kl_tolerance / 2 and abs(ratio - spec.entropy_ratio) < (
                spec.entropy_tolerance / 2
            )
            if spec.categorical:
                within, across = group_similarities(transition, groups)
                loss = (
                    loss
                    + _WEIGHT * (within - spec.within_similarity) ** 2
                    + _WEIGHT * (across - spec.across_similarity) ** 2
                )
                done = done and max(
                    abs(within - spec.within_similarity), abs(across - spec.across_similarity)
                ) < (spec.similarity_tolerance / 2)
            if done:  # every target within half its tolerance: stop early
                break
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        transition = torch.softmax(logits, dim=1).numpy()  # (V, V)
    return transition / transition.sum(axis=1, keepdims=True)


def sample_chain(
    process: MarkovProcess, n_sequences: int, length: int, rng: np.random.Generator
) -> np.ndarray:
    """Sample ``n`` state sequences (n, length) from the chain started at ``pi`` (no
    repetition edits; the experiment's sequences come from the repetition generator)."""
    cumulative = np.cumsum(process.transition, axis=1)  # (V, V)
    cumulative[:, -1] = 1.0
    start = np.cumsum(process.stationary)  # (V,)
    start[-1] = 1.0
    states = np.empty((n_sequences, length), dtype=np.int64)  # (n, length)
    states[:, 0] = np.searchsorted(start, rng.random(n_sequences), side="right")
    for t in range(1, length):
        u = rng.random(n_sequences)  # (n,)
        rows = cumulative[states[:, t - 1]]  # (n, V)
        states[:, t] = (rows < u[:, None]).sum(axis=1)
    return states


__all__ = [
    "DesignTargetMissed",
    "MARGINALS",
    "MarkovProcess",
    "MarkovSpec",
    "check_targets",
    "design_process",
    "entropy_rate",
    "group_similarities",
    "measure_process",
    "sample_chain",
    "stationary_distribution",
    "state_groups",
    "target_marginal",
]
