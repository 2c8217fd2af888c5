"""The grader's key of the inputs drawn for each submission, kept in the instructor's cache folder.

Read by: the batch (``grader.grading.grade``), into the jobs' template; each
grading process hands it to ``tests.effort.use_draw_key`` before it runs the
tests. Every input a test draws for a submission (a gate's, a twin's, exercise
9's long runs: ``tests.effort.submission_salt``) then mixes this key into the
digest of the submission's files. The student's code runs in its sandbox, as
another user, and sees neither the file (the instructor's alone, mode 600) nor
the grading process's memory: it cannot work the inputs out beforehand, as it
can in the student's own run (the salt's recipe is public), and prepare its
answers to them. Kept rather than drawn per run: the same submission gets the
same inputs in every batch, idle or busy, and a regrade the same grade.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets

from grader.grading.kit_check import passed_store

NAME = "draw-key"
_HEX = re.compile(r"[0-9a-f]{64}")


def draw_key() -> str:
    """The key (64 hex digits): the one kept in the cache folder, made there (mode 600) the first time.

    A cache folder that cannot be written gets a key for this run alone: the inputs are then unknown to the
    students' code all the same, only not the same in the next batch.
    """
    path = passed_store() / NAME
    with contextlib.suppress(OSError, UnicodeDecodeError):
        kept = path.read_text(encoding="ascii").strip()
        if _HEX.fullmatch(kept):
            if path.stat().st_mode & 0o077:  # a copy others could read (made by hand, or restored): yours alone
                os.chmod(path, 0o600)
            return kept
    key = secrets.token_hex(32)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = path.with_name(f".{NAME}.{os.getpid()}")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(key + "\n")
        os.replace(partial, path)
        # Two batches that started together: both keep the key that landed.
        kept = path.read_text(encoding="ascii").strip()
        if _HEX.fullmatch(kept):
            return kept
    return key
