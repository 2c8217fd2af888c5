"""The batch's last stage: the term's rules applied to every row, then every export format written.

Called by the batch (``grader.grading.grade``) with every student's row,
graded in this run or kept from an earlier one: so the outputs always follow
the current ``[late]``, ``[extensions]``, times, manual points and Canvas
settings, and none of those regrades anyone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.grading import formats
from grader.grading.rows import StudentRow
from grader.grading.term_stage import TermInputs, finalize


def write_outputs(out: Path, rows: list[StudentRow], inputs: TermInputs,
                  context: formats.Context) -> list[StudentRow]:
    """Apply the term to ``rows`` and write every format into ``out``; returns the final typed rows.

    Raises
    ------
    grader.grading.export.ExportError
        A roster that cannot be used (the formats before Canvas's are written).
    """
    final = [finalize(row, inputs) for row in rows]
    formats.write_all(out, final, context)
    return final


def write_gradebooks(out: Path, rows: list[StudentRow], roster: Path | None, inputs: Any,
                     echo: Any) -> tuple[int, list[StudentRow]]:
    """Stage 6: the term applied, then every format (``grader.grading.formats``); 0, 2 (a roster error) or 1."""
    from grader.grading.export import ExportError

    try:
        return 0, write_outputs(out, rows, inputs, formats.Context(roster=roster, echo=echo))
    except ExportError as error:
        echo(f"error: {error} (grades.csv was written; fix the roster and run `attention-kit export {out}`)")
        code = 2
    except Exception as error:  # noqa: BLE001 - the gradebook is written; an export must not hide the summary
        echo(f"error: the exports failed ({type(error).__name__}: {error})")
        code = 1
    return code, rows
