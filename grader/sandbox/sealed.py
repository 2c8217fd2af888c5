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
code asks the very same question, with no round trip.

What a worker can learn from them: only the answers to questions its code can write, which it could ask anyway
(an index says nothing of its question, and the key is the question's), and never those of the exercise it
grades: a view's answers are about the functions of the exercises it builds on, and a worker given them is
replaced before it grades one of those (:class:`Held`; it once held every view's answers from its start, in one
file mapped at its fork, and a test of ``softmax`` could open the reference's ``softmax`` where a later view's
check had asked it the same question). It never sees an answer to a question it
cannot write, such as the trained weights of a training loop it did not get right. The reference's CPU seconds
for each answer travel with it and are charged to the call that opens it, as a remembered answer's are: the worker
reports them with its reply (``protocol.ANSWERED``); one that under-reports spares its own budget only CPU time the
reference did not spend for it.

The hidden tests' questions are kept apart (:data:`HIDDEN`): an answer first asked in a hidden test is given only
while the hidden tests run, which come after every public test. A worker can test any question it writes against
the index it holds, offline; given the hidden tests' answers during the public tests, whose feedback it sees at
once, it learned their arguments (the seed and sizes of a hidden ``init_multi_head`` call) before any grade was
out.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from grader.sandbox import frames
from grader.sandbox.protocol import VIEW_ALL

# view -> index -> (sealed answer, the reference's CPU seconds for it).
Table = dict[str, dict[bytes, tuple[bytes, float]]]
MAX_TABLE_BYTES = 192 << 20  # a check that asks more keeps the first answers only
MAX_VIEW_BYTES = 64 << 20  # what one view's answers may add to the student's worker's memory
HIDDEN = "+hidden"  # a view's answers first asked by the hidden tests are the view "<view>+hidden" of the file
KEPT_FILES = 4  # the answers' files a cache folder keeps past a day (40-60 MB each; see _prune)


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
    # (.v2: the hidden tests' answers apart; an older file mixed them with the public tests')
    return store / "answers" / f"{reference_digest(reference)[:40]}.v2.frame"


class Sealed:
    """A grading process's sealed answers: those of the reference in force, and the check being recorded."""

    def __init__(self) -> None:
        self.path: Path | None = None
        # view -> its entries ([index, size, CPU seconds]) and where its answers lie in the file's body (see use)
        self.views: dict[str, tuple[list, int, int]] = {}
        self._body: memoryview | None = None  # the file's body, mapped (read in place, never copied whole)
        self._frames: dict[str, bytes] = {}  # view -> the frame of its answers, packed (b"": none)
        self._stamp: tuple[int, int] | None = None
        self.recorded: Table | None = None  # while the kit's check runs: what its callbacks were answered
        self._recorded_bytes = 0
        self.hidden = False  # the hidden tests run (set by the recorder before each test): their answers too

    def use(self, path: Path | None) -> None:
        """Answer from the file ``path`` (read again when it changed); None: no sealed answers."""
        try:
            found = path.stat() if path is not None else None
        except OSError:
            found = None
        stamp = (found.st_mtime_ns, found.st_size) if found is not None else None
        if path == self.path and stamp == self._stamp:
            return
        self.path, self._stamp, self.views, self._frames, self._body = path, stamp, {}, {}, None
        if path is not None and stamp is not None:
            self.views, self._body = _mapped(path)

    def request(self, view: str, most: int) -> bytes | None:
        """The frame that gives a worker ``view``'s sealed answers, if any and at most ``most`` bytes long.

        None while the check is recorded: its callbacks must reach this process to be recorded. The frame is the
        same for every worker, so it is packed once per view: a class sends it to each student's worker, and
        packing it again each time cost three copies of tens of MB per student. Each worker gets a view's answers
        at the view's first call, never before (``Held`` says why).
        """
        if self.recorded is not None:
            return None
        name = view + HIDDEN if self.hidden else view  # while the hidden tests run: the public answers and theirs
        frame = self._frames.get(name)
        if frame is None:
            parts = [self.views[part] for part in dict.fromkeys((view, name)) if part in self.views]
            entries = [entry for part, _, _ in parts for entry in part]
            frame = b""
            if entries and self._body is not None:
                import numpy as np

                body = [np.frombuffer(self._body[start:end], np.uint8) for _, start, end in parts]
                frame = frames.pack({"op": "answers", "view": view, "entries": entries},
                                    [body[0] if len(body) == 1 else np.concatenate(body)])
            self._frames[name] = frame
        return frame if frame and len(frame) <= most else None

    def recording(self, on: bool) -> None:
        """Record every callback answered from now on (``on``: the kit's check is graded), or nothing."""
        self.recorded, self._recorded_bytes = ({} if on else None), 0

    def record(self, view: str, frame: bytes | bytearray | memoryview, answer: bytes, cpu: float) -> None:
        """Keep one answer of the check's, sealed under its question."""
        if self.recorded is None or self._recorded_bytes + len(answer) > MAX_TABLE_BYTES:
            return
        index, key = frames.seal_keys(frame)
        answers = self._table(view)
        if index not in answers and index not in self.recorded.get(view, {}):
            answers[index] = (frames.seal(key, answer), float(cpu))
            self._recorded_bytes += len(answer)

    def keep_answered(self, view: str, message: dict, arrays: list) -> bool:
        """Keep the sealed answers the check's worker sent (``answered_here``); False: not recording, or malformed."""
        entries, body = message.get("entries"), arrays[0] if len(arrays) == 1 else None
        if self.recorded is None or not isinstance(entries, list) or body is None:
            return False
        data, offset, answers = memoryview(body).cast("B"), 0, self._table(view)
        public = self.recorded.get(view, {})
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
            if len(key) == frames.SEAL_INDEX and key not in answers and key not in public and \
                    self._recorded_bytes + size <= MAX_TABLE_BYTES:
                answers[key] = (bytes(data[offset : offset + size]), max(0.0, cpu))
                self._recorded_bytes += size
            offset += size
        return offset == len(data)

    def _table(self, view: str) -> dict[bytes, tuple[bytes, float]]:
        """Where an answer of ``view`` is recorded now: its public table, or its hidden one (:data:`HIDDEN`)."""
        assert self.recorded is not None
        return self.recorded.setdefault(view + HIDDEN if self.hidden else view, {})

    def save(self, path: Path) -> None:
        """Stop recording; merge what was recorded into the file ``path`` (written whole, then renamed)."""
        recorded, self.recorded = self.recorded, None
        if recorded:
            merge_into(path, recorded)


def _described(answers: dict[bytes, tuple[bytes, float]]) -> tuple[list[list], bytes]:
    """A view's answers as a frame carries them: its entries ([index, size, CPU seconds]) and their bytes, joined."""
    return ([[index.hex(), len(blob), cpu] for index, (blob, cpu) in answers.items()],
            b"".join(blob for blob, _ in answers.values()))


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
    # The instructor's alone, as the kit's other cached files: the folder 0700 (older kits made it 0755), files 0600.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(path.parent, 0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
        file.write(_pack(merged))
    os.replace(temporary, path)
    _prune(path.parent)


def _prune(folder: Path, keep: int = KEPT_FILES) -> None:
    """Remove the answers' files of ``folder`` written over a day ago, but the ``keep`` last written.

    Each edit of the reference left one more file, for good. A file of the last day stays (another batch, of
    another course, may have just written it); a grading process that has one mapped keeps reading it, one that
    looks again finds none, and asks the reference instead.
    """
    def written(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return time.time()

    for old in sorted(folder.glob("*.frame"), key=written, reverse=True)[keep:]:
        if time.time() - written(old) > 86_400:
            old.unlink(missing_ok=True)


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


def _mapped(path: Path) -> tuple[dict[str, tuple[list, int, int]], memoryview | None]:
    """The views of the file ``path`` (entries, start and end in its body) and its body, mapped; ({}, None) if bad.

    Only the header is parsed: a grading process reads what it sends, a view's answers at its first request, and
    never copies the whole file (parsing it all, 40-60 MB, cost each grading process 0.4 core-s).
    """
    import mmap

    try:
        with path.open("rb") as file:  # the mapping outlives the descriptor; unmapped once no view of it is left
            data = memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
        magic, head_len, body_len = frames.PREFIX.unpack_from(data)
        start = frames.PREFIX.size + head_len
        if magic != frames.MAGIC or start + body_len != len(data):
            return {}, None
        message = frames.loads(str(data[frames.PREFIX.size : start], "utf-8"))
        described = message["a"]
        if not (isinstance(described, list) and len(described) == 1 and described[0][0] == "|u1"
                and described[0][3] == body_len):
            return {}, None
        views, offset = {}, 0
        for view, entries in message["h"]["sealed"].items():
            first = offset
            for index, size, cpu in entries:
                if not (isinstance(index, str) and len(index) == 2 * frames.SEAL_INDEX and type(size) is int
                        and size >= 0 and isinstance(cpu, (int, float)) and math.isfinite(cpu)):
                    return {}, None
                offset += size
            views[str(view)] = (entries, first, offset)
        return (views, data[start:]) if offset == body_len else ({}, None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return {}, None


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


class Held:
    """The sealed answers one worker was given: each view's frame size (0: asked, none) and whose functions they are.

    A view's answers are the reference's answers to its dependencies' functions. A worker given them must never
    grade one of those exercises again: its code could open the reference's answer to the very function under test
    (a test of ``masks`` asking ``causal_mask(8)`` where a later view's check asked the same), a question it can
    write but may not ask. So :meth:`about` tells the grading process to replace the worker first. What a worker
    was told to forget still counts: its code could have copied the answers while it held them.

    Parameters
    ----------
    dependencies : callable
        ``curriculum.dependencies``: the exercises a view builds on, whose functions its answers answer.
    """

    def __init__(self, dependencies: Callable[[str], Iterable[str]]) -> None:
        self.sizes: dict[str, int] = {}
        self._dependencies = dependencies
        self._about: set[str] = set()
        self._everything = False  # answers of the view of every exercise were given
        self._hidden: dict[str, bool] = {}  # view -> given while the hidden tests ran (theirs included)

    def reset(self) -> None:
        """A new worker: nothing given yet."""
        self.sizes, self._about, self._everything, self._hidden = {}, set(), False, {}

    def has(self, view: str) -> bool:
        """Whether ``view``'s answers of the tests running now (public, or hidden too) were given (or asked)."""
        return view in self.sizes and self._hidden.get(view) == SEALED.hidden

    def given(self, view: str, size: int) -> None:
        """``view``'s answers were sent (a frame of ``size`` bytes; 0: there are none)."""
        self.sizes[view], self._hidden[view] = size, SEALED.hidden
        if size and view == VIEW_ALL:
            self._everything = True
        elif size:
            self._about.update(self._dependencies(view))

    def room(self, size: int, most: int) -> list[str]:
        """The views whose answers the worker must forget before it takes ``size`` more bytes within ``most``."""
        if sum(self.sizes.values()) + size <= most:
            return []
        forget = [view for view, held in self.sizes.items() if held]
        self.sizes = {view: 0 for view, held in self.sizes.items() if not held}
        return forget

    def about(self, view: str) -> bool:
        """Whether the worker was given answers to functions of the exercise ``view`` (then it must not grade it).

        Never for ``VIEW_ALL``, which grades no exercise of its own under fair grading (a preload, a signature):
        what code run there might keep stays in the worker, which is replaced before the exercise is graded.
        """
        return view != VIEW_ALL and (self._everything or view in self._about)


SEALED = Sealed()  # this grading process's
