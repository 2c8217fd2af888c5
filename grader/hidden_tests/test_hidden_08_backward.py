"""Hidden tests of exercise 8, gradients by hand: other shapes, broadcast keys, 1-D inputs, float32, odd masks."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.feedback import expect_dtype, expect_no_nan, expect_shape
from tests.kit import PlainFunction
from tests.test_08_backward import _attention, _layer_norm, _mha, _softmax, expect_gradient, require_analytic

EXERCISE = "backward"

RULE = "each gradient has the shape of its input; a parameter shared across leading axes sums their gradients"
SOFTMAX = "grad_scores = p * (g - sum(g * p)) along the softmax's axis; 0 wherever p is 0"
ATTENTION = ("grad_v = P^T g, grad_P = g v^T, softmax backward, grad_q = grad_S k / sqrt(d_k), "
             "grad_k = grad_S^T q / sqrt(d_k)")
BROADCAST = ("an input that was broadcast against the others (one k shared by every batch entry) collects the "
             "gradients of every entry it was used for: sum over the broadcast axes back to its own shape")
NORM = "grad_x = (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) / sqrt(var + eps), gxhat = grad_out * gamma"
MHA = "multi-head backward: undo w_o, merge, attention, split and the three projections; x's three gradients add up"


def test_numerical_gradient_of_a_three_axis_array(impl):
    rng = np.random.default_rng(801)
    shape = (2, 3, 2)
    a, b, c, d = (rng.normal(size=shape) for _ in range(4))
    x = rng.normal(size=shape)
    grad = impl.numerical_gradient(PlainFunction("cubic", a=a, b=b, c=c, d=d), x, eps=1e-5)
    if expect_shape(grad, shape, what="numerical_gradient of a (2, 3, 2) array", idea="one estimate per entry"):
        expect_gradient(grad, lambda z: float(np.sum(a * z + b * z**2 + c * z**3) + 0.5 * np.sum(d * z) ** 2), x,
                        what="numerical_gradient of a (2, 3, 2) array", idea="central differences at every entry",
                        rtol=1e-6, atol=1e-6)


def test_softmax_backward_fully_masked_rows_float32(impl):
    require_analytic(impl, "softmax_backward")
    scores = np.random.default_rng(802).normal(size=(3, 4, 6))
    scores[1, 2] = -np.inf
    scores[0, :, 3] = -np.inf
    weights = _softmax(scores).astype(np.float32)
    grad = impl.softmax_backward(np.random.default_rng(803).normal(size=(3, 4, 6)).astype(np.float32), weights)
    if expect_shape(grad, weights.shape, what="softmax_backward with a fully masked row", idea=SOFTMAX):
        expect_dtype(grad, np.float32, what="softmax_backward of float32 inputs", idea="dtype in = dtype out")
        expect_no_nan(grad, what="softmax_backward with a fully masked row", idea=SOFTMAX)
        expect_gradient(grad, lambda s: float(np.sum(np.random.default_rng(803).normal(size=(3, 4, 6)) *
                                                     _softmax(np.where(np.isinf(scores), -np.inf, s)))),
                        np.where(np.isinf(scores), 0.0, scores), sample=30, rtol=1e-3, atol=1e-5,
                        what="softmax_backward with masked entries (float32)", idea=SOFTMAX)


def test_linear_backward_of_one_vector(impl):
    require_analytic(impl, "linear_backward")
    rng = np.random.default_rng(804)
    x, weight, r = rng.normal(size=5), rng.normal(size=(5, 3)), rng.normal(size=3)
    grad_x, grad_weight, grad_bias = impl.linear_backward(r, x, weight)
    expect_gradient(grad_x, lambda z: float(np.sum(r * (z @ weight))), x, what="grad_x for a single vector x (5,)",
                    idea=RULE)
    expect_gradient(grad_weight, lambda w: float(np.sum(r * (x @ w))), weight,
                    what="grad_weight for a single vector x (5,)", idea="grad_W is the outer product x^T grad_out")
    expect_gradient(grad_bias, lambda b: float(np.sum(r * (x @ weight + b))), np.zeros(3),
                    what="grad_bias for a single vector x (5,)", idea=RULE)


def test_linear_backward_four_axes(impl):
    require_analytic(impl, "linear_backward")
    rng = np.random.default_rng(805)
    x, weight, r = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(5, 6)), rng.normal(size=(2, 3, 4, 6))
    _, grad_weight, grad_bias = impl.linear_backward(r, x, weight)
    expect_gradient(grad_weight, lambda w: float(np.sum(r * (x @ w))), weight, sample=12,
                    what="grad_weight for x of shape (2, 3, 4, 5)", idea=RULE)
    expect_gradient(grad_bias, lambda b: float(np.sum(r * (x @ weight + b))), np.zeros(6),
                    what="grad_bias for x of shape (2, 3, 4, 5)", idea=RULE)


def test_attention_backward_with_keys_shared_across_the_batch(impl):
    require_analytic(impl, "attention_backward")
    rng = np.random.default_rng(806)
    q, k, v = rng.normal(size=(3, 4, 5)), rng.normal(size=(6, 5)), rng.normal(size=(6, 2))
    r = rng.normal(size=(3, 4, 2))
    grad_q, grad_k, grad_v = impl.attention_backward(r, q, k, v, _attention(q, k, v)[1])
    expect_gradient(grad_k, lambda z: float(np.sum(r * _attention(q, z, v)[0])), k, sample=15,
                    what="grad_k for one k (6, 5) shared by a batch of 3 queries", idea=BROADCAST)
    expect_gradient(grad_v, lambda z: float(np.sum(r * _attention(q, k, z)[0])), v,
                    what="grad_v for one v (6, 2) shared by a batch of 3 queries", idea=BROADCAST)
    expect_gradient(grad_q, lambda z: float(np.sum(r * _attention(z, k, v)[0])), q, sample=15,
                    what="grad_q with a shared k and v", idea=ATTENTION)


def test_attention_backward_one_key(impl):
    require_analytic(impl, "attention_backward")
    rng = np.random.default_rng(807)
    q, k, v, r = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 1, 4)), rng.normal(size=(2, 1, 3)), \
        rng.normal(size=(2, 3, 3))
    grad_q, grad_k, grad_v = impl.attention_backward(r, q, k, v, _attention(q, k, v)[1])
    expect_gradient(grad_q, lambda z: float(np.sum(r * _attention(z, k, v)[0])), q,
                    what="grad_q with a single key (its weight is always 1)",
                    idea="with one key the weights cannot change: grad_q and grad_k are 0")
    expect_gradient(grad_v, lambda z: float(np.sum(r * _attention(q, k, z)[0])), v,
                    what="grad_v with a single key", idea=ATTENTION)


def test_layer_norm_backward_float32_four_axes(impl):
    require_analytic(impl, "layer_norm_backward")
    rng = np.random.default_rng(808)
    x = rng.normal(loc=3.0, scale=2.0, size=(2, 2, 3, 5))
    gamma, r = rng.uniform(0.5, 1.5, 5), rng.normal(size=(2, 2, 3, 5))
    result = impl.layer_norm_backward(r.astype(np.float32), x.astype(np.float32), gamma.astype(np.float32), eps=0.2)
    expect_dtype(result[0], np.float32, what="layer_norm_backward's grad_x for float32 inputs",
                 idea="dtype in = dtype out")
    expect_gradient(result[0], lambda z: float(np.sum(r * _layer_norm(z, gamma, 0.0, 0.2))), x, sample=20,
                    rtol=1e-3, atol=1e-4, what="grad_x of layer norm on (2, 2, 3, 5) float32, eps = 0.2", idea=NORM)
    expect_gradient(result[1], lambda g: float(np.sum(r * _layer_norm(x, g, 0.0, 0.2))), gamma, rtol=1e-3,
                    atol=1e-4, what="grad_gamma summed over three leading axes", idea=RULE)


def test_multi_head_attention_backward_one_head_additive_mask(impl):
    require_analytic(impl, "multi_head_attention_backward")
    rng = np.random.default_rng(809)
    d, n = 6, 4
    params = {f"w_{c}": rng.normal(scale=0.5, size=(d, d)) for c in "qkvo"}
    params |= {f"b_{c}": rng.normal(scale=0.2, size=d) for c in "qkvo"}
    x, r = rng.normal(size=(3, n, d)), rng.normal(size=(3, n, d))
    additive = np.where(np.tril(np.ones((n, n), dtype=bool)), 0.0, -np.inf)
    grad_x, grads = impl.multi_head_attention_backward(r, x, params, 1, mask=additive)
    allowed = np.isfinite(additive)
    expect_gradient(grad_x, lambda z: float(np.sum(r * _mha(z, params, 1, allowed))), x, sample=20,
                    what="grad_x, one head, an additive causal mask", idea=MHA)
    expect_gradient(grads.get("w_k") if isinstance(grads, dict) else None,
                    lambda w: float(np.sum(r * _mha(x, params | {"w_k": w}, 1, allowed))), params["w_k"],
                    sample=12, what="grads['w_k'], one head, an additive causal mask", idea=MHA)
