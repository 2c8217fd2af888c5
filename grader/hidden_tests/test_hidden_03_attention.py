"""Hidden tests of exercise 3, attention: odd sizes, float32, views, broadcast masks, huge scores."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import warnings

import numpy as np

from tests.conventions import nan_rows, uniform_rows, value_scaled, with_convention
from tests.feedback import call_expecting_no_warning, expect_close, expect_dtype, expect_no_nan, expect_shape

EXERCISE = "attention"

SCORES = "scores are q @ k^T / sqrt(d_k): transpose only the last two axes of k (np.swapaxes(k, -1, -2))"
ATTEND = "softmax(q k^T / sqrt(d_k) + M) over the key axis (the last one), then weights @ v"
MASK = ("apply the mask to the scores before the softmax (bool: blocked -> -inf; float: added), "
        "letting it broadcast over every batch axis")
DTYPE = "dtype in = dtype out: float32 q, k, v (and mask) give float32 results"


def _attention(q, k, v, allowed=None):
    """Float64 attention written out with einsum; `allowed` is a boolean mask or None."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights


def _qkv(seed, batch, n_q, n_k, d_k, d_v, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(*batch, n, d)).astype(dtype) for n, d in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))


def test_scores_float32_four_batch_axes(impl):
    q, k, _ = _qkv(31, (2, 3), 4, 5, 6, 1, np.float32)
    out = impl.attention_scores(q, k)
    if expect_shape(out, (2, 3, 4, 5), what="attention_scores of q (2, 3, 4, 6) and k (2, 3, 5, 6)", idea=SCORES):
        expect_dtype(out, np.float32, what="attention_scores of float32 q and k", idea=DTYPE)
        expected = np.einsum("abqd,abkd->abqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(6)
        expect_close(out, expected, what="attention_scores with two batch axes, float32", idea=SCORES,
                     rtol=1e-5, atol=1e-6)


def test_scores_with_d_k_one(impl):
    q, k, _ = _qkv(32, (3,), 4, 7, 1, 1)
    out = impl.attention_scores(q, k)
    expect_close(out, q * np.swapaxes(k, -1, -2), what="attention_scores with d_k = 1 (sqrt(1) = 1)",
                 idea=SCORES + "; with d_k = 1 each score is the product of two numbers")


def test_scores_of_transposed_views(impl):
    rng = np.random.default_rng(33)
    q = np.swapaxes(rng.normal(size=(2, 5, 3)), -1, -2)  # (2, 3, 5) view
    k = rng.normal(size=(5, 4, 2)).T  # (2, 4, 5) view
    out = impl.attention_scores(q, k)
    expected = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(5)
    if expect_shape(out, (2, 3, 4), what="attention_scores of non-contiguous q (2, 3, 5) and k (2, 4, 5)",
                    idea=SCORES):
        expect_close(out, expected, what="attention_scores of transposed views", idea=SCORES)


def test_a_single_key_gets_all_the_weight(impl):
    q, k, v = _qkv(34, (2, 3), 5, 1, 4, 6)
    context, weights = impl.scaled_dot_product_attention(q, k, v)
    if expect_shape(weights, (2, 3, 5, 1), what="weights with n_k = 1", idea=ATTEND):
        expect_close(weights, np.ones((2, 3, 5, 1)), what="with one key, each query's only weight is 1",
                     idea="softmax over the key axis: a single key gets weight 1 whatever its score")
    if expect_shape(context, (2, 3, 5, 6), what="context with n_k = 1 and d_v = 6", idea=ATTEND):
        expect_close(context, np.broadcast_to(v, (2, 3, 5, 6)), what="with one key, every context row is v",
                     idea="the context is weights @ v")


def test_single_query_long_keys_float32(impl):
    q, k, v = _qkv(35, (2,), 1, 513, 8, 3, np.float32)
    context, weights = impl.scaled_dot_product_attention(q, k, v)
    expected_context, expected_weights = _attention(q, k, v)
    if expect_shape(weights, (2, 1, 513), what="weights of one query over 513 keys", idea=ATTEND):
        expect_dtype(weights, np.float32, what="weights from float32 q, k, v", idea=DTYPE)
        expect_close(weights, expected_weights, what="weights of one query over 513 float32 keys",
                     idea=with_convention(ATTEND, value_scaled(weights, q, k, v.shape[-1])), rtol=1e-4, atol=1e-7)
    if expect_shape(context, (2, 1, 3), what="context of one query over 513 keys", idea=ATTEND):
        expect_dtype(context, np.float32, what="context from float32 q, k, v", idea=DTYPE)
        expect_close(context, expected_context, what="context of one query over 513 float32 keys", idea=ATTEND,
                     rtol=1e-4, atol=1e-6)


def test_non_contiguous_inputs(impl):
    rng = np.random.default_rng(36)
    q = rng.normal(size=(3, 8, 4))[:, ::2, :]  # (3, 4, 4) strided
    k = np.swapaxes(rng.normal(size=(3, 4, 6)), -1, -2)  # (3, 6, 4)
    v = rng.normal(size=(3, 6, 10))[..., 1::2]  # (3, 6, 5)
    context, weights = impl.scaled_dot_product_attention(q, k, v)
    expected_context, expected_weights = _attention(q, k, v)
    expect_close(weights, expected_weights, what="weights for strided and transposed q, k, v views", idea=ATTEND)
    expect_close(context, expected_context, what="context for strided and transposed q, k, v views", idea=ATTEND)


def test_masks_broadcast_over_two_batch_axes(impl):
    q, k, v = _qkv(37, (2, 3), 4, 5, 6, 7)
    rng = np.random.default_rng(38)
    cases = (
        ("a shared (4, 5) mask", rng.random((4, 5)) < 0.7),
        ("a per-head (3, 1, 5) mask", rng.random((3, 1, 5)) < 0.6),
        ("a per-sequence (2, 1, 1, 5) mask", rng.random((2, 1, 1, 5)) < 0.6),
    )
    for label, mask in cases:
        mask = mask.copy()
        mask[..., 0] = True  # every row keeps a key, so only the broadcasting is tested here
        context, weights = impl.scaled_dot_product_attention(q, k, v, mask)
        expected_context, expected_weights = _attention(q, k, v, mask)
        if expect_shape(weights, (2, 3, 4, 5), what=f"weights with {label} for q of shape (2, 3, 4, 6)", idea=MASK):
            expect_close(weights, expected_weights, what=f"weights with {label}", idea=MASK)
            expect_close(context, expected_context, what=f"context with {label}", idea=MASK)


def test_float32_additive_mask_with_blocked_rows(impl):
    q, k, v = _qkv(39, (2, 3), 4, 5, 2, 3, np.float32)
    allowed = np.random.default_rng(40).random((2, 1, 4, 5)) < 0.6
    allowed[0, 0, 1, :] = False  # query 1 of sequence 0 may attend to nothing
    allowed[1, 0, :, 2] = True
    additive = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    context, weights = call_expecting_no_warning(
        impl.scaled_dot_product_attention, q, k, v, additive,
        what="attention with a fully blocked query row raises no RuntimeWarning",
        idea="a row whose keys are all blocked has nothing to normalise: its weights are all 0, not NaN")
    expected_context, expected_weights = _attention(q, k, v, allowed)
    rows = np.broadcast_to(~allowed.any(axis=-1), expected_weights.shape[:-1])  # the queries with no allowed key
    blocked = np.broadcast_to(rows[..., None], expected_weights.shape)
    if expect_no_nan(weights, what="weights with a float32 additive mask and a fully blocked row",
                     idea=with_convention(MASK, nan_rows(weights, blocked))):
        expect_dtype(weights, np.float32, what="weights from float32 q, k, v and a float32 mask", idea=DTYPE)
        expect_close(weights, expected_weights, what="weights with a float32 additive mask (2, 1, 4, 5)",
                     idea=with_convention(MASK, uniform_rows(weights, rows)), rtol=1e-5, atol=1e-7)
    if expect_no_nan(context, what="context with a fully blocked row", idea=MASK):
        expect_close(context[0, :, 1], np.zeros((3, 3)), what="a fully blocked query's context rows are zero",
                     idea="no allowed key: all-zero weights, so an all-zero context row", atol=0.0, rtol=0.0)


def test_huge_scores_pick_the_best_key(impl):
    # Scores near 1e28: exp overflows unless the row maximum is subtracted first.
    q = np.array([[[1e14, 0.0], [0.0, 1e14]]])
    k = np.array([[[1e14, 0.0], [2e14, 0.0], [0.0, 3e14], [-1e14, 1e14]]])
    v = np.arange(8.0).reshape(1, 4, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        context, weights = impl.scaled_dot_product_attention(q, k, v)
    idea = "numerical stability: the softmax of the scores must subtract each row's maximum before np.exp"
    if expect_no_nan(weights, what="attention weights for scores near 1e28", idea=idea):
        expect_close(weights, [[[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]],
                     what="for scores near 1e28 the best key takes all the weight", idea=idea)
        expect_close(context, [[[2.0, 3.0], [4.0, 5.0]]], what="context for scores near 1e28", idea=idea)
