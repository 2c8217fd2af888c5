"""Links in a submission: never followed, never read, and every refusal noted for the row's status.

Run by: the batch's process and the Gradescope runner, wherever a submission
is read (``grader.grading.submissions``, ``grader.grading.notebook_reader``).
One rule (:func:`refusal`) decides for every path: a symbolic link could name
any file of the grading machine and a hard link is such a file under the
student's name, so neither is read. The entries refused while one submission
is read are collected (:func:`collect_refusals`) and shown in its status
(:func:`refused_line`).
"""

from __future__ import annotations

import os
import stat
from contextvars import ContextVar, Token
from pathlib import Path

from grader.curriculum import ROOT

# The entries refused while one submission is read (see refusal): (the entry's root, "name is why" lines).
_REFUSED: ContextVar[tuple[Path, list[str]] | None] = ContextVar("refused_links", default=None)
MAX_REFUSED_SHOWN = 5


def refusal(path: Path) -> str | None:
    """Why ``path`` is never followed nor read, or None: the one rule of every path that reads a submission.

    A symbolic link could name any file of the grading machine (the reference, a hidden test, a root-only
    file), and the grader reads as root; a hard link to such a file is the same file under the student's
    name. Neither is followed: ``"a symbolic link (not followed)"``, ``"a hard link (not read)"``.
    """
    try:
        status = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(status.st_mode):
        return "a symbolic link (not followed)"
    if stat.S_ISREG(status.st_mode) and status.st_nlink > 1 and not in_kit_reference(path):
        return "a hard link (not read)"
    return None


def in_kit_reference(path: Path) -> bool:
    """Whether ``path`` is a file of the kit's own ``solutions/`` (an installer may hard-link those from a cache)."""
    return os.path.realpath(path.parent) == os.path.realpath(ROOT / "solutions")


def refused(path: Path, shown: str | None = None) -> bool:
    """Whether ``path`` is refused (:func:`refusal`); if so it is noted for the submission being read."""
    why = refusal(path)
    if why is None:
        return False
    note(shown if shown is not None else path, why)
    return True


# A link with one of these suffixes, or to a folder, could have held the submission: its refusal is noted.
SUBMISSION_SUFFIXES = (".py", ".zip", ".ipynb")


def skipped_link(path: Path) -> bool:
    """Whether ``path`` is a symbolic link (never followed); noted if it could have held the submission.

    A link to a folder or named ``*.py``, ``*.zip`` or ``*.ipynb`` is noted (the status says it was refused);
    others (a virtual environment's ``bin/python``) are passed over without a word.
    """
    if not path.is_symlink():
        return False
    if path.suffix.lower() in SUBMISSION_SUFFIXES or path.is_dir():  # is_dir: the target's kind, never its content
        refused(path)
    return True


def note(path: Path | str, why: str) -> None:
    """Note an entry refused while a submission is read: ``path`` (relative to its root when it lies inside)."""
    current = _REFUSED.get()
    if current is None:
        return
    root, lines = current
    name = str(path)
    if isinstance(path, Path):
        try:
            name = path.relative_to(root).as_posix()
        except ValueError:
            name = path.name
    line = f"{name} is {why}"
    if line not in lines:
        lines.append(line)


def refused_line(lines: list[str]) -> str:
    """The status part for the refused entries: ``refused: exercises is a symbolic link (not followed)``."""
    shown = ", ".join(lines[:MAX_REFUSED_SHOWN])
    more = f" and {len(lines) - MAX_REFUSED_SHOWN} more" if len(lines) > MAX_REFUSED_SHOWN else ""
    return one_line(f"refused: {shown}{more}")


def collect_refusals(root: Path, lines: list[str]) -> Token:
    """From now on (until :func:`stop_collecting`), refused entries under ``root`` are noted in ``lines``."""
    return _REFUSED.set((root, lines))


def stop_collecting(token: Token) -> None:
    """End the collection that :func:`collect_refusals` started."""
    _REFUSED.reset(token)


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of white space as one space), cut after ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "..."
