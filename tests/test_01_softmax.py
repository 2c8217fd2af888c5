"""Exercise 1: softmax. From the basic contract to the numerical edge cases."""

from __future__ import annotations

import warnings

import numpy as np

from tests import kinds, unseen
from tests.conventions import nan_rows
from tests.feedback import (
    call_expecting_no_warning,
    expect,
    expect_array,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_no_nan,
    expect_raises_value_error,
    expect_shape,
    nan_idea,
)
from tests.probes import expect_probe, probe

ROWS = "softmax normalises each slice along `axis`: exp(x) / sum(exp(x)) over that axis only"
STABLE = "numerical stability: subtract the maximum of each slice (keepdims=True) before np.exp"
MASKED = "masking: exp(-inf) is 0, and a slice with no allowed entry has nothing to normalise (all zeros)"


@probe("softmax")
def mixed_scores():
    rng = np.random.default_rng(101)
    return (rng.normal(scale=3.0, size=(2, 3, 5)),), {}


@probe("softmax")
def square_scores():
    rng = np.random.default_rng(102)
    return (rng.normal(scale=2.0, size=(4, 4)),), {}


@probe("softmax")
def first_axis():
    rng = np.random.default_rng(103)
    return (rng.normal(size=(3, 4, 5)),), {"axis": 0}


@probe("softmax")
def integer_scores():
    # Integer input, a float result: a result made like x (np.zeros_like(x)) would be integers.
    return (np.random.default_rng(106).integers(-3, 4, size=(3, 5)),), {}


@probe("softmax")
def first_axis_input_over_the_last():
    # first_axis's input with the default axis: a softmax that ignores its axis gives this for axis=0.
    return (np.random.default_rng(103).normal(size=(3, 4, 5)),), {}


@probe("softmax")
def float32_scores():
    rng = np.random.default_rng(104)
    return (rng.normal(scale=2.0, size=(3, 5)).astype(np.float32),), {}


@probe("softmax")
def masked_scores():
    # Everything that breaks a naive softmax at once: rows far below and far above the
    # others (underflow, overflow), a few -inf entries and one fully masked row.
    rng = np.random.default_rng(105)
    x = rng.normal(scale=3.0, size=(2, 3, 6))
    x[0, 1] -= 900.0
    x[1, 0] += 1000.0
    x[0, 2, [1, 4]] = -np.inf
    x[1, 2] = -np.inf
    return (x,), {}


def test_returns_same_shape_and_dtype(impl):
    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(1).normal(size=(2, 3, 5)).astype(dtype)
        out = impl.softmax(x)
        if expect_array(out, what=f"softmax of a {dtype.__name__} array", idea=ROWS):
            expect_shape(out, x.shape, what="softmax keeps the input's shape", idea=ROWS)
            expect_dtype(out, dtype, what=f"softmax of a {dtype.__name__} input",
                         idea="dtype in = dtype out: do not upcast with float64 constants or np.float64(...)")


def test_rows_sum_to_one(impl):
    x = np.random.default_rng(2).normal(scale=2.0, size=(3, 4, 6))
    out = impl.softmax(x)
    if expect_shape(out, x.shape, what="softmax keeps the input's shape", idea=ROWS):
        sums = out.sum(axis=-1)
        if not expect_close(sums, np.ones((3, 4)), what="each row (last axis) of softmax(x) sums to 1", idea=ROWS):
            expect(not np.allclose(out.sum(axis=-2), 1.0), what="softmax normalised the wrong axis",
                   expected="rows (the last axis) summing to 1", observed="columns summing to 1",
                   idea="softmax over the key axis: axis=-1, so each query's weights sum to 1")
        expect(bool(np.all(out >= 0)), what="softmax weights are never negative",
               expected="all entries >= 0", observed=f"minimum {out.min():.4g}", idea=ROWS)
        # The contrast: rows of a fixed answer (the softmax of other scores, 1/n everywhere) sum to 1 too.
        expect_differs(impl.softmax(2.0 * x), out, what="softmax(2 x) against softmax(x)",
                       expected="different weights: doubling the scores sharpens each row (the largest score gains)",
                       passed="rows sum to 1 and are never negative", idea=ROWS)


