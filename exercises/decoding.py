"""Exercise 11: attention at generation time, a token at a time and a block at a time.

A model that generates text produces one token, appends it, and runs again.
The causal mask is what makes this possible: position ``t`` never looks at
later positions, so its keys and values do not change when tokens are
added after it. They can be computed once and kept: the **KV cache**. Each
new step then needs only the new token's query, key and value, and one row
of attention over the cache, instead of recomputing every position (see the
reading, docs/reading.md#generation).

* ``kv_cache_append`` adds the new position's key and value to the cache
  along the position axis (the second-to-last), returning a new cache: the
  old one stays as it was, so a caller may keep it (e.g. to branch);
* ``attend_step`` is one row of scaled dot-product attention: the new query
  against every cached key, ``softmax(q_t K^T / sqrt(d_k)) V``;
* ``causal_decode`` runs the two position by position, and must give
  exactly what full causal attention gives.

Long contexts are then a matter of memory. Full attention holds an
``(n_q, n_k)`` array of scores; at n = 100 000 that is 80 GB in float64.
**Blockwise attention** (the idea behind FlashAttention) never builds it:
it walks over the keys a block at a time and keeps, per query, a running
maximum ``m``, a running sum ``l`` of ``exp(score - m)`` and a running
weighted sum of values. When a new block raises the maximum from ``m_old``
to ``m_new``, everything accumulated so far was computed relative to
``m_old``, so it is multiplied by ``exp(m_old - m_new)`` before the block's
own terms are added (online softmax). At the end, the weighted sum divided
by ``l`` is exactly softmax attention, while the extra memory is about
``n_q * block_size`` numbers instead of ``n_q * n_k``. Start ``m`` at
``-inf`` (any finite start, 0 or -5e4, is wrong for rows whose scores are
all below it), and keep the last block even when it is shorter.

What the tests check
--------------------
* ``kv_cache_append``: a new cache with t + 1 positions along axis -2, with
  batch and head axes, the old cache never changed, ``None`` starts one
  (with copies: the caller may reuse its k_t and v_t arrays);
* ``attend_step``: one row of scaled attention over the cache, shapes
  ``(..., 1, d_v)`` and ``(..., 1, t)``;
* ``causal_decode``: equal to full causal attention, with batch axes,
  float32 kept;
* ``blockwise_attention``: equal to ``scaled_dot_product_attention`` for
  block sizes that divide ``n_k`` and that do not (1, a middle one, n_k and
  more), with and without the causal mask, for scores so large (about
  1e4) that a softmax without the running maximum overflows, and so
  negative that a finite starting maximum underflows;
* memory (graded: measured by the kernel, outside your process; in your
  own run: with ``tracemalloc``): the peak grows with ``n_q * block_size``,
  far below the ``n_q * n_k`` of full attention;
* bad input: ValueError naming the argument.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import math
import numpy as np
from .softmax import softmax


def kv_cache_append(cache: dict | None, k_t: np.ndarray, v_t: np.ndarray) -> dict:
    """Add one position's key and value to the cache.

    Parameters
    ----------
    cache : dict or None
        ``None`` before the first token, else ``{"k": (..., t, d_k), "v":
        (..., t, d_v)}``. Never changed.
    k_t : numpy.ndarray
        The new key, shape ``(..., 1, d_k)``.
    v_t : numpy.ndarray
        The new value, shape ``(..., 1, d_v)``.

    Returns
    -------
    dict
        A new dict ``{"k": (..., t + 1, d_k), "v": (..., t + 1, d_v)}``: the
        cached positions first, the new one last. Its arrays are new too,
        also when ``cache`` is None: they share no memory with ``k_t``,
        ``v_t`` or the old cache.

    Raises
    ------
    ValueError
        If ``k_t`` or ``v_t`` is not one position ``(..., 1, d)``, or does
        not fit the cache's shapes, or ``cache`` (not None) is not a dict
        holding the arrays ``"k"`` and ``"v"``.
    """
    raise NotImplementedError('kv_cache_append: not implemented yet (exercise 11, decoding.py; run `pytest -m decoding`)')


def attend_step(q_t: np.ndarray, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    """Attention of the newest query over every cached position.

    Parameters
    ----------
    q_t : numpy.ndarray
        The new query, shape ``(..., 1, d_k)``.
    cache : dict
        ``{"k": (..., t, d_k), "v": (..., t, d_v)}``, the new position
        included (append first, then attend).

    Returns
    -------
    context_t : numpy.ndarray
        Shape ``(..., 1, d_v)``.
    weights_t : numpy.ndarray
        Shape ``(..., 1, t)``, summing to 1: one row of causal attention
        (nothing to mask: the cache holds only the past and the present).

    Raises
    ------
    ValueError
        If ``q_t`` is not one position or does not fit the cache.
    """
    raise NotImplementedError('attend_step: not implemented yet (exercise 11, decoding.py; run `pytest -m decoding`)')


def causal_decode(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal attention computed as generation does it: one position at a time.

    Parameters
    ----------
    q, k : numpy.ndarray
        Shape ``(..., n, d_k)``.
    v : numpy.ndarray
        Shape ``(..., n, d_v)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(..., n, d_v)``: row ``t`` is ``attend_step`` of query ``t``
        over the cache of positions ``0..t``, equal to
        ``scaled_dot_product_attention(q, k, v, causal_mask(n))[0]``.

    Raises
    ------
    ValueError
        If the shapes do not fit (q, k and v need the same n).
    """
    raise NotImplementedError('causal_decode: not implemented yet (exercise 11, decoding.py; run `pytest -m decoding`)')


def blockwise_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    block_size: int,
    causal: bool = False,
) -> np.ndarray:
    """Scaled dot-product attention over blocks of keys, with an online softmax.

    Parameters
    ----------
    q : numpy.ndarray
        Queries, shape ``(..., n_q, d_k)``.
    k : numpy.ndarray
        Keys, shape ``(..., n_k, d_k)``.
    v : numpy.ndarray
        Values, shape ``(..., n_k, d_v)``.
    block_size : int
        Keys per block, positive; the last block holds what is left.
    causal : bool, optional
        Apply ``causal_mask(n)`` (query ``i`` sees keys ``0..i``); needs
        ``n_q == n_k``.

    Returns
    -------
    numpy.ndarray
        The context, shape ``(..., n_q, d_v)``, equal to that of
        ``scaled_dot_product_attention`` (zeros for a query with no key).
        No ``(n_q, n_k)`` array is ever built: the extra memory is about
        ``n_q * block_size`` numbers.

    Raises
    ------
    ValueError
        If the shapes do not fit, ``block_size`` is not a positive integer
        or ``causal`` is asked for with ``n_q != n_k``.
    """
    raise NotImplementedError('blockwise_attention: not implemented yet (exercise 11, decoding.py; run `pytest -m decoding`)')
