"""Sharded exact + MinHash near deduplication on HF datatrove, with our ingestion accounting.

The corpus is split into ``tasks`` contiguous blocks of shard files (balanced by bytes); each
task runs as a datatrove task on a ``LocalPipelineExecutor`` (default), a
``RayPipelineExecutor`` or a ``SlurmPipelineExecutor``. Stages, each one datatrove executor
over a shared ``work_dir``:

1. **signatures** (``tasks`` tasks): :class:`PileShardReader` (our streaming reader,
   :func:`~ih_kedro.science.data.corpus.iter_pile_documents`, with its per-category accounting of
   bad records, written per task) → datatrove's ``ExactDedupSignature`` (the exact key: the
   BLAKE2b of :func:`~ih_kedro.science.data.dedup_keys.normalize_text`) → datatrove's
   ``MinhashDedupSignature`` over our word shingles
   (:func:`~ih_kedro.science.data.dedup_keys.shingle_hashes`), which also keeps each document's full
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
verification stage applies ``threshold``.

The executors and the task plan are in :mod:`ih_kedro.science.data.sharded.executor`, the
datatrove steps in :mod:`ih_kedro.science.data.sharded.steps`. No Kedro imports here.
"""

from __future__ import annotations

import json
import math
import os
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
from datatrove.pipeline.dedup.exact_dedup import ExactDedupConfig, ExactFindDedups
from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupBuckets, MinhashDedupFilter
from datatrove.utils.hashing import HashConfig

from ih_kedro.science.data.corpus import DocumentSelection, IngestionStats
from ih_kedro.science.data.sharded.executor import ExecutorSettings, run_stage, stage_executor
from ih_kedro.science.data.sharded.steps import (
    DOC_DTYPE,
    ExactSignatures,
    KeepMaskWriter,
    MinhashSignatures,
    PileShardReader,
    VerifiedMinhashCluster,
)

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
        merged.estimated_bad += s.get("bad_estimated", 0)
        merged.by_set.update(s["documents_by_set"])
        for category, examples in s["bad_examples"].items():
            room = 5 - len(merged.examples[category])
            merged.examples[category].extend(examples[: max(room, 0)])
    return {"stats": merged}


@dataclass
class _DedupRun:
    """One dedup run: its shard files, folder, tasks and executor, the LSH bands, and the wall
    time (``walls``) and unix time span (``spans``) of every stage run so far."""

    paths: list[Path]
    work: Path
    tasks: int
    settings: ExecutorSettings
    bands: int
    rows_per_band: int
    walls: dict[str, float] = field(default_factory=dict)
    spans: dict[str, list[float]] = field(default_factory=dict)

    def stage(self, name: str, pipeline: list, n: int) -> None:
        """Run one datatrove stage of ``n`` tasks (logs in ``work/logs/<name>``), timing it."""
        t0, start = time.perf_counter(), time.time()
        executor = stage_executor(self.settings, pipeline, n, self.work / "logs" / name, name)
        run_stage(executor, self.settings)
        self.walls[name] = round(time.perf_counter() - t0, 3)
        self.spans[name] = [start, time.time()]


@dataclass(frozen=True)
class _TaskDocuments:
    """The good documents of every task (``docs/<rank>.bin`` rows), addressed by ordinal."""

    paths: list[Path]
    offsets: np.ndarray  # (tasks + 1,) ordinal of each task's first document, then the total
    docs: list[np.ndarray]  # per task: (documents of the task,) DOC_DTYPE rows

    def ordinal(self, task: int, index: int) -> int:
        """The ordinal of document ``index`` of task ``task``."""
        return int(self.offsets[task] + index)

    def row(self, o: int) -> np.void:
        """The :data:`DOC_DTYPE` row of the document with ordinal ``o``."""
        task = int(np.searchsorted(self.offsets, o, side="right") - 1)
        return self.docs[task][o - self.offsets[task]]

    def doc_id(self, o: int) -> str:
        """``"<shard file name>:<line>"`` of the document with ordinal ``o``."""
        row = self.row(o)
        return f"{self.paths[int(row['file'])].name}:{int(row['line'])}"


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
    _check_dedup_options(max_examples, shingle_size, false_negative_weight)
    settings = executor or ExecutorSettings()
    settings.validate()
    bands, rows_per_band = lsh_bands(threshold, num_perm, false_negative_weight)
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("sharded_deduplicate: no shard files")
    tasks = settings.n_tasks
    run = _DedupRun(paths, _empty_folder(work_dir), tasks, settings, bands, rows_per_band)
    hash64 = HashConfig(precision=64, hash_fc="sha1")
    minhash_config = MinhashConfig(
        n_grams=shingle_size,
        num_buckets=bands,
        hashes_per_bucket=rows_per_band,
        seed=seed,
        hash_config=HashConfig(precision=32, hash_fc="sha1"),
    )
    exact_config = ExactDedupConfig(content_getter=_document_text, hash_config=hash64)
    _run_stages(run, minhash_config, exact_config, threshold, shingle_size, near)
    return _finalize(
        run,
        dict(num_perm=num_perm, threshold=threshold, shingle_size=shingle_size, seed=seed,
             false_negative_weight=false_negative_weight, near=near),
        max_examples, held_out_fraction, max_bad_fraction, max_bad_fraction_name,
    )  # fmt: skip


