"""``attention-kit status``: where you are in the curriculum, and what to do next.

The graded suite runs in this process (``pytest.main`` with a small recording
plugin, its own output hidden). The exercises are listed in the manifest's
order with their passing tests, then the overall progress, then the first
failure of the first unfinished exercise and the commands to work on it.

Other commands reuse :func:`run_suite` (``watch`` reruns one exercise,
``demo`` checks that the exercises it needs pass).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from grader import scoring
from grader.curriculum import INSTALLED, ROOT, Exercise
from grader.curriculum import load as load_curriculum
from grader.quiet import run_pytest
from grader.scoring import earned
from grader.student import results_cache

NOT_IMPLEMENTED = "not implemented yet"
DONE, IN_PROGRESS, NOT_STARTED, NO_TESTS = "done", "in progress", "not started", "no tests"
DOES_NOT_IMPORT = "does not import"
# How tests/kit.py reports a module that cannot be imported (describe_import_error, LocalImplementation.module).
_SYNTAX_ERROR = re.compile(r"^syntax error in (?P<file>\S+) line (?P<line>\d+)", re.M)
_IMPORT_RAISED = re.compile(
    r"^importing (?P<module>\S+) raised (?P<type>\w+)[^\n]*?(?:\((?P<file>\S+) line (?P<line>\d+)\))?$", re.M)
_MISSING = re.compile(r"^missing module (?P<name>\w+):", re.M)
_HUNG = re.compile(r"^importing (?P<file>\S+) did not finish within .*?running \S+ line (?P<line>\d+)", re.M)
# tests/kit.py imports each implementation folder as a package under this prefix.
IMPL_PACKAGE_PREFIX = "_attention_kit_impl_"
# The only plugin the graded suite needs besides its own conftest. Other installed plugins are not
# loaded: hypothesis alone would add 0.6 s to every run, and a student's stray plugin could break it.
SUITE_PLUGINS = ("pytest_check.plugin",)


@dataclass
class TestResult:
    """The outcome of one graded test."""

    name: str
    exercise: str
    passed: bool
    message: str = ""  # what the student reads (the failures rendered by tests.failures.student_text)
    failures: tuple[Any, ...] = ()  # the failures as data (tests.failures.Failure), when the checks recorded them

    @property
    def not_implemented(self) -> bool:
        """True when the test failed only because a stub is still a stub."""
        return not self.passed and NOT_IMPLEMENTED in self.message


@dataclass
class ExerciseResult:
    """The graded tests of one exercise."""

    exercise: Exercise
    tests: list[TestResult] = field(default_factory=list)
    error: str = ""  # the test file itself could not be collected

    @property
    def passed(self) -> int:
        """Number of passing tests."""
        return sum(test.passed for test in self.tests)

    @property
    def total(self) -> int:
        """Number of tests."""
        return len(self.tests)

    @property
    def import_problem(self) -> str:
        """Why the exercise's module does not import (``syntax error, line 12``), or "" when it does.

        Read from the tests' messages: only when every test failed because the module
        (or a module it imports) could not be imported.
        """
        if not self.tests or any(test.passed for test in self.tests):
            return ""
        problems = {_import_problem(test.message, self.exercise.module_file) for test in self.tests}
        return problems.pop() if len(problems) == 1 and "" not in problems else ""

    @property
    def label(self) -> str:
        """The state as the status list shows it (``does not import: syntax error, line 12``)."""
        problem = self.import_problem
        return f"{DOES_NOT_IMPORT}: {problem}" if problem else self.state

    @property
    def state(self) -> str:
        """``done``, ``in progress``, ``not started``, ``does not import`` or ``no tests``."""
        if self.error:
            return IN_PROGRESS
        if not self.tests:
            return NO_TESTS
        if self.import_problem:
            return DOES_NOT_IMPORT
        if self.passed == self.total:
            return DONE
        if all(test.not_implemented for test in self.tests):
            return NOT_STARTED
        return IN_PROGRESS

    @property
    def finished(self) -> bool:
        """True when every test passes (an exercise without tests counts as finished)."""
        return self.state in (DONE, NO_TESTS)

    @property
    def points_earned(self) -> float:
        """The exercise's points earned by its passing tests (the scoring rule's shares, in file order)."""
        return earned(self.exercise.points, [test.passed for test in self.tests])

    @property
    def first_failure(self) -> TestResult | None:
        """The first failing test in file order (the most basic broken property)."""
        if self.error:
            return TestResult(name="(collecting the tests)", exercise=self.exercise.name, passed=False,
                              message=self.error)
        return next((test for test in self.tests if not test.passed), None)


def _import_problem(message: str, module_file: str) -> str:
    """``syntax error, line 12`` (or ``... in other.py, line 12``) if ``message`` says a module did not import."""
    if match := _SYNTAX_ERROR.search(message):
        where = "" if match["file"] == module_file else f" in {match['file']}"
        return f"syntax error{where}, line {match['line']}"
    if match := _IMPORT_RAISED.search(message):
        if not match["line"]:
            return f"{match['type']} while importing"
        in_file = "" if match["file"] == module_file else f" of {match['file']}"
        return f"{match['type']} at line {match['line']}{in_file}"
    if match := _MISSING.search(message):
        return f"{match['name']}.py is missing"
    if match := _HUNG.search(message):  # a loop at the top of a module (tests/kit.py, _hung_message)
        of = "" if match["file"] == module_file else f" of {match['file']}"
        return f"import{of} did not finish (a loop?), line {match['line']}"
    return ""


@dataclass
class SuiteResult:
    """The graded suite's results for one implementation folder."""

    impl: Path
    exercises: list[ExerciseResult]
    seconds: float

    @property
    def passed(self) -> int:
        """Passing tests over all exercises run."""
        return sum(result.passed for result in self.exercises)

    @property
    def total(self) -> int:
        """Tests over all exercises run."""
        return sum(result.total for result in self.exercises)

    @property
    def points(self) -> float:
        """Points earned (each exercise's points in proportion to its passing tests)."""
        return sum(result.points_earned for result in self.exercises)

    @property
    def max_points(self) -> float:
        """Points available in the exercises run."""
        return sum(result.exercise.points for result in self.exercises)

    @property
    def current(self) -> ExerciseResult | None:
        """The first unfinished exercise in curriculum order, or None when all pass."""
        return next((result for result in self.exercises if not result.finished), None)

    def __getitem__(self, name: str) -> ExerciseResult:
        for result in self.exercises:
            if result.exercise.name == name:
                return result
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# Running the suite


