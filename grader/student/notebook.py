"""The kit inside Jupyter: a notebook's test cell runs a graded test on the notebook's own functions.

A test cell calls ``check("attention", "test_rows_sum_to_one")``. That runs the
graded test of ``tests/`` (never a copy) against the functions the notebook
defined, through :class:`NotebookImplementation`, which serves them to the suite
as any other implementation does. The whole test file runs once per set of
function objects and the outcomes are cached, so the other test cells of the
exercise cost nothing. ``check_hidden`` does the same for the instructors'
hidden tests (``grader/hidden_tests``), in a kernel that has them.

Called by: the notebooks ``attention-kit notebooks`` builds, in the student's
kernel: a practice aid, never a grade. It runs in that kernel, next to the
student's code, which can replace it; so ``nbgrader autograde`` never runs it
(the course's configuration grades the answer cells in the kit's sandbox
instead: ``grader.grading.nbgrader_autograde``).

Only the standard library is imported at the top: the kernel imports this
module in every test cell.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.suite import HIDDEN_DIR

# Lets an instructor who builds notebooks with `--hidden DIR` point the kernel at that folder.
HIDDEN_ENV = "ATTENTION_KIT_HIDDEN"
_CACHE_SIZE = 32


# ---------------------------------------------------------------------------------------------
# Serving the notebook's functions to the graded suite


class NotebookImplementation:
    """The functions defined in a notebook, as an implementation for the graded suite.

    Parameters
    ----------
    namespace : mapping
        Where the notebook's cells defined their functions (the kernel's globals).
    """

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self.namespace = namespace

    def function(self, exercise: str, name: str) -> Callable[..., Any]:
        """Return the notebook's ``name``, or raise ``tests.kit.ImplementationError`` if it has none."""
        from tests.kit import ImplementationError

        found = self.namespace.get(name)
        if not callable(found):
            raise ImplementationError(f"define {name}() in the cell above (and run that cell)")
        return found


@dataclass(frozen=True)
class Outcome:
    """One graded test's result: passed, or the failure text a student reads."""

    passed: bool
    message: str = ""


def _student_text(report: Any) -> str:
    """The failure as pytest shows it, trimmed: the diagnosis (if any), a blank line, the failed checks."""
    from grader.student.status import trim_failure
    from tests.failures import failures_of, student_text

    found = failures_of(report)
    if found:
        return student_text(found, separator="\n\n")
    return trim_failure(report.longreprtext, None, report.longrepr) or report.outcome


class _Recorder:
    """A pytest plugin: serve the notebook's functions, record each test's outcome by name."""

    def __init__(self, implementation: NotebookImplementation) -> None:
        self.implementation = implementation
        self.outcomes: dict[str, Outcome] = {}
        self.errors: list[str] = []

    def pytest_configure(self, config: Any) -> None:
        config.attention_kit_implementation = lambda path: self.implementation

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.errors.append(report.longreprtext)

    def pytest_runtest_logreport(self, report: Any) -> None:
        name = report.nodeid.split("::", 1)[-1]
        previous = self.outcomes.get(name, Outcome(True))
        if previous.passed and (report.failed or report.skipped):  # a skip is a failure to the student
            self.outcomes[name] = Outcome(False, _student_text(report))
        else:
            self.outcomes.setdefault(name, previous)


def _pytest_arguments(files: Iterable[str | Path], extra: Iterable[str] = ()) -> list[str]:
    """The arguments ``attention-kit status`` uses for a quiet in-process run of graded files."""
    from grader.curriculum import make_importable
    from grader.student.status import SUITE_PLUGINS

    make_importable()  # `-p tests.plugin` below: the kit's tests package, wherever the kit is installed
    arguments = [*map(str, files), f"--rootdir={ROOT}", "-p", "tests.plugin",
                 "-p", "no:cacheprovider", "-p", "no:unraisableexception",
                 *(option for plugin in SUITE_PLUGINS for option in ("-p", plugin)), *extra]
    config = ROOT / "pyproject.toml"
    if config.is_file():
        arguments += ["-c", str(config)]
    # The plugin wants an --impl folder; the notebook's implementation replaces whatever it names.
    return [*arguments, f"--impl={ROOT}"]


def _quiet_pytest(arguments: list[str], plugin: Any) -> int:
    """``pytest.main`` with its output hidden and without third-party plugins (as ``status`` runs it)."""
    import pytest

    from grader.quiet import run_pytest

    code, printed = run_pytest(arguments, plugin)
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise RuntimeError(f"the graded tests could not run (pytest exit {int(code)}):\n{printed[-2000:]}")
    return int(code)


