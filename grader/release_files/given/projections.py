"""Exercise 2, projections: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_02_projections.py) ship and pass. The
reading explains the idea: docs/reading.md#projections.
"""

from __future__ import annotations

import numbers

import numpy as np


def _size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def init_weight(rng: np.random.Generator, d_in: int, d_out: int) -> np.ndarray:
    """A ``(d_in, d_out)`` matrix of normal draws with standard deviation ``1/sqrt(d_in)`` (one call of rng)."""
    rows, cols = _size("d_in", d_in), _size("d_out", d_out)
    spread = 1 / np.sqrt(float(rows))  # as the reference rounds it: the same seed, the same matrix, bit for bit
    return rng.normal(0.0, spread, size=(rows, cols))


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``x @ weight (+ bias)`` over the last axis of ``x``, whatever axes come before it."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        if x.dtype == object or not np.issubdtype(x.dtype, np.number):
            raise ValueError(f"x must be a numeric array, got dtype {x.dtype}")
        x = x.astype(np.float64)
    weight = np.asarray(weight, dtype=np.result_type(x.dtype, np.float32))
    if x.ndim < 1:
        raise ValueError(f"x must have at least 1 axis (..., d_in), got shape {x.shape}")
    if weight.ndim != 2:
        raise ValueError(f"weight must be a 2-D (d_in, d_out) matrix, got shape {weight.shape}")
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight has {weight.shape[0]} rows but x has {x.shape[-1]} features (last axis); "
                         f"weight of shape {weight.shape} does not fit x of shape {x.shape}")
    out = x @ weight
    if bias is None:
        return out
    bias = np.asarray(bias)
    if bias.shape != weight.shape[1:]:
        raise ValueError(f"bias must have shape ({weight.shape[1]},), one per output feature, got {bias.shape}")
    return out + bias


def qkv_projections(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray,
                    w_v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The queries, keys and values of the same tokens, in that order."""
    found = []
    for name, weight in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        try:
            found.append(linear(x, weight))
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    if found[0].shape[-1] != found[1].shape[-1]:
        raise ValueError(f"w_q and w_k must give the same d_k, got {found[0].shape[-1]} and {found[1].shape[-1]}")
    return found[0], found[1], found[2]
