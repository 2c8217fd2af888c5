"""The recording pytest plugin: serves the student's implementation, records each test, renders failures.

Run by: each grading process, inside its pytest session
(``grader.grading.session``). The recorder gives the suite its ``impl``
(an isolated worker, ``grader.grading.implementation``), keeps every test's
outcome while it runs, tells the grader's failures (no score) from the
student's, and renders what a student may read of a failure: a hidden test's
name and message only (:func:`_hidden_failure`), no secret line
(``grader.grading.secrets``), no grader path (:func:`_clean_failure`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader import course
from grader.curriculum import ROOT
from grader.grading import reference_use
from grader.grading.implementation import implementation_for, keep_spare
from grader.grading.records import Job, TestRecord
from grader.grading.secrets import Secrets
from grader.sandbox import channel_use
from grader.sandbox.sealed import SEALED
from tests.failures import failures_of, graded_text
from tests.plugin import EXERCISE

# Called after each test's last phase (the grading process tells the batch it makes progress: ``pool``).
on_test_done: Callable[[], None] | None = None


class Recorder:
    """A pytest plugin that serves the student's implementation and records every test's outcome.

    One per pytest session (a reused session resets it per student, :meth:`reset`). It keeps a mutable
    record per test while the tests run; :meth:`results` freezes them into :class:`TestRecord` objects.
    """

    def __init__(self, job: Job) -> None:
        self.job = job
        # The hidden test files and their exercises; the secret lines no failure text may show.
        self.hidden = {f.path: f.exercise for f in job.suite if f.hidden}
        self.secrets = Secrets.of(tuple(sorted(self.hidden)))
        self.implementation: Any = None
        self.started: Any = None
        self.order: list[tuple[str, str, str]] = []
        self.ids: dict[tuple[str, str], str] = {}  # (pytest's node id, the file's location) -> the test's id
        self.records: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.internal_before: dict[str, int] = {}
        self.use_before: dict[str, tuple[int, int]] = {}  # per test: what the worker had sent when it started
        self.file_sent: dict[str, int] = {}  # per test file: what its tests sent so far (its allowance's use)
        self.allowed: Any = None  # the channel's allowances of this job's tests (``reference_use.allowances``)
        self.current = ""  # the test that runs
        self.hidden_nodes: set[str] = set()
        self.environment: dict[str, str] = {}
        self.exceptions: dict[str, str] = {}  # per test: the type of the exception that ended it
        self.collected_at = self.finished_at = 0.0
        self.public_output: str | None = None  # what the student's code printed before the first hidden test
        self.public_refused: int | None = None  # and how many refused callbacks it had made by then
        self.public_refusals: int | None = None  # (counted, beyond the names kept)
        self.public_stats: dict[str, int] | None = None  # and its calls' counts (timed out, crashed, not run)

    def factory(self, path: Path) -> Any:
        """The implementation of the student's folder ``path`` (the suite's ``impl`` fixture calls it)."""
        started, self.started = self.started, None
        if started is not None and Path(path).resolve() == started.path:
            return started  # its worker has been starting up while pytest collected the tests
        if started is not None:
            with contextlib.suppress(Exception):
                started.close()
        self.implementation = self.implementation_of(path)
        self.allow()  # made during the first test's set-up: that test's allowance
        return self.implementation

    def implementation_of(self, path: Path) -> Any:
        """A new implementation of ``path``, with this job's options."""
        return implementation_for(self.job, Path(path))

    def reset(self, next_job: Job, items: list[Any]) -> None:
        """Record the next student (a session that is reused): fresh state, the tests of ``items`` only."""
        self.job = next_job
        self.implementation = self.started = None
        self.records, self.internal_before, self.environment, self.exceptions = {}, {}, {}, {}
        self.use_before, self.allowed, self.current, self.file_sent = {}, None, "", {}
        self._number(items)
        self.collected_at = time.monotonic()
        self.finished_at = 0.0
        self.public_output = self.public_refused = self.public_refusals = self.public_stats = None

    def start(self) -> None:
        """Start the student's worker now, so that its start-up overlaps pytest's own."""
        with contextlib.suppress(Exception):  # if it cannot start, the fixture reports why, as without this
            self.implementation = self.started = self.implementation_of(Path(self.job.folder))
        keep_spare(self.job)  # the next student's worker starts up while this one is graded

    def internal_count(self) -> int:
        """How many internal failures (the grader's) the implementation has reported so far."""
        return len(getattr(self.implementation, "internal", None) or [])

    def allow(self) -> None:
        """Tell the student's worker what the current test may send over the channel (``reference_use``)."""
        implementation = self.implementation
        if implementation is None or not hasattr(implementation, "allow"):
            return
        if self.allowed is None:
            self.allowed = reference_use.allowances(self.job, implementation.limits)
        tests, files = self.allowed
        allowance, total = reference_use.file_allowance(files, self.current, implementation.limits)
        implementation.allow(tests.get(self.current) or channel_use.for_test(implementation.limits, None),
                             allowance, total, self.file_sent.get(reference_use.file_of(self.current), 0))

    def channel_use(self) -> tuple[int, int]:
        """Bytes and messages the student's worker has sent the grader so far (0 before it starts)."""
        implementation = self.implementation
        return (int(getattr(implementation, "received", 0) or 0), int(getattr(implementation, "messages", 0) or 0))

    def _number(self, items: list[pytest.Item]) -> None:
        """Note the tests' order and ids (:func:`test_id`), which are hidden, and how a report names each."""
        ids = [test_id(item) for item in items]
        self.ids = {(item.nodeid, item.location[0]): id_ for item, id_ in zip(items, ids, strict=True)}
        self.order = [(id_, str(item.path), item.stash.get(EXERCISE, "")) for item, id_ in zip(items, ids, strict=True)]
        self.hidden_nodes = {id_ for item, id_ in zip(items, ids, strict=True) if str(item.path) in self.hidden}

    def _id(self, nodeid: str, location: Any) -> str:
        """The id of the test pytest reports as ``nodeid`` at ``location`` (see :func:`test_id`)."""
        return self.ids.get((nodeid, location[0] if location else ""), nodeid)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """Note how many internal failures there were before the test."""
        nodeid = self._id(nodeid, location)
        self.internal_before[nodeid] = self.internal_count()
        self.use_before[nodeid] = self.channel_use()
        self.current = nodeid
        SEALED.hidden = nodeid in self.hidden_nodes  # a hidden test's answers are given while hidden tests run only
        self.allow()
        if nodeid in self.hidden_nodes and self.public_output is None:  # hidden tests run last: from here on,
            self.public_output, self.public_refused = "", 0  # nothing the student's code prints is shown,
            self.public_refusals, self.public_stats = 0, {}  # nor what becomes of its calls (crashes are bits)
            with contextlib.suppress(Exception):
                self.public_output = str(self.implementation.output or "")
                self.public_refused = len(getattr(self.implementation, "refused", None) or [])
                self.public_refusals = int(getattr(self.implementation, "refusals", 0))
                self.public_stats = dict(getattr(self.implementation, "stats", {}))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> None:
        """Note the exception that ended a phase, and the grader's own import or file errors."""
        # Reads the call only (never the report), so it runs before the report is made and returns None,
        # letting pytest make it: a plain hook, cheaper for pluggy than a wrapper around it.
        value = call.excinfo.value if call.excinfo is not None else None
        nodeid = self._id(item.nodeid, item.location)
        if value is not None and call.when in ("setup", "call"):
            self.exceptions.setdefault(nodeid, type(value).__name__)  # the kit's check tells them apart
        # An import or file error raised by the test itself (a missing data file, a broken install), never by
        # the student's code (their exceptions are rebuilt and marked): the grader's failure, not a zero.
        if (call.when == "call" and isinstance(value, (ImportError, OSError))
                and not isinstance(value, TimeoutError)  # the proxy's: a student's call ran out of time
                and not getattr(value, "attention_kit_student", False)):
            self.environment[nodeid] = f"the test failed on the grader's side ({type(value).__name__}: " \
                                            f"{str(value)[:200]})"

    def pytest_configure(self, config: pytest.Config) -> None:
        """Give the suite's ``impl`` fixture this recorder's implementations."""
        config.attention_kit_implementation = self.factory

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Tag the hidden tests with their exercise."""
        # Hidden files are not in the manifest: tag them with their exercise before the kit sorts.
        for item in items:
            exercise = self.hidden.get(str(item.path))
            if exercise is not None:
                item.stash[EXERCISE] = exercise
                item.add_marker(getattr(pytest.mark, exercise))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Note when the tests ended."""
        self.finished_at = time.monotonic()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Note the tests' order and which are hidden."""
        self.collected_at = time.monotonic()
        self._number(session.items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Keep a collection error (the suite's failure, not the student's)."""
        if report.failed:
            self.errors.append(f"collecting {report.nodeid} failed: {report.longreprtext[-800:]}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Add one phase's report to the test's record."""
        nodeid = self._id(report.nodeid, report.location)
        record = self.records.setdefault(nodeid, {"outcome": "passed", "message": "", "output": "",
                                                         "duration": 0.0})
        record["duration"] += report.duration
        if report.when == "teardown":
            # What the test sent over the channel: the kit's check keeps the reference's, the batch judges others'.
            (sent, calls), (sent_before, calls_before) = self.channel_use(), self.use_before.get(nodeid, (0, 0))
            record["sent"], record["calls"] = max(0, sent - sent_before), max(0, calls - calls_before)
            name = reference_use.file_of(nodeid)
            self.file_sent[name] = self.file_sent.get(name, 0) + record["sent"]
            if on_test_done is not None:
                with contextlib.suppress(Exception):  # telling is a courtesy: never a test's failure
                    on_test_done()
        if nodeid in self.exceptions:
            record["exception"] = self.exceptions[nodeid]
        internal = getattr(self.implementation, "internal", None) or []
        if len(internal) > self.internal_before.get(nodeid, 0) and not record.get("internal"):
            record["internal"] = str(internal[-1])  # the grader failed during this test: no score for it
        if nodeid in self.environment and not record.get("internal"):
            record["internal"] = self.environment[nodeid]
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
        hidden_test = nodeid in self.hidden_nodes
        found = failures_of(report)  # what the suite's checks found, as data (tests/failures.py)
        if found:
            text = graded_text(found, hidden=hidden_test)
            if not record.get("revisit"):
                first = next((failure.revisit for failure in found if failure.revisit), "")
                record["revisit"] = self.secrets.scrub(first)  # hidden: the checks' messages, no line of the test
            # The API functions its failures are about (the kit's own names: an exercise's hint concerns some).
            record["functions"] = tuple(dict.fromkeys([*record.get("functions", ()), *(
                name for failure in found for name in failure.functions.split())]))
        elif hidden_test:
            text = _hidden_failure(report, rendered)  # name and message only: no line of the hidden test
        else:
            text = rendered if report.failed else f"skipped: {rendered}"
        if not hidden_test:
            record["output"] = (record["output"] + self.secrets.scrub(report.capstdout)).strip()
        record["message"] = (record["message"] + "\n" + self.secrets.scrub(text)).strip()

    def results(self) -> tuple[TestRecord, ...]:
        """The records of the tests of this run, in the suite's order (a test that did not run: failed)."""
        records = []
        for nodeid, path, exercise in self.order:
            record = self.records.get(nodeid, {"outcome": "failed", "message": "did not run", "output": "",
                                               "duration": 0.0})
            record["message"] = _clean_failure(record["message"], self.job.folder)
            if record.get("revisit"):
                record["revisit"] = _clean_failure(record["revisit"], self.job.folder)
            records.append(TestRecord(nodeid=nodeid, file=path, exercise=exercise, **record))
        return tuple(records)


def test_id(item: pytest.Item) -> str:
    """The test's node id, naming its file where pytest names none.

    pytest leaves the file out of the node id of a test file outside its root folder (the kit), given by
    its path: a course folder's tests and hidden tests, a ``--hidden DIR``. Two such tests of one name
    (softmax's and your exercise's ``test_integer_scores``) were then one record, which gave both the
    outcome of one. Such a file is named by its path in the course folder, else by its folder and name.
    """
    nodeid = item.nodeid
    if not nodeid.startswith("::"):
        return nodeid
    path = Path(item.path)
    home = course.active_folder()
    label = f"{path.parent.name}/{path.name}"
    if home is not None and path.is_relative_to(home):
        label = path.relative_to(home).as_posix()
    return label + nodeid


def _hidden_failure(report: Any, rendered: str | None = None) -> str:
    """A hidden test's failure that no check recorded, as a student may see it: the exception's type and message.

    (What the checks recorded is rendered by ``tests.failures.graded_text``.) Never a traceback or a
    source line of the test: pytest's assertion rewriting puts the asserted expression into the
    message, so an assertion keeps only its own message. ``rendered``: ``report.longreprtext``, if
    already rendered.
    """
    text = (report.longreprtext if rendered is None else rendered) or ""
    lines = text.splitlines()
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = str(getattr(crash, "message", "") or (lines[-1] if lines else "failed"))
    kind, _, rest = message.partition(": ")
    if kind == "AssertionError" or message.startswith(("assert ", "AssertionError")):
        own = rest.split("\nassert ")[0].strip() if rest and not rest.startswith("assert ") else ""
        return f"AssertionError: {own}" if own else "AssertionError: a check of this hidden test failed"
    if kind == "Failed" or message.startswith("Failed:"):
        return message.replace("Failed: ", "", 1)
    return message


def _clean_failure(text: str, folder: str) -> str:
    """A failure text as a student should read it: their file names, no grader paths or trailers."""
    # (pytest-check's closing rule and count are left out where the failures are rendered: graded_text.)
    return text.replace(folder.rstrip("/") + "/", "").replace(str(ROOT) + "/", "").strip()
