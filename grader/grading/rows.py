"""A student's row as every output reads it: one typed record built from their ``results.json``.

Made by: the batch (``grader.grading.grade``), after the term's stage
(``grader.grading.term_stage.finalize``) gave each student's results their
final score; ``attention-kit export`` builds the same from the stored files.
Read by: every export format (``grader.grading.formats``): the gradebooks,
Canvas, feedback.md, the class report. A format reads the fields here, so a
change of the on-disk layout is made in :meth:`StudentRow.from_results` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader import scoring
from grader.term import Adjustment, Lateness

NOT_GRADED = "not graded"


@dataclass(frozen=True)
class StudentRow:
    """One student's result, with the score before and after the term's rules."""

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
    hidden_maxima: dict[str, float] = field(default_factory=dict)
    """Per exercise, the hidden tests' part of its maximum."""
    adjustments: tuple[Adjustment, ...] = ()
    late: Lateness | None = None
    tests: tuple[dict[str, Any], ...] = ()
    """The Gradescope test entries (name, score, max_score, status, output, visibility, tags, extra_data)."""
    isolation: str = ""
    isolated: bool = True
    """False if the student's code ran without isolation (every output says so)."""
    seconds: float = 0.0
    results: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The results.json this row was read from (for the formats that write it or Gradescope's text)."""

    @property
    def graded(self) -> bool:
        """Whether every test has a score (the grader did not fail on any)."""
        return not self.status.startswith(NOT_GRADED)

    @classmethod
    def from_results(cls, results: dict[str, Any]) -> StudentRow:
        """The row of a results.json (a finalized one, or one from before the term's stage: then no change)."""
        extra = results["extra_data"]
        before = extra.get("computed") or {"score": results.get("score", 0.0), "exercises": extra["exercises"]}
        late = extra.get("late")
        return cls(student=extra["student"], status=str(extra["status"]), score=float(results.get("score", 0.0)),
                   computed=float(before["score"]), max_score=float(extra["max_score"]),
                   exercises=dict(extra["exercises"]), computed_exercises=dict(before["exercises"]),
                   maxima=dict(extra["max_exercises"]), hidden_maxima=_hidden_maxima(results),
                   adjustments=tuple(Adjustment(**a) for a in extra.get("adjustments") or ()),
                   late=Lateness(**late) if late else None, tests=tuple(results.get("tests", ())),
                   isolation=str(extra.get("isolation", "")), isolated=bool(extra.get("isolated", True)),
                   seconds=float(results.get("execution_time", 0)),
                   results=results)


def _hidden_maxima(results: dict[str, Any]) -> dict[str, float]:
    """Per exercise, the points of its hidden tests (tagged ``hidden``)."""
    hidden: dict[str, float] = {name: 0.0 for name in results["extra_data"]["max_exercises"]}
    for test in results.get("tests", ()):
        exercise = test.get("extra_data", {}).get("exercise")
        if exercise in hidden and "hidden" in test.get("tags", ()):
            hidden[exercise] = scoring.total([hidden[exercise], test["max_score"]])
    return hidden
