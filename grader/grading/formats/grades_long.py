"""``grades-long.csv``: one row per student and exercise (final points, maxima, the hidden tests' part)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from grader.grading.files import atomic_write
from grader.grading.formats import Context, typed
from grader.grading.roster import Roster, cell, match_roster, number_cell, read_roster
from grader.grading.rows import StudentRow

NAME = "grades-long.csv"
ORDER = 20
COLUMNS = ("student", "lms_id", "name", "email", "exercise", "points", "max", "hidden_max", "status")


def exercise_rows(row: StudentRow | dict[str, Any]) -> list[dict[str, Any]]:
    """Per exercise of one student: final points, maximum and the hidden tests' part of it, in the course's order."""
    (row,) = typed([row])
    return [{"exercise": name, "points": row.exercises.get(name, 0.0), "max": row.maxima[name],
             "hidden_max": row.hidden_maxima.get(name, 0.0)} for name in row.maxima]


def long_csv(rows: list[StudentRow] | list[dict[str, Any]], roster: Roster | None = None) -> str:
    """``grades-long.csv``: one row per student and exercise (every text cell through :func:`cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in sorted(typed(rows), key=lambda r: r.student):
        person = (roster.rows.get(row.student) if roster else None) or {}
        for item in exercise_rows(row):
            writer.writerow([cell(row.student), cell(person.get("lms_id", "")), cell(person.get("name", "")),
                             cell(person.get("email", "")), cell(item["exercise"]), number_cell(item["points"]),
                             number_cell(item["max"]), number_cell(item["hidden_max"]), cell(row.status)])
    return buffer.getvalue()


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/grades-long.csv`` (with the roster's columns when there is one)."""
    roster = None
    if context.roster is not None:
        roster = match_roster([row.student for row in rows], read_roster(context.roster))
    atomic_write(out / "grades-long.csv", long_csv(rows, roster))
    return [out / "grades-long.csv"]
