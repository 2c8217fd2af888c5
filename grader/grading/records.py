"""The typed records that cross between the parts of a grading run: a job, a test's record, a result.

Made by: the batch (``grader.grading.grade``) makes a :class:`Job` per
student; a grading process (``grader.grading.pool``, running
``grader.grading.session``) receives it over a pipe, its recorder
(``grader.grading.recorder``) makes a :class:`TestRecord` per test, and the
process sends back a :class:`Result`; the batch scores it into a typed row
(``grader.grading.scored``: a :class:`grader.grading.rows.StudentRow` of
``TestEntry`` records, which every output file is written from). They cross
a process boundary (``multiprocessing`` pickles them), so they hold plain
data only, and they are frozen: a part that wants another value makes a new
record (``dataclasses.replace``). Nothing here is written to disk as such.

Which fields of a :class:`Job` decide a grade is said next to each field
(``metadata={"grade": True}``); ``grader.grading.fingerprint`` hashes exactly
those, so a new option cannot be left out of the fingerprint by mistake
(``grader/tests/test_fingerprint.py`` checks every field says which it is).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from grader.sandbox.limits import Limits

# The limits a course may change, as the kit sets them: one place, ``grader.sandbox.limits.Limits`` (CPU seconds
# of student code per exercise of a submission, CPU seconds per call, MiB of memory per worker).
STUDENT_BUDGET = Limits.student_seconds
CALL_BUDGET = Limits.call_timeout
MEMORY_MIB = Limits.memory_bytes >> 20


def _decides(why: str) -> Any:
    """Metadata of a field that can change a grade: it is part of the fingerprint."""
    return {"grade": True, "why": why}


def _does_not_decide(why: str) -> Any:
    """Metadata of a field that cannot change a grade (or is covered otherwise): left out of the fingerprint."""
    return {"grade": False, "why": why}


@dataclass(frozen=True)
class SuiteFile:
    """One test file of the graded suite, as a grading process needs it."""

    path: str
    """The test file's absolute path."""
    exercise: str
    """The exercise its tests belong to."""
    hidden: bool = False
    """Whether it is an instructor's hidden test file (its failures reach students as name and message only)."""
    points: float | None = None
    """Its own points (a hidden file's ``POINTS``), or None when it shares the exercise's."""


@dataclass(frozen=True)
class Job:
    """One submission to grade, as the batch sends it to a grading process."""

    student: str = field(metadata=_does_not_decide("the row it is for, not how it is graded"))
    """The student's identifier (their row in the gradebook)."""
    folder: str = field(metadata=_does_not_decide("the submission's content is hashed (its digest)"))
    """The prepared submission's folder (its modules), given to the suite as ``--impl``."""
    files: tuple[str, ...] = field(metadata=_does_not_decide("the suite minus the exercises the submission "
                                                             "cannot be graded on (its digest decides that)"))
    """The test files to run for this student: the suite's, minus those of exercises the static check failed."""
    suite: tuple[SuiteFile, ...] = field(metadata=_decides("the selection (--exercise, --part, --hidden) and points"))
    """The whole graded suite (the same for every student of a batch: a grading process collects it once)."""
    fair: bool = field(default=True, metadata=_decides("--no-fair: the reference or the student's own earlier "
                                                       "exercises under each exercise"))
    """Whether each exercise is tested on the reference's earlier exercises (``--no-fair``: the student's own)."""
    policy: str = field(default="require", metadata=_decides("--accept-no-isolation / --container: how student "
                                                              "code is confined, and so what it can do"))
    """The isolation policy (``require``, ``none`` or ``container``; ``grader.sandbox.limits.choose``)."""
    budget: float = field(default=STUDENT_BUDGET, metadata=_decides("--budget: past it the remaining tests fail"))
    """CPU seconds of student code for the submission's whole run; past them the remaining tests fail."""
    call_budget: float = field(default=CALL_BUDGET, metadata=_decides("--call-budget: a call past it times out"))
    """CPU seconds of one call to a student's function."""
    memory: int = field(default=MEMORY_MIB, metadata=_decides("--memory: an allocation past it fails"))
    """MiB of memory each of the student's workers may hold (kernel-enforced where a cgroup can be made)."""
    course: str = field(default="", metadata=_decides("the course folder's settings (course.toml): exercises, "
                                                      "points, limits, visibility, Canvas"))
    """The course's settings as text (``grader.course.settings``; "" without a course folder)."""
    part: str = field(default="", metadata=_decides("--part: which exercises the course grades"))
    """The course's part being graded (``1``, ``2`` or ``all``; the manifest's ``[course] part`` by default)."""
    scratch: str = field(default="", metadata=_does_not_decide("where the workers' scratch folders go"))
    """This batch's folder for the workers' scratch folders, removed by the batch ("" for the default)."""
    draw_key: str = field(default="", metadata=_decides("the grader's key of the inputs drawn for each submission "
                                                          "(grader.grading.draw_key): another key, other inputs"))
    """The grader's key (hex) mixed into the inputs drawn for each submission; "" for none (a student's own run)."""
    kit_check: bool = field(default=False, metadata=_does_not_decide("marks the kit's own check, never a student"))
    """Whether this is the kit's own check (the reference graded by the suite), not a student."""
    answers: str = field(default="", metadata=_does_not_decide("the kit's check only: where it keeps the answers of "
                                                                 "the reference it grades, a speed-up"))
    """The kit's check only: the file of the sealed answers it records (``grader.sandbox.sealed``), named when the
    reference it grades was copied, by that reference's digest; "" for a student, who reads the file of the
    reference that answers their callbacks."""
    reference_use: tuple[tuple[str, int, int], ...] | None = field(
        default=None, metadata=_does_not_decide("measured on the reference, which the fingerprint hashes"))
    """What the reference sent in each test, ``(test id, bytes, messages)`` (the kit's check measured it), from
    which the channel's limits are derived (``grader.sandbox.channel_use``); None while not known yet."""
    kit_failure: str | None = field(default=None, metadata=_does_not_decide("a verdict of this run about the kit, "
                                                                            "never kept as a grade"))
    """Why nothing of this student can be graded (the kit is broken), or None; such a job runs no code."""


