"""Exercise 3, attention: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_03_attention.py) ship and pass. The
reading explains the idea: docs/reading.md#attention and docs/reading.md#scaling.
"""

from __future__ import annotations

import math

import numpy as np

from .softmax import softmax


def _floats(name: str, value: object, layout: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array, got dtype {array.dtype}")
    if array.ndim < 2:
        raise ValueError(f"{name} must have at least 2 axes {layout}, got shape {array.shape}")
    return array if np.issubdtype(array.dtype, np.floating) else array.astype(np.float64)


def attention_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Every query against every key: ``q @ k^T / sqrt(d_k)``, batch axes untouched."""
    q = _floats("q", q, "(..., n_q, d_k)")
    k = _floats("k", k, "(..., n_k, d_k)")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"q and k must share their last axis d_k, got q {q.shape} and k {k.shape}")
    return np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])  # a Python float keeps float32 scores float32


def scaled_dot_product_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                                 mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``softmax(q k^T / sqrt(d_k) + M) v`` and the weights; a boolean mask is True where a key is allowed."""
    scores = attention_scores(q, k)
    v = _floats("v", v, "(..., n_k, d_v)")
    if np.shape(k)[-2] != v.shape[-2]:
        raise ValueError(f"v must have one row per key: k has {np.shape(k)[-2]} keys, v shape {v.shape}")
    allowed = None if mask is None else np.asarray(mask)
    if allowed is not None:
        try:
            fits = np.broadcast_shapes(allowed.shape, scores.shape) == scores.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"mask of shape {allowed.shape} does not broadcast to the attention weights' shape "
                             f"{scores.shape}")
        if allowed.dtype == bool:  # True: the key may be seen
            scores = np.where(allowed, scores, float("-inf"))
        elif np.issubdtype(allowed.dtype, np.number):
            scores = scores + allowed.astype(scores.dtype, copy=False)
        else:
            raise ValueError(f"mask must be boolean or a float array, got dtype {allowed.dtype}")
    weights = softmax(scores)  # over the keys, the last axis
    return np.matmul(weights, v), weights
