"""Whether a failing test met a function whose signature is not the API's: its parameters, or a default.

Run by: the plugin (``tests/plugin.py``) on a test that failed, in the process that runs the tests; by the Kit
(``tests/kit.py``), which notes each call that leaves out a parameter the API gives a default; and by
``grader.authoring.golden``, which records the API's signatures (:func:`recorded`) from the reference.

The API fixes every function's parameters and defaults (``adam_step``'s ``eps=1e-8``, ``rotary_embedding``'s
``base=10000.0``, ``blockwise_attention``'s ``causal=False``): tests, notebooks and callers rely on them. Two
kinds of difference, each said first when a test that called the function fails:

* its parameters (names, order, kind, which have a default): a call made as the API says raises or binds a value
  to another parameter, and the tests' probes then read like a mistake of the idea (a blind round: a
  softmax_backward whose ``axis`` had no default was told it handles a fixed number of axes). A parameter added
  with a default changes no call made as the API says, and is not one;
* a default: each call of the test that left out such a parameter is asked again with the API's value given; said
  where the answer changes (or a raise becomes an answer), and only where the student's code gives the same answer
  twice as it is (code that draws from numpy's global generator differs every time, whatever its defaults).

A signature is read with ``inspect.signature`` in a student's own run; graded, the proxies' own signature is the
API's, and the student's comes from its worker as data (``grader.sandbox.signatures``). Both are lists of
``[name, kind, default]`` in the form :func:`encoded` writes.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any

import numpy as np

from tests import kept_state

KEY = "api/signatures"  # the key of the API's signatures in the golden file (tests/probes.py)
CHECKS_PER_EXERCISE = 1  # failing tests of an exercise checked in a session (its first one: what a student reads)
EMPTY = {"empty": True}  # a parameter without a default, as :func:`encoded` writes it


def encoded(value: Any) -> Any:
    """A default as JSON can hold it: a numpy scalar type (``np.float64``) as ``{"dtype": "float64"}``."""
    if value is inspect.Parameter.empty:
        return EMPTY
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


def recorded(implementation: Any, functions: dict[str, list[str]]) -> dict[str, list[list]]:
    """The API's signatures, from the reference ``implementation``: {function: [[name, kind, default], ...]}.

    ``functions``: {exercise: its API functions}, as the manifest lists them.
    """
    return {name: [[p.name, int(p.kind), encoded(p.default)]
                   for p in inspect.signature(implementation.function(exercise, name)).parameters.values()]
            for exercise, names in functions.items() for name in names}


@functools.cache
def table() -> dict[str, list[list]]:
    """The API's signatures the golden file holds ({} where it holds none)."""
    from tests.probes import golden_entry

    stored = golden_entry(KEY)
    return {} if stored is None else json.loads(str(stored))


@functools.cache
def _defaulted(name: str) -> tuple[str, ...]:
    """The parameters of API function ``name`` that have a default."""
    return tuple(parameter for parameter, _, default in table().get(name, ()) if default != EMPTY)


def left_out(name: str, arguments: dict) -> list[str]:
    """The parameters the API gives a default that a call of ``name``, its arguments named, leaves out (the Kit's)."""
    return [parameter for parameter in _defaulted(name) if parameter not in arguments]


