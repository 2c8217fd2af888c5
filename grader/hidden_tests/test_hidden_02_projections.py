"""Hidden tests of exercise 2, projections: size 1, float32, four batch axes, views, integers."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.conventions import init_scale, with_convention
from tests.feedback import expect_close, expect_dtype, expect_equal, expect_raises_value_error, expect_shape
from tests.test_02_projections import require_draws

EXERCISE = "projections"

INIT = "init_weight draws rng.normal(0.0, 1/sqrt(d_in), size=(d_in, d_out)) in one call"
LINEAR = "a projection is x @ weight (+ bias) on the last axis; `@` already handles leading batch axes"
DTYPE = "dtype in = dtype out: float32 inputs and weights give a float32 result"


def test_init_weight_of_size_one(impl):
    require_draws(impl)
    w = impl.init_weight(np.random.default_rng(21), 1, 1)
    if expect_shape(w, (1, 1), what="init_weight(rng, 1, 1)", idea=INIT):
        expect_dtype(w, np.float64, what="init_weight(rng, 1, 1)", idea=INIT)
        want = np.random.default_rng(21).normal(0.0, 1.0, size=(1, 1))
        # One number tells no distribution: a large draw names the convention of a wrong one (GPT-2's 0.02, ...).
        convention = "" if np.allclose(w, want) else init_scale(impl.init_weight(np.random.default_rng(21), 400, 100),
                                                                400, 100)
        expect_close(w, want, what="init_weight(rng, 1, 1): d_in = 1 means standard deviation 1",
                     idea=with_convention(INIT, convention))


def test_init_weight_tall_and_narrow(impl):
    require_draws(impl)
    w = impl.init_weight(np.random.default_rng(22), 300, 2)
    if expect_shape(w, (300, 2), what="init_weight(rng, 300, 2)",
                    idea="the shape is (d_in, d_out): rows for inputs, columns for outputs"):
        expect_close(w, np.random.default_rng(22).normal(0.0, 1 / np.sqrt(300), size=(300, 2)),
                     what="init_weight(rng, 300, 2) draws, same seed", idea=INIT)


def test_linear_float32_four_batch_axes(impl):
    rng = np.random.default_rng(23)
    x = rng.normal(size=(2, 3, 4, 5, 6)).astype(np.float32)
    w = rng.normal(size=(6, 7)).astype(np.float32)
    b = rng.normal(size=7).astype(np.float32)
    out = impl.linear(x, w, b)
    if expect_shape(out, (2, 3, 4, 5, 7), what="linear of a (2, 3, 4, 5, 6) float32 x with a (6, 7) weight",
                    idea=LINEAR):
        expect_dtype(out, np.float32, what="linear with float32 x, weight and bias", idea=DTYPE)
        expected = np.einsum("abcdi,io->abcdo", x.astype(np.float64), w.astype(np.float64)) + b
        expect_close(out, expected, what="linear of float32 inputs with four batch axes", idea=LINEAR,
                     rtol=1e-5, atol=1e-5)


def test_linear_with_one_feature(impl):
    rng = np.random.default_rng(24)
    x = rng.normal(size=(3, 5, 1))
    w = np.array([[2.5]])
    b = np.array([-0.75])
    expect_close(impl.linear(x, w, b), x * 2.5 - 0.75, what="linear with d_in = d_out = 1",
                 idea=LINEAR + "; a size-1 axis must not be squeezed away")
    w_wide = rng.normal(size=(1, 4))
    expect_close(impl.linear(x, w_wide), x * w_wide[0], what="linear with d_in = 1, d_out = 4 and no bias",
                 idea=LINEAR)


def test_linear_on_transposed_views(impl):
    rng = np.random.default_rng(25)
    x_store = rng.normal(size=(5, 4, 3))  # x is a (3, 4, 5) view of it
    w_store = rng.normal(size=(6, 5))  # weight is a (5, 6) view of it
    bias = rng.normal(size=12)[::2]  # a strided (6,) view
    x, w = x_store.T, w_store.T
    out = impl.linear(x, w, bias)
    expected = np.einsum("abi,io->abo", np.ascontiguousarray(x), np.ascontiguousarray(w)) + np.array(bias)
    expect_close(out, expected, what="linear of transposed (non-contiguous) x and weight and a strided bias",
                 idea=LINEAR + "; do not rely on memory layout (weight.T would undo the caller's view)")


def test_linear_of_integer_tokens(impl):
    x = np.arange(12).reshape(2, 2, 3)
    w = np.random.default_rng(26).normal(size=(3, 4))
    out = impl.linear(x, w)
    if expect_shape(out, (2, 2, 4), what="linear of an integer x (2, 2, 3) with a float weight", idea=LINEAR):
        expect_close(out, x.astype(np.float64) @ w, what="linear of integer inputs", idea=LINEAR)


def test_qkv_float32_single_token(impl):
    rng = np.random.default_rng(27)
    x = rng.normal(size=(2, 3, 1, 5)).astype(np.float32)
    w_q, w_k, w_v = (rng.normal(size=(5, d)).astype(np.float32) for d in (4, 4, 7))
    result = impl.qkv_projections(x, w_q, w_k, w_v)
    if expect_equal(type(result).__name__, "tuple", what="qkv_projections returns a tuple (q, k, v)",
                    idea="return the three projections as a tuple, in the order q, k, v"):
        shapes = tuple(np.shape(part) for part in result)
        if expect_equal(shapes, ((2, 3, 1, 4), (2, 3, 1, 4), (2, 3, 1, 7)),
                        what="shapes of q, k, v for one token with two batch axes (d_k = 4, d_v = 7)",
                        idea="each projection keeps the batch and position axes and maps d_model to its width"):
            for name, part, w in zip("qkv", result, (w_q, w_k, w_v), strict=True):
                expect_dtype(part, np.float32, what=f"{name} from float32 x and weights", idea=DTYPE)
                expect_close(part, x.astype(np.float64) @ w, what=f"{name} = x @ w_{name}", rtol=1e-5, atol=1e-6,
                             idea="each of q, k, v uses its own weight: q = x @ w_q, k = x @ w_k, v = x @ w_v")


def test_rejects_bad_bias_and_weight(impl):
    x = np.ones((2, 3))
    expect_raises_value_error(lambda: impl.linear(x, np.ones((3, 4)), np.ones(3)), argument="bias",
                              what="linear with a weight (3, 4) and a bias of shape (3,)",
                              idea="bad input raises ValueError naming the argument: the bias needs shape (d_out,)")
    expect_raises_value_error(lambda: impl.linear(x, np.ones(3)), argument="weight",
                              what="linear with a 1-D weight of shape (3,)",
                              idea="bad input raises ValueError naming the argument: weight must be (d_in, d_out)")
    expect_raises_value_error(lambda: impl.init_weight(np.random.default_rng(0), 4, 0), argument="d_out",
                              what="init_weight(rng, 4, 0)",
                              idea="bad input raises ValueError naming the argument: sizes are positive")
