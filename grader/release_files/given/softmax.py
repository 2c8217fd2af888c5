"""Exercise 1, softmax: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_01_softmax.py) ship and pass. The reading
explains the idea: docs/reading.md#attention.
"""

from __future__ import annotations

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Weights along ``axis`` that are non-negative and sum to 1; an all ``-inf`` slice gives zeros."""
    scores = np.asarray(x)
    if scores.dtype == object or not (np.issubdtype(scores.dtype, np.number) or scores.dtype == np.bool_):
        raise ValueError(f"x must be a numeric array, got dtype {scores.dtype}")
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    if scores.ndim == 0:
        raise ValueError("x must have at least one axis, got a scalar")
    if not -scores.ndim <= axis < scores.ndim:
        raise ValueError(f"axis {axis} is out of range for x with {scores.ndim} axes")
    top = np.max(scores, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # a slice of only -inf has no finite maximum
    exps = np.exp(scores - top)
    sums = np.sum(exps, axis=axis, keepdims=True)
    safe = np.where(sums > 0, sums, 1.0)  # such a slice stays all zeros instead of 0 / 0
    return (exps / safe).astype(scores.dtype, copy=False)