def resolve_impl(value: str | Path) -> Path:
    """The implementation folder: as given, relative to the working directory, or to the kit.

    Raises
    ------
    ValueError
        If no such folder exists.
    """
    path = Path(value)
    for candidate in (path, ROOT / path):
        if candidate.is_dir():
            return candidate.resolve()
    from grader.curriculum import unknown_folder

    raise ValueError(unknown_folder(value, [Path.cwd(), ROOT]))


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it (shorter to read and type)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def forget_implementation(impl: Path) -> None:
    """Drop the imported modules of the folder ``impl``, so the next run reads its files again.

    ``watch`` and the tests run the suite many times in one process; without this a student's
    edit would be ignored because Python serves the module from ``sys.modules``. The package
    itself stays registered: a LocalImplementation made earlier keeps working and simply
    imports the modules afresh.
    """
    packages = [name for name, module in list(sys.modules.items()) if name.startswith(IMPL_PACKAGE_PREFIX)
                and "." not in name and [str(impl)] == list(getattr(module, "__path__", []))]
    for package in packages:
        for name in [name for name in sys.modules if name.startswith(package + ".")]:
            del sys.modules[name]
    importlib.invalidate_caches()


def failure_message(report: Any, impl: Path | None = None) -> str:
    """What a student reads of a failed (or skipped) test's report.

    Parameters
    ----------
    report : pytest.TestReport
        The report, as ``pytest_runtest_logreport`` receives it.
    impl : pathlib.Path, optional
        The implementation folder, to point at the student's own line when an exception escaped.

    Returns
    -------
    str
        The failures the graded suite recorded, rendered (the diagnosis or the function to fix
        first, then the failed checks' ``FAILURE: ...`` blocks, or what ended the test); for a
        report without them (an error in a fixture, a skip) :func:`trim_failure` of its text.
    """
    from tests.failures import failures_of, student_text

    found = failures_of(report)
    if found:
        return student_text(found)
    return trim_failure(report.longreprtext, impl, report.longrepr)