def test_matches_exponential_formula(impl):
    x = np.array([[0.0, 1.0, 2.0, 3.0], [-1.0, 0.0, 0.5, 10.0]])
    expected = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
    expect_close(impl.softmax(x), expected, what="softmax of two small rows", idea=ROWS)


def test_square_input_uses_the_row_maximum(impl):
    # On a square array a max without keepdims broadcasts along the wrong axis and nothing crashes.
    x = np.array([[1.0, 2.0, 30.0], [4.0, 50.0, 6.0], [70.0, 8.0, 9.0]])
    expected = np.exp(x - x.max(axis=-1, keepdims=True))
    expected /= expected.sum(axis=-1, keepdims=True)
    expect_close(impl.softmax(x), expected, what="softmax of a square 3x3 array",
                 idea="keep the reduced axis (keepdims=True) so each row's max is subtracted from its own row")


def test_shift_invariance(impl):
    x = np.random.default_rng(3).normal(size=(4, 7))
    shift = np.array([[-5.0], [0.5], [20.0], [-100.0]])
    out = impl.softmax(x)
    # Comparing two outputs of the same function: all-NaN or all-zero outputs would agree with themselves,
    # so the output must first be a softmax at all (finite, rows summing to 1).
    if (expect_shape(out, x.shape, what="softmax keeps the input's shape", idea=ROWS)
            and expect_no_nan(out, what="softmax of ordinary scores", idea=ROWS)
            and expect_close(out.sum(axis=-1), np.ones(4), what="each row of the softmax sums to 1", idea=ROWS)):
        expect_close(impl.softmax(x + shift), out,
                     what="adding a constant to a row leaves its softmax unchanged",
                     idea="softmax depends only on differences of scores within a slice")
        # The contrast: a result that ignores x is unchanged by any change of x, not only by a shift.
        expect_differs(impl.softmax(2.0 * x), out, what="softmax(2 x) against softmax(x)",
                       expected="different weights: doubling the scores changes their differences",
                       passed="a constant added to a row changes nothing",
                       idea="softmax depends only on differences of scores within a slice")


def test_each_slice_uses_its_own_maximum(impl):
    # Rows hundreds apart: a single maximum for the whole array sends the low row's
    # exponentials below the smallest float, and that row no longer sums to 1.
    x = np.random.default_rng(5).normal(size=(3, 5)) + np.array([[0.0], [-900.0], [40.0]])
    # (Not "not the maximum of the array": a softmax that subtracts no maximum at all fails here first too.)
    idea = ("subtract each slice's own maximum (np.max along `axis`, keepdims=True) before np.exp: a slice far "
            "below what was subtracted (nothing, or the maximum of the whole array) underflows to 0")
    out = impl.softmax(x)
    if expect_shape(out, x.shape, what="softmax keeps the input's shape", idea=ROWS):
        expect_close(out.sum(axis=-1), np.ones(3), what="rows whose scores lie hundreds apart each sum to 1",
                     idea=idea)
        expect_close(out, impl.softmax(x - x.mean(axis=-1, keepdims=True)),
                     what="rows far apart give the same weights as the same rows centred at 0", idea=idea)
        expect_differs(impl.softmax(2.0 * x), out, what="softmax(2 x) against softmax(x), rows far apart",
                       expected="different weights: doubling the scores changes their differences",
                       passed="rows sum to 1 and match the same rows centred at 0", idea=idea)


