"""Hidden tests of exercise 1, softmax: float32, odd sizes, views, integers, extreme scores."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import warnings

import numpy as np

from tests.conventions import nan_rows, with_convention
from tests.feedback import (
    call_expecting_no_warning,
    expect,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_no_nan,
    expect_shape,
)

EXERCISE = "softmax"

ROWS = "softmax normalises each slice along `axis`: exp(x) / sum(exp(x)) over that axis only"
STABLE = "numerical stability: subtract the maximum of each slice (keepdims=True) before np.exp"
MASKED = "masking: exp(-inf) is 0, and a slice with no allowed entry has nothing to normalise (all zeros)"
DTYPE = "dtype in = dtype out: keep float32 as float32 (no float64 constants or np.float64(...) upcasts)"


def _softmax(x, axis=-1):
    """Plain float64 softmax for finite inputs, to compare with."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_float32_four_batch_axes(impl):
    x = np.random.default_rng(11).normal(scale=3.0, size=(2, 3, 4, 5, 6)).astype(np.float32)
    out = impl.softmax(x)
    if expect_shape(out, x.shape, what="softmax of a (2, 3, 4, 5, 6) float32 array", idea=ROWS):
        expect_dtype(out, np.float32, what="softmax of a float32 array with four batch axes", idea=DTYPE)
        expect_close(out, _softmax(x), what="softmax of a (2, 3, 4, 5, 6) float32 array", idea=ROWS,
                     rtol=1e-5, atol=1e-7)


def test_float32_along_a_middle_axis(impl):
    x = np.random.default_rng(12).normal(size=(3, 7, 2, 5)).astype(np.float32)
    out = impl.softmax(x, axis=-3)
    if expect_shape(out, x.shape, what="softmax(x, axis=-3) of a (3, 7, 2, 5) float32 array", idea=ROWS):
        expect_close(out, _softmax(x, axis=1), what="softmax(x, axis=-3): slices along the axis of size 7",
                     idea="use the `axis` argument (also negative) in every reduction, not a fixed axis",
                     rtol=1e-5, atol=1e-7)


def test_length_one_slices(impl):
    x = np.random.default_rng(13).normal(size=(4, 1))
    out = impl.softmax(x)
    expect_close(out, np.ones((4, 1)), what="softmax over an axis of length 1 (one key per query)",
                 idea="a single entry gets all the weight: exp(x) / exp(x) = 1 whatever x is")
    out = impl.softmax(np.array([-1e300]))
    low = isinstance(out, np.ndarray) and out.dtype in (np.float32, np.float16)
    expect_close(out, [1.0], what="softmax of the single score -1e300",
                 idea=(f"a question of precision, not of the formula: yours is {out.dtype if low else ''}, where "
                       "-1e300 is beyond the range and becomes -inf; this kit's contract is float64 in, float64 "
                       "out (torch's default dtype is float32: use torch.float64)") if low else
                 STABLE + "; with one entry the shifted score is exactly 0")
    # The contrast: ones of x's shape give every length-one slice its weight too.
    two = np.array([[0.0, 1.0], [2.0, -1.0]])
    expect_differs(impl.softmax(two), np.ones_like(two), what="softmax of two rows of two scores, against ones",
                   expected="weights below 1 (neither of two keys gets all the weight)",
                   passed="a single entry gets weight 1", idea=ROWS)


def test_long_float32_row(impl):
    x = np.random.default_rng(14).normal(scale=4.0, size=(2, 4099)).astype(np.float32)
    out = impl.softmax(x)
    if expect_shape(out, x.shape, what="softmax of two float32 rows of 4099 scores", idea=ROWS):
        expect_dtype(out, np.float32, what="softmax of a long float32 row", idea=DTYPE)
        expect_close(out.astype(np.float64).sum(axis=-1), [1.0, 1.0], what="long float32 rows sum to 1",
                     idea=ROWS, rtol=1e-4)
        expect_close(out, _softmax(x), what="softmax of two float32 rows of 4099 scores", idea=ROWS,
                     rtol=1e-4, atol=1e-9)


def test_transposed_and_strided_views(impl):
    base = np.random.default_rng(15).normal(size=(6, 4, 8))
    for label, x in (("a transposed view x.T", base.T), ("a strided view x[:, ::2, ::3]", base[:, ::2, ::3]),
                     ("a swapped-axes view", np.swapaxes(base, 0, 2))):
        out = impl.softmax(x)
        if expect_shape(out, x.shape, what=f"softmax of {label} of shape {x.shape}", idea=ROWS):
            expect_close(out, _softmax(x), what=f"softmax of {label} (not a contiguous array)",
                         idea="work with the array's shape and axes, not its memory layout (no .ravel() "
                              "or reshape that assumes C order)")


def test_integer_scores(impl):
    x = np.array([[1, 2, 3], [0, 0, 0], [-5, 10, 2]])
    out = impl.softmax(x)
    if expect(isinstance(out, np.ndarray) and np.issubdtype(out.dtype, np.floating),
              what="softmax of an integer array", expected="a floating-point array (float64)",
              observed=f"{getattr(out, 'dtype', type(out).__name__)}",
              idea="integer scores are treated as float64: convert before subtracting and dividing"):
        expect_close(out, _softmax(x), what="softmax of integer scores [[1, 2, 3], [0, 0, 0], [-5, 10, 2]]",
                     idea="integer division or an integer output array truncates the weights to 0")


def test_huge_float32_scores(impl):
    x = np.array([[1e30, 0.0, -1e30, 1e30], [-1e30, -1e30, -2e30, -1e30]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = impl.softmax(x)
    if expect_no_nan(out, what="softmax of float32 scores as large as 1e30", idea=STABLE):
        expect_close(out, [[0.5, 0.0, 0.0, 0.5], [1 / 3, 1 / 3, 0.0, 1 / 3]],
                     what="softmax of float32 scores of +-1e30 (the largest ones share the weight)",
                     idea=STABLE, rtol=1e-6, atol=1e-7, dtype=np.float32)


def test_float32_masked_slices_in_a_batch(impl):
    x = np.random.default_rng(16).normal(size=(2, 3, 4, 5)).astype(np.float32)
    x[0, 1, 2, :] = -np.inf
    x[1, 2, :, 1:4] = -np.inf
    blocked = np.zeros(x.shape, dtype=bool)
    blocked[0, 1, 2, :] = True  # (the one slice with no allowed entry)
    out = call_expecting_no_warning(impl.softmax, x, idea=MASKED, explain=lambda out: nan_rows(out, blocked),
                                    what="float32 softmax with a fully -inf slice raises no RuntimeWarning")
    if expect_no_nan(out, what="float32 softmax of a (2, 3, 4, 5) batch with -inf entries",
                     idea=with_convention(MASKED, nan_rows(out, blocked))):
        expect_close(out[0, 1, 2], np.zeros(5), what="the all -inf slice [0, 1, 2] becomes zeros",
                     idea=MASKED, atol=0.0, rtol=0.0)
        expect_close(out[1, 2, :, 1:4], np.zeros((4, 3)), what="-inf entries get weight exactly 0",
                     idea=MASKED, atol=0.0, rtol=0.0)
        expect_close(out[1, 2].sum(axis=-1), np.ones(4), what="rows with some -inf entries still sum to 1",
                     idea=MASKED, rtol=1e-6, dtype=np.float32)
