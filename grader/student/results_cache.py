"""The graded suite's last results for a folder, kept while nothing they depend on changes.

``attention-kit status`` on a tree that has not changed since its last run
reads the results back instead of running the suite again (2.8 s idle, 20 s
on a busy machine, against a tenth of a second). The results are kept under a
fingerprint of everything they depend on: every file of the student's folder
(its contents), the kit's graded suite (``tests/``, its data), the manifest as
loaded (a course folder's included), the command's own code and the versions
of Python and numpy. Any change to one of them runs the suite again.

Results that the machine may have decided (a test whose call ran out of time)
are never kept. The cache lives in the user's cache folder (``$XDG_CACHE_HOME``
or ``~/.cache``, ``attention-kit/``; ``$ATTENTION_KIT_CACHE`` names another),
never in the student's folder; a cache that cannot be read or written is
simply not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum

FORMAT = 1
# Files of the kit whose change can change a result (the suite, its data, the code that runs and records it).
KIT_FILES = ("tests", "grader/student/status.py", "grader/student/results_cache.py", "grader/quiet.py",
             "grader/curriculum.py", "pyproject.toml")
# A result that says a call ran out of time may be the machine's doing: it is run again next time.
NOT_KEPT = ("did not finish within", "ran out of time")


def cache_folder() -> Path:
    """Where the results are kept: ``$ATTENTION_KIT_CACHE``, else the user's cache folder's ``attention-kit``."""
    named = os.environ.get("ATTENTION_KIT_CACHE")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-kit"


def _files(folder: Path) -> Iterable[Path]:
    """The files under ``folder`` in a fixed order, without Python's byte-code caches and hidden entries."""
    for directory, subfolders, names in os.walk(folder):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__" and not name.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and not name.endswith((".pyc", ".pyo")):
                yield Path(directory, name)


def _add_tree(digest: Any, path: Path, label: str) -> None:
    """Feed the files under ``path`` (or the file ``path``) to ``digest``: their names and their contents."""
    files = [path] if path.is_file() else list(_files(path)) if path.is_dir() else []
    for file in files:
        digest.update(f"\0{label}/{file.relative_to(path) if file != path else ''}\0".encode())
        try:
            digest.update(file.read_bytes())
        except OSError:
            digest.update(b"\0unreadable")


def fingerprint(impl: Path) -> str:
    """A digest of everything the suite's results for the folder ``impl`` depend on.

    Parameters
    ----------
    impl : pathlib.Path
        The folder holding the student's modules (resolved).

    Returns
    -------
    str
        A hex digest: equal only when the folder's files, the kit's suite, the manifest and the versions
        are all unchanged.
    """
    import numpy

    digest = hashlib.sha256(f"{FORMAT}\0{sys.version}\0{numpy.__version__}\0{impl}".encode())
    digest.update(repr(load_curriculum()).encode())
    for relative in KIT_FILES:
        _add_tree(digest, ROOT / relative, relative)
    _add_tree(digest, impl, "impl")
    return digest.hexdigest()


def _file_for(impl: Path) -> Path:
    return cache_folder() / f"results-{hashlib.sha256(str(impl).encode()).hexdigest()[:20]}.json"


def read(impl: Path, key: str) -> dict[str, dict[str, Any]]:
    """The kept results of ``impl`` under ``key``: exercise name -> ``{"tests": [...], "error": str}``.

    Empty when none are kept, the key differs, or the file cannot be read.
    """
    try:
        data = json.loads(_file_for(impl).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("exercises"), dict):
        return {}
    return data["exercises"]


def keepable(entry: Mapping[str, Any]) -> bool:
    """Whether an exercise's results may be kept: no test of it ran out of time (maybe the machine's doing)."""
    return not any(marker in test.get("message", "") for test in entry.get("tests", ()) for marker in NOT_KEPT)


def write(impl: Path, key: str, exercises: Mapping[str, Mapping[str, Any]]) -> None:
    """Keep ``exercises``' results (those :func:`keepable`) for ``impl`` under ``key``, with those kept already.

    A folder that cannot be written to is no error: the results are simply not kept.
    """
    kept = {**read(impl, key), **{name: dict(entry) for name, entry in exercises.items() if keepable(entry)}}
    target = _file_for(impl)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=target.parent, prefix=target.stem, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump({"key": key, "impl": str(impl), "exercises": kept}, file)
        os.replace(name, target)  # whole or not at all: two runs at once leave one of their files
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)
