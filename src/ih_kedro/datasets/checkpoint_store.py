"""``CheckpointStoreDataset``: hands the training node a folder of runs to write into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ih_kedro.science.training.checkpoints import CheckpointStore


class CheckpointStoreDataset(AbstractDataset[Any, CheckpointStore]):
    """A folder of training runs (see ``CheckpointStore`` for the layout).

    ``load`` returns a :class:`~ih_kedro.science.training.checkpoints.CheckpointStore` handle, creating the
    folder if needed. Training writes checkpoints through that handle (resumable training is
    stateful), so there is nothing to ``save``: saving raises ``DatasetError``.
    """

    def __init__(self, path: str, metadata: dict[str, Any] | None = None) -> None:
        """
        Args:
            path: Root folder of the store.
            metadata: Free-form (e.g. kedro-viz layer); unused by the dataset.
        """
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> CheckpointStore:
        return CheckpointStore(self._path)

    def save(self, data: Any) -> None:
        raise DatasetError(
            f"CheckpointStoreDataset({self._path}) is read-only: training writes checkpoints "
            "through the CheckpointStore handle returned by load()"
        )

    def _exists(self) -> bool:
        return self._path.is_dir()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