def trim_failure(text: str, impl: Path | None = None, longrepr: Any = None) -> str:
    """Keep the part of a failure report without recorded failures that a student needs.

    Parameters
    ----------
    text : str
        The report's full text (``report.longreprtext``).
    impl : pathlib.Path, optional
        The implementation folder, to point at the student's own line when an exception escaped.
    longrepr : object, optional
        The report's structured ``longrepr``, used for exceptions.

    Returns
    -------
    str
        For a ``pytest.fail`` or an import error its message; for an exception the exception line
        and where in the student's code it was raised.
    """
    lines = text.strip().splitlines()
    crash = getattr(longrepr, "reprcrash", None)
    if crash is None:  # pytest.fail(..., pytrace=False): the message is the whole report
        return re.sub(r"^Failed: ", "", "\n".join(lines).strip())
    message = re.sub(r"^Failed: ", "", crash.message.strip())
    place = _place_in_student_code(longrepr, impl)
    return f"{message}\n  raised at {place}" if place else message


def _place_in_student_code(longrepr: Any, impl: Path | None) -> str:
    """``softmax.py line 74: <source line>`` for the deepest traceback entry inside ``impl``."""
    if impl is None:
        return ""
    entries = getattr(getattr(longrepr, "reprtraceback", None), "reprentries", [])
    for entry in reversed(entries):
        location = getattr(entry, "reprfileloc", None)
        if location is None:
            continue
        path = Path(location.path)
        if not path.is_absolute():
            path = ROOT / path
        if path.resolve().parent == impl:
            source = ""
            with contextlib.suppress(OSError, IndexError):
                source = path.read_text(encoding="utf-8").splitlines()[location.lineno - 1].strip()
            return f"{path.name} line {location.lineno}" + (f": {source}" if source else "")
    return ""


class _Recorder:
    """A pytest plugin that keeps each test's outcome and failures (as data, and rendered)."""

    def __init__(self, impl: Path) -> None:
        self.impl = impl
        self.curriculum = load_curriculum()
        self.tests: dict[str, TestResult] = {}
        self.errors: dict[str, str] = {}

    def _exercise(self, path: str) -> str:
        exercise = self.curriculum.exercise_of_test_file(path)
        return exercise.name if exercise else ""

    def pytest_runtest_logreport(self, report: Any) -> None:
        from tests.failures import failures_of

        name = report.nodeid.split("::", 1)[-1]
        key = f"{report.location[0]}::{report.nodeid}"  # with its file: a course folder's ids lack it ("::test_x")
        test = self.tests.setdefault(key, TestResult(name, self._exercise(report.location[0]), True))
        if report.failed or report.skipped:  # a skip in a graded test is a failure to the student
            test.passed = False
            if not test.message:
                test.message = failure_message(report, self.impl) or report.outcome
                test.failures = tuple(failures_of(report))

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.errors[self._exercise(report.nodeid)] = trim_failure(report.longreprtext)


