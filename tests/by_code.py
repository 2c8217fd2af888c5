"""Which of the student's API functions one call ran, known by their code, whatever name, partial or thread ran them.

Imported on both sides of the sandbox: by the student's worker (a copy beside ``worker.py``, named in
``limits.SANDBOX_MODULES``, so the standard library only; ``grader.sandbox.calls`` is given it) and by a student's
own run (``tests/reach.py``). Most calls are seen by the wrapper each API function's global name is rebound to
(about a microsecond a call); a call made under another name (an alias, a partial, a closure, a decorator's
wrapper, a dict) or from a thread is not. A gate that must know whether a function was called at all
(``causal_decode`` decodes through the cache) asks for this as well, for one small call: a profiler
(``sys.setprofile``, and ``threading.setprofile`` for the threads started meanwhile) that knows the student's
functions by their code objects. It makes Python-heavy code two to three times slower, so it is never on
otherwise.

Threads that were already running when the call began are out of its reach (Python 3.11 sets a profiler per
thread): the call is then reported as not fully seen (``untraced``), and a gate draws no conclusion from it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_INNER = ("__wrapped__", "func", "__func__")  # functools.wraps, functools.partial, a bound method


def _inner(value: Any) -> list[Any]:
    """What ``value`` calls on: ``__wrapped__``, a partial's ``func``, a method's ``__func__``, closed-over ones."""
    found = [inner for attribute in _INNER if (inner := getattr(value, attribute, None)) is not None]
    for cell in getattr(value, "__closure__", None) or ():
        try:
            if callable(cell.cell_contents):
                found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return found


def _codes(namespaces: Mapping[str, dict], home: Mapping[str, str]) -> dict[Any, str]:
    """{code: API function name} of what the student's modules bind to their API names, looked through.

    From the value bound to an API function's name in its home module, through what it calls on (:func:`_inner`,
    a few levels), every function whose globals are one of the student's modules counts as that API function (a
    function bound by assignment, ``f = _mine``; a decorator's wrapper and what it wraps). A code found under two
    names (one decorator's wrapper around both) is dropped: it cannot tell them apart.
    """
    found: dict[Any, str] = {}
    shared: set[Any] = set()
    students = [namespace for namespace in namespaces.values() if isinstance(namespace, dict)]
    for name, exercise in home.items():
        values = [namespaces.get(exercise, {}).get(name)]
        for _ in range(4):
            inner = []
            for value in values:
                code, owner = getattr(value, "__code__", None), getattr(value, "__globals__", None)
                if code is not None and any(owner is namespace for namespace in students):
                    if found.get(code, name) != name:
                        shared.add(code)
                    found[code] = name
                inner += _inner(value)
            values = inner[:16]
    return {code: name for code, name in found.items() if code not in shared}


@contextlib.contextmanager
def every_call(namespaces: Mapping[str, dict], home: Mapping[str, str], root: str,
               note: Callable[[str, str], None], untraced: Callable[[], None]) -> Iterator[None]:
    """While the block runs (one call of the student's ``root``), ``note(caller, callee)`` each API call it makes.

    ``namespaces``: {exercise: the globals of the student's module}; ``home``: {API function: its exercise}. A
    frame is an API function's when its code is one the module binds to that name (:func:`_codes`) or when it is
    a function of that name defined at the top of its home module. The caller is the nearest such frame further
    up the stack; none (a thread's first call, a call of a partial from a pool) is ``root``'s own doing, and
    ``root`` itself called from outside is ``""``. ``untraced()`` is called at the start when other threads run.
    Getting the student's values (their ``__wrapped__``...) may fail: then only the defined names count.
    """
    try:
        codes = _codes(namespaces, home)
    except Exception:  # noqa: BLE001 - a student's object that refuses a look: its defined name still counts
        codes = {}
    defined = {name: namespaces.get(exercise) for name, exercise in home.items()}

    def function_of(frame: Any) -> str | None:
        code = frame.f_code
        name = codes.get(code)
        if name is None and defined.get(code.co_qualname) is frame.f_globals:
            name = code.co_qualname
        return name

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or (name := function_of(frame)) is None:
            return
        caller, above = frame.f_back, None
        while caller is not None and above is None:
            above, caller = function_of(caller), caller.f_back
        note(above if above is not None else root if name != root else "", name)

    if threading.active_count() > 1:
        untraced()
    before, before_threads = sys.getprofile(), threading.getprofile()
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(before)
        threading.setprofile(before_threads)
