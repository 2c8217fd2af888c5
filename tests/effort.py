"""What a call costs, for tests that check the idea and not only the output (issue 24).

A gradient computed by nudging every input entry through the forward function
gives the right numbers at a small size; what gives it away is its cost (one
forward pass per entry, where the chain rule costs a few) and its rounding. The
helpers here measure the first on CPU time, never wall time: the machine may be
shared, and a busy machine must not fail an honest call.

``cpu_call`` measures where the code runs: in this process for ``--impl DIR``
and notebooks (a student's own run); an implementation that runs the code
elsewhere (it has ``measure``, as the grader's isolated worker) measures it
there if it offers ``measure_cpu(exercise, name, *args, **kwargs) -> (result,
CPU seconds)``, and otherwise the cost is unknown (None) and only the other
checks apply.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.failures import Failure
from tests.one_thread import torch_on_one_thread
from tests.reach import tracing

# Per implementation object, the outcome of checks that are the same for every test that needs them
# (computed once per session, on the first test that asks).
# A gate's allowance: this many forward passes of the test's own code (a step's, for a training loop), plus
# EFFORT_FLOOR seconds for any overheads (a call through the grader's worker).
EFFORT, EFFORT_FLOOR = 50, 0.05

_ONCE: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def seed_of(*results: Any) -> int:
    """A seed made from the bytes of what the code under test returned: which entries a gate checks.

    The same results give the same entries, so the feedback is the same on every run; but code cannot know
    them before it has returned every entry, so computing only the entries a fixed seed would check (a few
    central differences on an input recognised by its shape) is no way past the gate. Graded, the grader's key
    (:func:`use_draw_key`) is mixed in: code that computes part of its answer could otherwise work out the seed
    of its own answer, and change an unchecked entry until the entries drawn fall in the part it computed (a
    hostile round: a numerical attention_backward that computed an eighth of grad_k passed so, re-rolling a
    spare entry about 64 times).
    """
    digest = hashlib.sha256(_DRAW_KEY)
    for result in results:
        array = np.ascontiguousarray(np.asarray(result, dtype=np.float64))
        digest.update(repr(array.shape).encode())
        digest.update(array.tobytes())
    return int.from_bytes(digest.digest()[:8], "little")


# The running pytest configuration (tests/plugin.py sets it): its --impl folder is the submission graded now (the
# grader's session sets it anew for each student).
CONFIG: Any = None


def submission_salt(module: str) -> int:
    """A number made from the bytes of the submission's graded files, for the gates of ``module``.py.

    Added to a gate's seeds: the gate's inputs are the same on every run of the same code (the same feedback), but
    no code can hold its answers to them, computed beforehand, since storing them changes a file, and so the
    inputs; graded, the grader's key is mixed in too (:func:`use_draw_key`), so code cannot compute them either.
    Every file that is graded counts (the exercises' modules and the private ``_*.py`` helpers, as
    ``grader.grading.submissions`` copies them), not only ``module``.py: answers kept in another module, or in a
    helper that ``module``.py reads, move the inputs as well. The files are read as bytes, never run. 0 when
    ``module``.py cannot be read.
    """
    folder = getattr(getattr(CONFIG, "option", None), "impl", None)
    if not folder:
        return 0
    try:
        # One listing, one stat per file (a session's gates ask a hundred times a submission: this is their cost).
        with os.scandir(folder) as listing:
            found = [(entry.name, entry.path) for entry in listing
                     if entry.name.endswith(".py") and entry.name != "__init__.py" and entry.is_file()]
        if not any(name == f"{module}.py" for name, _ in found):
            return 0
        graded = _graded_modules()
        files = sorted((name, path, os.stat(path)) for name, path in found
                       if name.startswith("_") or name[:-3] in graded)
        signature = (str(folder), tuple((name, st.st_size, st.st_mtime_ns, st.st_ino) for name, _, st in files))
        folder_digest = _FOLDER_DIGESTS.get(signature)
        if folder_digest is None:  # read once per version of the files (a session's gates ask many times)
            digest = hashlib.sha256()
            for name, path, _ in files:
                digest.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
            folder_digest = _FOLDER_DIGESTS[signature] = digest.digest()
    except OSError:
        return 0
    return int.from_bytes(hashlib.sha256(_DRAW_KEY + module.encode() + b"\0" + folder_digest).digest()[:8], "little")


def use_draw_key(key: str) -> None:
    """Mix the grader's key (hex) into every salt of this process; the empty key leaves the student's salt.

    Set by the grading process (``grader.grading.session``, from ``grader.grading.draw_key``) before it runs the
    tests. In a student's own run there is none, and the inputs drawn for a submission are the ones its own code
    could work out from its files (the salt's recipe is public). Graded, the tests run in the grading process and
    the student's code in its sandbox, which holds no copy of the key: no code can compute a gate's, a twin's or
    a long run's inputs before it is asked, to prepare its answers to them.
    """
    global _DRAW_KEY
    _DRAW_KEY = bytes.fromhex(key)


_DRAW_KEY = b""  # the grader's key (grading only; see use_draw_key)
_FOLDER_DIGESTS: dict[tuple, bytes] = {}  # (folder, its graded files' names, sizes, times) -> their bytes' digest


def _graded_modules() -> set[str]:
    """The names of the manifest's exercise modules (``softmax``, ``training``, ...)."""
    from grader.curriculum import load as load_curriculum

    return {exercise.name for exercise in load_curriculum().exercises}


def within_budget(draw: Callable[[int], Any], call: Callable[[Any], tuple[Any, float | None]],
                  budget: float) -> tuple[Any, Any, float | None]:
    """``call(draw(0))`` (a :func:`cpu_call`), once more if it ran past ``budget``: a busy machine may have slowed it.

    The second attempt runs on inputs of its own, ``draw(1)`` (seeded, the same every run, unlike the first): the
    same inputs again would let code that remembers its answers return the first one at no cost. Returns
    ``(inputs, result, seconds)`` of the attempt the test judges: the second if it was cheaper, else the first.
    """
    inputs = draw(0)
    result, seconds = call(inputs)
    if seconds is not None and seconds > budget:
        again = draw(1)
        second, spent = call(again)
        if spent is not None and spent <= seconds:
            return again, second, spent
    return inputs, result, seconds


def too_costly(what: str, seconds: float, bound: float, forward_seconds: float, entries: int, analytic: str,
               steps: int = 1) -> Failure:
    """A gate's failure for a call that cost more than ``bound`` (its forward passes' worth, per step of ``steps``).

    ``entries``: how many inputs a numerical estimate nudges (two forward passes each); ``analytic``: what to
    write instead.
    """
    each = " a step" if steps > 1 else ""
    allowed = round((bound - EFFORT_FLOOR) / forward_seconds / steps) if forward_seconds > 0 else 0
    return message(f"{what}: its CPU time",
                   f"at most {bound * 1e3:.0f} ms ({allowed} forward passes of {forward_seconds * 1e3:.2f} ms{each}, "
                   f"plus {EFFORT_FLOOR * 1e3:.0f} ms)",
                   f"more than {bound * 1e3:.0f} ms (stopped there)" if seconds == float("inf") else
                   f"{seconds * 1e3:.0f} ms, about {seconds / forward_seconds / steps:.0f} forward passes{each}",
                   f"a backward pass costs a few forward passes, nudging each of the {entries} entries two: your "
                   f"gradients look like a numerical estimate. " + analytic)


def require(impl: Any, name: str, gate: Callable[[], list[Failure]], key: str = "analytic") -> bool:
    """Fail the running test with ``gate()``'s failures (computed once per session for ``name``); True if none.

    For the gates that ask whether a function does the exercise's idea at all (a backward pass, not a
    numerical estimate; a formula, not a table of the tests' sizes; independent draws): every test of the
    function asks, the first computes. A gate reports nothing where the test's own checks will (a crash, wrong
    values), so that a student's first message stays the most useful one.
    """
    from tests.failures import fail_check

    failures = once(impl, name, key, gate)
    for failure in failures:
        fail_check(failure)
    return not failures


def message(what: str, expected: str, observed: str, idea: str) -> Failure:
    """A failure in the suite's form (what, expected, observed, revisit), for the test to record when it applies."""
    return Failure(what, expected, observed, idea)


RETRY_CPU = 0.05  # CPU seconds between a budget's signals once it has run out (see _limited)


class _OverBudget(BaseException):
    """Raised in a call that ran past its CPU budget (a BaseException: the kit's handlers let it through)."""


def _limited(call: Callable[[], Any], budget: float | None) -> tuple[Any, float]:
    """``call()`` and its CPU seconds; stopped (seconds infinite) once it has used ``budget`` CPU seconds.

    The budget is a profiling timer (``ITIMER_PROF``: the process's CPU time, every thread), so a call that
    would run for minutes costs the student's run only the budget. Only the main thread can set it; elsewhere
    (and where the system has no such timer) the call runs to its end.
    """
    import signal
    import threading

    torch_on_one_thread()  # the CPU time counts every thread: torch's spinning ones are not the student's work
    timer = getattr(signal, "ITIMER_PROF", None)
    armed = budget is not None and timer is not None and threading.current_thread() is threading.main_thread()
    if armed:
        def stop(signum: int, frame: Any) -> None:
            raise _OverBudget

        previous = signal.signal(signal.SIGPROF, stop)
        # Fired again every RETRY_CPU seconds until disarmed: a signal that lands while Python runs a finalizer is
        # swallowed there, and a one-shot timer would then never stop the call. That swallowed stop is the timer's
        # own, fired again: it is not printed ("Exception ignored in ...", a warning under pytest).
        hook = sys.unraisablehook

        def quiet(unraisable: Any) -> None:
            if not isinstance(unraisable.exc_value, _OverBudget):
                hook(unraisable)

        sys.unraisablehook = quiet
        signal.setitimer(timer, max(budget, 1e-3), RETRY_CPU)
    started = time.process_time()
    try:
        result = call()
    except _OverBudget:
        return None, float("inf")
    finally:
        if armed:
            signal.setitimer(timer, 0)
            signal.signal(signal.SIGPROF, previous)
            sys.unraisablehook = hook
    return result, time.process_time() - started


def cpu_call(impl: Any, name: str, *args: Any, budget: float | None = None, **kwargs: Any) -> tuple[Any, float | None]:
    """Call ``impl.<name>(*args, **kwargs)``; return ``(result, CPU seconds of the call or None)``.

    The CPU time is the process's (user + system, every thread) around the call, measured where the
    code runs; None where that is not known. In this process a call is stopped once it has used ``budget``
    CPU seconds (the result is then None and the seconds infinite).
    """
    __tracebackhide__ = True
    implementation = getattr(impl, "_implementation", None)
    measure = getattr(implementation, "measure_cpu", None)
    if callable(measure):  # code that runs in another process measures itself there
        # A call the test made, as one through the Kit is: noted for the blame, with what it reached there.
        called, reached = getattr(impl, "_called", None), getattr(impl, "_reached", None)
        if isinstance(called, list) and name not in called:
            called.append(name)
        def run() -> tuple[Any, float]:
            return measure(impl._exercise, name, *args, **kwargs)

        checked = getattr(impl, "checked_call", None)  # the Kit's (tests.kit.Kit.checked_call)
        with tracing(reached, None) if reached is not None else contextlib.nullcontext():
            # Its changes to the arguments are the test's to see and undo, as through the Kit: the gate computes
            # what it expects from the same arrays.
            return checked(name, run, args, kwargs) if callable(checked) else run()
    if hasattr(implementation, "measure") or implementation is None:  # elsewhere, and it cannot say (see Kit)
        return getattr(impl, name)(*args, **kwargs), None
    return _limited(lambda: getattr(impl, name)(*args, **kwargs), budget)


def cpu_seconds_per_call(function: Callable[[], Any], minimum: float = 2e-3, most: int = 50) -> float:
    """The CPU seconds of one ``function()`` (the test's own code), averaged over enough calls to be measurable."""
    calls, started = 0, time.process_time()
    while True:
        function()
        calls += 1
        spent = time.process_time() - started
        if spent >= minimum or calls >= most:
            return max(spent, 1e-9) / calls


class _Went:
    """The calls a remembered computation made through a Kit (``_called``) and what they reached (``_reached``)."""

    def __init__(self, impl: Any) -> None:
        self.impl, self.called, self.reached = impl, [], None

    def __enter__(self) -> None:
        self.outer = getattr(self.impl, "_called", None), getattr(self.impl, "_reached", None)
        if isinstance(self.outer[0], list) and self.outer[1] is not None:
            self.reached = type(self.outer[1])()
            self.impl._called, self.impl._reached = self.called, self.reached

    def __exit__(self, *exc: object) -> None:
        if self.reached is not None:  # the test that computed it made the calls (also when they failed it)
            self.impl._called, self.impl._reached = self.outer
            self.replay(self.impl)
        self.impl = None  # not held: the remembered entry outlives the test
        self.outer = (None, None)

    def replay(self, impl: Any) -> None:
        """Add the calls to ``impl``'s, as if its test had made them."""
        called, reached = getattr(impl, "_called", None), getattr(impl, "_reached", None)
        if self.reached is None or not isinstance(called, list) or reached is None:
            return
        called += [name for name in self.called if name not in called]
        reached.merge(self.reached)


def once(impl: Any, name: str, key: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered for this implementation's function ``name`` under ``key`` (once per session).

    Remembered while the implementation serves the same function object (a notebook cell run again, or a
    reloaded module, is asked again). Only a completed ``compute()`` is remembered: one that failed the test
    (a stub, a crash) runs again in the next test that asks, and fails it the same way.
    """
    implementation = getattr(impl, "_implementation", impl)
    try:
        function = implementation.function(impl._exercise, name)
    except Exception:  # noqa: BLE001 - a missing module or function: the call itself will say so
        function = None
    if function is None:  # computed outside `except`: its failure is not shown chained to this one, twice
        return compute()
    try:
        known = _ONCE.setdefault(implementation, {})
    except TypeError:  # not weakly referable: nothing is remembered
        return compute()
    function = inspect.unwrap(function)  # a student's run serves each function wrapped in its budget, anew
    entry = (name, key)
    if entry not in known or known[entry][0] is not function:
        went = _Went(impl)
        with went:
            result = compute()
        # (the function is held, so its identity stays its own) What the computation called and reached is kept
        # with it: a test given the remembered result went through those calls as much as the first one did (the
        # blame follows them, tests/reach.py).
        known[entry] = (function, result, went)
    else:
        known[entry][2].replay(impl)
    return known[entry][1]


def expect_varies(values: Any, *, axis: int, what: str, idea: str) -> bool:
    """Check that ``values`` are not all the same along ``axis`` (e.g. the outputs of different tokens).

    A property that a constant result satisfies (shuffling the tokens shuffles the outputs; a prefix does not
    change) says nothing unless the result depends on its input: this is the check that it does.
    """
    from tests.feedback import expect

    array = np.asarray(values, dtype=float) if isinstance(values, np.ndarray) else None
    # Relative to the values' size: tiny values that differ (a gradient off by a factor of 1e-12, say) vary, and
    # were told "the same values everywhere" (a blind round); a constant with rounding noise does not.
    varies = array is not None and array.ndim > 0 and bool(np.any(
        np.ptp(array, axis=axis) > 1e-9 * np.max(np.abs(array), axis=axis)))
    if varies:
        return True
    return expect(False, what=what, expected="results that differ from one another (they depend on the input)",
                  observed="the same values everywhere" if array is not None else type(values).__name__,
                  idea=idea + "; a constant (or zeros) satisfies this property without computing anything")
