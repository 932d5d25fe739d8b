"""Sharded exact + MinHash near deduplication on HF datatrove, with our ingestion accounting.

The corpus is split into ``tasks`` contiguous blocks of shard files (balanced by bytes); each
task runs as a datatrove task on a ``LocalPipelineExecutor`` (default), a
``RayPipelineExecutor`` or a ``SlurmPipelineExecutor``. Stages, each one datatrove executor
over a shared ``work_dir``:

1. **signatures** (``tasks`` tasks): :class:`PileShardReader` (our streaming reader,
   :func:`~ih_kedro.science.data.corpus.iter_pile_documents`, with its per-category accounting of
   bad records, written per task) → datatrove's ``ExactDedupSignature`` (the exact key: the
   BLAKE2b of :func:`~ih_kedro.science.data.corpus.normalize_text`) → datatrove's
   ``MinhashDedupSignature`` over our word shingles
   (:func:`~ih_kedro.science.data.corpus.shingle_hashes`), which also keeps each document's full
   signature for verification.
2. **buckets** (``num_buckets`` tasks): datatrove's ``MinhashDedupBuckets`` (candidate pairs:
   documents equal on one band) and ``ExactFindDedups`` (1 task).
3. **clustering** (1 task): :class:`VerifiedMinhashCluster`: a candidate pair is a near
   duplicate when its estimated Jaccard (share of equal signature values) is ``>= threshold``
   (datatrove's own clustering takes every candidate pair); exact duplicates are left out
   (they have the very same signature as the document they duplicate); clusters are the
   connected components; the first document of a cluster (lowest ordinal) is kept, as in
   the in-memory path. Writes datatrove's ``.remove`` files (exact and near removals).
4. **filtering** (``tasks`` tasks): the reader again → datatrove's ``MinhashDedupFilter`` →
   :class:`KeepMaskWriter` (per-task ``keep`` mask).

Then :func:`sharded_deduplicate` merges the per-task counts into one report (the keys of the
retired in-memory dedup plus ``ingestion`` and ``engine``) and one ``keep`` mask by
ordinal. Because the blocks are contiguous, (task, index in task) sorts as the ordinal does:
"first occurrence" means the same thing for any number of tasks, and the results do not depend
on it.

Parameter mapping (datatrove bands differently from datasketch): datasketch's ``MinHashLSH``
picks ``b`` bands of ``r`` rows for a threshold and a false-negative weight and verifies
nothing; ours verified the candidates. Here :func:`lsh_bands` finds the same ``(b, r)`` (18 ×
7 for 128 permutations, threshold 0.7, weight 0.8), which become datatrove's ``num_buckets``
and ``hashes_per_bucket``; the signature has ``b * r`` values (126 of the 128 asked), and the
verification stage applies ``threshold``. No Kedro imports here.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from datatrove.data import Document as DatatroveDocument
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig,
    ExactDedupSignature,
    ExactFindDedups,
)
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.utils.hashing import HashConfig
from datatrove.utils.word_tokenizers import WordTokenizer

from ih_kedro.science.data.corpus import (
    DocumentSelection,
    IngestionStats,
    content_hash,
    held_out_score,
    iter_pile_documents,
    normalize_text,
    shingle_hashes,
)

logger = logging.getLogger(__name__)

#: One row per good document, per task, in task order (``docs/<rank>.bin``).
DOC_DTYPE = np.dtype(
    [("file", "<i4"), ("line", "<i4"), ("bytes", "<i8"), ("md5", "<f8"), ("exact", "<u8")]
)
EXECUTORS = ("local", "ray", "slurm")
_MAX_TASKS = 65_534  # exact dedup orders duplicates by priority = 65535 - rank (uint16)
_VERIFY_CHUNK = 200_000  # candidate pairs verified at once: 2 x 200k x 126 x 4 B = 200 MB


# --------------------------------------------------------------------------- parameters


@lru_cache(maxsize=64)
def lsh_bands(
    threshold: float, num_perm: int, false_negative_weight: float = 0.8
) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` minimising the weighted probability
    of false positives (``1 - false_negative_weight``) and false negatives below/above
    ``threshold``, as datasketch's ``MinHashLSH`` chooses them (18 × 7 for 0.7, 128, 0.8).
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"data_engineering.dedup.threshold: must be in (0, 1), got {threshold}")
    if num_perm <= 0:
        raise ValueError(f"data_engineering.dedup.num_perm: must be positive, got {num_perm}")
    fp_x = np.linspace(0.0, threshold, 2001)
    fn_x = np.linspace(threshold, 1.0, 2001)
    best, best_err = (1, 1), math.inf
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = np.trapezoid(1 - (1 - fp_x**r) ** b, fp_x)
            fn = np.trapezoid((1 - fn_x**r) ** b, fn_x)
            err = (1 - false_negative_weight) * fp + false_negative_weight * fn
            if err < best_err - 1e-12:
                best, best_err = (b, r), err
    return best


def default_tasks() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass
class ExecutorSettings:
    """Where the datatrove stages run.

    Attributes:
        kind: ``"local"`` (a process pool on this machine), ``"ray"`` (a running Ray cluster,
            ``ray.init`` address from ``RAY_ADDRESS``) or ``"slurm"`` (``sbatch`` job arrays;
            ``work_dir`` must be on a shared file system).
        tasks: Tasks of the per-shard stages (reading, signatures, filtering); ``None``: the
            CPU cores here (local) — set it for a cluster.
        workers: Tasks running at once; ``None``: ``tasks`` (local: at most the cores).
        options: Extra keyword arguments of the executor (Slurm: ``partition``, ``time``,
            ``cpus_per_task``, ``mem_per_cpu_gb``, ``venv_path``, ``sbatch_args``...;
            Ray: ``cpus_per_task``, ``mem_per_cpu_gb``...).
    """

    kind: str = "local"
    tasks: int | None = None
    workers: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> ExecutorSettings:
        """From ``data_engineering.executor``: ``kind``, ``tasks``, ``workers``, ``options``,
        and optional per-kind sections (``local:``, ``ray:``, ``slurm:``, each with ``tasks``,
        ``workers``, ``options``) whose values override the top-level ones for that kind, so
        one file names the cluster settings and ``--params data_engineering.executor.kind=slurm``
        switches to them."""
        p = dict(params or {})
        top = {"kind", "tasks", "workers", "options"}
        unknown = sorted(set(p) - top - set(EXECUTORS))
        if unknown:
            raise ValueError(
                f"data_engineering.executor: unknown keys {unknown}; expected some of "
                f"{sorted(top | set(EXECUTORS))}"
            )
        kind = str(p.get("kind", "local"))
        section = dict(p.get(kind) or {}) if kind in EXECUTORS else {}
        wrong = sorted(set(section) - {"tasks", "workers", "options"})
        if wrong:
            raise ValueError(
                f"data_engineering.executor.{kind}: unknown keys {wrong}; expected some of "
                "['options', 'tasks', 'workers']"
            )
        merged = {**{k: p.get(k) for k in ("tasks", "workers", "options")}, **section}
        settings = cls(
            kind=kind,
            tasks=None if merged.get("tasks") is None else int(merged["tasks"]),
            workers=None if merged.get("workers") is None else int(merged["workers"]),
            options=dict(merged.get("options") or {}),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(
                f"data_engineering.executor.kind: must be one of {EXECUTORS}, got {self.kind!r}"
            )
        for name in ("tasks", "workers"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= _MAX_TASKS:
                raise ValueError(
                    f"data_engineering.executor.{name}: must be in [1, {_MAX_TASKS}], got {value}"
                )
        if self.kind == "slurm":
            missing = [k for k in ("partition", "time") if k not in self.options]
            if missing:
                raise ValueError(
                    f"data_engineering.executor.options: the slurm executor needs {missing}"
                )

    @property
    def n_tasks(self) -> int:
        return self.tasks if self.tasks is not None else default_tasks()

    def n_workers(self, tasks: int) -> int:
        workers = self.workers if self.workers is not None else tasks
        if self.kind == "local":
            workers = min(workers, default_tasks())
        return max(1, min(workers, tasks))


def _executor(settings: ExecutorSettings, pipeline: list, tasks: int, logging_dir: Path, name: str):
    """A datatrove executor for one stage (never skips tasks: every run starts clean)."""
    common = {"tasks": tasks, "logging_dir": str(logging_dir), "skip_completed": False}
    workers = settings.n_workers(tasks)
    if settings.kind == "local":
        from datatrove.executor import LocalPipelineExecutor

        # fork: the workers inherit the imported modules (forkserver re-imports them, ~1.5 CPU s).
        options = {"start_method": "fork", **settings.options}
        return LocalPipelineExecutor(pipeline, workers=workers, **common, **options)
    if settings.kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "data_engineering.executor.kind=ray needs the 'ray' package installed"
            ) from exc
        from datatrove.executor import RayPipelineExecutor

        return RayPipelineExecutor(pipeline, workers=workers, **common, **settings.options)
    from datatrove.executor import SlurmPipelineExecutor

    options = {"job_name": f"ih_dedup_{name}", **settings.options}
    return SlurmPipelineExecutor(pipeline, workers=workers, **common, **options)


def _run_stage(executor, settings: ExecutorSettings) -> None:
    executor.run()
    if settings.kind == "slurm":  # sbatch returns at once: wait for every task to complete
        while incomplete := executor.get_incomplete_ranks(skip_completed=True):
            logger.info("waiting for %d slurm tasks of %s", len(incomplete), executor)
            time.sleep(30)


def plan_blocks(paths: Sequence[Path], tasks: int) -> list[tuple[int, int]]:
    """``tasks`` contiguous ``[start, end)`` ranges of ``paths`` with balanced total bytes.

    Contiguous (not round-robin), so task order is file order; a task may get no file.
    """
    sizes = np.array([max(1, Path(p).stat().st_size) for p in paths], dtype=np.float64)
    cum = np.concatenate([[0.0], np.cumsum(sizes)])
    total = cum[-1]
    bounds = [0]
    for t in range(1, tasks):
        bounds.append(max(bounds[-1], int(np.searchsorted(cum, total * t / tasks, "left"))))
    bounds.append(len(paths))
    return [(bounds[t], bounds[t + 1]) for t in range(tasks)]


@dataclass
class ShardedSelection(DocumentSelection):
    """A :class:`DocumentSelection` that also knows the good documents of each shard file
    (``documents_per_file``, in the stream's file order), so packing tasks can start at any
    file: ordinal = documents of the files before + position in the file."""

    documents_per_file: Sequence[int] = ()

    def with_split(self, split, held_out_fraction: float) -> ShardedSelection:
        return ShardedSelection(
            self.stream, self.keep, split, held_out_fraction, list(self.documents_per_file)
        )


# --------------------------------------------------------------------------- datatrove blocks

_WORD = re.compile(r"\w+")


class PileShardReader(PipelineStep):
    """A datatrove reader block over our streaming reader.

    Task ``rank`` reads its contiguous block of shard files (:func:`plan_blocks`) with
    :func:`iter_pile_documents`, so bad records are counted by category with file:line, and
    every valid document is kept (a truncated ``.zst`` shard yields its readable prefix).
    Documents carry ``metadata["index"]`` (position in the task) and ``metadata["exact"]``
    (the exact-dedup key). With ``record``, writes ``docs/<rank>.bin`` (:data:`DOC_DTYPE`
    rows) and ``ingest/<rank>.json`` (the task's :class:`IngestionStats`, documents per file).
    """

    type = "📖 - READER"
    name = "🗂 Pile shards (ih_kedro accounting)"

    def __init__(self, paths: Sequence[str | os.PathLike], work_dir: str, record: bool = True):
        super().__init__()
        self.paths = [str(p) for p in paths]
        self.work_dir = str(work_dir)
        self.record = record

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        start, end = plan_blocks([Path(p) for p in self.paths], world_size)[rank]
        files = self.paths[start:end]
        file_index = {f: start + i for i, f in enumerate(files)}
        stats = IngestionStats()
        per_file: Counter = Counter()
        work = Path(self.work_dir)
        rows = np.zeros(4096, dtype=DOC_DTYPE)
        n_rows = 0
        fh = None
        if self.record:
            (work / "docs").mkdir(parents=True, exist_ok=True)
            fh = (work / "docs" / f"{rank:05d}.bin").open("wb")
        try:
            for index, doc in enumerate(iter_pile_documents(files, stats)):
                f = file_index[doc.source]
                per_file[f] += 1
                key = int.from_bytes(content_hash(doc.text)[:8], "little") if self.record else 0
                if fh is not None:
                    text_bytes = len(doc.text.encode("utf-8"))
                    rows[n_rows] = (f, doc.line, text_bytes, held_out_score(doc.text), key)
                    n_rows += 1
                    if n_rows == len(rows):
                        fh.write(rows.tobytes())
                        n_rows = 0
                self.stat_update("documents")
                yield DatatroveDocument(
                    text=doc.text, id=doc.doc_id, metadata={"index": index, "exact": key}
                )
            if fh is not None:
                fh.write(rows[:n_rows].tobytes())
        finally:
            if fh is not None:
                fh.close()
        if self.record:
            summary = stats.as_dict()
            summary["documents_per_file"] = {str(k): v for k, v in sorted(per_file.items())}
            summary["file_range"] = [start, end]
            (work / "ingest").mkdir(parents=True, exist_ok=True)
            (work / "ingest" / f"{rank:05d}.json").write_text(json.dumps(summary))


class RegexWords(WordTokenizer):
    """``\\w+`` runs of :func:`normalize_text`: the words our shingles use (no spaCy/NLTK)."""

    def word_tokenize(self, text: str) -> list[str]:
        return _WORD.findall(normalize_text(text))

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


class ExactSignatures(ExactDedupSignature):
    """datatrove's exact stage 1 as a pass-through block, keyed by the first 8 bytes of our
    :func:`content_hash`. Priority ``65535 - rank``: among equal keys datatrove keeps the
    highest priority, then the lowest index, i.e. the first occurrence by ordinal."""

    def run(self, data, rank: int = 0, world_size: int = 1):
        signatures = []
        priority = 65_535 - rank
        for doc_idx, doc in enumerate(data):
            self.stat_update("total")
            signatures.append((doc.metadata["exact"], priority, doc_idx))
            yield doc
        self.save_hashes(rank, signatures)


class MinhashSignatures(MinhashDedupSignature):
    """datatrove's MinHash stage 1 over our word shingles (:func:`shingle_hashes`); also
    writes every document's full signature (``full/<rank>.sig``: ``b * r`` uint32 per
    document, in task order) for the verification in :class:`VerifiedMinhashCluster`."""

    def __init__(self, output_folder: str, config: MinhashConfig, shingle_size: int) -> None:
        super().__init__(output_folder, config, language=RegexWords("en"))
        self.shingle_size = shingle_size
        self._full = None

    def get_shingles(self, text: str) -> np.ndarray:
        hashes = shingle_hashes(text, self.shingle_size)  # (n_shingles,) uint32
        return hashes.astype(np.uint64).reshape(-1, 1)  # (n_shingles, 1)

    def get_signature(self, shingles: np.ndarray) -> list[list[int]]:
        sig = super().get_signature(shingles)  # b lists of r values
        if self._full is not None:
            self._full.write(np.asarray(sig, dtype="<u4").tobytes())  # (b, r)
        return sig

    def run(self, data, rank: int = 0, world_size: int = 1):
        with self.output_folder.open(f"full/{rank:05d}.sig", mode="wb") as fh:
            self._full = fh
            try:
                super().run(data, rank, world_size)
            finally:
                self._full = None


class VerifiedMinhashCluster(MinhashDedupCluster):
    """MinHash stage 3 with verification.

    Reads stage 2's candidate pairs; drops pairs with an exact duplicate (already removed by
    exact dedup, and its signature is its original's); keeps pairs whose share of equal
    signature values is ``>= threshold``; joins them (union-find; the lowest (task, index),
    i.e. the lowest ordinal, is the root and is kept); writes datatrove's ``<rank>.remove``
    files (exact and near removals, sorted) and ``clusters.bin`` (member task/index, root
    task/index; uint32). Memory grows with the duplicates, not with the corpus.
    """

    def __init__(
        self,
        input_folder: str,
        signature_folder: str,
        exact_folder: str,
        output_folder: str,
        config: MinhashConfig,
        threshold: float,
        n_tasks: int,
    ) -> None:
        super().__init__(input_folder, output_folder, config)
        self.signature_folder = str(signature_folder)
        self.exact_folder = str(exact_folder)
        self.threshold = threshold
        self.n_tasks = n_tasks

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if world_size != 1:
            raise ValueError("the clustering stage runs as one task")
        width = self.config.num_buckets * self.config.hashes_per_bucket
        sigs = {}
        for r in range(self.n_tasks):
            path = Path(self.signature_folder) / "full" / f"{r:05d}.sig"
            if path.is_file() and path.stat().st_size:
                sigs[r] = np.memmap(path, dtype="<u4", mode="r").reshape(-1, width)  # (n, b*r)
        exact_removed: dict[int, set[int]] = defaultdict(set)
        for path in Path(self.exact_folder).glob("*/*.c4_dup"):
            exact_removed[int(path.name.split(".")[0])].update(
                np.fromfile(path, dtype="<u4").tolist()
            )
        parent: dict[tuple[int, int], tuple[int, int]] = {}

        def find(x: tuple[int, int]) -> tuple[int, int]:
            root = x
            while parent.get(root, root) != root:
                root = parent[root]
            while parent.get(x, x) != root:
                parent[x], x = root, parent[x]
            return root

        checked = verified = 0
        with self.track_time():
            for path in sorted(Path(self.input_folder.path).glob("*.dups")):
                if not path.stat().st_size:
                    continue
                all_pairs = np.memmap(path, dtype="<u4", mode="r").reshape(-1, 4)  # (n_pairs, 4)
                for start in range(0, len(all_pairs), _VERIFY_CHUNK):
                    pairs = all_pairs[start : start + _VERIFY_CHUNK].astype(np.int64)  # (n, 4)
                    left = np.empty((len(pairs), width), dtype=np.uint32)  # (n, b*r)
                    right = np.empty_like(left)
                    for side, (f_col, d_col) in ((left, (0, 1)), (right, (2, 3))):
                        for f in np.unique(pairs[:, f_col]).tolist():
                            sel = pairs[:, f_col] == f
                            side[sel] = sigs[f][pairs[sel, d_col]]
                    similar = (left == right).mean(axis=1) >= self.threshold  # (n,)
                    checked += len(pairs)
                    verified += int(similar.sum())
                    for f1, d1, f2, d2 in pairs[similar].tolist():
                        ra, rb = find((f1, d1)), find((f2, d2))
                        if ra != rb:
                            parent.setdefault(ra, ra)
                            parent.setdefault(rb, rb)
                            parent[max(ra, rb)] = min(ra, rb)
            self.stat_update("candidates_checked", value=checked)
            self.stat_update("pairs_verified", value=verified)
            # Exact copies stay in the graph: stage 2 chains equal bands (a-b, b-c), so an exact
            # copy may be the only link; it has its original's signature, so it joins nothing
            # the original would not. Then they leave the clusters (counted as exact).
            components: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
            for node in parent:
                if node[1] not in exact_removed.get(node[0], ()):
                    components[find(node)].append(node)
            removed: dict[int, set[int]] = {t: set(v) for t, v in exact_removed.items()}
            rows = []
            for members in components.values():
                if len(members) < 2:
                    continue
                members.sort()
                root = members[0]  # the lowest (task, index): the lowest ordinal
                for node in members:
                    rows.append((*node, *root))
                    if node != root:
                        removed.setdefault(node[0], set()).add(node[1])
            rows.sort()
            out = Path(self.output_folder.path)
            out.mkdir(parents=True, exist_ok=True)
            for task, docs in removed.items():
                np.asarray(sorted(docs), dtype="<u4").tofile(out / f"{task:06d}.remove")
            np.asarray(rows, dtype="<u4").reshape(-1, 4).tofile(out / "clusters.bin")


class KeepMaskWriter(PipelineStep):
    """Last block of the filtering stage: ``keep/<rank>.npy``, one bool per document of the
    task (``True``: forwarded by the filter)."""

    type = "💽 - WRITER"
    name = "✅ keep mask"

    def __init__(self, work_dir: str) -> None:
        super().__init__()
        self.work_dir = str(work_dir)

    def run(self, data, rank: int = 0, world_size: int = 1):
        n_bytes = (Path(self.work_dir) / "docs" / f"{rank:05d}.bin").stat().st_size
        keep = np.zeros(n_bytes // DOC_DTYPE.itemsize, dtype=bool)
        for doc in data:
            keep[doc.metadata["index"]] = True
            self.stat_update("kept")
        (Path(self.work_dir) / "keep").mkdir(parents=True, exist_ok=True)
        np.save(Path(self.work_dir) / "keep" / f"{rank:05d}.npy", keep)
        yield from ()


# --------------------------------------------------------------------------- driver


def _document_text(doc: DatatroveDocument) -> str:
    return doc.text


def _merge_ingestion(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-task ingestion summaries (task order) merged as one sequential pass reports them."""
    merged = IngestionStats()
    for s in summaries:
        merged.files += s["files"]
        merged.documents += s["documents"]
        merged.text_bytes += s["text_bytes"]
        merged.bad.update({c: n for c, n in s["bad_by_category"].items() if n})
        merged.by_set.update(s["documents_by_set"])
        for category, examples in s["bad_examples"].items():
            room = 5 - len(merged.examples[category])
            merged.examples[category].extend(examples[: max(room, 0)])
    return {"stats": merged}


def _doc_ids(paths: Sequence[Path], rows: np.ndarray) -> list[str]:
    return [f"{paths[int(r['file'])].name}:{int(r['line'])}" for r in rows]


def sharded_deduplicate(
    paths: Sequence[str | os.PathLike],
    work_dir: str | os.PathLike,
    *,
    num_perm: int = 128,
    threshold: float = 0.7,
    shingle_size: int = 5,
    seed: int = 1,
    false_negative_weight: float = 0.8,
    near: bool = True,
    max_examples: int = 10,
    executor: ExecutorSettings | None = None,
    held_out_fraction: float | None = None,
    max_bad_fraction: float | None = None,
    max_bad_fraction_name: str = "max_bad_fraction",
) -> tuple[np.ndarray, dict[str, Any]]:
    """Exact then near deduplication of Pile-format shards on datatrove (see the module doc).

    Args:
        paths: Shard files, in stream order (as a ``DocumentStream`` reads them).
        work_dir: Folder for the stages' files (emptied first; on a shared file system for
            Slurm/Ray). The returned ``keep`` is a read-only memmap of ``work_dir/keep.npy``.
        num_perm, threshold, shingle_size, seed, false_negative_weight, near, max_examples:
            ``data_engineering.dedup``: signature size, Jaccard threshold of the verification,
            word n-gram size, permutation seed, weight of false negatives when choosing the
            bands (:func:`lsh_bands`), near dedup on/off, example ids per report section.
        executor: Where the stages run (default: local, one task per core).
        held_out_fraction: When set, the report has a ``split`` section (MD5 hash split).
        max_bad_fraction: Checked on the merged ingestion counts (raises ``BadInputError``
            naming ``max_bad_fraction_name``).

    Returns:
        ``(keep, report)``: ``keep`` is a bool array ``(n_documents,)`` by ordinal; ``report``
        has ``documents_in/out``, ``bytes_in/out``, ``exact_duplicates``, ``near_duplicates``
        (counts, cluster sizes, example ids), ``parameters``, ``ingestion``, ``engine``
        (executor, tasks, bands, stage wall times) and, with ``held_out_fraction``, ``split``.
    """
    if max_examples < 0:
        raise ValueError(f"data_engineering.dedup.max_examples: must be >= 0, got {max_examples}")
    if shingle_size <= 0:
        raise ValueError(
            f"data_engineering.dedup.shingle_size: must be positive, got {shingle_size}"
        )
    if not 0.0 < false_negative_weight < 1.0:
        raise ValueError(
            "data_engineering.dedup.false_negative_weight: must be in (0, 1), got "
            f"{false_negative_weight}"
        )
    settings = executor or ExecutorSettings()
    settings.validate()
    bands, rows_per_band = lsh_bands(threshold, num_perm, false_negative_weight)
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("sharded_deduplicate: no shard files")
    tasks = settings.n_tasks
    work = Path(work_dir)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    hash64 = HashConfig(precision=64, hash_fc="sha1")
    minhash_config = MinhashConfig(
        n_grams=shingle_size,
        num_buckets=bands,
        hashes_per_bucket=rows_per_band,
        seed=seed,
        hash_config=HashConfig(precision=32, hash_fc="sha1"),
    )
    exact_config = ExactDedupConfig(content_getter=_document_text, hash_config=hash64)
    logs = work / "logs"
    walls: dict[str, float] = {}
    spans: dict[str, list[float]] = {}

    def stage(name: str, pipeline: list, n: int) -> None:
        t0, start = time.perf_counter(), time.time()
        _run_stage(_executor(settings, pipeline, n, logs / name, name), settings)
        walls[name] = round(time.perf_counter() - t0, 3)
        spans[name] = [start, time.time()]

    signature_steps: list = [
        PileShardReader(paths, str(work)),
        ExactSignatures(str(work / "exact_sigs"), exact_config),
    ]
    if near:
        signature_steps.append(MinhashSignatures(str(work / "sigs"), minhash_config, shingle_size))
    stage("signatures", signature_steps, tasks)
    if near:
        stage(
            "buckets",
            [MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=minhash_config)],
            bands,
        )
    stage(
        "exact_find",
        [ExactFindDedups(str(work / "exact_sigs"), str(work / "exact_dups"), exact_config)],
        1,
    )
    if near:
        (work / "buckets").mkdir(exist_ok=True)
        cluster = VerifiedMinhashCluster(
            str(work / "buckets"),
            str(work / "sigs"),
            str(work / "exact_dups"),
            str(work / "remove"),
            minhash_config,
            threshold,
            tasks,
        )
    else:
        cluster = VerifiedMinhashCluster(
            str(work / "empty"), str(work / "sigs"), str(work / "exact_dups"),
            str(work / "remove"), minhash_config, threshold, tasks,
        )  # fmt: skip
        (work / "empty").mkdir()
    stage("clustering", [cluster], 1)
    stage(
        "filtering",
        [
            PileShardReader(paths, str(work), record=False),
            MinhashDedupFilter(str(work / "remove")),
            KeepMaskWriter(str(work)),
        ],
        tasks,
    )
    return _finalize(
        paths, work, tasks, settings, walls, spans, bands, rows_per_band,
        dict(num_perm=num_perm, threshold=threshold, shingle_size=shingle_size, seed=seed,
             false_negative_weight=false_negative_weight, near=near),
        max_examples, held_out_fraction, max_bad_fraction, max_bad_fraction_name,
    )  # fmt: skip


