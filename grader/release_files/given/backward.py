"""Exercise 8, backward: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_08_backward.py) ship and pass. The
reading explains the idea: docs/reading.md#gradients.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .attention import scaled_dot_product_attention
from .multihead import merge_heads, split_heads
from .projections import linear


def _same_shape(first: str, a: np.ndarray, second: str, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{first} of shape {a.shape} must have the shape of {second}, {b.shape}")


def _to_shape(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a gradient over the batch axes its input was broadcast along, back to the input's ``shape``."""
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    widened = tuple(i for i, (was, now) in enumerate(zip(shape, grad.shape, strict=True)) if was == 1 != now)
    return grad.sum(axis=widened, keepdims=True) if widened else grad


def numerical_gradient(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)``, entry by entry, on a float64 copy."""
    if not eps > 0:
        raise ValueError(f"eps must be a positive step, got {eps}")
    point = np.array(x, dtype=np.float64)  # a copy: the caller's x is never moved
    slope = np.zeros_like(point)
    for index in np.ndindex(*point.shape):
        kept = point[index]
        point[index] = kept + eps
        above = float(f(point))
        point[index] = kept - eps
        below = float(f(point))
        point[index] = kept
        slope[index] = (above - below) / (2 * eps)
    return slope


def softmax_backward(grad_weights: np.ndarray, weights: np.ndarray, axis: int = -1) -> np.ndarray:
    """``weights * (grad_weights - sum(grad_weights * weights))`` along ``axis``."""
    grad_weights, weights = np.asarray(grad_weights), np.asarray(weights)
    _same_shape("grad_weights", grad_weights, "weights", weights)
    through = np.sum(grad_weights * weights, axis=axis, keepdims=True)
    return weights * (grad_weights - through)


def linear_backward(grad_out: np.ndarray, x: np.ndarray,
                    weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradients of ``x @ weight + bias`` with respect to ``x``, ``weight`` and ``bias``."""
    grad_out, x, weight = np.asarray(grad_out), np.asarray(x), np.asarray(weight)
    if weight.ndim != 2:
        raise ValueError(f"weight must be a 2-D (d_in, d_out) matrix, got shape {weight.shape}")
    if x.shape[-1:] != weight.shape[:1] or grad_out.shape != (*x.shape[:-1], weight.shape[1]):
        raise ValueError(f"grad_out {grad_out.shape}, x {x.shape} and weight {weight.shape} do not fit "
                         "out = x @ weight")
    rows_in = x.reshape(-1, x.shape[-1])
    rows_out = grad_out.reshape(-1, grad_out.shape[-1])
    return grad_out @ weight.T, rows_in.T @ rows_out, rows_out.sum(axis=0)


def attention_backward(grad_context: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undo ``context = softmax(q k^T / sqrt(d_k)) v``: the gradients of ``q``, ``k`` and ``v``."""
    grad_context, q, k, v, weights = (np.asarray(a) for a in (grad_context, q, k, v, weights))
    if q.ndim < 2 or k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape} and v {v.shape} do not fit each other")
    if weights.shape[-2:] != (q.shape[-2], k.shape[-2]) or grad_context.shape[-2:] != (q.shape[-2], v.shape[-1]):
        raise ValueError(f"weights {weights.shape} or grad_context {grad_context.shape} do not fit q {q.shape}, "
                         f"k {k.shape}, v {v.shape}")
    root = math.sqrt(q.shape[-1])  # divided by, as the forward pass divides the scores
    grad_v = np.swapaxes(weights, -1, -2) @ grad_context
    grad_scores = softmax_backward(grad_context @ np.swapaxes(v, -1, -2), weights)
    grad_q = grad_scores @ k / root
    grad_k = np.swapaxes(grad_scores, -1, -2) @ q / root
    return _to_shape(grad_q, q.shape), _to_shape(grad_k, k.shape), _to_shape(grad_v, v.shape)


def layer_norm_backward(grad_out: np.ndarray, x: np.ndarray, gamma: np.ndarray,
                        eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradients of ``gamma * (x - mean) / sqrt(var + eps) + beta`` for ``x``, ``gamma`` and ``beta``."""
    grad_out, x, gamma = np.asarray(grad_out), np.asarray(x), np.asarray(gamma)
    if not eps >= 0:
        raise ValueError(f"eps must be zero or more, got {eps}")
    _same_shape("grad_out", grad_out, "x", x)
    if gamma.shape != x.shape[-1:]:
        raise ValueError(f"gamma must have shape {x.shape[-1:]}, got {gamma.shape}")
    centred = x - x.mean(axis=-1, keepdims=True)
    inverse = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    normed = centred * inverse
    g = grad_out * gamma
    grad_x = inverse * (g - g.mean(axis=-1, keepdims=True) - normed * (g * normed).mean(axis=-1, keepdims=True))
    flat = grad_out.reshape(-1, x.shape[-1])
    return grad_x, (flat * normed.reshape(flat.shape)).sum(axis=0), flat.sum(axis=0)


def multi_head_attention_backward(grad_output: np.ndarray, x: np.ndarray, params: dict[str, np.ndarray],
                                  n_heads: int, mask: np.ndarray | None = None
                                  ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The gradient of self-attention's output with respect to ``x`` and every parameter."""
    x, grad_output = np.asarray(x), np.asarray(grad_output)
    _same_shape("grad_output", grad_output, "x", x)
    projected = {name: linear(x, params[f"w_{name}"], params[f"b_{name}"]) for name in "qkv"}
    q, k, v = (split_heads(projected[name], n_heads) for name in "qkv")
    every_head = None if mask is None else np.asarray(mask)
    if every_head is not None and every_head.ndim >= 2:  # one mask for all heads: add their axis
        every_head = every_head[..., None, :, :]
    context, weights = scaled_dot_product_attention(q, k, v, mask=every_head)
    merged = merge_heads(context)
    grads = {}
    grad_merged, grads["w_o"], grads["b_o"] = linear_backward(grad_output, merged, weight=params["w_o"])
    per_head = attention_backward(split_heads(grad_merged, n_heads), q, k, v, weights)
    grad_x = np.zeros(x.shape, dtype=np.result_type(x.dtype, grad_output.dtype))
    for name, grad in zip("qkv", per_head, strict=True):
        grad_in, grads[f"w_{name}"], grads[f"b_{name}"] = linear_backward(merge_heads(grad), x, params[f"w_{name}"])
        grad_x = grad_x + grad_in
    return grad_x, {name: grads[name] for name in params}
