"""``canvas.csv`` (Canvas's gradebook import) and ``unmatched.txt``, with a roster only.

The columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one
column per assignment, then a ``Points Possible`` row, as Canvas's own export
writes it. The total goes to one assignment (:func:`canvas_assignment`: the
options, else ``[canvas] assignment_id``/``assignment_name``, else the course
title), or each exercise goes to its own column; ``[canvas.exercise_ids]``
makes those columns fill existing assignments (``Name (ID)``, as Canvas names
them). A roster student without a submission is blank, never 0; so is a row
that was not graded. Every score is final (``grader.scoring.final_score``).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import course
from grader.curriculum import load as load_curriculum
from grader.grading.escaping import escape_text
from grader.grading.files import atomic_write
from grader.grading.formats import Context, typed
from grader.grading.roster import (
    ExportError,
    Roster,
    alike_ids,
    cell,
    match_roster,
    number_cell,
    read_roster,
    unmatched_report,
)
from grader.grading.rows import StudentRow

NAME = "canvas.csv"
ORDER = 30
CANVAS_FIXED = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


@dataclass(frozen=True)
class CanvasAssignment:
    """The Canvas assignment the course total goes to: its name, and its id if it exists already."""

    name: str
    id: str | None = None

    @property
    def column(self) -> str:
        """The column header Canvas matches: ``Name (ID)`` for an existing assignment, else the name."""
        return f"{self.name} ({self.id})" if self.id else self.name


def canvas_assignment(name: str | None = None, assignment_id: str | None = None) -> CanvasAssignment:
    """The Canvas assignment of the export: the options given, else the course folder's ``[canvas]``, else its title.

    The one place that decides it, for ``attention-kit export`` and the
    ``canvas.csv`` of ``attention-kit grade --roster``.

    Raises
    ------
    ExportError
        If the id is not a Canvas id (digits) or the name is empty.
    """
    course_name, course_id = course.canvas()  # the course folder's [canvas] assignment_name, assignment_id
    name = name if name is not None else course_name
    assignment_id = assignment_id if assignment_id is not None else course_id
    if assignment_id is not None:
        assignment_id = str(assignment_id).strip()
        if not assignment_id.isdigit() or not assignment_id.isascii():
            raise ExportError(f"--canvas-assignment-id {assignment_id!r}: a Canvas assignment id is a number, "
                              "the last part of the assignment's address (.../courses/42/assignments/123456)")
    if name is not None and not name.strip():
        raise ExportError("--canvas-assignment-name: the name is empty")
    title = name.strip() if name is not None else (load_curriculum().title or "attention-kit")
    return CanvasAssignment(title, assignment_id)


def canvas_csv(rows: list[StudentRow] | list[dict[str, Any]], roster: Roster,
               roster_rows: dict[str, dict[str, str]], *, per_exercise: bool = False,
               assignment_id: str | None = None, assignment_name: str | None = None) -> str:
    """Canvas's gradebook import CSV: every roster student, in roster order; no submission -> blank."""
    curriculum = load_curriculum()
    rows = typed(rows)
    assignment = canvas_assignment(assignment_name, assignment_id)
    by_student = {row.student: row for row in rows}
    by_folder = {person["folder"]: by_student[student] for student, person in roster.rows.items()}
    sample = next(iter(rows), None)
    names = list(sample.maxima) if sample else []
    if per_exercise:
        if assignment_id is not None or assignment_name is not None:  # the options; the course may name both
            raise ExportError("--canvas-assignment-id and --canvas-assignment-name name one Canvas assignment "
                              "(the total): use them without --per-exercise")
        # One score rule: a manual point of the whole submission counts in the total, which no exercise's
        # column holds; Canvas's sum of the columns would silently lack it.
        whole = [row.student for row in rows if any(not adjustment.exercise for adjustment in row.adjustments)]
        if whole:
            raise ExportError(f"manual points of a whole submission ({', '.join(map(escape_text, whole[:3]))}"
                              f"{' ...' if len(whole) > 3 else ''}) have no column among per-exercise Canvas "
                              "assignments: give each its exercise in --adjustments, or export the total to one "
                              "Canvas assignment (--canvas-assignment-name)")
        ids = course.canvas_exercise_ids()  # [canvas.exercise_ids]: existing assignments
        titles = [f"{curriculum.exercise(n).number}. {curriculum.exercise(n).title}"
                  + (f" ({ids[n]})" if n in ids else "") for n in names]
    else:
        titles = [assignment.column]
    maxima = (([number_cell(sample.maxima[n]) for n in names] if per_exercise else [number_cell(sample.max_score)])
              if sample else [""] * len(titles))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CANVAS_FIXED, *(cell(title) for title in titles)])  # the course's names: cells too
    writer.writerow(["Points Possible", "", "", "", "", *maxima])
    for folder, person in roster_rows.items():
        row = by_folder.get(folder)
        if row is None:
            scores = [""] * len(titles)
        elif per_exercise:
            scores = [number_cell(row.exercises.get(n)) if row.graded else "" for n in names]
        else:
            scores = [number_cell(row.score) if row.graded else ""]
        writer.writerow([cell(person.get("name", "")), cell(person.get("lms_id", "")),
                         cell(person.get("sis_id", "")), cell(person.get("login_id", person.get("email", ""))),
                         cell(person.get("section", "")), *scores])
    return buffer.getvalue()


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/canvas.csv`` and ``out/unmatched.txt`` (nothing without a roster)."""
    if context.roster is None:
        for line in alike_ids([row.student for row in rows]):
            context.echo(f"flagged: {line}")
        return []
    roster_rows = read_roster(context.roster)
    roster = match_roster([row.student for row in rows], roster_rows)
    # Per exercise when asked (--per-exercise), else when the course has [canvas.exercise_ids], unless the options
    # name the one assignment of the total (--canvas-assignment-id/-name: docs/grading.md's import steps).
    named = context.assignment_id is not None or context.assignment_name is not None
    per_exercise = (context.per_exercise if context.per_exercise is not None
                    else bool(course.canvas_exercise_ids()) and not named)
    try:
        text = canvas_csv(rows, roster, roster_rows, per_exercise=per_exercise, assignment_id=context.assignment_id,
                          assignment_name=context.assignment_name)
    except ExportError as error:
        # An earlier run's canvas.csv holds that run's scores: left beside this run's grades.csv it would be
        # imported as though current. It goes; the message says how to write it again.
        stale = out / "canvas.csv"
        if stale.is_file() and not context.same_scores:
            stale.unlink()
            raise ExportError(f"{error} (the canvas.csv of an earlier run, whose scores may be out of date, "
                              "was removed)") from None
        raise
    atomic_write(out / "canvas.csv", text)
    report = unmatched_report(roster)
    atomic_write(out / "unmatched.txt", "\n".join(report) + ("\n" if report else ""))
    for line in report:
        context.echo(f"roster: {line}")
    return [out / "canvas.csv", out / "unmatched.txt"]
