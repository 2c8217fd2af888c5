"""``attention-kit grade``: grade a folder of submissions (instructors).

::

    attention-kit grade SUBMISSIONS --out OUT [--jobs N] [--force] [--no-fair] [--hidden DIR]
    attention-kit grade                 # grades bundled sample submissions

The parts: ``grader.grading.submissions`` finds and statically checks each
submission; long-lived grading processes run the graded pytest suite against
it, in process, with a recording plugin (a pytest session configured and
collected once per process and rerun for each student, see ``_Session``);
the student's code itself runs behind ``grader.sandbox.proxy.IsolatedImplementation``
(see ``make_implementation``), never in the process that checks the results; ``grader.grading.report`` scores the
outcomes and writes ``OUT/<student>/results.json`` (Gradescope format),
``OUT/<student>/feedback.md`` and, at the end, ``OUT/grades.csv``.

Resuming: a student's results carry a fingerprint of the submission's
content, the kit version, the tests, the reference and the options. A rerun
skips every student whose fingerprint is unchanged and whose results are
complete; ``--force`` regrades everyone. The gradebook is always rebuilt from
the per-student results, so a run killed halfway and rerun gives the same
``grades.csv`` as an uninterrupted one.

Hidden tests: every ``test_*.py`` in ``--hidden DIR`` (default
``grader/hidden_tests`` if it exists) runs after the visible tests of its
exercise. A hidden file says which exercise it belongs to with a module-level
``EXERCISE = "masks"`` (or by naming an exercise in its file name, e.g.
``test_hidden_masks.py``). Its tests share the exercise's ``hidden_points``
from the manifest, on top of the exercise's points; a file may set its own
with ``POINTS = 5``. With neither, they share the exercise's manifest points
with its visible tests.

Trust: every entry of SUBMISSIONS is one row, whatever it is, and the
gradebook is always written. Student code runs only where it can be isolated
(``grader.sandbox.limits.choose``): without namespaces the grader refuses,
unless ``--accept-no-isolation`` (then every output says so) or
``--container`` (the Gradescope runner). When the grader itself fails (the
worker does not start, pytest stops, ...), the affected tests get no score,
the row says ``not graded: <reason>``, the command exits 1 and a rerun grades
those students again. Failures of hidden tests reach students as their name
and message only; no source line of the hidden tests or of ``solutions/``
appears in anything a student receives (:func:`_Secrets`).

This module imports only the standard library at the top (``cli.py``
imports it to build ``--help``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import io
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from grader import course
from grader.curriculum import PACKAGE, ROOT, make_importable, reference_dir
from grader.suite import graded_suite, hidden_folders

DEFAULT_OUT = "attention-kit-grades"
# Seconds of student code for one submission's whole run (the proxy's per-submission budget).
STUDENT_BUDGET = 60.0
# Wall-clock backstop for one student's grading process, far above the budget: reaching it is the grader's
# failure (not graded), never the student's zero.
STUDENT_TIMEOUT = 300.0
UNUSED_PLUGINS = ("cacheprovider", "unraisableexception", "threadexception", "logging", "faulthandler",
                  "pastebin", "junitxml", "doctest", "nose", "stepwise", "legacypath",
                  # Per-test hooks a grading run does not need (the tests catch their own warnings).
                  "unittest", "subtests", "setuponly", "setupplan", "warnings")
# The only third-party plugin the graded suite uses. Nothing else is auto-loaded from entry points: whatever
# else happens to be installed (hypothesis, anyio, pytest-benchmark, ...) would add hooks to every test.
SUITE_PLUGINS = ("pytest_check.plugin", "tests.plugin")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit grade``."""
    parser.add_argument(
        "submissions", nargs="?", metavar="SUBMISSIONS", type=Path,
        help="folder of submissions (one folder or .zip per student); omit it to grade bundled samples",
    )
    parser.add_argument("--out", type=Path, default=Path(DEFAULT_OUT),
                        help=f"output folder (default: ./{DEFAULT_OUT})")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="grading processes (default: the number of CPU cores)")
    parser.add_argument("--force", action="store_true", help="regrade students whose results are up to date")
    parser.add_argument("--no-fair", dest="fair", action="store_false",
                        help="test each exercise on the student's own earlier exercises, not the reference")
    parser.add_argument("--hidden", type=Path, default=None, metavar="DIR",
                        help="folder of hidden (instructor-only) test files (default: the kit's hidden tests of "
                             "your checkout or course folder, and the course folder's own hidden_tests/)")
    parser.add_argument("--exercise", dest="exercises", action="append", default=None, metavar="NAME",
                        help="grade only this exercise (repeat for several; default: all)")
    budget = course.limits().submission_seconds or STUDENT_BUDGET  # the course's [limits] submission_seconds
    parser.add_argument("--budget", type=float, default=budget, metavar="SECONDS",
                        help="seconds of student code per submission; past it the remaining tests fail "
                             f"(default: {budget:g}, the course's [limits] submission_seconds)")
    parser.add_argument("--roster", type=Path, default=None, metavar="CSV",
                        help="roster (folder, lms_id, name, email) for OUT/canvas.csv; see `attention-kit export`")
    parser.add_argument("--timeout", type=float, default=STUDENT_TIMEOUT, metavar="SECONDS",
                        help="wall-clock backstop for one student's grading process; reaching it leaves the "
                             f"student not graded (default: {STUDENT_TIMEOUT:g})")
    parser.add_argument("--accept-no-isolation", dest="isolation", action="store_const", const="none",
                        default="require",
                        help="grade even where student code cannot be isolated (no bubblewrap, no user namespaces): "
                             "student code can then read and write what you can; every output says so")
    parser.add_argument("--container", dest="isolation", action="store_const", const="container",
                        help="this machine is a throw-away container holding one submission (the Gradescope runner): "
                             "without namespaces, the container is the isolation")


# ---------------------------------------------------------------- implementation seam


def make_implementation(path: Path, fair: bool, policy: str = "require", budget: float = STUDENT_BUDGET) -> Any:
    """The implementation that runs a student's code: an isolated worker process (``grader.sandbox.proxy``).

    The one seam between grading and running student code. The grading
    process only checks results; the student's modules never load in it.
    """
    from grader.sandbox.proxy import IsolatedImplementation

    return IsolatedImplementation.warm(path, **_implementation_options(fair, policy, budget))


def _implementation_options(fair: bool, policy: str, budget: float) -> dict[str, Any]:
    from grader.sandbox.proxy import Limits

    return {"fair": fair, "reference": reference_dir() or ROOT / "solutions", "policy": policy,
            "limits": Limits(student_seconds=budget)}


def _keep_spare(job: dict[str, Any]) -> None:
    """Start the next student's worker now (a grading process mostly grades students with the same options)."""
    if os.environ.get("ATTENTION_KIT_NO_SPARE"):
        return
    from grader.sandbox.proxy import IsolatedImplementation

    with contextlib.suppress(Exception):  # without a spare the next student's worker starts as usual
        IsolatedImplementation.keep_spare(**_implementation_options(
            job["fair"], job.get("policy", "require"), job.get("budget", STUDENT_BUDGET)))


def kit_version() -> str:
    """The kit's version from pyproject.toml."""
    with contextlib.suppress(OSError, KeyError, tomllib.TOMLDecodeError):
        return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version("attention-kit")
    return "unknown"