def run_suite(impl: str | Path = "exercises", exercises: Sequence[str] | None = None, *,
              cached: bool = False) -> SuiteResult:
    """Run the graded tests of ``exercises`` (default: all) against ``impl``, quietly.

    Parameters
    ----------
    impl : str or pathlib.Path
        The folder holding the student's modules.
    exercises : sequence of str, optional
        Names from the manifest; default every exercise, in curriculum order.
    cached : bool, optional
        Reuse the results of an earlier run while neither the folder nor the kit has changed since, and keep
        this run's for the next (``grader/student/results_cache.py``); only the exercises not kept are run.

    Returns
    -------
    SuiteResult
        Per exercise (in curriculum order) the outcome of every test, and the time taken.
    """
    import pytest

    start = time.perf_counter()
    curriculum = load_curriculum()
    impl = resolve_impl(impl)
    chosen = [curriculum.exercise(name) for name in (exercises or curriculum.selected_names())]
    chosen.sort(key=lambda exercise: exercise.number)
    key = results_cache.fingerprint(impl) if cached else ""
    kept = results_cache.read(impl, key) if cached else {}
    files = [str(ROOT / e.test_file) for e in chosen if (ROOT / e.test_file).is_file() and e.name not in kept]
    recorder = _Recorder(impl)
    if files:
        forget_implementation(impl)
        arguments = [
            *files, f"--impl={impl}", f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"),
            # No cache files in the student's folder; no unraisable-exception plugin, whose
            # five gc.collect() calls at exit would cost a tenth of a second or more.
            "-p", "no:cacheprovider", "-p", "no:unraisableexception",
            *(option for plugin in SUITE_PLUGINS for option in ("-p", plugin)),
        ]
        code, printed = run_pytest(arguments, recorder)
        if code == pytest.ExitCode.INTERRUPTED:  # pytest swallows Ctrl-C; the caller should see it
            raise KeyboardInterrupt
        if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            raise RuntimeError(f"the graded suite could not run (pytest exit {int(code)}):\n{printed}")
    results, ran = [], {}
    for exercise in chosen:
        if exercise.name in kept:
            results.append(_from_kept(exercise, kept[exercise.name]))
            continue
        tests = [test for test in recorder.tests.values() if test.exercise == exercise.name]
        results.append(ExerciseResult(exercise, tests, recorder.errors.get(exercise.name, "")))
        ran[exercise.name] = {"tests": [{**vars(test), "failures": [f.as_dict() for f in test.failures]}
                                        for test in tests], "error": results[-1].error}
    if cached and ran and results_cache.fingerprint(impl) == key:  # not if a file changed during the run
        results_cache.write(impl, key, ran)
    return SuiteResult(impl, results, time.perf_counter() - start)


def _from_kept(exercise: Exercise, kept: dict[str, Any]) -> ExerciseResult:
    """An exercise's results as ``results_cache`` kept them (plain data)."""
    from tests.failures import Failure

    tests = [TestResult(**{**test, "failures": tuple(map(Failure.from_dict, test["failures"]))})
             for test in kept["tests"]]
    return ExerciseResult(exercise, tests, kept["error"])


# ---------------------------------------------------------------------------------------------
# Showing it


