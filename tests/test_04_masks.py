"""Exercise 4: masks. From the shape of each mask to what it does inside attention."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tests import unseen
from tests.conventions import PADDING_POLARITY, finite_additive, mask_form, with_convention
from tests.crash import raising_through
from tests.effort import message, require, submission_salt
from tests.feedback import (
    call_expecting_no_warning,
    expect,
    expect_array,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_equal,
    expect_raises_value_error,
    expect_shape,
)
from tests.probes import expect_probe, probe

CAUSAL = "causal masking: query i may see keys 0..i, itself included, never a later key (np.tril with its diagonal)"
DIAGONAL = ("causal masking: the diagonal is allowed, every token sees itself; masking it leaves query 0 "
            "with no key at all (NaN or zeros)")
POLARITY = "mask polarity: True means 'this query MAY attend to this key', False means blocked"
PADDING = "padding masks: key j of sequence b is a real token exactly when j < lengths[b]"
PAD_SHAPE = "padding masks have shape (batch, 1, max_len): the length-1 query axis broadcasts over every query"
COMBINE = "combining masks: a pair is allowed only where every mask allows it (logical AND, with broadcasting)"
ADDITIVE = "additive masks: 0.0 where attention is allowed, -np.inf where it is blocked, so exp(score + M) is 0"
CHECKS = "bad input raises ValueError, and the message names the offending argument"


def _lower_triangle(n: int) -> np.ndarray:
    """The causal pattern written out by hand: key j is visible from query i when j <= i."""
    pattern = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1):
            pattern[i, j] = True
    return pattern


TABLE = ("compute the mask from n (np.tril(np.ones((n, n), dtype=bool)), or key <= query over np.arange(n)): a table "
         "of the sizes the tests use is right at those sizes only")


# What the tests of causal_mask check of parts of its answer, at any size: a mistake has them at every size.
_CAUSAL_PROPERTIES = {
    "the shape (n, n)": lambda mask, n: mask.shape == (n, n),
    "the diagonal allowed": lambda mask, n: mask.shape == (n, n) and bool(np.all(np.diagonal(mask))),
    "every key after the query blocked": lambda mask, n: mask.shape == (n, n) and not bool(np.any(np.triu(mask, 1))),
    "every key before the query allowed": lambda mask, n: mask.shape == (n, n) and bool(np.all(mask[np.tril_indices(
        n, -1)])),
}


def _causal_gate(impl) -> list:
    """Why ``causal_mask`` is not computed from ``n`` (empty when it is, or when the tests' own checks will say more).

    Two sizes of its own, drawn from the bytes of the student's masks.py (the same every run of the same code, and no
    table written into the file can know it), against the sizes the tests use (6, 5, 7: right at one of them).
    Wrong at all of them, a mistake is a rule: what its answer at size 6 has of the tests' checks
    (``_CAUSAL_PROPERTIES``), its answer at the drawn size has too; a table right only where the tests look is not.
    """
    # Two sizes: a table recorded from a run of the tests holds that run's own drawn size, which one size of this
    # submission's matches by chance (about 1 in 70: CI saw it once); two must both be answered.
    sizes = np.random.default_rng([4_004, submission_salt("masks")]).choice(np.arange(20, 90), size=2, replace=False)
    first = None
    for size in (6, 5, 7):  # every size the tests use counts: a table may keep one answer wrong on purpose
        try:
            with raising_through():  # a crash at the tests' own sizes is their finding
                small = np.asarray(impl.causal_mask(size)).astype(bool)
        except TimeoutError:
            return []  # a call past its budget: the test's own call says so (and the gate spends no more of it)
        except Exception:  # noqa: BLE001 - what the function raises is the test's own check to report
            continue
        if small.shape == (size, size) and np.array_equal(small, _lower_triangle(size)):
            break
        first = first or (size, small)
    else:
        held = [what for what, holds in _CAUSAL_PROPERTIES.items() if first and holds(first[1], first[0])]
        if not held:
            return []  # wrong at the tests' sizes in every way they look (or a crash): their checks say how
        size = first[0]
    for n in (int(drawn) for drawn in sizes):
        try:
            with raising_through():
                large = np.asarray(impl.causal_mask(n)).astype(bool)
        except Exception as error:  # noqa: BLE001 - an answer at the tests' sizes, and none at this one
            seen = f"{type(error).__name__}: {str(error)[:200]}"
            break
        if first is None and large.shape == (n, n) and np.array_equal(large, _lower_triangle(n)):
            continue
        if first is not None and all(_CAUSAL_PROPERTIES[what](large, n) for what in held):
            continue
        seen = f"shape {large.shape}" if large.shape != (n, n) else "another pattern"
        break
    else:
        return []
    expected = (f"the ({n}, {n}) lower triangle, diagonal included, as causal_mask({size}) gives it" if first is None
                else f"what your causal_mask({size}) has at the tests' sizes: {', '.join(held)}")
    return [message(f"causal_mask({n}), a size of this check's own (drawn from your file's bytes)", expected,
                    f"{seen}: an answer at the sizes the tests use, not at this one", TABLE)]


def require_causal_formula(impl) -> bool:
    """Fail the test unless ``causal_mask`` is computed from ``n`` (:func:`_causal_gate`)."""
    return require(impl, "causal_mask", lambda: _causal_gate(impl), key="formula")


def _padding_pattern(lengths: list[int], max_len: int) -> np.ndarray:
    """The padding pattern written out by hand, shape (batch, 1, max_len)."""
    pattern = np.zeros((len(lengths), 1, max_len), dtype=bool)
    for b, length in enumerate(lengths):
        pattern[b, 0, :length] = True
    return pattern


def _softmax(scores: np.ndarray) -> np.ndarray:
    """The test's own softmax over the last axis; a row with every key blocked gets all zeros."""
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    exps = np.exp(scores - top)
    total = exps.sum(axis=-1, keepdims=True)
    return np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Plain masked attention, as in the reading (docs/reading.md#masks).

    softmax(np.where(mask, q k^T / sqrt(d), -inf)) v.
    """
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _softmax(np.where(mask, scores, -np.inf)) @ v


def _attempt(call: Callable[[], Any], *, what: str, idea: str) -> tuple[bool, Any]:
    """Run ``call``; an exception from the student's code becomes a failure with a message, naming its line."""
    from tests.crash import not_about_the_inputs, raising_through, where_it_crashed

    try:
        with raising_through():
            return True, call()
    except Exception as error:  # the student's function crashed on valid input
        # (a blind round: np.logical_and.reduce(masks) of two shapes crashed in numpy, told no line of masks.py)
        if "inhomogeneous shape" in str(error):
            idea += ("; numpy made one array of masks of other shapes (np.array, np.stack, or a ufunc's .reduce over "
                     "the list does), which needs equal shapes: fold them two at a time, np.logical_and(a, b), "
                     "which broadcasts")
        expect(False, what=what, expected="a result", observed=f"{type(error).__name__}: {error}"
               f"{where_it_crashed(error)}", idea=not_about_the_inputs(error) or idea)
        return False, None


@probe("causal_mask")
def seven_positions():
    return (7,), {}


@probe("padding_mask")
def ragged_batch():
    lengths = np.random.default_rng(401).integers(0, 7, size=4)  # (batch=4,), max_len 6
    return (lengths, 6), {}


@probe("combine_masks")
def causal_and_padding():
    lengths = np.random.default_rng(402).integers(1, 6, size=3)
    padding = (np.arange(5) < lengths[:, None])[:, None, :]  # (3, 1, 5)
    return (np.tril(np.ones((5, 5), dtype=bool)), padding), {}


@probe("combine_masks")
def three_masks_the_last_full_size():
    rng = np.random.default_rng(404)
    padding = (np.arange(5) < np.array([5, 2, 4])[:, None])[:, None, :]  # (3, 1, 5)
    return (np.tril(np.ones((5, 5), dtype=bool)), padding, rng.random((3, 5, 5)) < 0.7), {}


@probe("combine_masks")
def one_mask():
    return (np.random.default_rng(405).random((4, 6)) < 0.5,), {}


@probe("causal_mask", rejects="n")
def no_positions():
    return (0,), {}


@probe("padding_mask", rejects="lengths")
def length_beyond_max_len():
    return (np.array([2, 7, 1]), 5), {}


@probe("to_additive", rejects="mask")
def float_mask():
    return (np.array([[1.0, 0.0, 1.0]]),), {}


@probe("to_additive")
def random_mask_float32():
    mask = np.random.default_rng(403).random((2, 3, 4)) < 0.6
    return (mask,), {"dtype": np.float32}


@probe("to_additive")
def random_mask_default_dtype():
    # For the diagnosis: the default dtype (float64), where a result of another dtype shows alone.
    return (np.random.default_rng(404).random((3, 5)) < 0.5,), {}


# --- causal_mask ---------------------------------------------------------------------------------


def test_causal_mask_is_a_square_boolean_array(impl):
    require_causal_formula(impl)
    for n in (1, 4, 7):
        out = impl.causal_mask(n)
        if expect_array(out, what=f"causal_mask({n})", idea=CAUSAL):
            expect_shape(out, (n, n), what=f"causal_mask({n}) has one row per query and one column per key",
                         idea=CAUSAL)
            form = "" if out.dtype == np.bool_ else mask_form(impl.causal_mask(5))  # (one entry tells no form)
            expect_dtype(out, np.bool_, what=f"causal_mask({n})",
                         idea=f"{form}: build it with dtype=bool" if form else
                         "a boolean mask holds True/False, not 0/1 floats: build it with dtype=bool")
    # A mask cached between calls (functools.lru_cache, a dict keyed by n) is one array handed to every caller:
    # a caller that combines into it in place (mask &= padding) changes every later causal_mask(n).
    first, second = impl.causal_mask(4), impl.causal_mask(4)
    if isinstance(first, np.ndarray) and isinstance(second, np.ndarray):
        expect(not np.shares_memory(first, second), what="causal_mask(4) called twice",
               expected="two arrays of their own", observed="the same memory: a mask kept between calls",
               idea="build a new array on every call (no cache): the caller owns it and may write into it")


def test_causal_mask_allows_the_diagonal(impl):
    require_causal_formula(impl)
    out = impl.causal_mask(5)
    if expect_shape(out, (5, 5), what="causal_mask(5)", idea=CAUSAL):
        expect(bool(out[0].any()), what="the first query of causal_mask(5) may attend to some key",
               expected="row 0 allows key 0 (itself)", observed=f"row 0 is {out[0]}: query 0 sees no key at all",
               idea=DIAGONAL)
        expect_equal(np.diagonal(out).astype(bool), np.ones(5, dtype=bool),
                     what="the diagonal of causal_mask(5): each query may attend to its own position", idea=DIAGONAL)
        # The contrast: the diagonal allowed by a mask that masks (one of all True allows it without masking).
        expect_differs(np.asarray(out, dtype=bool), np.ones((5, 5), dtype=bool),
                       what="causal_mask(5) vs. a mask of all True (no key blocked)",
                       expected="some key blocked: a query may not attend to a later key",
                       passed="each query may attend to its own position", idea=CAUSAL)


def _is_additive_float_mask(out: np.ndarray) -> bool:
    """Whether ``out`` is a float mask of 0 (allowed) and -inf (blocked), both present (PyTorch's additive form)."""
    if not (isinstance(out, np.ndarray) and out.dtype.kind == "f" and out.size):
        return False
    blocked = np.isneginf(out)
    return bool(blocked.any() and (~blocked).any() and np.all(out[~blocked] == 0))


def test_causal_mask_blocks_the_future(impl):
    require_causal_formula(impl)
    out = impl.causal_mask(6)
    if not expect_shape(out, (6, 6), what="causal_mask(6)", idea=CAUSAL):
        return
    if _is_additive_float_mask(out):
        expect(False, what="causal_mask(6): entry [i, j] is True exactly for the past and present (j <= i)",
               expected="a boolean mask: True where the query may attend (j <= i), False above the diagonal",
               observed=f"a {out.dtype} mask of 0 and -inf: an additive mask (PyTorch's float attn_mask convention)",
               idea="a convention, not a misconception: this kit's masks are boolean (True = may attend), and "
                    "attention turns False into -inf itself: True on and below the diagonal, False above")
        return
    out = out.astype(bool)
    future = np.triu(np.ones((6, 6), dtype=bool), k=1)  # key j > query i
    past = np.tril(np.ones((6, 6), dtype=bool), k=-1)  # key j < query i
    if not out[future].any() and out[past].all():
        return
    if out[future].all() and not out[past].any():
        observed = ("the future is allowed and the past blocked: this is the upper triangle (np.triu), "
                    "or True/False swapped")
    elif out[future].any():
        first = tuple(int(i) for i in np.argwhere(out & future)[0])
        observed = f"query {first[0]} may attend to the later key {first[1]} (the triangle reaches above the diagonal)"
    else:
        first = tuple(int(i) for i in np.argwhere(~out & past)[0])
        observed = f"query {first[0]} may not attend to the earlier key {first[1]}"
    expect(False, what="causal_mask(6): entry [i, j] is True exactly for the past and present (j <= i)",
           expected="False above the diagonal (j > i), True below it (j < i)", observed=observed,
           idea=f"{CAUSAL}; {POLARITY}")


def test_causal_mask_row_i_allows_i_plus_one_keys(impl):
    require_causal_formula(impl)
    out = impl.causal_mask(7)
    if expect_shape(out, (7, 7), what="causal_mask(7)", idea=CAUSAL):
        if expect_equal(out.astype(bool).sum(axis=-1), np.arange(1, 8),
                        what="the number of keys each query of causal_mask(7) may attend to (row sums)",
                        idea="query i sees the i + 1 keys 0..i: itself and everything before it"):
            # Which keys, not only how many: the lower triangle's rows reversed (or shifted) count the same.
            later = np.argwhere(out.astype(bool) & ~_lower_triangle(7))
            expect(later.size == 0, what="the keys each query of causal_mask(7) may attend to",
                   expected="query i sees keys 0..i only (no later key)",
                   observed=f"query {later[0][0]} sees key {later[0][1]}, a later one" if later.size else "none",
                   idea="query i sees the i + 1 keys 0..i: itself and everything before it, never a later key")


def test_causal_mask_equals_the_lower_triangle(impl):
    require_causal_formula(impl)
    for n in (1, 3, 8):
        expect_equal(impl.causal_mask(n), _lower_triangle(n),
                     what=f"causal_mask({n}) against the lower triangle written out by hand", idea=CAUSAL)


def test_causal_mask_makes_attention_ignore_the_future(impl):
    # Prefix invariance: with a causal mask, changing tokens 4 and 5 cannot change outputs 0..3.
    require_causal_formula(impl)
    rng = np.random.default_rng(41)
    n, d_k, d_v, prefix = 6, 4, 3, 4
    q, k, v = rng.normal(size=(n, d_k)), rng.normal(size=(n, d_k)), rng.normal(size=(n, d_v))
    mask = impl.causal_mask(n)
    if not expect_shape(mask, (n, n), what=f"causal_mask({n})", idea=CAUSAL):
        return
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    q2[prefix:] = rng.normal(size=(n - prefix, d_k)) * 3.0
    k2[prefix:] = rng.normal(size=(n - prefix, d_k)) * 3.0
    v2[prefix:] = rng.normal(size=(n - prefix, d_v)) * 3.0
    before, after = _attention(q, k, v, mask), _attention(q2, k2, v2, mask)
    expect_close(after[:prefix], before[:prefix],
                 what=f"attention outputs 0..{prefix - 1} with your causal mask, after changing tokens "
                      f"{prefix}..{n - 1} (softmax of np.where(mask, scores, -inf), computed by the test)",
                 idea="with a causal mask a token's output depends only on itself and earlier tokens: "
                      "a later token must not leak into it")
    # The contrast: the past is allowed (a mask that blocks every key, all False, lets nothing leak either).
    v3 = v.copy()
    v3[0] = rng.normal(size=d_v) * 3.0
    expect_differs(_attention(q, k, v3, mask)[:prefix], before[:prefix],
                   what=f"attention outputs 0..{prefix - 1} with your causal mask, after changing token 0's value",
                   expected="different outputs: every position may attend to token 0, at or before it",
                   passed="a later token does not leak", idea=CAUSAL)


# --- padding_mask --------------------------------------------------------------------------------


def test_padding_mask_shape_and_dtype(impl):
    lengths, max_len = np.array([4, 0, 6, 1]), 6  # batch 4, max_len 6
    out = impl.padding_mask(lengths, max_len)
    if expect_array(out, what="padding_mask(lengths of 4 sequences, max_len=6)", idea=PAD_SHAPE):
        observed = out.shape
        hint = PAD_SHAPE
        if observed == (4, 6, 1):
            hint += "; yours has the length-1 axis last, so it masks queries instead of keys"
        elif observed == (4, 6):
            hint += "; yours has no query axis, so it would meet (batch, n_q, n_k) scores on the wrong axes"
        expect_shape(out, (4, 1, 6), what="padding_mask(lengths of 4 sequences, max_len=6)", idea=hint)
        expect_dtype(out, np.bool_, what="padding_mask", idea="a boolean mask holds True/False, not 0/1 (Hugging "
                     "Face's attention_mask is int 1/0 for the same meaning: a convention, not a misconception; this "
                     "kit's masks are bool, .astype(bool))")


def test_padding_mask_allows_exactly_the_real_tokens(impl):
    lengths, max_len = [3, 5, 1], 5
    out = impl.padding_mask(np.array(lengths), max_len)
    if not expect_shape(out, (3, 1, 5), what="padding_mask([3, 5, 1], max_len=5)", idea=PAD_SHAPE):
        return
    expected = _padding_pattern(lengths, max_len)
    if np.array_equal(out, expected):
        return
    idea = PADDING
    if np.array_equal(out, ~expected):
        idea = f"{POLARITY}; yours is True on the padding: {PADDING_POLARITY}"
    elif np.array_equal(out, _padding_pattern([length + 1 for length in lengths], max_len)):
        idea = f"{PADDING}; yours also allows key lengths[b] (j <= lengths[b]), one padding token too many"
    expect_equal(out, expected, what="padding_mask([3, 5, 1], max_len=5): True for the real keys j < lengths[b]",
                 idea=idea)


def test_padding_mask_edge_lengths(impl):
    out = impl.padding_mask(np.array([0, 4, 2]), 4)
    if expect_shape(out, (3, 1, 4), what="padding_mask([0, 4, 2], max_len=4)", idea=PAD_SHAPE):
        expect_equal(out[0, 0], np.zeros(4, dtype=bool),
                     what="a sequence of length 0 has no real token: its row is all False", idea=PADDING)
        expect_equal(out[1, 0], np.ones(4, dtype=bool),
                     what="a sequence of length max_len has no padding: its row is all True", idea=PADDING)


def test_padding_mask_makes_attention_ignore_the_padding(impl):
    # Padding invariance: whatever sits in the padded positions, the real tokens' outputs stay the same.
    rng = np.random.default_rng(42)
    lengths, batch, n, d_k, d_v = [2, 5, 4], 3, 5, 4, 2
    q, k, v = rng.normal(size=(batch, n, d_k)), rng.normal(size=(batch, n, d_k)), rng.normal(size=(batch, n, d_v))
    mask = impl.padding_mask(np.array(lengths), n)
    if not expect_shape(mask, (batch, 1, n), what="padding_mask([2, 5, 4], max_len=5)", idea=PAD_SHAPE):
        return
    real = np.arange(n) < np.array(lengths)[:, None]  # (batch, n), built by the test
    k2, v2 = k.copy(), v.copy()
    k2[~real] = rng.normal(size=(int((~real).sum()), d_k)) * 5.0
    v2[~real] = rng.normal(size=(int((~real).sum()), d_v)) * 5.0
    before, after = _attention(q, k, v, mask), _attention(q, k2, v2, mask)
    expect_close(after[real], before[real],
                 what="attention outputs of the real tokens with your padding mask, after changing the padded "
                      "keys and values (computed by the test)",
                 idea=f"{PADDING}: padded keys must get weight 0, so their contents cannot matter; {PAD_SHAPE}")
    # The contrast: the real keys are allowed (a mask that blocks every key, all False, hides the padding too).
    v3 = v.copy()
    v3[:, 0] = rng.normal(size=(batch, d_v)) * 5.0  # position 0 is real in every sequence
    expect_differs(_attention(q, k, v3, mask)[real], before[real],
                   what="attention outputs of the real tokens with your padding mask, after changing token 0's value",
                   expected="different outputs: token 0 is real in every sequence, so its key is allowed",
                   passed="the padding changes nothing", idea=PADDING)


# --- combine_masks -------------------------------------------------------------------------------


def test_combine_causal_and_padding(impl):
    causal = np.tril(np.ones((5, 5), dtype=bool))  # (n, n)
    padding = _padding_pattern([3, 5, 1], 5)  # (batch=3, 1, n)
    ok, out = _attempt(lambda: impl.combine_masks(causal, padding), what="combine_masks(causal (5, 5), "
                       "padding (3, 1, 5))", idea=COMBINE)
    if not ok or not expect_shape(out, (3, 5, 5), what="combine_masks(causal (5, 5), padding (3, 1, 5))",
                                  idea=f"{COMBINE}: (5, 5) and (3, 1, 5) broadcast to (3, 5, 5)"):
        return
    expect_dtype(out, np.bool_, what="combine_masks of boolean masks", idea=COMBINE)
    expected = causal & padding
    if not np.array_equal(out, expected):
        idea = COMBINE
        if np.array_equal(out, causal | padding):
            idea += "; yours allows a pair when ANY mask allows it (logical OR), so padding leaks back in"
        expect_equal(out, expected, what="combine_masks(causal, padding): True only where both are True",
                     idea=idea)


def test_combine_one_mask_and_three_masks(impl):
    rng = np.random.default_rng(43)
    single = rng.random((4, 6)) < 0.5
    ok, out = _attempt(lambda: impl.combine_masks(single), what="combine_masks with a single mask",
                       idea=f"{COMBINE}; accept one mask or many, and fold each one in")
    if ok:
        expect_equal(out, single, what="combine_masks(mask) with a single mask returns that mask",
                     idea=f"{COMBINE}; a single mask combines to itself")
    causal = np.tril(np.ones((5, 5), dtype=bool))  # (n, n)
    keys = _padding_pattern([4, 2, 5], 5)  # (batch, 1, n): padded keys
    queries = np.swapaxes(keys, -1, -2)  # (batch, n, 1): padded queries
    ok, out = _attempt(lambda: impl.combine_masks(causal, keys, queries),
                       what="combine_masks with three masks (5, 5), (3, 1, 5), (3, 5, 1)", idea=COMBINE)
    if ok:
        expect_equal(out, causal & keys & queries,
                     what="combine_masks of three masks (5, 5), (3, 1, 5), (3, 5, 1): the AND of all three",
                     idea=f"{COMBINE}; fold every mask in, not only the first two "
                          "(np.logical_and takes a third argument as its output array)")


# --- to_additive ---------------------------------------------------------------------------------


def test_to_additive_gives_zero_and_minus_infinity(impl):
    mask = np.random.default_rng(44).random((3, 4)) < 0.5
    mask[0, 0], mask[0, 1] = True, False  # both kinds of entry present
    # np.log(mask) gives 0 and -inf too, with a RuntimeWarning at every masked call (a blind round's passed).
    out = call_expecting_no_warning(impl.to_additive, mask, what="to_additive(mask) raises no RuntimeWarning",
                                    idea=f"{ADDITIVE}; choose 0.0 or -np.inf with np.where: np.log(0) is -inf "
                                    "but warns 'divide by zero', at every masked call of attention")
    if not expect_shape(out, mask.shape, what="to_additive of a (3, 4) mask keeps its shape", idea=ADDITIVE):
        return
    allowed, blocked = out[mask], out[~mask]
    if np.all(allowed == 0.0) and np.all(blocked == -np.inf):
        return
    if np.all(allowed == -np.inf) and np.all(blocked == 0.0):
        observed = "-inf where the mask is True and 0.0 where it is False"
        idea = f"{ADDITIVE}; {POLARITY}"
    elif np.all(allowed == 0.0) and np.all(np.isfinite(blocked)) and np.all(blocked < 0):
        observed = f"0.0 where allowed, and the finite value {float(blocked.min()):.4g} where blocked"
        idea = with_convention(f"{ADDITIVE}; a large negative number is not -inf: added to a row whose every key is "
                               "blocked, it moves each score alike, and the query keeps weights instead of none "
                               "(and it overflows in float16)", finite_additive(out, mask))
    else:
        observed = np.array2string(np.asarray(out)).replace("\n", "")
        idea = ADDITIVE
    expect(False, what="to_additive(mask): 0.0 where the mask is True, -inf where it is False",
           expected="0.0 where the mask is True and -inf where it is False", observed=observed, idea=idea)


def test_to_additive_dtype(impl):
    mask = np.array([[True, False, True], [False, False, True]])
    expect_dtype(impl.to_additive(mask), np.float64, what="to_additive(mask) with the default dtype",
                 idea="the default dtype is float64")
    out = impl.to_additive(mask, dtype=np.float32)
    if expect_dtype(out, np.float32, what="to_additive(mask, dtype=np.float32)",
                    idea="honour the dtype argument: convert the result with .astype(dtype)"):
        expect_close(out, np.where(mask, 0.0, -np.inf).astype(np.float32),
                     what="to_additive(mask, dtype=np.float32) values", idea=ADDITIVE, rtol=0.0, atol=0.0)


def test_to_additive_leaves_a_fully_blocked_row_without_weights(impl):
    # The reason for -inf: softmax(scores + M) must give a row whose every key is blocked no weight at all.
    mask = np.array([[True, True, False, False], [False, False, False, False], [True, False, True, True]])
    scores = np.random.default_rng(45).normal(size=mask.shape)
    additive = impl.to_additive(mask)
    if not expect_shape(additive, mask.shape, what="to_additive of a (3, 4) mask", idea=ADDITIVE):
        return
    with np.errstate(invalid="ignore", over="ignore"):
        weights = _softmax(scores + additive)
    expected = _softmax(np.where(mask, scores, -np.inf))
    expect_close(weights, expected,
                 what="softmax(scores + to_additive(mask)) (computed by the test), row 1 has every key blocked",
                 idea=f"{ADDITIVE}; with -1e9 instead of -inf the blocked row gets uniform weights 0.25")


# --- bad input and fixed examples ----------------------------------------------------------------


def test_rejects_bad_input(impl):
    expect_probe(impl, "causal_mask/no_positions", what="causal_mask(0)",
                 idea=f"{CHECKS}: a sequence length is positive")
    expect_raises_value_error(lambda: impl.causal_mask(-3), argument="n",
                              what="causal_mask(-3)", idea=f"{CHECKS}: a sequence length is positive")
    expect_probe(impl, "padding_mask/length_beyond_max_len",
                 what="padding_mask([2, 7, 1], max_len=5): a length exceeds max_len",
                 idea=f"{CHECKS}: each length lies between 0 and max_len")
    expect_raises_value_error(lambda: impl.padding_mask(np.array([1, -1]), 3), argument="lengths",
                              what="padding_mask([1, -1], max_len=3): a negative length",
                              idea=f"{CHECKS}: each length lies between 0 and max_len")
    expect_raises_value_error(lambda: impl.padding_mask(np.array([1, 2]), 0), argument="max_len",
                              what="padding_mask([1, 2], max_len=0)", idea=f"{CHECKS}: max_len is positive")
    expect_probe(impl, "to_additive/float_mask", what="to_additive of a float array",
                 idea=f"{CHECKS}: to_additive takes a boolean mask (a float mask is already additive)")
    expect_raises_value_error(lambda: impl.combine_masks(np.ones((3, 4)), np.ones((3, 4), dtype=bool)),
                              argument="masks", what="combine_masks of a float and a boolean mask",
                              idea=f"{CHECKS}: combine boolean masks, then convert with to_additive")


def test_reference_values(impl):
    require_causal_formula(impl)
    expect_probe(impl, "causal_mask/seven_positions", what="causal_mask on the fixed input causal_mask/seven_positions",
                 idea=CAUSAL)
    expect_probe(impl, "padding_mask/ragged_batch", what="padding_mask on the fixed input padding_mask/ragged_batch",
                 idea=PADDING)
    expect_probe(impl, "combine_masks/causal_and_padding",
                 what="combine_masks on the fixed input combine_masks/causal_and_padding", idea=COMBINE)
    expect_probe(impl, "combine_masks/three_masks_the_last_full_size",
                 what="combine_masks of three masks (5, 5), (3, 1, 5), (3, 5, 5)",
                 idea=COMBINE + "; fold in every mask")
    expect_probe(impl, "combine_masks/one_mask", what="combine_masks of a single (4, 6) mask",
                 idea=COMBINE + "; a single mask combines to itself")
    expect_probe(impl, "to_additive/random_mask_float32",
                 what="to_additive on the fixed input to_additive/random_mask_float32", idea=ADDITIVE)


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_lengths(rng: np.random.Generator) -> tuple[tuple, dict]:
    max_len, batch = unseen.sizes(rng, (3, 12), (2, 6))
    return (rng.integers(1, max_len + 1, size=batch), max_len), {}


def _unseen_masks(rng: np.random.Generator) -> tuple[tuple, dict]:
    n, batch = unseen.sizes(rng, (3, 9), (2, 5))
    return (rng.random((n, n)) < 0.6, rng.random((batch, 1, n)) < 0.7), {}


# causal_mask's input is an integer, which no move of the gate changes: a test of its bad input asks the sizes gate.
unseen.register_sizes_gates("masks", {"causal_mask": require_causal_formula})
unseen.register("masks", {
    "padding_mask": unseen.Twin(_unseen_lengths, lambda lengths, max_len: _padding_pattern(list(lengths), max_len),
                                PADDING + "; " + PAD_SHAPE),
    # (every mask: np.logical_and's third argument would be its output array)
    "combine_masks": unseen.Twin(_unseen_masks, lambda *masks: functools.reduce(np.logical_and, masks), COMBINE),
    "to_additive": unseen.Twin(lambda rng: ((rng.random(unseen.sizes(rng, (2, 6), (2, 6))) < 0.5,),
                                            {}),
                               lambda mask, dtype=np.float64: np.where(mask, 0.0, -np.inf).astype(dtype), ADDITIVE),
})
