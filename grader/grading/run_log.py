"""``OUT/grading.log``: one block appended per run of ``attention-kit grade`` (the batch's process).

When, which kit and course, the limits, the isolation, the options, then a
line per row: its student, whether it was graded in this run or kept from an
earlier one, its score (before -> after the term's rules), its grading time
and its status. Student text is escaped (one line per row, whatever a name
holds).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from grader import course, scoring
from grader.grading.escaping import escape_text
from grader.grading.fingerprint import kit_version
from grader.grading.rows import StudentRow

LOG_FILE = "grading.log"


def header(*, limits: str, isolation: str, options: dict[str, Any]) -> list[str]:
    """The run's first lines: when, kit, course, limits, isolation, options."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    folder = course.active_folder()
    shown = "; ".join(f"{key} {escape_text(str(value))}" for key, value in options.items() if value not in (None, ()))
    return [f"== {now} attention-kit {kit_version()} grade; course: {folder or 'the kit (no course folder)'}",
            f"   limits: {limits}", f"   isolation: {isolation}", f"   options: {shown or 'none'}"]


def row_line(row: StudentRow, kept: bool) -> str:
    """One row: student, graded now or kept, score, seconds, status."""
    if row.graded:
        score = scoring.number(row.score)
        if row.computed != row.score:
            score = f"{scoring.number(row.computed)} -> {score}"
        score += f" / {scoring.number(row.max_score)}"
    else:
        score = "no score"
    how = "kept" if kept else ("graded" if row.graded else "NOT GRADED")
    return (f"   {escape_text(row.student)}\t{how}\t{score}\t{row.seconds:g} s\t"
            f"{escape_text(row.status)[:400]}")


def append(out: Path, lines: list[str]) -> Path:
    """Append ``lines`` to ``out/grading.log`` (created with the gradebook's mode if missing)."""
    from grader.grading.report import FILE_MODE

    path = out / LOG_FILE
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    with os.fdopen(handle, "a", encoding="utf-8") as stream:
        stream.write("\n".join(lines) + "\n")
    return path
