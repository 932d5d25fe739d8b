"""The packed token stream shared by data engineering (writer) and training (reader)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class PackedTokens:
    """A corpus tokenized and concatenated into one flat token array.

    Documents are joined with ``eos_token_id`` between them. ``tokens`` is usually a
    read-only ``np.memmap`` (1-D, ``uint16`` or ``uint32``), so a paper-scale corpus never
    sits in RAM. ``checksum`` is the SHA-256 of the raw token bytes.
    """

    tokens: np.ndarray  # (n_tokens,)
    vocab_size: int
    eos_token_id: int
    checksum: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def sequences(self, context_length: int) -> np.ndarray:
        """Non-overlapping fixed-length training sequences, a zero-copy view.

        Returns an array of shape (n_sequences, context_length + 1): inputs are
        ``[:, :-1]``, next-token targets ``[:, 1:]``. The tail that does not fill a
        sequence is dropped.
        """
        if context_length <= 0:
            raise ValueError(f"context_length must be positive, got {context_length}")
        width = context_length + 1
        n_sequences = len(self) // width
        if n_sequences == 0:
            raise ValueError(
                f"the packed corpus has {len(self)} tokens, fewer than one sequence of "
                f"context_length + 1 = {width}"
            )
        return self.tokens[: n_sequences * width].reshape(n_sequences, width)
