"""Evaluations cached beside the checkpoint they evaluate.

A checkpoint folder is written once (atomically) and never changed, so an evaluation of it is a
pure function of the checkpoint and the evaluation's inputs. :func:`fingerprint` hashes those
inputs (the evaluation set's arrays and the options); :func:`cached` stores the result in the
checkpoint's folder under that hash and returns it on the next call with the same inputs. An
adaptive look (``python -m ih_kedro.adaptive_seeds``) re-runs the evaluation node over every
run: with the cache it evaluates only the new runs' checkpoints.

The files are pickles written by this module into the project's own data folder, read back
only by it; a file that cannot be read is recomputed and rewritten.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

logger = logging.getLogger(__name__)

CACHE_PREFIX = "evaluation-"
"""Cache files are ``<checkpoint>/evaluation-<hash>.pkl``."""

T = TypeVar("T")


def _feed(digest: Any, value: Any) -> None:
    """Feed ``value`` into ``digest``: arrays by dtype, shape and bytes; containers in order
    (mappings by sorted key); dataclasses by field; other values by ``repr``."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        digest.update(f"array:{array.dtype}:{array.shape}:".encode())
        digest.update(array.tobytes())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        digest.update(f"dataclass:{type(value).__name__}:".encode())
        for field in dataclasses.fields(value):
            digest.update(f"{field.name}=".encode())
            _feed(digest, getattr(value, field.name))
    elif isinstance(value, Mapping):
        digest.update(f"mapping:{len(value)}:".encode())
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(f"sequence:{len(value)}:".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(f"value:{value!r};".encode())


def fingerprint(*parts: Any) -> str:
    """A hex SHA-256 of ``parts`` (arrays, tensors, dataclasses, mappings, sequences, scalars):
    equal inputs give equal fingerprints in any process."""
    digest = hashlib.sha256()
    for part in parts:
        _feed(digest, part)
    return digest.hexdigest()


def _identity(checkpoint: Path) -> list[Any]:
    """The checkpoint's files with their sizes and modification times: a checkpoint rewritten
    under the same name (a run trained again from scratch) gets other cache keys."""
    return sorted(
        (entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
        for entry in checkpoint.iterdir()
        if entry.is_file() and not entry.name.startswith((CACHE_PREFIX, "."))
    )


def cached(checkpoint: str | Path, key: str, compute: Callable[[], T]) -> T:
    """``compute()``, stored in ``checkpoint/evaluation-<hash>.pkl`` (the hash of ``key`` and
    the checkpoint's files) and read from there when it exists."""
    folder = Path(checkpoint)
    name = fingerprint(key, _identity(folder))[:24]
    path = folder / f"{CACHE_PREFIX}{name}.pkl"
    if path.is_file():
        try:
            with path.open("rb") as handle:
                return pickle.load(handle)  # noqa: S301 - our own file, see the module doc
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as error:
            logger.warning("%s: unreadable (%s); evaluating again", path, error)
    value = compute()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return value


def options_key(options: Mapping[str, Any]) -> str:
    """The options as canonical JSON (sorted keys; non-JSON values by ``repr``)."""
    return json.dumps(dict(options), sort_keys=True, default=repr)
