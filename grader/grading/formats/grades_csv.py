"""``grades.csv``: one row per student, the final score and the score before the term's rules."""

from __future__ import annotations

from pathlib import Path

from grader.grading.formats import Context
from grader.grading.report import atomic_write, gradebook_csv
from grader.grading.rows import StudentRow

NAME = "grades.csv"
ORDER = 10


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/grades.csv``."""
    atomic_write(out / "grades.csv", gradebook_csv([row.results for row in rows]))
    return [out / "grades.csv"]
