"""Exercise 1: softmax, the function that turns scores into attention weights.

Attention compares a query with every key and gets one score per key. The
scores can be any real numbers; softmax turns them into weights that are
non-negative and add up to 1, so that the output can be a weighted average of
the values. Larger scores get exponentially larger weights.

Two details decide whether an implementation survives real inputs:

* Stability. ``exp(1000)`` is ``inf`` in floating point. Softmax does not
  change when the same constant is subtracted from every score of a slice, so
  subtract the slice's maximum before exponentiating: the largest term becomes
  ``exp(0) = 1`` and nothing overflows.
* Masked scores. Masks set forbidden scores to ``-inf`` and ``exp(-inf) = 0``,
  so those keys get no weight. When a whole slice is ``-inf`` (a query that
  may attend to nothing) there is nothing to normalise: the answer is all
  zeros, not NaN.

Read first: the reading (docs/reading.md#attention), its part on softmax
and numerical stability.

What the tests check
--------------------
* the output has the input's shape and floating dtype;
* each slice along ``axis`` sums to 1 and no weight is negative;
* adding a constant to a slice changes nothing (shift invariance);
* scores of 1e4 give finite weights (stability);
* ``-inf`` scores get weight exactly 0; an all ``-inf`` slice gives zeros
  without NaN or a RuntimeWarning;
* the ``axis`` argument is honoured, for every axis of a 3-D input;
* the input array is not modified.
"""

from __future__ import annotations

import numpy as np

from ._checks import as_float_array


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Normalise ``x`` along ``axis`` into weights that sum to 1.

    Parameters
    ----------
    x : numpy.ndarray
        Scores of any shape. Entries may be ``-inf`` (masked). Integer input
        is treated as float64.
    axis : int, optional
        The axis along which the weights sum to 1. Default: the last axis,
        which for attention scores ``(..., n_q, n_k)`` is the key axis.

    Returns
    -------
    numpy.ndarray
        Same shape and floating dtype as ``x``. Every slice along ``axis``
        sums to 1, except a slice that is entirely ``-inf``, which becomes
        all zeros.

    Raises
    ------
    ValueError
        If ``x`` is not numeric, has no axes, or ``axis`` is out of range.

    Notes
    -----
    Subtract the maximum of each slice (kept with ``keepdims=True`` so it
    broadcasts along ``axis``) before ``np.exp``.
    """
    x = as_float_array("x", x)
    if x.ndim == 0:
        raise ValueError("x must have at least one axis, got a 0-d array")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis={axis} is out of range for x of shape {x.shape}")
    largest = np.max(x, axis=axis, keepdims=True)
    # An all -inf slice has maximum -inf; shifting by it would give NaN.
    largest = np.where(np.isfinite(largest), largest, 0)
    exponentials = np.exp(x - largest)
    totals = np.sum(exponentials, axis=axis, keepdims=True)
    return np.divide(
        exponentials, totals, out=np.zeros_like(exponentials), where=totals > 0
    )
