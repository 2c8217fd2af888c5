"""Which of the student's API functions a call actually reached, and which called which.

Blame follows the call that failed (issue 34.2): a failing test's first message names the function whose own
output was wrong first, among those its calls went through, not among the names its source mentions (code can
name a function it never calls, call one under another name, or reach it through a helper). While a test calls
the student's code in this process (a local run, a notebook), the student's modules hold their API functions
wrapped (:func:`instrument`: each global name bound to one is rebound to a wrapper that notes its calls, about
a microsecond each; a tracer of every frame made Python-heavy code two to three times slower), and
:func:`tracing` notes which were called and, for each, the API function that called it.

Code that runs in another process (the grader's isolated worker) is instrumented there the same way; the
worker sends the names of what a call reached with its reply, and the grading side, once it has checked them
(``grader.sandbox.reached``), notes them here (:func:`note_elsewhere`). Not seen: calls that do not go through a
module's global name (a reference kept elsewhere at import): the blame then knows less, and names nothing it
did not see.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from grader.curriculum import load as load_curriculum
from tests import by_code, decoded


def _per_manifest(compute: Callable[..., Any]) -> Callable[..., Any]:
    """``compute(curriculum, *args)``, remembered for the manifest in force (the kit's, or a course's).

    Never for the first manifest a process met: a process that ran a course's commands (an xdist worker, a test of
    an own exercise) and then the kit's tests traced none of the kit's functions outside the course's (the blame of
    a broken softmax fell on attention, diagnosed as "an inline softmax").
    """
    memo: dict[tuple, tuple[Any, Any]] = {}

    @functools.wraps(compute)
    def remembered(*args: Any) -> Any:
        curriculum = load_curriculum()
        kept = memo.get(args)
        if kept is None or kept[0] is not curriculum:
            kept = memo[args] = (curriculum, compute(curriculum, *args))
        return kept[1]

    return remembered


@_per_manifest
def api_names(curriculum: Any) -> frozenset[str]:
    """The manifest's public functions."""
    return frozenset(f for e in curriculum.exercises for f in e.functions)


@dataclass
class Reached:
    """The API functions the traced calls went through, and who called whom among them.

    ``functions``: every API function of the student's entered; ``calls``: ``(caller, callee)`` pairs, the
    caller being the nearest API function below the callee on the stack (``""`` for the test's own call).
    """

    functions: set[str] = field(default_factory=set)
    calls: set[tuple[str, str]] = field(default_factory=set)
    untraced: int = 0  # calls traced by code (:func:`every_call`) that began beside threads out of reach
    counted: dict[tuple[str, str], int] = field(default_factory=dict)  # how often :func:`every_call` saw each call
    # For a watched call: {function: (the result's vectors, the first not among the contexts of that function's
    # steps over the student's caches, -1: none)} (``tests/decoded.py``'s ``Steps``).
    made_of: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    watched: int = 0  # calls traced by code (:func:`every_call`), here or in the worker

    def merge(self, other: Reached) -> None:
        """Add what ``other`` reached."""
        self.functions |= other.functions
        self.calls |= other.calls
        self.untraced += other.untraced
        for pair, count in other.counted.items():
            self.counted[pair] = self.counted.get(pair, 0) + count
        self.made_of.update(other.made_of)
        self.watched += other.watched

    def copy(self) -> Reached:
        """An independent copy."""
        return Reached(set(self.functions), set(self.calls), self.untraced, dict(self.counted), dict(self.made_of),
                       self.watched)

    def since(self, before: Reached) -> Reached:
        """What was reached that ``before`` (an earlier copy) had not."""
        counted = {pair: count - before.counted.get(pair, 0) for pair, count in self.counted.items()
                   if count > before.counted.get(pair, 0)}
        return Reached(self.functions - before.functions, self.calls - before.calls, self.untraced - before.untraced,
                       counted, dict(self.made_of), self.watched - before.watched)

    def count(self, callee: str) -> int:
        """How often :func:`every_call` saw ``callee`` called (by anyone)."""
        return sum(count for (_, name), count in self.counted.items() if name == callee)

    def callees(self, name: str) -> set[str]:
        """The API functions reached from ``name``, directly or not (``name`` itself excluded)."""
        found: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            for caller, callee in self.calls:
                if caller == current and callee not in found and callee != name:
                    found.add(callee)
                    pending.append(callee)
        return found


@_per_manifest
def _home(curriculum: Any, name: str) -> str:
    return curriculum.exercise_of_function(name).name


