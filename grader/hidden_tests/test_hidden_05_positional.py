"""Hidden tests of exercise 5, positional: tiny and long tables, float32 and fractional rotary, many heads."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.conventions import rotate_half, timing_signal, with_convention
from tests.feedback import expect_close, expect_differs, expect_dtype, expect_shape
from tests.test_05_positional import _alibi_idea, require_alibi_formula, require_sinusoidal_formula

EXERCISE = "positional"

SINUSOID = ("PE[p, 2i] = sin(p / 10000**(2i/d_model)), PE[p, 2i+1] = cos(same angle): "
            "columns interleaved, the pair index 2*(j//2) in the exponent")
ROTARY = ("rotary rotates each pair (x[..., 2i], x[..., 2i+1]) by the angle positions[p] * base**(-2i/d): "
          "(a, b) -> (a cos t - b sin t, a sin t + b cos t)")
ALIBI = "ALiBi: entry [h, i, j] = -slope_h * |i - j| with slope_h = 2**(-8 (h+1) / n_heads), h counted from 0"
DTYPE = "dtype in = dtype out: rotary keeps float32 queries and keys float32"


def _sinusoids(n_positions, d_model):
    """The table built column by column from the definition."""
    table = np.empty((n_positions, d_model))
    p = np.arange(n_positions, dtype=np.float64)
    for j in range(d_model):
        angle = p / 10000.0 ** ((j - j % 2) / d_model)
        table[:, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return table


def _rotate(x, positions, base=10000.0):
    """Rotary as complex multiplication: pair (a, b) is a + ib, turned by exp(i t)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    t = np.asarray(positions, dtype=np.float64)[:, None] * base ** (-np.arange(0, d, 2) / d)
    turned = z * np.exp(1j * t)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = turned.real, turned.imag
    return out


def _rotary_idea(idea: str, out, x: np.ndarray, positions: np.ndarray) -> str:
    """``idea``, or rotate_half's convention, or float32 angles' precision when ``out`` shows either."""
    convention = rotate_half(out, x, positions)
    if convention:
        return with_convention(idea, convention)
    right = _rotate(x.astype(np.float64), positions)
    if isinstance(out, np.ndarray) and out.shape == right.shape and out.dtype.kind == "f" \
            and np.allclose(out, right, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(right)))):
        return (f"{idea}; a question of precision, not of the formula: yours agrees to about float32's precision "
                "(angles p * base**(-2i/d) rounded to float32 lose more the larger p is); this kit's contract is "
                f"x's dtype ({x.dtype} here) throughout: compute the angles, their cos and sin in it")
    return idea


def test_sinusoidal_single_position_and_column(impl):
    require_sinusoidal_formula(impl)
    expect_close(impl.sinusoidal_encoding(1, 1), [[0.0]], what="sinusoidal_encoding(1, 1)",
                 idea=SINUSOID + "; position 0 gives sin(0) = 0 in the first column")
    table = impl.sinusoidal_encoding(1, 6)
    expect_close(table, [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0]],
                 what="sinusoidal_encoding(1, 6): position 0 is sin 0, cos 0 in every pair",
                 idea=with_convention(SINUSOID, timing_signal(table, 1, 6)))


def test_sinusoidal_long_odd_table(impl):
    require_sinusoidal_formula(impl)
    table = impl.sinusoidal_encoding(513, 7)
    if expect_shape(table, (513, 7), what="sinusoidal_encoding(513, 7)", idea=SINUSOID):
        expect_dtype(table, np.float64, what="sinusoidal_encoding(513, 7)", idea=SINUSOID)
        expect_close(table, _sinusoids(513, 7), what="sinusoidal_encoding(513, 7): odd width, long sequence",
                     idea=with_convention(SINUSOID + "; with odd d_model the last column is a sine",
                                          timing_signal(table, 513, 7)), rtol=1e-9, atol=1e-9)


def test_rotary_float32_four_axes(impl):
    x = np.random.default_rng(51).normal(size=(2, 3, 5, 8)).astype(np.float32)
    out = impl.rotary_embedding(x)
    if expect_shape(out, x.shape, what="rotary_embedding of a (2, 3, 5, 8) float32 array", idea=ROTARY):
        expect_dtype(out, np.float32, what="rotary_embedding of float32 x", idea=DTYPE)
        expect_close(out, _rotate(x, np.arange(5)), what="rotary_embedding with two batch axes, float32",
                     idea=_rotary_idea(ROTARY, out, x, np.arange(5)), rtol=1e-5, atol=1e-6)


