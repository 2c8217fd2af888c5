"""Gradescope's ``/autograder/results/results.json``: the one submission's typed row, as Gradescope reads it.

Written by the Gradescope runner (``grader.grading.gradescope.autograde``) only, never by a batch
(``BATCH = False``): the batch's own ``OUT/<student>/results.json`` is the same row in the same format, this
one is what Gradescope shows. A row that was not graded (the grader failed on some tests) carries no score at
all, on the row or on any test, so nothing can pass for a grade; its text says so first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grader.grading.formats import Context
from grader.grading.rows import StudentRow

NAME = "gradescope"
ORDER = 90
BATCH = False
FILE = "results.json"
NOT_GRADED_NOTE = "NOT GRADED (no score): the autograder failed on some tests; please tell your instructor.\n"


def results(row: StudentRow) -> dict[str, Any]:
    """``row`` as Gradescope's results.json (without a score anywhere if it was not graded)."""
    data = row.to_json()
    if not row.graded:
        data.pop("score", None)
        for test in data["tests"]:
            test.pop("score", None)
        data["output"] = NOT_GRADED_NOTE + str(data.get("output", ""))
    return data


def write_results(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` as Gradescope's runner does (indented JSON, replaced atomically)."""
    data.setdefault("visibility", "visible")
    data.setdefault("stdout_visibility", "hidden")
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(temporary, path)


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/results.json`` of the one submission a Gradescope run grades."""
    if len(rows) != 1:
        raise ValueError(f"Gradescope's results.json holds one submission, not {len(rows)}")
    out.mkdir(parents=True, exist_ok=True)
    write_results(out / FILE, results(rows[0]))
    return [out / FILE]
