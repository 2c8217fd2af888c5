"""The term's stage of a batch: manual points and late penalties applied to stored results (batch's process).

A rerun recomputes this stage for every student, graded now or kept from an
earlier run, from what each ``results.json`` stores of the grading (its
``computed`` score and per-exercise points): changing ``[late]``,
``[extensions]``, the submission times or the manual points regrades nobody
(none of them is part of the fingerprint), and a regrade loses none of them.

The inputs of the term live in the output folder: ``grade --times CSV`` and
``grade --adjustments CSV`` copy the file given to ``OUT/times.csv`` and
``OUT/adjustments.csv``; a later run without the option uses the stored copy
(give a new file to replace it, a file with the header only to clear it).

The score rule itself is :func:`grader.scoring.final_score`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader import course, scoring, term
from grader.grading.files import atomic_write
from grader.grading.rows import StudentRow
from grader.term import Adjustment, Lateness, LatePolicy

TIMES_FILE = "times.csv"
ADJUSTMENTS_FILE = "adjustments.csv"
MARKER = "\n\n--- Manual points and late penalty ---\n"


@dataclass(frozen=True)
class TermInputs:
    """Everything the term's stage applies: the course's late policy and extensions, times, manual points."""

    late: LatePolicy | None = None
    extensions: dict[str, float] = field(default_factory=dict)
    times: dict[str, datetime] = field(default_factory=dict)
    adjustments: dict[str, tuple[Adjustment, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the instructor should look at, said once with the gradebook

    def lateness(self, student: str) -> Lateness | None:
        """How late ``student`` was (None: no late policy, or no submission time for them)."""
        if self.late is None or student not in self.times:
            return None
        return term.lateness(self.late, self.times[student], self.extensions.get(student, 0.0))


def check_inputs(times: Path | None, adjustments: Path | None, exercises: tuple[str, ...],
                 students: set[str] | None = None) -> None:
    """Read the files given (raises :class:`grader.term.TermError` naming file, row and column).

    ``students``: the batch's ids, when known: a row for any other id is refused.
    """
    if times is not None:
        term.read_times(times, students)
    if adjustments is not None:
        term.read_adjustments(adjustments, exercises, students)


def load_inputs(out: Path, times: Path | None, adjustments: Path | None, exercises: tuple[str, ...],
                students: set[str] | None = None) -> TermInputs:
    """The term's inputs of a batch into ``out``: the files given (kept in ``out``), else the ones kept there.

    A file given is checked against ``students`` (the batch's ids) before it replaces the copy kept.

    Raises
    ------
    grader.term.TermError
        A file (given or kept) that cannot be used: one line naming the file, the row and the column.
    """
    out.mkdir(parents=True, exist_ok=True)
    for given, kept in ((times, out / TIMES_FILE), (adjustments, out / ADJUSTMENTS_FILE)):
        if given is not None and Path(given).resolve() != kept.resolve():
            check_inputs(given if kept.name == TIMES_FILE else None,
                         given if kept.name == ADJUSTMENTS_FILE else None, exercises, students)
            # Written as every file of the gradebook (files.FILE_MODE): the ids, times and reasons are the class's.
            atomic_write(kept, Path(given).read_text(encoding="utf-8-sig"))
    late, extensions = course.late_policy()
    stored_times, stored_adjustments = out / TIMES_FILE, out / ADJUSTMENTS_FILE
    # An extension for an id no entry has: a typo gives the student nothing, silently (an instructor's round);
    # never refused, as the student may not have submitted yet.
    unknown = sorted(set(extensions) - students) if students is not None else []
    notes = (f"[extensions] of the course: {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}: no "
             "submission has this id (a typo? an extension for a student yet to submit is kept)",) if unknown else ()
    return TermInputs(late=late, extensions=extensions,
                      times=term.read_times(stored_times) if stored_times.is_file() else {},
                      adjustments=(term.read_adjustments(stored_adjustments, exercises)
                                   if stored_adjustments.is_file() else {}), notes=notes)


def finalize(row: StudentRow, inputs: TermInputs) -> StudentRow:
    """``row`` with the term applied (a new row): the one place every output's score comes from.

    ``score`` and ``exercises`` become the final points (:func:`grader.scoring.final_score`: manual points
    added, then the late penalty); ``computed`` and ``computed_exercises`` keep the tests' own, and
    ``adjustments`` and ``late`` say why they differ. Applied again to a finalized row, it starts from the
    tests' own score, so a rerun with other inputs loses or doubles nothing.
    """
    adjustments = inputs.adjustments.get(row.student, ())
    late = inputs.lateness(row.student)
    fraction = late.fraction if late is not None else 0.0
    exercises = {}
    counted = [a.points for a in adjustments if a.exercise not in row.computed_exercises]  # the whole submission's
    for name, value in row.computed_exercises.items():
        mine = [a.points for a in adjustments if a.exercise == name]
        exercises[name] = None if value is None else scoring.final_score(value, mine, fraction)
        # An exercise's manual points take at most what it has (its column never goes below 0): the total counts
        # the same, so the per-exercise columns (Canvas, grades-long.csv) add up to it.
        counted.append(sum(mine) if value is None else max(sum(mine), -value))
    score = scoring.final_score(row.computed, counted, fraction)
    output = row.computed_output.split(MARKER)[0]
    note = describe(adjustments, late, row.computed, score)
    return dataclasses.replace(row, score=score, output=output + (MARKER + note if note else ""),
                               exercises=exercises, adjustments=tuple(adjustments), late=late, term_applied=True)


def describe(adjustments: tuple[Adjustment, ...], late: Lateness | None, before: float, after: float) -> str:
    """Plain lines on the manual points and the late penalty ("" when neither applies)."""
    lines = [f"{'+' if a.points >= 0 else ''}{scoring.number(a.points)} points"
             f"{' (' + a.exercise + ')' if a.exercise else ''}: {a.reason}" for a in adjustments]
    if late is not None and late.days_late:
        lines.append(late_line(late))
    if not lines:
        return ""
    return "\n".join([*lines, f"Score from the tests: {scoring.number(before)}; after these: {scoring.number(after)}"])


def late_line(late: Lateness) -> str:
    """One line on a late submission: when, against which deadline, what it cost."""
    extension = f" (with an extension of {scoring.number(late.extension_days)} days)" if late.extension_days else ""
    cost = "the score is 0" if late.fraction >= 1 else f"{scoring.number(100 * late.fraction)}% of the score lost"
    days = f"{late.days_late} started day{'s' if late.days_late != 1 else ''}"
    return f"Late: submitted {late.submitted_at}, {days} after the deadline {late.deadline}{extension}: {cost}"
