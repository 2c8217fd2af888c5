"""Which entries of a SUBMISSIONS folder are submissions (a row each), and which are junk that tools leave.

Run by: the batch's process (``grader.grading.submissions``, ``grade``, ``similarity``). Only the standard
library: it looks at names and, for a hidden entry, at the suffixes of what it holds, never at its content.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# Folders that tools make (never a student's), anywhere in a submission.
JUNK = {"__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints", ".venv", "venv", "node_modules", ".tox", ".nox",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hg", ".svn"}


def is_submission(entry: Path) -> bool:
    """Whether a SUBMISSIONS entry is one (a row of the gradebook): anything but junk folders and hidden junk.

    A hidden entry (its name starts with a dot: ``.DS_Store``, ``.vscode``, a cache) is a submission only when it
    holds what one holds: a ``.py``, ``.ipynb`` or ``.zip`` file, or a folder with such a file at most three levels
    down (a student's ``...`` or ``.alice`` gets its row, under a safe id, like any oddly named entry).
    """
    if entry.name in JUNK:
        return False
    if not entry.name.startswith("."):
        return True
    try:
        if entry.is_symlink() or not entry.is_dir():
            return entry.suffix.lower() in SUBMITTED_SUFFIXES
        return any(_holds_submitted(entry, depth=3))
    except OSError:
        return False


SUBMITTED_SUFFIXES = (".py", ".ipynb", ".zip")


def _holds_submitted(folder: Path, depth: int) -> Iterator[bool]:
    """Yield True for each submitted file in ``folder`` (links not followed), ``depth`` levels down at most."""
    try:
        children = sorted(folder.iterdir())[:1000]
    except OSError:
        return
    for child in children:
        if child.name in JUNK or child.is_symlink():
            continue
        if child.is_file() and child.suffix.lower() in SUBMITTED_SUFFIXES:
            yield True
            return
        if depth > 1 and child.is_dir():
            yield from _holds_submitted(child, depth - 1)
