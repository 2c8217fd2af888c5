"""Failures as data: what a graded test found, recorded once, rendered by each reader.

A check helper that finds a problem (``tests/feedback.py``, ``tests/kit.py``)
makes a :class:`Failure`, records it in the running test's ``item.stash``
(:func:`record`) and reports its :attr:`Failure.message` to pytest-check or
``pytest.fail`` exactly as before, so the terminal shows the same text.
``tests/plugin.py`` completes the list when the test ends (the exercise's
reading, the diagnosis, the revisit line of a function to fix first) and puts
it on the test report as plain data (:func:`attach`), so that the readers
outside the test (``attention-kit status``, the notebook runner, the
grader's recorder) render it (:func:`student_text`, :func:`graded_text`)
instead of parsing the text back.

Only plain data crosses a process boundary: :meth:`Failure.as_dict` and
:meth:`Failure.from_dict` (a ``dict`` of ``str``; pytest-xdist serialises a
report's attributes the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import pytest
from pytest_check import check

# What kind of problem a failure is. Only a failed check lets the test go on (pytest-check); every
# other kind ended the test (pytest.fail, or an exception the plugin explained).
CHECK_FAILED = "check failed"  # a property did not hold; the test went on to its next check
WRONG_RESULT = "wrong result"  # a check that ended the test: what came back cannot be checked further
CRASHED = "crashed"  # the student's function raised on valid input
TIMED_OUT = "timed out"  # a call of the student's function ran out of time (the grader's budget)
NOT_IMPLEMENTED = "not implemented"  # the function is still a stub (NotImplementedError)
UNAVAILABLE = "unavailable"  # the function could not be had: its module is missing, does not import, or lacks it
UNUSABLE = "unusable result"  # the test's own code raised on what the function returned
RAISED = "raised"  # after failed checks, the test's own code raised (pytest shows the traceback)
KINDS = (CHECK_FAILED, WRONG_RESULT, CRASHED, TIMED_OUT, NOT_IMPLEMENTED, UNAVAILABLE, UNUSABLE, RAISED)

# What a check that the call left its arguments intact expects (``tests.kit.left_intact``): a failure of it is about
# the inputs, which no output (a known mistake's) shows.
LEFT_INTACT = "the arguments are left exactly as they were"
# pytest-check closes its list of failed checks with this rule and their count ("Failed Checks: 2").
RULE = "-" * 60


@dataclass(frozen=True)
class Failure:
    """One problem a graded test found, as the student should learn of it.

    Every field is a string, so that a failure crosses a process boundary as
    plain data (:meth:`as_dict`). A failure that is one sentence (a stub, a
    module that does not import) has only ``what``.
    """

    what: str
    """What was checked, in the student's terms (``softmax(x) of a (2, 3) array``), or the one sentence."""
    expected: str = ""
    """What a correct implementation gives (``shape (2, 3)``)."""
    observed: str = ""
    """What the student's code gave, or the exception it raised and the student's line that raised it."""
    revisit: str = ""
    """The idea to revisit; for a function that relies on a broken earlier one, "fix that one first"."""
    kind: str = CHECK_FAILED
    """One of :data:`KINDS`: a failed check (the test went on) or what ended the test."""
    reading: str = ""
    """The section of the reading to go back to, a link into docs/reading.md (``docs/reading.md#scaling``);
    "" where the kit does not know it."""
    diagnosis: str = ""
    """The known mistake that explains the exercise's outputs, or which function to fix first (the lines
    ``tests/plugin.py`` puts in front of the report); "" when none is known."""
    test: str = ""
    """The pytest node id of the test that found it (filled in when the test ends)."""
    exercise: str = ""
    """The manifest name of the test's exercise (filled in when the test ends)."""
    functions: str = ""
    """The API functions the test had called when it found the failure, in the order of their first calls,
    separated by spaces (what the failure can be about: an exercise's hint is about some functions' step,
    ``hint_functions`` in the manifest); "" when none."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {self.kind!r}")
        for field in fields(self):
            if not isinstance(getattr(self, field.name), str):
                raise ValueError(f"{field.name} must be a str, got {type(getattr(self, field.name)).__name__}")

    @property
    def ended_the_test(self) -> bool:
        """True unless it is a failed check that let the test go on."""
        return self.kind != CHECK_FAILED

    @property
    def message(self) -> str:
        """The message as the student reads it: what, then expected / observed / (read /) revisit, one a line."""
        read = f"\n  read:     {self.reading}" if self.reading else ""
        if not (self.expected or self.observed or self.revisit):  # one sentence (a stub, a missing module)
            return self.what + read  # its first line stays the sentence; the link follows on its own line
        # The link before the revisit line: the revisit line stays the last (the grader keeps only that line
        # of some hidden tests' reports).
        return (f"{self.what}\n  expected: {self.expected}\n  observed: {self.observed}{read}\n"
                f"  revisit:  {self.revisit}")

    def as_dict(self) -> dict[str, str]:
        """The failure as plain data (every field, by name)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> Failure:
        """The failure that :meth:`as_dict` gave ``data`` for.

        Raises
        ------
        ValueError
            If ``data`` has a key that is no field, lacks ``what``, or holds a value that is not a str.
        """
        names = {field.name for field in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"data has keys that are no field of Failure: {', '.join(unknown)}")
        if "what" not in data:
            raise ValueError("data lacks the key 'what'")
        return cls(**dict(data))


