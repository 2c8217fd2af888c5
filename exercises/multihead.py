"""Exercise 6: multi-head attention, several ways of comparing at once.

One attention head gives each query one distribution over the keys, so one
kind of relationship at a time. Multi-head attention runs several heads side
by side, each with its own slice of the projections: one head may follow
neighbouring tokens, another the subject of a verb, another may spread out
broadly. These roles are learned tendencies, not assigned in advance.

The heads share the work of one ``d_model``-wide projection: head ``h`` owns
the feature columns ``h*d_head:(h+1)*d_head`` of ``Q``, ``K`` and ``V``, with
``d_head = d_model / n_heads``. Splitting is a reshape followed by moving the
head axis in front of the positions: ``(..., n, d_model) -> (..., n, n_heads,
d_head) -> (..., n_heads, n, d_head)``. Then every head attends on its own
(the head axis is one more batch axis), the outputs are put back side by side
and mixed by the output projection ``W_O``. Each head divides its scores by
``sqrt(d_head)``, the size of its own keys.

With ``kv`` given, queries come from ``x`` and keys and values from ``kv``:
cross-attention, as a decoder attends to an encoder's output.

Read first: the reading (docs/reading.md#multihead).

What the tests check
--------------------
* ``split_heads``/``merge_heads``: shapes with and without batch axes, head
  ``h`` owns its column block, positions are not mixed into heads, merge and
  split invert each other exactly (both ways round);
* ``init_multi_head``: the eight keys, shapes, zero biases, weight scale
  ``1/sqrt(d_model)`` and the draw order ``w_q, w_k, w_v, w_o``;
* ``multi_head_attention``: output ``(..., n_q, d_model)`` and per-head
  weights ``(..., n_heads, n_q, n_k)`` (not averaged), every head's rows
  summing to 1, ``w_o`` and ``b_o`` used, one head's weights depending only
  on its own columns of ``W_Q`` and ``W_K`` and its context only on its own
  columns of ``W_V``, every head's weights against a hand computation scaled
  by ``sqrt(d_head)``, cross-attention through ``kv`` with ``n_k != n_q``,
  masks (shared ``(n_q, n_k)``, per sequence ``(batch, n_q, n_k)`` also when
  batch equals heads, padding ``(batch, 1, n_k)``), a fully blocked query
  (zero weights, no NaN), permutation equivariance, reference values, and a
  ``ValueError`` when ``n_heads`` does not divide ``d_model``.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import numpy as np
from .attention import scaled_dot_product_attention
from .projections import init_weight, linear


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """Cut the feature axis into heads and move the head axis forward.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(..., n, d_model)``.
    n_heads : int
        Number of heads; must divide ``d_model``.

    Returns
    -------
    numpy.ndarray
        Shape ``(..., n_heads, n, d_head)`` with ``d_head = d_model //
        n_heads``; ``out[..., h, p, :]`` is ``x[..., p, h*d_head:(h+1)*d_head]``.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 axes or ``n_heads`` does not divide
        ``d_model``.
    """
    raise NotImplementedError('split_heads: not implemented yet (exercise 6, multihead.py; run `pytest -m multihead`)')


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Put the heads back side by side: the inverse of :func:`split_heads`.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(..., n_heads, n, d_head)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(..., n, n_heads * d_head)``.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 3 axes.
    """
    raise NotImplementedError('merge_heads: not implemented yet (exercise 6, multihead.py; run `pytest -m multihead`)')


def init_multi_head(
    rng: np.random.Generator, d_model: int, n_heads: int
) -> dict[str, np.ndarray]:
    """Create random parameters for :func:`multi_head_attention`.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    d_model : int
        Model width, positive.
    n_heads : int
        Number of heads; must divide ``d_model``.

    Returns
    -------
    dict
        ``w_q, w_k, w_v, w_o``: ``(d_model, d_model)`` from
        ``init_weight(rng, d_model, d_model)``, drawn in that order;
        ``b_q, b_k, b_v, b_o``: zeros ``(d_model,)``.

    Raises
    ------
    ValueError
        If a size is not positive or ``n_heads`` does not divide ``d_model``.
    """
    raise NotImplementedError('init_multi_head: not implemented yet (exercise 6, multihead.py; run `pytest -m multihead`)')


def multi_head_attention(
    x: np.ndarray,
    params: dict[str, np.ndarray],
    n_heads: int,
    mask: np.ndarray | None = None,
    kv: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``n_heads`` attention heads in parallel and mix their outputs.

    Parameters
    ----------
    x : numpy.ndarray
        Query-side tokens, shape ``(..., n_q, d_model)``.
    params : dict
        As made by :func:`init_multi_head`.
    n_heads : int
        Number of heads; must divide ``d_model``.
    mask : numpy.ndarray, optional
        Bool or additive float, broadcastable to ``(..., n_q, n_k)``. The
        same mask applies to every head: the function inserts the head axis.
    kv : numpy.ndarray, optional
        Key/value-side tokens, shape ``(..., n_k, d_model)``; default ``x``
        (self-attention).

    Returns
    -------
    output : numpy.ndarray
        Shape ``(..., n_q, d_model)``: merged heads times ``w_o`` plus
        ``b_o``.
    weights : numpy.ndarray
        Shape ``(..., n_heads, n_q, n_k)``: every head's attention weights.

    Raises
    ------
    ValueError
        If ``n_heads`` does not divide ``d_model``, a parameter is missing or
        has the wrong shape, ``kv`` does not match ``x``, or the mask does not
        broadcast.
    """
    raise NotImplementedError('multi_head_attention: not implemented yet (exercise 6, multihead.py; run `pytest -m multihead`)')
