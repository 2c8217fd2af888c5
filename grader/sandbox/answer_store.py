"""Fair grading's answers shared by the grading processes of one batch: each question asked of the reference once.

Run by the grading processes (``grader.sandbox.callbacks``, below ``grader.sandbox.proxy``). A dependency that the
graded selection assigns is answered by the reference's worker (``grader.sandbox.given.servable``), and each such
call crosses two more processes; correct students ask bit-identical questions (seeded inputs), so a grading
process remembers its answers (``callbacks._ANSWERS``). Without more, each grading process of a batch asks the
reference every question once for itself (the kit's own check in one, the first student in each other). Here
the answers are also written to the batch's scratch folder (``Job.scratch``, removed by the batch; no worker's
sandbox shows it), where the batch's other grading processes find them. An answer is only ever the reference's
reply to that very question (its key digests the whole question frame, the reference folder and the view), and
its CPU seconds travel with it: they are charged again to every student who asks, so a charge does not depend on
who was graded before, nor in which process. A file that does not read back whole (its digest) is ignored.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

FOLDER_NAME = "answers"
MAX_BYTES_WRITTEN = 256 << 20  # per grading process: a class of correct students needs some 45 MB (the whole kit)
_CPU = struct.Struct("<d")
_DIGEST = 20

_folder: Path | None = None
_written = 0


def use(scratch: str | Path | None) -> None:
    """Share answers through ``scratch``'s answer folder from now on (None or "": keep them in this process only)."""
    global _folder, _written
    folder = Path(scratch) / FOLDER_NAME if scratch else None
    if folder != _folder:
        _folder, _written = folder, 0


def folder() -> Path | None:
    """The answer folder in use, or None."""
    return _folder


def load(key: bytes) -> tuple[bytes, float] | None:
    """The answer another grading process of the batch saved for ``key``, and its CPU seconds (None: none)."""
    if _folder is None:
        return None
    try:
        data = (_folder / key.hex()).read_bytes()
    except OSError:
        return None
    if len(data) < _DIGEST + _CPU.size or hashlib.blake2b(data[_DIGEST:], digest_size=_DIGEST).digest() \
            != data[:_DIGEST]:
        return None  # not written whole: asked again
    (cpu,) = _CPU.unpack_from(data, _DIGEST)
    return data[_DIGEST + _CPU.size:], cpu


def save(key: bytes, answer: bytes, cpu: float) -> None:
    """Save the answer for ``key`` for the batch's other grading processes (a cache: any failure is ignored)."""
    global _written
    if _folder is None or _written + len(answer) > MAX_BYTES_WRITTEN:
        return
    payload = _CPU.pack(cpu) + answer
    temporary = _folder / f".{key.hex()}.{os.getpid()}"
    try:
        _folder.mkdir(mode=0o700, exist_ok=True)
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            handle.write(hashlib.blake2b(payload, digest_size=_DIGEST).digest() + payload)
        os.replace(temporary, _folder / key.hex())  # whole, or not there: readers never see half a file
        _written += len(answer)
    except OSError:
        try:
            temporary.unlink()
        except OSError:
            pass