def suite_fingerprint(suite: list[Any], fair: bool) -> str:
    """A hash of everything besides the submission that decides a grade."""
    from grader.grading.report import RESULTS_FORMAT

    digest = hashlib.sha256(f"{kit_version()}|{RESULTS_FORMAT}|fair={fair}".encode())
    # The selection itself (--exercise, --hidden) and the points, not only the files' contents.
    digest.update(repr([(f.path, f.exercise, f.points, f.hidden) for f in suite]).encode())
    files = {Path(f.path) for f in suite}
    files |= set((ROOT / "tests").glob("*.py")) | set((ROOT / "tests" / "data").glob("*"))
    files |= set((reference_dir() or ROOT / "solutions").glob("*.py"))
    digest.update(course.settings().encode())  # the course folder's settings (limits, visibility, Canvas, ...)
    files |= {PACKAGE / "curriculum.toml", PACKAGE / "grading" / "report.py",
              PACKAGE / "sandbox" / "proxy.py", PACKAGE / "sandbox" / "worker.py"}
    for path in sorted(files):
        if path.is_file():
            for base in (ROOT, PACKAGE.parent):  # names relative to the kit, wherever it is installed
                if path.is_relative_to(base):
                    path_name = path.relative_to(base).as_posix()
                    break
            else:
                path_name = str(path)
            digest.update(path_name.encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# ---------------------------------------------------------------- inside a grading process


def _recorder(job: dict[str, Any]) -> Any:
    """A pytest plugin that serves the implementation and records every test's outcome."""
    import pytest

    from tests.plugin import EXERCISE

    hidden = {f["path"]: f["exercise"] for f in job["suite"] if f["hidden"]}
    secrets = _Secrets.of(tuple(sorted(hidden)))

    class Recorder:
        def __init__(self) -> None:
            self.job = job
            self.implementation: Any = None
            self.started: Any = None
            self.order: list[tuple[str, str, str]] = []
            self.records: dict[str, dict[str, Any]] = {}
            self.errors: list[str] = []
            self.internal_before: dict[str, int] = {}
            self.hidden_nodes: set[str] = set()
            self.environment: dict[str, str] = {}
            self.exceptions: dict[str, str] = {}  # per test: the type of the exception that ended it
            self.collected_at = self.finished_at = 0.0

        def factory(self, path: Path) -> Any:
            started, self.started = self.started, None
            if started is not None and Path(path).resolve() == started.path:
                return started  # its worker has been starting up while pytest collected the tests
            if started is not None:
                with contextlib.suppress(Exception):
                    started.close()
            self.implementation = self.implementation_of(path)
            return self.implementation

        def implementation_of(self, path: Path) -> Any:
            return make_implementation(path, self.job["fair"], self.job.get("policy", "require"),
                                       self.job.get("budget", STUDENT_BUDGET))

        def reset(self, next_job: dict[str, Any], items: list[Any]) -> None:
            """Record the next student (a session that is reused): fresh state, the tests of ``items`` only."""
            self.job = next_job
            self.implementation = self.started = None
            self.records, self.internal_before, self.environment, self.exceptions = {}, {}, {}, {}
            self.order = [(item.nodeid, str(item.path), item.stash.get(EXERCISE, "")) for item in items]
            self.collected_at = time.monotonic()
            self.finished_at = 0.0

        def start(self) -> None:
            """Start the student's worker now, so that its start-up overlaps pytest's own."""
            with contextlib.suppress(Exception):  # if it cannot start, the fixture reports why, as without this
                self.implementation = self.started = self.implementation_of(Path(self.job["folder"]))
            _keep_spare(self.job)  # the next student's worker starts up while this one is graded

        def internal_count(self) -> int:
            return len(getattr(self.implementation, "internal", None) or [])

        def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
            self.internal_before[nodeid] = self.internal_count()

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> None:
            # Reads the call only (never the report), so it runs before the report is made and returns None,
            # letting pytest make it: a plain hook, cheaper for pluggy than a wrapper around it.
            value = call.excinfo.value if call.excinfo is not None else None
            if value is not None and call.when in ("setup", "call"):
                self.exceptions.setdefault(item.nodeid, type(value).__name__)  # the kit's check tells them apart
            # An import or file error raised by the test itself (a missing data file, a broken install), never by
            # the student's code (their exceptions are rebuilt and marked): the grader's failure, not a zero.
            if (call.when == "call" and isinstance(value, (ImportError, OSError))
                    and not isinstance(value, TimeoutError)  # the proxy's: a student's call ran out of time
                    and not getattr(value, "attention_kit_student", False)):
                self.environment[item.nodeid] = f"the test failed on the grader's side ({type(value).__name__}: " \
                                                f"{str(value)[:200]})"

        def pytest_configure(self, config: pytest.Config) -> None:
            config.attention_kit_implementation = self.factory

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
            # Hidden files are not in the manifest: tag them with their exercise before the kit sorts.
            for item in items:
                exercise = hidden.get(str(item.path))
                if exercise is not None:
                    item.stash[EXERCISE] = exercise
                    item.add_marker(getattr(pytest.mark, exercise))

        def pytest_sessionfinish(self, session: pytest.Session) -> None:
            self.finished_at = time.monotonic()

        def pytest_collection_finish(self, session: pytest.Session) -> None:
            self.collected_at = time.monotonic()
            self.order = [(item.nodeid, str(item.path), item.stash.get(EXERCISE, "")) for item in session.items]
            self.hidden_nodes = {item.nodeid for item in session.items if str(item.path) in hidden}

        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            if report.failed:
                self.errors.append(f"collecting {report.nodeid} failed: {report.longreprtext[-800:]}")

        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            record = self.records.setdefault(report.nodeid, {"outcome": "passed", "message": "", "output": "",
                                                             "duration": 0.0})
            record["duration"] += report.duration
            if report.nodeid in self.exceptions:
                record["exception"] = self.exceptions[report.nodeid]
            internal = getattr(self.implementation, "internal", None) or []
            if len(internal) > self.internal_before.get(report.nodeid, 0) and not record.get("internal"):
                record["internal"] = str(internal[-1])  # the grader failed during this test: no score for it
            if report.nodeid in self.environment and not record.get("internal"):
                record["internal"] = self.environment[report.nodeid]
            if not (report.failed or (report.when == "call" and report.skipped)):
                return
            rendered = report.longreprtext  # rendered once (each read of it renders the report again)
            if report.failed and report.when == "setup" and not record.get("internal"):
                # No student code runs while a test is set up: a failure there is the grader's.
                lines = rendered.strip().splitlines()
                record["internal"] = "the test could not be set up: " + (lines[-1] if lines else "no reason")[:300]
            if record["outcome"] == "passed":
                record["phase"] = report.when
            record["outcome"] = "failed"
            if report.nodeid in self.hidden_nodes:
                text = _hidden_failure(report, rendered)  # name and message only: no line of the hidden test
            else:
                text = rendered if report.failed else f"skipped: {rendered}"
                record["output"] = (record["output"] + report.capstdout).strip()
            record["message"] = (record["message"] + "\n" + secrets.scrub(text)).strip()

        def results(self) -> list[dict[str, Any]]:
            records = []
            for nodeid, path, exercise in self.order:
                record = self.records.get(nodeid, {"outcome": "failed", "message": "did not run", "output": "",
                                                   "duration": 0.0})
                record["message"] = _clean_failure(record["message"], self.job["folder"])
                records.append({"nodeid": nodeid, "file": path, "exercise": exercise, **record})
            return records

    return Recorder()


def _hidden_failure(report: Any, rendered: str | None = None) -> str:
    """A hidden test's failure as a student may see it: the checks' messages, or the exception's type and message.

    Never a traceback or a source line of the test: pytest's assertion
    rewriting puts the asserted expression into the message, so an assertion
    keeps only its own message. ``rendered``: ``report.longreprtext``, if already rendered.
    """
    text = (report.longreprtext if rendered is None else rendered) or ""
    lines = text.splitlines()
    if any(line.startswith("FAILURE: ") for line in lines):  # pytest-check: messages the test wrote for students
        start = next(i for i, line in enumerate(lines) if line.startswith("FAILURE: ") or "::" in line)
        return "\n".join(lines[start:]).strip()
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = str(getattr(crash, "message", "") or (lines[-1] if lines else "failed"))
    kind, _, rest = message.partition(": ")
    if kind == "AssertionError" or message.startswith(("assert ", "AssertionError")):
        own = rest.split("\nassert ")[0].strip() if rest and not rest.startswith("assert ") else ""
        return f"AssertionError: {own}" if own else "AssertionError: a check of this hidden test failed"
    if kind == "Failed" or message.startswith("Failed:"):
        return message.replace("Failed: ", "", 1)
    return message


class _Secrets:
    """The source lines of ``solutions/`` and of the hidden tests, so that none reaches a student.

    ``scrub`` replaces any line of a failure text that shows one of them
    (a traceback's source line, an assertion's expression). Lines that are
    also in the public files (the visible tests, the stubs) are no secret.
    """

    _made: dict[tuple[str, ...], _Secrets] = {}

    def __init__(self, hidden_files: tuple[str, ...]) -> None:
        def lines(paths: Any) -> set[str]:
            found: set[str] = set()
            for path in paths:
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    found |= {line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()}
            return found

        import numpy

        secret = lines([*(reference_dir() or ROOT / "solutions").glob("*.py"), *hidden_files])
        public = lines([*(ROOT / "tests").rglob("*.py"), *(ROOT / "exercises").glob("*.py")])
        # numpy's own source (a traceback through numpy shows its lines) is public: never scrubbed.
        numpy_dir = Path(numpy.__file__).parent
        public |= lines(p for p in numpy_dir.rglob("*.py") if "tests" not in p.relative_to(numpy_dir).parts)
        self.lines = {line for line in secret - public if len(line) >= 8}
        self._seen: dict[str, bool] = {}

    @classmethod
    def of(cls, hidden_files: tuple[str, ...]) -> _Secrets:
        if hidden_files not in cls._made:
            cls._made[hidden_files] = cls(hidden_files)
        return cls._made[hidden_files]

    def scrub(self, text: str) -> str:
        if not self.lines:
            return text
        return "\n".join("    [a line of the grader's hidden code]" if self.shows_secret(line) else line
                         for line in text.splitlines())

    def shows_secret(self, line: str) -> bool:
        """Whether ``line`` shows a secret line (is one, or holds a long one).

        Remembered per line: a grading process scrubs the same lines (the tests' own messages, a
        diagnosis) for student after student.
        """
        known = self._seen.get(line)
        if known is None:
            bare = line.strip().removeprefix(">").removeprefix("E").strip()
            known = bare in self.lines or line.strip() in self.lines or self._holds_long_line(line)
            if len(self._seen) >= 50_000:
                self._seen.clear()
            self._seen[line] = known
        return known

    LONG = 24  # a secret line this long is recognised inside another line

    def long_lines(self) -> list[str]:
        """The secret lines long enough to be recognised inside another line (a quoted line, a message)."""
        if not hasattr(self, "_long"):
            self._long = [line for line in self.lines if len(line) >= self.LONG and not line.startswith(("#", '"""'))]
        return self._long

    def _holds_long_line(self, line: str) -> bool:
        """``any(secret in line for secret in self.long_lines())``, looking up only the secrets that could be there.

        A long line inside ``line`` starts at some position with its first ``LONG`` characters: the
        secrets are indexed by those, and only the candidates found at a position are searched for.
        """
        if not hasattr(self, "_by_start"):
            self._by_start: dict[str, list[str]] = {}
            for secret in self.long_lines():
                self._by_start.setdefault(secret[:self.LONG], []).append(secret)
        starts, width = self._by_start, self.LONG
        for at in range(len(line) - width + 1):
            candidates = starts.get(line[at:at + width])
            if candidates is not None and any(secret in line for secret in candidates):
                return True
        return False


def _clean_failure(text: str, folder: str) -> str:
    """A failure text as a student should read it: their file names, no grader paths or trailers."""
    text = text.replace(folder.rstrip("/") + "/", "").replace(str(ROOT) + "/", "")
    # pytest-check closes its report with a rule and a count; the messages above say it all.
    text = re.sub(r"\n-{20,}\nFailed Checks: \d+\s*$", "", text)
    return text.strip()


def _memoize_statement_ranges() -> None:
    """Make pytest find a traceback line's statement without re-parsing the whole test file each time.

    For every traceback entry of every failure, pytest parses the entry's file
    and walks its whole syntax tree to find where the statement starts and
    ends (``_pytest._code.source.getstatementrange_ast``): ~10 ms per failure,
    which adds up when a grading process formats thousands of failures. The
    answer depends only on the file's text and the line, so it is remembered.
    A private pytest function: if it is not there (another pytest), nothing changes.
    """
    try:
        from _pytest._code import code
    except ImportError:
        return
    original = getattr(code, "getstatementrange_ast", None)
    if original is None or getattr(original, "memoized_by_attention_kit", False):
        return
    answers: dict[tuple[str, int, bool], Any] = {}

    def getstatementrange_ast(lineno: int, source: Any, assertion: bool = False, astnode: Any = None) -> Any:
        key = (str(source), lineno, assertion)
        if key not in answers:
            if len(answers) > 5000:
                answers.clear()
            answers[key] = original(lineno, source, assertion=assertion, astnode=astnode)
        return answers[key]

    getstatementrange_ast.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    code.getstatementrange_ast = getstatementrange_ast


def _memoize_request_fixture() -> None:
    """Make pytest's ``request`` fixture stop inspecting the same lambda's signature again and again.

    Each test that asks for ``request`` (the suite's ``impl`` fixture does) gets a fresh
    ``RequestFixtureDef`` three or four times per setup, and each one finds the arguments of its
    ``lambda: request`` with ``inspect.signature`` (~0.1 ms per test, the largest part of fixture
    setup). That lambda never takes any: the answer is remembered (``_pytest.compat.getfuncargnames``,
    as imported by ``_pytest.fixtures``, for that lambda only). Private pytest names: if they are not
    there (another pytest), nothing changes.
    """
    import types

    try:
        from _pytest import fixtures
    except ImportError:
        return
    original = getattr(fixtures, "getfuncargnames", None)
    definition = getattr(fixtures, "RequestFixtureDef", None)
    if original is None or definition is None or getattr(original, "memoized_by_attention_kit", False):
        return
    lambdas = [const for const in getattr(getattr(definition.__init__, "__code__", None), "co_consts", ())
               if isinstance(const, types.CodeType)]
    if len(lambdas) != 1:
        return
    (request_lambda,) = lambdas
    answers: dict[tuple, tuple[str, ...]] = {}

    def getfuncargnames(function: Any, *args: Any, **kwargs: Any) -> tuple[str, ...]:
        if args or getattr(function, "__code__", None) is not request_lambda:
            return original(function, *args, **kwargs)
        key = tuple(sorted(kwargs.items()))
        if key not in answers:
            answers[key] = original(function, **kwargs)
        return answers[key]

    getfuncargnames.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    fixtures.getfuncargnames = getfuncargnames


def _memoize_code_paths() -> None:
    """Make pytest find the file of a traceback entry's code without a new path and a ``stat`` each time.

    For every failure, pytest cuts its traceback down to the test function
    (``_pytest.python.Function._traceback_filter``), asking every entry from
    its own runner's frames on for its code's file (``Code.path``: an absolute
    ``Path`` and an ``exists()`` check), about twenty per failure. The answer
    depends only on the file name (and, for a relative one, the working
    directory), so it is remembered per name. A private pytest property: if it
    is not there (another pytest), nothing changes.
    """
    try:
        from _pytest._code import code
    except ImportError:
        return
    prop = getattr(getattr(code, "Code", None), "path", None)
    if not isinstance(prop, property) or prop.fget is None or getattr(prop.fget, "memoized_by_attention_kit", False):
        return
    original = prop.fget
    answers: dict[tuple[str, str], Any] = {}

    def path(self: Any) -> Any:
        filename = getattr(self.raw, "co_filename", None)
        if not isinstance(filename, str):
            return original(self)
        key = (filename, "" if os.path.isabs(filename) else os.getcwd())
        if key not in answers:
            if len(answers) > 5000:
                answers.clear()
            answers[key] = original(self)
        return answers[key]

    path.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    code.Code.path = property(path, doc=prop.__doc__)  # type: ignore[method-assign]


def _pytest_arguments(files: list[str], folder: str) -> list[str]:
    return [
        *files, f"--impl={folder}", f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"),
        "-q", "--tb=short", "--no-header", *(f"-p{name}" for name in SUITE_PLUGINS),
        # The tests print in this process only (student code prints in the worker): sys-level capture is enough,
        # and spares the file-descriptor juggling of the default --capture=fd in every phase of every test.
        "--capture=sys",
        # Plugins a grading run does not use. unraisableexception alone costs ~0.3 s per run
        # (it calls gc.collect five times at exit), which matters when pytest runs once per student.
        *(f"-pno:{name}" for name in UNUSED_PLUGINS),
    ]


def _remember_hook_proxies(session: Any) -> None:
    """Make a collected session answer ``item.ihook`` from memory.

    ``item.ihook`` asks the session which conftest files apply to the item's
    path (``Session.gethookproxy``), about ten times per test. Once the suite is
    collected, no conftest comes or goes: the answer per path is remembered.
    """
    original = session.gethookproxy
    proxies: dict[Any, Any] = {}

    def gethookproxy(fspath: Any) -> Any:
        proxy = proxies.get(fspath)
        if proxy is None:
            proxy = proxies[fspath] = original(fspath)
        return proxy

    session.gethookproxy = gethookproxy


# The terminal reporter's hooks that run for every phase of every test: they only print progress (a letter per
# test) and keep statistics for the summary, neither of which a reused session has.
PER_TEST_REPORTING = ("pytest_runtest_logstart", "pytest_runtest_logreport", "pytest_runtest_logfinish")


def _quiet_per_test_reporting(config: Any) -> None:
    """Take the terminal reporter's per-test hooks out of a reused session.

    A reused session never prints its progress or a summary (what it prints goes into a buffer that
    nothing reads: ``_Session.run`` decides the exit code from the recorder). The reporter stays
    registered for everything else (``config.get_terminal_writer()``, which pytest's assertion
    messages use, its warnings and its end of session); only the hooks of ``PER_TEST_REPORTING``
    are left out, by registering it again without them.
    """
    manager = config.pluginmanager
    reporter = manager.get_plugin("terminalreporter")
    if reporter is None:
        return
    manager.unregister(reporter)
    for name in PER_TEST_REPORTING:
        setattr(reporter, name, None)  # an attribute that is no function is no hook
    manager.register(reporter, "terminalreporter")


class _Session:
    """One pytest session per grading process and suite, collected once and run again for every student.

    Configuring pytest and collecting the suite cost about a fifth of a
    student's grading; they depend only on the suite, never on the student.
    Each student's run goes through the same per-test protocol as
    ``pytest.main`` (``pytest_runtest_protocol``, fixtures set up and torn
    down, the session-scoped implementation included), with the recorder,
    the ``--impl`` folder and the suite plugin's per-run state reset first. Anything
    unexpected while building it falls back to ``pytest.main`` per student;
    an error while running drops it (the next student gets a fresh one).
    Set ``ATTENTION_KIT_FRESH_PYTEST=1`` to always use ``pytest.main``.
    """

    _made: dict[str, _Session] = {}

    def __init__(self, job: dict[str, Any]) -> None:
        from _pytest.config import _prepareconfig
        from _pytest.main import Session

        from grader.quiet import _no_plugin_autoload

        self.recorder = _recorder(job)
        self.sink = io.StringIO()
        files = [f["path"] for f in job["suite"]]
        with _no_plugin_autoload(), contextlib.redirect_stdout(self.sink), contextlib.redirect_stderr(self.sink):
            config = _prepareconfig(_pytest_arguments(files, job["folder"]), plugins=[self.recorder])
            config._do_configure()
            session = Session.from_config(config)
            session.exitstatus = 0
            config.hook.pytest_sessionstart(session=session)
            config.hook.pytest_collection(session=session)
        self.config, self.session, self.items = config, session, list(session.items)
        _remember_hook_proxies(session)
        _quiet_per_test_reporting(config)
        # The hidden tests' modules, to forget with the session (the public ones register their probes once).
        self.hidden_files = {str(Path(f["path"]).resolve()) for f in job["suite"] if f.get("hidden")}

    @classmethod
    def of(cls, job: dict[str, Any]) -> _Session | None:
        if os.environ.get("ATTENTION_KIT_FRESH_PYTEST"):
            return None
        key = repr(job["suite"])
        if key not in cls._made:
            cls.drop()  # another suite (another batch in this process): one session at a time
            try:
                cls._made = {key: cls(job)}
            except BaseException:  # noqa: BLE001 - pytest.main per student reports whatever this was
                return None
        return cls._made[key]

    @classmethod
    def drop(cls) -> None:
        """End the session (its plugins unconfigured, its capture stopped) and forget it."""
        made, cls._made = cls._made, {}
        for reused in made.values():
            with contextlib.suppress(BaseException), contextlib.redirect_stdout(reused.sink), \
                    contextlib.redirect_stderr(reused.sink):
                reused.config._ensure_unconfigure()
            # Its hidden test modules leave too: a later suite may hold another file of the same name (two
            # batches' hidden folders), which pytest would refuse as an "import file mismatch".
            for name, module in list(sys.modules.items()):
                source = getattr(module, "__file__", None)
                if source and str(Path(source).resolve()) in reused.hidden_files:
                    del sys.modules[name]

    def run(self, job: dict[str, Any]) -> tuple[Any, int, str]:
        """Run the tests of ``job["files"]`` for ``job``'s student: (recorder, exit code, what pytest printed)."""
        import pytest

        import tests.plugin

        files = set(job["files"])
        items = [item for item in self.items if str(item.path) in files]
        recorder = self.recorder
        recorder.reset(job, items)
        self.config.option.impl = job["folder"]
        # What the suite's plugin keeps per run (the diagnoses, what it observed of the implementation) belongs to
        # one student: every config-level state it stashes is emptied, whatever its name.
        for key in vars(tests.plugin).values():
            if isinstance(key, pytest.StashKey) and isinstance(self.config.stash.get(key, None), dict):
                self.config.stash[key] = {}
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.stats.clear()
        self.sink.seek(0)
        self.sink.truncate()
        recorder.start()
        try:
            with contextlib.redirect_stdout(self.sink), contextlib.redirect_stderr(self.sink):
                for index, item in enumerate(items):
                    following = items[index + 1] if index + 1 < len(items) else None
                    item.ihook.pytest_runtest_protocol(item=item, nextitem=following)
        except BaseException:
            _Session.drop()  # its state is unknown now
            raise
        recorder.finished_at = time.monotonic()
        return recorder, (1 if recorder.errors else 0), self.sink.getvalue()


def grade_in_process(job: dict[str, Any]) -> dict[str, Any]:
    """Run the graded suite on one submission in this process; student code runs behind the proxy."""
    import pytest

    start = time.monotonic()
    _memoize_statement_ranges()
    _memoize_request_fixture()
    _memoize_code_paths()
    from grader.quiet import run_pytest
    from grader.sandbox.proxy import SCRATCH_ENV

    if job.get("scratch"):  # this batch's folder: removed by the batch even if this process is killed
        os.environ[SCRATCH_ENV] = job["scratch"]

    report: dict[str, Any] = {}
    reused = _Session.of(job)
    recorder = reused.recorder if reused is not None else _recorder(job)
    try:
        if reused is not None:
            recorder, code, printed = reused.run(job)
        else:
            recorder.start()
            code, printed = run_pytest(_pytest_arguments(job["files"], job["folder"]), recorder)
    finally:
        implementation = recorder.implementation
        report["isolation"] = getattr(implementation, "isolation", "unknown")
        report["isolated"] = bool(getattr(getattr(implementation, "plan", None), "isolated", False))
        report["output"] = ""
        if implementation is not None:
            with contextlib.suppress(Exception):
                report["output"] = str(implementation.output or "")
            report["refused"] = list(getattr(implementation, "refused", []))
            report["refusals"] = int(getattr(implementation, "refusals", 0))
            report["stats"] = dict(getattr(implementation, "stats", {}))
            with contextlib.suppress(Exception):
                implementation.close()
    records = recorder.results()
    # Where this student's time went (benchmarks/grade_throughput.py sums it up): the worker's start-up (it
    # overlaps collection), pytest's configuration and collection, the calls to the worker, the checks (the
    # tests' own work), and turning the outcomes into records.
    collected = recorder.collected_at or start
    finished = recorder.finished_at or time.monotonic()
    calls = float(getattr(implementation, "call_seconds", 0.0))
    report["timing"] = {"startup": round(sum(getattr(implementation, "startup_seconds", []) or [0.0]), 4),
                        "collection": round(collected - start, 4), "calls": round(calls, 4),
                        "checks": round(max(0.0, finished - collected - calls), 4),
                        "reports": round(time.monotonic() - finished, 4)}
    error = None
    if recorder.errors:  # before INTERRUPTED: pytest stops a run with collection errors with that same code
        first = recorder.errors[0].strip().splitlines()
        error = ("the graded suite could not be collected: " + first[0].removesuffix(" failed:")[:200]
                 + ": " + (first[-1] if len(first) > 1 else "")[:300])
    elif int(code) == pytest.ExitCode.INTERRUPTED:
        return {"interrupted": True}
    elif int(code) not in (0, 1):
        lines = printed.strip().splitlines()
        error = f"pytest stopped with exit code {int(code)}: {(lines[-1] if lines else 'no message')[:300]}"
    elif not records:
        error = "no test ran"
    return {"records": records, "error": error, "seconds": time.monotonic() - start, **report}


def _worker_main(connection: Any, root: str) -> None:
    """A long-lived grading process: receive jobs, grade them in process, send back results."""
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(root)
    # Ctrl-C is the parent's to handle: it stops this process; a half-graded student is not saved.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from grader.sandbox import proxy

    proxy.on_slow = lambda: connection.send(SLOW_NOTE)  # the batch may give this process's slot to another
    with contextlib.suppress(KeyboardInterrupt):  # the parent handles Ctrl-C and stops us
        while True:
            job = connection.recv()
            if job is None:
                from grader.sandbox.proxy import IsolatedImplementation

                IsolatedImplementation.close_spares()  # first: its scratch folder must not outlive us
                return
            try:
                result = grade_in_process(job)
            except BaseException as error:  # a grader bug must cost one row, not the batch
                if isinstance(error, KeyboardInterrupt):
                    raise
                result = {"records": [], "isolation": "unknown", "output": "", "seconds": 0.0,
                          "error": f"the grading process failed: {type(error).__name__}: {str(error)[:300]}"}
            connection.send(result)


# What a grading process sends before its result when a call of its student runs long (``proxy.SLOW_CALL``).
SLOW_NOTE = ("slow",)


class _Worker:
    def __init__(self, context: Any) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, str(ROOT)), daemon=True)
        self.process.start()
        child.close()
        self.job: dict[str, Any] | None = None
        self.started = 0.0
        self.slow = False  # its student is a slow one (it said so, or it has been busy for SLOW_AFTER)

    def send(self, job: dict[str, Any]) -> None:
        self.job, self.started, self.slow = job, time.monotonic(), False
        self.connection.send(job)

    def stop(self, wait: float = 2.0) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.connection.send(None)
        self.process.join(wait)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)
        self.connection.close()


