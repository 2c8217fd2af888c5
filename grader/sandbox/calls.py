"""The student's API functions one call of the worker went through, and which called which (the worker's side).

Run by the student's worker only (a copy beside ``worker.py``, ``limits.SANDBOX_MODULES``: the standard library
only). What ``tests/reach.py`` does in a student's own run; a watched call is also traced by code, with the
profiler the worker is given (``tests/by_code.py``, the same in both).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from typing import Any


class Reach:
    """The student's API functions one call of the worker went through, and which called which: names only.

    What ``tests/reach.py`` does in a student's own run, done in the worker (``protocol.REACHED``): in each module
    of the student's folder, a global name bound to one of the student's API functions (defined in the module the
    manifest puts it in) is rebound to a wrapper (``functools.wraps``) that notes the call and the API function
    that made it; the given code and the reference's forwarders are not the student's and are left alone. A gate's
    call (``every_call``) is also traced by code (``by_code``: the worker's copy of ``tests/by_code.py``), and
    with ``made_of`` its steps followed (``decoded``: its copy of ``tests/decoded.py``), to say what its result is
    made of. At most ``limit`` pairs are kept.
    """

    def __init__(self, modules: str, limit: int, by_code: Any, decoded: Any) -> None:
        self.modules, self.limit = modules, limit  # the student's folder (its modules' files lie in it)
        self.by_code, self.decoded = by_code, decoded
        self.watching = False  # the current call is traced by code
        self.steps: Any = None  # the watched call's decoded.Steps, when it asks for them
        self.home: dict[str, str] = {}  # each API function's exercise (from the worker's init)
        self.reached: dict[tuple[str, str], None] = {}
        self.running: list[str] = []  # the API functions running now, innermost last (main thread only)
        self.untraced = False  # a call traced by its code began beside threads out of reach
        self.counted: dict[tuple[str, str], int] = {}  # how often each pair was seen by the profiler (every_call)
        self._instrumented: dict[str, tuple[Any, int]] = {}

    def start(self) -> None:
        """Forget the last call's notes: a new call begins."""
        self.reached.clear()
        self.running.clear()
        self.untraced = False
        self.counted.clear()
        self.watching, self.steps = False, None

    def pairs(self) -> list:
        """What the current call reached, as ``[caller, callee]`` pairs (no builtin the student may have replaced)."""
        return [[caller, callee] for caller, callee in self.reached]

    def note(self, caller: str, callee: str) -> None:
        """Note that ``caller`` (``""``: the call itself) called ``callee``."""
        if len(self.reached) < self.limit:
            self.reached[(caller, callee)] = None

    def note_traced(self, caller: str, callee: str) -> None:
        """Note a call the profiler saw, and count it (each call once: the wrappers' notes are not counted)."""
        self.note(caller, callee)
        if (caller, callee) in self.counted or len(self.counted) < self.limit:
            self.counted[(caller, callee)] = self.counted.get((caller, callee), 0) + 1

    def counts(self) -> list:
        """How often the profiler saw each pair, as ``[caller, callee, count]`` triples."""
        return [[caller, callee, count] for (caller, callee), count in self.counted.items()]

    def _students(self, package: str, exercises: Any) -> dict[str, dict]:
        """{exercise: namespace} of the student's own modules among ``exercises``, imported under ``package``."""
        found = {}
        for exercise in exercises:
            namespace = getattr(sys.modules.get(f"{package}.{exercise}"), "__dict__", None)
            if isinstance(namespace, dict) and str(namespace.get("__file__")).startswith(self.modules):
                found[exercise] = namespace
        return found

    def instrument(self, package: str, exercises: Any) -> None:
        """Rebind the API names of the student's modules (``exercises``, under ``package``) to noting wrappers.

        A module is looked at again when it is new or its namespace changed size. Student code that refuses it
        is simply not seen.
        """
        try:
            for exercise, namespace in self._students(package, exercises).items():
                module = sys.modules[f"{package}.{exercise}"]
                seen = self._instrumented.get(f"{package}.{exercise}")
                if seen is not None and seen[0] is module and seen[1] == len(namespace):
                    continue
                for name in self.home.keys() & namespace.keys():
                    value = namespace[name]
                    if (callable(value) and getattr(value, "__reach_recording__", None) is not True
                            and getattr(value, "__module__", None) == f"{package}.{self.home[name]}"
                            and getattr(value, "__name__", None) == name):
                        namespace[name] = self._recording(value, name)
                self._instrumented[f"{package}.{exercise}"] = (module, len(namespace))
        except Exception:  # noqa: BLE001, S110 - a module of the student's that refuses it: its calls are not seen
            pass

    def _recording(self, function: Any, name: str) -> Any:
        """``function`` (the student's API function ``name``), noting each call of it on the main thread."""
        note, running, main = self.note, self.running, threading.main_thread().ident

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != main:
                return function(*args, **kwargs)
            note(running[-1] if running else "", name)
            running.append(name)
            try:
                return function(*args, **kwargs)
            finally:
                running.pop()

        call.__reach_recording__ = True  # type: ignore[attr-defined]
        return call

    def every_call(self, wanted: bool, package: str, exercises: Any, root: str, made_of: str = "",
                   inputs: tuple[tuple, dict] = ((), {})) -> Any:
        """For a watched call (``wanted``): note and count its API calls by their code, else nothing.

        ``made_of`` (``decoded.MADE_BY``): its steps are followed on ``inputs`` (:meth:`made_of` says what they
        make of the result).
        """
        if not wanted:
            return contextlib.nullcontext()
        namespaces = self._students(package, exercises)
        self.watching = True
        self.steps = self.decoded.Steps(*inputs) if made_of == self.decoded.MADE_BY else None
        return self.by_code.every_call(namespaces, self.home, self.modules, root, self.note_traced,
                                       lambda: setattr(self, "untraced", True), self.steps)

    def made_of(self, result: Any) -> list | None:
        """``[function, vectors, first]`` of a watched call's ``result`` (``decoded.Steps.made_of``), or None."""
        found = self.steps.made_of(result) if self.steps is not None else None
        return None if found is None else [self.steps.name, *found[:2]]