def suite_files(suite: Any) -> tuple[SuiteFile, ...]:
    """The suite's test files (``grader.suite.TestFile`` objects) as a job carries them."""
    return tuple(SuiteFile(f.path, f.exercise, f.hidden, f.points) for f in suite)


def grade_deciding_fields() -> tuple[str, ...]:
    """The names of the :class:`Job` fields that can change a grade (the fingerprint hashes them)."""
    return tuple(f.name for f in dataclasses.fields(Job) if f.metadata.get("grade") is True)


@dataclass(frozen=True)
class TestRecord:
    """The outcome of one test for one student, as the recorder saw it."""

    __test__ = False  # not a pytest test class, whatever its name

    nodeid: str
    """pytest's id of the test (``tests/test_01_softmax.py::test_rows_sum_to_one``)."""
    file: str
    """The test file's path (which of the suite's files, and so which points, it counts for)."""
    exercise: str
    """The exercise the test belongs to."""
    outcome: str = "failed"
    """``passed`` or ``failed`` (a skip during the call counts as a failure)."""
    message: str = ""
    """The failure as the student reads it (scrubbed of secret lines, the grader's paths taken out); "" if passed."""
    output: str = ""
    """What the test printed (captured stdout of a visible test's failure); "" otherwise."""
    duration: float = 0.0
    """Seconds the test took, its setup and teardown included."""
    phase: str | None = None
    """Where it first failed (``setup``, ``call`` or ``teardown``), or None."""
    exception: str | None = None
    """The type name of the exception that ended the test (``AssertionError``, ...), or None."""
    internal: str | None = None
    """Why the grader (not the student's code) failed during this test, or None; such a test gets no score."""
    revisit: str = ""
    """The idea its first failure says to revisit (scrubbed), or "": what a hidden test's failure may tell
    before its name and message are shown."""
    sent: int = 0
    """Bytes the student's worker sent the grader during this test (replies, requests to the reference)."""
    calls: int = 0
    """Messages it sent during this test: a reply per call, a request per callback (``grader.sandbox.channel_use``)."""
    functions: tuple[str, ...] = ()
    """Of a failed test, the API functions it had called last when its checks failed (``tests.failures.Failure``
    ``.function``): what its failures are about."""


@dataclass(frozen=True)
class Result:
    """What grading one submission gave, as a grading process sends it back (or the pool makes it, if it died)."""

    records: tuple[TestRecord, ...] = ()
    """One record per test run, in the suite's order."""
    error: str | None = None
    """Why the grader could not grade this submission at all (the student is not graded), or None."""
    seconds: float = 0.0
    """Wall seconds the grading took in its process."""
    isolation: str = "not run"
    """How the student's code was run (``grader.sandbox.limits``'s description), or ``not run``."""
    isolated: bool = True
    """False if the student's code ran without isolation (``--accept-no-isolation``): every output says so."""
    output: str = ""
    """What the student's code printed (in its worker)."""
    refused: tuple[str, ...] = ()
    """Why requests of the student's code to the reference were refused (calls outside its dependencies)."""
    refused_shown: int | None = None
    """How many of ``refused`` came before the first hidden test (None: no hidden test ran): only those are
    shown, since the names are chosen by the student's code and could carry what a hidden test gave it."""
    refusals: int = 0
    """How many such requests were refused."""
    stats: dict[str, int] = field(default_factory=dict)
    """Counts of the calls to the student's worker (``requests``, ``timed_out``, ``crashed``, ``skipped``)."""
    stats_shown: dict[str, int] | None = None
    """``stats`` as they stood when the first hidden test started (None: no hidden test ran): what a student may
    read before grades are published (a call that crashes only on a hidden test's input tells of that input)."""
    refusals_shown: int | None = None
    """``refusals`` as they stood then (None: no hidden test ran)."""
    timing: dict[str, float] = field(default_factory=dict)
    """Where the grading time went (``startup``, ``collection``, ``calls``, ``checks``, ``reports``), in seconds."""
    interrupted: bool = False
    """Whether pytest was interrupted (Ctrl-C): the batch stops, nothing of this student is saved."""

    def before_hidden(self) -> Result:
        """The result as a student may read it before grades are published: the counts from before hidden tests."""
        if self.stats_shown is None:
            return self
        return dataclasses.replace(self, stats=dict(self.stats_shown), refusals=self.refusals_shown or 0)
