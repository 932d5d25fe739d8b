"""``MarkovProcessesDataset``: designed Markov processes, one ``.npz`` file per process."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ih_kedro.science.data.variants.markov_process import MarkovProcess


class MarkovProcessesDataset(AbstractDataset[Mapping[str, MarkovProcess], dict]):
    """A folder ``<path>/<name>.npz`` of :class:`~ih_kedro.science.data.variants.markov_process.MarkovProcess`.

    ``save`` takes ``name -> process`` and replaces the folder's ``.npz`` files (a process
    dropped from the design does not linger). ``load`` returns ``name -> process`` with each
    process' ``path`` set to its file, so training runs (possibly in other processes) receive
    only paths in their options and read the matrices themselves.
    """

    def __init__(self, path: str, metadata: dict[str, Any] | None = None) -> None:
        """
        Args:
            path: the folder of ``.npz`` files.
            metadata: Free-form (e.g. kedro-viz layer); unused by the dataset.
        """
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> dict[str, MarkovProcess]:
        files = sorted(self._path.glob("*.npz")) if self._path.is_dir() else []
        if not files:
            raise DatasetError(f"MarkovProcessesDataset: no processes in {self._path}")
        return {file.stem: MarkovProcess.load(file) for file in files}

    def save(self, data: Mapping[str, MarkovProcess]) -> None:
        if not isinstance(data, Mapping) or not all(
            isinstance(p, MarkovProcess) for p in data.values()
        ):
            raise DatasetError(
                f"MarkovProcessesDataset({self._path}): expected a mapping name -> MarkovProcess"
            )
        self._path.mkdir(parents=True, exist_ok=True)
        for stale in self._path.glob("*.npz"):
            if stale.stem not in data:
                stale.unlink()
        for name, process in data.items():
            process.save(self._path / f"{name}.npz")

    def _exists(self) -> bool:
        return self._path.is_dir() and any(self._path.glob("*.npz"))

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
