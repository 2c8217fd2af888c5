"""``grades.csv``: one row per student, the final score, the points per exercise, and the term's columns."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from grader import scoring
from grader.curriculum import load as load_curriculum
from grader.grading.escaping import csv_cell
from grader.grading.files import atomic_write
from grader.grading.formats import Context, typed
from grader.grading.rows import StudentRow

NAME = "grades.csv"
ORDER = 10
TERM_COLUMNS = ("score_before", "adjustments", "days_late", "late_penalty")


def gradebook_csv(rows: list[StudentRow] | list[dict[str, Any]]) -> str:
    """``grades.csv``: student, status, score, max_score, one column per exercise, then the term's columns.

    ``score`` is the final score (manual points added, late penalty taken: ``grader.scoring.final_score``);
    ``score_before`` the tests' own, ``adjustments`` the manual points' sum, ``days_late`` and ``late_penalty``
    (the fraction lost) the late penalty's. Text cells go through ``csv_cell``; a score that was not graded is
    an empty cell, never a 0.
    """
    names = load_curriculum().selected_names()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "status", "score", "max_score", *(csv_cell(name) for name in names), *TERM_COLUMNS])
    for row in sorted(typed(rows), key=lambda r: r.student):
        writer.writerow([
            csv_cell(row.student),
            csv_cell(row.status),
            scoring.number(row.score) if row.graded else "",
            scoring.number(row.max_score),
            *(scoring.number(row.exercises[n]) if row.exercises.get(n) is not None else "" for n in names),
            scoring.number(row.computed) if row.graded else "",
            scoring.number(sum(a.points for a in row.adjustments)),
            str(row.late.days_late if row.late is not None else 0),
            scoring.number(row.late.fraction if row.late is not None else 0.0),
        ])
    return buffer.getvalue()


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/grades.csv``."""
    atomic_write(out / "grades.csv", gradebook_csv(rows))
    return [out / "grades.csv"]
