"""Inputs no table can hold: every registered function is also asked on an input drawn for the submission.

The tests' inputs are seeded, so the same on every run (the same feedback). That
also makes them known: a module that answers from a table of them (recorded from
the answers a failing run prints, or from another student's run) passes the tests
without computing anything. A hostile round did so for four Part III exercises
(24/24 against 0 for its control). So each function an exercise's test file
registers (:func:`register`, a :class:`Twin` per function: how to draw its
arguments, the test file's own answer, how to compare) is asked once per session,
at the end of the first test that calls it and passes its own checks
(``tests.kit.Kit.ask_unseen``), if it is right on every probe of it (the fixed
inputs whose answers the kit keeps: a known mistake is wrong on one, and keeps
its own messages and partial points), on an input of the kind the tests use drawn from
the submission's salt (``tests.effort.submission_salt``: the bytes of every
graded file, so a table written into a file moves the input). Wrong there (or a
crash), every test that calls the function and passes otherwise fails with what
was drawn, expected and observed. A test whose own checks fail says its own
message first, and is not asked.

A function that computes its answers passes; one that looks them up fails, and
scores what the same submission without the table scores.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.crash import raising_everything
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
SEED = 77_001  # with the submission's salt, the seed of every draw


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
        return (isinstance(observed, dict) and set(expected) <= set(observed)  # keys of its own are the student's
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
    """A value as a failure shows it: arrays with 4 digits and a few entries, anything at most 200 characters."""
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=4, threshold=12, edgeitems=2, separator=", ").replace("\n", "")
        text = " ".join(text.split())
    elif isinstance(value, (list, tuple)) and any(isinstance(item, np.ndarray) for item in value):
        text = "(" + ", ".join(_short(item) for item in value) + ")"
    else:
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _argument(value: Any) -> str:
    """An argument as the call's line names it: arrays and tables by their shapes, short values as they are."""
    if isinstance(value, np.ndarray):
        return f"array {value.shape}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_argument(item)}" for key, item in value.items()) + "}"
    if isinstance(value, np.random.Generator):
        return "rng"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def gate(kit: Any, exercise: str, name: str) -> list[Failure]:
    """Why ``name`` does not answer an input drawn for the submission (empty when it does)."""
    from tests.diagnosis import right_on_its_probes

    spec = twin(exercise, name)
    if spec is None:
        return []
    # Each function its own stream: a generator handed to one function (init_pooled's) tells nothing of another's.
    args, kwargs = spec.draw(np.random.default_rng([SEED, submission_salt(exercise), zlib.crc32(name.encode())]))
    expected = spec.own(*copy.deepcopy(args), **copy.deepcopy(kwargs))  # before the call (a generator it draws)
    try:
        with raising_everything():  # a crash, NotImplementedError too, is an answer here
            got, ok = getattr(kit, name)(*args, **kwargs), True
    except Exception as error:  # noqa: BLE001 - the function's answer to this input
        got, ok = f"{type(error).__name__}: {str(error)[:200]}", False
    if ok and (spec.same or equal)(got, expected):
        return []
    if not right_on_its_probes(getattr(kit, "_implementation", kit), exercise, name, asked_only=True):
        return []  # wrong on a fixed input a test asks too: a mistake, which that test and the diagnosis say
    # Right on every fixed input the tests ask and wrong here: whether it is also wrong on the fixed inputs only the
    # diagnosis asks (an answer looked up for the tests' inputs is), the tests' checks pass; this input says what.
    shown = ", ".join([*(_argument(a) for a in args), *(f"{k}={_argument(v)}" for k, v in kwargs.items())])
    if right_on_its_probes(getattr(kit, "_implementation", kit), exercise, name):
        why = (f"your {name}() answers the tests' own inputs but not this one: compute the answer from the input, "
               "for any input")
    else:  # also wrong on fixed inputs no test asks: a mistake this test's own checks do not see, or a lookup
        why = (f"this test's own checks of your {name}() hold, but its answer to this input is not the test's: "
               "the idea above, on every input")
    return [message(f"{name}({shown}), an input drawn for your submission (of the kind the tests use, which no "
                    "table written beforehand holds)", _short(expected),
                    _short(got) if ok else got, f"{spec.idea}; {why}")]