def _death_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        if -exitcode == 9:
            return "the grading process was killed (signal 9: out of memory?)"
        return f"the grading process was killed by signal {-exitcode}"
    return f"the grading process exited with code {exitcode}"


# A grading process busy on one student for longer than this is slow: another one takes the next student.
SLOW_AFTER = 4.0
# Slow submissions hold a process each (mostly asleep, or reniced after their first timeout) for up to their
# budget: six of them at once still leave every slot to the honest ones. A grading process is ~100 MB.
MAX_EXTRA = 6


def run_jobs(jobs: Iterable[dict[str, Any]], processes: int, timeout: float) -> Iterator[tuple[dict, dict]]:
    """Grade ``jobs`` in long-lived processes; yield ``(job, result)`` as each finishes.

    ``jobs`` is read lazily, one job ahead of the free processes: preparing a
    student (unpacking, parsing) overlaps the grading of the others, and a
    process is started only when there is a job for it.

    A process that dies or overruns ``timeout`` costs only its current
    student (who gets a row saying why); a fresh process takes its place.

    A slow submission does not hold up the others: once its process has
    said so (``SLOW_NOTE``: a call ran past ``proxy.SLOW_CALL``), or has been
    on one student for more than ``SLOW_AFTER`` seconds (honest ones take
    about one), it no longer counts as one of the ``processes`` slots, and
    another process takes the next student (at most ``MAX_EXTRA`` extra). The
    slow one's own cost stays bounded by its budget.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    # multiprocessing terminates daemonic processes at exit; ours must be asked to stop first (atexit runs the
    # last registered first), so that they can end their spare workers and remove their scratch folders.
    atexit.unregister(_stop_idle)
    atexit.register(_stop_idle)

    source = iter(jobs)
    pending: deque[dict[str, Any]] = deque()
    exhausted = False

    def pull() -> bool:
        nonlocal exhausted
        if not exhausted:
            try:
                pending.append(next(source))
                return True
            except StopIteration:
                exhausted = True
        return False

    if not pull():
        return
    # spawn: a clean interpreter, never a fork of a parent that may hold threads (progress bar).
    context = multiprocessing.get_context("spawn")
    # Idle processes of an earlier batch in this interpreter are reused: starting one costs
    # more CPU (interpreter, numpy, pytest, the test modules) than grading a student.
    workers = [w for w in _IDLE[:processes] if w.process.is_alive()]
    del _IDLE[:processes]
    healthy = False
    try:
        while True:
            now = time.monotonic()
            fast = sum(1 for w in workers if w.job is not None and not w.slow and now - w.started <= SLOW_AFTER)
            idle = [w for w in workers if w.job is None]
            while fast < processes and (pending or pull()):
                if not idle:
                    if len(workers) >= processes + MAX_EXTRA:
                        break
                    workers.append(_Worker(context))
                    idle.append(workers[-1])
                idle.pop(0).send(pending.popleft())
                fast += 1
            busy = [w for w in workers if w.job is not None]
            if not busy and not pending and not pull():
                break
            # Every process has a job: prepare the next one instead of waiting (its result is not late for that).
            ahead = len(pending) < 1 and not exhausted
            wait([w.connection for w in busy] + [w.process.sentinel for w in busy], timeout=0 if ahead else 0.5)
            for index, worker in enumerate(workers):
                if worker.job is None:
                    continue
                result = None
                replace = False
                if worker.connection.poll():
                    try:
                        result = worker.connection.recv()
                    except (EOFError, OSError):
                        result, replace = None, True
                    if result == SLOW_NOTE:  # its student is slow: its slot goes to the next student now
                        worker.slow, result = True, None
                        continue
                if result is None and not worker.process.is_alive():
                    worker.process.join(0.1)
                    result = {"error": _death_reason(worker.process.exitcode)}
                    replace = True
                elif result is None and time.monotonic() - worker.started > timeout:
                    result = {"error": f"the grading process gave no result within {timeout:g} s"}
                    replace = True
                if result is None:
                    continue
                job, worker.job = worker.job, None
                if replace:
                    worker.stop(wait=0)
                    workers[index] = _Worker(context)
                yield job, result
            if ahead:
                pull()
        healthy = True
    finally:
        for worker in workers:
            if healthy and worker.job is None and worker.process.is_alive():
                _IDLE.append(worker)
            else:
                worker.stop(wait=1.0 if worker.job is None else 0)


def _stop_idle() -> None:
    while _IDLE:
        _IDLE.pop().stop(wait=1.0)


_IDLE: list[_Worker] = []
atexit.register(_stop_idle)


# ---------------------------------------------------------------- the batch


def _progress(total: int) -> Any:
    """A progress display: rich's bar on a terminal, plain lines otherwise."""
    if sys.stdout.isatty():
        with contextlib.suppress(ImportError):
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.description}"))
            task = progress.add_task("", total=total)

            class Bar:
                def __enter__(self) -> Bar:
                    progress.start()
                    return self

                def __exit__(self, *exc: object) -> None:
                    progress.stop()

                def advance(self, line: str) -> None:
                    progress.update(task, advance=1, description=line)

            return Bar()

    class Lines:
        done = 0

        def __enter__(self) -> Lines:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def advance(self, line: str) -> None:
            self.done += 1
            print(f"[{self.done}/{total}] {line}", flush=True)

    return Lines()


