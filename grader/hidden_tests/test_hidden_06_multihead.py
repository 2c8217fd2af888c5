"""Hidden tests of exercise 6, multi-head attention: d_head = 1, one head, one token, float32, broadcast masks."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import warnings

import numpy as np

from tests.conventions import uniform_rows, with_convention
from tests.feedback import (
    expect,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_equal,
    expect_no_nan,
    expect_shape,
)

EXERCISE = "multihead"

SPLIT = ("head h owns feature columns h*d_head:(h+1)*d_head: reshape to (..., n, n_heads, d_head), "
         "then move the head axis in front of the positions")
MHA = ("project (with biases), split into heads, attend per head with scores / sqrt(d_head), "
       "merge, then apply w_o and b_o")
MASK = "a mask broadcastable to (..., n_q, n_k) gets a head axis inserted before the last two: mask[..., None, :, :]"
DTYPE = "dtype in = dtype out: float32 tokens and float32 parameters give float32 outputs"


def _params(seed, d_model, dtype=np.float64):
    rng = np.random.default_rng(seed)
    params = {name: rng.normal(scale=d_model**-0.5, size=(d_model, d_model)) for name in ("w_q", "w_k", "w_v", "w_o")}
    params |= {name: rng.normal(scale=0.5, size=d_model) for name in ("b_q", "b_k", "b_v", "b_o")}
    return {name: value.astype(dtype) for name, value in params.items()}


def _mha(x, params, n_heads, allowed=None, kv=None):
    """Multi-head attention head by head with explicit column slices (float64)."""
    p = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
    x = np.asarray(x, dtype=np.float64)
    kv = x if kv is None else np.asarray(kv, dtype=np.float64)
    d_head = x.shape[-1] // n_heads
    contexts, all_weights = [], []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q = x @ p["w_q"][:, cols] + p["b_q"][cols]
        k = kv @ p["w_k"][:, cols] + p["b_k"][cols]
        v = kv @ p["w_v"][:, cols] + p["b_v"][cols]
        scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_head)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        total = e.sum(axis=-1, keepdims=True)
        weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        contexts.append(weights @ v)
        all_weights.append(weights)
    merged = np.concatenate(contexts, axis=-1)
    return merged @ p["w_o"] + p["b_o"], np.stack(all_weights, axis=-3)


def test_split_heads_four_axes_and_extreme_head_counts(impl):
    x = np.random.default_rng(61).normal(size=(2, 3, 4, 6))
    for n_heads in (1, 3, 6):
        d_head = 6 // n_heads
        out = impl.split_heads(x, n_heads)
        if expect_shape(out, (2, 3, n_heads, 4, d_head), what=f"split_heads of (2, 3, 4, 6) into {n_heads} heads",
                        idea=SPLIT):
            expected = np.stack([x[..., h * d_head:(h + 1) * d_head] for h in range(n_heads)], axis=-3)
            expect_equal(out, expected, what=f"split_heads into {n_heads} heads (d_head = {d_head})", idea=SPLIT)


def test_split_heads_of_a_transposed_view(impl):
    x = np.random.default_rng(62).normal(size=(8, 5, 2)).T  # (2, 5, 8), non-contiguous
    out = impl.split_heads(x, 4)
    expected = np.stack([x[..., h * 2:(h + 1) * 2] for h in range(4)], axis=-3)
    if expect_shape(out, (2, 4, 5, 2), what="split_heads of a non-contiguous (2, 5, 8) view into 4 heads", idea=SPLIT):
        expect_equal(out, expected, what="split_heads of a transposed view",
                     idea=SPLIT + "; reshape copies a non-contiguous array correctly, raw memory tricks do not")


def test_merge_heads_float32_and_views(impl):
    heads = np.random.default_rng(63).normal(size=(2, 3, 5, 4, 7)).astype(np.float32)  # (..., H=5, n=4, d_head=7)
    out = impl.merge_heads(heads)
    expected = np.concatenate([heads[..., h, :, :] for h in range(5)], axis=-1)
    if expect_shape(out, (2, 3, 4, 35), what="merge_heads of (2, 3, 5, 4, 7)",
                    idea="merge_heads inverts split_heads: move the head axis back behind the positions, then reshape"):
        expect_dtype(out, np.float32, what="merge_heads of float32 heads", idea=DTYPE)
        expect_equal(out, expected, what="merge_heads puts head h in columns h*d_head:(h+1)*d_head",
                     idea="move the head axis back behind the positions (swapaxes), then reshape")
    view = np.swapaxes(np.random.default_rng(64).normal(size=(3, 6, 2)), 0, 1)[None]  # (1, 6, 3, 2) view
    expected = np.concatenate([view[..., h, :, :] for h in range(6)], axis=-1)
    expect_equal(impl.merge_heads(view), expected, what="merge_heads of a non-contiguous (1, 6, 3, 2) view",
                 idea="move the head axis back behind the positions (swapaxes), then reshape")


def test_init_multi_head_smallest(impl):
    params = impl.init_multi_head(np.random.default_rng(65), 1, 1)
    keys = sorted(params) if isinstance(params, dict) else type(params).__name__
    if expect_equal(keys, ["b_k", "b_o", "b_q", "b_v", "w_k", "w_o", "w_q", "w_v"],
                    what="init_multi_head(rng, 1, 1) keys",
                    idea="a dict with w_q, w_k, w_v, w_o and b_q, b_k, b_v, b_o"):
        shapes = {name: np.shape(value) for name, value in params.items()}
        expect_equal(shapes, {name: (1, 1) if name[0] == "w" else (1,) for name in params},
                     what="init_multi_head(rng, 1, 1) shapes",
                     idea="weights are (d_model, d_model), biases (d_model,), even when d_model is 1")


def test_d_head_one_float32_two_batch_axes(impl):
    x = np.random.default_rng(66).normal(size=(2, 3, 4, 5)).astype(np.float32)
    params = _params(67, 5, np.float32)
    output, weights = impl.multi_head_attention(x, params, 5)
    expected_output, expected_weights = _mha(x, params, 5)
    if expect_shape(weights, (2, 3, 5, 4, 4), what="weights with 5 heads of d_head = 1 and two batch axes", idea=MHA):
        expect_dtype(weights, np.float32, what="weights from float32 x and params", idea=DTYPE)
        expect_close(weights, expected_weights, what="per-head weights with d_head = 1 (float32)", idea=MHA,
                     rtol=1e-4, atol=1e-6)
    if expect_shape(output, (2, 3, 4, 5), what="output with 5 heads of d_head = 1 and two batch axes", idea=MHA):
        expect_dtype(output, np.float32, what="output from float32 x and params", idea=DTYPE)
        expect_close(output, expected_output, what="output with d_head = 1 (float32)", idea=MHA, rtol=1e-4, atol=1e-5)


def test_one_head_and_one_token(impl):
    rng = np.random.default_rng(68)
    params = _params(69, 6)
    x = rng.normal(size=(3, 5, 6))
    output, weights = impl.multi_head_attention(x, params, 1)
    expected_output, expected_weights = _mha(x, params, 1)
    expect_close(weights, expected_weights, what="weights with a single head (d_head = d_model = 6)",
                 idea=MHA + "; with one head, scale by sqrt(d_model)")
    expect_close(output, expected_output, what="output with a single head", idea=MHA)
    token = rng.normal(size=(2, 1, 6))
    output, weights = impl.multi_head_attention(token, params, 3)
    expect_close(weights, np.ones((2, 3, 1, 1)), what="weights of a one-token sequence",
                 idea="a lone token can only attend to itself: weight 1 in every head")
    expect_close(output, (token @ params["w_v"] + params["b_v"]) @ params["w_o"] + params["b_o"],
                 what="output of a one-token sequence is (x w_v + b_v) w_o + b_o",
                 idea="with weight 1 the context is the token's own value; then the output projection")


def test_multi_head_masks_broadcast_over_two_batch_axes(impl):
    rng = np.random.default_rng(70)
    x = rng.normal(size=(2, 3, 4, 6))
    params = _params(71, 6)
    cases = (
        ("a shared causal (4, 4) mask", np.tril(np.ones((4, 4), dtype=bool))),
        ("a (3, 4, 4) mask for the second batch axis", rng.random((3, 4, 4)) < 0.7),
        ("a (2, 1, 1, 4) padding-style mask", rng.random((2, 1, 1, 4)) < 0.7),
    )
    for label, mask in cases:
        mask = mask.copy()
        mask[..., 0] = True
        output, weights = impl.multi_head_attention(x, params, 2, mask)
        expected_output, expected_weights = _mha(x, params, 2, mask)
        if expect_shape(weights, (2, 3, 2, 4, 4), what=f"weights with {label}", idea=MASK):
            expect_close(weights, expected_weights, what=f"per-head weights with {label}", idea=MASK)
            expect_close(output, expected_output, what=f"output with {label}", idea=MASK)


def test_cross_attention_long_memory_with_padding(impl):
    rng = np.random.default_rng(72)
    x = rng.normal(size=(2, 3, 8))
    memory = rng.normal(size=(2, 41, 8)).astype(np.float64)
    padding = (np.arange(41) < np.array([41, 17])[:, None])[:, None, :]  # (2, 1, 41)
    params = _params(73, 8)
    output, weights = impl.multi_head_attention(x, params, 4, padding, kv=memory)
    expected_output, expected_weights = _mha(x, params, 4, padding, kv=memory)
    if expect_shape(weights, (2, 4, 3, 41), what="cross-attention weights: 3 queries over 41 memory tokens",
                    idea="keys and values come from kv, queries from x: weights are (..., n_heads, n_q, n_k)"):
        expect_close(weights, expected_weights, what="cross-attention weights with a padding mask", idea=MASK)
        expect_close(output, expected_output, what="cross-attention output with a padding mask", idea=MHA)


def test_fully_masked_query_outputs_the_output_bias(impl):
    x = np.random.default_rng(74).normal(size=(3, 4, 6))
    params = _params(75, 6)
    mask = np.ones((3, 4, 4), dtype=bool)
    mask[1, 2, :] = False  # query 2 of sequence 1 may attend to nothing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        output, weights = impl.multi_head_attention(x, params, 3, mask)
    rows = np.zeros((3, 3, 4), dtype=bool)
    rows[1, :, 2] = True  # (query 2 of sequence 1, in every head)
    if expect_no_nan(output, what="output with one fully masked query row", idea=MASK):
        expect_close(output[1, 2], params["b_o"], what="a query with no allowed key outputs exactly b_o",
                     idea=with_convention("its weights are all 0, so its merged context is 0 and only the output "
                                          "bias remains", uniform_rows(weights, rows)))
    expect(isinstance(weights, np.ndarray) and np.shape(weights) == (3, 3, 4, 4)
           and bool(np.all(np.asarray(weights)[1, :, 2] == 0)),
           what="weights of a fully masked query in every head", expected="all zeros in every head",
           observed=f"{np.asarray(weights)[1, :, 2] if np.shape(weights) == (3, 3, 4, 4) else np.shape(weights)}",
           idea="no allowed key: all-zero weights, in every head")
    # The contrast: the output and the weights read x (the answer for another x of the same shape, or all-zero
    # weights beside the right output, have the blocked query's zeros and b_o too).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        doubled = impl.multi_head_attention(2.0 * x, params, 3, mask)
    doubled = doubled if isinstance(doubled, tuple) and len(doubled) == 2 else (doubled, doubled)
    all(expect_differs(twice, once, what=f"the {name} for 2 x vs. for x (the same parameters and mask)",
                       expected=f"other {name}: the other queries' rows are x's projections, attended",
                       passed="the blocked query outputs b_o with zero weights", idea=MASK)
        for name, twice, once in (("output", doubled[0], output), ("weights", doubled[1], weights)))
