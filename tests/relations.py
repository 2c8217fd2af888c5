"""A family of mistakes read off the outputs: how a function's wrong result relates to the right one.

When no catalogued mistake explains a failure and the function the test called has no step inside it to
name (``tests/steps.py``), its wrong outputs may still stand in a simple relation to the right ones on
*every* fixed input where they differ: the sign flipped, the sign dropped, the entries reversed, one entry
too many or too few, the right entries in another order, a constant factor, a factor per row and per
column, a constant offset. Each is a family of mistakes (a sign, an off-by-one, a reversed order, a
missing or extra normalisation), stated as the fact it is: computed from the same values the failure
prints, it cannot contradict them.

A relation is named only when exactly one family holds on every differing output of every deviating probe
of the function, and it rests on at least two numbers that differ (one number cannot tell families apart:
a scalar is a multiple of any other scalar). A function may declare what its output *means* with
:func:`meaning` (``top_k``: the scores its indices pick), next to its probes; a result whose meaning equals
the right one's while its values differ is the family "ties broken otherwise".

More families are read off the probes themselves, not off two arrays: the right values in another dtype
("another dtype"); the result of another probe that differs in one argument only ("an argument not used",
"another default": :func:`argument_not_used`; the probes come in such pairs where a mistake is common);
raises or other shapes on exactly the inputs with more, or fewer, axes ("a fixed number of axes":
:func:`fixed_axes`), an odd size (:func:`odd_sizes`) or an optional argument given (:func:`argument_given`);
random arrays of the right shape and spread but other numbers, where the contract fixes the draws ("other
draws": :func:`other_draws`; :func:`draws_left_open` declares where it does not).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

RTOL, ATOL = 1e-6, 1e-9  # as tight as a catalogue match: a relation is an exact fact, not a likeness


@dataclass(frozen=True)
class Found:
    """A relation that holds: the family's name and, in words, what the output is against the right one."""

    family: str
    words: str
    general: str = ""
    """The words without one input's numbers, for when the inputs give different ones ('' : ``words``)."""
    claim: tuple = ()
    """For a family named by the inputs it fails on, what it says of them, for :func:`contradicted`: ``("axes",
    argument, numbers of axes it is right on)``, ``("odd", argument)`` or ``("given", argument)``; () otherwise."""


MEANINGS: dict[str, Callable[[tuple, dict, np.ndarray], np.ndarray]] = {}
DRAWS_OPEN: set[str] = set()
"""Functions whose contract leaves open how they draw from their generator (dropout): no "other draws" there."""


def draws_left_open(function: str) -> None:
    """Declare that ``function``'s contract does not fix its calls of the generator (next to its probes)."""
    DRAWS_OPEN.add(function)


def meaning(function: str, view: Callable[[tuple, dict, np.ndarray], np.ndarray]) -> None:
    """Declare what ``function``'s (first) output means: ``view(args, kwargs, output)`` (next to its probes)."""
    MEANINGS[function] = view


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    try:
        return bool(np.allclose(a.astype(float), b.astype(float), rtol=RTOL, atol=ATOL, equal_nan=True))
    except (TypeError, ValueError):
        return bool(np.array_equal(a, b))