def _calls_status(stats: dict[str, int]) -> str:
    """What the row says about calls that timed out, crashed or were not run ("" if none)."""
    total = stats.get("requests", 0) + stats.get("skipped", 0)
    bad = stats.get("timed_out", 0) + stats.get("crashed", 0) + stats.get("skipped", 0)
    if not bad:
        return ""
    parts = ", ".join(f"{stats.get(key, 0)} {label}" for key, label in
                      (("timed_out", "timed out"), ("crashed", "crashed"), ("skipped", "not run")) if stats.get(key))
    if bad >= total:
        return f"every call timed out or crashed ({parts})"
    return f"{bad} of {total} calls timed out or crashed ({parts})"


def student_status(submission: Any, result: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The row's status: ``not graded: ...`` first (the grader's failure), then the submission's own problems."""
    internal = result.get("error") or next((r["internal"] for r in records if r.get("internal")), None)
    parts = [f"not graded: {internal}"] if internal else []
    if submission.status != "ok":
        parts.append(submission.status)
    if result.get("stats"):
        parts.append(_calls_status(result["stats"]))
    if result.get("refusals"):
        parts.append(f"{result['refusals']} request(s) to the reference refused (not the exercise's dependencies)")
    if result.get("isolated") is False:
        parts.append("graded without isolation")
    return "; ".join(part for part in parts if part) or "ok"


