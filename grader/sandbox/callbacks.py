"""The grading side's answers to a worker's callbacks: fair grading's reference, and the test's own functions.

Run by the grading process, while a request of its worker is in flight. Under
fair grading the worker runs the kit's given implementations of the exercises
that the student's module imports and the graded selection does not assign
(``grader.sandbox.given.servable``), and asks the reference to run the functions
of the others (assigned ones, whose working code a worker must never hold, and
an instructor's own exercises) (``protocol.reference_functions``
says which: anything else is refused, and the refusal recorded). The grading
process computes nothing for it: the request is passed on, as plain data, to
a worker of the reference's own (a :class:`ReferenceWorker`, confined and
limited as the student's worker is: its memory in a control group of the
same size, its CPU time bounded by what the student's call has left and
charged to it). A call whose arguments hold a function of the test (a
model's ``predict``) asks the grading side to run it. Both answer with a
frame of plain data; the errors they raise go back as type and message only.
The reference is a pure function of its arguments, so its answers are
remembered (:data:`_ANSWERS`), with the CPU time they cost, which is charged
again to every student who asks the same question.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from grader.sandbox import codec, frames, host_memory, protocol
from grader.sandbox.channel import Ended
from grader.sandbox.errors import SandboxError, WorkerCrashed
from grader.sandbox.limits import Limits
from tests.kit import LocalImplementation

# Fair grading's callbacks, answered before: a digest of (reference folder, view, the callback's frame) -> (the
# answer's frame, the reference's CPU seconds for it). Only the answers are held (a Part III submission sends some
# 300 MB of callbacks, far more than could be kept). The reference is a pure function of its arguments (random
# generators travel with their state), and the graded tests use seeded inputs, so students whose code gets as far
# as the same callback ask the very same question; the answer is sent again without running the reference, and its
# CPU time is charged as if it had run (so a student's charge does not depend on who was graded before). Per
# process.
_ANSWERS: dict[bytes, tuple[bytes, float]] = {}
_ANSWERS_MAX_BYTES = 128 << 20
_answers_bytes = 0
CALLBACK_START = b'{"h":{"op":"callback",'  # how the worker's callback frames begin (see Worker.forwarder)


def answer_key(reference: str, view: str, frame: bytes) -> bytes | None:
    """The key of a callback frame's answer (None: the frame is no callback, never looked up nor remembered)."""
    if not frame.startswith(CALLBACK_START, frames.PREFIX.size):
        return None
    digest = hashlib.blake2b(frame, digest_size=20)
    digest.update(f"\0{reference}\0{view}".encode())
    return digest.digest()


def remembered_answer(key: bytes | None) -> tuple[bytes, float] | None:
    """The answer given before to the callback of ``key``, and its CPU seconds (None: ask the reference)."""
    return _ANSWERS.get(key) if key is not None else None


def remember_answer(key: bytes | None, answer: bytes, cpu: float) -> None:
    """Remember an allowed callback's answer and its CPU seconds (within ``_ANSWERS_MAX_BYTES`` in all)."""
    global _answers_bytes
    if key is None:
        return
    size = len(key) + len(answer)
    if size > _ANSWERS_MAX_BYTES // 16:  # a large answer is rarely asked again: never let it fill the cache
        return
    if _answers_bytes + size > _ANSWERS_MAX_BYTES:
        _ANSWERS.clear()  # simpler than LRU, and a class rarely fills it: most questions recur
        _answers_bytes = 0
    _ANSWERS[key] = (answer, cpu)
    _answers_bytes += size


class ReferenceWorker(Protocol):
    """What the callbacks need of the reference's worker (``grader.sandbox.proxy.IsolatedImplementation``)."""

    limits: Limits
    out_of_memory: bool

    @property
    def spent(self) -> float:
        """CPU seconds the worker's calls used so far."""

    def forward(self, module: str, name: str, payload: Any, arrays: list, timeout: float,
                asker_spent: Callable[[], bool] | None = None) -> tuple[dict, list]:
        """Run ``module.name`` on a request's payload, with at most ``timeout`` CPU seconds: the reply and arrays.

        Stopped too once ``asker_spent()``: the asking call used its own CPU time meanwhile.
        """

    def close(self) -> None:
        """Stop the worker."""


