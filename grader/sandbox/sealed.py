"""Fair grading's answers known in advance: what the kit's own check asked of the reference, sealed for workers.

Run by the grading process. Under fair grading a student's worker asks the reference for every assigned
exercise its module builds on (``grader.sandbox.callbacks``): some 3,200 round trips for a student of every part,
more than half the cost of grading them. Most of those questions are the ones the kit's own check asks, since a
correct module asks what the reference's module asks. So while the check grades the reference
(``grader.grading.kit_check``; :func:`recording`), each answer its callbacks get is recorded here, sealed under its
question (``frames.seal_keys``: an index and a key, both digests of the callback's whole frame), and kept in the
instructor's cache, in a file named by the reference's content (:func:`file_for`). The check's worker, whose folder
is the reference, answers its callbacks itself, with the same modules, and sends them sealed with each reply
(``protocol``'s ``answered_here``; :meth:`Sealed.keep_answered`): no round trip, the same bytes as the reference's
worker would send; a student's worker that sends any is ended. A student's worker receives the
sealed answers of the view it runs (:meth:`Sealed.request`, before the view's first call) and opens one where its
code asks the very same question, with no round trip. A worker the fork server forks is handed every view's
answers at once, in one read-only file in memory (:meth:`Sealed.shared`, a sealed memfd the worker maps privately):
the view's frame then says where its answers lie instead of carrying them, so tens of MB are not written down each
worker's pipe again, nor copied into its memory, for every student.

What a worker can learn from them: only the answers to questions its code can write, which it could ask anyway
(an index says nothing of its question, and the key is the question's). It never sees an answer to a question it
cannot write, such as the trained weights of a training loop it did not get right. The reference's CPU seconds
for each answer travel with it and are charged to the call that opens it, as a remembered answer's are: the worker
reports them with its reply (``protocol.ANSWERED``); one that under-reports spares its own budget only CPU time the
reference did not spend for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import frames

# view -> index -> (sealed answer, the reference's CPU seconds for it).
Table = dict[str, dict[bytes, tuple[bytes, float]]]
MAX_TABLE_BYTES = 192 << 20  # a check that asks more keeps the first answers only
MAX_VIEW_BYTES = 64 << 20  # what one view's answers may add to the student's worker's memory


def reference_digest(reference: Path) -> str:
    """The digest of a reference's modules (with Python's and numpy's versions, the frame format and the cipher)."""
    import numpy

    digest = hashlib.sha256(f"{frames.MAGIC!r}|{frames.SEAL_CIPHER}|{sys.version.split()[0]}|{numpy.__version__}"
                            .encode())
    for path in sorted(reference.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(f"\0{path.relative_to(reference).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def file_for(store: Path, reference: Path) -> Path:
    """Where the sealed answers of ``reference`` are kept in the cache folder ``store``."""
    return store / "answers" / f"{reference_digest(reference)[:40]}.frame"


# What makes the shared file read-only for good: no write, no change of size, no seal removed (fcntl(2)).
_SEALS = ("F_SEAL_WRITE", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_SEAL")


@dataclass(frozen=True, eq=False)
class Shared:
    """Every view's sealed answers in one read-only memfd, handed to each forked worker (``fd``, open here).

    ``at``: view -> the offset and size of its answers' bytes in the file; ``frames``: view -> the frame that tells a
    worker holding the file where they lie (its entries, no bytes). The file is sealed against writes and changes
    of size before any worker sees it, so no worker can change what another reads.
    """

    fd: int
    at: dict[str, tuple[int, int]]
    frames: dict[str, bytes] = field(repr=False)


class Sealed:
    """A grading process's sealed answers: those of the reference in force, and the check being recorded."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.table: Table = {}  # the answers of the views not asked for yet (see request)
        self._frames: dict[str, bytes] = {}  # view -> the frame of its answers, packed (b"": none)
        self._shared: Shared | None = None  # the answers of the table in force as a shared file, once made
        self._stamp: tuple[int, int] | None = None
        self.recorded: Table | None = None  # while the kit's check runs: what its callbacks were answered
        self._recorded_bytes = 0

    def use(self, path: Path | None) -> None:
        """Answer from the file ``path`` (read again when it changed); None: no sealed answers."""
        try:
            found = path.stat() if path is not None else None
        except OSError:
            found = None
        stamp = (found.st_mtime_ns, found.st_size) if found is not None else None
        if path == self.path and stamp == self._stamp:
            return
        if self._shared is not None:  # workers forked with it keep their own mapping
            os.close(self._shared.fd)
        self.path, self._stamp, self.table, self._frames, self._shared = path, stamp, {}, {}, None
        if path is not None and stamp is not None:
            self.table = read(path)

    def shared(self) -> Shared | None:
        """The answers of every view not sent as a frame yet, in one sealed memfd (None: none, or no memfd here).

        Made once per table and kept open for the workers forked from now on; each maps it privately
        (``forkserver``), and :meth:`request` given it answers with where a view's answers lie.
        """
        if self._shared is not None or self.recorded is not None or not self.table:
            return self._shared if self.recorded is None else None
        if not hasattr(os, "memfd_create") or not all(hasattr(fcntl, seal) for seal in (*_SEALS, "F_ADD_SEALS")):
            return None
        fd = os.memfd_create("attention-kit-answers", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        at: dict[str, tuple[int, int]] = {}
        made: dict[str, bytes] = {}
        try:
            offset = 0
            for view, answers in self.table.items():
                entries, body = _described(answers)
                if body:
                    os.pwrite(fd, body, offset)
                at[view] = (offset, len(body))
                made[view] = frames.pack({"op": "answers", "view": view, "entries": entries, "at": [offset, len(body)]},
                                         [])
                offset += len(body)
            if not offset:
                os.close(fd)
                return None
            seals = 0
            for seal in _SEALS:
                seals |= getattr(fcntl, seal)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except OSError:
            os.close(fd)
            return None
        self._shared, self.table = Shared(fd, at, made), {}  # the bytes are in the file now, read back if needed
        return self._shared

    def request(self, view: str, most: int, shared: Shared | None = None) -> bytes | None:
        """The frame that gives a worker ``view``'s sealed answers, if any and at most ``most`` bytes long.

        None while the check is recorded: its callbacks must reach this process to be recorded. ``shared``: the
        file the worker was forked with; if it is the one in force, the frame says where the answers lie in it.
        Otherwise the frame carries them, and is the same for every worker, so it is packed once per view:
        a class sends it to each student's worker, and packing it again each time cost three copies of tens of
        MB per student.
        """
        if self.recorded is not None:
            return None
        if shared is not None and shared is self._shared and view in shared.frames:
            return shared.frames[view]
        if self._shared is not None and view in self._shared.at and view not in self.table:
            offset, size = self._shared.at[view]  # a worker started on its own: the bytes read back from the file
            self.table[view] = _read_back(self._shared, view, os.pread(self._shared.fd, size, offset))
        frame = self._frames.get(view)
        if frame is None:
            answers = self.table.pop(view, None)
            frame = b""
            if answers:
                import numpy as np

                entries, body = _described(answers)
                frame = frames.pack({"op": "answers", "view": view, "entries": entries},
                                    [np.frombuffer(body, np.uint8)])
            self._frames[view] = frame
        return frame if frame and len(frame) <= most else None

    def recording(self, on: bool) -> None:
        """Record every callback answered from now on (``on``: the kit's check is graded), or nothing."""
        self.recorded, self._recorded_bytes = ({} if on else None), 0

    def record(self, view: str, frame: bytes | bytearray | memoryview, answer: bytes, cpu: float) -> None:
        """Keep one answer of the check's, sealed under its question."""
        if self.recorded is None or self._recorded_bytes + len(answer) > MAX_TABLE_BYTES:
            return
        index, key = frames.seal_keys(frame)
        answers = self.recorded.setdefault(view, {})
        if index not in answers:
            answers[index] = (frames.seal(key, answer), float(cpu))
            self._recorded_bytes += len(answer)

    def keep_answered(self, view: str, message: dict, arrays: list) -> bool:
        """Keep the sealed answers the check's worker sent (``answered_here``); False: not recording, or malformed."""
        entries, body = message.get("entries"), arrays[0] if len(arrays) == 1 else None
        if self.recorded is None or not isinstance(entries, list) or body is None:
            return False
        data, offset, answers = memoryview(body).cast("B"), 0, self.recorded.setdefault(view, {})
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                    and type(entry[1]) is int and 0 <= entry[1] <= len(data) - offset
                    and type(entry[2]) is float and math.isfinite(entry[2])):
                return False
            index, size, cpu = entry
            try:
                key = bytes.fromhex(index)
            except ValueError:
                return False
            if len(key) == frames.SEAL_INDEX and key not in answers and self._recorded_bytes + size <= MAX_TABLE_BYTES:
                answers[key] = (bytes(data[offset : offset + size]), max(0.0, cpu))
                self._recorded_bytes += size
            offset += size
        return offset == len(data)

    def save(self, path: Path) -> None:
        """Stop recording; merge what was recorded into the file ``path`` (written whole, then renamed)."""
        recorded, self.recorded = self.recorded, None
        if recorded:
            merge_into(path, recorded)


def _described(answers: dict[bytes, tuple[bytes, float]]) -> tuple[list[list], bytes]:
    """A view's answers as a frame carries them: its entries ([index, size, CPU seconds]) and their bytes, joined."""
    return ([[index.hex(), len(blob), cpu] for index, (blob, cpu) in answers.items()],
            b"".join(blob for blob, _ in answers.values()))


def _read_back(shared: Shared, view: str, body: bytes) -> dict[bytes, tuple[bytes, float]]:
    """A view's answers as the table held them, from its entries' frame and its bytes in the shared file."""
    parsed = frames.unpack(shared.frames[view])
    answers, offset = {}, 0
    for index, size, cpu in parsed[0][0]["entries"] if parsed is not None else []:
        answers[bytes.fromhex(index)] = (body[offset : offset + size], cpu)
        offset += size
    return answers


def merge_into(path: Path, first: Table) -> None:
    """Write ``first``'s answers and those of the file ``path`` not among them to ``path`` (whole, then renamed).

    ``first`` wins (the newer check's, or those shipped from the machine that ran it); the older answers of a view
    past its size are dropped.
    """
    merged = {view: dict(answers) for view, answers in first.items()}
    for view, answers in (read(path) if path.is_file() else {}).items():
        kept = merged.setdefault(view, {})
        kept.update((index, answer) for index, answer in answers.items() if index not in kept)
    merged = {view: _within(answers, MAX_VIEW_BYTES) for view, answers in merged.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(_pack(merged))
    os.replace(temporary, path)


def _within(answers: dict[bytes, tuple[bytes, float]], limit: int) -> dict[bytes, tuple[bytes, float]]:
    kept, size = {}, 0
    for index, (blob, cpu) in answers.items():
        if size + len(blob) <= limit:
            kept[index], size = (blob, cpu), size + len(blob)
    return kept


def _pack(table: Table) -> bytes:
    import numpy as np

    entries = {view: _described(answers)[0] for view, answers in table.items()}
    body = b"".join(blob for answers in table.values() for blob, _ in answers.values())
    return frames.pack({"sealed": entries}, [np.frombuffer(body, np.uint8)])


def read(path: Path) -> Table:
    """The sealed answers of a file :meth:`Sealed.save` wrote (an empty table if it is unreadable or malformed)."""
    try:
        return parse(path.read_bytes())
    except OSError:
        return {}


def parse(data: bytes) -> Table:
    """The sealed answers of a file's content (an empty table if it is malformed)."""
    try:
        parsed = frames.unpack(data)
        if parsed is None:
            return {}
        (header, arrays), _ = parsed
        body = arrays[0].tobytes() if len(arrays) == 1 else b""
        table: Table = {}
        offset = 0
        for view, entries in header["sealed"].items():
            answers = table.setdefault(str(view), {})
            for index, size, cpu in entries:
                if not (isinstance(size, int) and 0 <= size and isinstance(cpu, (int, float))
                        and math.isfinite(cpu)):
                    return {}
                answers[bytes.fromhex(index)] = (body[offset : offset + size], max(0.0, cpu))
                offset += size
        return table if offset == len(body) else {}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


SEALED = Sealed()  # this grading process's