def run_test_file(path: str | Path, namespace: Mapping[str, Any]) -> dict[str, Outcome]:
    """Run one graded test file against the functions in ``namespace``; outcome per test name."""
    try:
        from tests.probes import forget_other
    except ImportError:  # an installed student release: its graded suite is the kit's own, no course's files
        pass
    else:
        forget_other(Path(path))  # a course's own test file, imported by its name: never another folder's
    recorder = _Recorder(NotebookImplementation(namespace))
    _quiet_pytest(_pytest_arguments([path]), recorder)
    if recorder.errors:
        raise RuntimeError(f"{Path(path).name} could not be collected:\n{recorder.errors[0]}")
    return recorder.outcomes


def collect_tests(path: str | Path) -> list[str]:
    """The names of the tests in one graded file, in the order pytest runs them."""

    class Collector:
        def __init__(self) -> None:
            self.names: list[str] = []

        def pytest_collection_finish(self, session: Any) -> None:
            self.names = [item.nodeid.split("::", 1)[-1] for item in session.items]

    from tests.probes import forget_other

    forget_other(Path(path))
    collector = Collector()
    _quiet_pytest(_pytest_arguments([path], ["--collect-only"]), collector)
    return collector.names


# (file, namespace id, the function objects) -> outcomes. Holding the functions keeps their ids unique.
_CACHE: dict[tuple[Any, ...], dict[str, Outcome]] = {}


def _cache_key(path: Path, namespace: Mapping[str, Any]) -> tuple[Any, ...]:
    names = [name for exercise in load_curriculum().exercises for name in exercise.functions]
    # Functions compare by identity: re-running a cell makes new objects, hence a new run.
    return (str(path), id(namespace), tuple((name, namespace.get(name)) for name in names))


def outcomes(path: str | Path, namespace: Mapping[str, Any]) -> dict[str, Outcome]:
    """The outcomes of a test file for these function objects, from the cache when they are known."""
    key = _cache_key(Path(path), namespace)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = run_test_file(path, namespace)
    return _CACHE[key]


class CheckFailed(AssertionError):
    """A graded test failed in a notebook: Jupyter shows its message, not the kit's frames that raised it.

    IPython renders an exception with ``_render_traceback_`` by that method alone, so neither the
    student's notebook nor nbgrader's feedback shows a line of the kit's code (the test cell's own
    call is in the cell above the output anyway).
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def _report(exercise: str, test_name: str, path: Path, namespace: Mapping[str, Any]) -> None:
    results = outcomes(path, namespace)
    outcome = results.get(test_name)
    if outcome is None:
        raise LookupError(f"{path.name} has no test {test_name!r}; its tests are: {', '.join(results)}")
    if not outcome.passed:
        raise CheckFailed(f"{exercise}: {test_name} failed\n\n{outcome.message}")
    print(f"passed: {test_name}")


def _caller_namespace(namespace: Mapping[str, Any] | None) -> Mapping[str, Any]:
    # The cell that calls check() runs in the kernel's user namespace: its globals are the notebook's.
    return namespace if namespace is not None else sys._getframe(2).f_globals


def check(exercise: str, test_name: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Run one graded test of ``exercise`` against the functions the notebook defined.

    Parameters
    ----------
    exercise : str
        An exercise of the manifest, e.g. ``"softmax"``.
    test_name : str
        A test of that exercise's graded file, e.g. ``"test_rows_sum_to_one"``.
    namespace : mapping, optional
        Where to find the functions; default: the globals of the caller (the notebook).

    Raises
    ------
    AssertionError
        With the failure text of the graded suite (what, expected, observed, revisit) if the test fails.
    """
    path = load_curriculum().exercise(exercise).test_path
    _report(exercise, test_name, path, _caller_namespace(namespace))


def hidden_files(exercise: str, folder: str | Path | None = None) -> list[Path]:
    """The hidden test files of ``exercise`` in ``folder`` (default: $ATTENTION_KIT_HIDDEN or grader/hidden_tests)."""
    folder = Path(folder or os.environ.get(HIDDEN_ENV) or HIDDEN_DIR)
    if not folder.is_dir():
        return []
    from grader.suite import hidden_test_files

    return [Path(f.path) for f in hidden_test_files(folder) if f.exercise == exercise]


def check_hidden(exercise: str, test_name: str, namespace: Mapping[str, Any] | None = None,
                 folder: str | Path | None = None) -> None:
    """Like :func:`check`, for a hidden test (only present where instructors grade).

    Raises
    ------
    LookupError
        If no hidden test file of ``exercise`` holds ``test_name``.
    """
    namespace = _caller_namespace(namespace)
    for path in hidden_files(exercise, folder):
        if test_name in _test_names_of(path):
            _report(exercise, test_name, path, namespace)
            return
    raise LookupError(f"no hidden test {test_name!r} for {exercise} (hidden tests are only on the grading machine)")


def _test_names_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}