def _check_dedup_options(
    max_examples: int, shingle_size: int, false_negative_weight: float
) -> None:
    """Raise ``ValueError`` naming the ``data_engineering.dedup`` option that cannot work."""
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


def _empty_folder(work_dir: str | os.PathLike) -> Path:
    """``work_dir`` emptied (removed with its contents, then created); returns its path."""
    work = Path(work_dir)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return work


def _run_stages(
    run: _DedupRun,
    minhash_config: MinhashConfig,
    exact_config: ExactDedupConfig,
    threshold: float,
    shingle_size: int,
    near: bool,
) -> None:
    """Run the stages of the module doc over ``run.work``; without ``near``, no MinHash
    signatures and no buckets (the clustering stage then only writes the exact removals)."""
    work, paths, tasks = run.work, run.paths, run.tasks
    signature_steps: list = [
        PileShardReader(paths, str(work)),
        ExactSignatures(str(work / "exact_sigs"), exact_config),
    ]
    if near:
        signature_steps.append(MinhashSignatures(str(work / "sigs"), minhash_config, shingle_size))
    run.stage("signatures", signature_steps, tasks)
    if near:
        run.stage(
            "buckets",
            [MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=minhash_config)],
            run.bands,
        )
    run.stage(
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
    run.stage("clustering", [cluster], 1)
    run.stage(
        "filtering",
        [
            PileShardReader(paths, str(work), record=False),
            MinhashDedupFilter(str(work / "remove")),
            KeepMaskWriter(str(work)),
        ],
        tasks,
    )


def _finalize(
    run: _DedupRun,
    parameters: dict[str, Any],
    max_examples: int,
    held_out_fraction: float | None,
    max_bad_fraction: float | None,
    max_bad_fraction_name: str,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Merge the tasks' files into one ``keep`` mask by ordinal and the report (the return
    value of :func:`sharded_deduplicate`); check the counts agree."""
    work = run.work
    summaries = [
        json.loads((work / "ingest" / f"{r:05d}.json").read_text()) for r in range(run.tasks)
    ]
    stats = _merge_ingestion(summaries)["stats"]
    stats.check(max_bad_fraction, max_bad_fraction_name)
    counts = [s["documents"] for s in summaries]
    per_file = _documents_per_file(summaries, len(run.paths))
    keep, documents, (bytes_in, bytes_out, n_validation) = _merge_keep_masks(
        run, counts, held_out_fraction
    )
    n = int(documents.offsets[-1])
    removed_exact, exact_groups = _exact_groups(work, documents)
    clusters = _near_clusters(work, documents)
    n_near = int(sum(len(c) - 1 for c in clusters))
    if n - int(np.count_nonzero(keep)) != len(removed_exact) + n_near:
        raise RuntimeError("the filter removed a different number of documents than clustered")
    report: dict[str, Any] = {
        "documents_in": n,
        "documents_out": int(np.count_nonzero(keep)),
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "exact_duplicates": _exact_section(removed_exact, exact_groups, documents, max_examples),
        "near_duplicates": _near_section(clusters, n_near, documents, max_examples),
        "parameters": parameters,
        "ingestion": {**stats.as_dict(), "documents_per_file": per_file},
        "engine": _engine_section(run),
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


def _documents_per_file(summaries: list[dict[str, Any]], n_files: int) -> list[int]:
    """Good documents of every shard file (file order), from the tasks' ingestion summaries."""
    per_file = [0] * n_files
    for s in summaries:
        for f, c in s["documents_per_file"].items():
            per_file[int(f)] = int(c)
    return per_file


def _merge_keep_masks(
    run: _DedupRun, counts: list[int], held_out_fraction: float | None
) -> tuple[np.ndarray, _TaskDocuments, tuple[int, int, int]]:
    """The tasks' ``keep/<rank>.npy`` masks written as one memmap by ordinal (``keep.npy``).

    Returns ``(keep (n_documents,) bool, the tasks' documents, (bytes_in, bytes_out, kept
    validation documents))``; the last is 0 without ``held_out_fraction``.
    """
    work = run.work
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # (tasks + 1,)
    n = int(offsets[-1])
    keep = np.lib.format.open_memmap(work / "keep.npy", mode="w+", dtype=bool, shape=(n,))
    docs = [
        np.memmap(work / "docs" / f"{r:05d}.bin", dtype=DOC_DTYPE, mode="r")
        if counts[r]
        else np.zeros(0, dtype=DOC_DTYPE)
        for r in range(run.tasks)
    ]
    bytes_in = bytes_out = n_validation = 0
    for r in range(run.tasks):
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
    return keep, _TaskDocuments(run.paths, offsets, docs), (bytes_in, bytes_out, n_validation)


def _exact_groups(work: Path, documents: _TaskDocuments) -> tuple[list[int], dict[int, list[int]]]:
    """Exact groups: removed copies by key, kept copy = first ordinal with that key.

    Returns ``(removed ordinals sorted, {kept ordinal: its removed copies})``, the groups in
    the order of their first removed copy.
    """
    removed_exact: list[int] = []
    for path in sorted((work / "exact_dups").glob("*/*.c4_dup")):
        task = int(path.name.split(".")[0])
        removed_exact += [
            documents.ordinal(task, i) for i in np.fromfile(path, dtype="<u4").tolist()
        ]
    removed_exact.sort()
    kept_by_key: dict[int, int] = {}
    for path in sorted((work / "exact_dups").glob("*/*.c4_counts")):
        task = int(path.name.split(".")[0])
        for index, _ in np.fromfile(path, dtype="<u4").reshape(-1, 2).tolist():
            o = documents.ordinal(task, index)
            kept_by_key[int(documents.docs[task][index]["exact"])] = o
    exact_groups: dict[int, list[int]] = defaultdict(list)
    for o in removed_exact:
        key = int(documents.row(o)["exact"])
        exact_groups[kept_by_key[key]].append(o)
    return removed_exact, dict(sorted(exact_groups.items(), key=lambda kv: kv[1][0]))


def _near_clusters(work: Path, documents: _TaskDocuments) -> list[list[int]]:
    """Near-duplicate clusters (``remove/clusters.bin``) as sorted ordinal lists, sorted."""
    clusters_raw = np.fromfile(work / "remove" / "clusters.bin", dtype="<u4").reshape(-1, 4)
    members: dict[int, list[int]] = defaultdict(list)
    for t, i, rt, ri in clusters_raw.tolist():
        members[documents.ordinal(rt, ri)].append(documents.ordinal(t, i))
    return sorted(sorted(m) for m in members.values() if len(m) > 1)


def _exact_section(
    removed_exact: list[int],
    exact_groups: dict[int, list[int]],
    documents: _TaskDocuments,
    max_examples: int,
) -> dict[str, Any]:
    """The report's ``exact_duplicates``: counts and up to ``max_examples`` example groups."""
    doc_id = documents.doc_id
    return {
        "documents_removed": len(removed_exact),
        "groups": len(exact_groups),
        "examples": [
            {"kept": doc_id(k), "removed": [doc_id(i) for i in v[:max_examples]]}
            for k, v in list(exact_groups.items())[:max_examples]
        ],
    }


def _near_section(
    clusters: list[list[int]], n_near: int, documents: _TaskDocuments, max_examples: int
) -> dict[str, Any]:
    """The report's ``near_duplicates``: counts, cluster sizes and the largest clusters."""
    doc_id = documents.doc_id
    sizes = Counter(len(c) for c in clusters)
    by_size = sorted(clusters, key=lambda c: (-len(c), c[0]))
    return {
        "documents_removed": n_near,
        "clusters": len(clusters),
        "cluster_sizes": {str(s): int(c) for s, c in sorted(sizes.items())},
        "examples": [
            {"kept": doc_id(c[0]), "removed": [doc_id(i) for i in c[1 : max_examples + 1]]}
            for c in by_size[:max_examples]
        ],
    }


def _engine_section(run: _DedupRun) -> dict[str, Any]:
    """The report's ``engine``: executor, tasks, LSH bands and the stages' times."""
    return {
        "name": "datatrove",
        "executor": run.settings.kind,
        "tasks": run.tasks,
        "workers": run.settings.n_workers(run.tasks),
        "lsh_bands": run.bands,
        "lsh_rows": run.rows_per_band,
        "signature_values": run.bands * run.rows_per_band,
        "stage_wall_s": run.walls,
        "stage_unix_time": run.spans,
    }
