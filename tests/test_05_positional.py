"""Exercise 5: positional information. Sinusoidal tables, rotary embeddings and ALiBi biases."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from tests import unseen
from tests.conventions import ROTATE_HALF
from tests.crash import raising_through
from tests.effort import message as failure_message
from tests.effort import require, submission_salt
from tests.failures import recorded_so_far
from tests.feedback import (
    expect,
    expect_array,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_no_nan,
    expect_raises_value_error,
    expect_shape,
)
from tests.probes import expect_probe, probe

SINUSOID = ("sinusoidal encoding: PE[p, 2i] = sin(p / 10000**(2i/d_model)) and "
            "PE[p, 2i+1] = cos(p / 10000**(2i/d_model)), columns interleaved")
PAIRS = "columns 2i and 2i+1 form pair i and share one frequency: use the pair index 2*(j//2) for column j, not j"
ORDER = "attention on its own is blind to order: only position information makes a permutation visible"
ROTARY = ("rotary embedding: rotate the pair (x[..., 2i], x[..., 2i+1]) at position p by the angle "
          "t = p * base**(-2i/d): (a, b) -> (a cos t - b sin t, a sin t + b cos t)")
RELATIVE = "a rotation by m and a rotation by n leave a dot product that depends only on the offset m - n"
ALIBI = "ALiBi: bias[h, i, j] = -slope_h * |i - j| with slope_h = 2**(-8 (h+1) / n_heads), one slope per head"
CHECKS = "bad input raises ValueError, and the message names the offending argument"


def _sinusoidal(n_positions: int, d_model: int, *, pair=lambda j: 2 * (j // 2), multiply=False,
                swap=False) -> np.ndarray:
    """The sinusoidal table written out entry by entry (the keywords build known mistakes)."""
    table = np.zeros((n_positions, d_model))
    for p in range(n_positions):
        for j in range(d_model):
            scale = 10000.0 ** (pair(j) / d_model)
            angle = p * scale if multiply else p / scale
            use_sine = (j % 2 == 0) != swap
            table[p, j] = np.sin(angle) if use_sine else np.cos(angle)
    return table


def _concatenated(n_positions: int, d_model: int) -> np.ndarray:
    """The known mistake of putting all sines first and all cosines after them."""
    angles = np.arange(n_positions)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)[:, :d_model]


def _diagnose_sinusoidal(out: np.ndarray, n_positions: int, d_model: int) -> str:
    """Name the known mistake that ``out`` matches, if any."""
    mistakes = {
        LAYOUT: _concatenated(n_positions, d_model),
        "yours has sine and cosine swapped: even columns hold the sine": _sinusoidal(n_positions, d_model, swap=True),
        "yours multiplies the position by 10000**(2i/d_model); divide by it, so later pairs turn slowly":
            _sinusoidal(n_positions, d_model, multiply=True),
        "yours uses the column index j in the exponent; the two columns of a pair share the exponent 2*(j//2)":
            _sinusoidal(n_positions, d_model, pair=lambda j: j),
        "yours uses the pair index i in the exponent; the exponent is 2i/d_model, twice the pair index":
            _sinusoidal(n_positions, d_model, pair=lambda j: j // 2),
    }
    right = _sinusoidal(n_positions, d_model)
    for message, table in mistakes.items():
        if _near_miss(out, table, right):
            return f"{SINUSOID}; {message}"
    if _sines_then_cosines(out):
        return f"{SINUSOID}; {LAYOUT}"
    return SINUSOID


LAYOUT = ("a convention, not a misconception: yours puts every sine in the first half and every cosine in the "
          "second (the tensor2tensor / GPT-NeoX layout); this kit interleaves them, sin in column 2i and cos in "
          "column 2i+1 of pair i")


def _sines_then_cosines(out: np.ndarray) -> bool:
    """Whether ``out`` holds sines in its first half and their cosines in the second (whatever the frequencies)."""
    if not isinstance(out, np.ndarray) or out.ndim != 2 or out.shape[1] < 4 or out.shape[1] % 2:
        return False
    half = out.shape[1] // 2
    with np.errstate(all="ignore"):
        return bool(np.allclose(out[:, :half] ** 2 + out[:, half:] ** 2, 1.0, rtol=1e-4, atol=1e-5)
                    and np.allclose(out[0, :half], 0.0, atol=1e-6))


def _tolerances(out: np.ndarray) -> tuple[float, float]:
    """Rtol and atol at the precision of ``out``'s dtype (float32 results are judged to float32's rounding)."""
    dtype = out.dtype if isinstance(out, np.ndarray) and out.dtype.kind == "f" else np.dtype(np.float64)
    eps = float(np.finfo(dtype).eps)
    return max(1e-7, 1000 * eps), max(1e-9, 100 * eps)


def _near_miss(out: np.ndarray, alternative: np.ndarray, right: np.ndarray) -> bool:
    """Whether ``out`` is the ``alternative`` mistake (to its dtype's precision), which must differ from ``right``.

    An alternative that equals the right answer on this input (with default positions, "ignores the
    positions" gives the right answer) names nothing: it would send a nearly right result the wrong way.
    """
    if not isinstance(out, np.ndarray) or np.shape(out) != alternative.shape or out.dtype.kind not in "fiu":
        return False
    rtol, atol = _tolerances(out)
    if np.allclose(alternative, right, rtol=rtol, atol=atol):
        return False
    return bool(np.allclose(out, alternative, rtol=rtol, atol=atol)
                and not np.allclose(out, right, rtol=rtol, atol=atol))


def _rotary(x: np.ndarray, positions, base: float = 10000.0, *, sign: float = 1.0, two: int = 2) -> np.ndarray:
    """Rotary embedding written out pair by pair (sign and two build known mistakes)."""
    out = np.array(x, dtype=np.float64)
    d = x.shape[-1]
    for p, position in enumerate(positions):
        for i in range(d // 2):
            t = sign * position * base ** (-two * i / d)
            a, b = x[..., p, 2 * i], x[..., p, 2 * i + 1]
            out[..., p, 2 * i] = a * np.cos(t) - b * np.sin(t)
            out[..., p, 2 * i + 1] = a * np.sin(t) + b * np.cos(t)
    return out


def _rotate_half(x: np.ndarray, positions, base: float = 10000.0) -> np.ndarray:
    """The GPT-NeoX layout: feature i pairs with feature i + d/2 (a known mix-up with the interleaved pairs)."""
    d = x.shape[-1]
    angles = np.asarray(positions, dtype=float)[:, None] * base ** (-np.arange(0, d, 2) / d)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * np.cos(angles) - b * np.sin(angles), a * np.sin(angles) + b * np.cos(angles)], -1)


def _diagnose_rotary(out: np.ndarray, x: np.ndarray, positions, base: float = 10000.0) -> str:
    """Name the known rotary mistake that ``out`` matches, if any."""
    mistakes = {
        ROTATE_HALF: _rotate_half(x, positions, base),
        "yours rotates the other way: the first output is a cos t - b sin t": _rotary(x, positions, base, sign=-1.0),
        "yours uses base**(-i/d); the exponent is -2i/d": _rotary(x, positions, base, two=1),
        "yours ignores the positions you were given": _rotary(x, np.arange(x.shape[-2]), base),
        "yours ignores the base argument": _rotary(x, positions, 10000.0),
        "yours returns x unchanged": np.asarray(x, dtype=np.float64),
    }
    right = _rotary(x, positions, base)
    for message, expected in mistakes.items():
        if _near_miss(out, expected, right):
            return f"{ROTARY}; {message}"
    if (isinstance(out, np.ndarray) and out.shape == right.shape and out.dtype.kind == "f"
            and np.allclose(out, right, rtol=1e-4, atol=1e-5)):
        return (f"{ROTARY}; a question of precision, not of the formula: yours agrees with it only to about "
                f"float32's precision (relative error up to {_relative_error(out, right):.1g}); compute the angles, "
                f"their cos and sin and the rotation in x's dtype ({np.asarray(x).dtype} here)")
    return ROTARY


def _relative_error(out: np.ndarray, right: np.ndarray) -> float:
    return float(np.max(np.abs(out - right)) / max(float(np.max(np.abs(right))), 1e-300))


def _alibi(n: int, n_heads: int, slopes: list[float] | None = None) -> np.ndarray:
    """ALiBi written out entry by entry (with the kit's slopes, or ``slopes``)."""
    bias = np.zeros((n_heads, n, n))
    for h in range(n_heads):
        slope = 2.0 ** (-8.0 * (h + 1) / n_heads) if slopes is None else slopes[h]
        for i in range(n):
            for j in range(n):
                bias[h, i, j] = -slope * abs(i - j)
    return bias


def _original_slopes(n_heads: int) -> list[float]:
    """The slopes of the original ALiBi code (and of Hugging Face, llm-foundry, FasterTransformer).

    For a power of two they are the kit's; for another head count, those of the power of two below it,
    then every other slope of twice that power (written out from the paper's get_slopes, not copied).
    """
    if n_heads & (n_heads - 1) == 0:
        return [2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)]
    below = 2 ** (n_heads.bit_length() - 1)
    return _original_slopes(below) + _original_slopes(2 * below)[0::2][:n_heads - below]


TABLES = ("compute it from its sizes (the formula over np.arange), not from a table of the sizes the tests use: such "
          "a table is right at those sizes only")


def _own_sizes(salt: int) -> np.random.Generator:
    """Sizes of a check's own, drawn from the bytes of the student's positional.py: no table in the file knows them."""
    return np.random.default_rng([5_005, salt, submission_salt("positional")])


def _sizes_gate(impl, name: str, smalls: tuple[tuple[int, int], ...], large: tuple[int, int], right,
                properties: dict[str, Callable[[np.ndarray, tuple[int, int]], bool]]) -> list:
    """Why ``name`` is not computed from its sizes: right at one of ``smalls`` (the tests' sizes), wrong at ``large``.

    ``right(out, sizes)``: whether ``out`` is a right answer (a convention the tests accept counts). Every one of
    ``smalls`` counts, not the first only: a table that keeps one answer wrong on purpose passed for a mistake.
    Wrong at every one of them, the function is a mistake (its tests say how) if it is a rule: each of
    ``properties`` (what the tests check of parts of the answer) that its answer at the tests' first size has, its
    answer at ``large`` has too. A table right only where the tests look is not. Empty where the tests' own checks
    will say more (a crash at their sizes, a mistake).
    """
    function = getattr(impl, name)
    first = None
    for small in smalls:
        try:
            with raising_through():  # a crash at the tests' own sizes is their finding
                out = np.asarray(function(*small))
        except TimeoutError:
            return []  # a call past its budget: the test's own call says so (and the gate spends no more of it)
        except Exception:  # noqa: BLE001 - what the function raises is the test's own check to report
            continue
        if right(out, small):
            break
        first = first or (small, out)
    else:
        if first is None:
            return []  # a crash at every size of the tests': their checks say how
        small, out = first
        held = [what for what, holds in properties.items() if _holds(holds, out, small)]
        if not held:
            return []  # wrong at the tests' sizes in every way they look: their checks say how
    try:
        with raising_through():
            out = np.asarray(function(*large))
    except Exception as error:  # noqa: BLE001 - an answer at the tests' sizes, and none at these
        seen = f"{type(error).__name__}: {str(error)[:200]}"
    else:
        if right(out, large) if first is None else all(_holds(properties[what], out, large) for what in held):
            return []
        seen = (f"an array of shape {out.shape} that is not it" if first is None else "an answer without "
                + ", ".join(what for what in held if not _holds(properties[what], out, large)))
    expected = (f"what the formula gives at these sizes, as {name}{small} does at the tests' own" if first is None
                else f"what your {name}{small} has at the tests' sizes: {', '.join(held)}")
    return [failure_message(f"{name}{large}, sizes of this check's own (drawn from your file's bytes)", expected,
                            f"{seen}: an answer at the sizes the tests use, not at these", TABLES)]


def _holds(holds: Callable[[np.ndarray, tuple[int, int]], bool], out: np.ndarray, sizes: tuple[int, int]) -> bool:
    try:
        with np.errstate(all="ignore"):
            return bool(holds(out, sizes))
    except (TypeError, ValueError, IndexError):
        return False


def _sinusoidal_properties() -> dict[str, Callable[[np.ndarray, tuple[int, int]], bool]]:
    """What the sinusoidal tests check of parts of the answer, at any sizes (``d_model`` even)."""
    def pairs(out: np.ndarray) -> np.ndarray:
        return out[:, 0:out.shape[1] - 1:2] ** 2 + out[:, 1::2][:, :out.shape[1] // 2] ** 2

    return {
        "the shape (n_positions, d_model)": lambda out, sizes: out.shape == tuple(sizes),
        "row 0 alternating 0 and 1": lambda out, sizes: out.shape == tuple(sizes) and np.allclose(
            out[0, 0::2], 0.0, atol=1e-6) and np.allclose(out[0, 1::2], 1.0, atol=1e-6),
        "every value in [-1, 1]": lambda out, sizes: out.size > 0 and bool(np.all(np.abs(out) <= 1.0 + 1e-6)),
        "columns 0 and 1 the sine and cosine of the position": lambda out, sizes: out.shape == tuple(sizes) and (
            np.allclose(out[:, 0], np.sin(np.arange(sizes[0])), atol=1e-4)
            and np.allclose(out[:, 1], np.cos(np.arange(sizes[0])), atol=1e-4)),
        "each pair of columns on the unit circle": lambda out, sizes: out.shape == tuple(sizes) and np.allclose(
            pairs(out), 1.0, atol=1e-4),
    }


def _alibi_properties() -> dict[str, Callable[[np.ndarray, tuple[int, int]], bool]]:
    """What the ALiBi tests check of parts of the answer, at any sizes."""
    def shaped(out: np.ndarray, sizes: tuple[int, int]) -> bool:
        return out.shape == (sizes[1], sizes[0], sizes[0])

    def by_distance(out: np.ndarray, sizes: tuple[int, int]) -> bool:
        distance = np.abs(np.arange(sizes[0])[:, None] - np.arange(sizes[0])[None, :])
        return shaped(out, sizes) and np.allclose(out, out[:, 0, :][:, distance], rtol=1e-5, atol=1e-8)

    return {
        "the shape (n_heads, n, n)": shaped,
        "a zero diagonal": lambda out, sizes: shaped(out, sizes) and np.allclose(
            np.diagonal(out, axis1=-2, axis2=-1), 0.0, atol=1e-12),
        "no positive entry": lambda out, sizes: shaped(out, sizes) and bool(np.all(out <= 0.0)),
        "symmetry": lambda out, sizes: shaped(out, sizes) and np.allclose(out, np.swapaxes(out, -1, -2)),
        "entries that depend only on the distance": by_distance,
    }


def _alibi_right(out: np.ndarray, sizes: tuple[int, int]) -> bool:
    n, heads = sizes
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    return out.shape == (heads, n, n) and any(
        np.allclose(out, -np.asarray(slopes)[:, None, None] * distance, rtol=1e-4, atol=1e-6)  # (float32 too)
        for slopes in (2.0 ** (-8.0 * np.arange(1, heads + 1) / heads), _original_slopes(heads)))


def _sinusoidal_right(out: np.ndarray, sizes: tuple[int, int]) -> bool:
    n, d = sizes
    j, p = np.arange(d), np.arange(n)[:, None]
    angle = p / 10000.0 ** (2 * (j // 2) / d)
    # To float32's precision (angles up to 90 rad): a table is off by whole values, and precision is the closed-form
    # test's finding, not this check's.
    return out.shape == (n, d) and np.allclose(out, np.where(j % 2 == 0, np.sin(angle), np.cos(angle)), atol=1e-4)


def require_alibi_formula(impl) -> bool:
    """Fail the test unless ``alibi_bias`` is computed from its sizes (:func:`_sizes_gate`)."""
    rng = _own_sizes(1)
    large = (int(rng.integers(20, 60)), int(rng.integers(17, 48)))
    return require(impl, "alibi_bias", lambda: _sizes_gate(impl, "alibi_bias", ((6, 4), (5, 3), (7, 2)), large,
                                                                    _alibi_right, _alibi_properties()),
                   key="formula")


def require_sinusoidal_formula(impl) -> bool:
    """Fail the test unless ``sinusoidal_encoding`` is computed from its sizes (:func:`_sizes_gate`)."""
    rng = _own_sizes(2)
    large = (int(rng.integers(20, 90)), 2 * int(rng.integers(9, 32)))
    return require(impl, "sinusoidal_encoding",
                   lambda: _sizes_gate(impl, "sinusoidal_encoding", ((6, 8), (5, 8), (4, 10), (3, 12)),
                                               large, _sinusoidal_right, _sinusoidal_properties()), key="formula")


def _row_constant(difference: np.ndarray) -> tuple[bool, bool]:
    """Whether ``difference`` is a constant per row on the causal part (i >= j), and whether that constant is 0."""
    n = difference.shape[-1]
    lower = np.tril(np.ones((n, n), dtype=bool))
    per_row = np.where(lower, difference, np.nan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spread = np.nanmax(per_row, axis=-1, keepdims=True) - np.nanmin(per_row, axis=-1, keepdims=True)
        return bool(np.all(spread < 1e-9)), bool(np.allclose(difference[:, lower], 0.0, atol=1e-9))


SLOPES = ("a convention, not a misconception: for a head count that is not a power of two yours takes the slopes of "
          "the original ALiBi code (those of the power of two below it, then every other slope of twice that power; "
          "Hugging Face's, llm-foundry's and FasterTransformer's too); this kit's contract is slope_h = "
          "2**(-8 (h+1) / n_heads) for every head count")


def _alibi_idea(out: np.ndarray, idea: str) -> str:
    """``idea``, or the convention message for a bias equal to the kit's up to a constant per row, or slopes.

    A bias with the original ALiBi code's slopes (for a head count that is not a power of two) is told that
    convention too.

    The original ALiBi code adds ``slope * j`` (the key's position): below the diagonal it differs from
    ``-slope * |i - j|`` by ``slope * i``, a constant per row, which softmax ignores under a causal mask.
    """
    if not isinstance(out, np.ndarray) or out.ndim != 3 or out.shape[-1] != out.shape[-2] or out.dtype.kind != "f":
        return idea
    n_heads, n, _ = out.shape
    reference, slopes = _alibi(n, n_heads), ""
    if n_heads & (n_heads - 1) and not all(_row_constant(out - reference)):
        original = _alibi(n, n_heads, _original_slopes(n_heads))
        if _row_constant(out - original)[0]:
            reference, slopes = original, f"; {SLOPES}"
    constant, equal = _row_constant(out - reference)
    if constant and equal and slopes:
        if np.allclose(out, reference, rtol=1e-6, atol=1e-12):
            return f"{idea}{slopes}"
    if not constant or equal:
        return idea  # not a constant per row, or equal on the causal part (i - j instead of |i - j|)
    return (f"{ALIBI}; a convention, not a misconception: yours equals the kit's bias up to a constant per row on "
            "the causal part (the original ALiBi code adds slope * j), which softmax ignores under a causal mask; "
            f"this kit's bias is -slope * |i - j| for every pair (i, j), so that it also works without a mask{slopes}")


def _softmax(scores: np.ndarray) -> np.ndarray:
    exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)


def _self_attention(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray) -> np.ndarray:
    """Plain single-head self-attention with no position information of its own."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return _softmax(q @ k.T / np.sqrt(q.shape[-1])) @ v


@probe("sinusoidal_encoding")
def seven_by_ten():
    return (7, 10), {}


@probe("sinusoidal_encoding")
def six_by_seven():
    # An odd width: the last sine column has no cosine partner (PE[:, 0::2] has one column more than PE[:, 1::2]).
    return (6, 7), {}


@probe("rotary_embedding")
def batch_of_two():
    return (np.random.default_rng(501).normal(size=(2, 5, 6)),), {}


@probe("rotary_embedding")
def given_positions():
    rng = np.random.default_rng(502)
    return (rng.normal(size=(4, 8)),), {"positions": np.array([3, 0, 11, 6]), "base": 50.0}


@probe("rotary_embedding")
def float32_batch():
    return (np.random.default_rng(503).normal(size=(3, 4, 6)).astype(np.float32),), {}


@probe("rotary_embedding", rejects="x")
def odd_number_of_features():
    return (np.ones((3, 5)),), {}


@probe("alibi_bias")
def five_by_three():
    return (5, 3), {}


# --- sinusoidal_encoding -------------------------------------------------------------------------


def test_sinusoidal_shape_and_dtype(impl):
    require_sinusoidal_formula(impl)
    for n_positions, d_model in ((7, 10), (3, 6)):  # an odd d_model is the business of its own test below
        out = impl.sinusoidal_encoding(n_positions, d_model)
        what = f"sinusoidal_encoding({n_positions}, {d_model})"
        if expect_array(out, what=what, idea=SINUSOID):
            expect_shape(out, (n_positions, d_model), what=f"{what}: one row per position, one column per feature",
                         idea=SINUSOID)
            expect_dtype(out, np.float64, what=what, idea="the table is float64")


def test_sinusoidal_first_row_alternates_zero_and_one(impl):
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(4, 10)
    if not expect_shape(out, (4, 10), what="sinusoidal_encoding(4, 10)", idea=SINUSOID):
        return
    expected = np.tile([0.0, 1.0], 5)
    idea = SINUSOID + ": at position 0 every angle is 0, so sin gives 0 (even columns) and cos gives 1 (odd ones)"
    if np.allclose(out[0], np.repeat([0.0, 1.0], 5)):
        idea += "; " + LAYOUT  # (the first failure a port of tensor2tensor's meets: it says the convention)
    elif np.allclose(out[0], 1.0 - expected):
        idea += "; yours has sine and cosine swapped"
    expect_close(out[0], expected, what="row 0 (position 0) of sinusoidal_encoding(4, 10)", idea=idea)


def test_sinusoidal_values_lie_in_minus_one_to_one(impl):
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(50, 16)
    if expect_shape(out, (50, 16), what="sinusoidal_encoding(50, 16)", idea=SINUSOID):
        expect(bool(np.all(np.isfinite(out)) and np.all(np.abs(out) <= 1.0)),
               what="every entry of sinusoidal_encoding(50, 16) is a sine or a cosine",
               expected="values in [-1, 1]", observed=f"minimum {np.min(out):.4g}, maximum {np.max(out):.4g}",
               idea=SINUSOID)
        # The contrast: the encoding tells positions apart (zeros or ones lie in [-1, 1] too).
        expect_differs(out[1], out[0], what="rows 1 and 0 of sinusoidal_encoding(50, 16): positions 1 and 0",
                       expected="two different encodings (sin(1 * rate) is not sin(0)): a position's encoding names it",
                       passed="every value lies in [-1, 1]", idea=SINUSOID)
        _expect_angle_zero_at_position_zero(out, passed="every value lies in [-1, 1]")


def _expect_angle_zero_at_position_zero(table: np.ndarray, *, passed: str) -> bool:
    """Position 0 is the angle 0 in every pair: half sines (0), half cosines (1), whatever the frequencies.

    Checked after a test's own check of a property that any table of distinct rows has (values in [-1, 1], order
    made visible): a seeded random table has it without a sine ("no points without the idea"). Says nothing once
    the test has recorded a failure.
    """
    if recorded_so_far():
        return True
    row = np.asarray(table, dtype=float)[0]
    half = row.size // 2
    return expect(bool(np.allclose(np.sort(row), [0.0] * half + [1.0] * (row.size - half))),
                  what=f"row 0 of sinusoidal_encoding(..., {row.size}): position 0, the angle 0 in every pair",
                  expected=f"{half} zeros (sin 0) and {row.size - half} ones (cos 0)",
                  observed=f"{np.array2string(row, precision=4)}: {passed} holds for it without a sine or a cosine",
                  idea=SINUSOID)


def test_sinusoidal_first_pair_is_sin_and_cos_of_the_position(impl):
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(6, 8)
    if not expect_shape(out, (6, 8), what="sinusoidal_encoding(6, 8)", idea=SINUSOID):
        return
    p = np.arange(6.0)
    expect_close(out[:, 0], np.sin(p), what="column 0 of sinusoidal_encoding(6, 8): sin(p), frequency 1",
                 idea=f"{SINUSOID}; pair 0 has the frequency 1/10000**0 = 1")
    expect_close(out[:, 1], np.cos(p), what="column 1 of sinusoidal_encoding(6, 8): cos(p), same frequency as column 0",
                 idea=f"{SINUSOID}; the cosine sits right next to its sine (interleaved), with the same frequency")


def test_sinusoidal_pairs_share_a_frequency(impl):
    # sin^2 + cos^2 = 1 holds for each pair only if both columns use the same angle.
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(5, 8)
    if expect_shape(out, (5, 8), what="sinusoidal_encoding(5, 8)", idea=SINUSOID):
        expect_close(out[:, 0::2] ** 2 + out[:, 1::2] ** 2, np.ones((5, 4)),
                     what="PE[p, 2i]**2 + PE[p, 2i+1]**2 for every position p and pair i (sin^2 + cos^2 of one angle)",
                     idea=f"{SINUSOID}; {LAYOUT}" if _sines_then_cosines(out) else PAIRS)


def test_sinusoidal_frequencies_decrease_by_pair(impl):
    # At position 1 the angle of pair i is its frequency 10000**(-2i/d); each is below pi, so arctan2 recovers it.
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(3, 12)
    if not expect_shape(out, (3, 12), what="sinusoidal_encoding(3, 12)", idea=SINUSOID):
        return
    observed = np.arctan2(out[1, 0::2], out[1, 1::2])
    expected = 10000.0 ** (-np.arange(0, 12, 2) / 12)
    expect_close(observed, expected, what="the angle of each pair at position 1 of sinusoidal_encoding(3, 12), "
                                          "i.e. the frequencies 1 / 10000**(2i/12)",
                 idea=_diagnose_sinusoidal(out, 3, 12) + "; the frequencies fall from 1 down towards 1/10000")


def test_sinusoidal_closed_form(impl):
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(9, 12)
    expect_close(out, _sinusoidal(9, 12), what="sinusoidal_encoding(9, 12) against the formula, entry by entry",
                 idea=_diagnose_sinusoidal(out, 9, 12))


def test_sinusoidal_odd_d_model(impl):
    require_sinusoidal_formula(impl)
    out = impl.sinusoidal_encoding(5, 7)
    if expect_shape(out, (5, 7), what="sinusoidal_encoding(5, 7) with an odd d_model", idea=SINUSOID):
        p = np.arange(5.0)
        expect_close(out[:, 6], np.sin(p / 10000.0 ** (6 / 7)),
                     what="the last column of sinusoidal_encoding(5, 7): column 6 = 2*3, a sine of pair 3",
                     idea=f"{SINUSOID}; with an odd d_model the last pair has only its sine")
        expect_close(out, _sinusoidal(5, 7), what="sinusoidal_encoding(5, 7) against the formula",
                     idea=_diagnose_sinusoidal(out, 5, 7))


def test_sinusoidal_encoding_makes_order_visible(impl):
    require_sinusoidal_formula(impl)
    rng = np.random.default_rng(51)
    n, d_model, d_head = 6, 8, 5
    x = rng.normal(size=(n, d_model))
    w_q, w_k, w_v = (rng.normal(size=(d_model, d_head)) / np.sqrt(d_model) for _ in range(3))
    order = np.array([3, 0, 5, 1, 4, 2])
    # Without positions, shuffling the tokens only shuffles the outputs (permutation equivariance).
    expect_close(_self_attention(x[order], w_q, w_k, w_v), _self_attention(x, w_q, w_k, w_v)[order],
                 what="plain attention (the test's own) of shuffled tokens equals the shuffled outputs", idea=ORDER)
    pe = impl.sinusoidal_encoding(n, d_model)
    if not expect_shape(pe, (n, d_model), what=f"sinusoidal_encoding({n}, {d_model})", idea=SINUSOID):
        return
    shuffled = _self_attention(x[order] + pe, w_q, w_k, w_v)
    reordered = _self_attention(x + pe, w_q, w_k, w_v)[order]
    gap = float(np.max(np.abs(shuffled - reordered)))
    expect(gap > 1e-3, what="attention of shuffled tokens plus your encoding, against the shuffled outputs of the "
                            "tokens in order plus your encoding (computed by the test)",
           expected="different outputs: position p adds the same vector PE[p] whatever token sits there, so "
                    "the order of the tokens changes what attention sees",
           observed=f"the largest difference is only {gap:.3g}: order is still invisible",
           idea=f"{ORDER}; each position needs its own row of the table")
    _expect_angle_zero_at_position_zero(pe, passed="the encoding makes the order of the tokens visible")


# --- rotary_embedding ----------------------------------------------------------------------------


def test_rotary_shape_and_dtype(impl):
    x = np.random.default_rng(52).normal(size=(2, 5, 6))
    out = impl.rotary_embedding(x)
    if expect_array(out, what="rotary_embedding of a (2, 5, 6) array", idea=ROTARY):
        expect_shape(out, x.shape, what="rotary_embedding keeps the shape of x", idea=ROTARY)
        expect_dtype(out, np.float64, what="rotary_embedding of a float64 array", idea=ROTARY)
    x32 = np.random.default_rng(53).normal(size=(3, 4, 8)).astype(np.float32)
    out = impl.rotary_embedding(x32)
    if expect_array(out, what="rotary_embedding of a float32 (3, 4, 8) array", idea=ROTARY):
        expect_dtype(out, np.float32, what="rotary_embedding of a float32 array",
                     idea="dtype in = dtype out: build the result like x (np.empty_like(x)), or cast it back")


def test_rotary_position_zero_is_the_identity(impl):
    x = np.random.default_rng(54).normal(size=(2, 5, 6))
    out = impl.rotary_embedding(x)
    if expect_shape(out, x.shape, what="rotary_embedding of a (2, 5, 6) array", idea=ROTARY):
        expect_close(out[:, 0], x[:, 0], what="the row at position 0 after rotary_embedding (angle 0: unchanged)",
                     idea=f"{ROTARY}; positions default to 0..n-1 and a rotation by 0 changes nothing")
        # The contrast: x given back unchanged keeps the row at position 0 too.
        expect_differs(out[:, 1:], x[:, 1:], what="the rows at positions 1 to 4 after rotary_embedding, against x",
                       expected="turned rows: the pairs at position p > 0 turn by p times their rate",
                       passed="the row at position 0 is unchanged", idea=ROTARY)


def test_rotary_closed_form(impl):
    x = np.random.default_rng(55).normal(size=(4, 6))
    out = impl.rotary_embedding(x)
    expect_close(out, _rotary(x, np.arange(4)), what="rotary_embedding of a (4, 6) array against the formula, "
                                                    "pair by pair", idea=_diagnose_rotary(out, x, np.arange(4)))


def test_rotary_preserves_norms(impl):
    x = np.random.default_rng(56).normal(size=(3, 7, 8))
    out = impl.rotary_embedding(x)
    if expect_shape(out, x.shape, what="rotary_embedding of a (3, 7, 8) array", idea=ROTARY):
        expect_close(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1),
                     what="the length of every row after rotary_embedding",
                     idea=f"{ROTARY}; a rotation keeps lengths: use the same angle t for both outputs of a pair")
        # The contrast: x given back unchanged keeps every length too, and so does -x (which turns no row either).
        if expect_differs(out[:, 1:], x[:, 1:], what="the rows at positions 1 to 6 after rotary_embedding, against x",
                          expected="turned rows: the pairs at position p > 0 turn by p times their rate",
                          passed="every row keeps its length", idea=ROTARY):
            expect_close(out[:, 0], x[:, 0], what="the row at position 0 after rotary_embedding (angle 0: unchanged)",
                         idea=f"{ROTARY}; a rotation by 0 changes nothing (every row kept its length)")


def test_rotary_scores_depend_only_on_the_offset(impl):
    rng = np.random.default_rng(57)
    n, d = 13, 8
    q, k = rng.normal(size=d), rng.normal(size=d)
    # The same query at every position and the same key at every position, rotated by your function.
    q_rot = impl.rotary_embedding(np.tile(q, (n, 1)))
    k_rot = impl.rotary_embedding(np.tile(k, (n, 1)))
    if not (expect_shape(q_rot, (n, d), what=f"rotary_embedding of a ({n}, {d}) array", idea=ROTARY)
            and expect_shape(k_rot, (n, d), what=f"rotary_embedding of a ({n}, {d}) array", idea=ROTARY)):
        return
    # (NaN is close to NaN and unequal to itself: NaN rows passed both checks below, a hostile round's)
    if not (expect_no_nan(q_rot, what=f"rotary_embedding of a ({n}, {d}) array of finite numbers", idea=ROTARY)
            and expect_no_nan(k_rot, what=f"rotary_embedding of a ({n}, {d}) array of finite numbers", idea=ROTARY)):
        return
    scores = q_rot @ k_rot.T  # scores[m, n] = q rotated by m . k rotated by n
    for offset, pairs in ((2, ((3, 1), (7, 5), (12, 10))), (-3, ((0, 3), (6, 9), (9, 12)))):
        values = np.array([scores[m, j] for m, j in pairs])
        expect_close(values, np.full(3, values[0]),
                     what=f"q.k with q rotated at position m and k at position n, for (m, n) in {list(pairs)} "
                          f"(all with m - n = {offset})",
                     idea=f"{RELATIVE}; rotate both features of a pair by the same angle, proportional to p")
    expect(not np.isclose(scores[3, 1], scores[3, 3]), what="q.k at offset 2 against q.k at offset 0",
           expected="different values: the rotation makes relative position visible",
           observed=f"both {scores[3, 1]:.6g}: the rows were not rotated by their positions",
           idea=f"{ROTARY}; {RELATIVE}")


def test_rotary_custom_positions(impl):
    x = np.random.default_rng(58).normal(size=(4, 6))
    positions = np.array([5, 2, 9, 0])
    out = impl.rotary_embedding(x, positions=positions)
    expect_close(out, _rotary(x, positions), what="rotary_embedding(x, positions=[5, 2, 9, 0]) of a (4, 6) array",
                 idea=_diagnose_rotary(out, x, positions))
    expect_close(impl.rotary_embedding(x, positions=np.arange(4)), _rotary(x, np.arange(4)),
                 what="rotary_embedding(x, positions=np.arange(4)) equals the default positions", idea=ROTARY)


def test_rotary_float32_with_given_positions(impl):
    x = np.random.default_rng(61).normal(size=(2, 4, 6)).astype(np.float32)
    positions = np.array([7, 1, 4, 0])
    out = impl.rotary_embedding(x, positions=positions)
    if expect_dtype(out, np.float32, what="rotary_embedding of float32 x with given integer positions",
                    idea="dtype in = dtype out, whatever the dtype of the positions: cast the angles' cos and sin "
                         "to x's dtype or build the result like x"):
        expect_close(out, _rotary(x.astype(np.float64), positions), rtol=1e-5, atol=1e-6,
                     what="rotary_embedding of float32 x with positions [7, 1, 4, 0]", idea=ROTARY)


def test_rotary_base(impl):
    x = np.random.default_rng(59).normal(size=(3, 6))
    out = impl.rotary_embedding(x, base=100.0)
    expect_close(out, _rotary(x, np.arange(3), base=100.0), what="rotary_embedding(x, base=100.0) of a (3, 6) array",
                 idea=_diagnose_rotary(out, x, np.arange(3), base=100.0))


def test_rotary_batch_axes(impl):
    x = np.random.default_rng(60).normal(size=(2, 3, 5, 4))
    out = impl.rotary_embedding(x)
    if expect_shape(out, x.shape, what="rotary_embedding of a (2, 3, 5, 4) array (batch, heads, n, d)",
                    idea=f"{ROTARY}; leading axes are batch axes: slice pairs with x[..., 0::2]"):
        expect_close(out, _rotary(x, np.arange(5)), what="rotary_embedding with two leading batch axes",
                     idea=_diagnose_rotary(out, x, np.arange(5))
                     + "; positions run along axis -2 only, the same for every batch entry and head")


# --- alibi_bias ----------------------------------------------------------------------------------


def test_alibi_shape_and_dtype(impl):
    require_alibi_formula(impl)
    out = impl.alibi_bias(5, 3)
    if expect_array(out, what="alibi_bias(5, 3)", idea=ALIBI):
        expect_shape(out, (3, 5, 5), what="alibi_bias(n=5, n_heads=3): one (n, n) bias per head",
                     idea=f"{ALIBI}; the shape is (n_heads, n, n)")
        expect_dtype(out, np.float64, what="alibi_bias(5, 3)", idea="the bias is float64")


def test_alibi_zero_diagonal(impl):
    require_alibi_formula(impl)
    out = impl.alibi_bias(6, 4)
    if expect_shape(out, (4, 6, 6), what="alibi_bias(6, 4)", idea=ALIBI):
        expect_close(np.diagonal(out, axis1=-2, axis2=-1), np.zeros((4, 6)),
                     what="the diagonal of every head of alibi_bias(6, 4): distance 0, no penalty",
                     idea=_alibi_idea(out, ALIBI))
        _alibi_changes_with_distance(out, "alibi_bias(6, 4)", "the diagonal is zero")


def test_alibi_is_a_penalty(impl):
    require_alibi_formula(impl)
    out = impl.alibi_bias(6, 4)
    if expect_shape(out, (4, 6, 6), what="alibi_bias(6, 4)", idea=ALIBI):
        off_diagonal = ~np.eye(6, dtype=bool)
        values = out[:, off_diagonal]
        # Zeros on one side of the diagonal are no sign's (a blind round's max(i - j, 0) was told the minus sign):
        # the distance is |i - j|, a key before the query and one after alike.
        if np.all(values <= 0) and np.any(values == 0):
            hint = "a key on one side of the query gets no penalty: the distance is |i - j|, on both sides alike"
        else:
            hint = "mind the minus sign"
        expect(bool(np.all(values < 0)), what="alibi_bias(6, 4) away from the diagonal",
               expected="negative values: a distant key is penalised, its score lowered",
               observed=f"values from {np.min(out):.4g} to {np.max(out):.4g}"
                        + (f", {int(np.sum(values == 0))} of them 0" if np.any(values == 0) else ""),
               idea=_alibi_idea(out, f"{ALIBI}; {hint}"))


def test_alibi_is_symmetric(impl):
    require_alibi_formula(impl)
    out = impl.alibi_bias(6, 4)
    if expect_shape(out, (4, 6, 6), what="alibi_bias(6, 4)", idea=ALIBI):
        expect_close(out, np.swapaxes(out, -1, -2), what="alibi_bias(6, 4) equals its transpose in each head",
                     idea=_alibi_idea(out, f"{ALIBI}; a key 2 positions before the query is as far as one 2 "
                                           "positions after: use the distance |i - j|, not i - j"))
        _alibi_changes_with_distance(out, "alibi_bias(6, 4)", "the bias is symmetric")


def _alibi_changes_with_distance(out: np.ndarray, call: str, passed: str) -> None:
    """The contrast to a check a constant bias passes: query 0's bias for key 1 is not its bias for key 0."""
    expect_differs(out[:, 0, 1], out[:, 0, 0],
                   what=f"{call}: entries [h, 0, 1] (distance 1) vs. [h, 0, 0] (distance 0)",
                   expected="a different bias at distance 1 than at distance 0 (a farther key is penalised more), "
                            "in some head", passed=passed, idea=ALIBI)


def test_alibi_depends_only_on_distance(impl):
    require_alibi_formula(impl)
    out = impl.alibi_bias(7, 2)
    if expect_shape(out, (2, 7, 7), what="alibi_bias(7, 2)", idea=ALIBI):
        i, j = np.indices((7, 7))
        expect_close(out, out[:, 0, :][:, np.abs(i - j)],
                     what="alibi_bias(7, 2): entry [h, i, j] equals entry [h, 0, |i - j|]",
                     idea=_alibi_idea(out, ALIBI))
        _alibi_changes_with_distance(out, "alibi_bias(7, 2)", "the bias depends only on the distance")


def test_alibi_slopes_are_geometric(impl):
    require_alibi_formula(impl)
    for n, n_heads in ((5, 4), (3, 8)):
        out = impl.alibi_bias(n, n_heads)
        if not expect_shape(out, (n_heads, n, n), what=f"alibi_bias({n}, {n_heads})", idea=ALIBI):
            continue
        slopes = -out[:, 1, 0]  # the penalty at distance 1 is the slope
        expected = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)
        idea = f"{ALIBI}; the slopes form a geometric sequence starting at 2**(-8/n_heads)"
        if np.allclose(slopes, 2.0 ** (-8.0 * np.arange(n_heads) / n_heads)):
            idea += "; yours starts at 1: heads count from h = 0 but the formula uses h + 1"
        idea = _alibi_idea(out, idea)
        expect_close(slopes, expected, what=f"the slope of each head of alibi_bias({n}, {n_heads}) "
                                            "(minus the bias at distance 1)", idea=idea)


def test_alibi_closed_form(impl):
    require_alibi_formula(impl)
    out = impl.alibi_bias(5, 3)
    expect_close(out, _alibi(5, 3), what="alibi_bias(5, 3) against the formula, entry by entry",
                 idea=_alibi_idea(out, ALIBI))


# --- bad input and fixed examples ----------------------------------------------------------------


def test_rejects_bad_input(impl):
    expect_raises_value_error(lambda: impl.sinusoidal_encoding(0, 4), argument="n_positions",
                              what="sinusoidal_encoding(0, 4)", idea=f"{CHECKS}: sizes are positive")
    expect_raises_value_error(lambda: impl.sinusoidal_encoding(5, 0), argument="d_model",
                              what="sinusoidal_encoding(5, 0)", idea=f"{CHECKS}: sizes are positive")
    expect_probe(impl, "rotary_embedding/odd_number_of_features",
                 what="rotary_embedding of a (3, 5) array: an odd number of features",
                 idea=f"{CHECKS}: rotary embedding rotates pairs of features, so d must be even")
    expect_raises_value_error(lambda: impl.rotary_embedding(np.ones((2, 4)), positions=np.arange(3)),
                              argument="positions", what="rotary_embedding of a (2, 4) array with 3 positions",
                              idea=f"{CHECKS}: one position per row of x")
    expect_raises_value_error(lambda: impl.rotary_embedding(np.ones((2, 4)), base=0.0), argument="base",
                              what="rotary_embedding(x, base=0.0)", idea=f"{CHECKS}: the base is positive")
    expect_raises_value_error(lambda: impl.alibi_bias(0, 2), argument="n", what="alibi_bias(0, 2)",
                              idea=f"{CHECKS}: sizes are positive")
    expect_raises_value_error(lambda: impl.alibi_bias(4, 0), argument="n_heads", what="alibi_bias(4, 0)",
                              idea=f"{CHECKS}: sizes are positive")


def test_reference_values(impl):
    require_alibi_formula(impl)
    require_sinusoidal_formula(impl)
    expect_probe(impl, "sinusoidal_encoding/seven_by_ten",
                 what="sinusoidal_encoding on the fixed input sinusoidal_encoding/seven_by_ten", idea=SINUSOID)
    for name in ("rotary_embedding/batch_of_two", "rotary_embedding/given_positions"):
        expect_probe(impl, name, what=f"rotary_embedding on the fixed input {name}", idea=ROTARY)
    # float32 keeps about 7 digits: a correct rotation may round differently from the reference.
    expect_probe(impl, "rotary_embedding/float32_batch", what="rotary_embedding of a fixed float32 (3, 4, 6) array",
                 idea=ROTARY, rtol=1e-5, atol=1e-6)
    expect_probe(impl, "alibi_bias/five_by_three", what="alibi_bias on the fixed input alibi_bias/five_by_three",
                 idea=ALIBI)


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_rotary(rng: np.random.Generator) -> tuple[tuple, dict]:
    batch, seq = unseen.sizes(rng, (1, 4), (2, 7))
    pairs, = unseen.sizes(rng, (1, 5), avoid=tuple(size // 2 for size in (batch, seq) if size % 2 == 0))
    x = rng.normal(size=(batch, seq, 2 * pairs))
    if rng.random() < 0.5:
        return (x,), {}
    return (x,), {"positions": rng.integers(0, 50, size=seq), "base": float(rng.uniform(100.0, 20000.0))}


def _own_rotary(x: np.ndarray, positions: np.ndarray | None = None, base: float = 10000.0) -> np.ndarray:
    return _rotary(x, np.arange(x.shape[-2]) if positions is None else positions, base)


# The sizes functions' inputs are integers, which no move of the gate changes: a test of their bad input asks their
# sizes gates.
unseen.register_sizes_gates("positional", {"sinusoidal_encoding": require_sinusoidal_formula,
                                           "alibi_bias": require_alibi_formula})
unseen.register("positional", {"rotary_embedding": unseen.Twin(_unseen_rotary, _own_rotary, ROTARY, unseen.close)})
