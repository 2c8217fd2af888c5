"""``report.html``: the class report (``grader.grading.class_report``), written by every batch."""

from __future__ import annotations

from pathlib import Path

from grader.grading.class_report import report_html
from grader.grading.files import atomic_write
from grader.grading.formats import Context
from grader.grading.rows import StudentRow

NAME = "report.html"
ORDER = 40


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write ``out/report.html``."""
    atomic_write(out / "report.html", report_html(rows))
    return [out / "report.html"]
