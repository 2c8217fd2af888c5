"""The pytest session of a grading process: the graded suite collected once and rerun for each student.

Run by: each long-lived grading process (``grader.grading.pool`` calls
:func:`grade_in_process` for every job it receives). The tests run in this
process with the recording plugin (``grader.grading.recorder``); the
student's code runs behind the implementation seam
(``grader.grading.implementation``), never here. The speed-ups of private
pytest code this process applies are in ``grader.grading.speedups``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tests.plugin
from grader.curriculum import PART_ENV, ROOT
from grader.grading import kit_check
from grader.grading.implementation import use_scratch
from grader.grading.recorder import Recorder
from grader.grading.records import Job, Result
from grader.grading.speedups import patch_pytest
from grader.sandbox.sealed import SEALED
from tests.effort import use_draw_key

UNUSED_PLUGINS = ("cacheprovider", "unraisableexception", "threadexception", "logging", "faulthandler",
                  "pastebin", "junitxml", "doctest", "nose", "stepwise", "legacypath",
                  # Per-test hooks a grading run does not need (the tests catch their own warnings).
                  "unittest", "subtests", "setuponly", "setupplan", "warnings")
# The only third-party plugin the graded suite uses. Nothing else is auto-loaded from entry points: whatever
# else happens to be installed (hypothesis, anyio, pytest-benchmark, ...) would add hooks to every test.
SUITE_PLUGINS = ("pytest_check.plugin", "tests.plugin")


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


class Session:
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

    _made: dict[str, Session] = {}

    def __init__(self, job: Job) -> None:
        from _pytest.config import _prepareconfig
        from _pytest.main import Session as PytestSession

        from grader.quiet import only_given_options

        self.recorder = Recorder(job)
        self.sink = io.StringIO()
        files = [f.path for f in job.suite]
        with only_given_options(), contextlib.redirect_stdout(self.sink), contextlib.redirect_stderr(self.sink):
            config = _prepareconfig(_pytest_arguments(files, job.folder), plugins=[self.recorder])
            config._do_configure()
            session = PytestSession.from_config(config)
            session.exitstatus = 0
            config.hook.pytest_sessionstart(session=session)
            config.hook.pytest_collection(session=session)
        self.config, self.session, self.items = config, session, list(session.items)
        # The hidden tests' modules, to forget with the session (the public ones register their probes once).
        self.hidden_files = {str(Path(f.path).resolve()) for f in job.suite if f.hidden}

    @classmethod
    def of(cls, job: Job) -> Session | None:
        """The session of ``job``'s suite in this process (made on first use), or None to use ``pytest.main``."""
        if os.environ.get("ATTENTION_KIT_FRESH_PYTEST"):
            return None
        key = repr(job.suite)
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

    def run(self, job: Job) -> tuple[Recorder, int, str]:
        """Run the tests of ``job.files`` for ``job``'s student: (recorder, exit code, what pytest printed)."""
        files = set(job.files)
        items = [item for item in self.items if str(item.path) in files]
        recorder = self.recorder
        recorder.reset(job, items)
        self.config.option.impl = job.folder
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
            Session.drop()  # its state is unknown now
            raise
        recorder.finished_at = time.monotonic()
        return recorder, (1 if recorder.errors else 0), self.sink.getvalue()


def grade_in_process(job: Job) -> Result:
    """Run the graded suite on one submission in this process; student code runs behind the proxy."""
    start = time.monotonic()
    patch_pytest()
    from grader.quiet import run_pytest

    if job.scratch:  # this batch's folder: removed by the batch even if this process is killed
        use_scratch(job.scratch)
    if job.part:  # the batch's selection decides which given code a worker may hold (grader.sandbox.given.servable)
        os.environ[PART_ENV] = job.part
    use_draw_key(job.draw_key)  # inputs drawn for the submission that its code cannot work out (tests/effort.py)

    # Fair grading's answers known in advance (grader.sandbox.sealed): those the kit's check recorded, for this
    # reference; the check's own job records them, into the file its job names (that of the reference it grades).
    answers = None
    if job.fair:
        answers = (Path(job.answers) if job.answers else None) if job.kit_check else kit_check.answers_file()
    SEALED.use(answers)
    SEALED.hidden = False  # until a hidden test starts (the recorder)
    SEALED.recording(job.kit_check and answers is not None)
    seen: dict[str, Any] = {}  # what the implementation says of itself (isolation, output, calls)
    reused = Session.of(job)
    recorder = reused.recorder if reused is not None else Recorder(job)
    try:
        if reused is not None:
            recorder, code, printed = reused.run(job)
        else:
            recorder.start()
            code, printed = run_pytest(_pytest_arguments(list(job.files), job.folder), recorder)
    finally:
        implementation = recorder.implementation
        seen["isolation"] = getattr(implementation, "isolation", "unknown")
        seen["isolated"] = bool(getattr(getattr(implementation, "plan", None), "isolated", False))
        if implementation is not None:
            with contextlib.suppress(Exception):
                seen["output"] = recorder.secrets.scrub(recorder.public_output if recorder.public_output is not None
                                                        else str(implementation.output or ""))
            seen["refused"] = tuple(getattr(implementation, "refused", []))
            seen["refused_shown"] = recorder.public_refused  # None: no hidden test ran, all may be shown
            seen["refusals"] = int(getattr(implementation, "refusals", 0))
            seen["stats"] = dict(getattr(implementation, "stats", {}))
            seen["stats_shown"], seen["refusals_shown"] = recorder.public_stats, recorder.public_refusals
            with contextlib.suppress(Exception):
                implementation.close()
        if job.kit_check and answers is not None:
            with contextlib.suppress(OSError):  # without them students are answered as before
                SEALED.save(answers)
    records = recorder.results()
    # Where this student's time went (benchmarks/grade_throughput.py sums it up): the worker's start-up (it
    # overlaps collection), pytest's configuration and collection, the calls to the worker, the checks (the
    # tests' own work), and turning the outcomes into records.
    collected = recorder.collected_at or start
    finished = recorder.finished_at or time.monotonic()
    calls = float(getattr(implementation, "call_seconds", 0.0))
    timing = {"startup": round(sum(getattr(implementation, "startup_seconds", []) or [0.0]), 4),
              "collection": round(collected - start, 4), "calls": round(calls, 4),
              "checks": round(max(0.0, finished - collected - calls), 4),
              "reports": round(time.monotonic() - finished, 4)}
    error = None
    if recorder.errors:  # before INTERRUPTED: pytest stops a run with collection errors with that same code
        first = recorder.errors[0].strip().splitlines()
        error = ("the graded suite could not be collected: " + first[0].removesuffix(" failed:")[:200]
                 + ": " + (first[-1] if len(first) > 1 else "")[:300])
    elif int(code) == pytest.ExitCode.INTERRUPTED:
        return Result(interrupted=True)
    elif int(code) not in (0, 1):
        lines = printed.strip().splitlines()
        error = f"pytest stopped with exit code {int(code)}: {(lines[-1] if lines else 'no message')[:300]}"
    elif not records:
        error = "no test ran"
    return Result(records=records, error=error, seconds=time.monotonic() - start, timing=timing, **seen)
