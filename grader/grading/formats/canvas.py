"""``canvas.csv`` (Canvas's gradebook import) and ``unmatched.txt``, with a roster only.

The total goes to one assignment (``[canvas] assignment_id``/``assignment_name`` or the options), or each
exercise to its own column; ``[canvas.exercise_ids]`` makes those columns fill existing assignments.
"""

from __future__ import annotations

from pathlib import Path

from grader import course
from grader.grading import export
from grader.grading.formats import Context
from grader.grading.report import atomic_write
from grader.grading.rows import StudentRow

NAME = "canvas.csv"
ORDER = 30


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/canvas.csv`` and ``out/unmatched.txt`` (nothing without a roster)."""
    results = [row.results for row in rows]
    if context.roster is None:
        for line in export.alike_ids([row.student for row in rows]):
            context.echo(f"flagged: {line}")
        return []
    roster_rows = export.read_roster(context.roster)
    roster = export.match_roster([row.student for row in rows], roster_rows)
    per_exercise = context.per_exercise if context.per_exercise is not None else bool(course.canvas_exercise_ids())
    atomic_write(out / "canvas.csv", export.canvas_csv(results, roster, roster_rows, per_exercise=per_exercise,
                                                       assignment_id=context.assignment_id,
                                                       assignment_name=context.assignment_name))
    report = export.unmatched_report(roster)
    atomic_write(out / "unmatched.txt", "\n".join(report) + ("\n" if report else ""))
    for line in report:
        context.echo(f"roster: {line}")
    return [out / "canvas.csv", out / "unmatched.txt"]
