"""Where a line of a module made from a notebook's cells is in the notebook: the place a failure names.

Run by: the worker (the tracebacks and import errors it describes, ``codec``) and the grading process (its static
checks, ``grader.grading.static_checks``). The map is the module's first line, written by
``grader.grading.notebook_reader.notebook_modules``: a notebook student never saw ``softmax.py``, and its line
numbers were the cells' shifted by the import lines put on top. Standard library only (it runs in the sandbox).
A student's own module may carry such a line too: it changes only the places its own failures name.
"""

from __future__ import annotations

import os
import re

MARK = "# attention-kit: lines of notebook cells "
_SPAN = re.compile(r"(\d+):(\d+):(\d+):(\d+)")


def map_line(spans: list[tuple[int, int, int, int]]) -> str:
    """The first line of a module whose lines ``(module line, cell number, cell line, count)`` came from cells."""
    return MARK + " ".join(f"{start}:{cell}:{first}:{count}" for start, cell, first, count in spans) + "\n"


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.readline(8192)
    except (OSError, ValueError):
        return ""


def place(path: str | None, line: int | None, name: str | None = None, first: str | None = None) -> str:
    """``softmax.py line 12``, or for a module made from a notebook's cells, ``notebook cell 8 line 3``.

    ``first``: the module's first line where it is at hand (else read from ``path``); ``name``: the module's
    file name where ``path`` does not give it.
    """
    first = (_first_line(path) if first is None and path and line is not None else first or "").split("\n", 1)[0]
    if line is not None and first.startswith(MARK):
        for start, cell, top, count in _SPAN.findall(first[len(MARK):])[:256]:
            if int(start) <= line < int(start) + int(count):
                return f"notebook cell {cell} line {int(top) + line - int(start)}"
    return f"{name or os.path.basename(path or '')} line {line}"