def check(kit: Any, exercise: str, checked: dict[str, int]) -> tuple[str, str] | None:
    """The lead for a failed test that met a signature that is not the API's, and its revisit line; None when none.

    ``kit``: the test's ``tests.kit.Kit`` (its calls); ``checked``: the session's count of checks per exercise.
    The revisit line names the API's signature: a hidden test's failure shows its revisit line only, and the
    test's own (its formula) would name the wrong cause.
    """
    implementation = getattr(kit, "_implementation", None)
    if implementation is None or checked.get(exercise, 0) >= CHECKS_PER_EXERCISE:
        return None
    checked[exercise] = checked.get(exercise, 0) + 1
    signatures: dict[str, inspect.Signature | None] = {}

    def signature(name: str) -> inspect.Signature | None:
        if name not in signatures:
            signatures[name] = _signature_of(implementation, exercise, name)
        return signatures[name]

    own = set(_functions(exercise))
    called = [name for name in getattr(kit, "_called", []) if name in own and name in table()]
    for name in called:
        found = signature(name)
        different = _parameters_differ(found, table()[name]) if found is not None else None
        if different:
            return (f"First: the parameters of your {name} are not the API's: {different}. The API's: {name}"
                    f"({_written(table()[name])}). Tests, notebooks and other code call it as the API says: keep its "
                    "names, order and defaults (the signature in the exercise's stub). The failure below may come "
                    "from it.", _revisit(name))
    crashed = getattr(kit, "_crashed", None)
    # The raise first, then the last call that left out each parameter, then the last calls that answered.
    calls = ([crashed] if crashed else []) + list(reversed(list(getattr(kit, "_defaulting", {}).values()))) \
        + list(reversed(getattr(kit, "_kept", None) or ()))
    for name, args, kwargs in calls:
        if name not in own:
            continue
        found = signature(name)
        lead = _default_lead(implementation, exercise, name, args, kwargs, found) if found is not None else None
        if lead:
            return lead, _revisit(name)
    return None


def _revisit(name: str) -> str:
    """The revisit line of a signature's lead: the API's signature of ``name``."""
    return f"the API's signature, parameters and defaults: {name}({_written(table()[name])})"


def _functions(exercise: str) -> tuple[str, ...]:
    """The API functions of ``exercise`` (none for a name the manifest does not know)."""
    from grader.curriculum import load

    try:
        return tuple(load().exercise(exercise).functions)
    except ValueError:
        return ()


def _signature_of(implementation: Any, exercise: str, name: str) -> inspect.Signature | None:
    """The student's own signature of ``name`` (graded, as its worker describes it), or None."""
    try:
        described = getattr(implementation, "signature_of", None)
        return described(exercise, name) if callable(described) else \
            inspect.signature(implementation.function(exercise, name))
    except Exception:  # noqa: BLE001 - no signature to read: no claim
        return None


