"""Writing the grader's files: atomically, with the mode of a shared gradebook, and only when their text changed.

Used by every format (``grader.grading.formats``) and the batch; the one place a file's mode is chosen.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

# The mode of the files the grader writes, before the umask: the instructor's user and group may read
# (and write) them, other users not. A umask of 022 gives rw-r-----, 002 rw-rw----, 077 rw-------.
FILE_MODE = 0o660
# The folders it makes for them (a student's results): listing one shows a student's name, so the same people.
DIR_MODE = 0o770


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never half.

    The file gets :data:`FILE_MODE` less the process's umask, the gradebook and every
    student's ``results.json`` and ``feedback.md`` alike: readable by the instructor's
    user and group, never by other users (the workers' users among them).
    """
    if not path.parent.is_dir():
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        path.parent.mkdir(mode=DIR_MODE, exist_ok=True)
    while True:  # mkstemp's own loop, with the mode of a shared file instead of its 0600
        temporary = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                             FILE_MODE)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically unless it already holds exactly that; whether it wrote."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)
    return True