def _close_in_the_lesser_precision(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values in two dtypes, as far as the less precise one holds them (float32: about 7 digits)."""
    if not (_numeric(a) and _numeric(b)):
        return False
    low = [d for d in (a.dtype, b.dtype) if d.kind == "f" and d.itemsize < 8]
    if not low:
        return _close(a, b)
    values = np.abs(b.astype(float))
    scale = float(np.max(values[np.isfinite(values)], initial=0.0))
    eps = float(np.finfo(min(low, key=lambda d: d.itemsize)).eps)
    return bool(np.allclose(a.astype(float), b.astype(float), rtol=64 * eps, atol=64 * eps * max(scale, 1.0),
                            equal_nan=True))


def _numeric(a: np.ndarray) -> bool:
    return a.dtype.kind in "biuf"


def _differing(mine: np.ndarray, want: np.ndarray) -> int:
    """How many numbers differ (arrays of one shape)."""
    return int(np.sum(~np.isclose(mine.astype(float), want.astype(float), rtol=RTOL, atol=ATOL, equal_nan=True)))


def _axis_words(array: np.ndarray, axis: int) -> str:
    if array.ndim == 1:
        return ""
    return " along its last axis" if axis == array.ndim - 1 else f" along axis {axis}"


def _sign(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if _close(mine, -want):
        return Found("sign flip", "it is the right one with its sign flipped")
    return None


def _absolute(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if np.any(want < 0) and _close(mine, np.abs(want)):
        return Found("sign dropped", f"it is the absolute value of the right one: the {int(np.sum(want < 0))} "
                                     "negative entries came out positive",
                     "it is the absolute value of the right one: the negative entries came out positive")
    return None


def _reversed(mine: np.ndarray, want: np.ndarray) -> Found | None:
    # Along an axis of two entries a reversal is also a rotation by one (the new entry put first, not last) and a
    # swap: both families hold there, and only another input (an axis of three or more) can tell them apart.
    for axis in range(want.ndim):
        flipped = np.flip(want, axis)
        if want.shape[axis] >= 2 and not _close(flipped, want) and _close(mine, flipped):
            return Found("reversed order", f"it holds the right entries in reverse order{_axis_words(want, axis)} "
                                           "(the first where the last should be)")
    return None


def _rotated(mine: np.ndarray, want: np.ndarray) -> Found | None:
    """The right entries along one axis, rotated by one: the last put first, or the first last."""
    for axis in range(want.ndim):
        if want.shape[axis] < 2:
            continue
        where = f" along axis {axis - want.ndim}" if want.ndim > 1 else ""  # from the end: batch axes vary
        for shift in (1, -1):
            turned = np.roll(want, shift, axis)
            if not _close(turned, want) and _close(mine, turned) and (
                    want.shape[axis] == 2 or not _close(mine, np.flip(want, axis))):
                moved = "the last entry comes first" if shift == 1 else "the first entry comes last"
                general = f"it holds the right entries rotated by one{where}: an entry put at the wrong end"
                return Found("another order", f"{general} ({moved}), the others follow in their order",
                             f"{general}, the others in their order")
    return None


def _rearranged(mine: np.ndarray, want: np.ndarray) -> Found | None:
    """Exactly the right numbers, in another arrangement that no simpler order family names.

    Only for float arrays of many different values (with few distinct values, a mask or ids, the same numbers
    elsewhere would say little): a transpose, a reshape in another order, strided where contiguous belongs.
    """
    if mine.dtype.kind != "f" or want.dtype.kind != "f" or mine.size != want.size or want.size < 4:
        return None
    if np.unique(want).size < max(4, want.size // 2) or _close(mine.reshape(want.shape) if mine.size else mine, want):
        return None
    if not _close(np.sort(mine, axis=None), np.sort(want, axis=None)):
        return None
    if mine.shape == want.shape and any(relation(mine, want) is not None for relation in (_reversed, _rotated,
                                                                                          _reordered)):
        return None  # a simpler order: its own family says it
    shape = "" if mine.shape == want.shape else f" (and shape {mine.shape} instead of {want.shape})"
    return Found("another layout", f"it holds exactly the right numbers, arranged differently{shape}: a transpose, "
                                   "a reshape or a split in another order (strided where contiguous blocks belong), "
                                   "not another computation",
                 "it holds exactly the right numbers, arranged differently: a transpose, a reshape or a split in "
                 "another order (strided where contiguous blocks belong), not another computation")


def _unsummed(mine: np.ndarray, want: np.ndarray) -> Found | None:
    """The gradient of a broadcast input, not summed back: extra leading (or stretched) axes that sum to it."""
    extra = mine.ndim - want.ndim
    if extra < 0 or mine.shape == want.shape or not (_numeric(mine) and _numeric(want)):
        return None
    tail = mine.shape[extra:]
    if len(tail) != want.ndim or any(m != w and w != 1 for m, w in zip(tail, want.shape, strict=True)):
        return None
    stretched = tuple(extra + axis for axis, (m, w) in enumerate(zip(tail, want.shape, strict=True)) if m != w)
    summed = mine.sum(axis=tuple(range(extra)) + stretched, keepdims=True).reshape(want.shape)
    if not _close(summed, want):
        return None
    return Found("not summed over the broadcast axes", f"it has shape {mine.shape} where the input's is "
                 f"{want.shape}, and summed over the axes the broadcast added it is the right one: the gradient of an "
                 "input that was broadcast (fewer batch axes, a size-1 axis) is summed back to that input's shape",
                 "it keeps the axes a broadcast added, and summed over them it is the right one: the gradient of an "
                 "input that was broadcast (fewer batch axes, a size-1 axis) is summed back to that input's shape")


def _truncated(mine: np.ndarray, want: np.ndarray) -> Found | None:
    """Integers where the right values are fractions: each the right one cut to an integer."""
    if mine.dtype.kind not in "iu" or want.dtype.kind != "f" or not np.all(np.isfinite(want)):
        return None
    if np.all(want == np.trunc(want)) or not np.array_equal(mine, np.trunc(want).astype(mine.dtype)):
        return None
    return Found("an integer result", f"it is the right one cut to integers ({mine.dtype}): the result took an "
                                      "integer dtype (np.empty_like(x) or np.zeros_like(x) of integer x, out=x, "
                                      "x[...] = ...); the contract's result is a float array")


def _one_off(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if mine.ndim != want.ndim:
        return None
    differ = [axis for axis in range(want.ndim) if mine.shape[axis] != want.shape[axis]]
    if len(differ) != 1:
        return None
    axis = differ[0]
    extra = mine.shape[axis] - want.shape[axis]
    common = min(mine.shape[axis], want.shape[axis])
    if abs(extra) != 1 or common < 1:
        return None
    cut = [slice(None)] * want.ndim
    cut[axis] = slice(0, common)
    if not _close(mine[tuple(cut)], want[tuple(cut)]):
        return None
    more = "one entry more" if extra > 0 else "one entry fewer"
    return Found("off by one", f"it has {more}{_axis_words(want, axis)} than the right one ({mine.shape[axis]} "
                               f"instead of {want.shape[axis]}), and its first {common} agree",
                 f"it has {more}{_axis_words(want, axis)} than the right one, and the entries they share agree")


def _reordered(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if want.ndim == 0 or want.shape[-1] < 2 or not (_numeric(mine) and _numeric(want)):
        return None
    if _reversed(mine, want) is None and _rotated(mine, want) is None and _close(np.sort(mine, axis=-1),
                                                                                  np.sort(want, axis=-1)):
        rows = "each row" if want.ndim > 1 else "it"
        return Found("another order", f"{rows} holds the right entries, in another order")
    return None


def _scale(mine: np.ndarray, want: np.ndarray) -> Found | None:
    nonzero = np.abs(want) > ATOL
    if nonzero.sum() < 2 or np.any(np.abs(mine[~nonzero]) > ATOL):
        return None
    ratio = mine[nonzero] / want[nonzero]
    factor = float(np.median(ratio))
    if abs(factor - 1) > 1e-6 and factor != 0 and abs(factor + 1) > 1e-6 and _close(mine, factor * want):
        # The factor is the fixed inputs': one made of the arguments (1 - rate, sqrt(d_k)) is another number on
        # another input (a blind round: "0.75 times" above a test's failure at 0.5 times, rate 0.5 there).
        return Found("a scale", f"it is {factor:.6g} times the right one, every entry",
                     "it is the right one times a constant factor, every entry (the factor depends on the input)")
    return None


def _scale_per_row_and_column(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if want.ndim != 2 or min(want.shape) < 2 or np.any(np.abs(want) <= ATOL):
        return None
    ratio = mine / want
    if np.any(ratio <= 0) or not np.all(np.isfinite(ratio)):
        return None
    logs = np.log(ratio)
    row, column = logs.mean(axis=1, keepdims=True), logs.mean(axis=0, keepdims=True)
    fit = np.exp(row + column - logs.mean())
    if not _close(mine, fit * want):
        return None
    rows_vary = not np.allclose(row, row[0], rtol=0, atol=1e-9)
    columns_vary = not np.allclose(column, column[0, 0], rtol=0, atol=1e-9)
    if not (rows_vary or columns_vary):
        return None  # one constant factor: _scale's family
    if _distributions(mine) and _distributions(want):
        # Rows of weights: log(mine) - log(want) = r_i + c_j, so mine = softmax(right scores + c_j), a term per key.
        return Found("a term per key", "its weights are the softmax of the right scores plus a term that depends "
                                       "on the key (the column) alone, the same for every query: what is added to "
                                       "each key's score before the softmax (a penalty, a mask, a bias) differs, "
                                       "not the comparison of query and key") if columns_vary else None
    which = ("a factor of its row and one of its column" if rows_vary and columns_vary
             else "a factor of its row" if rows_vary else "a factor of its column")
    return Found("a normalisation", f"each entry is the right one times {which}: a length, a norm or a scale per "
                                    "row or column that is off, not the comparison itself")


def _distributions(array: np.ndarray) -> bool:
    """Rows of weights: non-negative, each summing to 1."""
    return bool(np.all(array >= 0) and np.allclose(array.sum(axis=-1), 1.0, rtol=0, atol=1e-9))


def _offset(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if want.size < 2 or not (_numeric(mine) and _numeric(want)):
        return None
    difference = mine.astype(float) - want.astype(float)
    shift = float(np.median(difference))
    if abs(shift) > ATOL and np.allclose(difference, shift, rtol=0, atol=max(ATOL, 1e-6 * abs(shift))):
        return Found("an offset", f"it is the right one {'plus' if shift > 0 else 'minus'} {abs(shift):.6g}, "
                                  "every entry",
                     "it is the right one plus a constant, every entry (the constant depends on the input)")
    return None


def _clipped_at_zero(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if not (_numeric(mine) and _numeric(want)) or not np.any(want < -ATOL) or not np.any(want > ATOL):
        return None
    if _close(mine, np.maximum(want, 0.0)):
        return Found("clipped at zero", "it is the right one with every negative entry set to 0 (clipped, or "
                                        "passed through a ReLU): the right values may be negative")
    return None


def _reciprocal(mine: np.ndarray, want: np.ndarray) -> Found | None:
    if want.size < 2 or not (_numeric(mine) and _numeric(want)) or np.any(np.abs(want) <= ATOL):
        return None
    product = mine.astype(float) * want.astype(float)
    constant = float(np.median(product))
    if abs(constant) > ATOL and not _close(want, constant / want) and _close(mine, constant / want):
        return Found("a reciprocal", f"it is {constant:.6g} divided by the right one, entry by entry: a division "
                                     "where a product belongs (or a product where a division does)",
                     "it is a constant divided by the right one, entry by entry: a division where a product "
                     "belongs (or a product where a division does)")
    return None


def _offset_where_different(mine: np.ndarray, want: np.ndarray) -> Found | None:
    """Integers (ids, counts, indices): every entry that differs is off by the same amount, the others agree."""
    if mine.dtype.kind not in "iu" or want.dtype.kind not in "iu":
        return None
    difference = mine.astype(np.int64) - want.astype(np.int64)
    moved = difference[difference != 0]
    if moved.size < 2 or moved.size == difference.size or np.any(moved != moved[0]):
        return None  # fewer than two, every entry (_offset's family), or by different amounts
    shift = int(moved[0])
    return Found("off by one" if abs(shift) == 1 else "an offset",
                 f"each entry that differs is the right one {'+' if shift > 0 else '-'} {abs(shift)} (the "
                 f"{difference.size - moved.size} others agree)",
                 f"each entry that differs is the right one {'+' if shift > 0 else '-'} {abs(shift)}, the others "
                 "agree")


RELATIONS: tuple[Callable[[np.ndarray, np.ndarray], Found | None], ...] = (
    _sign, _absolute, _reversed, _rotated, _one_off, _reordered, _scale, _scale_per_row_and_column, _offset,
    _offset_where_different, _clipped_at_zero, _reciprocal, _truncated, _rearranged, _unsummed)
"""Each family's test on one differing array (the student's, the right one); a new family is one more entry."""
ANY_SHAPE = (_one_off, _rearranged, _unsummed)  # the families whose arrays may differ in shape
# The families that a function returning one number shows across its inputs (one number per input, taken
# together): an order, a length or a row means nothing there.
ACROSS_INPUTS = (_sign, _absolute, _scale, _offset, _clipped_at_zero, _reciprocal)


def _holding(mine: np.ndarray, want: np.ndarray, relations: tuple = RELATIONS) -> set[tuple[str, str, str]]:
    """The families whose relation holds between one differing array and the right one."""
    found = set()
    for relation in relations:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):  # infinities and NaN: compared, not told
                warnings.simplefilter("ignore", RuntimeWarning)
                hit = relation(mine, want) if mine.shape == want.shape or relation in ANY_SHAPE else None
        except (TypeError, ValueError, FloatingPointError):
            hit = None
        if hit is not None:
            found.add((hit.family, hit.words, hit.general or hit.words))
    return found


def relation(function: str, probes: list[str], outputs: dict[str, Any], expected: dict[str, Any],
             arguments: Callable[[str], tuple[tuple, dict]] | None = None,
             labels: tuple[str, ...] = ()) -> Found | None:
    """The one family that relates ``function``'s outputs to the right ones on all of ``probes``, or None.

    ``outputs`` and ``expected`` map each probe to a tuple of arrays (the student's and the golden ones);
    ``arguments(probe)`` gives a probe's arguments, for a function that declared its :func:`meaning`;
    ``labels`` the names of the result's arrays (``steps.names``), for the words.
    """
    pairs, items, count = [], set(), 0
    retyped: dict[int, set[tuple[str, str]]] = {}  # item -> (its dtype, the contract's) where only the dtype differs
    for probe in probes:
        mine, want = outputs.get(probe), expected.get(probe)
        if not isinstance(mine, tuple) or not isinstance(want, tuple) or len(mine) != len(want):
            return None
        count = max(count, len(want))
        for item, (a, b) in enumerate(zip(mine, want, strict=True)):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape == b.shape and a.dtype != b.dtype and _close_in_the_lesser_precision(a, b):
                retyped.setdefault(item, set()).add((a.dtype.name, b.dtype.name))
            elif not (a.shape == b.shape and _close(a, b)):
                pairs.append((a, b))
                items.add(item)
    if not pairs:
        return _retyped(retyped, count)
    # Values in a relation and a float of another precision are two differences: the relation is named with the
    # other said beside it (a blind round's grad_q unscaled beside a grad_v made float64 was told "a scale, the
    # others right"; torch's LinearBackward, adapted in float64, is a transpose and float64).
    precision = {(a.dtype.name, b.dtype.name) for a, b in pairs if a.dtype != b.dtype and a.dtype.kind == b.dtype.kind
                 == "f"}.union(*retyped.values())
    if precision:
        found = _related_values(function, probes, outputs, expected, arguments, labels, pairs, items, count)
        if found is None or len(precision) != 1:
            return None
        ((mine, want),) = precision
        also = f"; and it returns {mine} where the contract gives {want} (dtype in = dtype out)"
        return Found(found.family, found.words.replace(" (the others are right)", "") + also,
                     found.general.replace(" (the others are right)", "") + also if found.general else "")
    return _related_values(function, probes, outputs, expected, arguments, labels, pairs, items, count)


def _related_values(function: str, probes: list[str], outputs: dict[str, Any], expected: dict[str, Any],
                    arguments: Callable[[str], tuple[tuple, dict]] | None, labels: tuple[str, ...],
                    pairs: list, items: set[int], count: int) -> Found | None:
    """:func:`relation`'s family of the ``pairs`` of arrays that differ in value (``items`` of ``count``)."""
    tie = _ties(function, probes, outputs, expected, arguments)
    if tie is not None:
        return tie
    if sum(_differing(a, b) if a.shape == b.shape else 2 for a, b in pairs) < 2:
        return None  # one number that differs: any relation holds for it
    seen: list[set[tuple[str, str, str]]] = []
    if len(pairs) > 2 and all(a.size == 1 and b.size == 1 for a, b in pairs):
        # One number per input (three inputs at least): the relation must hold across them, one constant for all.
        try:
            mine, want = (np.array([float(pair[side].item()) for pair in pairs]) for side in (0, 1))
        except (TypeError, ValueError):
            return None
        seen.append({(family, words.replace(", every entry", "").replace(", entry by entry", ""), general)
                     for family, words, general in _holding(mine, want, ACROSS_INPUTS)})
        pairs = []
    for mine, want in pairs:
        if mine.dtype.kind not in "biuf" or want.dtype.kind not in "biuf":
            return None
        seen.append(_holding(mine, want))
    names = set.intersection(*({family for family, _, _ in holding} for holding in seen))
    if len(names) != 1:
        return None  # none, or two families fit the same values (a symmetric array ...): the values cannot tell
    (name,) = names
    words = {(words, general) for holding in seen for family, words, general in holding if family == name}
    generals = {general for _, general in words}
    if len(words) != 1 and len(generals) != 1:
        return None
    general = generals.pop() if len(generals) == 1 else ""
    said = words.pop()[0] if len(words) == 1 else general
    if len(items) < count:  # a result of several arrays, some of them right: say which one the relation is about
        which = (f"its {' and '.join(labels[item] for item in sorted(items))}" if len(labels) == count
                 else f"item {', '.join(str(item) for item in sorted(items))} of its result")
        said, general = (_about(which, len(items), text) if text else "" for text in (said, general))
    return Found(name, said, general if general != said else "")


def _about(which: str, items: int, said: str) -> str:
    """``said`` of one or some of a result's arrays (``which``), the others right."""
    rest = said.removeprefix("it ")
    verb = rest.split(" ", 1)[0]
    if items > 1 and verb in ("is", "has", "holds", "keeps"):  # two arrays or more: the plural
        rest = {"is": "are", "has": "have", "holds": "hold", "keeps": "keep"}[verb] + rest[len(verb):]
    return f"{which} (the others are right) {rest}" if verb in ("is", "has", "holds", "keeps") else (
        f"{which} (the others are right): {rest}")


def shown_alike(words: str, observed: list[str]) -> bool:
    """Whether a family's numbers (a factor) agree with what each failure below it shows (``is A instead of B``).

    A family read off the fixed inputs states their numbers; a test's own input may give others (a blind round:
    "3 times the right one" above a dropout mean of 2.33 for 1, at another rate). Only where every failure shows
    the same factor are the numbers said; elsewhere the family's words without them.
    """
    factor = re.search(r"is (-?[0-9][0-9.e+-]*) times the right one", words)
    if factor is None or not observed:
        return False
    for text in observed:
        shown = re.search(r"is (-?[0-9][0-9.e+-]*) instead of (-?[0-9][0-9.e+-]*)", text)
        try:
            if shown is None or abs(float(shown[1]) / float(shown[2]) / float(factor[1]) - 1) > 1e-3:
                return False
        except (ValueError, ZeroDivisionError):
            return False
    return True


# Why a result comes out in another dtype while its values are right, by (its dtype's kind, the contract's).
_DTYPE_CAUSES = {
    ("float64", "float32"): "a float64 array or number made on the way promotes the result (np.sqrt of a number, "
                            "np.eye or np.zeros without dtype=, a float64 mask or factor); make them in the "
                            "input's dtype, or use a Python float such as math.sqrt(d)",
    ("float32", "float64"): "it is computed in, or cast to, float32 on the way (a float32 default, "
                            ".astype(np.float32)); the contract's dtype here is float64",
    ("int", "bool"): "0/1 numbers where the contract holds True/False; a comparison gives booleans, or .astype(bool)",
    ("float", "bool"): "0/1 numbers where the contract holds True/False; a comparison gives booleans, or "
                       ".astype(bool)",
}


def _kind(dtype: str) -> str:
    if dtype in ("float64", "float32"):
        return dtype
    return {"i": "int", "u": "int", "f": "float", "b": "bool"}.get(np.dtype(dtype).kind, dtype)


def _retyped(retyped: dict[int, set[tuple[str, str]]], count: int) -> Found | None:
    """The family "another dtype": every differing output has the right values, in another dtype, the same one."""
    pairs = set().union(*retyped.values()) if retyped else set()
    if len(pairs) != 1:
        return None  # nothing differs, or several dtypes: no one cause
    ((mine, want),) = pairs
    cause = _DTYPE_CAUSES.get((_kind(mine), _kind(want)))
    said = (f"its values are right and only its dtype differs: {mine} where the contract gives {want}"
            + (f": {cause}" if cause else ""))
    if len(retyped) < count:
        which = ", ".join(str(item) for item in sorted(retyped))
        said = f"item {which} of its result (the others are right): {said.removeprefix('its ')}"
    return Found("another dtype", said)


def _ties(function: str, probes: list[str], outputs: dict[str, Any], expected: dict[str, Any],
          arguments: Callable[[str], tuple[tuple, dict]] | None) -> Found | None:
    view = MEANINGS.get(function)
    if view is None or arguments is None:
        return None
    for probe in probes:
        mine, want = outputs.get(probe), expected.get(probe)
        args, kwargs = arguments(probe)
        try:
            if not _close(np.asarray(view(args, kwargs, mine[0])), np.asarray(view(args, kwargs, want[0]))):
                return None
        except Exception:  # noqa: BLE001 - an output the view cannot read: no tie
            return None
    return Found("ties broken otherwise", "it picks the same scores in the same order as the right one; only "
                                          "which of several equal scores comes first differs (torch.topk, "
                                          "numpy's default argsort and a reversed ascending sort, argsort()[::-1], "
                                          "break ties their own way, a convention; this kit's contract puts the "
                                          "lower index first: a stable sort of the negated scores)")


def _count(numbers: set[int]) -> str:
    ordered = sorted(numbers)
    return ", ".join(str(n) for n in ordered[:-1]) + (" or " if len(ordered) > 1 else "") + str(ordered[-1])


def fixed_axes(deviating: list[str], passing: list[str], outputs: dict[str, Any], expected: dict[str, Any],
               arguments: Callable[[str], tuple[tuple, dict]], names: tuple[str, ...] = ()) -> Found | None:
    """The family "a fixed number of axes", or None.

    The call raises or gives another shape on exactly the inputs whose array argument has more (or fewer) axes
    than on every input where it is right.

    ``deviating`` are the probes where the function goes wrong, ``passing`` those where it is right (both
    without the bad-input probes); ``names`` the function's parameter names, for the words. Named only when
    every deviating probe raised or returned an array of another shape (right shapes with wrong values are not
    a matter of axes), at least one probe passes, and one array argument's number of axes separates the two.
    Said of the inputs seen, never as "exactly these": an input of another number of axes the probes lack may
    fail too (a blind round: "exactly 3 axes", then a test's 4-axis input crashing). A right answer may also be
    a shape's luck (a sum put back with ``[:, None]`` broadcasts on square weights, or on a sum over axis 1 of
    three): where the test's own crash belies the family, it is not said (:func:`contradicted`).
    """
    if not deviating or not passing or not _raised_or_reshaped(deviating, outputs, expected):
        return None
    ndims = {}
    for probe in deviating + passing:
        args, _ = arguments(probe)
        ndims[probe] = [a.ndim if isinstance(a, np.ndarray) else None for a in args]
    for index in range(min(len(found) for found in ndims.values())):
        if any(found[index] is None for found in ndims.values()):
            continue
        bad = {ndims[p][index] for p in deviating}
        good = {ndims[p][index] for p in passing}
        # More (or fewer) axes than every right input, or a single number of axes right among wrong ones on both
        # sides of it (written for exactly four).
        band = len(good) == 1 and not good & bad and min(bad) < min(good) < max(bad)
        if not (max(good) < min(bad) or max(bad) < min(good) or band):
            continue
        name = names[index] if index < len(names) else f"argument {index + 1}"
        return Found("a fixed number of axes",
                     f"it raises or returns another shape on every one whose {name} has {_count(bad)} axes, and is "
                     f"right on every one whose {name} has {_count(good)}: it is written "
                     "for a fixed number of axes, where the contract takes any number of leading (batch) axes; "
                     "index from the end (x.shape[-1], axis=-1, np.swapaxes(k, -1, -2), ...) instead of unpacking a "
                     "fixed shape", claim=("axes", name, frozenset(good)))
    return None


def odd_sizes(deviating: list[str], passing: list[str], outputs: dict[str, Any], expected: dict[str, Any],
              arguments: Callable[[str], tuple[tuple, dict]], names: tuple[str, ...] = ()) -> Found | None:
    """The family "an odd size", or None.

    The call raises or gives another shape on exactly the inputs where one integer argument is odd (it is even
    on every input where the function is right). As :func:`fixed_axes`: every deviating probe raised or
    returned another shape, and one probe at least passes.
    """
    if not deviating or not passing or not _raised_or_reshaped(deviating, outputs, expected):
        return None
    calls = {p: _named(*arguments(p), names) for p in deviating + passing}
    for key in calls[deviating[0]]:
        values = {p: calls[p].get(key) for p in calls}
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values.values()):
            continue
        if all(values[p] % 2 for p in deviating) and not any(values[p] % 2 for p in passing):
            odd = sorted({int(values[p]) for p in deviating})
            return Found("an odd size", f"it raises or returns another shape, and those are exactly the inputs whose "
                         f"{key} is odd ({', '.join(map(str, odd))}; where it is even it is right): an odd size leaves "
                         "one entry without a partner; count the halves as ceil(n / 2) and n // 2 (x[..., 0::2] has "
                         "one column more than x[..., 1::2] when n is odd)", claim=("odd", key))
    return None


