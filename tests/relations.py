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
"""

from __future__ import annotations

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


MEANINGS: dict[str, Callable[[tuple, dict, np.ndarray], np.ndarray]] = {}


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
    # swap: it tells no family from another, so only an axis of three or more is read.
    for axis in range(want.ndim):
        flipped = np.flip(want, axis)
        if want.shape[axis] > 2 and not _close(flipped, want) and _close(mine, flipped):
            return Found("reversed order", f"it holds the right entries in reverse order{_axis_words(want, axis)} "
                                           "(the first where the last should be)")
    return None


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
    if _reversed(mine, want) is None and _close(np.sort(mine, axis=-1), np.sort(want, axis=-1)):
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
    _sign, _absolute, _reversed, _one_off, _reordered, _scale, _scale_per_row_and_column, _offset,
    _offset_where_different, _clipped_at_zero, _reciprocal)
"""Each family's test on one differing array (the student's, the right one); a new family is one more entry."""
# The families that a function returning one number shows across its inputs (one number per input, taken
# together): an order, a length or a row means nothing there.
ACROSS_INPUTS = (_sign, _absolute, _scale, _offset, _clipped_at_zero, _reciprocal)


def _holding(mine: np.ndarray, want: np.ndarray, relations: tuple = RELATIONS) -> set[tuple[str, str, str]]:
    """The families whose relation holds between one differing array and the right one."""
    found = set()
    for relation in relations:
        try:
            hit = relation(mine, want) if mine.shape == want.shape or relation is _one_off else None
        except (TypeError, ValueError, FloatingPointError):
            hit = None
        if hit is not None:
            found.add((hit.family, hit.words, hit.general or hit.words))
    return found


def relation(function: str, probes: list[str], outputs: dict[str, Any], expected: dict[str, Any],
             arguments: Callable[[str], tuple[tuple, dict]] | None = None) -> Found | None:
    """The one family that relates ``function``'s outputs to the right ones on all of ``probes``, or None.

    ``outputs`` and ``expected`` map each probe to a tuple of arrays (the student's and the golden ones);
    ``arguments(probe)`` gives a probe's arguments, for a function that declared its :func:`meaning`.
    """
    pairs, items, count = [], set(), 0
    for probe in probes:
        mine, want = outputs.get(probe), expected.get(probe)
        if not isinstance(mine, tuple) or not isinstance(want, tuple) or len(mine) != len(want):
            return None
        count = max(count, len(want))
        for item, (a, b) in enumerate(zip(mine, want, strict=True)):
            if not (a.shape == b.shape and _close(np.asarray(a), np.asarray(b))):
                pairs.append((np.asarray(a), np.asarray(b)))
                items.add(item)
    if not pairs:
        return None
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
    said = words.pop()[0] if len(words) == 1 else generals.pop()
    if len(items) < count:  # a result of several arrays, some of them right: say which one the relation is about
        which = ", ".join(str(item) for item in sorted(items))
        said = f"item {which} of its result (the others are right): {said.removeprefix('it ')}".replace(
            ": is ", " is ").replace(": has ", " has ").replace(": holds ", " holds ")
    return Found(name, said)


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


def describe(function: str, module_file: str, found: Found) -> str:
    """The diagnosis line of a relation found for ``function``."""
    return (f"Diagnosis (a family of mistakes: {found.family}): on every fixed input where your {function}() in "
            f"{module_file} goes wrong, {found.words}.")
