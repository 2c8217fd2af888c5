"""Inputs moved within what a function's docstring allows: how the unseen-input gate tells a rule from a table.

A mistake is a rule: an input it answers, moved a little (every float scaled by a
factor drawn for the submission, each entry of an ordinary array by a few percent
of its own; attention weights tempered so their rows still sum to 1; a generator
replaced by another seed), it answers too. A table of the tests' answers does not
hold the moved input. ``tests.unseen`` asks; this module only moves. Each move
keeps what the inputs mean to the API: signs, zeros, infinities, masks, orders,
ties, shapes and integers stay as they are.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

SEED = 77_001  # with the submission's salt (tests.unseen), the seed of every draw and move


def scaled(value: Any, factor: float, *, numbers: bool = False, jitter: bool = True) -> tuple[Any, bool]:
    """``value`` with every float array in it times ``factor``; whether one was.

    Arrays in tuples, lists and dicts count, and those a function in it answers (a test's model); with
    ``numbers``, plain floats too (:func:`scaled_numbers`, for a function of numbers only). A generator is
    replaced by one of another seed (drawn with the factor). Each entry also gets a factor of its own within 2%
    (:func:`_jitter`; ``jitter=False``: one factor, as for a test's model, whose answers may come in any batches).
    """
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        if _special(value):  # ones, zeros, an identity, a 0/-inf mask: a role, kept (a mistake may ignore it there)
            return value, False
        jittered = jitter and _ordinary(value)
        return (value * factor * (_jitter(factor, value.shape) if jittered else 1.0)).astype(value.dtype), True
    if numbers and isinstance(value, float):
        return value * factor * float(_jitter(factor + value, ())), True
    if isinstance(value, np.random.Generator):  # another generator: the draws of one seed are no rule of another's
        return np.random.default_rng([SEED, int(factor * 2**40)]), True
    if getattr(value, "PLAIN_FUNCTION", False):  # a function given as plain data (tests.kit.PlainFunction)
        return type(value)(value.kind, **{key: scaled(item, factor)[0] for key, item in value.params.items()}), True
    if callable(value) and not isinstance(value, type):  # a test's model (occlusion's predict): its answers scaled
        @functools.wraps(value)
        def answering(*args: Any, **kwargs: Any) -> Any:  # (one factor: its answers may come in any batches)
            return scaled(value(*args, **kwargs), factor, jitter=False)[0]

        return answering, True
    if isinstance(value, (tuple, list)):
        items = [scaled(item, factor, numbers=numbers) for item in value]
        if not any(changed for _, changed in items):
            return value, False
        moved = [item for item, _ in items]
        if hasattr(value, "_fields"):  # a named tuple
            return type(value)(*moved), True
        return (tuple(moved) if isinstance(value, tuple) else moved), True
    if isinstance(value, dict):
        entries = {key: scaled(item, factor, numbers=numbers) for key, item in value.items()}
        if not any(changed for _, changed in entries.values()):
            return value, False
        return {key: item for key, (item, _) in entries.items()}, True
    return value, False


def _jitter(factor: float, shape: tuple[int, ...]) -> np.ndarray:
    """A factor of its own for every entry (within 2% of 1), drawn from ``factor`` and the shape.

    One factor for a whole array would let code that knows how the answer scales (a cosine not at all, a product
    with the product of the factors) answer a moved input from a table (a helper's round).
    """
    seed = [SEED, int(abs(factor) * 2**40) % 2**63, *shape]
    return 1.0 + 0.02 * np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape)


def _ordinary(array: np.ndarray) -> bool:
    """Whether an entry's factor of its own keeps what the array means.

    Finite values of a moderate size, all different: ties, a constant, and values that differ only far below
    their size are moved by one factor only.
    """
    with np.errstate(all="ignore"):
        flat = array.ravel()
        if flat.size < 2 or not np.all(np.isfinite(flat)):
            return False
        top = float(np.max(np.abs(flat)))
        return (top <= 1e3 and float(np.ptp(flat)) >= 1e-3 * top
                and np.unique(flat).size == flat.size)


def _special(array: np.ndarray) -> bool:
    """Whether every entry is 0, 1 or infinite (ones, zeros, an identity, a one-hot row, an additive mask)."""
    with np.errstate(invalid="ignore"):
        return bool(np.all((array == 0) | (array == 1) | np.isinf(array)))


def scaled_numbers(value: Any, factor: float) -> tuple[Any, bool]:
    """:func:`scaled`, plain floats too (the arguments of a function of a few numbers)."""
    return scaled(value, factor, numbers=True)


def tempered(value: Any, factor: float) -> tuple[Any, bool]:
    """:func:`scaled`, for attention weights: each float array's entries to the power ``factor``, rows summing to 1.

    Zeros stay zero (blocked keys stay blocked) and every row's order is kept.
    """
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        with np.errstate(all="ignore"):
            powered = np.abs(value) ** factor * _jitter(factor, value.shape)
            total = powered.sum(axis=-1, keepdims=True)
            return np.where(total > 0, powered / np.where(total > 0, total, 1), value).astype(value.dtype), True
    if isinstance(value, (tuple, list, dict)):
        items = list(value.values()) if isinstance(value, dict) else list(value)
        moved = [tempered(item, factor) for item in items]
        if not any(changed for _, changed in moved):
            return value, False
        if isinstance(value, dict):
            return dict(zip(value, (item for item, _ in moved), strict=True)), True
        if hasattr(value, "_fields"):
            return type(value)(*(item for item, _ in moved)), True
        return type(value)(item for item, _ in moved) if isinstance(value, tuple) else [i for i, _ in moved], True
    return value, False


def reordered(call: tuple[tuple, dict], factor: float) -> tuple[tuple[tuple, dict], bool]:
    """``call``'s arguments with their items in another order, where no float moves (:func:`scaled` changed nothing).

    Boolean arrays (masks) along their first axis, integer vectors (lengths, token ids), and lists of texts (a
    corpus), each argument on its own; whether one was. The order is a permutation drawn from ``factor`` (the
    submission's) and the number of items, so arguments of the same length, whose items go together (an example's
    prediction, label and pair), keep going together; a test's own reordering (a reversal, say) is not it. Any such
    array or list is as valid an input as the one given, and an answer kept for the input as the test gives it is
    not kept for this one. A single item, or items all the same, stay as they are.
    """
    args, kwargs = call
    moved_args = [_reordered(value, factor) for value in args]
    moved_kwargs = {key: _reordered(value, factor) for key, value in kwargs.items()}
    changed = any(item is not value for item, value in zip(moved_args, args, strict=True)) or any(
        moved_kwargs[key] is not value for key, value in kwargs.items())
    return ((tuple(moved_args), moved_kwargs) if changed else call), changed


def order(factor: float, n: int, stream: int = 2) -> np.ndarray:
    """A permutation of ``n`` items drawn from ``factor`` (and ``stream``), not the identity for ``n`` of 2 or more."""
    drawn = np.random.default_rng([SEED, int(abs(factor) * 2**40) % 2**63, n, stream]).permutation(n)
    return drawn if n < 2 or np.any(drawn != np.arange(n)) else np.roll(np.arange(n), 1)


def _reordered(value: Any, factor: float) -> Any:
    """``value`` with its items in the order :func:`order` draws for their number (:func:`reordered`), or itself."""
    # (A table of integers, such as BPE's merges, may have an order of its own: merge i joins ids below 256 + i.)
    if isinstance(value, np.ndarray) and len(value.shape) >= 1 and value.shape[0] >= 2 and (
            value.dtype.kind == "b" or (value.dtype.kind in "iu" and value.ndim == 1)):
        moved = value[order(factor, value.shape[0])].copy()
        return value if np.array_equal(moved, value) else moved
    if (isinstance(value, (list, tuple)) and not hasattr(value, "_fields") and len(value) >= 2
            and all(isinstance(item, str) for item in value) and len(set(value)) >= 2):
        drawn = order(factor, len(value))
        moved = [value[index] for index in drawn]
        return value if moved == list(value) else type(value)(moved)
    return value


_UPPER, _LOWER = ord("A"), ord("a")


def _letter(byte: int) -> int | None:
    """The letter's place in the alphabet (0 for a and A), or None for a byte that is no ASCII letter."""
    for start in (_UPPER, _LOWER):
        if start <= byte < start + 26:
            return byte - start
    return None


def relabeled_letters(call: tuple[tuple, dict], factor: float) -> tuple[tuple[tuple, dict], bool]:
    """``call`` with the ASCII letters of its texts renamed, in their order; BPE merges' letter bytes likewise.

    For functions of texts (byte-pair encoding): each letter the call uses becomes another, drawn from ``factor``,
    by one increasing map of the alphabet applied to both cases (``a < b`` stays so, ``A`` and ``a`` stay one
    letter's two cases); every other character (spaces, digits, punctuation, other scripts) stays. The texts'
    bytes keep their pairs, counts, positions and order, so every rule of byte pairs (its counts, its ties broken
    by the smaller pair, its merges in order) answers the moved call as the original, letters renamed; the ids of
    merged tokens (256 and above) stay. Integer pairs of shape ``(k, 2)`` (merges) have their letter ids renamed
    the same way. Unchanged (``False``) when the call holds no text, or uses all 26 letters.
    """
    args, kwargs = call
    values = [*args, *kwargs.values()]
    used: set[int] = set()
    for value in values:
        if isinstance(value, str):
            used.update(place for place in map(_letter, value.encode("utf-8")) if place is not None)
        elif _merges(value):
            used.update(place for place in map(_letter, np.asarray(value).ravel().tolist()) if place is not None)
    if not any(isinstance(value, str) for value in values) or not used or len(used) == 26:
        return call, False
    before = sorted(used)
    rng = np.random.default_rng([SEED, int(abs(factor) * 2**40) % 2**63, 3])
    after = before
    while after == before:  # an increasing map of the used letters into the alphabet, not the identity
        after = sorted(rng.choice(26, size=len(before), replace=False).tolist())
    table = np.arange(256)
    for old, new in zip(before, after, strict=True):
        table[_UPPER + old], table[_LOWER + old] = _UPPER + new, _LOWER + new

    def moved(value: Any) -> Any:
        if isinstance(value, str):
            return bytes(table[list(value.encode("utf-8"))].tolist()).decode("utf-8")
        if _merges(value):
            array = np.asarray(value)
            return np.where(array < 256, table[np.clip(array, 0, 255)], array).astype(array.dtype)
        return value

    return (tuple(moved(value) for value in args), {key: moved(value) for key, value in kwargs.items()}), True


def _merges(value: Any) -> bool:
    """Whether ``value`` is an array of integer pairs (BPE's merges, shape ``(k, 2)``)."""
    return (isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.ndim == 2 and value.shape[1] == 2
            and value.size > 0 and int(value.min()) >= 0)
