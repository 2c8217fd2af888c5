"""``attention-kit export``: the graded class in the formats LMS gradebooks import (instructors).

::

    attention-kit export GRADES --roster roster.csv              # GRADES/canvas.csv and GRADES/grades-long.csv
    attention-kit export GRADES --roster roster.csv --per-exercise   # one Canvas column per exercise
    attention-kit export GRADES --published       # grades published: feedback.md shows the hidden tests too
    attention-kit export GRADES --merge OUT-1 OUT-2   # the shards of `grade --shard I/N` into one gradebook

``GRADES`` is the ``--out`` folder of ``attention-kit grade``; everything is read
from its per-student ``results.json`` files, so an export can be redone at any
time. ``attention-kit grade`` writes ``grades-long.csv`` itself, and
``canvas.csv`` too when given ``--roster``.

The roster maps submissions to students: a CSV with a header row and the
columns ``folder`` (the submission's name in SUBMISSIONS, the student id of the
gradebook), ``lms_id`` (Canvas's user ID), ``name`` and ``email``, and
optionally ``sis_id``, ``login_id`` and ``section``. Submissions without a
roster row and roster rows without a submission are both reported (and listed
in ``unmatched.txt``). Matching is exact: ids that differ only in case, spaces
or Unicode form are flagged there, never matched; the Canvas file leaves a student without a submission
blank, never 0, so a missing hand-in is not mistaken for a graded one.

Files:

- ``grades-long.csv``: one row per student and exercise: ``student, lms_id,
  name, email, exercise, points, max, hidden_max, status`` (``max`` includes
  the hidden tests' points, ``hidden_max`` says how many of them there are);
- ``canvas.csv``: Canvas's gradebook import format (Grades > Import): the
  columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column
  per assignment (the course total, or one per exercise), then a ``Points
  Possible`` row, as Canvas's own export writes it. Canvas names an existing
  assignment's column ``Name (ID)``, e.g. ``Self-attention (123456)``: a
  column with the assignment's id fills that assignment
  (``--canvas-assignment-id``, with ``--canvas-assignment-name`` for its
  name, default the course title); a name without an id makes Canvas create
  a new assignment. Both are read in one place, :func:`canvas_assignment`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grader.grading.formats import Context, write_all
from grader.grading.formats.canvas import CanvasAssignment, canvas_assignment, canvas_csv  # noqa: F401 - its API
from grader.grading.formats.grades_long import exercise_rows, long_csv  # noqa: F401 - its API
from grader.grading.roster import (  # noqa: F401 - the command's API, kept where its callers find it
    OPTIONAL_ROSTER_COLUMNS,
    ROSTER_COLUMNS,
    ROSTER_FILE,
    ExportError,
    Roster,
    alike_ids,
    id_key,
    kept_roster,
    match_roster,
    read_roster,
    show_id,
    unmatched_report,
)
from grader.grading.rows import StudentRow, typed
from grader.grading.shard import ShardError, merge


def export(out: Path, rows: list[StudentRow] | list[dict[str, Any]], roster_path: Path | None, *,
           per_exercise: bool | None = None,
           assignment_id: str | None = None, assignment_name: str | None = None, echo: Any = print,
           same_scores: bool = False) -> list[Path]:
    """Write the LMS exports of a graded class into ``out`` (the formats grades-long.csv and canvas.csv).

    ``same_scores``: ``rows`` are the ones ``out``'s canvas.csv was written from, so a refused Canvas export (bad
    options) leaves that file as it is.
    """
    context = Context(roster=roster_path, per_exercise=per_exercise, assignment_id=assignment_id,
                      assignment_name=assignment_name, echo=echo, same_scores=same_scores)
    return write_all(out, typed(rows), context, only=("grades-long.csv", "canvas.csv"))


def read_graded(out: Path) -> list[StudentRow]:
    """The typed row of every complete results.json under ``out`` (one folder per student).

    Raises
    ------
    ExportError
        If ``out`` holds no graded student, or a results.json of this format is broken (naming file and field).
    """
    from grader.grading.report import read_row
    from grader.grading.rows import ResultsFileError

    if not out.is_dir():
        raise ExportError(f"{out}: no such folder (give the --out folder of `attention-kit grade`)")
    try:
        rows = [r for r in (read_row(out, p.name) for p in sorted(out.iterdir()) if p.is_dir()) if r is not None]
    except ResultsFileError as error:
        raise ExportError(f"{error} (regrade that student: `attention-kit grade ... --only ID`)") from None
    if not rows:
        raise ExportError(f"{out}: no graded students in it (no <student>/results.json)")
    return rows


def check_course(out: Path, rows: list[StudentRow]) -> None:
    """Refuse a gradebook graded with exercises the course no longer has (its exports would name them, or crash).

    Raises
    ------
    ExportError
        Naming the exercises and the two ways out: regrade, or export with the course it was graded with.
    """
    from grader.curriculum import load as load_curriculum

    curriculum = load_curriculum()
    known = {exercise.name for exercise in curriculum.exercises}
    gone = sorted({name for row in rows for name in row.maxima} - known)
    if gone:
        raise ExportError(f"{out} was graded with exercise(s) {', '.join(gone)}, which the course no longer has "
                          f"(its exercises: {', '.join(e.name for e in curriculum.exercises)}): regrade "
                          "(`attention-kit grade SUBMISSIONS --out GRADES`) so the gradebook follows the course, "
                          "or export with the --course it was graded with")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit export``."""
    parser.add_argument("grades", type=Path, metavar="GRADES", help="the --out folder of `attention-kit grade`")
    parser.add_argument("--roster", type=Path, default=None, metavar="CSV",
                        help="CSV with folder, lms_id, name, email (optional sis_id, login_id, section)")
    parser.add_argument("--per-exercise", action="store_true", help="one Canvas column per exercise, not the total")
    parser.add_argument("--canvas-assignment-id", "--assignment-id", dest="assignment_id", default=None,
                        metavar="ID", help="the existing Canvas assignment the total goes to (its column becomes "
                        "'Name (ID)', as Canvas's own export names it)")
    parser.add_argument("--canvas-assignment-name", dest="assignment_name", default=None, metavar="NAME",
                        help="the Canvas assignment's name (default: the course title)")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="SHARD",
                        help="first merge the --out folders of `attention-kit grade --shard I/N` into GRADES (one "
                             "grades.csv; shards of different kits, courses or classes are refused)")
    parser.add_argument("--published", action="store_true",
                        help="grades are published: rewrite every feedback.md with the failed hidden tests' names "
                             "and messages")


