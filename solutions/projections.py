"""Exercise 2: queries, keys and values are learned projections of the tokens.

A static embedding gives a word one vector wherever it appears. Attention
builds a contextual representation instead: every token's new vector mixes
information from the other tokens of its own sequence. To decide what to mix,
each token vector ``x`` (a row of ``X``) is projected three times:

* the query ``q = x W_Q``: what this position is looking for;
* the key ``k = x W_K``: what this position offers to be found by;
* the value ``v = x W_V``: what this position hands over when it is chosen.

The three matrices are parameters learned in training; the names are
analogies, not roles built in. This kit uses the row-vector convention of the
reading (docs/reading.md#projections), ``Q = X @ W_Q`` with ``W_Q`` of shape
``(d_in, d_out)``.

Weights start random. Drawing them with standard deviation ``1/sqrt(d_in)``
keeps ``x @ W`` on the scale of ``x``: each output is a sum of ``d_in``
products, whose variance the ``1/d_in`` cancels.

Read first: the reading (docs/reading.md#projections).

What the tests check
--------------------
* ``init_weight``: shape ``(d_in, d_out)``, dtype float64, mean near 0 and
  standard deviation near ``1/sqrt(d_in)``, the same draws as
  ``rng.normal(0, 1/sqrt(d_in), (d_in, d_out))`` (so it reproduces the
  weights of the reading's example, docs/reading.md#worked-example), bad
  sizes rejected naming ``d_in`` or ``d_out``;
* ``linear``: ``x @ weight + bias`` on inputs with batch axes, with and
  without bias, dtype kept for float32, a row-by-row check that rows do not
  mix, and a clear error when ``x``, ``weight`` or ``bias`` do not fit;
* ``qkv_projections``: the three projections in the order (q, k, v), each
  with its own weight, with ``d_v != d_k``.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import as_float_array, require_ndim, require_positive_int


def init_weight(rng: np.random.Generator, d_in: int, d_out: int) -> np.ndarray:
    """Draw a random projection matrix for ``x @ W``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    d_in, d_out : int
        Input and output feature sizes, both positive.

    Returns
    -------
    numpy.ndarray
        Shape ``(d_in, d_out)``, dtype float64, entries drawn with
        ``rng.normal(0.0, 1/sqrt(d_in), size=(d_in, d_out))`` (one call, so
        the same seed gives the same matrix as the reading's example,
        docs/reading.md#worked-example).

    Raises
    ------
    ValueError
        If ``d_in`` or ``d_out`` is not a positive integer.
    """
    d_in = require_positive_int("d_in", d_in)
    d_out = require_positive_int("d_out", d_out)
    return rng.normal(0.0, 1.0 / math.sqrt(d_in), size=(d_in, d_out))


def linear(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None
) -> np.ndarray:
    """Project the last axis of ``x``: ``x @ weight (+ bias)``.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(..., d_in)``: any number of leading axes.
    weight : numpy.ndarray
        Shape ``(d_in, d_out)``.
    bias : numpy.ndarray, optional
        Shape ``(d_out,)``, added to every row.

    Returns
    -------
    numpy.ndarray
        Shape ``(..., d_out)``.

    Raises
    ------
    ValueError
        If ``weight`` is not 2-D, if its first axis does not match the last
        axis of ``x``, or if ``bias`` does not have shape ``(d_out,)``.
    """
    x = as_float_array("x", x)
    weight = as_float_array("weight", weight)
    require_ndim("x", x, 1, "(..., d_in)")
    if weight.ndim != 2:
        raise ValueError(f"weight must be 2-D (d_in, d_out), got shape {weight.shape}")
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(
            f"x of shape {x.shape} does not fit weight of shape {weight.shape}: "
            f"the last axis of x ({x.shape[-1]}) must equal weight's first "
            f"axis ({weight.shape[0]})"
        )
    out = x @ weight  # (..., d_in) @ (d_in, d_out) -> (..., d_out)
    if bias is not None:
        bias = as_float_array("bias", bias)
        if bias.shape != (weight.shape[1],):
            raise ValueError(
                f"bias must have shape ({weight.shape[1]},), got {bias.shape}"
            )
        out = out + bias
    return out


def qkv_projections(
    x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Project the same tokens into queries, keys and values.

    Parameters
    ----------
    x : numpy.ndarray
        Token vectors, shape ``(..., n, d_model)``.
    w_q, w_k : numpy.ndarray
        Shape ``(d_model, d_k)`` each.
    w_v : numpy.ndarray
        Shape ``(d_model, d_v)``; ``d_v`` may differ from ``d_k``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(q, k, v)`` with shapes ``(..., n, d_k)``, ``(..., n, d_k)`` and
        ``(..., n, d_v)``, in that order.

    Raises
    ------
    ValueError
        If a weight does not fit ``x`` (see :func:`linear`).
    """
    return linear(x, w_q), linear(x, w_k), linear(x, w_v)
