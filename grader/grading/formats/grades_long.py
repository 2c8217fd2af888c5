"""``grades-long.csv``: one row per student and exercise (final points, maxima, the hidden tests' part)."""

from __future__ import annotations

from pathlib import Path

from grader.grading import export
from grader.grading.formats import Context
from grader.grading.report import atomic_write
from grader.grading.rows import StudentRow

NAME = "grades-long.csv"
ORDER = 20


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/grades-long.csv`` (with the roster's columns when there is one)."""
    results = [row.results for row in rows]
    roster = None
    if context.roster is not None:
        roster = export.match_roster([row.student for row in rows], export.read_roster(context.roster))
    atomic_write(out / "grades-long.csv", export.long_csv(results, roster))
    return [out / "grades-long.csv"]