class Callbacks:
    """What one submission's worker may ask the grading side, and the answers.

    Parameters
    ----------
    reference : pathlib.Path
        The reference implementation (fair grading).
    fair : bool
        Whether the reference serves the dependencies at all.
    limits : grader.sandbox.limits.Limits
        The student's worker's limits (the reference's worker has the same memory).
    start_reference : callable
        Starts the reference's worker (:class:`ReferenceWorker`), when a callback first needs it.
    """

    def __init__(self, reference: Path, fair: bool, limits: Limits,
                 start_reference: Callable[[], ReferenceWorker] | None = None) -> None:
        self.reference, self.fair, self.limits = reference, fair, limits
        self.refused: list[str] = []  # the distinct callbacks the channel refused (at most 20; see refusals)
        self.refusals = 0
        # The worker's init message: the functions of each exercise, the exercises each one depends on.
        self.init_data: dict[str, dict[str, list[str]]] = {"functions": {}, "dependencies": {}}
        self.grading_functions: list[Callable[..., Any]] = []  # the functions among the current call's arguments
        self._allowed: dict[str, frozenset[tuple[str, str]]] = {}
        self._reference: LocalImplementation | None = None
        self._start_reference = start_reference
        self._worker: ReferenceWorker | None = None

    def implementation(self) -> LocalImplementation:
        """The reference, imported in this process (once): for signatures only, never run on a student's data."""
        if self._reference is None:
            self._reference = LocalImplementation(self.reference)
        return self._reference

    def worker(self) -> ReferenceWorker:
        """The reference's worker of this submission (started at the first callback that needs it)."""
        if self._worker is None:
            if self._start_reference is None:
                raise SandboxError("fair grading has no worker for the reference")
            self._worker = self._start_reference()
        return self._worker

    def close(self) -> None:
        """Stop the reference's worker, if one was started."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()

    def allowed(self, view: str) -> frozenset[tuple[str, str]]:
        """The reference functions the channel serves while a request of ``view`` runs (see ``protocol``)."""
        if view not in self._allowed:
            self._allowed[view] = protocol.reference_functions(
                view, self.init_data["dependencies"], self.init_data["functions"]) if self.fair else frozenset()
        return self._allowed[view]

    def answer(self, header: dict, arrays: list, view: str, timeout: float,
               asker_spent: Callable[[], bool] | None = None) -> tuple[bytes, bool, float]:
        """Answer a callback (fair grading): the answer's frame, whether it may be remembered, its CPU seconds.

        A callback for anything but the functions of ``view``'s dependencies is
        refused (a PermissionError in the student's code) and recorded. An
        allowed one runs in the reference's worker, with ``timeout`` CPU
        seconds (what the student's call has left) and the student's memory
        limit; past either, the student's code gets a TimeoutError or a
        MemoryError that names the call and the limit. A reference error goes
        back as its type and message only: no traceback, no source line of
        the reference. The grader's own failures (a worker that cannot start,
        a machine too busy) are raised (``SandboxError``): never the student's.
        ``asker_spent``: whether the student's call has used its CPU time meanwhile (its other processes and
        threads run on while the reference answers): then the answer is stopped too, the student's time.
        """
        try:
            protocol.check(header, protocol.CALLBACKS)
        except protocol.ProtocolError as error:
            raise Ended(f"the worker sent a message the protocol does not allow ({error})") from None
        exercise, name = header["exercise"], header["function"]
        if (exercise, name) not in self.allowed(view):
            self.refusals += 1
            what = f"{exercise[:40]}.{name[:40]}()"
            reason = (f"the reference's {what} was asked for while grading {view}" if self.fair else
                      f"the reference's {what} was asked for under --no-fair")
            if reason not in self.refused and len(self.refused) < 20:
                self.refused.append(reason)
            info = {"type": "PermissionError", "builtins": ["PermissionError"], "traceback": [],
                    "message": f"refused: {reason}; fair grading serves only the functions of the exercises "
                               f"that {view} imports"}
            return frames.pack({"status": "error", "error": info}, []), False, 0.0
        what = f"the reference's {exercise}.{name}(), which your code called,"
        if timeout <= 0:
            return _error(TimeoutError(f"{what} was not run: your call had used its {self.limits.call_timeout:g} s "
                                       "of CPU time")), False, 0.0
        worker = self.worker()
        before = worker.spent
        try:
            reply, reply_arrays = worker.forward(exercise, name, header["payload"], arrays, timeout, asker_spent)
        except SandboxError:
            raise
        except TimeoutError:
            if asker_spent is not None and asker_spent():
                return _error(TimeoutError(
                    f"{what} was stopped: your code's other processes or threads used the CPU time left to your "
                    "call while the reference answered")), False, max(0.0, worker.spent - before)
            return _error(TimeoutError(
                f"{what} used the {timeout:.3g} s of CPU time left to your call and was stopped (what your code asks "
                "of the reference is charged to it); call it with smaller sizes or less often")), False, \
                max(0.0, worker.spent - before)
        except Exception as failure:  # noqa: BLE001 - the worker ended (memory, a reply too large) or did not import
            error: BaseException
            if worker.out_of_memory:
                error = MemoryError(f"{what} needed more than {worker.limits.memory_bytes >> 20} MiB of memory (your "
                                    "code's limit, which covers what it asks of the reference) and was stopped; "
                                    "call it with smaller sizes")
            elif isinstance(failure, WorkerCrashed):
                error = MemoryError(f"{what} could not be answered (the reference's worker: {failure}); call it "
                                    "with smaller sizes")
            else:
                error = RuntimeError(f"{what} could not be answered ({failure})")
            return _error(error), False, max(0.0, worker.spent - before)
        cpu = max(0.0, worker.spent - before)
        if reply.get("status") == "ok":
            return frames.pack({"status": "ok", "payload": reply.get("payload")}, reply_arrays), True, cpu
        info = reply.get("error") if reply.get("status") == "error" else None
        info = dict(info) if isinstance(info, dict) else {"type": "RuntimeError", "builtins": ["RuntimeError"],
                                                          "message": f"{what} failed"}
        info["traceback"] = []  # the reference's frames and source lines stay on its side
        kinds = [info.get("type"), *(info.get("builtins") if isinstance(info.get("builtins"), list) else [])]
        kept = not any(kind in protocol.MOMENTARY_ERRORS for kind in kinds)  # its worker's memory or stack: not kept
        return frames.pack({"status": "error", "error": info}, []), kept, cpu

    def run_grading_function(self, header: dict, arrays: list) -> tuple[dict, list]:
        """Run a function the test passed as an argument (e.g. a model's ``predict``) for the codec.

        Only functions of the call in progress can be reached, by their index; the arguments are plain data.
        """
        try:
            protocol.check(header, protocol.CALLBACKS)
        except protocol.ProtocolError as error:
            raise Ended(f"the worker sent a message the protocol does not allow ({error})") from None
        try:
            index = header.get("index")
            if type(index) is not int or not 0 <= index < len(self.grading_functions):
                raise ValueError("this function belongs to an earlier call and cannot be called any more")
            args, kwargs = codec.decode(header["payload"], arrays)
            function = self.grading_functions[index]
            try:
                # The test's code, on sizes the student chose: within the student's memory limit (host_memory);
                # a watched call's steps run in a worker of their own (``grader.sandbox.watched``), limited there.
                with contextlib.nullcontext() if getattr(function, "runs_elsewhere", False) else \
                        host_memory.bounded(self.limits.memory_bytes):
                    result = function(*args, **kwargs)
            except MemoryError:
                raise MemoryError(f"the test's function that your code called needed more than "
                                  f"{self.limits.memory_bytes >> 20} MiB of memory (your code's limit, which covers "
                                  "what it asks of the test's functions); call it with smaller sizes") from None
            answer_arrays: list = []
            payload = codec.result_payload(result, [list(args), kwargs], header["payload"], arrays, answer_arrays)
        except Exception as error:  # noqa: BLE001 - raised again in the student's code, as in-process
            info = codec.exception_info(error)
            info["traceback"] = []  # the test's frames and source lines stay on this side (hidden tests too)
            return {"status": "error", "error": info}, []
        return {"status": "ok", "payload": payload}, answer_arrays


def _error(error: BaseException) -> bytes:
    """An answer that raises ``error`` (its type and message only) in the student's code."""
    info = codec.exception_info(error)
    info["traceback"] = []
    return frames.pack({"status": "error", "error": info}, [])
