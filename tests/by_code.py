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

Threads: Python 3.11 sets a profiler per thread, and only a thread can set its own. Where the student's code
runs (their own run, the worker), :func:`carry_threads` is called before any of it is imported: from then on,
every thread started (``threading``, ``_thread``) carries a profiler that a watched call switches on, so a thread
started at import, or a pool warmed before the call, is seen like any other. Without it (a path that never
called it), threads already running when the call began are out of reach: the call is then reported as not
fully seen (``untraced``). Where the student's code runs, that cannot happen but by its own doing (threads made
outside Python's ``threading``, or the kit's records changed): the decoding gate no longer excuses it.

A watched call may also have a listener (``tests/decoded.py``'s ``Steps``) told of each API call, with its
frame, and of each return, with its value: what the call's result is made of. The functions this module relies
on are taken when it is imported, before any student code runs (a student's module that replaces
``threading.active_count`` changes nothing here), and the profiler takes only real frames.
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
_IDENT, _ENUMERATE = _thread.get_ident, threading.enumerate
# The profiler of the watched call under way (None: none), which every carried thread's own profiler calls; the
# threads started since :func:`carry_threads`; the threads that were running when it was called (None: never).
_HOOK: list[Any] = [None]
_CARRIED: set[int] = set()
_BEFORE: frozenset[int] | None = None


def _dispatch(frame: Any, event: str, arg: Any) -> None:
    """A carried thread's profiler: the watched call's, while one runs; nothing otherwise."""
    hook = _HOOK[0]
    if hook is not None:
        hook(frame, event, arg)


def _first(frame: Any, event: str, arg: Any) -> None:
    """A ``threading`` thread's first profiler event: note the thread as carried, then carry :func:`_dispatch`."""
    _CARRIED.add(_IDENT())
    _SET(_dispatch)
    _dispatch(frame, event, arg)


def _carrying(function: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> int:
    """``_thread.start_new_thread``, the new thread carrying :func:`_dispatch`."""
    def carried(*args: Any, **kwargs: Any) -> Any:
        _CARRIED.add(_IDENT())
        _SET(_dispatch)
        return function(*args, **kwargs)
    return _START(carried, args, kwargs or {})


def carry_threads() -> None:
    """From now on, every thread started carries a profiler that a watched call switches on (once per process).

    Called where the student's code runs, before any of it is imported (``tests.kit.Implementation``, the
    worker): a thread the student's module starts at import is then within a watched call's reach. While no
    call is watched, the carried threads' profiler returns at once (a Python call per event, in their threads
    only).
    """
    global _BEFORE
    if _BEFORE is not None:
        return
    _BEFORE = frozenset(_thread_idents())
    _SET_THREADS(_first)
    _thread.start_new_thread = _carrying  # (threading keeps its own reference: its threads get _first)
    if _START_NEW is not None:
        _thread.start_new = _carrying


def _thread_idents() -> list[int]:
    """The idents of the threads running now (``threading``'s list, taken at import)."""
    return [ident for thread in _ENUMERATE() if (ident := thread.ident) is not None]



def _inner(value: Any) -> list[Any]:
    """What ``value`` calls on: ``__wrapped__``, a partial's ``func``, a method's ``__func__``, closed-over ones.

    And a ``functools.singledispatch`` function's registered implementations (its ``registry``: the wrapper is
    the standard library's, and what it wraps is the default, which may never run).
    """
    found = [inner for attribute in _INNER if (inner := getattr(value, attribute, None)) is not None]
    registry = getattr(value, "registry", None)
    if isinstance(registry, Mapping):
        found += [inner for inner in list(registry.values())[:16] if callable(inner)]
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


def _function_of(value: Any) -> Any:
    """The function whose code :func:`_code_of` gives, to be called with what a frame of it holds.

    ``value`` itself; a method's ``__func__`` (its frame holds ``self`` or ``cls``); a callable object's class's
    ``__call__`` (its frame holds the object).
    """
    inner = getattr(value, "__func__", None)
    if getattr(inner, "__code__", None) is not None:
        return inner
    if getattr(value, "__code__", None) is not None:
        return value
    for klass in type(value).__mro__:
        call = vars(klass).get("__call__")
        if call is not None:
            return call if getattr(call, "__code__", None) is not None else None
    return None


def _codes(namespaces: Mapping[str, dict], home: Mapping[str, str], folder: str) -> dict[Any, frozenset[str]]:
    """{code: the API functions it stands for} (:func:`_found`)."""
    return _found(namespaces, home, folder)[0]


def _found(namespaces: Mapping[str, dict], home: Mapping[str, str],
           folder: str) -> tuple[dict[Any, frozenset[str]], dict[tuple[str, Any], Any]]:
    """{code: the API functions it stands for} in what the student's modules bind to their API names, looked through.

    From the value bound to an API function's name in its home module, through what it calls on (:func:`_inner`,
    a few levels), every code written in the student's ``folder`` (their own helper modules too) counts as that
    API function: a function bound by assignment (``f = _mine``), a callable object, a decorator's wrapper and
    what it wraps, a partial's function. A code is named by the nearest level it is found at (a closure that
    holds ``kv_cache_append`` does not make it another function's); found at the same level under several names
    (one wrapper around two functions, one function behind two partials), it stands for each of them. Also
    ``{(API function, code): the function object found running it}``: what a frame of that code called (a
    wrapper's code is shared by the wrappers of two functions; each name has its own).
    """
    found: dict[Any, tuple[int, set[str]]] = {}
    functions: dict[tuple[str, Any], Any] = {}
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
                    functions.setdefault((name, code), _function_of(value))
                inner += _inner(value)
            values = inner[:16]
    return {code: frozenset(names) for code, (_, names) in found.items()}, functions


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
               note: Callable[[str, str], None], untraced: Callable[[], None],
               listener: Any = None) -> Iterator[None]:
    """While the block runs (one call of the student's ``root``), ``note(caller, callee)`` each API call it makes.

    ``namespaces``: {exercise: the globals of the student's module}; ``home``: {API function: its exercise};
    ``folder``: where the student's files lie (their code's ``co_filename`` starts with it). A frame is an API
    function's when its code is one of :func:`_codes`. The caller is the nearest such frame further up the stack;
    none (a thread's first call, a call of a partial from a pool) is ``root``'s own doing, and ``root`` itself
    called from outside is ``""``. ``untraced()`` is called, at the first API call seen, when other threads were
    running at the start and :func:`carry_threads` was never called. ``listener``: told ``called(name, frame)``
    and ``returned(name, frame, value)`` of each (its exceptions are swallowed: a profiler that raised would be
    unset, and the exception raised in the student's code). A student's value that refuses a look counts for
    nothing.
    """
    try:
        codes, functions = _found(namespaces, home, folder)
    except Exception:  # noqa: BLE001 - a student's object that refuses a look: not seen
        codes, functions = {}, {}
    if listener is not None:
        listener.functions = functions  # (what a frame of a code called, for a listener that calls it again)
    carried = _BEFORE is not None
    threads_before = [not carried and _ACTIVE() > 1]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" and (event != "return" or listener is None):
            return
        if type(frame) is not _FRAME or (names := codes.get(frame.f_code)) is None:
            return
        if event == "return":
            tell(listener.returned, names, frame, arg)
            return
        if listener is not None:
            tell(listener.called, names, frame)
        if threads_before[0]:  # told now, inside the call: a student's run records only while its call runs
            threads_before[0] = False
            untraced()
        caller, above = frame.f_back, None
        while caller is not None and above is None:
            above, caller = codes.get(caller.f_code), caller.f_back
        for name in names:
            for by in sorted(above) if above is not None else [root if name != root else ""]:
                note(by, name)

    def tell(method: Callable[..., None], names: frozenset[str], *args: Any) -> None:
        try:
            for name in names:
                method(name, *args)
        except Exception:  # noqa: BLE001, S110 - a value that refuses a look is not kept
            pass

    def start(function: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> int:
        def traced(*args: Any, **kwargs: Any) -> Any:
            _SET(hook)
            return function(*args, **kwargs)
        return _START(traced, args, kwargs or {})

    before, before_threads, before_hook = _GET(), _GET_THREADS(), _HOOK[0]
    before_start, before_start_new = _thread.start_new_thread, getattr(_thread, "start_new", None)
    _HOOK[0] = hook  # the carried threads' profilers call it
    _SET(hook)
    _SET_THREADS(_first if carried else hook)
    if not carried:
        _thread.start_new_thread = start  # (threading keeps its own reference: its threads get _SET_THREADS's hook)
        if _START_NEW is not None:
            _thread.start_new = start
    try:
        yield
    finally:
        _HOOK[0] = before_hook
        if not carried:
            _thread.start_new_thread = before_start
            if _START_NEW is not None:
                _thread.start_new = before_start_new
        _give_back(before)
        _SET_THREADS(before_threads)