def test_rotary_fractional_and_negative_positions(impl):
    x = np.random.default_rng(52).normal(size=(3, 4, 6))
    positions = np.array([0.5, -2.25, 7.125, 1e3 + 0.5])
    out = impl.rotary_embedding(x, positions)
    expect_close(out, _rotate(x, positions), what="rotary_embedding with positions [0.5, -2.25, 7.125, 1000.5]",
                 idea=_rotary_idea(ROTARY + "; positions are real numbers: do not cast them to integers or index "
                                   "with them", out, x, positions))


def test_rotary_relative_offsets_with_fractional_positions(impl):
    rng = np.random.default_rng(53)
    q, k = rng.normal(size=(1, 10)), rng.normal(size=(1, 10))

    def score(m, n):
        return float((impl.rotary_embedding(q, np.array([m])) @ impl.rotary_embedding(k, np.array([n])).T)[0, 0])

    first, second = score(2.5, 1.0), score(40.75, 39.25)
    rotated = np.asarray(impl.rotary_embedding(q, np.array([2.5])), dtype=float)
    expect_close(np.linalg.norm(rotated), np.linalg.norm(q), what="the norm of q after rotary at position 2.5",
                 idea="rotary turns each pair of features by an angle: a rotation keeps every length")
    expect_close(second, first, what="q.k after rotary depends only on the offset m - n = 1.5 (m = 2.5 and 40.75)",
                 idea="a rotation by m then by -n leaves only m - n: every pair must use the same angle for "
                      "query and key at the same position")
    # The contrast: q given back unchanged keeps its norm, and its scores depend on nothing at all.
    expect_differs(rotated, np.asarray(q, dtype=float), what="q after rotary at position 2.5, against q",
                   expected="a turned q: every pair turns by 2.5 times its rate",
                   passed="the norm is kept and q.k depends only on the offset",
                   idea="rotary turns each pair of features by an angle proportional to the position")
    # ... and -q keeps them too (each score of two of them is q.k): at position 0 nothing turns.
    expect_close(impl.rotary_embedding(q, np.array([0.0])), q, what="q after rotary at position 0 (angle 0: unchanged)",
                 idea="rotary turns each pair of features by an angle proportional to the position: 0 at position 0")


def test_rotary_single_pair_single_token(impl):
    x = np.array([[3.0, 4.0]])
    out = impl.rotary_embedding(x, np.array([0.75]), base=100.0)
    t = 0.75
    expect_close(out, [[3.0 * np.cos(t) - 4.0 * np.sin(t), 3.0 * np.sin(t) + 4.0 * np.cos(t)]],
                 what="rotary_embedding of one token with d = 2 at position 0.75 (base 100)",
                 idea=ROTARY + "; the first pair (i = 0) turns by the position itself")


def test_rotary_of_a_transposed_view(impl):
    base_array = np.random.default_rng(54).normal(size=(4, 7, 2))
    x = np.swapaxes(base_array, 0, 2)  # (2, 7, 4), non-contiguous
    out = impl.rotary_embedding(x, base=500.0)
    expect_close(out, _rotate(x, np.arange(7), base=500.0),
                 what="rotary_embedding of a non-contiguous (2, 7, 4) view with base 500",
                 idea=ROTARY + "; select pairs with x[..., 0::2] and x[..., 1::2], whatever the memory layout")


def test_alibi_many_heads(impl):
    require_alibi_formula(impl)
    for n, n_heads in ((5, 16), (3, 12), (1, 7)):
        bias = impl.alibi_bias(n, n_heads)
        if expect_shape(bias, (n_heads, n, n), what=f"alibi_bias({n}, {n_heads})", idea=ALIBI):
            expected = np.empty((n_heads, n, n))
            for h in range(n_heads):
                for i in range(n):
                    for j in range(n):
                        expected[h, i, j] = -(2.0 ** (-8.0 * (h + 1) / n_heads)) * abs(i - j)
            expect_close(bias, expected, what=f"alibi_bias({n}, {n_heads}): one slope per head",
                         idea=_alibi_idea(bias, ALIBI))