def _finish_student(out: Path, submission: Any, fingerprint: str, suite: list[Any], result: dict[str, Any]) -> dict:
    """Score one student and write their files; whatever fails, a row comes back (written or not)."""
    from grader.grading.report import results_json, score_tests, write_student

    records = result.get("records", [])
    tests = score_tests(records, suite, submission.problems, result.get("error"), submission.details)
    extra = {"fingerprint": fingerprint, "source": submission.source.name,
             "isolation": result.get("isolation", "not run"), "isolated": result.get("isolated", True),
             "kit_version": kit_version(), "refused": result.get("refused", []), "calls": result.get("stats", {}),
             "timing": result.get("timing", {})}
    results = results_json(student=submission.student, status=student_status(submission, result, records),
                           tests=tests, execution_time=result.get("seconds", 0.0), output=result.get("output", ""),
                           extra=extra)
    if result.get("refused"):
        from grader.grading.report import escape_text

        results["output"] += ("\n\nRefused requests to the reference (they cannot earn points):\n  "
                              + "\n  ".join(escape_text(reason) for reason in result["refused"]))
    write_student(out, results)
    return results


def _unwritable_row(submission: Any, suite: list[Any], error: BaseException) -> dict:
    """A row for a student whose results could not be scored or written (kept in memory for the gradebook)."""
    from grader.grading.report import results_json, score_tests

    reason = f"not graded: the grader could not write this student's results ({type(error).__name__}: {error})"
    tests = score_tests([], suite, {}, reason.removeprefix("not graded: "), None)
    return results_json(student=submission.student, status=reason[:500], tests=tests, execution_time=0.0,
                        output="", extra={"fingerprint": "", "source": str(submission.source.name),
                                          "isolation": "not run"})


