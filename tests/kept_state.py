"""Whether a failing test's calls are answered differently when asked afresh: state kept between calls.

Run by: the plugin (``tests/plugin.py``) on a test that failed, in the process that runs the tests.

Code that keeps something between calls (a cache keyed on part of its input, a counter, a default list, a global)
may answer a call right when it comes first and wrong after others: a test that fails for that is no sign of the
idea its checks name, nor of a mistake of the function it called (a blind round: an attention_scores caching its
scores by shape and first entry passed exercise 3, then failed exercise 6's test of the heads' columns, told that
each head must use its own columns). The test's last calls that answered are kept (references to their
arguments, generators copied as they were); on a failure, each of them is asked again now and again as a
first call (the implementation's ``forget``: the folder imported afresh, or graded a fresh worker). Different
answers are said first, as a fact about the call, with the functions it went through.
"""

from __future__ import annotations

import contextlib
import copy
import io
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

CALLS_KEPT = 4  # a test's last calls that answered, kept for the check (references, generators copied)
CHECKS_PER_EXERCISE = 1  # failing tests of an exercise checked in a session (its first one: what a student reads)
FRESH_STARTS = 16  # fresh imports (graded: fresh workers) the checks may cost a session, all exercises together
RTOL, ATOL = 1e-7, 1e-12  # the same answer, to rounding (the same code on the same input: bit for bit, in fact)


def kept_calls() -> deque:
    """A test's log of its last calls that answered: ``(name, args, kwargs)`` (:func:`noted`), newest last."""
    return deque(maxlen=CALLS_KEPT)


def given_a_generator(args: tuple, kwargs: dict) -> bool:
    """Whether a call's arguments hold a numpy generator (at the top level, as the API passes ``rng``)."""
    return any(isinstance(value, np.random.Generator) for value in (*args, *kwargs.values()))


def noted(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A call's arguments as given, to ask again: references, each generator a copy (the call draws from it)."""
    if not given_a_generator(args, kwargs):
        return args, kwargs

    def kept(value: Any) -> Any:
        return copy.deepcopy(value) if isinstance(value, np.random.Generator) else value

    return tuple(kept(a) for a in args), {key: kept(value) for key, value in kwargs.items()}


_CONTAINERS = (np.ndarray, dict, list, tuple)


def frozen(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A call's arguments as they are now, arrays copied (in dicts, lists and tuples too): what was asked.

    A test may write into an array after the call (a caller reusing its buffer: exercise 11's cache test), and
    a question kept by reference would then be another question than the one answered.
    """

    def kept(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.copy()
        if isinstance(value, dict):
            return {key: kept(item) for key, item in value.items()}
        if type(value) in (list, tuple) and any(isinstance(item, _CONTAINERS) for item in value):
            return type(value)(kept(item) for item in value)
        return value

    return tuple(kept(a) for a in args), {key: kept(value) for key, value in kwargs.items()}


def check(kit: Any, exercise: str, checked: dict[str, int]) -> str | None:
    """The lead for a failed test whose calls are answered differently afresh; None when not (or not known).

    ``kit``: the test's ``tests.kit.Kit``; ``checked``: the session's count of checks per exercise.
    """
    implementation = getattr(kit, "_implementation", None)
    forget = getattr(implementation, "forget", None)
    log = getattr(kit, "_kept", None)
    if not callable(forget) or not log or checked.get(exercise, 0) >= CHECKS_PER_EXERCISE:
        return None
    checked[exercise] = checked.get(exercise, 0) + 1
    # Each call asked now, then as a first call: a cache answers a call stale only after another with the same key,
    # which need not be the test's last one (exercise 6's heads test: the first head's call, not the last head's).
    for name, args, kwargs in reversed(log):
        # A call given a generator is left out: drawing from numpy's global generator instead makes answers differ
        # too, and its tests say that precisely (all randomness from the rng given).
        if given_a_generator(args, kwargs):
            continue
        if checked.get(FRESH, 0) >= FRESH_STARTS:
            return None
        now = ask(implementation, exercise, name, args, kwargs)
        if now is RAISED:
            continue
        checked[FRESH] = checked.get(FRESH, 0) + 1
        forget()
        first = ask(implementation, exercise, name, args, kwargs)
        if first is not RAISED and not same(now, first):
            return _lead(name, args, kwargs, now, first, getattr(kit, "_reached", None))
    return None


FRESH = " fresh starts"  # the key of the session's count of fresh imports in ``checked`` (no exercise's name)
RAISED = object()


def ask(implementation: Any, exercise: str, name: str, args: tuple, kwargs: dict) -> Any:
    """``name``'s answer to copies of the arguments, quietly; ``RAISED`` where it raised (no answer to compare).

    Shared with ``tests/api_signatures.py``, as :func:`same` and :func:`difference` are.
    """
    call_args, call_kwargs = copy.deepcopy((args, kwargs))
    try:
        function: Callable[..., Any] = implementation.function(exercise, name)
        with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return function(*call_args, **call_kwargs)
    except Exception:  # noqa: BLE001 - a raise (a budget's too) is no answer to compare
        return RAISED


def same(a: Any, b: Any) -> bool:
    """The same answer: arrays of the same shape and kind, floats to rounding, containers item by item.

    Answers of any other kind, or that cannot be compared, count as the same: no claim without evidence.
    """
    if isinstance(a, (np.ndarray, np.generic, float, int)) and isinstance(b, (np.ndarray, np.generic, float, int)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape or x.dtype.kind != y.dtype.kind:
            return False
        if x.dtype.kind in "fc":
            return bool(np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True))
        try:
            return bool(np.array_equal(x, y))
        except (TypeError, ValueError):
            return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (str, bytes, bool, type(None))) or isinstance(b, (str, bytes, bool, type(None))):
        return type(a) is type(b) and a == b
    return True


def _lead(name: str, args: tuple, kwargs: dict, now: Any, first: Any, reached: Any) -> str:
    """What the student should know first: the call, both answers, and where the state may be."""
    from tests.reach import went_through
    from tests.unseen import _shown

    where = went_through(name, reached)
    return (f"First: your code keeps something between calls. {name}({_shown(args, kwargs)}), a call of this test, "
            "is answered differently when asked again now, after the tests' calls, than when asked first (your "
            f"modules imported afresh): {difference(now, first)}. {where[0].upper() + where[1:]} keeps something from "
            "earlier calls (a cache keyed on part of the input, a counter, a default list or dict argument, a "
            "global) that changes its answers: compute each answer "
            "from the call's own arguments. The failure below may come from it.")


def difference(now: Any, first: Any) -> str:
    """How two answers differ, in a few words."""
    try:
        a, b = _arrays(now), _arrays(first)
    except Exception:  # noqa: BLE001
        return "other values"
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return "other shapes"
    gaps = [float(np.max(np.abs(x.astype(float) - y.astype(float)), initial=0.0))
            for x, y in zip(a, b, strict=True) if x.dtype.kind in "fciub" and y.dtype.kind in "fciub"]
    finite = [gap for gap in gaps if np.isfinite(gap)]
    return f"entries apart by up to {max(finite):.4g}" if finite and max(finite) > 0 else "other values"


def _arrays(answer: Any) -> tuple[np.ndarray, ...]:
    """An answer as arrays (``tests.probes.as_arrays``: a tuple's items, dicts' arrays in key order)."""
    from tests.probes import as_arrays

    return as_arrays(answer if isinstance(answer, tuple) else (answer,))