def argument_given(deviating: list[str], passing: list[str], outputs: dict[str, Any], expected: dict[str, Any],
                   arguments: Callable[[str], tuple[tuple, dict]], names: tuple[str, ...] = ()) -> Found | None:
    """The family "an optional argument given", or None.

    The call raises or gives another shape on exactly the inputs that pass one optional argument (not None),
    and is right on every input that leaves it out or passes None. As :func:`fixed_axes`, only for raises and
    shapes, with one probe at least that passes.
    """
    if not deviating or not passing or not _raised_or_reshaped(deviating, outputs, expected):
        return None
    calls = {p: _named(*arguments(p), names) for p in deviating + passing}
    for key in calls[deviating[0]]:
        if key not in names:  # an argument of *args ("argument 2"), no optional parameter (a blind round's
            continue          # combine_masks(*masks) with np.stack was told of an `if argument 2:`)
        if all(calls[p].get(key) is not None for p in deviating) and all(
                calls[p].get(key) is None for p in passing):
            # `if key:` only where the argument given is an array (an int axis was told of it: a blind round).
            truth = (f" (with an array, `if {key}:` asks for one truth value of many: test `{key} is not None`)"
                     if any(isinstance(calls[p].get(key), np.ndarray) for p in deviating) else "")
            return Found("an optional argument given", f"it raises or returns another shape, and those are exactly "
                         f"the inputs that pass {key} (where {key} is None or left out it is right): the code for a "
                         f"given {key} is what fails{truth}", claim=("given", key))
    return None


