"""Where the kit keeps what it can compute again: the student's kept results, the instructor's kit checks.

Used by: the student commands (``grader.student.results_cache``) and the grader (``grader.grading.kit_check``), in
whichever process asks. One setting for both: ``$ATTENTION_KIT_CACHE``, else the user's cache folder
(``$XDG_CACHE_HOME``, else ``~/.cache``) and its ``attention-kit``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder() -> Path:
    """The kit's cache folder: ``$ATTENTION_KIT_CACHE``, else the user's cache folder's ``attention-kit``."""
    named = os.environ.get("ATTENTION_KIT_CACHE")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-kit"
