"""Whether a failing test's call left out a parameter whose default the student's code changed from the API's.

Run by: the plugin (``tests/plugin.py``) on a test that failed, in the process that runs the tests; and by
``grader.authoring.golden``, which records the API's defaults (:func:`recorded`) from the reference.

The API fixes every default (``adam_step``'s ``eps=1e-8``, ``rotary_embedding``'s ``base=10000.0``,
``blockwise_attention``'s ``causal=False``): tests, notebooks and callers leave them out. Code whose default
differs answers those calls otherwise, and the failure reads as a mistake of the formula (a blind round: an Adam
with ``eps=1e-6`` was told its update formula, a blockwise attention with ``causal=True`` its online softmax).
Each of the test's last calls that left out such a parameter is asked again with the API's value given: where the
answer changes, that is said first, as a fact about the call.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any

import numpy as np

from tests import kept_state

KEY = "api/defaults"  # the key of the API's defaults in the golden file (tests/probes.py)
CHECKS_PER_EXERCISE = 1  # failing tests of an exercise checked in a session (its first one: what a student reads)


def encoded(value: Any) -> Any:
    """A default as JSON can hold it: a numpy scalar type (``np.float64``) as ``{"dtype": "float64"}``."""
    if isinstance(value, type) and issubclass(value, np.generic):
        return {"dtype": np.dtype(value).name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"repr": repr(value)}  # compared by its text (none of the API's defaults is one today)


def decoded(value: Any) -> Any:
    """The default :func:`encoded` wrote, to give in a call (None for one known by its text only)."""
    if isinstance(value, dict):
        return np.dtype(value["dtype"]).type if "dtype" in value else None
    return value


def same(default: Any, api: Any) -> bool:
    """Whether the student's ``default`` is the API's (``api``, as :func:`encoded` wrote it)."""
    if isinstance(api, dict):
        if "dtype" not in api:
            return repr(default) == api["repr"]
        try:
            return np.dtype(default) == np.dtype(api["dtype"])
        except (TypeError, ValueError):
            return False
    if isinstance(api, bool) or isinstance(default, (bool, np.bool_)):
        return type(default) in (bool, np.bool_) and isinstance(api, bool) and bool(default) == api
    if api is None or isinstance(api, str):
        return type(default) is type(api) and default == api
    try:  # a number: 16 and 16.0 are the same default
        return not isinstance(default, str) and float(default) == float(api)
    except (TypeError, ValueError, OverflowError):
        return False


def recorded(implementation: Any, functions: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """The API's defaults, from the reference ``implementation``: {function: {parameter: encoded default}}.

    ``functions``: {exercise: its API functions}, as the manifest lists them.
    """
    table: dict[str, dict[str, Any]] = {}
    for exercise, names in functions.items():
        for name in names:
            parameters = inspect.signature(implementation.function(exercise, name)).parameters.values()
            defaults = {p.name: encoded(p.default) for p in parameters if p.default is not inspect.Parameter.empty}
            if defaults:
                table[name] = defaults
    return table


@functools.cache
def table() -> dict[str, dict[str, Any]]:
    """The API's defaults the golden file holds ({} where it holds none)."""
    from tests.probes import golden_entry

    stored = golden_entry(KEY)
    return {} if stored is None else json.loads(str(stored))


def check(kit: Any, exercise: str, checked: dict[str, int]) -> str | None:
    """The lead for a failed test whose call is answered otherwise with the API's defaults; None when not.

    ``kit``: the test's ``tests.kit.Kit`` (its last calls that answered, ``_kept``); ``checked``: the session's
    count of checks per exercise.
    """
    implementation = getattr(kit, "_implementation", None)
    crashed = getattr(kit, "_crashed", None)
    calls = ([crashed] if crashed else []) + list(reversed(getattr(kit, "_kept", None) or ()))  # the raise first
    if implementation is None or not calls or checked.get(exercise, 0) >= CHECKS_PER_EXERCISE:
        return None
    api = table()
    for name, args, kwargs in calls:
        changed, positional = _changed_defaults(implementation, exercise, name, args, kwargs, api.get(name, {}))
        if not changed:
            continue
        checked[exercise] = checked.get(exercise, 0) + 1
        given = {parameter: decoded(api[name][parameter]) for parameter in changed}
        fixed = kept_state.ask(implementation, exercise, name, args, kwargs | given)
        if fixed is kept_state.RAISED:
            continue
        now = kept_state.ask(implementation, exercise, name, args, kwargs)
        if now is kept_state.RAISED or not kept_state.same(now, fixed):
            return _lead(name, args, kwargs, positional, changed, given, (now, fixed))
    return None


def _changed_defaults(implementation: Any, exercise: str, name: str, args: tuple, kwargs: dict,
                      api: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The left-out parameters whose default in the student's ``name`` is not the API's, and the positional ones.

    ``({parameter: the student's default}, [the names the call's positional arguments went to])``.
    """
    if not api:
        return {}, []
    try:  # graded, the worker's description of it, as data (the proxies' own signature is the API's)
        described = getattr(implementation, "signature_of", None)
        signature = described(exercise, name) if callable(described) else \
            inspect.signature(implementation.function(exercise, name))
        bound = signature.bind_partial(*args, **kwargs).arguments
    except Exception:  # noqa: BLE001 - no signature to read, or the call does not fit it: no claim
        return {}, []
    changed = {}
    for parameter, value in api.items():
        found = signature.parameters.get(parameter)
        if found is None or parameter in bound or found.default is inspect.Parameter.empty:
            continue  # a parameter missing, given, or without a default: the call's own message says so
        if not same(found.default, value):
            changed[parameter] = found.default
    return changed, list(bound)[:len(args)]


def _lead(name: str, args: tuple, kwargs: dict, positional: list[str], changed: dict[str, Any],
          given: dict[str, Any], answers: tuple[Any, Any]) -> str:
    """What the student should know first: the defaults that differ, the call that left them out, and what changes."""
    from tests.unseen import _shown

    theirs = ", ".join(f"{parameter}={_plain(default)}" for parameter, default in changed.items())
    apis = ", ".join(f"{parameter}={_plain(value)}" for parameter, value in given.items())
    now, fixed = answers
    answer = (f"as it is it raises, and given {apis} it answers" if now is kept_state.RAISED
              else f"given {apis} it answers otherwise ({kept_state.difference(now, fixed)})")
    shown = _shown(args, kwargs)
    if len(shown) > 120:  # (dicts of parameters) the call by its parameters' names
        shown = ", ".join([*positional, *(f"{key}={value!r}" if np.isscalar(value) else key
                                          for key, value in kwargs.items())])
    return (f"First: your {name} has the default {theirs}; the API's is {apis}. {name}({shown}), "
            f"a call of this test, leaves it out: {answer}. Keep the API's defaults (the "
            "signature in the exercise's stub and its docstring): tests, notebooks and other code leave them out. "
            "The failure below may come from it.")


def _plain(value: Any) -> str:
    """A default as the signature writes it (``np.float64``, not ``<class 'numpy.float64'>``)."""
    if isinstance(value, type) and issubclass(value, np.generic):
        return f"np.{value.__name__}"
    return repr(value)
