"""``BigramModelDataset``: a saved :class:`~ih_kedro.science.data.variants.bigram_model.BigramModel` (``.npz``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ih_kedro.science.data.variants.bigram_model import BigramModel


class BigramModelDataset(AbstractDataset[BigramModel, BigramModel]):
    """One bigram model in an ``.npz`` file.

    ``load`` returns the model with ``path`` set to the file's absolute path: training runs
    (possibly in other processes, e.g. Ray workers) receive that path in their variant options
    and read the model themselves, so no array travels inside a run config.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        """
        Args:
            filepath: the ``.npz`` file.
            metadata: Free-form (e.g. kedro-viz layer); unused by the dataset.
        """
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> BigramModel:
        if not self._filepath.is_file():
            raise DatasetError(f"BigramModelDataset: no model at {self._filepath}")
        model = BigramModel.load(self._filepath)
        return dataclasses.replace(model, path=str(self._filepath.resolve()))

    def save(self, data: BigramModel) -> None:
        if not isinstance(data, BigramModel):
            raise DatasetError(
                f"BigramModelDataset({self._filepath}): expected a BigramModel, got "
                f"{type(data).__name__}"
            )
        data.save(self._filepath)

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
