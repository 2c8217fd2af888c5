"""The grading side's answers to a worker's callbacks: fair grading's reference, and the test's own functions.

Run by the grading process, while a request of its worker is in flight. Under
fair grading the worker asks the reference to run the functions of the
exercises that the student's module imports (``protocol.reference_functions``
says which: anything else is refused, and the refusal recorded); a call whose
arguments hold a function of the test (a model's ``predict``) asks the
grading side to run it. Both answer with a frame of plain data; the errors
they raise go back as type and message only. The reference is a pure
function of its arguments, so its answers are remembered (:data:`_ANSWERS`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from grader.sandbox import codec, frames, protocol
from grader.sandbox.channel import Ended
from grader.sandbox.limits import Limits
from tests.kit import LocalImplementation

# Fair grading's callbacks, answered before: (reference folder, view, the callback's frame) -> the answer's
# frame. The reference is a pure function of its arguments (random generators travel with their state), and the
# graded tests use seeded inputs, so students whose code gets as far as the same callback ask the very same
# question; the answer is sent again without decoding, running the reference or encoding. Per process.
_ANSWERS: dict[tuple[str, str, bytes], bytes] = {}
_ANSWERS_MAX_BYTES = 32 << 20
_answers_bytes = 0
CALLBACK_START = b'{"h":{"op":"callback",'  # how the worker's callback frames begin (see Worker.forwarder)


def remembered_answer(key: tuple[str, str, bytes]) -> bytes | None:
    """The answer given before to the callback frame ``key[-1]`` (None: parse it and answer it)."""
    return _ANSWERS.get(key) if key[-1].startswith(CALLBACK_START, frames.PREFIX.size) else None


def remember_answer(key: tuple[str, str, bytes], answer: bytes) -> None:
    """Remember an allowed callback's answer (within ``_ANSWERS_MAX_BYTES`` in all)."""
    global _answers_bytes
    size = len(key[-1]) + len(answer)
    if size > _ANSWERS_MAX_BYTES // 8:  # a large answer is rarely asked again: never let it fill the cache
        return
    if _answers_bytes + size > _ANSWERS_MAX_BYTES:
        _ANSWERS.clear()  # simpler than LRU, and a class rarely fills it: most questions recur
        _answers_bytes = 0
    _ANSWERS[key] = answer
    _answers_bytes += size


def estimated_bytes(value: Any) -> int:
    """A generous estimate of what a reference function may allocate for these arguments (float64 bytes).

    Integers (sizes: ``init_weight(rng, n, m)``, ``causal_mask(n)``) give their product, or the largest one
    squared (a mask is n x n); arrays give their size, and their rows times the most positions of any of them (scores
    are positions x positions). Small for every honest call, far over the limit for a 9000 x 9000 request.
    """
    sizes: list[int] = []
    rows: list[int] = []
    positions: list[int] = []
    stack, seen = [value], 0
    while stack and seen < 10_000:
        item = stack.pop()
        seen += 1
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            if item > 1:
                sizes.append(item)
        elif isinstance(item, np.ndarray):
            rows.append(item.size // max(item.shape[-1], 1) if item.ndim else 1)
            positions.append(item.shape[-2] if item.ndim >= 2 else 1)
            positions.append(item.size)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    elements = 0
    if sizes:
        elements = max(sizes) ** 2  # an n x n mask from one size
        product = 1
        for size in sizes:
            product = min(product * size, 1 << 62)
        elements = max(elements, product)
    if rows:
        elements = max(elements, max(rows) * max(positions[0::2]), max(positions[1::2]))
    return elements * 8


class Callbacks:
    """What one submission's worker may ask the grading side, and the answers.

    Parameters
    ----------
    reference : pathlib.Path
        The reference implementation (fair grading).
    fair : bool
        Whether the reference serves the dependencies at all.
    limits : grader.sandbox.limits.Limits
        ``reference_bytes`` and ``reply_bytes`` bound what the reference computes and sends.
    """

    def __init__(self, reference: Path, fair: bool, limits: Limits) -> None:
        self.reference, self.fair, self.limits = reference, fair, limits
        self.refused: list[str] = []  # the distinct callbacks the channel refused (at most 20; see refusals)
        self.refusals = 0
        # The worker's init message: the functions of each exercise, the exercises each one depends on.
        self.init_data: dict[str, dict[str, list[str]]] = {"functions": {}, "dependencies": {}}
        self.grading_functions: list[Callable[..., Any]] = []  # the functions among the current call's arguments
        self._allowed: dict[str, frozenset[tuple[str, str]]] = {}
        self._reference: LocalImplementation | None = None

    def implementation(self) -> LocalImplementation:
        """The reference, imported in this process (once)."""
        if self._reference is None:
            self._reference = LocalImplementation(self.reference)
        return self._reference

    def allowed(self, view: str) -> frozenset[tuple[str, str]]:
        """The reference functions the channel serves while a request of ``view`` runs (see ``protocol``)."""
        if view not in self._allowed:
            self._allowed[view] = protocol.reference_functions(
                view, self.init_data["dependencies"], self.init_data["functions"]) if self.fair else frozenset()
        return self._allowed[view]

    def answer(self, header: dict, arrays: list, view: str) -> tuple[bytes, bool]:
        """Answer a callback (fair grading): the answer's frame, and whether it was allowed.

        A callback for anything but the functions of ``view``'s dependencies is
        refused (a PermissionError in the student's code) and recorded. A
        reference error goes back as its type and message only: no traceback,
        no source line of the reference.
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
            return frames.pack({"status": "error", "error": info}, []), False
        limit = self.limits.reference_bytes
        try:
            function = self.implementation().function(exercise, name)
            args, kwargs = codec.decode(header["payload"], arrays)
            estimate = estimated_bytes([args, kwargs])
            if estimate > limit:  # refused before the reference runs: it would run in the grading process
                raise MemoryError(f"the reference's {exercise}.{name}() was asked for about {estimate >> 20} MiB "
                                  f"(the grader computes at most {limit >> 20} MiB for one call); use smaller sizes")
            result = function(*args, **kwargs)
            answer_arrays: list = []
            payload = codec.result_payload(result, [list(args), kwargs], header["payload"], arrays, answer_arrays)
            answer = frames.pack({"status": "ok", "payload": payload}, answer_arrays)
            del result, answer_arrays, payload
            if len(answer) > min(limit, self.limits.reply_bytes):
                raise MemoryError(f"the reference's answer of {exercise}.{name}() would be {len(answer) >> 20} MiB "
                                  f"(the grader sends at most {min(limit, self.limits.reply_bytes) >> 20} MiB); "
                                  "use smaller sizes")
        except Exception as error:  # noqa: BLE001 - raised again in the student's code, as in-process
            info = codec.exception_info(error)
            info["traceback"] = []  # the reference's frames and source lines stay on this side
            return frames.pack({"status": "error", "error": info}, []), not isinstance(error, MemoryError)
        return answer, True

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
            result = self.grading_functions[index](*args, **kwargs)
            answer_arrays: list = []
            payload = codec.result_payload(result, [list(args), kwargs], header["payload"], arrays, answer_arrays)
        except Exception as error:  # noqa: BLE001 - raised again in the student's code, as in-process
            info = codec.exception_info(error)
            info["traceback"] = []  # the test's frames and source lines stay on this side (hidden tests too)
            return {"status": "error", "error": info}, []
        return {"status": "ok", "payload": payload}, answer_arrays
