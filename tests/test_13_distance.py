"""Exercise 13: distance. From the shape of the result to the property that makes it useful."""

# The example of `python -m grader.authoring.new_exercise` (see CONTRIBUTING.md): each test checks one property, from
# the most basic (the shape) to the subtle one, with the kit's helpers (tests/feedback.py), so that a failure says
# what was expected, what was observed and which idea to revisit. A property is derived here, never copied from the
# reference; where no property gives the expected values, a probe (a seeded input declared with @probe) is compared
# with the reference's output, stored in tests/data/golden.npz by `python -m grader.authoring.golden`.

from __future__ import annotations

import numpy as np

from tests.feedback import expect_array, expect_close, expect_shape
from tests.probes import expect_probe, probe

CENTRED = ("centring: subtract each slice's own mean along `axis` (kept as an axis of length one), "
           "not the mean of the whole array")
SHIFT = "centring only shifts a slice: the differences between its entries stay exactly as they were"
SOFTMAX = "softmax ignores a number added to every score of a slice, so centring changes no weight"
CHECKS = "bad input raises ValueError, and the message names the offending argument"


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The test's own stable softmax, so this property does not depend on the student's exercise 1."""
    exps = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exps / exps.sum(axis=axis, keepdims=True)


@probe("alibi_scores")
def fixed_scores():
    rng = np.random.default_rng(1301)
    return (rng.normal(loc=2.0, scale=3.0, size=(2, 3, 5)),), {}


@probe("alibi_scores", rejects="x")
def a_single_number():
    return (np.float64(1.5),), {}


def test_keeps_the_shape(impl):
    x = np.random.default_rng(1301 + 1).normal(size=(3, 4))
    out = impl.alibi_scores(x)
    if expect_array(out, what="alibi_scores(x) of a (3, 4) array", idea=CENTRED):
        expect_shape(out, (3, 4), what="alibi_scores(x) has the shape of x", idea=CENTRED)


def test_every_slice_has_mean_zero(impl):
    x = np.random.default_rng(1301 + 2).normal(loc=5.0, size=(2, 3, 4))
    for axis, means_shape in ((-1, (2, 3)), (0, (3, 4))):
        out = impl.alibi_scores(x, axis=axis)
        if expect_shape(out, x.shape, what=f"alibi_scores(x, axis={axis})", idea=CENTRED):
            expect_close(np.mean(out, axis=axis), np.zeros(means_shape), atol=1e-12,
                         what=f"the mean of every slice of alibi_scores(x, axis={axis}) along axis {axis}",
                         idea=CENTRED)


def test_only_shifts_each_slice(impl):
    x = np.random.default_rng(1301 + 3).normal(size=(4, 6))
    out = impl.alibi_scores(x)
    if expect_shape(out, x.shape, what="alibi_scores(x) of a (4, 6) array", idea=SHIFT):
        expect_close(np.diff(out, axis=-1), np.diff(x, axis=-1), rtol=1e-12, atol=1e-12,
                     what="the differences between neighbouring entries of each row, before and after", idea=SHIFT)


def test_softmax_is_unchanged(impl):
    x = np.random.default_rng(1301 + 4).normal(scale=4.0, size=(3, 5))
    out = impl.alibi_scores(x)
    if expect_shape(out, x.shape, what="alibi_scores(x) of a (3, 5) array", idea=SOFTMAX):
        expect_close(_softmax(out), _softmax(x), rtol=1e-12, what="softmax of alibi_scores(x) against softmax of x",
                     idea=SOFTMAX)


def test_rejects_bad_input(impl):
    expect_probe(impl, "alibi_scores/a_single_number", what="alibi_scores of a single number (no axis)",
                 idea=CHECKS)


def test_reference_values(impl):
    expect_probe(impl, "alibi_scores/fixed_scores", what="alibi_scores on the fixed input alibi_scores/fixed_scores",
                 idea=CENTRED)