def _finalize(
    paths: list[Path],
    work: Path,
    tasks: int,
    settings: ExecutorSettings,
    walls: dict[str, float],
    spans: dict[str, list[float]],
    bands: int,
    rows_per_band: int,
    parameters: dict[str, Any],
    max_examples: int,
    held_out_fraction: float | None,
    max_bad_fraction: float | None,
    max_bad_fraction_name: str,
) -> tuple[np.ndarray, dict[str, Any]]:
    summaries = [json.loads((work / "ingest" / f"{r:05d}.json").read_text()) for r in range(tasks)]
    stats = _merge_ingestion(summaries)["stats"]
    stats.check(max_bad_fraction, max_bad_fraction_name)
    counts = [s["documents"] for s in summaries]
    per_file = [0] * len(paths)
    for s in summaries:
        for f, c in s["documents_per_file"].items():
            per_file[int(f)] = int(c)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # (tasks + 1,)
    n = int(offsets[-1])
    keep = np.lib.format.open_memmap(work / "keep.npy", mode="w+", dtype=bool, shape=(n,))
    docs = [
        np.memmap(work / "docs" / f"{r:05d}.bin", dtype=DOC_DTYPE, mode="r")
        if counts[r]
        else np.zeros(0, dtype=DOC_DTYPE)
        for r in range(tasks)
    ]
    bytes_in = bytes_out = n_validation = 0
    for r in range(tasks):
        part = np.load(work / "keep" / f"{r:05d}.npy")
        if len(part) != counts[r] or len(docs[r]) != counts[r]:
            raise RuntimeError(f"task {r}: {len(part)} filtered, {counts[r]} read documents")
        keep[offsets[r] : offsets[r + 1]] = part
        b = docs[r]["bytes"]
        bytes_in += int(b.sum())
        bytes_out += int(b[part].sum())
        if held_out_fraction is not None:
            n_validation += int(np.count_nonzero(part & (docs[r]["md5"] < held_out_fraction)))
    keep.flush()

    def ordinal(task: int, index: int) -> int:
        return int(offsets[task] + index)

    def doc_id(o: int) -> str:
        task = int(np.searchsorted(offsets, o, side="right") - 1)
        row = docs[task][o - offsets[task]]
        return f"{paths[int(row['file'])].name}:{int(row['line'])}"

    # Exact groups: removed copies by key, kept copy = first ordinal with that key.
    removed_exact: list[int] = []
    for path in sorted((work / "exact_dups").glob("*/*.c4_dup")):
        task = int(path.name.split(".")[0])
        removed_exact += [ordinal(task, i) for i in np.fromfile(path, dtype="<u4").tolist()]
    removed_exact.sort()
    kept_by_key: dict[int, int] = {}
    for path in sorted((work / "exact_dups").glob("*/*.c4_counts")):
        task = int(path.name.split(".")[0])
        for index, _ in np.fromfile(path, dtype="<u4").reshape(-1, 2).tolist():
            o = ordinal(task, index)
            kept_by_key[int(docs[task][index]["exact"])] = o
    exact_groups: dict[int, list[int]] = defaultdict(list)
    for o in removed_exact:
        task = int(np.searchsorted(offsets, o, side="right") - 1)
        key = int(docs[task][o - offsets[task]]["exact"])
        exact_groups[kept_by_key[key]].append(o)
    exact_groups = dict(sorted(exact_groups.items(), key=lambda kv: kv[1][0]))

    clusters_raw = np.fromfile(work / "remove" / "clusters.bin", dtype="<u4").reshape(-1, 4)
    members: dict[int, list[int]] = defaultdict(list)
    for t, i, rt, ri in clusters_raw.tolist():
        members[ordinal(rt, ri)].append(ordinal(t, i))
    clusters = sorted(sorted(m) for m in members.values() if len(m) > 1)
    sizes = Counter(len(c) for c in clusters)
    by_size = sorted(clusters, key=lambda c: (-len(c), c[0]))
    n_near = int(sum(len(c) - 1 for c in clusters))
    if n - int(np.count_nonzero(keep)) != len(removed_exact) + n_near:
        raise RuntimeError("the filter removed a different number of documents than clustered")
    report: dict[str, Any] = {
        "documents_in": n,
        "documents_out": int(np.count_nonzero(keep)),
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "exact_duplicates": {
            "documents_removed": len(removed_exact),
            "groups": len(exact_groups),
            "examples": [
                {"kept": doc_id(k), "removed": [doc_id(i) for i in v[:max_examples]]}
                for k, v in list(exact_groups.items())[:max_examples]
            ],
        },
        "near_duplicates": {
            "documents_removed": n_near,
            "clusters": len(clusters),
            "cluster_sizes": {str(s): int(c) for s, c in sorted(sizes.items())},
            "examples": [
                {"kept": doc_id(c[0]), "removed": [doc_id(i) for i in c[1 : max_examples + 1]]}
                for c in by_size[:max_examples]
            ],
        },
        "parameters": parameters,
        "ingestion": {**stats.as_dict(), "documents_per_file": per_file},
        "engine": {
            "name": "datatrove",
            "executor": settings.kind,
            "tasks": tasks,
            "workers": settings.n_workers(tasks),
            "lsh_bands": bands,
            "lsh_rows": rows_per_band,
            "signature_values": bands * rows_per_band,
            "stage_wall_s": walls,
            "stage_unix_time": spans,
        },
    }
    if held_out_fraction is not None:
        report["split"] = {
            "method": "md5(text) < held_out_fraction",
            "held_out_fraction": held_out_fraction,
            "train_documents": report["documents_out"] - n_validation,
            "validation_documents": n_validation,
        }
    del keep
    return np.load(work / "keep.npy", mmap_mode="r"), report
