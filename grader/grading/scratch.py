"""A run's temporary folders (its copies of the submissions, its workers' scratch), and the sweep of killed runs'.

Run by the batch (``grade``) and by each Dask worker of a cluster batch (``cluster_worker``). A run removes its
folders when it ends, but a run that is killed (a Dask worker stopped mid-batch, a ``kill -9``) never does, and
its folders, copies of the class's submissions among them, stayed in the temporary folder for good. A folder's
name carries the pid of the process that made it, so a later run removes those of processes that are gone, an
hour after they last changed (never one of a live process, nor another user's; the hour spares a run whose pid
this process cannot see, in another pid namespace that shares the temporary folder, which adds a folder there
for each student it grades).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

KINDS = ("grade", "run", "submission")  # a batch's work, its workers' scratch, a cluster task's submission
STALE_SECONDS = 3600.0
_OWNED = re.compile(rf"attention-kit-(?:{'|'.join(KINDS)})-(\d+)-[^/]+")


def new_folder(kind: str, listable: bool = True) -> Path:
    """A fresh temporary folder of ``kind`` for this process, once the killed runs' folders are removed.

    ``listable`` False: traversable, not listable (the workers' scratch: a worker without a mount namespace,
    ``--container``, runs as another user in its own folder inside).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    sweep()
    folder = Path(tempfile.mkdtemp(prefix=f"attention-kit-{kind}-{os.getpid()}-"))
    if not listable:
        os.chmod(folder, 0o711)
    return folder


def sweep(where: Path | None = None) -> list[Path]:
    """Remove the run folders in ``where`` (the temporary folder) of this user's processes that are gone (stale)."""
    removed = []
    for path in Path(where or tempfile.gettempdir()).glob("attention-kit-*-*-*"):
        match = _OWNED.fullmatch(path.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            status = path.lstat()
        except OSError:
            continue
        if (path.is_dir() and not path.is_symlink() and status.st_uid == os.getuid()
                and time.time() - status.st_mtime > STALE_SECONDS):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's too; a number no process can have is nobody's)."""
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's
        return True
    return True
