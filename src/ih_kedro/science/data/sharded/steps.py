"""The datatrove steps of sharded deduplication (stages: ih_kedro.science.data.sharded.dedup).

:class:`PileShardReader` reads a task's block of shard files with our ingestion accounting;
:class:`ExactSignatures` and :class:`MinhashSignatures` write the exact keys and MinHash
signatures over our word shingles (:class:`RegexWords`); :class:`VerifiedMinhashCluster`
verifies the candidate pairs and clusters them; :class:`KeepMaskWriter` writes each task's
``keep`` mask. No Kedro imports here.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from datatrove.data import Document as DatatroveDocument
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.exact_dedup import ExactDedupSignature
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupCluster,
    MinhashDedupSignature,
)
from datatrove.utils.word_tokenizers import WordTokenizer

from ih_kedro.science.data.corpus import IngestionStats, iter_pile_documents
from ih_kedro.science.data.dedup_keys import content_hash, normalize_text, shingle_hashes
from ih_kedro.science.data.sharded.executor import plan_blocks
from ih_kedro.science.data.split import held_out_score

#: One row per good document, per task, in task order (``docs/<rank>.bin``).
DOC_DTYPE = np.dtype(
    [("file", "<i4"), ("line", "<i4"), ("bytes", "<i8"), ("md5", "<f8"), ("exact", "<u8")]
)
_VERIFY_CHUNK = 200_000  # candidate pairs verified at once: 2 x 200k x 126 x 4 B = 200 MB

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
