"""Hidden tests of exercise 14, retrieval: one entry per slice, four axes, large offsets, integers, views."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

# The example of `python -m grader.authoring.new_exercise` (see CONTRIBUTING.md and grader/hidden_tests/__init__.py):
# hidden tests check what the public suite leaves out (odd sizes, dtypes, views, extremes), with the same helpers.
# EXERCISE names the manifest exercise; its hidden_points are split equally between the tests (POINTS = n overrides).

from __future__ import annotations

import numpy as np

from tests.feedback import expect_close, expect_shape

EXERCISE = "retrieval"

CENTRED = "centring subtracts each slice's own mean along `axis`, kept as an axis of length one"


def test_a_slice_of_one_entry_becomes_zero(impl):
    x = np.array([[3.0], [-2.5]])
    out = impl.cosine_similarity(x)
    if expect_shape(out, (2, 1), what="cosine_similarity of a (2, 1) array", idea=CENTRED):
        expect_close(out, np.zeros((2, 1)), what="cosine_similarity of slices of one entry: each is its own mean",
                     idea=CENTRED)


def test_four_axes_along_axis_one(impl):
    x = np.random.default_rng(1401 + 50).normal(loc=-3.0, size=(2, 3, 4, 5))
    out = impl.cosine_similarity(x, axis=1)
    if expect_shape(out, x.shape, what="cosine_similarity(x, axis=1) of a (2, 3, 4, 5) array", idea=CENTRED):
        expect_close(out.mean(axis=1), np.zeros((2, 4, 5)), atol=1e-12,
                     what="the means along axis 1 of cosine_similarity(x, axis=1)", idea=CENTRED)


def test_large_offsets_keep_the_differences(impl):
    x = np.random.default_rng(1401 + 51).normal(size=(3, 6)) + 1e6
    out = impl.cosine_similarity(x)
    if expect_shape(out, x.shape, what="cosine_similarity of scores near a million", idea=CENTRED):
        expect_close(out, x - x.mean(axis=-1, keepdims=True), rtol=1e-6, atol=1e-8,
                     what="cosine_similarity of scores near a million", idea=CENTRED)


def test_integer_scores_give_float_means_of_zero(impl):
    x = np.array([[1, 2, 4], [0, 0, 3]])
    out = impl.cosine_similarity(x)
    if expect_shape(out, (2, 3), what="cosine_similarity of integer scores", idea=CENTRED):
        expect_close(out, np.array([[-4.0, -1.0, 5.0], [-3.0, -3.0, 6.0]]) / 3,
                     what="cosine_similarity of [[1, 2, 4], [0, 0, 3]] (the first row's mean, 7/3, is no integer)",
                     idea=CENTRED + "; the result is float even for integer input")


def test_a_transposed_view(impl):
    base = np.random.default_rng(1401 + 52).normal(size=(5, 3))
    out = impl.cosine_similarity(base.T)
    if expect_shape(out, (3, 5), what="cosine_similarity of a transposed (3, 5) view", idea=CENTRED):
        expect_close(out.mean(axis=-1), np.zeros(3), atol=1e-12,
                     what="the row means of cosine_similarity of a transposed view", idea=CENTRED)
