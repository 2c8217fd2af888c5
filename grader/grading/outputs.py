"""The batch's last stage: the term's rules applied to every row, then every export format written.

Called by the batch (``grader.grading.grade``) with every student's row,
graded in this run or kept from an earlier one: so the outputs always follow
the current ``[late]``, ``[extensions]``, times, manual points and Canvas
settings, and none of those regrades anyone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grader.grading import formats
from grader.grading.class_report import diagnoses
from grader.grading.rows import StudentRow, TestEntry
from grader.grading.term_stage import TermInputs, finalize


def write_outputs(out: Path, rows: Iterable[StudentRow], inputs: TermInputs,
                  context: formats.Context) -> list[StudentRow]:
    """Apply the term to ``rows``, write every format into ``out``; return the rows as the class's formats read them.

    One row at a time: the formats of a student's own files (``PER_STUDENT``) are written from its final row,
    which is then kept only as :func:`class_view` gives it before the next row is read (``rows`` may read them
    from disk as it goes); the class's formats are written last, from those. So the batch's memory grows by a
    few pointers per student, not by the texts of the rows.

    Raises
    ------
    grader.grading.export.ExportError
        A roster that cannot be used (every student's files and the class's formats before Canvas's are written).
    """
    kept = write_student_files(out, rows, inputs, context)
    formats.write_all(out, kept, context, per_student=False)
    return kept


def write_student_files(out: Path, rows: Iterable[StudentRow], inputs: TermInputs, context: formats.Context,
                        failures: list[str] | None = None) -> list[StudentRow]:
    """Each row finalized, its student's own files written, and kept as :func:`class_view` gives it.

    A student's file that cannot be written is said in ``failures`` (when given; else raised) and the next
    student's are written: every row is kept for the gradebook.
    """
    shared: dict[TestEntry, TestEntry] = {}
    kept = []
    for row in rows:
        final = finalize(row, inputs)
        try:
            formats.write_all(out, [final], context, per_student=True, class_wide=False)
        except Exception as error:  # noqa: BLE001 - said by the caller; the gradebook still gets the row
            if failures is None:
                raise
            failures.append(f"{final.student}'s files ({type(error).__name__}: {error})")
        kept.append(class_view(final, shared))
    return kept


def class_view(row: StudentRow, shared: dict[TestEntry, TestEntry]) -> StudentRow:
    """``row`` as the class's formats read it, in little room: its scores, and each test but its own texts.

    A test keeps its name, status, score and tags, its output only where it is a failure whose message names a
    known mistake (the class report counts those), and no duration; an entry equal to another student's is that
    one (``shared``). The row's texts for Gradescope (output, calls, timing) go: the student's own files were
    written from the whole row.
    """
    tests = []
    for test in row.tests:
        slim = dataclasses.replace(test, duration=0.0,
                                   output=test.output if not test.passed and diagnoses(test.output) else "")
        tests.append(shared.setdefault(slim, slim))
    return dataclasses.replace(row, tests=tuple(tests), output="", computed_output="", calls={}, timing={})


def write_gradebooks(out: Path, rows: Iterable[StudentRow], roster: Path | None, inputs: Any,
                     echo: Any) -> tuple[int, list[StudentRow]]:
    """Stage 6: the term applied, then every format (``grader.grading.formats``); 0, 2 (a roster error) or 1.

    Returns the code and the rows as :func:`class_view` keeps them (every row, whatever failed).
    """
    from grader.grading.export import ExportError

    context = formats.Context(roster=roster, echo=echo)
    for note in getattr(inputs, "notes", ()):
        echo(f"note: {note}")
    failures: list[str] = []
    kept = write_student_files(out, rows, inputs, context, failures)
    code = 0
    if failures:
        echo(f"error: {len(failures)} student(s)' files could not be written: {failures[0]}")
        code = 1
    try:
        formats.write_all(out, kept, context, per_student=False)
    except ExportError as error:
        echo(f"error: {error} (every other output was written; fix what this says and run "
             f"`attention-kit export {out}`)")
        code = 2
    except Exception as error:  # noqa: BLE001 - the gradebook is written; an export must not hide the summary
        echo(f"error: the exports failed ({type(error).__name__}: {error})")
        code = 1
    return code, kept