# ---------------------------------------------------------------------------------------------------- recording

FAILURES = pytest.StashKey[list[Failure]]()
# On a test report: the failures as plain data (a list of Failure.as_dict()), set by tests/plugin.py.
REPORT_ATTRIBUTE = "attention_kit_failures"
_running: list[Failure] | None = None  # the list of the test being run (tests/plugin.py sets it around the call)
_reading: Callable[[], dict[str, str]] | None = None  # the running test's reading and function, asked at each record


_Recording = tuple[list[Failure] | None, Callable[[], dict[str, str]] | None]


def begin(item: pytest.Item, reading: Callable[[], dict[str, str]] | None = None) -> _Recording:
    """Record the failures found from now on in ``item``'s stash (a fresh list: a test may be run again).

    ``reading``: gives ``{"reading": link, "functions": names}``, the section of the reading of what the test
    checks and the API functions it called so far (asked when a failure is recorded, so they follow the calls);
    a recorded failure without them gets them. Returns what was recorded into before (a pytest
    run inside a test), for :func:`end`.
    """
    global _running, _reading
    before: _Recording = (_running, _reading)
    _running, _reading = [], reading
    item.stash[FAILURES] = _running
    return before


def end(before: _Recording = (None, None)) -> None:
    """Stop recording for the test; record as before again (:func:`begin` returned it)."""
    global _running, _reading
    _running, _reading = before


def record(failure: Failure) -> Failure:
    """Record ``failure`` for the running test (nothing, outside a test); returns it, with its reading."""
    if _running is not None:
        if (not failure.reading or not failure.functions) and _reading is not None:
            try:
                context = _reading()
            except Exception:  # noqa: BLE001 - a link is a help: never a reason to lose the failure
                context = {}
            missing = {key: value for key, value in context.items() if value and not getattr(failure, key)}
            failure = replace(failure, **missing) if missing else failure
        _running.append(failure)
    return failure


class ChecksStopped(BaseException):
    """pytest-check stopping the test (``-x``, ``--check-max-fail``) at a failed check, on its way out of the test.

    pytest-check stops by raising an AssertionError, which a test's own ``except Exception`` (around a call of the
    student's, whose crash is an answer there) would take for the student's error and report as what the code did
    ("observed: AssertionError: Stopping on first failure"). Not an Exception, it passes through them; the plugin
    gives pytest the AssertionError back where the test ends (``tests.plugin.pytest_runtest_call``).
    """

    def __init__(self, error: AssertionError) -> None:
        super().__init__(str(error))
        self.error = error


def recorded_so_far() -> list[Failure]:
    """The failures recorded for the running test until now (a copy; none outside a test)."""
    return list(_running or [])


def fail_check(failure: Failure) -> Failure:
    """Record ``failure`` and fail the running test's check with its message (the test goes on, unless stopped).

    Where pytest-check stops the test instead (``-x``), it does so with :class:`ChecksStopped`.
    """
    failure = record(failure)
    try:
        check.fail(failure.message)
    except AssertionError as error:
        raise ChecksStopped(error) from None
    return failure


def recorded(item: pytest.Item) -> list[Failure]:
    """The failures recorded for ``item`` during its last run (a copy)."""
    return list(item.stash.get(FAILURES, []))


def keep(item: pytest.Item, failures: Iterable[Failure]) -> None:
    """Replace ``item``'s failures by ``failures`` (the plugin's completed list)."""
    item.stash[FAILURES] = list(failures)


def attach(report: pytest.TestReport, failures: Iterable[Failure]) -> None:
    """Put ``failures`` on ``report`` as plain data, for readers that see the report only."""
    setattr(report, REPORT_ATTRIBUTE, [failure.as_dict() for failure in failures])


def failures_of(source: Any) -> list[Failure]:
    """The failures of a test: from its item's stash, or from a report the plugin completed.

    Parameters
    ----------
    source : pytest.Item or pytest.TestReport
        The test's item (during the run), or its report (in ``pytest_runtest_logreport``; also a report
        that pytest-xdist rebuilt from plain data).

    Returns
    -------
    list of Failure
        In the order they were found; empty when the test found none (it passed, was skipped, or failed
        in a way no check helper explained, e.g. an error in a fixture).
    """
    if isinstance(source, pytest.Item):
        return recorded(source)
    return [Failure.from_dict(data) for data in getattr(source, REPORT_ATTRIBUTE, None) or []]


# ---------------------------------------------------------------------------------------------------- rendering


def _parts(failures: Iterable[Failure]) -> tuple[list[Failure], Failure | None, str]:
    """The failed checks, the failure that ended the test (if any), and the diagnosis in front of them."""
    failures = list(failures)
    checks = [failure for failure in failures if not failure.ended_the_test]
    ending = next((failure for failure in failures if failure.ended_the_test), None)
    lead = next((failure.diagnosis for failure in failures if failure.diagnosis), "")
    return checks, ending, lead


