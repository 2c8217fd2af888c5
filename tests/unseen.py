"""Inputs no table can hold: every registered function is also asked on an input drawn for the submission.

The tests' inputs are seeded, so the same on every run (the same feedback). That
also makes them known: a module that answers from a table of them (recorded from
the answers a failing run prints, or from another student's run) passes the tests
without computing anything. A hostile round did so for four Part III exercises
(24/24 against 0 for its control). So each function an exercise's test file
registers (:func:`register`, a :class:`Twin` per function: how to draw its
arguments, the test file's own answer, how to compare) is asked once per session,
the first time any test of the exercise calls it (``tests.kit.Kit``):

* on an input drawn from a fixed seed (the same for everyone); if the function is
  wrong there, the gate says nothing (the tests' own checks tell how);
* then on an input of the same kind drawn from the submission's salt
  (``tests.effort.submission_salt``: the bytes of every graded file, so a table
  written into a file moves the input); wrong there, every test that calls the
  function fails with what was drawn, expected and observed.

A function that computes its answers passes both; one that looks them up fails
the second, and scores what the same submission without it scores.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.crash import raising_through
from tests.effort import message, submission_salt
from tests.failures import Failure


@dataclass(frozen=True)
class Twin:
    """How to ask one function on an input of its own.

    ``draw(rng)`` gives ``(args, kwargs)``; ``own(*args, **kwargs)`` the test file's own answer; ``same(observed,
    expected)`` whether they agree (exact by default, :func:`close` for floats); ``idea`` what to revisit.
    """

    draw: Callable[[np.random.Generator], tuple[tuple, dict]]
    own: Callable[..., Any]
    idea: str
    same: Callable[[Any, Any], bool] | None = None


_TWINS: dict[str, dict[str, Twin]] = {}  # exercise -> function -> its twin (registered by the public test file)
SEED = 77_001  # the fixed draw's; the salted one adds the submission's salt


def register(exercise: str, twins: dict[str, Twin]) -> None:
    """The twins of ``exercise``'s functions (called by its test file when it is imported)."""
    _TWINS[exercise] = twins


def twin(exercise: str, name: str) -> Twin | None:
    """The twin registered for ``name`` of ``exercise``, or None."""
    return _TWINS.get(exercise, {}).get(name)


def equal(observed: Any, expected: Any) -> bool:
    """Exactly the expected value: arrays of the same shape and entries, lists entry by entry, or equal values."""
    if isinstance(expected, (list, tuple)) and not isinstance(observed, np.ndarray):
        return (isinstance(observed, (list, tuple)) and len(observed) == len(expected)
                and all(equal(a, b) for a, b in zip(observed, expected, strict=True)))
    if isinstance(expected, np.ndarray) or isinstance(observed, np.ndarray):
        try:
            got = np.asarray(observed)
            return got.shape == np.shape(expected) and bool(np.array_equal(got, np.asarray(expected)))
        except (TypeError, ValueError):
            return False
    try:
        result = observed == expected
    except Exception:  # noqa: BLE001 - an object that cannot be compared is not the answer
        return False
    return isinstance(result, (bool, np.bool_)) and bool(result)


def close(observed: Any, expected: Any) -> bool:
    """Within 1e-9 (relative) of the expected floats, entry by entry (tuples, lists and dicts of them too)."""
    if isinstance(expected, dict):
        return (isinstance(observed, dict) and set(observed) == set(expected)
                and all(close(observed[key], value) for key, value in expected.items()))
    if isinstance(expected, (list, tuple)):
        return (isinstance(observed, (list, tuple)) and len(observed) == len(expected)
                and all(close(a, b) for a, b in zip(observed, expected, strict=True)))
    try:
        got = np.asarray(observed, dtype=np.float64)
        want = np.asarray(expected, dtype=np.float64)
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True))
    except (TypeError, ValueError):
        return False


def _short(value: Any) -> str:
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 160 else text[:157] + "..."


def gate(kit: Any, exercise: str, name: str) -> list[Failure]:
    """Why ``name`` answers the fixed draw but not the submission's own (empty when it answers both, or neither)."""
    spec = twin(exercise, name)
    if spec is None:
        return []
    same = spec.same or equal
    drawn = [spec.draw(np.random.default_rng(seed)) for seed in (SEED, [SEED, submission_salt(exercise)])]
    answers = []
    for args, kwargs in drawn:
        expected = spec.own(*copy.deepcopy(args), **copy.deepcopy(kwargs))  # before the call (a generator it draws)
        try:
            with raising_through():
                answers.append((True, getattr(kit, name)(*args, **kwargs), expected))
        except Exception as error:  # noqa: BLE001 - a crash is an answer too: the tests' checks or this gate say so
            answers.append((False, f"{type(error).__name__}: {str(error)[:200]}", expected))
        if len(answers) == 1 and not (answers[0][0] and same(answers[0][1], expected)):
            return []  # wrong on the fixed draw as well: the tests' own checks tell how
    (args, kwargs), (ok, got, expected) = drawn[1], answers[1]
    if ok and same(got, expected):
        return []
    shown = ", ".join([*(_short(a) for a in args), *(f"{k}={_short(v)}" for k, v in kwargs.items())])
    return [message(f"{name}({shown}), an input drawn for your submission (of the kind the tests use, which no "
                    "table written beforehand holds)", _short(expected),
                    _short(got) if ok else got,
                    f"{spec.idea}; your {name}() answers the tests' own inputs but not this one: compute the answer "
                    "from the input, for any input")]