def _parameters_differ(signature: inspect.Signature, api: list[list]) -> str:
    """How the parameters differ from the API's, in a few words ('' when every call made as the API says binds alike).

    A parameter added with a default, or ``*args``/``**kwargs`` added beside the API's, changes no such call.
    """
    theirs = {name: p for name, p in signature.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    kinds = {p.kind for p in signature.parameters.values()}
    for name, kind, _ in api:  # the API's *args or **kwargs: any name, the same kind
        if kind in (2, 4) and inspect._ParameterKind(kind) not in kinds:
            return f"it has no {'*' if kind == 2 else '**'}{name}, so a call with more arguments fails"
    api = [entry for entry in api if entry[1] not in (2, 4)]
    names = [name for name, _, _ in api]
    missing = [name for name in names if name not in theirs]
    if missing:
        swallowed = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
        return (f"{_listed(missing)} {'is' if len(missing) == 1 else 'are'} not among them"
                + (" (its **kwargs takes them by name)" if swallowed else ""))
    extra = [name for name, p in theirs.items() if name not in names and p.default is p.empty]
    if extra:
        return f"{_listed(extra)} {'has' if len(extra) == 1 else 'have'} no default, and the API has no such parameter"
    for name, kind, _ in api:
        mine = theirs[name]
        if kind in (0, 1) and mine.kind == mine.KEYWORD_ONLY:
            return f"{name} is keyword-only (after a *), so a call that gives it by position fails"
        if kind == 1 and mine.kind == mine.POSITIONAL_ONLY:
            return f"{name} is positional-only (before a /), so a call that names it fails"
    positional = [name for name, p in theirs.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    api_positional = [name for name, kind, _ in api if kind in (0, 1)]
    if positional[:len(api_positional)] != api_positional:
        return f"they come in another order: ({', '.join(positional)})"
    for name, _, default in api:
        mine = theirs[name]
        if default == EMPTY and mine.default is not mine.empty:
            continue  # a default added to a required parameter changes no call made as the API says
        if default != EMPTY and mine.default is mine.empty:
            return f"{name} has no default; the API's is {name}={_plain(decoded(default), default)}"
    return ""


def _default_lead(implementation: Any, exercise: str, name: str, args: tuple, kwargs: dict,
                  signature: inspect.Signature) -> str | None:
    """The lead for one call that left out a parameter whose default is not the API's, where its answer changes."""
    try:
        bound = signature.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return None
    changed = {}
    for parameter, _, default in table().get(name, ()):
        mine = signature.parameters.get(parameter)
        if default == EMPTY or mine is None or parameter in bound or mine.default is mine.empty:
            continue  # given, without a default, or missing: the call's own message, or the parameters' lead
        if not same(mine.default, default):
            changed[parameter] = (mine.default, default)
    if not changed:
        return None
    given = {parameter: decoded(default) for parameter, (_, default) in changed.items()}
    now = kept_state.ask(implementation, exercise, name, args, kwargs)
    again = kept_state.ask(implementation, exercise, name, args, kwargs)
    if (now is kept_state.RAISED) != (again is kept_state.RAISED) or (
            now is not kept_state.RAISED and not kept_state.same(now, again)):
        return None  # two answers to the same call differ: its defaults are not what changes it
    fixed = kept_state.ask(implementation, exercise, name, args, kwargs | given)
    if fixed is kept_state.RAISED and now is kept_state.RAISED or (
            fixed is not kept_state.RAISED and now is not kept_state.RAISED and kept_state.same(now, fixed)):
        return None
    return _lead(name, args, kwargs, list(bound)[:len(args)], changed, (now, fixed))


def _lead(name: str, args: tuple, kwargs: dict, positional: list[str], changed: dict[str, tuple[Any, Any]],
          answers: tuple[Any, Any]) -> str:
    """What the student should know first: the defaults that differ, the call that left them out, and what changes."""
    from tests.unseen import _shown

    theirs = ", ".join(f"{parameter}={_plain(mine, None)}" for parameter, (mine, _) in changed.items())
    apis = ", ".join(f"{parameter}={_plain(decoded(api), api)}" for parameter, (_, api) in changed.items())
    now, fixed = answers
    if now is kept_state.RAISED:
        answer = f"as it is it raises, and given {apis} it answers"
    elif fixed is kept_state.RAISED:
        answer = f"given {apis} it raises: the API's default is an input your code must take"
    else:
        answer = f"given {apis} it answers otherwise ({kept_state.difference(now, fixed)})"
    shown = _shown(args, kwargs)
    if len(shown) > 120:  # (dicts of parameters) the call by its parameters' names
        shown = ", ".join([*positional, *(f"{key}={value!r}" if np.isscalar(value) else key
                                          for key, value in kwargs.items())])
    return (f"First: your {name} has the default {theirs}; the API's is {apis}. {name}({shown}), "
            f"a call of this test, leaves it out: {answer}. Keep the API's defaults (the "
            "signature in the exercise's stub and its docstring): tests, notebooks and other code leave them out. "
            "The failure below may come from it.")


def _written(api: list[list]) -> str:
    """The API's parameters as a signature writes them (``x, axis=-1``, a ``*`` before keyword-only ones)."""
    parts, starred = [], False
    for name, kind, default in api:
        if kind == 3 and not starred:
            parts.append("*")
            starred = True
        starred = starred or kind == 2
        prefix = "*" if kind == 2 else "**" if kind == 4 else ""
        parts.append(prefix + name + ("" if default == EMPTY else f"={_plain(decoded(default), default)}"))
    return ", ".join(parts)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _plain(value: Any, encoded_value: Any) -> str:
    """A default as the signature writes it (``np.float64``, not ``<class 'numpy.float64'>``)."""
    if isinstance(value, type) and issubclass(value, np.generic):
        return f"np.{value.__name__}"
    if isinstance(encoded_value, dict) and "repr" in encoded_value:
        return encoded_value["repr"]
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a default of the student's whose repr raises
        return "<a default without a repr>"
    return text if len(text) <= 80 else text[:77] + "..."