def run_command(exercise: Exercise, impl: Path) -> str:
    """The command that runs just ``exercise``'s tests against ``impl``."""
    if INSTALLED:  # no checkout to run pytest in: the kit names its own suite
        shown = "" if impl == (ROOT / load_curriculum().impl_package).resolve() else f" --impl {display_path(impl)}"
        return f"attention-kit test -m {exercise.name}{shown}"
    if impl == (ROOT / load_curriculum().impl_package).resolve():
        return f"pytest -m {exercise.name}"
    # `tests` before --impl: a bare `pytest --impl /abs/path` makes pytest guess the wrong rootdir.
    return f"pytest tests -m {exercise.name} --impl {display_path(impl)}"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def _bar(fraction: float, width: int = 30) -> str:
    filled = round(fraction * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _next_steps(result: SuiteResult) -> list[str]:
    """The lines about the first unfinished exercise (or the congratulations)."""
    current = result.current
    if current is None:
        return ["All exercises pass. Try `attention-kit demo` to see your attention at work."]
    exercise = current.exercise
    failure = current.first_failure
    lines = [f"Next: exercise {exercise.number}, {exercise.name} ({exercise.title})"]
    if failure is not None:
        lines += [f"  first failing test: {failure.name}", _indent(failure.message)]
    lines += [
        f"  edit:  {display_path(result.impl / exercise.module_file)}",
        f"  run:   {run_command(exercise, result.impl)}    (tests: {exercise.test_file})",
        f"  stuck? attention-kit hint {exercise.name}",
    ]
    return lines


def _hidden_note(result: SuiteResult) -> list[str]:
    """The line that says the instructor's total is larger than the public tests' (hidden tests)."""
    hidden = sum(item.exercise.hidden_points for item in result.exercises)
    if not hidden:
        return []
    return [f"          (public tests; the instructor's grade adds hidden tests worth {scoring.number(hidden)} more "
            f"points, out of {scoring.number(result.max_points + hidden)})"]


GIVEN_LABEL = "given: working code to read, not yours to write"


def given_rows(result: SuiteResult) -> list[Exercise]:
    """The exercises this course gives (``Curriculum.given_names``) that ``result`` does not hold, in order.

    A release ships them as working code with their public tests; the status lists them as given, without
    running their tests again: done, or waiting on the student's exercises they call (:func:`waits_on`).
    """
    curriculum = load_curriculum()
    shown = {item.exercise.name for item in result.exercises}
    return [curriculum.exercise(name) for name in curriculum.given_names() if name not in shown]


def waits_on(exercise: Exercise, result: SuiteResult) -> list[Exercise]:
    """The student's exercises of ``result`` that the given ``exercise`` builds on and that do not pass yet.

    In a mix whose given code calls assigned exercises (Parts I and III: backward calls your multihead), the
    given tests fail until those pass: the status must not call it done meanwhile.
    """
    builds_on = set(load_curriculum().dependencies(exercise.name))
    return [item.exercise for item in result.exercises if item.exercise.name in builds_on and item.state != DONE]


def given_text(exercise: Exercise, result: SuiteResult) -> str:
    """The status's label for a given exercise, with what of the student's its tests wait on (if anything)."""
    pending = waits_on(exercise, result)
    if not pending:
        return GIVEN_LABEL
    numbers = ", ".join(str(item.number) for item in pending)
    plural = "s" if len(pending) > 1 else ""
    return f"{GIVEN_LABEL}; its tests pass once your exercise{plural} {numbers} do{'' if plural else 'es'}"


def render_plain(result: SuiteResult) -> str:
    """The status as plain text (no colour), as printed to a file or pipe."""
    curriculum = load_curriculum()
    given = given_rows(result)
    everyone = [r.exercise for r in result.exercises] + given
    width = max(len(e.name) for e in everyone)
    digits = max(len(str(e.number)) for e in everyone)  # 1. ... 11. in one column
    lines = [f"{curriculum.title}: {display_path(result.impl)}", ""]
    rows = []
    for item in result.exercises:
        counts = f"{item.passed:>3}/{item.total:<3}"
        rows.append((item.exercise, f"{counts} {item.label}"))
    rows += [(exercise, f"{'' if waits_on(exercise, result) else 'done':>7} {given_text(exercise, result)}")
             for exercise in given]
    for exercise, text in sorted(rows, key=lambda row: row[0].number):
        number = f"{exercise.number}."
        lines.append(f"  {number:>{digits + 1}} {exercise.name:<{width}}  {text}")
    fraction = result.passed / result.total if result.total else 0.0
    lines += [
        "",
        f"Progress: {_bar(fraction)} {result.passed}/{result.total} tests, "
        f"{scoring.number(result.points)}/{scoring.number(result.max_points)} points",
        *_hidden_note(result),
        "",
        *_next_steps(result),
    ]
    return "\n".join(lines)


STATE_STYLE = {DONE: "green", IN_PROGRESS: "yellow", NOT_STARTED: "dim", NO_TESTS: "dim", DOES_NOT_IMPORT: "red"}
STATE_MARK = {DONE: "✓", IN_PROGRESS: "…", NOT_STARTED: "·", NO_TESTS: " ", DOES_NOT_IMPORT: "✗"}


def render_rich(result: SuiteResult, console: Any) -> None:
    """Print the status with colour and progress bars on a rich ``Console``."""
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    curriculum = load_curriculum()
    console.print(Text.assemble((curriculum.title, "bold"), f": {display_path(result.impl)}"))
    console.print()
    table = Table(show_header=False, box=None, padding=(0, 1))
    current = result.current
    rows = [(exercise.number, (Text(STATE_MARK[NOT_STARTED if waits_on(exercise, result) else DONE], style="cyan"),
                               f"{exercise.number}.", exercise.name, "", "",
                               Text(given_text(exercise, result), style="cyan"))) for exercise in given_rows(result)]
    for item in result.exercises:
        style = STATE_STYLE[item.state]
        name_style = "bold" if item is current else ""
        rows.append((item.exercise.number, (
            Text(STATE_MARK[item.state], style=style),
            f"{item.exercise.number}.",
            Text(item.exercise.name, style=name_style),
            f"{item.passed:>3}/{item.total:<3}",
            ProgressBar(total=max(item.total, 1), completed=item.passed, width=16,
                        complete_style=style, finished_style="green"),
            Text(item.label, style=style),
        )))
    for _, row in sorted(rows, key=lambda numbered: numbered[0]):
        table.add_row(*row)
    console.print(table)
    overall = Table.grid(padding=(0, 1))
    overall.add_row(
        Text("Progress", style="bold"),
        ProgressBar(total=max(result.total, 1), completed=result.passed, width=30, complete_style="yellow",
                    finished_style="green"),
        f"{result.passed}/{result.total} tests, "
        f"{scoring.number(result.points)}/{scoring.number(result.max_points)} points",
    )
    console.print()
    console.print(overall)
    for line in _hidden_note(result):
        console.print(Text(line.strip(), style="dim"), highlight=False)
    console.print()
    for index, line in enumerate(_next_steps(result)):
        console.print(Text(line, style="bold" if index == 0 else ""), highlight=False)


def use_rich(stream: TextIO) -> bool:
    """Colour only on a terminal, with rich installed, and not when NO_COLOR is set."""
    if os.environ.get("NO_COLOR") or not getattr(stream, "isatty", lambda: False)():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def show(result: SuiteResult, stream: TextIO | None = None) -> None:
    """Print the status to ``stream`` (default stdout), in colour when it is a terminal."""
    stream = stream or sys.stdout
    if use_rich(stream):
        from rich.console import Console

        render_rich(result, Console(file=stream))
    else:
        print(render_plain(result), file=stream)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attention-kit status``."""
    parser.add_argument("--impl", default="exercises", metavar="DIR",
                        help="folder holding your modules (default: exercises)")
    parser.add_argument("--rerun", action="store_true",
                        help="run every test again, even if nothing changed since the last status")


def run(args: argparse.Namespace) -> int:
    """Run the suite (or reuse its last results on an unchanged tree) and print the status; 0 unless it could not."""
    try:
        result = run_suite(args.impl, cached=not getattr(args, "rerun", False))
    except (ValueError, RuntimeError) as error:
        print(f"attention-kit status: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    show(result)
    if INSTALLED and result.impl.is_relative_to(ROOT.resolve()):
        print(f"\nnote: no {args.impl}/ folder here, so this is the installed kit's own copy of the stubs. "
              "Run `attention-kit status` in the folder that holds your exercises/, or give --impl DIR.",
              file=sys.stderr)
    return 0


def failing_exercises(result: SuiteResult, names: Iterable[str]) -> list[str]:
    """Those of ``names`` whose tests do not all pass (or that have no tests)."""
    return [name for name in names if result[name].state != DONE]
