"""Exercise 6, multihead: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_06_multihead.py) ship and pass. The
reading explains the idea: docs/reading.md#multihead.
"""

from __future__ import annotations

import numbers

import numpy as np

from .attention import scaled_dot_product_attention
from .projections import init_weight, linear

PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")


def _heads(n_heads: object, d_model: int) -> int:
    if isinstance(n_heads, bool) or not isinstance(n_heads, numbers.Integral) or n_heads <= 0:
        raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}")
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}: every head needs the same "
                         "number of feature columns")
    return int(n_heads)


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """``(..., n, d_model)`` to ``(..., n_heads, n, d_head)``: head ``h`` keeps its own block of columns."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 axes (..., n, d_model), got shape {x.shape}")
    heads = _heads(n_heads, x.shape[-1])
    blocks = x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)  # (..., n, heads, d_head)
    return np.swapaxes(blocks, -3, -2)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """``(..., n_heads, n, d_head)`` back to ``(..., n, n_heads * d_head)``."""
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 axes (..., n_heads, n, d_head), got shape {x.shape}")
    side_by_side = np.swapaxes(x, -3, -2)  # (..., n, heads, d_head)
    return side_by_side.reshape(*side_by_side.shape[:-2], -1)


def init_multi_head(rng: np.random.Generator, d_model: int, n_heads: int) -> dict[str, np.ndarray]:
    """Four ``(d_model, d_model)`` weights drawn in the order q, k, v, o, and four zero biases."""
    if isinstance(d_model, bool) or not isinstance(d_model, numbers.Integral) or d_model <= 0:
        raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
    _heads(n_heads, int(d_model))
    params = {name: init_weight(rng, d_model, d_model) for name in PROJECTIONS}
    params |= {"b" + name[1:]: np.zeros(d_model) for name in PROJECTIONS}
    return params


def multi_head_attention(x: np.ndarray, params: dict[str, np.ndarray], n_heads: int, mask: np.ndarray | None = None,
                         kv: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Project, split into heads, attend in every head, merge, project out; returns the output and weights."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 axes (..., n_q, d_model), got shape {x.shape}")
    d_model = x.shape[-1]
    heads = _heads(n_heads, d_model)
    if type(params) is not dict and not isinstance(params, dict):
        raise ValueError(f"params must be a dict, got {type(params).__name__}")
    for name in PROJECTIONS:
        for key, shape in ((name, (d_model, d_model)), ("b" + name[1:], (d_model,))):
            if key not in params:
                raise ValueError(f"params is missing the key {key!r}")
            if np.shape(params[key]) != shape:
                raise ValueError(f"params[{key!r}] must have shape {shape}, got {np.shape(params[key])}")
    source = x if kv is None else np.asarray(kv)
    if source.ndim != x.ndim or source.shape[-1] != d_model or source.shape[:-2] != x.shape[:-2]:
        raise ValueError(f"kv of shape {source.shape} does not match x of shape {x.shape}: it needs the same batch "
                         "axes and d_model")
    q, k, v = (split_heads(linear(tokens, params[f"w_{name}"], params[f"b_{name}"]), heads)
               for name, tokens in (("q", x), ("k", source), ("v", source)))
    every_head = None if mask is None else np.asarray(mask)
    if every_head is not None and every_head.ndim >= 2:  # one mask for all heads: add their axis
        every_head = every_head[..., None, :, :]
    try:
        context, weights = scaled_dot_product_attention(q, k, v, mask=every_head)
    except ValueError as error:
        raise ValueError(f"mask: {error}") from None
    return linear(merge_heads(context), params["w_o"], params["b_o"]), weights
