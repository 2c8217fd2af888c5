"""Load the implementation under test and call its functions for the tests.

The graded tests never import ``exercises`` or ``solutions`` directly. They
ask the ``impl`` fixture for a function by name (``impl.softmax(x)``) and
this module finds it in the folder chosen with ``--impl DIR``. The same
tests run unchanged against a different backend (the grader's isolated
worker) because both provide ``function(exercise, name)``.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import hashlib
import importlib
import inspect
import io
import os
import re
import signal
import sys
import threading
import time
import traceback
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest

from grader.call_limits import CALL_SECONDS, DIAGNOSIS_SECONDS, FUNCTION_TIMEOUTS
from grader.curriculum import load as load_curriculum
from grader.curriculum import misnamed
from tests import api_signatures, kept_state
from tests.by_code import carry_threads
from tests.conventions import IN_PLACE
from tests.crash import is_raising_everything, is_raising_through, not_about_the_inputs, where_it_crashed
from tests.effort import require
from tests.failures import (
    CHECK_FAILED,
    CRASHED,
    LEFT_INTACT,
    NOT_IMPLEMENTED,
    TIMED_OUT,
    UNAVAILABLE,
    Failure,
    fail_check,
    record,
    recorded_so_far,
)
from tests.reach import KIT_WRAPPERS, Reached, every_call, kit_wrapper, package_of, recorded_function, tracing
from tests.unseen import Undecided, sizes_gate, twin
from tests.unseen import gate as unseen_gate


class ImplementationError(Exception):
    """A module of the implementation could not be loaded."""


# The CPU seconds (or seconds asleep) of one call of a student's function, and of the kit's diagnosis, in a student's
# own run as in the grader's (``grader.call_limits``: one place for both; the grader's sleep is charged by
# ``grader.sandbox.budget``).
CALL_BUDGET, DIAGNOSIS_BUDGET = CALL_SECONDS, DIAGNOSIS_SECONDS
# Where the kernel cannot tell waiting for a CPU from sleeping (no /proc/PID/task/TID/schedstat: not Linux), a call
# is stopped past this many times its budget in wall time, plus WALL_SLACK seconds: only a call that hangs meets it.
WALL_FACTOR, WALL_SLACK = 8, 10.0
# A sleeping call is looked at again at most this often (each look reads a few /proc files).
SLEEP_CHECK_SECONDS = 0.05
# The first calls of each function in a session that are kept with their answers (references, generators copied),
# for its unseen-input gate (``tests.unseen``): the evidence of a mistake, and inputs to ask again moved.
ANSWERS_KEPT = 12


class _OverBudget(BaseException):
    """The timer's signal, raised inside the student's code; TimeoutError where the call returns.

    Not an Exception: the student's ``except Exception`` does not catch it.
    """


def run_queue_seconds() -> float | None:
    """Seconds the threads of this process have waited for a CPU, or None where the kernel does not say.

    The second field of Linux's ``/proc/self/task/TID/schedstat`` (run-queue delay, ns), summed over the
    threads alive now: time that was the machine's, not the code's. (Summing threads that waited at the same
    time can only count more waiting, never less: a busy machine makes a call look shorter, not longer.)
    """
    total = 0
    try:
        for task in os.scandir("/proc/self/task"):
            try:
                with open(f"{task.path}/schedstat", "rb") as file:
                    total += int(file.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended meanwhile
    except OSError:
        return None
    return total / 1e9


@contextlib.contextmanager
def call_budget(what: str, seconds: float | None):
    """Stop ``what`` (a call, an import) once it has used ``seconds`` of CPU time or of sleep.

    TimeoutError, with the grader's own message. The CPU time is the process's (``ITIMER_PROF``: user and
    system, every thread). The sleep is wall time less the CPU time and less the time the process waited for
    a CPU (:func:`run_queue_seconds`): a call that sleeps or blocks is stopped, one the machine's load slows
    down never is. To keep calls free of any reading, the first ``seconds`` of wall time are not looked at (a
    call cannot have been awake longer than it took); from then on, the time awake is counted and the call
    stopped once that reaches ``seconds``: a call that sleeps throughout stops after about twice its budget.
    Where the kernel does not tell the waits apart, a call is stopped only past ``WALL_FACTOR`` times its
    budget plus ``WALL_SLACK`` seconds of wall time.

    Only where signals can be used (the main thread of a Unix process) and no budget is running already (a call
    within a call runs on the outer one's); elsewhere, or with ``seconds`` None, the call simply runs.
    """
    if (seconds is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread()
            or signal.getitimer(signal.ITIMER_PROF)[0] or signal.getitimer(signal.ITIMER_REAL)[0]):
        yield
        return
    since: list[float] = []  # wall time and run-queue seconds when the counting began

    def over_cpu(signum: int, frame: object) -> None:
        raise _OverBudget

    def look(signum: int, frame: object) -> None:
        now, waited = time.monotonic(), run_queue_seconds()
        if waited is None:  # no way to tell sleeping from waiting for a CPU: only a hang is stopped
            if since:
                raise _OverBudget
            since.append(now)
            signal.setitimer(signal.ITIMER_REAL, (WALL_FACTOR - 1) * seconds + WALL_SLACK)
            return
        if not since:
            since.extend((now, waited))
            signal.setitimer(signal.ITIMER_REAL, seconds)
            return
        awake = (now - since[0]) - (waited - since[1])
        if awake >= seconds:
            raise _OverBudget
        signal.setitimer(signal.ITIMER_REAL, max(seconds - awake, SLEEP_CHECK_SECONDS))

    previous = {signal.SIGPROF: signal.signal(signal.SIGPROF, over_cpu),
                signal.SIGALRM: signal.signal(signal.SIGALRM, look)}
    started = time.process_time(), time.monotonic(), run_queue_seconds()
    signal.setitimer(signal.ITIMER_PROF, seconds)  # CPU time of this process (user and system)
    signal.setitimer(signal.ITIMER_REAL, seconds)  # the first look at the time asleep
    try:
        yield
    except _OverBudget:
        queued = run_queue_seconds()
        used = cpu_used(time.process_time() - started[0], time.monotonic() - started[1],
                        queued - started[2] if queued is not None and started[2] is not None else 0.0)
        raise TimeoutError(f"{what} did not finish within {seconds:g} s: an infinite loop? ({used})") from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for number, handler in previous.items():
            signal.signal(number, handler)


def cpu_used(cpu: float, wall: float, queued: float = 0.0) -> str:
    """How much CPU a stopped call used, said so that a student can tell a loop from threads or a wait.

    The budget counts the CPU time of every thread of the process: a call whose CPU time outruns its wall
    time ran on several threads at once (torch, BLAS, OpenMP), which may be what used the budget up.
    ``queued``: seconds of that wall time spent waiting for a CPU (the machine's load, the kernel's run-queue
    delay): never the code's waiting, so a loop on a busy machine is not told it slept (a hostile round).
    """
    queued = min(max(queued, 0.0), wall)
    awake = wall - queued
    busy = f" ({queued:.1f} s of it waiting for a CPU: the machine was busy)" if queued >= max(0.1 * wall, 0.1) else ""
    text = f"it used {cpu:.1f} s of CPU time in {wall:.1f} s{busy}"
    if cpu > 1.2 * awake:
        return (f"{text}: several threads at once, and the budget counts them all; run numeric libraries on one "
                "thread (torch.set_num_threads(1), OMP_NUM_THREADS=1)")
    if cpu < 0.5 * awake:
        return f"{text}: it mostly waited (a sleep, input, a lock) rather than computed"
    return text


class _HungImport(ImportError):
    """The import of a module of the folder whose import ran out of time before in this run (``_HUNG``)."""


class _HungImports:
    """On ``sys.meta_path``: a module whose import ran out of time is not run again when another module imports it.

    Found in a student's run: a ``while True`` at the top of softmax.py cost a budget for every module that imports
    it (74 s for ``pytest``), and each of their failures blamed its own file ("importing attention.py did not
    finish"). Keys: the module's full name (the folder's private package); values: the sentence that says why.
    """

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if (why := self.modules.get(fullname)) is not None:
            raise _HungImport(why, name=fullname)


_HUNG = _HungImports()


def _hung_where(error: BaseException, folder: Path) -> tuple[str, str, int, int] | None:
    """(module file whose import was running, file and line it was at, that module's line), from a stopped import.

    The frames of the budget's signal (``error.__context__``) in the student's ``folder``: the innermost running a
    module's top level is the import that hung; the innermost of all, the line that was running.
    """
    stopped = error.__context__ if isinstance(error.__context__, _OverBudget) else None
    frames = traceback.extract_tb(stopped.__traceback__) if stopped is not None else []
    home = str(folder.resolve())
    frames = [frame for frame in frames if str(Path(frame.filename).resolve()).startswith(home)]
    top = [frame for frame in frames if frame.name == "<module>"]
    if not top:
        return None
    return Path(top[-1].filename).name, Path(frames[-1].filename).name, frames[-1].lineno or 0, top[-1].lineno or 0


def _kit_modules() -> frozenset[str]:
    """The modules a student's folder holds from the start: each exercise's and the ready-made ones (``given``)."""
    curriculum = load_curriculum()
    return frozenset(exercise.name for exercise in curriculum.exercises) | frozenset(curriculum.given_modules)


def _hung_message(module_file: str, seconds: float, where: tuple[str, str, int, int] | None) -> str:
    """The sentence for an import of ``module_file`` stopped past ``seconds``: the module and line that ran on."""
    if where is None:
        return f"importing {module_file} did not finish within {seconds:g} s (an infinite loop at module level?)"
    hung, file, line, top = where
    deeper = f", in {file} line {line}" if (file, line) != (hung, top) else ""
    text = (f"importing {hung} did not finish within {seconds:g} s (an infinite loop at module level? "
            f"it was running {hung} line {top}{deeper})")
    return text if hung == module_file else f"{text}; {module_file} imports it"


class Implementation(Protocol):
    """What the tests need from an implementation: its functions by name."""

    def function(self, exercise: str, name: str) -> Callable[..., Any]:
        """Return the callable ``name`` for a test of ``exercise``."""


def describe_import_error(module_file: str, error: BaseException, folder: Path | None = None,
                          package: str = "") -> str:
    """Say in one line why ``module_file`` could not be imported, at the line of the student's that raised.

    ``folder``: the student's folder (the line named is the last one of its files that the import went through,
    never the kit's own import hook); ``package``: the name the folder is imported as, which the student never
    wrote, taken out of the message (``No module named '_checks'``, not the kit's package name).
    """
    if isinstance(error, SyntaxError):
        where = Path(error.filename or module_file).name
        return f"syntax error in {where} line {error.lineno}: {error.msg}"
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if frame.filename.endswith(".py") and "importlib" not in frame.filename]
    if folder is not None:
        home = str(Path(folder).resolve())
        frames = [frame for frame in frames if str(Path(frame.filename).resolve()).startswith(home)]
    where = f" ({Path(frames[-1].filename).name} line {frames[-1].lineno})" if frames else ""
    return f"importing {module_file} raised {type(error).__name__}: {_unpackaged(error, package)}{where}"


def _unpackaged(error: BaseException, package: str) -> str:
    """``error``'s text without the package name the student's folder is imported as (``tests.kit`` and the worker).

    A relative import of a module that is not in the folder says so: the student wrote ``from ._checks import``.
    """
    text = str(error)
    if not package:
        return text
    name = getattr(error, "name", None)
    if isinstance(error, ModuleNotFoundError) and isinstance(name, str) and name.startswith(f"{package}."):
        missing = name[len(package) + 1 :]
        return (f"No module named {missing!r} in your folder (a relative import, from .{missing} import ..., "
                f"reads the files beside your module, and {missing.replace('.', '/')}.py is not one of them)")
    return text.replace(f"{package}.", "").replace(f"'{package}'", "'your folder'")


# What the grader's sandbox holds besides the student's own folder (``grader.sandbox.limits``: Python's standard
# library and numpy's own folders, nothing else of any site-packages).
GRADED_LIBRARIES = frozenset({"numpy"})
_IMPORT = [None]  # builtins.__import__ as it was before the kit wrapped it


def _graded_imports() -> None:
    """From now on, the student's modules import only what the grader has: the standard library, numpy, their own.

    Graded, ``import torch`` (or scipy ...) in a student's module fails, as the sandbox holds neither; in the
    student's own run it succeeded and every test passed (a hostile round: torch's autograd passed exercise 8's
    tests locally and scored 0 graded). The student's modules (the private packages of ``LocalImplementation``)
    now meet the same ModuleNotFoundError, saying why; the tests' own imports are untouched. Once per process.
    """
    import builtins

    if _IMPORT[0] is not None:
        return
    _IMPORT[0] = original = builtins.__import__

    def graded(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        importer = globals.get("__name__") if isinstance(globals, dict) else None
        if level == 0 and isinstance(importer, str) and importer.startswith("_attention_kit_impl_"):
            top = name.partition(".")[0]
            if top not in sys.stdlib_module_names and top not in GRADED_LIBRARIES and not _own(globals, top):
                raise ModuleNotFoundError(
                    f"No module named {top!r} where your code is graded: the grader runs it with numpy and Python's "
                    f"standard library only, so `import {name}` fails there (write this with numpy)", name=top)
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = graded


def _own(globals: dict, top: str) -> bool:
    """Whether ``top`` is a module or package of the student's own folder (imported by its absolute name)."""
    file = globals.get("__file__")
    if not isinstance(file, str):
        return False
    folder = Path(file).parent
    return (folder / f"{top}.py").is_file() or (folder / top).is_dir()


class LocalImplementation:
    """The modules of a folder, imported in this process (a student's run).

    The folder is imported as a package under a private name, so the
    relative imports between the modules (``from .softmax import softmax``)
    work for ``exercises/``, ``solutions/`` and any submission folder alike.
    With ``call_seconds`` (a student's run: ``CALL_BUDGET``), each import and
    each call of a function is stopped past that much CPU time, as the grader
    stops it (``call_budget``), and fails with the grader's message.
    """

    def __init__(self, path: str | Path, call_seconds: float | None = None) -> None:
        self.path = Path(path).resolve()
        self.call_seconds = call_seconds  # each call's CPU budget (``call_budget``); None: no budget
        self.timeouts: dict[str, int] = {}  # calls stopped past their budget, per function (as the grader counts)
        self.diagnosing = False  # inside ``observing``: a function once stopped is not probed (as the grader's)
        self._budgeted: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}  # name -> (function, wrapped)
        if not self.path.is_dir():
            raise ImplementationError(f"--impl {path}: no such folder")
        carry_threads()  # before any of the folder's code runs: a thread it starts is within a watched call's reach
        _graded_imports()  # and an import of a library the grader does not have fails here as it does there
        digest = hashlib.sha1(str(self.path).encode()).hexdigest()[:10]
        self.package = f"_attention_kit_impl_{digest}"
        for hung in [module for module in _HUNG.modules if module.startswith(f"{self.package}.")]:
            del _HUNG.modules[hung]  # a new run (watch, status): the student may have fixed the loop
        if _HUNG not in sys.meta_path:
            sys.meta_path.insert(0, _HUNG)
        if self.package not in sys.modules:
            package = types.ModuleType(self.package)
            package.__path__ = [str(self.path)]
            package.__package__ = self.package
            sys.modules[self.package] = package
        self._failures: dict[str, str] = {}
        self._files: dict[str, Path] = {}  # name -> the path of name.py (checked on every call, made once)
        self._homes: dict[str, str] = {}  # function -> the module that defines it, from the manifest

    def module(self, name: str) -> types.ModuleType:
        """Import ``name.py`` from the folder, or raise ImplementationError."""
        if name in self._failures:
            raise ImplementationError(self._failures[name])
        file = self._files.get(name)
        if file is None:
            file = self._files[name] = self.path / f"{name}.py"
        if not file.is_file():
            self._failures[name] = self._missing(name)
            raise ImplementationError(self._failures[name])
        if (imported := sys.modules.get(f"{self.package}.{name}")) is not None:
            return imported  # what import_module returns, without arming a budget for a lookup
        try:
            with call_budget(f"importing {name}.py", self.call_seconds):
                return importlib.import_module(f"{self.package}.{name}")
        except TimeoutError as error:
            if f"importing {name}.py did not finish" not in str(error):
                self._failures[name] = describe_import_error(f"{name}.py", error, self.path, self.package)
            else:
                where = _hung_where(error, self.path)
                self._failures[name] = _hung_message(f"{name}.py", self.call_seconds or 0, where)
                if where is not None:  # the module that ran on is not run again when another one imports it
                    hung = where[0].removesuffix(".py")
                    _HUNG.modules[f"{self.package}.{hung}"] = self._failures.setdefault(
                        hung, _hung_message(where[0], self.call_seconds or 0, where))
            raise ImplementationError(self._failures[name]) from None
        except _HungImport as error:  # a module it imports ran out of time before: said as that module's
            self._failures[name] = f"{error.msg}; {name}.py imports it" if error.msg.split()[1] != f"{name}.py" \
                else error.msg
            raise ImplementationError(self._failures[name]) from None
        except Exception as error:  # any failure of student code at import
            missing = getattr(error, "name", None) or ""
            missing = missing.removeprefix(f"{self.package}.") if missing.startswith(f"{self.package}.") else ""
            if isinstance(error, ModuleNotFoundError) and missing != name and missing in _kit_modules() \
                    and not (self.path / f"{missing}.py").exists() and not (self.path / missing).is_dir():
                # A module of the kit's folder is missing: said as that module's failure, so that the exercises
                # it blocks are one line each (a student-side round: softmax.py deleted made `pytest` 926 lines).
                # A private helper the student never had (`from ._helpers import ...`) stays the importer's own
                # failure, said as describe_import_error says it in both runs.
                where = describe_import_error(f"{name}.py", error, self.path, self.package).rpartition(" (")[2]
                self._failures[name] = f"{self._missing(missing)}; {name}.py imports it ({where}"
            else:
                self._failures[name] = describe_import_error(f"{name}.py", error, self.path, self.package)
            raise ImplementationError(self._failures[name]) from None

    def _missing(self, name: str) -> str:
        """The sentence for a module ``name.py`` that is not in the folder (naming a file that looks like it)."""
        other = misnamed(self.path, f"{name}.py")
        rename = f" (found {other}: rename it to {name}.py)" if other else ""
        return f"missing module {name}: {name}.py not found in {self.path}{rename}"

    @contextlib.contextmanager
    def observing(self) -> Iterator[Callable[[], bool]]:
        """Inside, the calls are the kit's diagnosis: yields whether it has spent ``DIAGNOSIS_BUDGET`` (student's run).

        Its time is this process's time awake since it began (wall time less the waits for a CPU, as
        ``call_budget`` counts a call's): a submission whose every function sleeps or loops costs the first failing
        test about that much, not one budget per probe. Without a budget (``call_seconds`` None), never spent.
        """
        if self.call_seconds is None:
            yield lambda: False
            return
        began, waited = time.monotonic(), run_queue_seconds()

        def spent() -> bool:
            now = run_queue_seconds()
            return time.monotonic() - began - (now - waited if now is not None and waited is not None else 0.0) \
                >= DIAGNOSIS_BUDGET

        self.diagnosing = True
        try:
            yield spent
        finally:
            self.diagnosing = False

    def forget(self) -> None:
        """Import the folder's modules afresh at the next call: nothing the student's code kept in them survives.

        As the grader replaces its worker (``grader.sandbox.measuring``): asked by the unseen-input gate
        (``tests.unseen``) before the calls that tell a mistake from a table, so that a cache, a counter or a
        default list kept between calls answers them as a first call would (a blind round: an adam_step counting
        its steps in a global, a top_k caching by shape, were told their answers did not follow from the input).
        """
        for module in [name for name in sys.modules if name.startswith(f"{self.package}.")]:
            del sys.modules[module]
        self._budgeted.clear()

    def function(self, exercise: str, name: str) -> Callable[..., Any]:
        """Return ``name`` from the module that the manifest says defines it."""
        module_name = self._homes.get(name)
        if module_name is None:  # the manifest's answer does not change during a run: asked once per function
            module_name = self._homes[name] = load_curriculum().exercise_of_function(name).name
        module = self.module(module_name)
        found = getattr(module, name, None)
        if not callable(found):
            raise ImplementationError(f"{module_name}.py defines no function {name}()")
        if self.call_seconds is None:
            return found
        known = self._budgeted.get(name)
        if known is None or known[0] is not found:  # wrapped once per function object (a reloaded module: anew)
            known = self._budgeted[name] = (found, _budgeted(found, name, self.call_seconds, self.timeouts,
                                                             lambda: self.diagnosing))
        return known[1]



def _budgeted(function: Callable[..., Any], name: str, seconds: float, timeouts: dict[str, int],
              diagnosing: Callable[[], bool]) -> Callable[..., Any]:
    """``function``, each call stopped past ``seconds`` of CPU time (see ``call_budget``), counted in ``timeouts``."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        so_far = timeouts.get(name, 0)
        if so_far >= FUNCTION_TIMEOUTS or (so_far and diagnosing()):
            raise TimeoutError(f"{name}() was not run: your code already ran out of time {so_far} times "
                               "(an infinite loop?); fix that first")
        try:
            with call_budget(f"{name}()", seconds):
                return function(*args, **kwargs)
        except TimeoutError as error:
            if str(error).startswith(f"{name}() did not finish within"):
                timeouts[name] = so_far + 1
            raise

    return kit_wrapper(call)


class PlainFunction:
    """A scalar function of one array, given by a kind and its coefficients (plain data).

    Exercise 8's ``numerical_gradient(f, x)`` takes a function. The isolated
    grader sends only plain data to the student's worker, so the tests pass
    functions of this class: the worker rebuilds the same function from the
    kind and the coefficients (``grader/sandbox/codec.py``, ``PLAIN_FUNCTIONS``).

    ``PlainFunction("cubic", a=..., b=..., c=..., d=...)`` is
    ``f(x) = sum(a x + b x**2 + c x**3) + (sum(d x))**2 / 2``.
    """

    PLAIN_FUNCTION = True
    FORMULAS: dict[str, Callable[..., float]] = {
        "cubic": lambda x, a, b, c, d: float(np.sum(a * x + b * x**2 + c * x**3) + 0.5 * np.sum(d * x) ** 2),
    }

    def __init__(self, kind: str, **params: np.ndarray) -> None:
        if kind not in self.FORMULAS:
            raise ValueError(f"unknown plain function {kind!r}; known: {sorted(self.FORMULAS)}")
        self.kind, self.params = kind, params

    def __call__(self, x: np.ndarray) -> float:
        """The function's value at ``x``."""
        return self.FORMULAS[self.kind](np.asarray(x), **self.params)

    def __repr__(self) -> str:
        return f"PlainFunction({self.kind!r})"


# inspect.signature of the functions called, computed once per function (a test calls the same few hundred
# times): {function: (what its signature is made from, the signature or the error computing it, its plain names)}.
_SIGNATURES: weakref.WeakKeyDictionary[Callable[..., Any], tuple[tuple, Any, Any]] = weakref.WeakKeyDictionary()
_PLAIN = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _made_from(function: types.FunctionType) -> tuple:
    """What ``inspect.signature(function)`` reads, for a plain function: a cached one is valid while these stay."""
    return function.__code__, function.__defaults__, function.__kwdefaults__, function.__dict__.get("__signature__")


def _plain_names(signature: inspect.Signature) -> tuple[tuple[str, ...], int] | None:
    """``(parameter names, how many may be given by position)``, or None.

    None unless every parameter is a plain one: positional-or-keyword, then keyword-only (no ``*args``,
    ``**kwargs`` or positional-only parameters).
    """
    parameters = list(signature.parameters.values())
    if any(p.kind not in _PLAIN for p in parameters):
        return None
    return tuple(p.name for p in parameters), sum(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
                                                  for p in parameters)


def _signature(function: Callable[..., Any]) -> tuple[inspect.Signature, tuple[tuple[str, ...], int] | None]:
    """``inspect.signature(function)`` and its :func:`_plain_names`.

    Remembered for a plain function while its code, defaults and ``__signature__`` stay the same objects, and only
    if its attributes hold nothing but perhaps ``__signature__`` (a proxy of the isolated worker); found under the
    suite's own wrappers (``KIT_WRAPPERS``); any other wrapper (``__wrapped__``) or callable is asked every time.
    """
    while function in KIT_WRAPPERS and "__signature__" not in function.__dict__:
        function = function.__wrapped__
    if type(function) is not types.FunctionType or not function.__dict__.keys() <= {"__signature__"}:
        signature = inspect.signature(function)
        return signature, _plain_names(signature)
    made_from = _made_from(function)
    known = _SIGNATURES.get(function)
    if known is None or any(a is not b for a, b in zip(known[0], made_from, strict=True)):
        try:
            signature = inspect.signature(function)
            known = (made_from, signature, _plain_names(signature))
        except (TypeError, ValueError) as error:
            known = (made_from, error, None)
        _SIGNATURES[function] = known
    if isinstance(known[1], Exception):
        raise known[1].with_traceback(None)
    return known[1], known[2]


def _labelled_arguments(function: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    """Name the arguments of a call by the function's parameter names (as ``Signature.bind_partial`` does)."""
    try:
        signature, plain = _signature(function)
        if plain is not None:  # the common case, without bind_partial's general machinery; the same result
            names, positional = plain
            given = names[:len(args)]
            if len(args) <= positional and not any(name in kwargs for name in given) and all(
                    name in names and name not in given for name in kwargs):
                arguments = dict(zip(given, args, strict=True))
                arguments.update((name, kwargs[name]) for name in names[len(args):] if name in kwargs)
                return arguments
        return dict(signature.bind_partial(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return {f"argument {i + 1}": a for i, a in enumerate(args)} | kwargs


def _contents(arguments: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, dict], dict[str, list]]:
    """``(arrays, dicts, lists)``: every array, dict and list among the arguments, labelled, in one walk.

    Through dicts, lists and tuples; a dict (or list) argument is itself among the dicts (lists). Labels read
    like ``params['w_q']`` or ``x[0]``; where two coincide the later one wins.
    """
    arrays: dict[str, np.ndarray] = {}
    dicts: dict[str, dict] = {}
    lists: dict[str, list] = {}

    def walk(value: Any, label: str) -> None:
        if isinstance(value, np.ndarray):
            arrays[label] = value
        elif isinstance(value, dict):
            dicts[label] = value
            for key, item in value.items():
                walk(item, f"{label}[{key!r}]")
        elif isinstance(value, (list, tuple)):
            if isinstance(value, list):
                lists[label] = value
            for index, item in enumerate(value):
                walk(item, f"{label}[{index}]")

    for name, value in arguments.items():
        walk(value, name)
    return arrays, dicts, lists


def _snapshot(arguments: dict[str, Any]) -> dict[str, Any]:
    """Copies of every array among the arguments, and every dict's keys and values, to notice changes."""
    arrays, dicts, lists = _contents(arguments)
    return {"arrays": {label: array.copy() for label, array in arrays.items()},
            "dicts": {label: (d, dict(d)) for label, d in dicts.items()},
            "lists": {label: (items, list(items)) for label, items in lists.items()}}


def _same_items(now: list, then: list) -> bool:
    """A list holds what it held: the same objects, or equal plain values (a reply decodes them anew)."""
    def alike(a: Any, b: Any) -> bool:
        if a is b:
            return True
        if isinstance(a, (str, bytes, int, float, bool)) and type(a) is type(b):
            return a == b
        return False
    return len(now) == len(then) and all(alike(a, b) for a, b in zip(now, then, strict=True))


def _restore(arguments: dict[str, Any], before: dict[str, Any]) -> None:
    """Undo what a call changed in place: every dict's keys and values, then every array's values.

    The test's data outlives the call (a cached corpus, a probe's arrays, a grading process's next student): a
    change that was reported must not reach another test, or another student's grade.
    """
    for items, then in before["lists"].values():
        if not _same_items(items, then):
            items[:] = then
    for d, items in before["dicts"].values():
        for key in [key for key in d if key not in items]:
            del d[key]
        for key, item in items.items():
            if d.get(key, _MISSING) is not item:
                d[key] = item
    arrays, _, _ = _contents(arguments)
    for label, old in before["arrays"].items():
        now = arrays.get(label)
        if now is not None and now.shape == old.shape and now.flags.writeable and not _same(old, now):
            np.copyto(now, old, casting="unsafe")


_MISSING = object()


_BYTES_DECIDE = frozenset("biufc")  # dtype kinds whose equal bytes mean equal values


def _same(old: np.ndarray, new: np.ndarray) -> bool:
    """``np.array_equal(old, new, equal_nan=True)`` for arrays of one shape, quickly when their bytes agree."""
    if old.dtype == new.dtype and old.dtype.kind in _BYTES_DECIDE and old.tobytes() == new.tobytes():
        return True  # identical bytes: identical values (and NaN where NaN), which array_equal also calls equal
    return bool(np.array_equal(old, new, equal_nan=True))


def _undone(arguments: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """What a call changed in its arguments (:func:`_changed_in_place`), after undoing it (:func:`_restore`)."""
    changed = _changed_in_place(arguments, before)
    if changed:
        _restore(arguments, before)
    return changed


def _changed_in_place(arguments: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """The labels of arrays that differ from their copies, and of dicts whose keys were added, removed or rebound."""
    after, dicts, _ = _contents(arguments)
    changed = [
        label
        for label, old in before["arrays"].items()
        if label not in after
        or old.shape != after[label].shape
        or not _same(old, after[label])
    ]
    for label, (_, items) in before["dicts"].items():
        now = dicts.get(label)
        if now is None:
            continue
        added = [key for key in now if key not in items]
        removed = [key for key in items if key not in now]
        rebound = [key for key in items if key in now and now[key] is not items[key]
                   and f"{label}[{key!r}]" not in changed]
        for kind, names in (("keys added", added), ("keys removed", removed), ("keys rebound", rebound)):
            if names:
                changed.append(f"{label} ({kind}: {', '.join(map(repr, names))})")
    changed += [f"{label} (items changed)" for label, (items, then) in before["lists"].items()
                if not _same_items(items, then) and label not in changed]
    return changed


def contract_function(name: str) -> ast.FunctionDef | None:
    """The API function ``name`` as the kit's stub (``exercises/``, else ``solutions/``) writes it, parsed, or None.

    Its parameter names and docstring are the contract's (a default there may be a student's own edit).
    """
    try:
        module = load_curriculum().exercise_of_function(name).module_file
        root = Path(__file__).resolve().parent.parent
        source = next((root / folder / module).read_text(encoding="utf-8") for folder in ("exercises", "solutions")
                      if (root / folder / module).is_file())
        return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    except (StopIteration, ValueError, OSError, SyntaxError):
        return None


@functools.cache
def _documented_parameters(name: str) -> dict[str, str]:
    """``{argument: first sentence of its description}`` from the Parameters section of ``name``'s docstring.

    Read from the kit's stubs (``exercises/``, the same API as the reference), so it works whatever the
    implementation (a proxy of the isolated worker has no docstring of its own).
    """
    node = contract_function(name)
    if node is None:
        return {}
    doc = ast.get_docstring(node) or ""
    section = doc.split("Parameters\n----------\n", 1)[-1] if "Parameters\n----------\n" in doc else ""
    section = section.split("\n\n", 1)[0] if "\n\nReturns" in section or "\n\nRaises" in section else section
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in section.splitlines():
        if line and not line.startswith(" ") and " : " in line:
            current = []
            for argument in line.split(" : ", 1)[0].split(","):
                found[argument.strip().lstrip("*")] = current
        elif line.startswith(" ") and line.strip():
            current.append(line.strip())
    described = {}
    for argument, lines in found.items():
        text = " ".join(lines).replace("``", "")
        described[argument] = re.split(r"\.\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")
    return described


def _contract(name: str, arguments: dict[str, Any]) -> str:
    """What the docstring allows for the array arguments of this call, e.g. ``x: Shape (..., d_in)``."""
    documented = _documented_parameters(name)
    parts = [f"{argument}: {documented[argument]}" for argument, value in arguments.items()
             if argument in documented and value is not None]
    return "; ".join(parts)


def _describe_arguments(arguments: dict[str, Any]) -> str:
    """``x: float64 (2, 6, 5, 12), n_heads: 3``: what the call was given, briefly."""
    parts = []
    for name, value in arguments.items():
        if isinstance(value, np.ndarray):
            parts.append(f"{name}: {value.dtype} {value.shape}")
        elif isinstance(value, dict):
            parts.append(f"{name}: dict of {len(value)}")
        elif isinstance(value, (int, float, str, bool)) or value is None:
            parts.append(f"{name}: {value!r}")
        else:
            parts.append(f"{name}: {type(value).__name__}")
    return ", ".join(parts)


class Kit:
    """The functions of the implementation under test, for one exercise's tests.

    ``kit.softmax(x)`` calls the implementation's ``softmax``. A stub that
    is not written yet, or a module that does not import, fails the test with
    a one-line message instead of a traceback. A crash of the student's code
    on valid input fails it with what / expected / observed (the exception and
    the student's own line) / revisit, unless the test expects an exception
    (:func:`raising_through`). Every call also checks that the arguments come
    back unchanged: arrays, and dicts (no key added, removed or rebound). The
    functions a test called are kept in ``_called``, for the blame in
    dependency order (``tests/plugin.py``). A test may watch a function
    (:meth:`watch`): each of its calls is then traced by code, and the
    watcher told what the call reached.
    """

    def __init__(self, implementation: Implementation, exercise: str) -> None:
        self._implementation = implementation
        self._exercise = exercise
        self._called: list[str] = []  # the functions this test called, for the blame in dependency order
        self._reached = Reached()  # the student's functions those calls went through (``tests/reach.py``)
        self._watched: dict[str, tuple[Callable[..., Failure | None], str]] = {}  # see watch()
        self._gating: set[str] = set()  # functions whose unseen-input gate runs now (tests/unseen.py)
        self._unseen: list[str] = []  # functions called that have one, asked at the end of a test that passed
        self._rejected: list[str] = []  # functions that raised where the test expected it (bad input), see above
        self._kept = kept_state.kept_calls()  # its last calls that answered, asked again if it fails
        self._returned: tuple[str, Any] | None = None
        self._crashed: tuple | None = None  # the call that raised, as ``_kept`` notes one (tests/api_signatures.py)
        self._defaulting: dict[tuple[str, str], tuple] = {}  # (function, parameter) -> its last call leaving it out
        # The first calls of each gated function in this session, with their answers (shared by the session's Kits).
        self._answered: dict[str, list[tuple[tuple, dict, Any]]] = _session_answers(implementation, exercise)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return self._run(name, args, kwargs, measure=False)

        call.__name__ = name
        return call

    def watch(self, name: str, watcher: Callable[[tuple, dict, Any, Reached], Failure | None],
              made_of: str = "") -> None:
        """Trace every later call of ``name`` in this test by code (``tests/reach.py``'s ``every_call``).

        After each call that returned, ``watcher(args, kwargs, result, reached)`` is told what it reached (calls
        under any name or in any thread; with ``made_of`` (``tests/decoded.py``'s ``MADE_BY``), which of the
        result's vectors that function's steps over the student's caches gave: ``reached.made_of``); a failure it
        returns fails the test, once. What the tests check is then what they watched: no call of theirs can tell
        the watched ones apart (a gate's own call could be).
        """
        self._watched[name] = (watcher, made_of)

    def checked_call(self, name: str, call: Callable[[], Any], args: tuple, kwargs: dict) -> Any:
        """``call()``, a call of ``name`` made outside the Kit (``tests.effort.cpu_call``'s measured one).

        Its changes to ``args`` and ``kwargs`` fail the test and are undone, as for a call through the Kit
        (:func:`left_intact`).
        """
        __tracebackhide__ = True
        try:
            labels = self._implementation.function(self._exercise, name)  # the arguments' names in a message
        except Exception:  # noqa: BLE001 - the call itself says what is missing
            labels = None
        arguments = _labelled_arguments(labels, args, kwargs)
        before = _snapshot(arguments)
        try:
            result = call()
        except BaseException:
            _undone(arguments, before)
            raise
        return left_intact(name, arguments, before, result)

    def ask_unseen(self) -> None:
        """Ask every function this test called that has a twin on an input no table holds (``tests/unseen.py``).

        Called by the plugin when the test's own checks passed: a function that is wrong on the tests' inputs gets
        their messages first; one that answers them, from a table or not, is also asked on an input drawn for the
        submission (once per session; a failure fails every test of it that passes otherwise).
        """
        exercise = self._exercise
        for name in self._rejected:  # a function that raises on every input passes any test of bad input
            require(self, name, lambda name=name: _answers_good_input(self._implementation, exercise, name),
                    key="answers good input")
            if (sizes := sizes_gate(exercise, name)) is not None:  # integers only: an answer at a drawn size
                sizes(self)
        self._rejected.clear()
        # The exercise's functions this test's calls went through count too (not those the test called itself: they
        # are asked above, or as rejecting bad input): a table of one function's answers to the inputs the others
        # give it passed their tests (a helper's round: distance_penalty under recall_weights).
        self._unseen.extend(sorted(name for name in self._reached.functions - set(self._called) - self._gating
                                   if twin(exercise, name) is not None))
        for name in self._unseen:
            self._gating.add(name)
            try:
                require(self, name, lambda name=name: unseen_gate(self, exercise, name), key="unseen")
            except Undecided:
                pass  # not remembered: asked again at the end of the next test of it that passes
            finally:
                self._gating.discard(name)
        self._unseen.clear()

    @property
    def measures_elsewhere(self) -> bool:
        """Whether :meth:`measure` reads the peak from outside this process.

        Graded, it is the worker's memory control group, which also counts the pages of the process itself; in a
        student's own run, ``tracemalloc`` here, which counts the call's allocations only.
        """
        return hasattr(self._implementation, "measure")

    def measure(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, int | None]:
        """Call ``name`` as ``kit.<name>(...)`` does; return ``(result, peak bytes allocated during the call)``.

        Graded (the isolated worker), the peak is read from outside the worker,
        from its memory control group: every page its processes touch counts,
        beyond their usage before the call (see
        ``grader.sandbox.proxy.IsolatedImplementation.measure``). In a student's
        own run, it is measured with ``tracemalloc`` around the call only (code
        that games it fools only its author); None when the code under test
        stopped the tracing itself.
        """
        __tracebackhide__ = True
        return self._run(name, args, kwargs, measure=True)

    def _run(self, name: str, args: tuple, kwargs: dict, measure: bool) -> Any:
        __tracebackhide__ = True
        implementation, exercise, called = self._implementation, self._exercise, self._called
        if name not in called:
            called.append(name)
        if name not in self._gating and name not in self._unseen and twin(exercise, name) is not None:
            self._unseen.append(name)  # asked on an input no table holds, if the test passes (ask_unseen)
        failure = None
        try:
            function = recorded_function(implementation, exercise, name)
        except ImplementationError as error:
            failure = Failure(str(error), kind=UNAVAILABLE)
        if failure is not None:  # raised outside `except`, so no chained traceback
            pytest.fail(record(failure).message, pytrace=False)
        arguments = _labelled_arguments(function, args, kwargs)
        before = _snapshot(arguments)
        # The call as it was asked, for the gate (generators copied: the call draws from them).
        noted = kept_state.noted(args, kwargs)
        for parameter in api_signatures.left_out(name, arguments):  # asked again if the test fails, the API's given
            self._defaulting.pop((name, parameter), None)
            self._defaulting[name, parameter] = (name, *noted)
        # (arrays copied: the test may write into them afterwards; only the calls the gate keeps)
        asked = kept_state.frozen(*noted) if name in self._unseen and len(self._answered.get(name, ())) \
            < ANSWERS_KEPT else None
        watcher, made_of = self._watched.get(name, (None, ""))
        window = Reached() if watcher else None  # what this very call reached, for its watcher
        steps = None
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(tracing(self._reached, package_of(implementation)))
                if window is not None:
                    stack.enter_context(tracing(window, package_of(implementation)))
                    steps = stack.enter_context(every_call(name, package_of(implementation), made_of,
                                                           (args, kwargs)))
                result = self._call(implementation, function, name, args, kwargs, measure)
            if steps is not None and window is not None and (made := steps.made_of(result)) is not None:
                window.made_of[made_of] = made
        except NotImplementedError as error:
            if is_raising_everything():
                _undone(arguments, before)
                raise
            failure = Failure(str(error) or f"{name}: not implemented yet", kind=NOT_IMPLEMENTED)
        except Exception as error:
            if is_raising_through():
                _undone(arguments, before)
                self._crashed = (name, *noted)  # the test's own wrapper tells it (feedback.call_or_explain)
                if name not in self._rejected and not is_raising_everything():
                    self._rejected.append(name)  # asked whether it answers good input too (ask_unseen)
                raise  # a test that expects an exception (bad input) looks at it
            failure = Failure(
                f"{name}({_describe_arguments(arguments)}) "
                + ("did not finish" if isinstance(error, TimeoutError) else "crashed"),
                "a result (these inputs are valid per the docstring)",
                f"{type(error).__name__}: {error}{(where := where_it_crashed(error))}",
                not_about_the_inputs(error) or
                f"{name}() must work for every input its docstring allows ("
                f"{_describe_arguments(arguments)}): "
                + (("what does the line it was called from pass to the function whose check raised"
                    if where.count("called from") == 1 else
                    "what does the last line it was called from (in the function called here) pass, through the "
                    "others, to the function whose check raised")
                   if "called from" in where and ": raise " in where.split("called from", 1)[0]
                   else "what does the line above assume about them")
                + " (the number of axes, which sizes are equal, the dtype)?"
                + (f" The docstring: {_contract(name, arguments)}" if _contract(name, arguments) else ""),
                kind=TIMED_OUT if isinstance(error, TimeoutError) else CRASHED)
        if failure is not None:
            _undone(arguments, before)  # a call that changed its arguments, then raised
            if failure.kind == CRASHED:
                self._crashed = (name, *noted)
            pytest.fail(record(failure).message, pytrace=False)
        result = left_intact(name, arguments, before, result, judged=not self._gating)
        self._kept.append((name, *noted))  # asked again if the test fails (tests/kept_state.py)
        self._returned = (name, result)  # the last result, described if the test cannot use it
        if asked is not None and len(answered := self._answered.setdefault(name, [])) < ANSWERS_KEPT:
            # asked again, moved, if the gate finds it wrong elsewhere (a measured call's answer, not its peak)
            answered.append((*asked, result[0] if measure else result))
        if window is not None and watcher is not None and (found := watcher(args, kwargs, result, window)):
            self._watched.pop(name)  # told once
            fail_check(found)
        return result

    def _call(self, implementation: Implementation, function: Callable[..., Any], name: str, args: tuple,
              kwargs: dict, measure: bool) -> Any:
        __tracebackhide__ = True
        if not measure:
            return _plain(function(*args, **kwargs))
        if hasattr(implementation, "measure"):  # code that runs in another process measures itself there
            return implementation.measure(self._exercise, name, *args, **kwargs)
        result, peak = _measured(function, args, kwargs)
        return _plain(result), peak


def _plain(result: Any) -> Any:
    """``result`` with each array of a subclass (np.matrix, a masked array) a plain ndarray, as graded.

    The grader's worker sends arrays back as plain ndarrays (``grader.sandbox.codec``): a softmax returning an
    np.matrix passed there, and in the student's own run failed "each row sums to 1: expected shape (4,),
    observed (4, 1)" (a matrix's sum keeps two axes), sent to the formula (a student-side round).
    """
    if isinstance(result, np.ndarray):
        return result if type(result) is np.ndarray else np.asarray(result)
    if type(result) in (tuple, list):
        items = [_plain(item) for item in result]  # a container is rebuilt only around a subclass (its identity kept)
        return result if all(new is old for new, old in zip(items, result, strict=True)) else type(result)(items)
    if type(result) is dict:
        values = {key: _plain(value) for key, value in result.items()}
        return result if all(values[key] is value for key, value in result.items()) else values
    return result


# Per implementation (a session's), per exercise: the first ANSWERS_KEPT calls of each gated function, answered.
_ANSWERS: weakref.WeakKeyDictionary[Any, dict[str, dict[str, list]]] = weakref.WeakKeyDictionary()


def _session_answers(implementation: Any, exercise: str) -> dict[str, list]:
    """The calls kept for ``exercise``'s functions in this session (a fresh dict where none can be kept)."""
    try:
        return _ANSWERS.setdefault(implementation, {}).setdefault(exercise, {})
    except TypeError:  # not weakly referable: this test's calls only
        return {}


def _answers_good_input(implementation: Implementation, exercise: str, name: str) -> list[Failure]:
    """Why ``name``, which raised on a test's bad input, is not seen to answer good input (empty when it is).

    Asked once per session (``tests.effort.require``) of a function that raised where a test expected it to: on
    the first of its fixed inputs that are valid (its probes, ``tests/probes.py``), it must return. A function
    that raises on every input (a stub that says ValueError, naming every argument) tells bad input from nothing.
    """
    from tests.probes import load_all_probes
    from tests.unseen import moved_input

    registry = load_all_probes()
    valid = sorted(probe for probe, entry in registry.items() if entry.function == name and entry.rejects is None)
    if not valid:
        return []
    # The input as the kit keeps it, then moved within the docstring's inputs (a table answers only the first).
    for moved in (False, True):
        (call_args, call_kwargs), what = registry[valid[0]].arguments(), ""
        if moved:
            moved_call, what = moved_input(exercise, name, (call_args, call_kwargs))
            if moved_call is None:
                break
            call_args, call_kwargs = moved_call
        try:
            function = implementation.function(exercise, name)
            with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                function(*call_args, **call_kwargs)
        except NotImplementedError:
            return []  # a stub: its other tests say so
        except Exception as error:  # noqa: BLE001 - what the function says on good input
            return [Failure(f"{name}() on good input: the kit's fixed input {valid[0]}{what} (valid per the "
                            "docstring)", "a result: the points of a test of bad input are for telling bad input "
                            "from good", f"{type(error).__name__}: {str(error)[:200]}",
                            f"{name}() must check its input and then compute its result: it raised on bad input as "
                            "asked, and on this valid input too", kind=CHECK_FAILED)]
    return []


def _changing_callees(name: str) -> list[str]:
    """The functions ``name`` relies on (the reference's calls) that this test already found changing an input.

    A blind round: a layer_norm doing ``x -= mean`` made transformer_layer, right, fail as "transformer_layer()
    changed its input x in place", the blame on the caller. (Only what this test found: a test that calls the
    caller alone says nothing more than before; the kit keeps no memory between tests, which may grade others.)
    """
    from tests.diagnosis import _stored_calls  # (not at the top: the diagnosis imports what kit imports)

    calls, below, pending = _stored_calls(), set(), [name]
    while pending:
        for callee in calls.get(pending.pop(), ()):
            if callee not in below:
                below.add(callee)
                pending.append(callee)
    found = [failure.what.split("()", 1)[0] for failure in recorded_so_far() if failure.expected == LEFT_INTACT]
    return [function for function in dict.fromkeys(found) if function in below and function != name]


def left_intact(name: str, arguments: dict[str, Any], before: dict[str, Any], result: Any,
                judged: bool = True) -> Any:
    """``result``, after failing the test (a check) if the call of ``name`` changed its ``arguments`` in place.

    ``before`` is their :func:`_snapshot`; a change is undone, so the test's own data (what it computes its
    expected values from) stays what it was. The result is copied first: it may be the very argument the call
    changed (``x -= m; return x``). ``judged=False``: a gate's call on an input drawn for the submission (or one
    moved), undone and not failed: whether code that changes some inputs only (``x + eps - eps`` is not always
    ``x``) changes that one depends on the draw, and the tests' own inputs already judge it the same for everyone.
    """
    changed = _changed_in_place(arguments, before)
    if not changed:
        return result
    result = copy.deepcopy(result)
    _restore(arguments, before)
    if not judged:
        return result
    changers = _changing_callees(name)
    fail_check(Failure(
        f"{name}() changed its input {', '.join(changed)} in place.",
        LEFT_INTACT, "different values (or keys) after the call",
        (f"first fix your {'(), '.join(changers)}(), which {name}() calls: it changed its input in place in this "
         f"test too, and {name}() may only pass that change on; " if changers else "")
        + "no mutation of inputs: build new arrays (x = x - m, "
        "not x -= m) and new dicts, so the caller's data stays intact"
        + (f"; {IN_PLACE[name]}" if name in IN_PLACE else ""),
        kind=CHECK_FAILED,
    ))
    return result


def _measured(function: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, int | None]:
    """``function(*args, **kwargs)`` and the peak memory its allocations reached, by ``tracemalloc``."""
    import tracemalloc

    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.stop()  # a fresh start: the peak of this call only
    tracemalloc.start()
    try:
        result = function(*args, **kwargs)
    finally:
        peak = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else None
        tracemalloc.stop()
        if tracing:
            tracemalloc.start()
    return result, peak
