"""A student's scored result as every output reads it: a typed row of typed test entries.

Made by: the batch (``grader.grading.grade``), from the worker's typed
:class:`grader.grading.records.Result` (``grader.grading.scored.scored_row``);
the term's stage (``grader.grading.term_stage.finalize``) gives it its final
score (a new row). ``attention-kit export``, a resumed batch and the Gradescope
runner read it back from a stored ``results.json`` (:meth:`StudentRow.from_json`,
which validates the file and names the field that is wrong).
Read by: every export format (``grader.grading.formats``), results.json among
them (:meth:`StudentRow.to_json` is the one place its layout is written). No
format reads a results.json dict or a test's dict.

Numbers keep the type they were scored with (an ``int`` stays ``10``, never
``10.0``): the files written are the same, byte for byte, as the row they came
from.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import scoring
from grader.term import Adjustment, Lateness

NOT_GRADED = "not graded"
# Where results.json keeps the numbers of a row the grader failed on (and of its tests): never Gradescope's "score".
UNGRADED = "score_not_graded"
# Bump when the layout of results.json changes: older results are then regraded.
RESULTS_FORMAT = 2
# Gradescope's fixed top-level settings of a results.json (its text formats and what students see).
GRADESCOPE_SETTINGS = {"output_format": "text", "test_output_format": "text", "visibility": "visible",
                       "stdout_visibility": "hidden"}


class ResultsFileError(ValueError):
    """A stored results.json that is not a row: the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class TestEntry:
    """One scored test of a student (a Gradescope test entry): what they earned of it, and why."""

    __test__ = False  # not a pytest test class, whatever its name

    name: str
    """``<exercise>: <test>``; for an exercise that did not run, ``<exercise>: did not run`` (the student's code
    kept it from running: 0) or ``<exercise>: not graded`` (the grader failed: no score)."""
    number: str
    """Gradescope's number: ``<exercise number>.<index>`` (``<exercise number>`` for a whole exercise)."""
    max_score: float
    status: str
    """``passed`` or ``failed``."""
    output: str
    """What the student reads of it ("" for a passed test)."""
    exercise: str
    score: float | None = None
    """Points earned; None when the grader could not grade it (never a 0)."""
    tags: tuple[str, ...] = ()
    """The exercise's name, and ``hidden`` for an instructor's hidden test."""
    visibility: str = "visible"
    """Gradescope's visibility (a hidden test's is the course's ``[hidden] visibility``)."""
    nodeid: str | None = None
    """pytest's id of the test; None for an exercise that could not run."""
    duration: float = 0.0
    not_graded: str | None = None
    """Why the grader failed on it (it then has no score), or None."""
    revisit: str = ""
    """Of a failed test, the idea its failure says to revisit ("" if none): what feedback.md tells of a failed
    hidden test before grades are published, in place of its name and message."""
    hidden_points: float = 0.0
    """Of a whole exercise's one entry (it did not run), the points its hidden tests are worth: they stay hidden
    in the score a student sees before grades are published."""
    functions: tuple[str, ...] = ()
    """Of a failed test, the API functions its failures are about (``TestRecord.functions``): whether the
    exercise's hint, about one step, concerns it."""

    @property
    def graded(self) -> bool:
        """Whether it has a score."""
        return self.score is not None

    @property
    def passed(self) -> bool:
        """Whether the test passed."""
        return self.status == "passed"

    @property
    def hidden(self) -> bool:
        """Whether it is a hidden test."""
        return "hidden" in self.tags

    @property
    def shown_name(self) -> str:
        """Its name in a class's summary: a hidden test that shares a public one's name is told apart."""
        return f"{self.name} (hidden)" if self.hidden else self.name

    @property
    def visible(self) -> bool:
        """Whether students see it before grades are published."""
        return self.visibility == "visible"

    def to_json(self) -> dict[str, Any]:
        """The entry as results.json holds it (Gradescope's keys, the grader's in ``extra_data``)."""
        entry: dict[str, Any] = {"name": self.name, "number": self.number}
        if self.score is not None:
            entry["score"] = self.score
        entry.update(max_score=self.max_score, status=self.status, output=self.output, tags=list(self.tags),
                     visibility=self.visibility)
        extra: dict[str, Any] = {"exercise": self.exercise, "nodeid": self.nodeid, "duration": self.duration}
        if self.not_graded is not None:
            extra["not_graded"] = self.not_graded
        if self.hidden_points:
            extra["hidden_points"] = self.hidden_points
        if self.revisit:
            extra["revisit"] = self.revisit
        if self.functions:
            extra["functions"] = list(self.functions)
        entry["extra_data"] = extra
        return entry

    @classmethod
    def from_json(cls, entry: Any, where: str = "test") -> TestEntry:
        """The entry of a results.json's ``tests`` list (raises :class:`ResultsFileError` naming the field)."""
        data = _mapping(entry, where)
        extra = _mapping(data.get("extra_data"), f"{where}.extra_data")
        score = data.get("score", extra.get(UNGRADED))  # (a row not graded keeps it in extra_data: to_json)
        # Gradescope's optional keys (number, output, tags, visibility) have its defaults.
        # The names, numbers and tags of a suite's tests are every student's: shared (interned), not one copy per
        # row, so that the rows of a class read back at the end of a batch take little room each.
        return cls(name=_shared(_text(data, "name", where)), number=_shared(_text(data, "number", where, "")),
                   max_score=_number(data, "max_score", where), status=_shared(_text(data, "status", where)),
                   output=_text(data, "output", where, ""),
                   exercise=_shared(_text(extra, "exercise", f"{where}.extra_data")),
                   score=None if score is None else _number({"score": score}, "score", where),
                   tags=_TAGS.setdefault(tags := tuple(map(_shared, _texts(data, "tags", where))), tags),
                   visibility=_shared(_text(data, "visibility", where, "visible")),
                   nodeid=None if extra.get("nodeid") is None
                   else _shared(_text(extra, "nodeid", f"{where}.extra_data")),
                   duration=_number(extra, "duration", f"{where}.extra_data", 0.0),
                   not_graded=None if extra.get("not_graded") is None
                   else _text(extra, "not_graded", f"{where}.extra_data"),
                   hidden_points=_number(extra, "hidden_points", f"{where}.extra_data", 0.0),
                   revisit=_text(extra, "revisit", f"{where}.extra_data", ""),
                   functions=tuple(map(_shared, _texts(extra, "functions", f"{where}.extra_data"))))


