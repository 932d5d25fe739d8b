"""In-context copy accuracy: which positions are scored, against hand-counted answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from ih_kedro.science.evaluation.in_context_copy import copy_accuracy, copy_probes


class _NextIsPlusOne(nn.Module):
    """Predicts token ``t + 1`` after token ``t`` (vocabulary 10, wrapping): a bigram rule with no
    in-context memory, so the first and second copy are scored alike."""

    def __init__(self) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1))  # a parameter, for the device lookup

    def forward(self, tokens: torch.Tensor):  # noqa: ANN201 - an HF-like output object
        logits = torch.nn.functional.one_hot((tokens + 1) % 10, 10).float()  # (B, T, 10)
        return type("Output", (), {"logits": logits})()


class _CopyFromEarlier(nn.Module):
    """Predicts the token that followed the current token's most recent earlier occurrence
    (an ideal induction rule), else token 0."""

    def __init__(self) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1))

    def forward(self, tokens: torch.Tensor):  # noqa: ANN201
        batch, length = tokens.shape
        predicted = torch.zeros(batch, length, dtype=torch.long)
        for b in range(batch):
            for t in range(length):
                earlier = [i for i in range(t) if tokens[b, i] == tokens[b, t]]
                if earlier:
                    predicted[b, t] = tokens[b, earlier[-1] + 1]
        return type("Output", (), {"logits": torch.nn.functional.one_hot(predicted, 10).float()})()


def test_copy_probes_repeat_the_first_tokens() -> None:
    sequences = np.array([[5, 6, 7, 8, 9], [1, 2, 3, 4, 5]])
    assert copy_probes(sequences, 3).tolist() == [[5, 6, 7, 5, 6, 7], [1, 2, 3, 1, 2, 3]]


def test_scored_positions_are_the_targets_x1_to_xL_minus_1_of_each_copy() -> None:
    # x = 2 3 7 8: the +1 rule gets x[1] = 3 (after 2) and x[3] = 8 (after 7), misses x[2] = 7.
    probes = copy_probes(np.array([[2, 3, 7, 8], [4, 5, 6, 7]]), 4)
    result = copy_accuracy(_NextIsPlusOne(), probes, batch_size=1)
    assert result["copy_first"].tolist() == pytest.approx([2 / 3, 1.0])
    # The second copy's first token (after x[L-1]) is not scored; x[1..3] are, as in the first.
    assert result["copy"].tolist() == pytest.approx([2 / 3, 1.0])


def test_an_induction_rule_copies_the_second_copy_only() -> None:
    probes = copy_probes(np.array([[2, 3, 7, 8, 1], [4, 5, 6, 7, 9]]), 5)
    result = copy_accuracy(_CopyFromEarlier(), probes)
    assert result["copy"].tolist() == [1.0, 1.0]
    assert result["copy_first"].tolist() == [0.0, 0.0]  # distinct tokens: nothing to copy


@pytest.mark.parametrize(
    ("length", "message"), [(1, "length must be in"), (6, "length must be in")]
)
def test_impossible_lengths_fail_with_the_range(length, message) -> None:
    with pytest.raises(ValueError, match=message):
        copy_probes(np.zeros((2, 5), dtype=int), length)
    with pytest.raises(ValueError, match="2L"):
        copy_accuracy(_NextIsPlusOne(), torch.zeros(2, 3, dtype=torch.long))
