"""A worker grading an exercise must not hold the reference's sealed answers to that very exercise's functions.

The kit's check records, per view, the reference's answers to the callbacks that view's modules make: the table
of ``attention`` holds the reference's ``softmax`` on the check's inputs. While ``softmax`` itself is graded,
asking the reference's ``softmax`` is refused (``protocol.reference_functions``: never the view's own functions);
but a worker once held every view's answers from its fork (one file, mapped), and any worker keeps the views it
was given before: student code that found the worker's tables and wrote the question its own function was asked
opened the reference's answer, with no callback and nothing recorded, wherever a test asks a function what a later
exercise's reference asked it in the check (``causal_mask(8)``, the reading's worked example). A worker now gets a
view's answers at that view's first call only, and one given answers about an exercise is replaced before it
grades that exercise (``sealed.Held``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import codec, frames
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.sandbox.sealed import SEALED
from grader.tests.test_trust import copy_reference

# The student's softmax: not written; it only looks for the reference's answer among the worker's sealed answers.
PEEKS = '''
import gc as _gc, sys as _sys


def softmax(x, axis=-1):
    main = _sys.modules["__main__"]
    worker = next((o for o in _gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "open_sealed")), None)
    if worker is not None:
        arrays = []
        message = {"op": "callback", "exercise": "softmax", "function": "softmax",
                   "payload": main.codec.encode([[x], {}], arrays)}
        for table in list(worker.sealed.values()):
            opened, _ = worker.open_sealed(table, message, arrays)
            if opened is not None:
                return main.codec.receive_result(opened[0]["payload"], opened[1], (x,), {})
    raise NotImplementedError("softmax is not written")
'''


@pytest.fixture
def sealed_softmax(tmp_path: Path):
    """The check's answers in force: the ``attention`` view's holds the reference's softmax of ``x``."""
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    arrays: list = []
    question = frames.pack({"op": "callback", "exercise": "softmax", "function": "softmax",
                            "payload": codec.encode([[x], {}], arrays)}, arrays)
    weights = np.exp(x - x.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    answer = frames.pack({"status": "ok", "payload": [{"$": "array", "i": 0}, None]}, [weights])
    SEALED.use(None)
    SEALED.recording(True)
    SEALED.record("attention", question, answer, 0.01)
    path = tmp_path / "answers" / "kit.frame"
    SEALED.save(path)
    SEALED.use(path)
    try:
        yield x, weights
    finally:
        SEALED.use(None)


def test_a_worker_grading_softmax_cannot_open_the_references_softmax(tmp_path: Path, sealed_softmax) -> None:
    x, weights = sealed_softmax
    impl = IsolatedImplementation(copy_reference(tmp_path / "student", softmax=PEEKS), limits=Limits(call_timeout=5))
    try:
        q = np.ones((2, 3))
        impl.function("attention", "attention_scores")(q, q)  # the attention view: its answers reach the worker
        softmax = impl.function("softmax", "softmax")  # the softmax view: asking the reference's is refused
        try:
            got = softmax(x)
        except NotImplementedError:
            return  # held: the reference's answer to the graded function could not be opened
        np.testing.assert_allclose(got, weights)
        pytest.fail("the student's unwritten softmax returned the reference's answer, opened from the sealed "
                    "answers of another view while softmax itself was graded")
    finally:
        impl.close()