# The wrappers the suite put around the student's functions (:func:`_recording`, ``tests.kit``'s budget): made by
# ``functools.wraps``, so their signature is the wrapped function's (``tests.kit._signature`` looks through them).
KIT_WRAPPERS: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def kit_wrapper(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, a ``functools.wraps`` wrapper of the suite's around a student's function, noted in KIT_WRAPPERS."""
    KIT_WRAPPERS.add(call)
    return call


# The recordings under way (innermost last), and the student's API functions running now (innermost last).
_RECORDING: list[Reached] = []
_RUNNING: list[str] = []
# What was instrumented of each module of a student's package: {module name: (the module, its namespace's size)}.
_SEEN: dict[str, tuple[Any, int]] = {}


def _recording(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``function`` (the student's API function ``name``), noting each call in the recordings under way."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if not _RECORDING or threading.current_thread() is not threading.main_thread():
            return function(*args, **kwargs)
        edge = (_RUNNING[-1] if _RUNNING else "", name)
        for reached in _RECORDING:
            reached.functions.add(name)
            reached.calls.add(edge)
        _RUNNING.append(name)
        try:
            return function(*args, **kwargs)
        finally:
            _RUNNING.pop()

    call.__reach_recording__ = True  # type: ignore[attr-defined]
    return kit_wrapper(call)


def instrument(package: str) -> bool:
    """Make every API function of the student's modules under ``package`` note its calls (:func:`_recording`).

    In each module of the manifest imported under ``package``, the global names bound to an API function of the
    student's (defined in the module the manifest puts it in) are rebound to a recording wrapper
    (``functools.wraps``: its name, docstring, signature and ``__wrapped__`` stay the function's), so that a call
    from one of the student's functions to another, by name, is seen; nothing else is touched. A module is looked
    at again when it is new, reloaded, or its namespace changed size. Returns whether anything was rebound.
    """
    names = api_names()
    changed = False
    for module_name in _module_names(package):
        module = sys.modules.get(module_name)
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        seen = _SEEN.get(module_name)
        if seen is not None and seen[0] is module and seen[1] == len(namespace):
            continue
        for name in names & namespace.keys():
            value = namespace[name]
            if (callable(value) and not getattr(value, "__reach_recording__", False)
                    and getattr(value, "__module__", None) == f"{package}.{_home(name)}"
                    and getattr(value, "__name__", None) == name):
                namespace[name] = _recording(value, name)
                changed = True
        _SEEN[module_name] = (module, len(namespace))
    return changed


@_per_manifest
def _module_names(curriculum: Any, package: str) -> tuple[str, ...]:
    return tuple(f"{package}.{exercise.name}" for exercise in curriculum.exercises)


def recorded_function(implementation: Any, exercise: str, name: str) -> Callable[..., Any]:
    """``implementation.function(exercise, name)``, once the student's modules note their calls (:func:`instrument`).

    Code that runs elsewhere (the isolated worker) is served as it is.
    """
    function = implementation.function(exercise, name)
    package = package_of(implementation)
    if package is not None:
        try:
            if instrument(package):
                function = implementation.function(exercise, name)
        except Exception:  # noqa: BLE001 - a module of the student's that refuses it: its calls are not seen
            pass
    return function


@contextlib.contextmanager
def tracing(reached: Reached, package: str | None) -> Iterator[None]:
    """Note in ``reached`` the API functions of the student's called meanwhile.

    Calls of functions the student's modules (of ``package``) hold instrumented (:func:`recorded_function` serves
    them so), and what code that runs elsewhere (``package`` None: the isolated worker) says it reached
    (:func:`note_elsewhere`). Nothing is noted off the main thread. Calls inside another recording are noted in
    both.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _RECORDING.append(reached)
    try:
        yield
    finally:
        _RECORDING.remove(reached)


# The watched calls under way (:func:`every_call`), as (root, the function whose steps make up its result, or ""):
# the grading side asks the isolated worker to trace a call by code while this is not empty
# (``grader.sandbox.reached.asked``).
_EVERY_CALL: list[tuple[str, str]] = []


def every_call_wanted() -> bool:
    """Whether a watched call wants every call of the student's code seen now (:func:`every_call`)."""
    return bool(_EVERY_CALL)


def every_call_made_of() -> str:
    """The function whose steps make up the result of the watched call under way (``""``: none)."""
    return _EVERY_CALL[-1][1] if _EVERY_CALL else ""


@contextlib.contextmanager
def every_call(root: str, package: str | None, made_of: str = "",
               inputs: tuple[tuple, dict] = ((), {})) -> Iterator[decoded.Steps | None]:
    """While the block runs (a watched call of the student's ``root``, ``tests.kit.Kit.watch``), see its API calls.

    The wrappers of :func:`instrument` see calls made by name on the main thread; a call through an alias, a
    partial, a closure or a thread is seen here by the function's code (``tests/by_code.py``: a profiler,
    two to three times slower, so only for this). ``package``: the student's modules are imported in this
    process; None: the isolated worker is asked to do the same for the calls sent meanwhile. Calls are noted in
    the recordings under way (:func:`tracing`), and the call as watched. ``made_of`` (``decoded.MADE_BY``): the
    call's steps are followed (``tests/decoded.py``, on ``inputs``, the call's ``(args, kwargs)``); yields them
    (a ``decoded.Steps``) in this process, None elsewhere (the worker says, :func:`note_made_of`).
    """
    context: contextlib.AbstractContextManager = contextlib.nullcontext()
    steps = decoded.Steps(*inputs) if made_of == decoded.MADE_BY and package is not None else None
    if package is not None:
        namespaces = {exercise: vars(module) for exercise in {_home(name) for name in api_names()}
                      if (module := sys.modules.get(f"{package}.{exercise}")) is not None}
        paths = list(getattr(sys.modules[package], "__path__", None) or [""])  # (tests.kit: the --impl folder)
        folder = os.path.join(str(paths[0]), "") if paths[0] else os.sep + "\0"  # (no folder: nothing is theirs)
        context = by_code.every_call(namespaces, {name: _home(name) for name in api_names()}, folder, root,
                                     _note_traced, note_untraced, steps)
        note_watched()
    _EVERY_CALL.append((root, made_of))
    try:
        with context:
            yield steps
    finally:
        _EVERY_CALL.pop()


def note_watched() -> None:
    """Count, in the recordings under way, a call traced by code (here, or in the worker, which said so)."""
    for reached in list(_RECORDING):
        reached.watched += 1


def _note_traced(caller: str, callee: str) -> None:
    """Note, and count, a call that the profiler of :func:`every_call` saw (on any thread)."""
    for reached in list(_RECORDING):
        reached.functions.add(callee)
        reached.calls.add((caller, callee))
        reached.counted[(caller, callee)] = reached.counted.get((caller, callee), 0) + 1


def note_counted(counted: list[tuple[str, str, int]]) -> None:
    """Add, in the recordings under way, how often a call that ran elsewhere made each call (checked names)."""
    if not _RECORDING or threading.current_thread() is not threading.main_thread():
        return
    outer = _RUNNING[-1] if _RUNNING else ""
    for caller, callee, count in counted:
        for reached in _RECORDING:
            reached.counted[(caller or outer, callee)] = reached.counted.get((caller or outer, callee), 0) + count


def note_made_of(name: str, vectors: int, first: int, again: int = 0) -> None:
    """Note, in the recordings under way, what a watched call's steps say its result was made of (``decoded``)."""
    for reached in list(_RECORDING):
        reached.made_of[name] = (vectors, first, again)


def note_untraced() -> None:
    """Count, in the recordings under way, a call traced by code that began beside threads out of reach."""
    for reached in list(_RECORDING):
        reached.untraced += 1


def note_elsewhere(calls: list[tuple[str, str]]) -> None:
    """Note in the recordings under way the ``(caller, callee)`` calls of one call that ran in another process.

    A caller ``""`` is that call itself: it was made from the API function running here, if any (else by the
    test). The names must have been checked by the caller of this function (``grader.sandbox.reached``).
    """
    if not _RECORDING or threading.current_thread() is not threading.main_thread():
        return
    outer = _RUNNING[-1] if _RUNNING else ""
    for caller, callee in calls:
        edge = (caller or outer, callee)
        for reached in _RECORDING:
            reached.functions.add(callee)
            reached.calls.add(edge)


def package_of(implementation: Any) -> str | None:
    """The package under which ``implementation``'s modules are imported here, or None (code elsewhere)."""
    package = getattr(implementation, "package", None)
    return package if isinstance(package, str) and package in sys.modules else None


def went_through(name: str, reached: Any) -> str:
    """Where state may be: ``your f()``, or a function it went through (a :class:`Reached`), in the API's order."""
    order = [function for exercise in load_curriculum().exercises for function in exercise.functions]
    went = set(getattr(reached, "functions", ()) or ()) - {name}
    through = [function for function in order if function in went]
    return f"your {name}()" + (f" or a function it went through ({', '.join(f + '()' for f in through)})"
                               if through else "")
