"""Hidden tests of exercise 4, masks: size 1, long sequences, three-way broadcasting, dtypes."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.conventions import finite_additive, mask_form, with_convention
from tests.feedback import expect, expect_dtype, expect_equal, expect_raises_value_error, expect_shape
from tests.test_04_masks import require_causal_formula

EXERCISE = "masks"

CAUSAL = "a causal mask lets query i see keys 0..i, itself included: the lower triangle with its diagonal"
PADDING = "a padding mask is True where key j < lengths[b], shape (batch, 1, max_len) to broadcast over queries"
COMBINE = "combining masks is a logical AND with broadcasting: np.logical_and works for any shapes that fit"
ADDITIVE = "an additive mask is 0.0 where True and -inf where False, in the requested floating dtype"


def test_causal_mask_of_one_position(impl):
    require_causal_formula(impl)
    mask = impl.causal_mask(1)
    if expect_shape(mask, (1, 1), what="causal_mask(1)", idea=CAUSAL):
        form = "" if mask.dtype == np.bool_ else mask_form(impl.causal_mask(5))  # (one entry tells no form)
        expect_dtype(mask, np.bool_, what="causal_mask(1)",
                     idea=f"{form}: build it with dtype=bool" if form else CAUSAL)
        expect_equal(mask, np.array([[True]]), what="causal_mask(1): a lone token sees itself",
                     idea=CAUSAL + "; the diagonal is allowed, otherwise the first row has no key at all")


def test_long_causal_mask(impl):
    require_causal_formula(impl)
    n = 300
    mask = impl.causal_mask(n)
    if expect_shape(mask, (n, n), what=f"causal_mask({n})", idea=CAUSAL):
        rows, cols = np.indices((n, n))
        expect_equal(mask, cols <= rows, what=f"causal_mask({n}) entry [i, j] is True exactly when j <= i",
                     idea=CAUSAL)


def test_padding_mask_single_sequence(impl):
    for length, expected in ((1, [[[True]]]), (0, [[[False]]])):
        mask = impl.padding_mask(np.array([length]), 1)
        if expect_shape(mask, (1, 1, 1), what=f"padding_mask(lengths=[{length}], max_len=1)", idea=PADDING):
            expect_equal(mask, np.array(expected), what=f"padding_mask(lengths=[{length}], max_len=1)",
                         idea=PADDING + "; a length of 0 blocks every key")


def test_long_padding_mask_with_int32_lengths(impl):
    lengths = np.array([0, 499, 1, 500, 250], dtype=np.int32)
    mask = impl.padding_mask(lengths, 500)
    if expect_shape(mask, (5, 1, 500), what="padding_mask of 5 lengths (int32) with max_len 500", idea=PADDING):
        expect_dtype(mask, np.bool_, what="padding_mask with int32 lengths", idea=PADDING)
        expected = (np.arange(500)[None, :] < lengths[:, None].astype(np.int64))[:, None, :]
        expect_equal(mask, expected, what="padding_mask of lengths [0, 499, 1, 500, 250], max_len 500",
                     idea=PADDING)


def test_combine_three_masks_over_two_batch_axes(impl):
    n = 4
    causal = np.tril(np.ones((n, n), dtype=bool))
    padding = (np.arange(n) < np.array([4, 2, 3])[:, None])[:, None, :]  # (3, 1, 4)
    heads = np.random.default_rng(41).random((2, 1, 1, n)) < 0.7  # (2, 1, 1, 4)
    combined = impl.combine_masks(causal, padding, heads)
    if expect_shape(combined, (2, 3, n, n), what="combine_masks of (4, 4), (3, 1, 4) and (2, 1, 1, 4) masks",
                    idea=COMBINE):
        expect_dtype(combined, np.bool_, what="combine_masks of boolean masks", idea=COMBINE)
        expect_equal(combined, causal & padding & heads, what="combine_masks of three masks over two batch axes",
                     idea=COMBINE + "; every mask takes part, not only the first two")


def test_combine_a_single_transposed_mask(impl):
    base = np.random.default_rng(42).random((5, 3)) < 0.5
    combined = impl.combine_masks(base.T)
    expect_equal(combined, base.T, what="combine_masks of one (transposed) mask returns that mask",
                 idea=COMBINE + "; with a single mask there is nothing to AND it with")


def test_to_additive_float32_and_float16(impl):
    mask = np.random.default_rng(43).random((2, 3, 4, 5)) < 0.5
    for dtype in (np.float32, np.float16):
        additive = impl.to_additive(mask, dtype=dtype)
        if expect_shape(additive, mask.shape, what=f"to_additive of a (2, 3, 4, 5) mask, dtype {dtype.__name__}",
                        idea=ADDITIVE):
            expect_dtype(additive, dtype, what=f"to_additive(mask, dtype={dtype.__name__})", idea=ADDITIVE)
            values = np.asarray(additive, dtype=np.float64)
            expect(bool(np.all(values[mask] == 0.0)) and bool(np.all(values[~mask] == -np.inf)),
                   what=f"to_additive(mask, dtype={dtype.__name__}) values",
                   expected="0.0 where the mask is True, -inf where it is False",
                   observed=f"values {np.unique(values).tolist()[:6]}",
                   idea=with_convention(ADDITIVE + "; -1e9 is not -inf (and overflows in float16)",
                                        finite_additive(additive, mask)))


def test_rejects_bad_masks_and_lengths(impl):
    expect_raises_value_error(lambda: impl.to_additive(np.array([[1, 0], [0, 1]])), argument="mask",
                              what="to_additive of an integer 0/1 array",
                              idea="masks are boolean: reject others with a ValueError naming `mask`")
    expect_raises_value_error(lambda: impl.padding_mask(np.array([2, 7]), 5), argument="lengths",
                              what="padding_mask(lengths=[2, 7], max_len=5)",
                              idea="a length longer than max_len is bad input: ValueError naming `lengths`")
    expect_raises_value_error(lambda: impl.causal_mask(0), argument="n", what="causal_mask(0)",
                              idea="sizes are positive integers: ValueError naming `n`")
