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
import csv
import io
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import scoring
from grader.curriculum import load as load_curriculum
from grader.grading.shard import ShardError, merge

ROSTER_COLUMNS = ("folder", "lms_id", "name", "email")
OPTIONAL_ROSTER_COLUMNS = ("sis_id", "login_id", "section")
CANVAS_FIXED = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


class ExportError(Exception):
    """The export cannot be made as asked; the message says why."""


@dataclass
class Roster:
    """Roster rows by submission folder, and what did not match."""

    rows: dict[str, dict[str, str]]
    unmatched_submissions: list[str] = field(default_factory=list)
    unmatched_roster: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)  # ids alike but not equal (see match_roster): lines to show


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet will not run as a formula (roster names and emails are untrusted text)."""
    from grader.grading.escaping import csv_cell  # escapes control, bidi and undecodable characters too

    return csv_cell("" if value is None else value)


def _number(value: float | None) -> str:
    """A score cell; empty when there is no score (a test the grader could not run: never a 0)."""
    return "" if value is None else scoring.number(value)


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """The roster at ``path``: folder -> its row (column names lower-cased, cells stripped).

    Raises
    ------
    ExportError
        If a required column is missing, a row has no folder, or a folder appears twice.
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ExportError(f"--roster {path}: {error.strerror or error}") from None
    reader = csv.DictReader(io.StringIO(text))
    columns = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in ROSTER_COLUMNS if name not in columns]
    if missing:
        raise ExportError(f"--roster {path}: missing column(s) {', '.join(missing)}; the header must name "
                          f"{', '.join(ROSTER_COLUMNS)} (optional: {', '.join(OPTIONAL_ROSTER_COLUMNS)})")
    rows: dict[str, dict[str, str]] = {}
    for number, raw in enumerate(reader, start=2):
        row = {key.strip().lower(): (value or "").strip() for key, value in raw.items() if key is not None}
        if not any(row.values()):
            continue
        folder = row.get("folder", "")
        if not folder:
            raise ExportError(f"--roster {path} line {number}: the folder column is empty")
        if folder in rows:
            raise ExportError(f"--roster {path} line {number}: folder {folder!r} appears twice")
        rows[folder] = row
    return rows


def id_key(student: str) -> str:
    """What two ids share when they differ only in case, whitespace or Unicode normal form (NFKC)."""
    return "".join(unicodedata.normalize("NFKC", student).split()).casefold()


def match_roster(students: list[str], roster: dict[str, dict[str, str]]) -> Roster:
    """Match gradebook students to roster rows, exactly (``Alice`` is not ``alice``).

    Ids that differ only in case, whitespace or Unicode normal form (:func:`id_key`) from a roster folder or
    from each other are never matched on that likeness: they are listed in ``flagged``, so that a submission
    named ``Alice`` or `` bob`` can neither take nor hide the row of ``alice`` or ``bob``.
    """
    matched = {student: roster[student] for student in students if student in roster}
    unmatched = [student for student in students if student not in roster]
    used = set(matched)
    folders: dict[str, list[str]] = {}
    for folder in roster:
        folders.setdefault(id_key(folder), []).append(folder)
    flagged = []
    for student in unmatched:
        for folder in folders.get(id_key(student), []):
            flagged.append(f"submission {show_id(student)} is not roster folder {show_id(folder)} (they differ only "
                           "in case, spaces or Unicode form): not matched; rename the submission or fix the roster")
    unused = [folder for folder in roster if folder not in used]
    return Roster(matched, unmatched, unused, flagged + alike_ids(students))


def alike_ids(students: list[str]) -> list[str]:
    """A line per group of ids that differ only in case, whitespace or Unicode normal form (:func:`id_key`)."""
    alike: dict[str, list[str]] = {}
    for student in students:
        alike.setdefault(id_key(student), []).append(student)
    return [f"submissions {', '.join(show_id(s) for s in group)} differ only in case, spaces or Unicode form: "
            "each is graded on its own; check that they are different students"
            for group in alike.values() if len(group) > 1]