# The kit's own check (the reference graded by the suite), per process: (suite, reference, options) -> outcome.
_KIT_CHECKS: dict[str, tuple[str | None, dict[str, str]]] = {}
REFERENCE_ENTRY = "the kit's reference"
KIT_REFERENCE = reference_dir() or ROOT / "solutions"  # what the kit's check grades (a seam for the tests)


def _kit_check(suite: list[Any], job: dict[str, Any], work: Path,
               fingerprint: str) -> tuple[tuple[str | None, dict[str, str]] | None, dict[str, Any] | None, str]:
    """The kit's own check (the reference graded by the suite): ``(outcome if known, the job to run, its key)``.

    Whatever breaks the kit (a reference that does not import or is wrong, broken golden data, a hidden test
    that does not import or parse, an argument the channel cannot carry) shows up as a test the reference does
    not pass: such a test is not graded for anyone, never a student's zero. The job runs beside the students'
    (``grade_batch``), so it costs no time of its own; ``_kit_outcome`` reads its result.
    """
    from grader.grading import submissions as found

    (work / ".kit").mkdir(exist_ok=True)  # apart from the students' folders (a student may be called "reference")
    reference = found.prepare(KIT_REFERENCE, work / ".kit", "reference")
    key = f"{fingerprint}|{reference.digest}|{job['fair']}|{job['policy']}"
    if key in _KIT_CHECKS:
        return _KIT_CHECKS[key], None, key
    if reference.status != "ok":
        return (f"the kit's reference (solutions/) is broken: {reference.status}", {}), None, key
    canary = {**job, "student": REFERENCE_ENTRY, "folder": str(reference.folder), "files": [f.path for f in suite],
              "kit_check": True}
    return None, canary, key


