"""Exercise 2: projections. Random weights on the right scale, then x @ W for queries, keys and values."""

from __future__ import annotations

import numpy as np

from tests import kinds, unseen
from tests.conventions import init_scale, with_convention
from tests.crash import raising_through
from tests.effort import message, require
from tests.feedback import (
    call_or_explain,
    expect,
    expect_array,
    expect_close,
    expect_dtype,
    expect_raises_value_error,
    expect_shape,
)
from tests.probes import expect_probe, probe
from tests.steps import names

INIT = "init_weight draws N(0, std) entries with std = 1/sqrt(d_in), so that x @ W keeps the scale of x"
DRAWS = ("randomness comes only from the `rng` argument: one call rng.normal(0, 1/sqrt(d_in), "
         "size=(d_in, d_out)) (not np.random.*, not a (d_out, d_in) draw transposed)")
LINEAR = "a projection multiplies every row vector by the weight: (..., d_in) @ (d_in, d_out) -> (..., d_out)"
BIAS = "the bias has one entry per output feature and is added to every row, after the product"
QKV = "queries, keys and values are three projections of the same tokens, each with its own weight: (q, k, v)"


def _row_by_row(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Compute x @ weight one row vector at a time (no batched matmul)."""
    rows = x.reshape(-1, x.shape[-1])
    out = np.stack([np.sum(row[:, None] * weight, axis=0) for row in rows])
    return out.reshape(x.shape[:-1] + (weight.shape[1],))



# The names of the result arrays, for a diagnosis that points at the ones that differ (tests/steps.py).
names("qkv_projections", "q", "k", "v")

@probe("init_weight")
def seeded_five_by_three():
    # A fresh generator for every call, so the probe draws the same numbers each time. The global
    # state is seeded too: a draw from np.random instead of rng is then repeatable, and recognisable.
    np.random.seed(211)
    return (np.random.default_rng(210), 5, 3), {}


@probe("linear")
def batch_with_bias():
    rng = np.random.default_rng(212)
    return (rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4)), rng.normal(size=4)), {}


@probe("linear")
def sequences_as_long_as_d_in():
    # n == d_in on purpose: a transpose of the whole batched x then fits and runs without error.
    rng = np.random.default_rng(213)
    return (rng.normal(size=(2, 4, 4)), rng.normal(size=(4, 3))), {}


@probe("linear")
def square_weight_with_bias():
    # d_in == d_out on purpose: a weight used transposed (PyTorch's (d_out, d_in) layout) then runs.
    rng = np.random.default_rng(216)
    return (rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 4)), rng.normal(size=4)), {}


@probe("linear")
def float32_with_bias():
    rng = np.random.default_rng(214)
    x, weight, bias = rng.normal(size=(3, 5)), rng.normal(size=(5, 2)), rng.normal(size=2)
    return (x.astype(np.float32), weight.astype(np.float32), bias.astype(np.float32)), {}


@probe("linear", rejects="weight")
def weight_that_does_not_fit():
    rng = np.random.default_rng(29)
    return (rng.normal(size=(2, 3, 5)), rng.normal(size=(4, 6))), {}


@probe("qkv_projections")
def values_wider_than_keys():
    rng = np.random.default_rng(215)
    return (rng.normal(size=(2, 5, 6)), rng.normal(size=(6, 4)), rng.normal(size=(6, 4)),
            rng.normal(size=(6, 3))), {}


def _generator_gate(impl) -> list:
    """Why ``init_weight`` does not draw from ``rng`` (empty when it does, or when the tests' own checks say more).

    Generators of different seeds must give different weights: a fixed pattern scaled to 1/sqrt(d_in) (quantiles of
    the normal law, a formula) has the right shape, mean and spread, and draws nothing.
    """
    try:
        with raising_through():  # a crash is the test's own finding
            first, other = (np.asarray(impl.init_weight(np.random.default_rng(seed), 5, 3)) for seed in (2_001, 2_002))
    except Exception:  # noqa: BLE001 - what the function raises is the test's own check to report
        return []
    # (equal_nan: NaN weights are one pattern too; unequal to themselves, they passed for two draws)
    if first.shape != (5, 3) or not np.array_equal(first, other, equal_nan=True):
        return []
    return [message("init_weight(rng, 5, 3) with generators of seeds 2001 and 2002",
                    "two different matrices: the weights are drawn from rng",
                    "the same matrix: the weights do not depend on rng (a pattern, not a draw)", DRAWS)]


def require_draws(impl) -> bool:
    """Fail the test unless ``init_weight`` draws from its generator (:func:`_generator_gate`)."""
    return require(impl, "init_weight", lambda: _generator_gate(impl), key="draws")


def test_init_weight_shape_and_dtype(impl):
    require_draws(impl)
    w = impl.init_weight(np.random.default_rng(20), 7, 3)
    if expect_array(w, what="init_weight(rng, d_in=7, d_out=3)", idea=INIT):
        expect_shape(w, (7, 3), what="init_weight(rng, d_in=7, d_out=3)",
                     idea="the weight maps d_in input features to d_out outputs: (d_in, d_out), for x @ W")
        expect_dtype(w, np.float64, what="init_weight(rng, 7, 3)", idea="weights are drawn as float64")


def test_init_weight_mean_and_std(impl):
    # d_in != d_out and a large draw, so 1/sqrt(d_in), 1/sqrt(d_out), 1/d_in and 1 are told apart.
    require_draws(impl)
    for d_in, d_out in ((400, 100), (25, 900)):
        w = impl.init_weight(np.random.default_rng(21), d_in, d_out)
        if not expect_shape(w, (d_in, d_out), what=f"init_weight(rng, {d_in}, {d_out})", idea=INIT):
            continue
        target = 1 / np.sqrt(d_in)
        std, mean = float(np.std(w)), float(np.mean(w))
        candidates = {"1/sqrt(d_out)": 1 / np.sqrt(d_out), "1/d_in": 1 / d_in, "1 (no scaling)": 1.0}
        guess = [name for name, value in candidates.items() if abs(std / value - 1) < 0.05]
        expect(abs(std / target - 1) < 0.05, what=f"standard deviation of init_weight(rng, {d_in}, {d_out})",
               expected=f"about 1/sqrt(d_in) = {target:.4g} (within 5%)",
               observed=f"{std:.4g}" + (f", which is {guess[0]}" if guess else ""),
               idea=with_convention(INIT, init_scale(w, d_in, d_out)))
        expect(abs(mean) < 5 * target / np.sqrt(w.size), what=f"mean of init_weight(rng, {d_in}, {d_out})",
               expected=f"about 0 (within {5 * target / np.sqrt(w.size):.2g})", observed=f"{mean:.4g}",
               idea="the weights are centred: a normal distribution with mean 0")


def test_init_weight_uses_the_generator(impl):
    require_draws(impl)
    d_in, d_out = 6, 4
    w = impl.init_weight(np.random.default_rng(22), d_in, d_out)
    expected = np.random.default_rng(22).normal(0.0, 1 / np.sqrt(d_in), size=(d_in, d_out))
    expect_close(w, expected, what="init_weight(default_rng(22), 6, 4) against the same seed's rng.normal",
                 idea=DRAWS, rtol=1e-12, atol=0.0)
    again = impl.init_weight(np.random.default_rng(22), d_in, d_out)
    expect_close(again, w, what="two calls with identically seeded generators give the same matrix",
                 idea=DRAWS, rtol=0.0, atol=0.0)


def test_init_weight_reproduces_the_reading_example(impl):
    # The reading (docs/reading.md#worked-example) draws the tokens first, then W_Q, W_K, W_V from the same generator.
    require_draws(impl)
    rng, numpy_rng = np.random.default_rng(42), np.random.default_rng(42)
    rng.normal(size=(8, 16))
    numpy_rng.normal(size=(8, 16))
    for name in ("W_Q", "W_K", "W_V"):
        expected = numpy_rng.normal(scale=1 / np.sqrt(16), size=(16, 8))
        expect_close(impl.init_weight(rng, 16, 8), expected,
                     what=f"{name} of the reading's example (docs/reading.md#worked-example): "
                          "init_weight(rng, 16, 8) after the token draw",
                     idea=DRAWS + "; each call draws exactly d_in * d_out numbers", rtol=1e-12, atol=0.0)


def test_init_weight_rejects_bad_sizes(impl):
    rng = np.random.default_rng(23)
    idea = "bad input raises ValueError naming the argument: sizes must be positive integers"
    expect_raises_value_error(lambda: impl.init_weight(rng, 0, 4), argument="d_in",
                              what="init_weight(rng, d_in=0, d_out=4)", idea=idea)
    expect_raises_value_error(lambda: impl.init_weight(rng, 4, -2), argument="d_out",
                              what="init_weight(rng, d_in=4, d_out=-2)", idea=idea)


def test_linear_shape_with_batch_axes(impl):
    rng = np.random.default_rng(24)
    x, weight = rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4))
    what = "linear(x, weight) with x (2, 3, 5) and weight (5, 4)"
    out = call_or_explain(impl.linear, x, weight, what=what,
                          idea=LINEAR + "; keep the row-vector form x @ weight, (..., d_in) @ (d_in, d_out): no "
                          "transpose of x or of weight is needed, and x.T on a batched x reverses every axis")
    expect_shape(out, (2, 3, 4), what=what, idea=LINEAR + "; `@` handles the leading batch axes by itself")


def test_linear_without_bias(impl):
    rng = np.random.default_rng(25)
    x, weight = rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4))
    expect_close(impl.linear(x, weight), _row_by_row(x, weight),
                 what="linear(x, weight) with x (2, 3, 5), weight (5, 4), no bias", idea=LINEAR)


def test_linear_adds_the_bias(impl):
    rng = np.random.default_rng(26)
    x, weight, bias = rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4)), rng.normal(size=4)
    out = impl.linear(x, weight, bias)
    if expect_shape(out, (2, 3, 4), what="linear(x, weight, bias) with x (2, 3, 5), weight (5, 4), bias (4,)",
                    idea=BIAS):
        if not expect_close(out, _row_by_row(x, weight) + bias, what="linear(x, weight, bias)", idea=BIAS):
            expect(not np.allclose(out, _row_by_row(x, weight)), what="linear(x, weight, bias) ignores bias",
                   expected="x @ weight + bias", observed="x @ weight", idea=BIAS)


def test_linear_keeps_float32(impl):
    rng = np.random.default_rng(27)
    x = rng.normal(size=(3, 5)).astype(np.float32)
    weight, bias = rng.normal(size=(5, 2)).astype(np.float32), rng.normal(size=2).astype(np.float32)
    expect_dtype(impl.linear(x, weight), np.float32, what="linear of float32 x and weight",
                 idea="dtype in = dtype out: do not convert x or weight to float64")
    expect_dtype(impl.linear(x, weight, bias), np.float32, what="linear of float32 x, weight and bias",
                 idea="dtype in = dtype out: do not convert x, weight or bias to float64")


def test_linear_rows_do_not_mix(impl):
    rng = np.random.default_rng(28)
    x, weight, bias = rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4)), rng.normal(size=4)
    out = impl.linear(x, weight, bias)
    if not expect_shape(out, (2, 3, 4), what="linear(x, weight, bias) with x (2, 3, 5)", idea=LINEAR):
        return
    for b in range(2):
        for t in range(3):
            expect_close(out[b, t], x[b, t] @ weight + bias, what=f"row [{b}, {t}] of linear(x, w, bias)",
                         idea="each row is projected on its own: out[b, t] = x[b, t] @ weight + bias")
    changed = x.copy()
    changed[1, 2] += 10.0
    moved = np.abs(impl.linear(changed, weight, bias) - out).max(axis=-1) > 1e-9
    expect(bool(moved[1, 2]) and int(moved.sum()) == 1, what="changing one row of x changes one output row",
           expected="only row [1, 2] of the output changes",
           observed=f"the output rows that changed: {[tuple(int(i) for i in r) for r in np.argwhere(moved)]}",
           idea="a projection acts on each token separately; no information passes between rows")


def test_linear_rejects_mismatched_shapes(impl):
    expect_probe(impl, "linear/weight_that_does_not_fit", what="linear(x, weight) with x (2, 3, 5) and weight (4, 6)",
                 idea="bad input raises ValueError naming the arguments: the last axis of x "
                      "must equal the first axis of weight")
    rng = np.random.default_rng(29)
    x = rng.normal(size=(2, 3, 5))
    expect_raises_value_error(lambda: impl.linear(x, rng.normal(size=(5, 4)), rng.normal(size=3)),
                              argument="bias", what="linear(x, weight, bias), weight (5, 4) and bias (3,)",
                              idea="bad input raises ValueError naming the argument: bias has shape (d_out,)")


def test_qkv_projections_order_and_weights(impl):
    rng = np.random.default_rng(30)
    x = rng.normal(size=(2, 5, 6))
    w_q, w_k, w_v = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))  # d_v != d_k
    result = impl.qkv_projections(x, w_q, w_k, w_v)
    if not expect(isinstance(result, tuple) and len(result) == 3, what="qkv_projections(x, w_q, w_k, w_v)",
                  expected="a tuple (q, k, v)", observed=f"{type(result).__name__}", idea=QKV):
        return
    expected = {"q": _row_by_row(x, w_q), "k": _row_by_row(x, w_k), "v": _row_by_row(x, w_v)}
    for index, name in enumerate(expected):
        got = result[index]
        equals = [other for other, value in expected.items()
                  if np.shape(got) == value.shape and np.allclose(got, value)]
        idea = f"item {index} equals x @ w_{equals[0]}; {QKV}" if equals and equals[0] != name else QKV
        expect_close(got, expected[name], idea=idea,
                     what=f"item {index} of qkv_projections(x, w_q, w_k, w_v), {name} = x @ w_{name}")


def test_reference_values(impl):
    require_draws(impl)
    expect_probe(impl, "init_weight/seeded_five_by_three", what="init_weight(default_rng(210), 5, 3)",
                 idea=DRAWS, rtol=1e-12, atol=0.0)
    expect_probe(impl, "linear/batch_with_bias", what="linear(x, weight, bias), x (2, 3, 5), weight (5, 4)",
                 idea=LINEAR + "; " + BIAS)
    expect_probe(impl, "linear/sequences_as_long_as_d_in", what="linear(x, weight), x (2, 4, 4), weight (4, 3)",
                 idea=LINEAR + "; keep the row-vector form x @ weight: no transpose of a batched x")
    expect_probe(impl, "linear/float32_with_bias", what="linear of float32 x (3, 5), weight and bias",
                 idea=LINEAR + "; dtype in = dtype out", rtol=1e-6, atol=1e-7)
    # A square weight: a transpose (PyTorch's (d_out, d_in) layout) runs there and nowhere else (a blind round: a
    # linear that transposed square weights only passed every test of this exercise, and failed exercise 6's).
    expect_probe(impl, "linear/square_weight_with_bias", what="linear(x, weight, bias), x (2, 3, 4), weight (4, 4)",
                 idea=LINEAR + "; weight is (d_in, d_out): x @ weight, never weight transposed, square or not")
    expect_probe(impl, "qkv_projections/values_wider_than_keys",
                 what="qkv_projections(x, w_q, w_k, w_v) with d_k = 4 and d_v = 3", idea=QKV)


# ----------------------------------------------------------------------------- every kind of input


@probe("linear")
def two_batch_axes_with_bias():
    rng = kinds.rng("linear/two_batch_axes")
    return (rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(5, 6)), rng.normal(size=6)), {}


def test_linear_any_number_of_leading_axes(impl):
    idea = ("x may have any number of leading axes, none included: (..., d_in) @ (d_in, d_out) handles them all; "
            "never unpack a fixed number of axes or reshape with a fixed batch size")
    rng = kinds.rng("linear/leading")
    weight, bias = rng.normal(size=(5, 6)), rng.normal(size=6)
    for lead in kinds.MORE_LEADING:
        x = kinds.normal(f"linear/lead{len(lead)}", (*lead, 4, 5))
        expect_close(impl.linear(x, weight, bias), _row_by_row(x, weight) + bias, idea=idea,
                     what=f"linear(x, weight (5, 6), bias) with x {x.shape} ({kinds.describe_axes(lead)})")
    x = kinds.normal("linear/one_token", (5,))
    expect_close(impl.linear(x, weight, bias), x @ weight + bias, idea=idea,
                 what="linear(x, weight, bias) of a single token x of shape (5,)")
    expect_probe(impl, "linear/two_batch_axes_with_bias", what="linear of a fixed (2, 3, 4, 5) x, weight (5, 6), bias",
                 idea=idea)


def test_qkv_projections_with_sizes_far_apart(impl):
    # d_k and d_v far apart (and d_v > d_k): splitting one fused product into near-equal parts is wrong here.
    x = kinds.normal("qkv/far", (2, 3, 7))
    for d_k, d_v in ((5, 2), (2, 6)):
        rng = kinds.rng(f"qkv/far/{d_k}/{d_v}")
        w_q, w_k, w_v = rng.normal(size=(7, d_k)), rng.normal(size=(7, d_k)), rng.normal(size=(7, d_v))
        result = impl.qkv_projections(x, w_q, w_k, w_v)
        if not expect(isinstance(result, tuple) and len(result) == 3, what="qkv_projections(x, w_q, w_k, w_v)",
                      expected="a tuple (q, k, v)", observed=f"{type(result).__name__}", idea=QKV):
            return
        for got, name, weight in zip(result, "qkv", (w_q, w_k, w_v), strict=True):
            expect_close(got, _row_by_row(x, weight), idea=QKV + "; each with its own weight, whatever its width",
                         what=f"{name} of qkv_projections with d_k = {d_k} and d_v = {d_v}")


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_linear(rng: np.random.Generator) -> tuple[tuple, dict]:
    batch, n, d_in, d_out = unseen.sizes(rng, (1, 4), (2, 6), (2, 7), (2, 7))
    x = rng.normal(size=(batch, n, d_in))
    return (x, rng.normal(size=(d_in, d_out))), {"bias": rng.normal(size=d_out)}


def _unseen_qkv(rng: np.random.Generator) -> tuple[tuple, dict]:
    batch, n, d_model, d_k, d_v = unseen.sizes(rng, (1, 4), (2, 6), (2, 8), (2, 8), (2, 8))
    x = rng.normal(size=(batch, n, d_model))
    return (x, rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_v))), {}


def _own_init_weight(rng: np.random.Generator, d_in: int, d_out: int) -> np.ndarray:
    return rng.normal(0.0, 1.0 / np.sqrt(d_in), size=(d_in, d_out))


unseen.register("projections", {
    "init_weight": unseen.Twin(lambda rng: ((unseen.generator(rng), *unseen.sizes(rng, (2, 9), (2, 9))),
                                            {}), _own_init_weight, DRAWS, unseen.close),
    "linear": unseen.Twin(_unseen_linear, lambda x, weight, bias=None: np.einsum("...i,io->...o", x, weight) + (
                              0.0 if bias is None else bias),
                          LINEAR + "; " + BIAS, unseen.close),
    "qkv_projections": unseen.Twin(_unseen_qkv, lambda x, w_q, w_k, w_v: tuple(
        np.einsum("...i,io->...o", x, w) for w in (w_q, w_k, w_v)), QKV, unseen.close),
})
