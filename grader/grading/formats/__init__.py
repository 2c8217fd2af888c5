"""The export formats of a graded class: one module each, found here (the one place they are registered).

Called by: the batch (``grader.grading.grade``, after the term's stage) and
``attention-kit export``. Each module of this package that defines ``NAME``,
``ORDER`` and ``write(out, rows, context) -> list[Path]`` is a format: it
reads the typed rows (:class:`grader.grading.rows.StudentRow`) and writes its
files into ``out``. Adding a format is adding its module (and its test);
nothing else names it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.grading.report import atomic_write
from grader.grading.rows import StudentRow


@dataclass(frozen=True)
class Context:
    """What a format may need besides the rows: the roster and the Canvas options, where to say things."""

    roster: Path | None = None
    per_exercise: bool | None = None
    """One Canvas column per exercise (None: when the course names existing assignments per exercise)."""
    assignment_id: str | None = None
    assignment_name: str | None = None
    echo: Callable[[str], Any] = print


def write_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically unless it already holds exactly that; whether it wrote."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)
    return True


def typed(rows: list[StudentRow] | list[dict[str, Any]]) -> list[StudentRow]:
    """``rows`` as typed rows (a results.json dict is read by :meth:`StudentRow.from_results`)."""
    return [row if isinstance(row, StudentRow) else StudentRow.from_results(row) for row in rows]


def formats() -> list[ModuleType]:
    """Every format module of this package, in their ``ORDER``."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if callable(getattr(module, "write", None)) and hasattr(module, "NAME"):
            found.append(module)
    return sorted(found, key=lambda module: (module.ORDER, module.NAME))


def write_all(out: Path, rows: list[StudentRow], context: Context, only: tuple[str, ...] | None = None) -> list[Path]:
    """Write every format (or the ``only`` ones, by ``NAME``) of ``rows`` into ``out``; returns the files written.

    A format's :class:`grader.grading.export.ExportError` (a bad roster) goes to the caller.
    """
    written: list[Path] = []
    for module in formats():
        if only is None or module.NAME in only:
            written += module.write(out, rows, context)
    return written
