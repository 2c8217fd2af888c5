"""Which of the student's API functions one call ran, known by their code, whatever name, partial or thread ran them.

Imported on both sides of the sandbox: by the student's worker (a copy beside ``worker.py``, named in
``limits.SANDBOX_MODULES``, so the standard library only; ``grader.sandbox.calls`` is given it) and by a student's
own run (``tests/reach.py``). Most calls are seen by the wrapper each API function's global name is rebound to
(about a microsecond a call); a call made under another name (an alias, a partial, a closure, a decorator's
wrapper, a dict, a callable object) or from a thread is not. A gate that must know whether a function was called
at all (``causal_decode`` decodes through the cache) asks for this as well, for the calls it watches: a profiler
(``sys.setprofile``; ``threading.setprofile`` and ``_thread.start_new_thread`` for the threads started meanwhile)
that knows the student's functions by their code objects: the code of what the student's modules bind to the
API names, looked through. It makes Python-heavy code two to three times slower, so it is never on otherwise.

Threads that were already running when the call began are out of its reach (Python 3.11 sets a profiler per
thread): the call is then reported as not fully seen (``untraced``), and a gate draws no conclusion from it. The
functions this module relies on are taken when it is imported, before any student code runs (a student's module
that replaces ``threading.active_count`` changes nothing here), and the profiler takes only real frames.
"""

from __future__ import annotations

import _thread
import contextlib
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_INNER = ("__wrapped__", "func", "__func__")  # functools.wraps, functools.partial, a bound method or staticmethod
# Taken now, before any student code runs.
_SET, _GET, _SET_THREADS, _GET_THREADS = sys.setprofile, sys.getprofile, threading.setprofile, threading.getprofile
_ACTIVE, _START, _FRAME = threading.active_count, _thread.start_new_thread, types.FrameType
_START_NEW = getattr(_thread, "start_new", None)  # its older name, a function of its own


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


def _code_of(value: Any) -> Any:
    """The code a call of ``value`` runs first: a function's own, or its class's ``__call__`` (a callable object)."""
    code = getattr(value, "__code__", None)
    if code is None and not isinstance(value, type):
        for klass in type(value).__mro__:
            call = vars(klass).get("__call__")
            if call is not None:
                return getattr(call, "__code__", None)
    return code


def _codes(namespaces: Mapping[str, dict], home: Mapping[str, str], folder: str) -> dict[Any, frozenset[str]]:
    """{code: the API functions it stands for} in what the student's modules bind to their API names, looked through.

    From the value bound to an API function's name in its home module, through what it calls on (:func:`_inner`,
    a few levels), every code written in the student's ``folder`` (their own helper modules too) counts as that
    API function: a function bound by assignment (``f = _mine``), a callable object, a decorator's wrapper and
    what it wraps, a partial's function. A code is named by the nearest level it is found at (a closure that
    holds ``kv_cache_append`` does not make it another function's); found at the same level under several names
    (one wrapper around two functions, one function behind two partials), it stands for each of them.
    """
    found: dict[Any, tuple[int, set[str]]] = {}
    for name, exercise in home.items():
        values = [namespaces.get(exercise, {}).get(name)]
        for depth in range(4):
            inner: list[Any] = []
            for value in values:
                code = _code_of(value)
                if code is not None and str(getattr(code, "co_filename", "")).startswith(folder):
                    level, names = found.setdefault(code, (depth, set()))
                    if depth < level:
                        found[code] = (depth, {name})
                    elif depth == level:
                        names.add(name)
                inner += _inner(value)
            values = inner[:16]
    return {code: frozenset(names) for code, (_, names) in found.items()}


def _give_back(before: Any) -> None:
    """Put back the profiler that was set before a watched call.

    A profiler set from Python (``sys.setprofile``) is a callable; cProfile's is its ``Profile`` object, which
    ``sys.getprofile`` returns but ``sys.setprofile`` cannot take back (it is not callable: a student running
    pytest under cProfile had a watched test fail with "'Profile' object is not callable"); it is enabled again.
    """
    if before is None or callable(before):
        _SET(before)
    else:
        _SET(None)
        enable = getattr(before, "enable", None)
        if callable(enable):
            enable()


@contextlib.contextmanager
def every_call(namespaces: Mapping[str, dict], home: Mapping[str, str], folder: str, root: str,
               note: Callable[[str, str], None], untraced: Callable[[], None]) -> Iterator[None]:
    """While the block runs (one call of the student's ``root``), ``note(caller, callee)`` each API call it makes.

    ``namespaces``: {exercise: the globals of the student's module}; ``home``: {API function: its exercise};
    ``folder``: where the student's files lie (their code's ``co_filename`` starts with it). A frame is an API
    function's when its code is one of :func:`_codes`. The caller is the nearest such frame further up the stack;
    none (a thread's first call, a call of a partial from a pool) is ``root``'s own doing, and ``root`` itself
    called from outside is ``""``. ``untraced()`` is called, at the first API call seen, when other threads were
    running at the start. A student's value that refuses a look counts for nothing.
    """
    try:
        codes = _codes(namespaces, home, folder)
    except Exception:  # noqa: BLE001 - a student's object that refuses a look: not seen
        codes = {}
    threads_before = [_ACTIVE() > 1]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or type(frame) is not _FRAME or (names := codes.get(frame.f_code)) is None:
            return
        if threads_before[0]:  # told now, inside the call: a student's run records only while its call runs
            threads_before[0] = False
            untraced()
        caller, above = frame.f_back, None
        while caller is not None and above is None:
            above, caller = codes.get(caller.f_code), caller.f_back
        for name in names:
            for by in sorted(above) if above is not None else [root if name != root else ""]:
                note(by, name)

    def start(function: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> int:
        def traced(*args: Any, **kwargs: Any) -> Any:
            _SET(hook)
            return function(*args, **kwargs)
        return _START(traced, args, kwargs or {})

    before, before_threads = _GET(), _GET_THREADS()
    _SET(hook)
    _SET_THREADS(hook)
    _thread.start_new_thread = start  # (threading keeps its own reference: its threads get _SET_THREADS's hook)
    if _START_NEW is not None:
        _thread.start_new = start
    try:
        yield
    finally:
        _thread.start_new_thread = _START
        if _START_NEW is not None:
            _thread.start_new = _START_NEW
        _give_back(before)
        _SET_THREADS(before_threads)
