"""The sealed answers a worker holds are the kit's bytes: they never take the student's memory.

A worker is given a view's sealed answers at the view's first call, down its pipe (``proxy._send_sealed``): up to
an eighth of its memory (``protocol.ANSWERS_SHARE``) that its code did not ask for. Its address space's limit
(``RLIMIT_AS``) and its control group's memory limit rise by their size (``forkserver.apply_limits`` leaves the
room, the worker takes it; ``cgroup.WorkerGroup.allow``), so code near the limit passes or fails alike whether
or not the kit's check recorded answers (a hostile round: with 64 MiB of answers mapped, a worker could allocate
860 MiB where it could allocate 921 MiB without them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.sandbox import frames
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.sandbox.sealed import SEALED
from grader.tests.test_trust import copy_reference

# The largest array the student's code can allocate, in MiB (to 1 MiB), from attention's view.
MEASURES = '''
import numpy as _np


def scaled_dot_product_attention(q, k, v, mask=None):
    low, high = 0, 4 << 30
    while high - low > (1 << 20):
        middle = (low + high) // 2
        try:
            block = _np.empty(middle, _np.uint8)
            del block
            low = middle
        except MemoryError:
            high = middle
    return float(low >> 20)
'''
ANSWERS_MIB = 48


def _allocatable(folder: Path) -> tuple[float, int | None]:
    """What the student's code could allocate, and its group's memory limit then (None: no group here)."""
    impl = IsolatedImplementation(folder, limits=Limits(call_timeout=5))
    try:
        most = impl.function("attention", "scaled_dot_product_attention")(np.zeros(2), np.zeros(2), np.zeros(2))
        group = impl._group
        limit = None
        if group is not None and group.memory is not None:
            name = "memory.limit_in_bytes" if group.support.version == 1 else "memory.max"
            limit = int((group.memory / name).read_text())
        return most, limit
    finally:
        impl.close()


def test_the_sealed_answers_given_to_a_worker_leave_the_students_memory_as_it_was(tmp_path: Path) -> None:
    folder = copy_reference(tmp_path / "student", attention=MEASURES)
    SEALED.use(None)
    without, limit_without = _allocatable(folder)
    SEALED.recording(True)
    for number in range(ANSWERS_MIB // 8):  # 48 MiB of answers, in attention's view
        question = frames.pack({"op": "callback", "exercise": "softmax", "function": "softmax",
                                "payload": [[float(number)], {}]}, [])
        answer = frames.pack({"status": "ok", "payload": [{"$": "array", "i": 0}, None]},
                             [np.full(1 << 20, float(number))])
        SEALED.record("attention", question, answer, 0.01)
    SEALED.save(tmp_path / "answers" / "kit.frame")
    SEALED.use(tmp_path / "answers" / "kit.frame")
    try:
        with_answers, limit_with = _allocatable(folder)
    finally:
        SEALED.use(None)
    assert without > 0 and with_answers >= without - 8, (
        f"with {ANSWERS_MIB} MiB of the kit's sealed answers held, the student's code could allocate "
        f"{with_answers:.0f} MiB, {without:.0f} MiB without them")
    if limit_without is not None:  # the group's limit: the student's, then the student's and the answers'
        assert limit_with is not None and limit_with - limit_without >= ANSWERS_MIB << 20, (limit_without, limit_with)
