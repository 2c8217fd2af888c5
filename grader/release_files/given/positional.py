"""Exercise 5, positional: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_05_positional.py) ship and pass. The
reading explains the idea: docs/reading.md#order.
"""

from __future__ import annotations

import numbers

import numpy as np


def _size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def sinusoidal_encoding(n_positions: int, d_model: int) -> np.ndarray:
    """``(n_positions, d_model)``: sine on even columns, cosine on odd ones, pair ``i`` at ``10000**(-2i/d)``."""
    rows, cols = _size("n_positions", n_positions), _size("d_model", d_model)
    pair_start = (np.arange(cols) // 2) * 2  # both columns of a pair share one frequency
    angle = np.arange(rows, dtype=np.float64)[:, None] / np.power(10000.0, pair_start / cols)[None, :]
    table = np.empty((rows, cols))
    table[:, 0::2] = np.sin(angle[:, 0::2])
    table[:, 1::2] = np.cos(angle[:, 1::2])
    return table


def rotary_embedding(x: np.ndarray, positions: np.ndarray | None = None, base: float = 10000.0) -> np.ndarray:
    """Turn every feature pair ``(2i, 2i+1)`` of row ``p`` by the angle ``positions[p] * base**(-2i/d)``."""
    x = np.asarray(x)
    if x.dtype == object or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"x must be a numeric array, got dtype {x.dtype}")
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"x must have shape (..., n, d) with d even, got shape {x.shape}")
    if not (isinstance(base, numbers.Real) and base > 0):
        raise ValueError(f"base must be positive, got {base!r}")
    n, d = x.shape[-2:]
    where = np.arange(n, dtype=np.float64) if positions is None else np.asarray(positions, dtype=np.float64)
    if where.shape != (n,):
        raise ValueError(f"positions must have shape ({n},), one per row of x, got {where.shape}")
    turn = where[:, None] * np.power(float(base), -np.arange(0, d, 2) / d)[None, :]  # (n, d / 2)
    cos, sin = np.cos(turn).astype(x.dtype), np.sin(turn).astype(x.dtype)
    first, second = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = first * cos - second * sin
    out[..., 1::2] = first * sin + second * cos
    return out


def alibi_bias(n: int, n_heads: int) -> np.ndarray:
    """``(n_heads, n, n)``: ``-slope_h * |i - j|`` with ``slope_h = 2**(-8 (h + 1) / n_heads)``."""
    size, heads = _size("n", n), _size("n_heads", n_heads)
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    gap = np.abs(np.arange(size)[:, None] - np.arange(size)[None, :])
    return -slopes[:, None, None] * gap[None, :, :]