def show_id(student: str) -> str:
    """An id as the terminal and ``unmatched.txt`` show it: quoted, control and bidi characters escaped."""
    from grader.grading.escaping import escape_text

    shown = escape_text(student)
    return f"'{shown}'" if student != student.strip() or not student else shown


def exercise_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per exercise of one student's results: points, maximum and the hidden tests' part of it."""
    extra = results["extra_data"]
    rows = []
    for name in load_curriculum().names:
        if name not in extra.get("max_exercises", {}):
            continue
        tests = [t for t in results["tests"] if t["extra_data"]["exercise"] == name]
        hidden = sum(t["max_score"] for t in tests if "hidden" in t.get("tags", ()))
        rows.append({"exercise": name, "points": extra["exercises"].get(name, 0.0),
                     "max": extra["max_exercises"][name], "hidden_max": scoring.total([hidden])})
    return rows


def long_csv(rows: list[dict[str, Any]], roster: Roster | None = None) -> str:
    """``grades-long.csv``: one row per student and exercise."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "lms_id", "name", "email", "exercise", "points", "max", "hidden_max", "status"])
    # Every text cell through _cell, the exercise's name too (a course's own name for it).
    for results in sorted(rows, key=lambda r: r["extra_data"]["student"]):
        student = results["extra_data"]["student"]
        person = (roster.rows.get(student) if roster else None) or {}
        for row in exercise_rows(results):
            writer.writerow([_cell(student), _cell(person.get("lms_id", "")), _cell(person.get("name", "")),
                             _cell(person.get("email", "")), _cell(row["exercise"]), _number(row["points"]),
                             _number(row["max"]), _number(row["hidden_max"]), _cell(results["extra_data"]["status"])])
    return buffer.getvalue()


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
    from grader import course

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


def canvas_csv(rows: list[dict[str, Any]], roster: Roster, roster_rows: dict[str, dict[str, str]], *,
               per_exercise: bool = False, assignment_id: str | None = None,
               assignment_name: str | None = None) -> str:
    """Canvas's gradebook import CSV: every roster student, in roster order; no submission -> blank."""
    curriculum = load_curriculum()
    assignment = canvas_assignment(assignment_name, assignment_id)
    by_student = {r["extra_data"]["student"]: r for r in rows}
    by_folder = {person["folder"]: by_student[student] for student, person in roster.rows.items()}
    sample = next(iter(rows), None)
    names = [row["exercise"] for row in exercise_rows(sample)] if sample else []
    if per_exercise:
        if assignment.id or assignment_name is not None:
            raise ExportError("--canvas-assignment-id and --canvas-assignment-name name one Canvas assignment "
                              "(the total): use them without --per-exercise")
        titles = [f"{curriculum.exercise(n).number}. {curriculum.exercise(n).title}" for n in names]
    else:
        titles = [assignment.column]
    maxima = ([_number(sample["extra_data"]["max_exercises"][n]) for n in names] if per_exercise
              else [_number(sample["extra_data"]["max_score"])]) if sample else [""] * len(titles)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CANVAS_FIXED, *(_cell(title) for title in titles)])  # the course's names: cells too
    writer.writerow(["Points Possible", "", "", "", "", *maxima])
    for folder, person in roster_rows.items():
        results = by_folder.get(folder)
        if results is None:
            scores = [""] * len(titles)
        elif per_exercise:
            scores = [_number(results["extra_data"]["exercises"].get(n, 0.0)) for n in names]
        else:
            graded = not str(results["extra_data"].get("status", "")).startswith("not graded")
            scores = [_number(results["score"]) if graded else ""]
        writer.writerow([_cell(person.get("name", "")), _cell(person.get("lms_id", "")),
                         _cell(person.get("sis_id", "")), _cell(person.get("login_id", person.get("email", ""))),
                         _cell(person.get("section", "")), *scores])
    return buffer.getvalue()


