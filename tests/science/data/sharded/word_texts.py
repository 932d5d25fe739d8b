"""Random texts over a small word list, shared by the sharded dedup and steps tests."""

from __future__ import annotations

import random

WORDS = (
    "river stone light garden window harbor silver market winter engine paper forest "
    "candle bridge mirror village thunder basket orchard lantern meadow copper falcon "
    "signal ladder marble canyon velvet compass glacier tunnel shadow beacon harvest"
).split()


def random_text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))
