"""Which of the student's API functions a call actually reached, and which called which.

Blame follows the call that failed (issue 34.2): a failing test's first message names the function whose own
output was wrong first, among those its calls went through, not among the names its source mentions (code can
name a function it never calls, call one under another name, or reach it through a helper). While a test calls
the student's code in this process (a local run, a notebook), :func:`tracing` notes every frame of an API
function of the student's that starts (``sys.settrace``, its global hook only: no line events, C calls cost
nothing) and, for each, the nearest API function below it on the stack: its caller.

Not traced: code that runs in another process (the grader's isolated worker: the blame there falls back on the
reference's call graph, ``tests/diagnosis.callees``), and any run that already has a tracer (a debugger,
coverage), which keeps its own.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

from grader.curriculum import load as load_curriculum


@functools.cache
def api_names() -> frozenset[str]:
    """The manifest's public functions."""
    return frozenset(f for e in load_curriculum().exercises for f in e.functions)


@dataclass
class Reached:
    """The API functions the traced calls went through, and who called whom among them.

    ``functions``: every API function of the student's entered; ``calls``: ``(caller, callee)`` pairs, the
    caller being the nearest API function below the callee on the stack (``""`` for the test's own call).
    """

    functions: set[str] = field(default_factory=set)
    calls: set[tuple[str, str]] = field(default_factory=set)

    def merge(self, other: Reached) -> None:
        """Add what ``other`` reached."""
        self.functions |= other.functions
        self.calls |= other.calls

    def copy(self) -> Reached:
        """An independent copy."""
        return Reached(set(self.functions), set(self.calls))

    def since(self, before: Reached) -> Reached:
        """What was reached that ``before`` (an earlier copy) had not."""
        return Reached(self.functions - before.functions, self.calls - before.calls)

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


def _api_function_of(code: CodeType, frame: FrameType, package: str) -> str | None:
    """The API function whose code ``code`` is, when the frame runs in the student's ``package``."""
    name = code.co_name
    if name not in api_names():
        return None
    # Only the function of the module the manifest puts it in: a helper of the student's that happens to share
    # an API function's name elsewhere is not that function.
    return name if frame.f_globals.get("__name__", "") == f"{package}.{_home(name)}" else None


@functools.cache
def _home(name: str) -> str:
    return load_curriculum().exercise_of_function(name).name


_PAUSED: list[bool] = []  # inside untraced(): a call whose CPU time is measured


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Trace no call made meanwhile.

    Their CPU time is measured against the test's own code (an effort check), which no tracer slows down. The
    blame then falls back on what the probes' calls reached.
    """
    _PAUSED.append(True)
    try:
        yield
    finally:
        _PAUSED.pop()


@contextlib.contextmanager
def tracing(reached: Reached, package: str | None) -> Iterator[None]:
    """Note in ``reached`` the API functions of the student's (modules of ``package``) entered meanwhile.

    Nothing is traced without a package, inside :func:`untraced`, under a tracer already set (a debugger,
    coverage: it keeps its own), or inside another tracing (the outer one notes everything).
    """
    if package is None or _PAUSED or sys.gettrace() is not None:
        yield
        return
    names = api_names()

    def hook(frame: FrameType, event: str, argument: Any) -> None:
        if event != "call" or frame.f_code.co_name not in names:  # the common case first: no API function
            return None
        callee = _api_function_of(frame.f_code, frame, package)
        if callee is None:
            return None
        caller, below = "", frame.f_back
        while below is not None:
            found = _api_function_of(below.f_code, below, package)
            if found is not None:
                caller = found
                break
            below = below.f_back
        reached.functions.add(callee)
        reached.calls.add((caller, callee))
        return None  # no line events in the frame

    sys.settrace(hook)
    try:
        yield
    finally:
        if sys.gettrace() is hook:
            sys.settrace(None)


def package_of(implementation: Any) -> str | None:
    """The package under which ``implementation``'s modules are imported here, or None (code elsewhere)."""
    package = getattr(implementation, "package", None)
    return package if isinstance(package, str) and package in sys.modules else None
