"""``OUT/<student>/results.json``: the typed row in Gradescope's autograder format (the grader's own in ``extra_data``).

https://gradescope-autograders.readthedocs.io/en/latest/specs/ . Its layout is
:meth:`grader.grading.rows.StudentRow.to_json`; a resumed batch and ``attention-kit export`` read it back with
:meth:`grader.grading.rows.StudentRow.from_json`. Written after feedback.md: its presence marks the student done.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.grading.files import write_changed
from grader.grading.formats import Context
from grader.grading.rows import StudentRow

NAME = "results.json"
ORDER = 1
PER_STUDENT = True  # each student's own file, from that student's row alone


def results_text(results: dict[str, Any]) -> str:
    """The text of a results.json: a line per top-level key and per test.

    As readable as an indented dump for a person skimming it, and written by
    json's C encoder (an indented dump goes through its pure-Python one, which
    cost the grader a twentieth of a second per student).
    """
    parts = []
    for key, value in results.items():
        if key == "tests" and isinstance(value, list) and value:
            body = "[\n" + ",\n".join("  " + json.dumps(test) for test in value) + "\n ]"
        else:
            body = json.dumps(value)
        parts.append(f" {json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write each row's results.json, when its text changed."""
    written = []
    for row in rows:
        if row.stored:  # a row the grader could not write (kept in memory for the gradebook) has no folder
            path = out / row.student / NAME
            if write_changed(path, results_text(row.to_json())):
                written.append(path)
    return written