def unmatched_report(roster: Roster) -> list[str]:
    """Lines about the entries of either side that found no partner."""
    lines = []
    if roster.unmatched_submissions:
        lines.append(f"{len(roster.unmatched_submissions)} submission(s) not in the roster (not in canvas.csv): "
                     + ", ".join(show_id(s) for s in roster.unmatched_submissions))
    if roster.unmatched_roster:
        lines.append(f"{len(roster.unmatched_roster)} roster student(s) without a submission (blank in canvas.csv): "
                     + ", ".join(show_id(s) for s in roster.unmatched_roster))
    lines += [f"flagged: {line}" for line in roster.flagged]
    return lines


def export(out: Path, rows: list[dict[str, Any]], roster_path: Path | None, *, per_exercise: bool = False,
           assignment_id: str | None = None, assignment_name: str | None = None, echo: Any = print) -> list[Path]:
    """Write the exports of a graded class into ``out``; returns the files written."""
    from grader.grading.report import atomic_write

    written = []
    roster = roster_rows = None
    if roster_path is not None:
        roster_rows = read_roster(roster_path)
        roster = match_roster([r["extra_data"]["student"] for r in rows], roster_rows)
    atomic_write(out / "grades-long.csv", long_csv(rows, roster))
    written.append(out / "grades-long.csv")
    if roster is not None and roster_rows is not None:
        atomic_write(out / "canvas.csv", canvas_csv(rows, roster, roster_rows, per_exercise=per_exercise,
                                                    assignment_id=assignment_id, assignment_name=assignment_name))
        written.append(out / "canvas.csv")
        report = unmatched_report(roster)
        atomic_write(out / "unmatched.txt", "\n".join(report) + ("\n" if report else ""))
        written.append(out / "unmatched.txt")
        for line in report:
            echo(f"roster: {line}")
    else:
        for line in alike_ids([r["extra_data"]["student"] for r in rows]):
            echo(f"flagged: {line}")
    return written


def read_graded(out: Path) -> list[dict[str, Any]]:
    """Every complete results.json under ``out`` (one folder per student)."""
    from grader.grading.report import read_results

    if not out.is_dir():
        raise ExportError(f"{out}: no such folder (give the --out folder of `attention-kit grade`)")
    rows = [r for r in (read_results(out, p.name) for p in sorted(out.iterdir()) if p.is_dir()) if r is not None]
    if not rows:
        raise ExportError(f"{out}: no graded students in it (no <student>/results.json)")
    return rows


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
        if args.roster is None and (args.assignment_id or args.assignment_name):
            raise ExportError("--canvas-assignment-id/--canvas-assignment-name go into canvas.csv, which needs "
                              "--roster CSV")
        if args.merge:  # the shards' students copied into GRADES, and its grades.csv (grader.grading.shard)
            merge(args.grades, args.merge)
        written = export(args.grades, read_graded(args.grades), args.roster, per_exercise=args.per_exercise,
                         assignment_id=args.assignment_id, assignment_name=args.assignment_name)
    except (ExportError, ShardError) as error:
        print(f"attention-kit export: {error}", file=sys.stderr)
        return 2
    if args.published:
        written += publish_feedback(args.grades, read_graded(args.grades))
    for path in written:
        print(f"wrote {path}")
    return 0


def publish_feedback(out: Path, rows: list[dict[str, Any]]) -> list[Path]:
    """Rewrite each student's ``feedback.md`` as after publication: failed hidden tests by name and message.

    Everything comes from the student's ``results.json`` (the hidden tests' messages are already there,
    as Gradescope's ``after_published`` entries); nothing is graded again.
    """
    from grader.grading.report import atomic_write, feedback_markdown

    written = []
    for results in rows:
        path = out / results["extra_data"]["student"] / "feedback.md"
        atomic_write(path, feedback_markdown(results, published=True))
        written.append(path)
    return written
