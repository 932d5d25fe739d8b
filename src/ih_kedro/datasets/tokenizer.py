"""``TokenizerDataset``: a HF ``tokenizers`` ``tokenizer.json`` file."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset
from tokenizers import Tokenizer

from ih_kedro.science.data.tokenization import load_tokenizer


class TokenizerDataset(AbstractDataset[Tokenizer, Tokenizer]):
    """A ``tokenizer.json`` file; load and save a ``tokenizers.Tokenizer``.

    Saving writes a temporary file and renames it, so an earlier tokenizer survives a
    failed save.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> Tokenizer:
        return load_tokenizer(self._filepath)

    def save(self, data: Tokenizer) -> None:
        self._filepath.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._filepath.with_name(f".{self._filepath.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            data.save(str(tmp))
            os.replace(tmp, self._filepath)
        finally:
            tmp.unlink(missing_ok=True)

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