def test_reference_values(impl):
    for name in ("softmax/mixed_scores", "softmax/square_scores"):
        expect_probe(impl, name, what=f"softmax on the fixed input {name}", idea=ROWS)
    # float32 keeps about 7 digits, and a correct softmax may round differently from the reference.
    expect_probe(impl, "softmax/float32_scores", what="softmax on the fixed float32 input softmax/float32_scores",
                 idea=ROWS, rtol=1e-5, atol=1e-7)
    # And on scores that are no probe's: the golden values of the fixed inputs above do not hold their answer.
    fresh = kinds.normal("softmax/no-golden-value", (4, 6), scale=3.0)
    expect_close(impl.softmax(fresh), _softmax_by_hand(fresh, -1), what="softmax of seeded (4, 6) scores",
                 idea=ROWS + "; softmax must compute its result from x (an answer looked up for known inputs fits "
                             "no other ones)")


def test_large_scores_are_stable(impl):
    x = np.array([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = impl.softmax(x)
    if expect_no_nan(out, what="softmax of scores as large as 1e4", idea=STABLE):
        expect_close(out, [[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]], what="softmax of scores as large as 1e4",
                     idea=STABLE)


def test_negative_infinity_gets_zero_weight(impl):
    x = np.array([[0.0, -np.inf, 1.0, -np.inf], [-np.inf, 2.0, 2.0, -np.inf]])
    out = impl.softmax(x)
    if expect_no_nan(out, what="softmax with some -inf entries", idea=MASKED):
        expect_close(out[x == -np.inf], np.zeros(4), what="entries of -inf get weight exactly 0", idea=MASKED,
                     atol=0.0, rtol=0.0)
        expect_close(out.sum(axis=-1), [1.0, 1.0], what="rows with some -inf entries still sum to 1", idea=MASKED)


def test_all_masked_row_gives_zeros(impl):
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, 2.0]])
    blocked = np.zeros(x.shape, dtype=bool)
    blocked[0] = True  # (the row with no allowed entry)
    out = call_expecting_no_warning(impl.softmax, x, idea=MASKED, explain=lambda out: nan_rows(out, blocked),
                                    what="softmax of a row that is entirely -inf raises no RuntimeWarning")
    if expect_no_nan(out, what="softmax of a row that is entirely -inf", idea=nan_idea(out, blocked, MASKED)):
        expect_close(out[0], np.zeros(3), what="an all -inf row becomes all zeros (not NaN, not uniform)",
                     idea=MASKED, atol=0.0, rtol=0.0)
        expect_close(out[1].sum(), 1.0, what="the other row still sums to 1", idea=MASKED)


def test_axis_argument(impl):
    x = np.random.default_rng(4).normal(size=(3, 4, 5))
    for axis in (0, 1, -1):
        out = impl.softmax(x, axis=axis)
        if expect_shape(out, x.shape, what=f"softmax(x, axis={axis}) keeps the shape", idea=ROWS):
            expect_close(out.sum(axis=axis), np.ones(np.delete(x.shape, axis)),
                         what=f"softmax(x, axis={axis}) sums to 1 along axis {axis}",
                         idea="use the `axis` argument in every reduction (max and sum), not a fixed axis")
    expect_probe(impl, "softmax/first_axis", what="softmax(x, axis=0) of a (3, 4, 5) array",
                 idea="use the `axis` argument in every reduction (max and sum), not a fixed axis")


def test_rejects_a_bad_axis(impl):
    expect_raises_value_error(lambda: impl.softmax(np.zeros((2, 3)), axis=2), argument="axis",
                              what="softmax(x, axis=2) for a 2-D x",
                              idea="bad input raises ValueError naming the argument (numpy's AxisError is one)")