def _kit_outcome(suite: list[Any], result: dict[str, Any], key: str) -> tuple[str | None, dict[str, str]]:
    """(why nothing can be graded, {test: why it cannot be}) from the result of the kit's check (remembered)."""
    if result.get("error"):
        outcome: tuple[str | None, dict[str, str]] = (f"the kit is broken: {result['error']}", {})
    else:
        broken = {}
        hidden = {f.path for f in suite if f.hidden}
        for record in result.get("records", []):
            # The kit's own tests must pass on its reference; an instructor's hidden test may assert what the
            # reference does not do (that is the instructor's choice), but must not crash on it.
            failed = record.get("outcome") != "passed"
            crashed = failed and record.get("exception", "AssertionError") != "AssertionError"
            if record.get("internal") or crashed or (failed and record.get("file") not in hidden):
                lines = [line for line in str(record.get("internal") or record.get("message", "")).splitlines()
                         if line.strip()]
                why = next((line.strip() for line in lines if "rror" in line), lines[-1].strip() if lines else "")
                broken[record["nodeid"]] = f"the kit's own reference fails {record['nodeid']} ({why[:200]})"
        outcome = (None, broken)
    _KIT_CHECKS[key] = outcome
    return outcome


def grade_batch(
    submissions: Path,
    out: Path,
    *,
    jobs: int | None = None,
    force: bool = False,
    fair: bool = True,
    hidden: Path | list[Path] | None = None,
    timeout: float = STUDENT_TIMEOUT,
    budget: float = STUDENT_BUDGET,
    isolation: str = "require",
    exercises: list[str] | None = None,
    echo: Any = print,
    roster: Path | None = None,
) -> int:
    """Grade every submission in ``submissions`` into ``out``; returns the exit status."""
    from grader.grading import submissions as found
    from grader.grading.report import atomic_write, escape_text, gradebook_csv, is_graded, number, read_results, summary
    from grader.sandbox.limits import IsolationUnavailable, Limits, choose

    start = time.monotonic()
    try:
        plan = choose(isolation)  # before anything else: no student code without isolation
    except IsolationUnavailable as error:
        echo(f"error: {error}")
        return 2
    limits = Limits(student_seconds=budget)
    echo(f"Isolation: {plan.summary}")
    echo(f"Limits: {limits.describe()}")
    if not plan.isolated:
        echo("WARNING: grading is NOT ISOLATED: student code can read and change what this user can.")
    from grader.curriculum import load as load_curriculum

    for name in exercises or ():
        load_curriculum().exercise(name)  # --exercise NAME unknown: the caller's mistake, said as such (ValueError)
    try:
        suite, warnings = graded_suite(hidden, exercises)
    except ValueError as error:  # a hidden test file that cannot be read, parsed or placed: the kit's failure
        suite, warnings = [], [f"the kit is broken: {str(error).splitlines()[0][:400]}"]
    for warning in warnings:
        echo(f"warning: {warning}")
    # A test file of the manifest that is missing is the kit's failure: nobody is graded without it.
    kit_failure = next((w if w.startswith("the kit is broken") else f"the kit is broken: {w}"
                        for w in warnings if " is missing" in w or w.startswith("the kit is broken")), None)
    if not suite and kit_failure is None:
        echo("error: the graded suite has no test files")
        return 2
    fingerprint_of_suite = suite_fingerprint(suite, fair)
    out = out.resolve()
    inside = Path(os.path.realpath(submissions))
    if out == inside or inside in out.parents or out in inside.parents:
        echo(f"error: --out {out} and SUBMISSIONS {submissions} overlap: the results would land among the "
             "submissions (or the submissions among the results); choose an --out folder outside SUBMISSIONS")
        return 2
    entries = found.discover(submissions, exclude=(out,))
    if submissions.is_dir() and entries and entries[0][1] != submissions:
        for skipped in sorted(submissions.iterdir()):
            if not found.is_submission(skipped):
                why = "its name starts with a dot" if skipped.name.startswith(".") else "tools make such folders"
                echo(f"note: {escape_text(skipped.name)!s} was skipped, not graded ({why}); rename it to grade it")
    if not entries:
        echo(f"error: no submissions in {submissions} (expected folders or .zip files)")
        return 2
    for student, entry in entries:
        if student != found.student_id(entry) and entry.name != student:
            echo(f"note: {escape_text(entry.name)!s} is graded as {escape_text(student)!s} "
                 "(its own name would collide with the grader's files or another entry)")
    work = Path(tempfile.mkdtemp(prefix="attention-kit-grade-"))
    # The workers' scratch folders, in a folder of this run removed below whatever happens to the grading
    # processes (a killed one cannot remove its own). Traversable, not listable: a worker without a mount
    # namespace (--container) runs as another user in its own scratch folder.
    scratch = Path(tempfile.mkdtemp(prefix="attention-kit-run-"))
    os.chmod(scratch, 0o711)
    graded = reused = 0
    students = [student for student, _ in entries]
    rows_by_student: dict[str, dict] = {}
    prepared: dict[str, tuple[Any, str]] = {}
    export_failed = False
    # What every student's job shares; the kit's check (the reference graded by the suite) starts from it too.
    template = {"fair": fair, "scratch": str(scratch), "policy": isolation, "budget": budget,
                "suite": [{"path": f.path, "exercise": f.exercise, "hidden": f.hidden} for f in suite]}
    # The kit's verdict: why nothing can be graded, the tests that cannot be; the check's job while it runs.
    kit: dict[str, Any] = {"failure": kit_failure, "broken": {}, "canary": None, "key": ""}
    try:
        def finish(job: dict[str, Any], result: dict[str, Any]) -> dict:
            submission, fingerprint = prepared[job["student"]]
            if job.get("kit_failure"):
                result = {**result, "error": job["kit_failure"]}
            for record in result.get("records", []):
                if record.get("nodeid") in kit["broken"] and not record.get("internal"):
                    record["internal"] = kit["broken"][record["nodeid"]]
            try:
                results = _finish_student(out, submission, fingerprint, suite, result)
            except Exception as error:  # noqa: BLE001 - a row for this student whatever happens
                results = _unwritable_row(submission, suite, error)
            rows_by_student[job["student"]] = results
            return results

        with _progress(len(entries)) as progress:
            def advance(job: dict[str, Any], results: dict[str, Any]) -> None:
                extra = results["extra_data"]
                progress.advance(escape_text(f"{job['student']}: {number(results['score'])}/"
                                             f"{number(extra['max_score'])} ({extra['status']})")[:400])

            def not_run(job: dict[str, Any]) -> None:
                """A student nothing can be graded of (no gradable module, or the kit is broken): no code runs."""
                nonlocal graded
                if kit["failure"] is not None:
                    job["files"], job["kit_failure"] = [], kit["failure"]
                advance(job, finish(job, {"isolation": "not run", "isolated": plan.isolated}))
                graded += 1

            def feed() -> Iterator[dict[str, Any]]:
                """The students to grade, each prepared just before a grading process is free for it."""
                nonlocal reused
                for student, entry in entries:
                    submission = found.prepare(entry, work, student)  # never raises for what the entry holds
                    fingerprint = hashlib.sha256(f"{fingerprint_of_suite}|{submission.digest}".encode()).hexdigest()
                    previous = None if force else read_results(out, student)
                    if (previous is not None and previous["extra_data"].get("fingerprint") == fingerprint
                            and is_graded(previous)):
                        reused += 1
                        rows_by_student[student] = previous
                        advance({"student": student}, {**previous, "extra_data": {
                            **previous["extra_data"], "status": "unchanged: kept from the last run"}})
                        continue
                    prepared[student] = (submission, fingerprint)
                    job = {**template, "student": student, "folder": str(submission.folder),
                           "files": [f.path for f in suite if f.exercise not in submission.problems]}
                    if kit["failure"] is None and job["files"] and not kit["key"]:
                        # The first student to grade: the kit's check goes first, beside the students.
                        known, kit["canary"], kit["key"] = _kit_check(suite, job, work, fingerprint_of_suite)
                        if known is not None:
                            kit["failure"], kit["broken"] = known
                        elif kit["canary"] is not None:
                            yield kit["canary"]
                    if kit["failure"] is not None or not job["files"]:
                        not_run(job)
                        continue
                    yield job

            processes = jobs or os.cpu_count() or 1
            # The students graded before the kit's check ends wait here for its verdict.
            held: list[tuple[dict[str, Any], dict[str, Any]]] = []
            students_feed = feed()
            stream = run_jobs(students_feed, processes, timeout)
            try:
                for job, result in stream:
                    if result.get("interrupted"):
                        raise KeyboardInterrupt
                    if job is kit["canary"]:
                        kit["canary"] = None
                        kit["failure"], kit["broken"] = _kit_outcome(suite, result, kit["key"])
                        if kit["failure"] is not None:
                            break  # nobody can be graded: the students not finished yet are not run
                        for held_job, held_result in held:
                            advance(held_job, finish(held_job, held_result))
                            graded += 1
                        held = []
                        continue
                    if kit["canary"] is not None:
                        held.append((job, result))
                        continue
                    advance(job, finish(job, result))
                    graded += 1
            finally:
                stream.close()
            if kit["canary"] is not None and kit["failure"] is None:  # no verdict came: cannot happen
                kit["failure"] = "the kit is broken: the kit's check did not run"
            if kit["failure"] is not None:
                for student in prepared:
                    if student not in rows_by_student:  # held or dispatched when the kit failed: no result counts
                        not_run({**template, "student": student, "folder": "", "files": []})
                for _ in students_feed:  # the rest are prepared (for their rows) and not run
                    pass
        if kit["failure"] is not None:
            echo(escape_text(f"not graded: {kit['failure']}")[:600])
        elif kit["broken"]:
            broken = kit["broken"]
            echo(escape_text(f"not graded ({len(broken)} test(s)): {next(iter(broken.values()))}")[:600])
        rows = []
        for student in students:
            row = read_results(out, student) or rows_by_student.get(student)
            if row is None:  # cannot happen (every student got a row above); still never a lost row
                row = _unwritable_row(prepared[student][0], suite, RuntimeError("no results"))
            rows.append(row)
        atomic_write(out / "grades.csv", gradebook_csv(rows))
        from grader.grading.export import ExportError, export

        try:  # grades-long.csv (per-exercise maxima), and canvas.csv with a roster
            export(out, rows, roster, echo=echo)
        except ExportError as error:
            echo(f"error: {error} (grades.csv was written; fix the roster and run `attention-kit export {out}`)")
            return 2
        except Exception as error:  # noqa: BLE001 - the gradebook is written; an export must not hide the summary
            echo(f"error: the exports failed ({type(error).__name__}: {error}); grades.csv was written")
            export_failed = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    echo("")
    echo(summary(rows, graded=graded, reused=reused, seconds=time.monotonic() - start))
    echo(f"Limits: {limits.describe()}")
    echo(f"\nGradebook: {out / 'grades.csv'}; per student: {out}/<student>/results.json, feedback.md")
    return 0 if all(is_graded(row) for row in rows) and not export_failed else 1


