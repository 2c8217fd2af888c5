"""Each student's ``results.json`` (Gradescope's format) and ``feedback.md``, rewritten when their text changed.

Their final score comes from the term's stage (``grader.grading.term_stage``); a student whose files already
say the same is not touched (their files' times say when they were last graded or changed).
"""

from __future__ import annotations

from pathlib import Path

from grader.grading.formats import Context, write_changed
from grader.grading.report import feedback_markdown, results_text
from grader.grading.rows import StudentRow

NAME = "student_files"
ORDER = 0


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write each row's feedback.md, then its results.json (its presence marks the student done)."""
    written = []
    for row in rows:
        if not row.results.get("extra_data", {}).get("fingerprint"):
            continue  # a row the grader could not write (kept in memory for the gradebook): nothing to rewrite
        folder = out / row.student
        texts = (("feedback.md", feedback_markdown(row)), ("results.json", results_text(row.results)))
        written.extend(folder / name for name, text in texts if write_changed(folder / name, text))
    return written