@dataclass(frozen=True)
class StudentRow:
    """One student's scored result, with the score before and after the term's rules."""

    student: str
    status: str
    score: float
    """The final score (:func:`grader.scoring.final_score`): what the gradebooks and LMS exports carry."""
    computed: float
    """The tests' own score, before manual points and the late penalty."""
    max_score: float
    exercises: dict[str, float | None]
    """Final points per exercise (None: not graded)."""
    computed_exercises: dict[str, float | None]
    maxima: dict[str, float]
    adjustments: tuple[Adjustment, ...] = ()
    late: Lateness | None = None
    tests: tuple[TestEntry, ...] = ()
    isolation: str = ""
    isolated: bool = True
    """False if the student's code ran without isolation (every output says so)."""
    seconds: float = 1
    """Whole seconds the grading took (at least 1, as Gradescope's ``execution_time``)."""
    output: str = ""
    """The text Gradescope shows on top (the term's note at its end)."""
    computed_output: str = ""
    """That text before the term's note."""
    fingerprint: str = ""
    """What the row was graded from (``grader.grading.fingerprint``): a rerun keeps the row while it is unchanged."""
    source: str = ""
    """The submission's entry in SUBMISSIONS."""
    kit_version: str = ""
    refused: tuple[str, ...] = ()
    calls: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    term_applied: bool = False
    """Whether the term's stage made this row (results.json then keeps ``computed``, ``adjustments``, ``late``)."""
    stored: bool = True
    """False for a row the grader could not write (kept in memory for the gradebook: no folder, no file of its own)."""

    @property
    def graded(self) -> bool:
        """Whether every test has a score (the grader did not fail on any)."""
        return not self.status.startswith(NOT_GRADED)

    @property
    def hidden_maxima(self) -> dict[str, float]:
        """Per exercise, the points of its hidden tests (tagged ``hidden``).

        An exercise whose tests did not run (a syntax error, a missing module) is one entry whose ``max_score`` is
        the whole exercise's, hidden tests included: its ``hidden_points`` say how much of that they are, so the
        exercise's hidden maximum is the same whether its tests ran or not.
        """
        hidden: dict[str, float] = {name: 0.0 for name in self.maxima}
        for test in self.tests:
            if test.exercise not in hidden:
                continue
            if test.hidden:
                hidden[test.exercise] = scoring.total([hidden[test.exercise], test.max_score])
            elif test.hidden_points:
                hidden[test.exercise] = scoring.total([hidden[test.exercise], test.hidden_points])
        return hidden

    def to_json(self) -> dict[str, Any]:
        """The row as results.json holds it: Gradescope's autograder format, the grader's own in ``extra_data``."""
        extra: dict[str, Any] = {
            "student": self.student, "status": self.status, "exercises": dict(self.exercises),
            "max_exercises": dict(self.maxima), "max_score": self.max_score, "format": RESULTS_FORMAT,
            "fingerprint": self.fingerprint, "source": self.source, "isolation": self.isolation,
            "isolated": self.isolated, "kit_version": self.kit_version, "refused": list(self.refused),
            "calls": dict(self.calls), "timing": dict(self.timing),
        }
        if self.term_applied:
            extra.update(computed={"score": self.computed, "exercises": dict(self.computed_exercises),
                                   "output": self.computed_output},
                         adjustments=[dataclasses.asdict(a) for a in self.adjustments],
                         late=dataclasses.asdict(self.late) if self.late is not None else None)
        data = {"score": self.score, "execution_time": self.seconds, "output": self.output, **GRADESCOPE_SETTINGS,
                "tests": [test.to_json() for test in self.tests], "extra_data": extra}
        if not self.graded:  # no score that a tool could take for a grade (Gradescope sums the tests' where the
            # total is missing): a row the grader failed on keeps its numbers under the grader's own key only
            # (``UNGRADED``, read back by from_json), and ``extra_data.status`` says why.
            extra[UNGRADED] = data.pop("score")
            for test in data["tests"]:
                if "score" in test:
                    test["extra_data"][UNGRADED] = test.pop("score")
        return data

    @classmethod
    def from_json(cls, results: Any, where: str = "results.json") -> StudentRow:
        """The row of a stored results.json (a finalized one, or one from before the term's stage).

        Raises
        ------
        ResultsFileError
            If a field is missing or of the wrong type: the message names ``where`` (the file) and the field.
        """
        data = _mapping(results, where)
        extra = _mapping(data.get("extra_data"), f"{where}: extra_data")
        at = f"{where}: extra_data"
        score = _number(data, "score", where, _number(extra, UNGRADED, f"{where}: extra_data", 0.0))
        output = _text(data, "output", where, "")
        exercises = _scores(extra, "exercises", at)
        computed = extra.get("computed")
        before = _mapping(computed, f"{at}.computed") if computed is not None else {}
        tests = data.get("tests", [])
        if not isinstance(tests, list):
            raise ResultsFileError(f"{where}: tests: expected a list, found {type(tests).__name__}")
        late = extra.get("late")
        try:
            adjustments = tuple(Adjustment(**_mapping(a, f"{at}.adjustments"))
                                for a in _list(extra, "adjustments", at))
            lateness = Lateness(**_mapping(late, f"{at}.late")) if late is not None else None
        except TypeError as error:
            raise ResultsFileError(f"{at}: adjustments/late: {error}") from None
        refused, calls, timing = extra.get("refused", []), extra.get("calls", {}), extra.get("timing", {})
        return cls(student=_text(extra, "student", at), status=_text(extra, "status", at), score=score,
                   computed=_number(before, "score", f"{at}.computed") if before else score,
                   max_score=_number(extra, "max_score", at), exercises=exercises,
                   computed_exercises=_scores(before, "exercises", f"{at}.computed") if before else dict(exercises),
                   maxima=_scores(extra, "max_exercises", at), adjustments=adjustments, late=lateness,
                   tests=tuple(TestEntry.from_json(t, f"{where}: tests[{i}]") for i, t in enumerate(tests)),
                   isolation=_text(extra, "isolation", at, ""), isolated=bool(extra.get("isolated", True)),
                   seconds=_number(data, "execution_time", where, 0),
                   output=output, computed_output=_text(before, "output", f"{at}.computed", output),
                   fingerprint=_text(extra, "fingerprint", at, ""), source=_text(extra, "source", at, ""),
                   kit_version=_text(extra, "kit_version", at, ""),
                   refused=tuple(_texts(extra, "refused", at) if refused else ()),
                   calls=dict(_mapping(calls, f"{at}.calls")), timing=dict(_mapping(timing, f"{at}.timing")),
                   term_applied=computed is not None)

    @classmethod
    def read(cls, path: Path) -> StudentRow:
        """The row stored in ``path`` (a results.json); :class:`ResultsFileError` names the file and field."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ResultsFileError(f"{path}: not readable as JSON ({type(error).__name__}: {error})") from None
        return cls.from_json(data, str(path))


def typed(rows: Iterable[StudentRow | Mapping[str, Any]]) -> list[StudentRow]:
    """``rows`` as typed rows (a results.json dict is read by :meth:`StudentRow.from_json`)."""
    return [row if isinstance(row, StudentRow) else StudentRow.from_json(row) for row in rows]


# ---------------------------------------------------------------- validation of a stored file


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ResultsFileError(f"{where}: expected an object, found {type(value).__name__}")
    return value


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise ResultsFileError(f"{where}.{key}: expected a list, found {type(value).__name__}")
    return value


_MISSING = object()


_TAGS: dict[tuple[str, ...], tuple[str, ...]] = {}  # each tuple of tags once (a suite has a few: its exercises')


def _shared(text: str) -> str:
    """``text``, one copy for every row that holds it (``sys.intern``)."""
    return sys.intern(text)


def _text(data: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> str:
    value = data.get(key, default)
    if value is _MISSING:
        raise ResultsFileError(f"{where}.{key}: missing")
    if not isinstance(value, str):
        raise ResultsFileError(f"{where}.{key}: expected text, found {type(value).__name__}")
    return value


def _texts(data: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = _list(data, key, where)
    if not all(isinstance(item, str) for item in value):
        raise ResultsFileError(f"{where}.{key}: expected a list of texts")
    return value


def _number(data: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> Any:
    value = data.get(key, default)
    if value is _MISSING:
        raise ResultsFileError(f"{where}.{key}: missing")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultsFileError(f"{where}.{key}: expected a number, found {type(value).__name__}")
    return value


def _scores(data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    values = _mapping(data.get(key), f"{where}.{key}")
    for name, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ResultsFileError(f"{where}.{key}.{name}: expected a number or null, found {type(value).__name__}")
    return dict(values)
