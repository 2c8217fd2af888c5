"""Exercise 4, masks: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_04_masks.py) ship and pass. The reading
explains the idea: docs/reading.md#masks.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import DTypeLike


def _size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def causal_mask(n: int) -> np.ndarray:
    """``(n, n)`` booleans, True where the key ``j`` is not after the query ``i`` (``j <= i``)."""
    size = _size("n", n)
    index = np.arange(size)
    return index[None, :] <= index[:, None]


def padding_mask(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """``(batch, 1, max_len)`` booleans, True where the key is one of the sequence's real tokens."""
    width = _size("max_len", max_len)
    lengths = np.asarray(lengths, dtype=None)  # a list works too
    if lengths.ndim != 1 or not (np.issubdtype(lengths.dtype, np.integer) or lengths.size == 0):
        raise ValueError(f"lengths must be a 1-D array of integers, got {lengths.dtype} of shape {lengths.shape}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > width):
        raise ValueError(f"lengths must lie in [0, max_len={width}], got values from {lengths.min()} to "
                         f"{lengths.max()}")
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, :]


def combine_masks(*masks: np.ndarray) -> np.ndarray:
    """The logical AND of boolean masks, at their broadcast shape."""
    if not masks:
        raise ValueError("masks: give one mask or more")
    arrays = list(map(np.asarray, masks))
    for number, array in enumerate(arrays):
        if array.dtype != bool:
            raise ValueError(f"masks[{number}] must be boolean, got dtype {array.dtype}")
    try:
        shape = np.broadcast_shapes(*[a.shape for a in arrays])
    except ValueError:
        raise ValueError(f"masks of shapes {[a.shape for a in arrays]} do not broadcast together") from None
    combined = np.ones(shape, dtype=bool)
    for array in arrays:
        combined &= array
    return combined


def to_additive(mask: np.ndarray, dtype: DTypeLike = np.float64) -> np.ndarray:
    """0 where the boolean mask allows a pair, ``-inf`` where it blocks it, in the floating ``dtype``."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array, got dtype {mask.dtype}")
    try:
        kind = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a floating dtype, got {dtype!r}") from None
    if not np.issubdtype(kind, np.floating):
        raise ValueError(f"dtype must be a floating dtype, got {kind}")
    out = np.zeros(mask.shape, dtype=kind)
    out[~mask] = -np.inf
    return out