def checks_text(failures: Iterable[Failure]) -> str:
    """The failed checks as pytest-check lists them: ``FAILURE: <message>``, one after the other."""
    # (pytest-check strips each message it is given)
    return "\n".join(f"FAILURE: {failure.message.strip()}" for failure in failures if not failure.ended_the_test)


def student_text(failures: Iterable[Failure], separator: str = "\n") -> str:
    """A test's failures as ``attention-kit status`` (and the notebook runner) show them.

    The diagnosis (if any) first, then ``separator``, then the failed checks' blocks; when no check
    failed, the message of what ended the test. (A crash after failed checks is not shown: the checks
    come first, as they did when this text was cut out of pytest's report.)

    Parameters
    ----------
    failures : iterable of Failure
        The test's failures (:func:`failures_of`); none gives "".
    separator : str
        Between the diagnosis and the rest (status: a line break; the notebook: a blank line).
    """
    checks, ending, lead = _parts(failures)
    body = checks_text(checks) if checks else (ending.message if ending is not None else "")
    return f"{lead}{separator}{body}" if lead and body else body


def _report_body(checks: list[Failure], ending: Failure | None, count: bool) -> str:
    """The report of the test as the terminal shows it, after pytest-check made it.

    pytest-check heads it with ``<node id>:0: <first line of the first check>`` and closes its list
    with :data:`RULE` and the count; what ended the test comes after another rule.
    """
    if not checks:
        return ending.message if ending is not None else ""
    text = f"{checks[0].test}:0: {checks[0].message.strip().splitlines()[0]}\n\n{checks_text(checks)}"
    if ending is not None:
        return f"{text}\n{RULE}\nFailed Checks: {len(checks)}\n{RULE}\n{ending.message}"
    return f"{text}\n{RULE}\nFailed Checks: {len(checks)}" if count else text


def stopped_report(checks: list[Failure]) -> tuple[str, str]:
    """The report of a test that ``pytest -x`` stopped at a failed check, and its summary line's message.

    pytest-check stops by raising, and its report goes on with that exception's traceback, which
    runs through tests/feedback.py and says nothing the failed check does not: both end after the count.
    """
    count = f"{RULE}\nFailed Checks: {len(checks)}\n{RULE}"
    return f"{report_text(checks)}\n{RULE}\n", f"{checks[0].message.strip()}\n{count}"


def traceback_after_checks(text: str, count: int) -> str | None:
    """The traceback pytest gives of the test's own code in pytest-check's report of ``count`` failed checks, if any.

    pytest-check closes the checks with :data:`RULE` and their count, and the traceback follows: after a
    second rule before pytest-check 3.1, at once from 3.1 (which keeps pytest's own rendering of it).
    """
    closing = f"{RULE}\nFailed Checks: {count}\n"
    if closing not in text:
        return None
    rest = text.split(closing, 1)[1]
    return rest.removeprefix(f"{RULE}\n")


def report_text(failures: Iterable[Failure], traceback: str = "") -> str:
    """The failure report of the test as pytest prints it (with the diagnosis in front, if any).

    ``traceback``: pytest's own text of what ended the test after the failed checks (the test's own code
    raised, :data:`RAISED`), shown where that failure's one line would be.
    """
    checks, ending, lead = _parts(failures)
    if traceback and checks and ending is not None and ending.kind == RAISED:
        body = f"{_report_body(checks, None, count=True)}\n{RULE}\n{traceback}"
    else:
        body = _report_body(checks, ending, count=True)
    return f"{lead}\n\n{body}" if lead else body


def graded_text(failures: Iterable[Failure], *, hidden: bool) -> str:
    """What the grader's record keeps of a test's failures, before its paths are cleaned and secrets scrubbed.

    Parameters
    ----------
    failures : iterable of Failure
        The test's failures (:func:`failures_of` of its report); none gives "".
    hidden : bool
        A hidden test: the checks' messages only, never a source line and never the diagnosis in front
        (the student does not see the test). Otherwise the report as pytest prints it.

    Returns
    -------
    str
        Without pytest-check's closing rule and count (the messages above say it all). For a hidden
        test this is what the recorder's ``_hidden_failure`` gave: the checks' report from its
        first line; for a test that a failure ended, that failure's message; for a report that
        ``tests/plugin.py`` rewrote (a diagnosis in front, or a test that could not use the result)
        and has no failed check, its last line only. (One difference: where the test's own code
        raised after failed checks, the :data:`RAISED` line stands where pytest's traceback was.)
    """
    checks, ending, lead = _parts(failures)
    body = _report_body(checks, ending, count=False)
    if not hidden:
        return f"{lead}\n\n{body}" if lead and body else body
    if checks or ending is None:
        return body
    if lead or ending.kind == UNUSABLE:
        # Kept as _hidden_failure gave it (it read the last line of a report without pytest's crash
        # line); showing the whole message would change what students have been shown.
        return (f"{lead}\n\n{body}" if lead else body).splitlines()[-1]
    return body
