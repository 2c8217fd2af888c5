"""The export formats of a graded class: one module each, found here (the one place they are registered).

Called by: the batch (``grader.grading.grade``, after the term's stage) and
``attention-kit export``. Each module of this package that defines ``NAME``,
``ORDER`` and ``write(out, rows, context) -> list[Path]`` is a format: it
reads the typed rows (:class:`grader.grading.rows.StudentRow`, whose tests are
:class:`grader.grading.rows.TestEntry` records) and writes its files into
``out``: each student's feedback.md and results.json, grades.csv, Canvas, the
class report, ... A module that sets ``BATCH = False`` is written only when
named (``write_all(only=...)``): Gradescope's own results.json, which its
runner writes for its one submission. A module that sets ``PER_STUDENT = True``
writes each student's own files from that student's row alone: the batch
writes it one row at a time, as it reads them, and the class's formats (the
others) from the rows as ``grader.grading.outputs.class_view`` keeps them: each
test's name, status, score and tags, a failed test's message only where it
names a known mistake. Adding a format is adding its module (and its test);
nothing else names it (``grader/tests/test_formats.py`` adds one that way).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.grading.files import atomic_write, write_changed  # noqa: F401 - the formats' helpers
from grader.grading.rows import StudentRow, typed  # noqa: F401 - typed: the formats' helper


@dataclass(frozen=True)
class Context:
    """What a format may need besides the rows: the roster, the Canvas options, publication, where to say things."""

    roster: Path | None = None
    per_exercise: bool | None = None
    """One Canvas column per exercise (None: when the course names existing assignments per exercise)."""
    assignment_id: str | None = None
    assignment_name: str | None = None
    published: bool = False
    """Grades are published: feedback shows the failed hidden tests by name and message."""
    same_scores: bool = False
    """The rows are those an earlier canvas.csv was written from (``export`` without ``--merge``): a refused Canvas
    export keeps that file; after a grading run or a merge it goes, its scores may be out of date."""
    echo: Callable[[str], Any] = print


def formats() -> list[ModuleType]:
    """Every format module of this package, in their ``ORDER``."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if callable(getattr(module, "write", None)) and hasattr(module, "NAME"):
            found.append(module)
    return sorted(found, key=lambda module: (module.ORDER, module.NAME))


def write_all(out: Path, rows: list[StudentRow], context: Context, only: tuple[str, ...] | None = None, *,
              per_student: bool = True, class_wide: bool = True) -> list[Path]:
    """Write every format (or the ``only`` ones, by ``NAME``) of ``rows`` into ``out``; returns the files written.

    ``per_student=False`` leaves out the formats of each student's own files (``PER_STUDENT``),
    ``class_wide=False`` the others. A format's :class:`grader.grading.export.ExportError` (a bad roster) goes to
    the caller once every other format is written (a report.html after a refused canvas.csv included).
    """
    from grader.grading.roster import ExportError

    written: list[Path] = []
    refused: ExportError | None = None
    for module in formats():
        own = getattr(module, "PER_STUDENT", False)
        if not (per_student if own else class_wide):
            continue
        if (module.NAME in only) if only is not None else getattr(module, "BATCH", True):
            try:
                written += module.write(out, rows, context)
            except ExportError as error:  # the other formats are still written: none is left from an older run
                refused = refused or error
    if refused is not None:
        raise refused
    return written