def test_reference_values_with_masks_and_extremes(impl):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the warning test above reports them
        expect_probe(impl, "softmax/masked_scores",
                     what="softmax of a fixed input with -inf entries, a fully masked row, "
                          "and rows near -900 and +1000",
                     idea=f"{STABLE}; {MASKED}")
        rng = kinds.rng("softmax/masked-no-golden-value")  # and a masked input that is no probe's
        fresh = rng.normal(scale=3.0, size=(5, 6)) + rng.choice([-900.0, 0.0, 1000.0], size=(5, 1))
        blocked = rng.random((5, 6)) < 0.3
        blocked[:, 0], blocked[4] = False, True
        top = np.where(blocked, -np.inf, fresh).max(axis=-1, keepdims=True)
        exps = np.where(blocked, 0.0, np.exp(fresh - np.where(np.isfinite(top), top, 0.0)))
        totals = exps.sum(axis=-1, keepdims=True)
        expected = np.divide(exps, totals, out=np.zeros_like(exps), where=totals > 0)
        expect_close(impl.softmax(np.where(blocked, -np.inf, fresh)), expected, idea=f"{STABLE}; {MASKED}",
                     what="softmax of a seeded masked input (-inf entries, row 4 fully masked, large rows)")


# ----------------------------------------------------------------------------- every kind of input


def _softmax_by_hand(x: np.ndarray, axis: int) -> np.ndarray:
    """The test's own softmax along ``axis`` (finite input only)."""
    moved = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    exps = np.exp(moved - moved.max(axis=-1, keepdims=True))
    return np.moveaxis(exps / exps.sum(axis=-1, keepdims=True), -1, axis)


@probe("softmax")
def second_to_last_axis_of_four():
    return (kinds.normal("softmax/second_to_last", (2, 3, 4, 5), scale=2.0),), {"axis": -2}


@probe("softmax")
def second_to_last_input_over_the_last():
    return (kinds.normal("softmax/second_to_last", (2, 3, 4, 5), scale=2.0),), {}


def test_every_other_axis_form_and_more_leading_axes(impl):
    idea = ("`axis` may be any axis, counted from the front (0, 1, ...) or from the end (-1 is the last, -2 the "
            "one before it, ...): reduce along exactly that axis, with keepdims=True")
    for lead in kinds.MORE_LEADING:
        x = kinds.normal(f"softmax/lead{len(lead)}", (*lead, 4, 5), scale=2.0)
        expect_close(impl.softmax(x), _softmax_by_hand(x, -1), idea=ROWS,
                     what=f"softmax of a {x.shape} array ({kinds.describe_axes(lead)})")
    x = kinds.normal("softmax/axes", (2, 3, 4, 5), scale=2.0)
    # test_axis_argument has 0, 1 and -1: here the other forms, negative axes beyond -1 above all.
    for axis in [a for a in kinds.axis_forms(x.ndim) if a not in (0, 1, -1)]:
        expect_close(impl.softmax(x, axis=axis), _softmax_by_hand(x, axis), idea=idea,
                     what=f"softmax(x, axis={axis}) of a (2, 3, 4, 5) array")
    expect_probe(impl, "softmax/second_to_last_axis_of_four", what="softmax(x, axis=-2) of a fixed (2, 3, 4, 5) array",
                 idea=idea)


def test_integer_scores_give_float64(impl):
    # Integer input only: the docstring promises it (the API does not promise boolean scores either way).
    idea = ("integer scores are treated as float64 (the docstring says so): convert x first "
            "(np.asarray(x, dtype=float) when it is not floating) and build the result from it, not like the input")
    ints = kinds.rng("softmax/ints").integers(-3, 4, size=(3, 5))
    out = impl.softmax(ints)
    if expect_dtype(out, np.float64, what=f"softmax of an integer {ints.shape} array", idea=idea):
        expect_close(out, _softmax_by_hand(ints.astype(np.float64), -1), idea=idea,
                     what="softmax of integer scores against the same scores as float64")


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_scores(rng: np.random.Generator) -> tuple[tuple, dict]:
    x = rng.normal(scale=3.0, size=unseen.sizes(rng, (2, 6), (2, 6), (2, 6)))
    return (x,), {"axis": int(rng.integers(-3, 3))}


unseen.register("softmax", {"softmax": unseen.Twin(_unseen_scores, lambda x, axis: _softmax_by_hand(x, axis), ROWS,
                                                   unseen.close)})