def run(args: argparse.Namespace) -> int:
    """Run ``attention-kit grade``."""
    make_importable()  # the grading processes import `tests` from the kit
    hidden = args.hidden if args.hidden is not None else hidden_folders()
    if args.hidden is not None and not args.hidden.is_dir():
        print(f"error: --hidden {hidden}: no such folder", file=sys.stderr)
        return 2
    if reference_dir() is None:  # the student-safe package: the reference is the instructor's own copy
        print(f"error: {course.no_reference(ROOT)}", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print("error: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.roster is not None:  # a broken roster stops the run before anyone is graded
        from grader.grading.export import ExportError, read_roster

        try:
            read_roster(args.roster)
        except ExportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    samples = None
    try:
        submissions = args.submissions
        if submissions is None:
            from grader.grading.samples import make_samples

            samples = Path(tempfile.mkdtemp(prefix="attention-kit-samples-"))
            make_samples(samples)
            print(f"No SUBMISSIONS given: grading the bundled sample submissions ({samples}).")
        elif not submissions.exists():
            print(f"error: {submissions}: no such file or folder", file=sys.stderr)
            return 2
        if args.budget <= 0 or args.timeout <= 0:
            print("error: --budget and --timeout must be positive", file=sys.stderr)
            return 2
        return grade_batch(samples or submissions, args.out, jobs=args.jobs, force=args.force, fair=args.fair,
                           hidden=hidden, timeout=args.timeout, budget=args.budget, isolation=args.isolation,
                           exercises=args.exercises, roster=args.roster)
    except KeyboardInterrupt:
        print("\ninterrupted: finished students are saved; rerun the same command to continue "
              "(the gradebook was not changed)", file=sys.stderr)
        return 130
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if samples is not None:
            shutil.rmtree(samples, ignore_errors=True)
