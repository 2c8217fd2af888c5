"""The hidden tests' sealed answers reach a worker only while the hidden tests run (``sealed.HIDDEN``).

A worker can test any question its code writes against the index of the sealed answers it holds, offline, with
nothing asked or recorded. Given the answers of the kit's whole check during the public tests, whose feedback the
student sees at once, a hostile ``init_multi_head`` swept seeds and sizes and printed the arguments of a hidden
test's call (``default_rng(65)``, sizes 1) in a public test's failure. The hidden tests run after every public test;
an answer first asked in a hidden test is now given only from then on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import codec, frames
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.sandbox.sealed import HIDDEN, SEALED, Held
from grader.tests.test_trust import copy_reference

# The student's attention_scores: does the worker hold an answer to softmax of the probe's question? (1.0 or 0.0)
PROBES = '''
import gc as _gc, sys as _sys
import numpy as _np


def attention_scores(q, k):
    main = _sys.modules["__main__"]
    worker = next((o for o in _gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "open_sealed")), None)
    arrays = []
    question = _np.array([[5.0, 6.0, 7.0]])
    message = {"op": "callback", "exercise": "softmax", "function": "softmax",
               "payload": main.codec.encode([[question], {}], arrays)}
    found = any(worker.open_sealed(table, message, arrays)[0] is not None for table in list(worker.sealed.values()))
    return _np.array([float(found)])
'''


def _question(x: np.ndarray) -> bytes:
    arrays: list = []
    return frames.pack({"op": "callback", "exercise": "softmax", "function": "softmax",
                        "payload": codec.encode([[x], {}], arrays)}, arrays)


def _answer(x: np.ndarray) -> bytes:
    weights = np.exp(x - x.max(axis=-1, keepdims=True))
    return frames.pack({"status": "ok", "payload": [{"$": "array", "i": 0}, None]}, [weights / weights.sum(-1)])


@pytest.fixture
def recorded(tmp_path: Path):
    """A check's answers: the attention view's softmax of one question asked by a public test, one by a hidden."""
    public, hidden = np.array([[1.0, 2.0, 3.0]]), np.array([[5.0, 6.0, 7.0]])
    SEALED.use(None)
    SEALED.recording(True)
    try:
        SEALED.hidden = False
        SEALED.record("attention", _question(public), _answer(public), 0.01)
        SEALED.hidden = True
        SEALED.record("attention", _question(hidden), _answer(hidden), 0.01)
        SEALED.record("attention", _question(public), _answer(public), 0.01)  # asked again: public already
        path = tmp_path / "answers" / "kit.frame"
        SEALED.save(path)
        SEALED.hidden = False
        SEALED.use(path)
        yield path
    finally:
        SEALED.hidden = False
        SEALED.use(None)


def test_the_file_keeps_the_hidden_tests_answers_apart(recorded: Path) -> None:
    assert {view: len(entries) for view, (entries, _, _) in SEALED.views.items()} == {"attention": 1,
                                                                                      "attention" + HIDDEN: 1}
    public = frames.unpack(SEALED.request("attention", 1 << 30))[0][0]["entries"]
    SEALED.hidden = True
    both = frames.unpack(SEALED.request("attention", 1 << 30))[0][0]["entries"]
    assert len(public) == 1 and len(both) == 2 and public[0] in both, (public, both)


def test_a_worker_holds_the_hidden_tests_answers_only_while_they_run(tmp_path: Path, recorded: Path) -> None:
    impl = IsolatedImplementation(copy_reference(tmp_path / "student", attention=PROBES), limits=Limits(call_timeout=5))
    try:
        probe = impl.function("attention", "attention_scores")
        assert probe(np.ones((2, 3)), np.ones((2, 3))).tolist() == [0.0], \
            "during the public tests a worker held the answer to a question only a hidden test asked"
        SEALED.hidden = True  # the recorder's, at the first hidden test: the same worker now gets them too
        assert probe(np.ones((2, 3)), np.ones((2, 3))).tolist() == [1.0]
    finally:
        impl.close()


def test_a_view_given_during_the_public_tests_is_given_again_for_the_hidden_ones() -> None:
    held = Held(lambda view: ["softmax"])
    SEALED.hidden = False
    try:
        held.given("attention", 10)
        assert held.has("attention") and held.about("softmax")
        SEALED.hidden = True
        assert not held.has("attention")
        held.given("attention", 20)
        assert held.has("attention") and held.sizes == {"attention": 20}
    finally:
        SEALED.hidden = False
