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

from __future__ import annotations

import math

import numpy as np

from ._checks import as_float_array, require_ndim, require_positive_int
from .softmax import softmax


def _check_cache(cache: object) -> None:
    if not isinstance(cache, dict) or "k" not in cache or "v" not in cache:
        raise ValueError("cache must be None or a dict with arrays 'k' (..., t, d_k) and 'v' (..., t, d_v), "
                         f"got {type(cache).__name__}")
    k, v = np.shape(cache["k"]), np.shape(cache["v"])
    if len(k) < 2 or len(v) < 2 or k[:-1] != v[:-1]:
        raise ValueError(f"cache['k'] of shape {k} and cache['v'] of shape {v} must be (..., t, d_k) and "
                         "(..., t, d_v) with the same leading axes and t")


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
    k_t = as_float_array("k_t", k_t)
    v_t = as_float_array("v_t", v_t)
    for name, x in (("k_t", k_t), ("v_t", v_t)):
        require_ndim(name, x, 2, "(..., 1, d)")
        if x.shape[-2] != 1:
            raise ValueError(f"{name} must hold one position, shape (..., 1, d), got {x.shape}")
    if k_t.shape[:-1] != v_t.shape[:-1]:
        raise ValueError(f"k_t of shape {k_t.shape} and v_t of shape {v_t.shape} must share their leading axes")
    if cache is None:
        return {"k": k_t.copy(), "v": v_t.copy()}
    _check_cache(cache)
    k, v = np.asarray(cache["k"]), np.asarray(cache["v"])
    if k.shape[:-2] + k.shape[-1:] != k_t.shape[:-2] + k_t.shape[-1:]:
        raise ValueError(f"k_t of shape {k_t.shape} does not fit cache['k'] of shape {k.shape}: "
                         "the same leading axes and d_k")
    if v.shape[:-2] + v.shape[-1:] != v_t.shape[:-2] + v_t.shape[-1:]:
        raise ValueError(f"v_t of shape {v_t.shape} does not fit cache['v'] of shape {v.shape}: "
                         "the same leading axes and d_v")
    new = dict(cache)  # a new dict: the caller's cache keeps its t positions
    new["k"] = np.concatenate([k, k_t], axis=-2)  # (..., t, d_k) + (..., 1, d_k) -> (..., t + 1, d_k)
    new["v"] = np.concatenate([v, v_t], axis=-2)
    return new


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
    q_t = as_float_array("q_t", q_t)
    require_ndim("q_t", q_t, 2, "(..., 1, d_k)")
    if q_t.shape[-2] != 1:
        raise ValueError(f"q_t must hold one position, shape (..., 1, d_k), got {q_t.shape}")
    _check_cache(cache)
    k, v = as_float_array("cache['k']", cache["k"]), as_float_array("cache['v']", cache["v"])
    if q_t.shape[-1] != k.shape[-1]:
        raise ValueError(f"q_t of shape {q_t.shape} and cache['k'] of shape {k.shape} must share d_k")
    scores = q_t @ np.swapaxes(k, -1, -2) / math.sqrt(q_t.shape[-1])  # (..., 1, t)
    weights = softmax(scores, axis=-1)
    context = weights @ v  # (..., 1, t) @ (..., t, d_v) -> (..., 1, d_v)
    return context, weights


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
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    for name, x in (("q", q), ("k", k), ("v", v)):
        require_ndim(name, x, 2, "(..., n, d)")
    if not q.shape[:-1] == k.shape[:-1] == v.shape[:-1] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape}, k {k.shape} and v {v.shape} must share their leading axes and n, "
                         "q and k their d_k")
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = kv_cache_append(cache, k[..., t : t + 1, :], v[..., t : t + 1, :])
        context_t, _ = attend_step(q[..., t : t + 1, :], cache)
        rows.append(context_t)
    return np.concatenate(rows, axis=-2)  # n rows of (..., 1, d_v) -> (..., n, d_v)


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
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    block_size = require_positive_int("block_size", block_size)
    for name, x in (("q", q), ("k", k), ("v", v)):
        require_ndim(name, x, 2, "(..., n, d)")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape} and v {v.shape}: q and k must share d_k, k and v n_k")
    n_q, n_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    if causal and n_q != n_k:
        raise ValueError(f"causal=True needs as many queries as keys (causal_mask(n)), got q {q.shape}, k {k.shape}")
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    dtype = np.result_type(q, k, v)
    scale = 1 / math.sqrt(d_k)
    running_max = np.full(batch + (n_q, 1), -np.inf, dtype=dtype)  # m: the largest score seen so far, per query
    running_sum = np.zeros(batch + (n_q, 1), dtype=dtype)  # l: sum of exp(score - m) so far
    accumulated = np.zeros(batch + (n_q, v.shape[-1]), dtype=dtype)  # sum of exp(score - m) * value so far
    queries = np.arange(n_q)[:, None]  # (n_q, 1), for the causal mask
    for start in range(0, n_k, block_size):  # the last block may be shorter
        stop = min(start + block_size, n_k)
        scores = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)) * dtype.type(scale)  # (..., n_q, block)
        if causal:
            keys = np.arange(start, stop)[None, :]  # the block's keys' positions in the whole sequence
            scores = np.where(keys <= queries, scores, -np.inf)
        new_max = np.maximum(running_max, scores.max(axis=-1, keepdims=True))
        # A query that has seen no allowed key yet has new_max = -inf: shift by 0 (-inf - -inf is NaN).
        shift = np.where(np.isfinite(new_max), new_max, 0).astype(dtype)
        exponentials = np.exp(scores - shift)  # (..., n_q, block)
        rescale = np.exp(running_max - shift)  # exp(m_old - m_new): what the sums so far are worth now
        running_sum = running_sum * rescale + exponentials.sum(axis=-1, keepdims=True)
        accumulated = accumulated * rescale + exponentials @ v[..., start:stop, :]
        running_max = new_max
    return np.divide(accumulated, running_sum, out=np.zeros_like(accumulated), where=running_sum > 0)