def run(args: argparse.Namespace) -> int:
    """Run ``attention-kit export``."""
    try:
        if args.roster is None and not (args.grades / ROSTER_FILE).is_file() \
                and (args.assignment_id or args.assignment_name):
            raise ExportError("--canvas-assignment-id/--canvas-assignment-name go into canvas.csv, which needs "
                              "--roster CSV")
        if args.merge:  # the shards' students copied into GRADES, and its grades.csv (grader.grading.shard)
            merge(args.grades, args.merge)
        rows = read_graded(args.grades)
        check_course(args.grades, rows)
        roster = kept_roster(args.grades, args.roster)  # given: kept as GRADES/roster.csv; else the one kept
        written = export(args.grades, rows, roster, per_exercise=args.per_exercise or None,
                         assignment_id=args.assignment_id, assignment_name=args.assignment_name,
                         same_scores=not args.merge)  # every grading run rewrites (or removes) canvas.csv
    except (ExportError, ShardError) as error:
        print(f"attention-kit export: {error}", file=sys.stderr)
        return 2
    if args.published:
        written += publish_feedback(args.grades, read_graded(args.grades))
    for path in written:
        print(f"wrote {path}")
    ungraded = [row.student for row in rows if not row.graded]
    if args.merge and ungraded:  # as `grade` of the whole class would: the grader's failure, never a row of 0
        print(f"attention-kit export: {len(ungraded)} of {len(rows)} students not graded "
              f"({', '.join(ungraded[:5])}{', ...' if len(ungraded) > 5 else ''}): rerun their shards' "
              "`attention-kit grade --shard I/N` (it grades only what is missing), then merge again", file=sys.stderr)
        return 1
    return 0


def publish_feedback(out: Path, rows: list[StudentRow]) -> list[Path]:
    """Rewrite each student's ``feedback.md`` as after publication: failed hidden tests by name and message.

    Everything comes from the student's ``results.json`` (the hidden tests' messages are already there,
    as Gradescope's ``after_published`` entries); nothing is graded again. Returns the files that changed.
    """
    from grader.grading.formats import feedback_md

    return write_all(out, typed(rows), Context(published=True), only=(feedback_md.NAME,))