def by_inputs(deviating: list[str], passing: list[str], outputs: dict[str, Any], expected: dict[str, Any],
              arguments: Callable[[str], tuple[tuple, dict]], names: tuple[str, ...] = ()) -> Found | None:
    """The family the inputs that fail tell (:func:`fixed_axes`, :func:`odd_sizes`, :func:`argument_given`), or None.

    Named only when nothing else the probes differ in separates the failing inputs from the right ones as well: a
    blind round's ``rotary_embedding`` whose ``positions`` defaulted to an array of 512 failed on every probe that
    left ``positions`` out, which were also the ones whose ``x`` had 3 axes, and was told "a fixed number of
    axes". Where two kinds of difference (a number of axes, an odd size, an argument given or left out) both fit,
    or two arguments of a kind that is not the number of axes (the arrays of a call mostly share theirs), the
    inputs cannot say which one the code fails on, and no family is named.
    """
    for family in (fixed_axes, odd_sizes, argument_given):
        found = family(deviating, passing, outputs, expected, arguments, names)
        if found is not None:
            kind, key = found.claim[0], found.claim[1]
            others = [(k, n) for k, n in _separations(deviating, passing, arguments, names)
                      if k != kind or (k != "axes" and n != key)]
            return None if others else found
    return None


def _separations(deviating: list[str], passing: list[str], arguments: Callable[[str], tuple[tuple, dict]],
                 names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each (kind, argument) whose feature takes other values on every deviating probe than on every passing one.

    The kinds: ``"axes"`` (an array's number of axes), ``"odd"`` (an integer's parity), ``"given"`` (an argument
    passed and not None, against left out or None).
    """
    calls = {p: _named(*arguments(p), names) for p in deviating + passing}
    keys = {key for call in calls.values() for key in call}

    def features(call: dict[str, Any], key: str) -> dict[str, Any]:
        value = call.get(key)
        return {"axes": value.ndim if isinstance(value, np.ndarray) else None,
                "odd": int(value) % 2 if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None,
                "given": value is not None}

    found = []
    for key in sorted(keys):
        seen = {p: features(calls[p], key) for p in calls}
        for kind in ("axes", "odd", "given"):
            bad, good = {seen[p][kind] for p in deviating}, {seen[p][kind] for p in passing}
            if None not in bad | good and not bad & good:
                found.append((kind, key))
    return found


def contradicted(claim: tuple, call: str) -> bool:
    """Whether a crash on ``call`` (a failure's words, ``f(x: float64 (2, 5, 7), k: 3) crashed``) belies ``claim``.

    A family named by the inputs it fails on (:attr:`Found.claim`) rests on the fixed inputs; the test's own input
    that crashed may be one of those it says the code is right on (a blind round: "right on every input whose
    grad_weights has 3 axes" above a crash on a (2, 5, 7) grad_weights). Then it does not explain everything, and
    is not said.
    """
    if not claim:
        return False
    kind, name = claim[0], claim[1]
    found = re.search(rf"\b{re.escape(name)}: (?:\w+ \(([^)]*)\)|(-?\d+)\b|(None)\b)", call)
    if kind == "axes":
        return found is not None and found.group(1) is not None and (
            len([size for size in found.group(1).split(",") if size.strip()]) in claim[2])
    if kind == "odd":
        return found is not None and found.group(2) is not None and int(found.group(2)) % 2 == 0
    if kind == "given":
        return found is None or found.group(3) is not None
    return False


def _raised_or_reshaped(deviating: list[str], outputs: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Every deviating probe raised or returned an array of another shape (not right shapes with wrong values)."""
    for probe in deviating:
        mine, want = outputs.get(probe), expected.get(probe)
        if isinstance(mine, tuple) and isinstance(want, tuple) and len(mine) == len(want) and all(
                np.shape(a) == np.shape(b) for a, b in zip(mine, want, strict=True)):
            return False
    return True


def _same_argument(a: Any, b: Any) -> bool:
    """Two arguments of a call alike: arrays by value, dicts and sequences item by item, generators by state."""
    if isinstance(a, np.random.Generator) or isinstance(b, np.random.Generator):
        return (isinstance(a, np.random.Generator) and isinstance(b, np.random.Generator)
                and a.bit_generator.state == b.bit_generator.state)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_argument(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_argument, a, b))
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


_DEFAULT = object()  # an argument left out of a call: its default


def _named(args: tuple, kwargs: dict, names: tuple[str, ...]) -> dict[str, Any]:
    named = {names[i] if i < len(names) else f"argument {i + 1}": value for i, value in enumerate(args)}
    return {**named, **kwargs}


def _shown(value: Any) -> str:
    if isinstance(value, (bool, int, float, str, np.floating, np.integer)) or value is None:
        return repr(value.item() if isinstance(value, np.generic) else value)
    return "another value"


def argument_not_used(deviating: list[str], probes: list[str], outputs: dict[str, Any],
                      expected: dict[str, Any], arguments: Callable[[str], tuple[tuple, dict]],
                      names: tuple[str, ...] = ()) -> Found | None:
    """The family "an argument not used" (or "another default"), or None.

    On every deviating probe the student's result is exactly the contract's result of another probe, ``probes``
    being all of the function's, that differs from it in one argument only, the same argument every time (and
    whose right result differs): the function behaves as if that argument had the other value. Named only when
    one argument does it on every deviating probe.
    """
    calls = {p: _named(*arguments(p), names) for p in probes}
    seen: dict[str, list[tuple[str, str]]] = {}
    for p in deviating:
        mine = outputs.get(p)
        if not isinstance(mine, tuple):
            return None
        found = set()
        for q in probes:
            if q == p:
                continue
            keys = set(calls[p]) | set(calls[q])
            differ = [k for k in keys if not _same_argument(calls[p].get(k, _DEFAULT), calls[q].get(k, _DEFAULT))]
            if len(differ) != 1:
                continue
            right, other = expected[p], expected[q]
            if len(mine) == len(other) and all(np.shape(a) == np.shape(b) and _close(np.asarray(a), np.asarray(b))
                                               for a, b in zip(mine, other, strict=True)) and not all(
                    np.shape(a) == np.shape(b) and _close(np.asarray(a), np.asarray(b))
                    for a, b in zip(right, other, strict=True)):
                (key,) = differ
                found.add((key, _shown(calls[p].get(key, _DEFAULT)) if key in calls[p] else "",
                           _shown(calls[q].get(key, _DEFAULT)) if key in calls[q] else ""))
        for key, given, other in found:
            seen.setdefault(key, []).append((given, other))
        if not found:
            return None
    common = [key for key, cases in seen.items() if len(cases) >= len(deviating)]
    if len(common) != 1:
        return None
    (key,) = common
    given, other = seen[key][0]
    if not given and other:
        return Found("another default", f"called without {key} it gives what the contract gives for {key}={other}: "
                     f"its default {key} is {other}, not the contract's (see the docstring)")
    array = "another value"  # what _shown says of an array: named by the argument alone
    said = f"for {key}={given}" if given and given != array else f"for this {key}" if given else f"without {key}"
    like = (f"for {key}={other}" if other and other != array else f"for another {key}" if other
            else f"without {key} (its default)")
    return Found("an argument not used", f"{said} it gives what the contract gives {like}: there its {key} "
                 "argument is not used (or not passed on to the call that needs it)")


def other_draws(function: str, deviating: list[str], outputs: dict[str, Any], expected: dict[str, Any],
                arguments: Callable[[str], tuple[tuple, dict]], names: tuple[str, ...] = ()) -> Found | None:
    """The family "other draws", or None: random arrays of the right shapes and spread, but other numbers.

    Named only for a function given a ``np.random.Generator`` on every deviating probe, whose every differing
    array has the right shape and dtype, at least 8 entries and a standard deviation within 20% of the right
    one's (the arrays that agree, zeros included, agree exactly), and is not the right numbers times a factor.
    """
    if function in DRAWS_OPEN:
        return None
    spreads = []
    for probe in deviating:
        args, kwargs = arguments(probe)
        if not any(isinstance(a, np.random.Generator) for a in (*args, *kwargs.values())):
            return None
        mine, want = outputs.get(probe), expected[probe]
        if not isinstance(mine, tuple) or len(mine) != len(want):
            return None
        for index, (a, b) in enumerate(zip(mine, want, strict=True)):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape == b.shape and a.dtype == b.dtype and _close(a, b):
                continue
            if a.shape != b.shape or a.dtype != b.dtype or b.size < 8 or not (_numeric(a) and _numeric(b)):
                return None
            ratio = float(np.std(a)) / float(np.std(b)) if np.std(b) > 0 else 0.0
            if not 0.8 <= ratio <= 1.25:
                return None
            if abs(ratio - 1) > 1e-6 and np.allclose(np.sort(a, axis=None), ratio * np.sort(b, axis=None),
                                                     rtol=1e-6, atol=1e-12):
                # The right numbers times a factor, in another order (a blind round's w_2 drawn (d_model, d_ff) and
                # transposed: its std 0.866 times the contract's): a scale too, which "the right spread" hides.
                return None
            spreads.append((index, float(np.std(a)), float(np.std(b))))
    if not spreads:
        return None
    index, mine_std, want_std = spreads[0]
    count = len(expected[deviating[0]])
    which = names[index] if len(names) == count else "its result" if count == 1 else f"item {index} of its result"
    return Found("other draws", f"every array it returns has the right shape and about the right spread (std "
                 f"{mine_std:.3g} against {want_std:.3g} for {which}), but other numbers: it draws other random "
                 "numbers than the contract, or the same ones in another order (the contract fixes the calls of "
                 "rng: which, in which order, of which shapes; the same seed must give the same weights)")


def describe(function: str, module_file: str, found: Found) -> str:
    """The diagnosis line of a relation found for ``function``."""
    return (f"Diagnosis (a family of mistakes: {found.family}): on every fixed input where your {function}() in "
            f"{module_file} goes wrong, {found.words}.")
