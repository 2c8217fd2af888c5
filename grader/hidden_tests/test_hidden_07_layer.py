"""Hidden tests of exercise 7, the layer: one token, one feature, float32, large offsets, broadcast masks."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import math

import numpy as np

from tests.conventions import gelu_erf, layer_norm_form, with_convention
from tests.feedback import expect, expect_close, expect_dtype, expect_equal, expect_no_nan, expect_shape
from tests.test_07_layer import require_independent_draws

EXERCISE = "layer"

NORM = ("layer norm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta, with the biased "
        "variance of the centred values")
FFN = "feed_forward is act(x @ w_1 + b_1) @ w_2 + b_2, applied to each position on its own"
DROPOUT = "inverted dropout keeps an entry with probability 1 - rate and divides the kept ones by 1 - rate"
LAYER = ("post-LN: h = LN1(x + MHA(x)), out = LN2(h + FFN(h)); pre-LN: h = x + MHA(LN1(x)), "
         "out = h + FFN(LN2(h))")
DTYPE = "dtype in = dtype out: float32 inputs and parameters give a float32 result"


def _norm(x, gamma, beta, eps=1e-5):
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps) * gamma + beta


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _ffn(x, p, activation="relu"):
    hidden = np.asarray(x, dtype=np.float64) @ p["w_1"] + p["b_1"]
    hidden = np.maximum(hidden, 0.0) if activation == "relu" else _gelu(hidden)
    return hidden @ p["w_2"] + p["b_2"]


def _mha(x, a, n_heads, allowed=None):
    """Multi-head self-attention, head by head over column slices."""
    d_head = x.shape[-1] // n_heads
    contexts = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = (x @ a[f"w_{c}"][:, cols] + a[f"b_{c}"][cols] for c in "qkv")
        scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_head)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        total = e.sum(axis=-1, keepdims=True)
        contexts.append(np.divide(e, total, out=np.zeros_like(e), where=total > 0) @ v)
    return np.concatenate(contexts, axis=-1) @ a["w_o"] + a["b_o"]


def _layer(x, p, n_heads, allowed=None, norm_first=False, activation="relu"):
    p = {k: (v if isinstance(v, dict) else np.asarray(v, dtype=np.float64)) for k, v in p.items()}
    a = {k: np.asarray(v, dtype=np.float64) for k, v in p["attention"].items()}
    x = np.asarray(x, dtype=np.float64)

    def ln1(h):
        return _norm(h, p["ln1_gamma"], p["ln1_beta"])

    def ln2(h):
        return _norm(h, p["ln2_gamma"], p["ln2_beta"])

    if norm_first:
        h = x + _mha(ln1(x), a, n_heads, allowed)
        return h + _ffn(ln2(h), p, activation)
    h = ln1(x + _mha(x, a, n_heads, allowed))
    return ln2(h + _ffn(h, p, activation))


def _layer_params(seed, d_model, d_ff, dtype=np.float64):
    rng = np.random.default_rng(seed)
    attention = {
        name: rng.normal(scale=d_model**-0.5, size=(d_model, d_model)) for name in ("w_q", "w_k", "w_v", "w_o")
    }
    attention |= {name: rng.normal(scale=0.3, size=d_model) for name in ("b_q", "b_k", "b_v", "b_o")}
    params = {
        "attention": {k: v.astype(dtype) for k, v in attention.items()},
        "ln1_gamma": rng.uniform(0.5, 1.5, d_model), "ln1_beta": rng.normal(scale=0.3, size=d_model),
        "ln2_gamma": rng.uniform(0.5, 1.5, d_model), "ln2_beta": rng.normal(scale=0.3, size=d_model),
        "w_1": rng.normal(scale=d_model**-0.5, size=(d_model, d_ff)), "b_1": rng.normal(scale=0.3, size=d_ff),
        "w_2": rng.normal(scale=d_ff**-0.5, size=(d_ff, d_model)), "b_2": rng.normal(scale=0.3, size=d_model),
    }
    return {k: (v if isinstance(v, dict) else v.astype(dtype)) for k, v in params.items()}


def test_layer_norm_float32_four_axes(impl):
    rng = np.random.default_rng(81)
    x = rng.normal(loc=2.0, scale=3.0, size=(2, 3, 4, 5)).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 2.0, 5).astype(np.float32), rng.normal(size=5).astype(np.float32)
    out = impl.layer_norm(x, gamma, beta, eps=0.1)
    if expect_shape(out, x.shape, what="layer_norm of a (2, 3, 4, 5) float32 array", idea=NORM):
        expect_dtype(out, np.float32, what="layer_norm of float32 x, gamma and beta", idea=DTYPE)
        convention = layer_norm_form(np.asarray(out, dtype=np.float64), x.astype(np.float64),
                                     gamma.astype(np.float64), beta.astype(np.float64), 0.1)
        expect_close(out, _norm(x, gamma, beta, eps=0.1), what="layer_norm (float32, eps = 0.1, random gamma, beta)",
                     idea=with_convention(NORM, convention), rtol=1e-5, atol=1e-5)


def test_layer_norm_of_one_feature_and_constant_rows(impl):
    gamma, beta = np.array([1.7]), np.array([-0.4])
    x = np.random.default_rng(82).normal(size=(3, 4, 1))
    out = impl.layer_norm(x, gamma, beta)
    if expect_no_nan(out, what="layer_norm over a last axis of size 1",
                     idea="eps inside the square root keeps a zero variance from dividing by zero"):
        expect_close(out, np.full((3, 4, 1), -0.4), what="layer_norm of one feature is beta",
                     idea="a single feature equals its mean, so it normalises to 0 and only beta remains")
    rows = np.array([[5.0, 5.0, 5.0], [1.0, 2.0, 4.0]])
    gamma3, beta3 = np.array([2.0, -1.0, 0.5]), np.array([0.1, 0.2, 0.3])
    out = impl.layer_norm(rows, gamma3, beta3)
    expect_close(out, _norm(rows, gamma3, beta3), what="layer_norm of a constant row [5, 5, 5] and a varied row",
                 idea="a constant row has variance 0: it normalises to 0 (then beta), not NaN")


def test_layer_norm_with_a_large_offset(impl):
    rng = np.random.default_rng(83)
    x = 1e8 + rng.normal(size=(4, 6))
    gamma, beta = rng.uniform(0.5, 1.5, 6), rng.normal(size=6)
    out = impl.layer_norm(x, gamma, beta)
    expect_close(out, _norm(x, gamma, beta), what="layer_norm of values near 1e8 with spread 1",
                 idea="compute the variance from the centred values, mean((x - mean)**2), not as "
                      "mean(x**2) - mean**2, which loses every digit when the values are large (flax's LayerNorm "
                      "does so by default, use_fast_variance=True: its convention, which this kit's contract does "
                      "not take)",
                 rtol=1e-5, atol=1e-5)


def test_feed_forward_float32_gelu_d_ff_one(impl):
    rng = np.random.default_rng(84)
    params = {"w_1": rng.normal(size=(4, 1)), "b_1": rng.normal(size=1),
              "w_2": rng.normal(size=(1, 4)), "b_2": rng.normal(size=4)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    x = rng.normal(size=(2, 3, 5, 4)).astype(np.float32)
    out = impl.feed_forward(x, params, activation="gelu")
    if expect_shape(out, x.shape, what="feed_forward with d_ff = 1 on a (2, 3, 5, 4) float32 array", idea=FFN):
        expect_dtype(out, np.float32, what="feed_forward of float32 x and parameters", idea=DTYPE)
        expect_close(out, _ffn(x, params, "gelu"), what="feed_forward with gelu and a hidden width of 1 (float32)",
                     idea=with_convention(FFN + "; gelu is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
                                          gelu_erf(out, x, {k: v.astype(np.float64) for k, v in params.items()},
                                                   rtol=1e-4)), rtol=1e-4, atol=1e-5)


def test_feed_forward_of_a_transposed_view(impl):
    rng = np.random.default_rng(85)
    params = {"w_1": rng.normal(size=(3, 5)), "b_1": rng.normal(size=5),
              "w_2": rng.normal(size=(5, 3)), "b_2": rng.normal(size=3)}
    x = rng.normal(size=(3, 4, 2)).T  # (2, 4, 3) view
    expect_close(impl.feed_forward(x, params), _ffn(x, params), what="feed_forward of a non-contiguous (2, 4, 3) view",
                 idea=FFN)


def test_dropout_float32_high_rate(impl):
    require_independent_draws(impl)
    x = np.random.default_rng(86).uniform(1.0, 2.0, size=(2, 3, 40, 50)).astype(np.float32)
    out = impl.dropout(x, 0.9, np.random.default_rng(87))
    if expect_shape(out, x.shape, what="dropout of a (2, 3, 40, 50) float32 array with rate 0.9", idea=DROPOUT):
        expect_dtype(out, np.float32, what="dropout of a float32 array", idea=DTYPE)
        out = np.asarray(out, dtype=np.float64)
        kept = out != 0
        fraction = kept.mean()
        expect(0.08 < fraction < 0.12, what="dropout with rate 0.9 keeps about 10% of 12000 entries",
               expected="a kept fraction between 0.08 and 0.12", observed=f"{fraction:.3f}",
               idea=DROPOUT + "; rate is the probability of dropping")
        expect_close(out[kept], x[kept].astype(np.float64) / 0.1, what="kept entries are divided by 1 - rate = 0.1",
                     idea=DROPOUT, rtol=1e-5)
    expect_equal(np.asarray(impl.dropout(x, 0.9, np.random.default_rng(1), training=False)), x,
                 what="dropout at evaluation (training=False) with rate 0.9",
                 idea="at evaluation dropout is the identity: no entry dropped, none rescaled")


def test_init_transformer_layer_smallest(impl):
    params = impl.init_transformer_layer(np.random.default_rng(88), 1, 1, 1)
    if expect(isinstance(params, dict) and isinstance(params.get("attention"), dict),
              what="init_transformer_layer(rng, 1, 1, 1)", expected="a dict with an 'attention' dict",
              observed=type(params).__name__, idea="the layer's parameters: attention, two norms, the FFN"):
        shapes = {k: np.shape(v) for k, v in params.items() if k != "attention"}
        expected = {"ln1_gamma": (1,), "ln1_beta": (1,), "ln2_gamma": (1,), "ln2_beta": (1,),
                    "w_1": (1, 1), "b_1": (1,), "w_2": (1, 1), "b_2": (1,)}
        expect_equal(shapes, expected, what="init_transformer_layer(rng, 1, 1, 1) shapes",
                     idea="norms and biases are vectors, w_1 is (d_model, d_ff), w_2 is (d_ff, d_model), even for 1")


def test_layer_of_one_token(impl):
    params = _layer_params(89, 6, 5)
    x = np.random.default_rng(90).normal(size=(3, 1, 6))
    for norm_first in (False, True):
        out = impl.transformer_layer(x, params, 3, norm_first=norm_first)
        expect_close(out, _layer(x, params, 3, norm_first=norm_first),
                     what=f"transformer_layer of one-token sequences (norm_first={norm_first})",
                     idea=LAYER + "; a lone token attends only to itself")


def test_layer_float32_two_batch_axes_pre_ln_gelu(impl):
    params = _layer_params(91, 8, 7, np.float32)
    x = np.random.default_rng(92).normal(size=(2, 3, 5, 8)).astype(np.float32)
    mask = np.tril(np.ones((5, 5), dtype=bool))
    out = impl.transformer_layer(x, params, 4, mask=mask, norm_first=True, activation="gelu")
    if expect_shape(out, x.shape, what="transformer_layer of a (2, 3, 5, 8) float32 array", idea=LAYER):
        expect_dtype(out, np.float32, what="transformer_layer of float32 x and parameters", idea=DTYPE)
        expect_close(out, _layer(x, params, 4, mask, norm_first=True, activation="gelu"),
                     what="pre-LN transformer_layer with gelu and a causal mask, float32", idea=LAYER,
                     rtol=1e-4, atol=1e-4)


def test_layer_with_a_broadcast_padding_mask(impl):
    params = _layer_params(93, 6, 9)
    x = np.random.default_rng(94).normal(size=(2, 3, 4, 6))
    mask = (np.arange(4) < np.array([4, 1, 2])[:, None])[:, None, :]  # (3, 1, 4): per second-axis sequence
    out = impl.transformer_layer(x, params, 2, mask=mask)
    expect_close(out, _layer(x, params, 2, mask), what="post-LN transformer_layer with a (3, 1, 4) padding mask",
                 idea=LAYER + "; the mask broadcasts over the first batch axis and the queries")
