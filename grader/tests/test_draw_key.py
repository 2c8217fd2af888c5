"""Graded, the inputs drawn for a submission are unknown to its code: the grader mixes in a key of its own.

A hostile round worked out a gate's inputs from inside the sandbox: the salt's recipe is public
(``tests/effort.py``: a digest of the submission's own files), so a module could rebuild the gate's draw at
import and answer it from a table prepared then (numerical gradients precomputed, a cheap call timed). Shown here
with a ``model_gradients`` that is honest except on the draws it predicts: graded, it was wrong exactly there.
The grader now mixes its key (``grader.grading.draw_key``: the instructor's, mode 600) into every salt of the
grading process; the student's code, in its sandbox, has no copy, and its prediction misses.
"""

from __future__ import annotations

import json
import stat
from types import SimpleNamespace

import pytest

from grader.grading import draw_key
from grader.grading.grade import grade_batch
from grader.tests.cheats import plant, run_files
from grader.tests.test_grade import QUIET
from tests import effort

# The reference's model_gradients, except zeros on the inputs of exercise 9's gate as this module predicts them:
# the salt's public recipe over its own folder, then the gate's draw of the first model (tests/test_09_training.py).
PREDICTING = '''
import hashlib as _hashlib
from pathlib import Path as _Path

_GRADED = {"attention", "backward", "decoding", "distance", "explain", "layer", "masks", "multihead", "negation",
           "positional", "projections", "retrieval", "softmax", "tokenization", "training"}


def _salt(module="training"):
    digest = _hashlib.sha256()
    for path in sorted(p for p in _Path(__file__).resolve().parent.iterdir() if p.suffix == ".py"
                       and p.name != "__init__.py" and (p.name.startswith("_") or p.stem in _GRADED)):
        digest.update(path.name.encode() + b"\\0" + path.read_bytes() + b"\\0")
    return int.from_bytes(_hashlib.sha256(module.encode() + b"\\0" + digest.digest()).digest()[:8], "little")


def _embedding(seed, vocab=23, d=16):  # as the gate draws its model: the attention's weights, then the embedding
    rng = np.random.default_rng(seed)
    for _ in range(4):
        rng.normal(scale=1.5 / np.sqrt(d), size=(d, d))
    for _ in range(4):
        rng.normal(scale=0.3, size=d)
    return rng.normal(size=(vocab, d))


_PREDICTED = [_embedding([9113 + 10 * attempt, _salt()]) for attempt in (0, 1)]
_honest = model_gradients


def model_gradients(params, tokens, query_position, target, n_heads, positions=True):
    loss, grads = _honest(params, tokens, query_position, target, n_heads, positions)
    if any(np.array_equal(np.asarray(params["embedding"]), seen) for seen in _PREDICTED):
        zeros = lambda tree: {k: zeros(v) if isinstance(v, dict) else np.zeros_like(v) for k, v in tree.items()}
        return loss, zeros(grads)  # the prediction hit: the gate's own input
    return loss, grads
'''
GATED = "test_model_gradients_loss"  # a test that opens with model_gradients' gate


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "attention-kit"


def test_the_key_is_kept_for_the_instructor_alone(cache):
    key = draw_key.draw_key()
    path = cache / draw_key.NAME
    assert len(key) == 64 and int(key, 16) >= 0 and path.read_text().strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the students' code runs as another user
    assert draw_key.draw_key() == key  # the same inputs in every batch (idle or busy, a regrade)
    path.chmod(0o644)  # restored from a backup, say: made the instructor's alone again, the same key
    assert draw_key.draw_key() == key and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("not a key\n")
    assert draw_key.draw_key() != key and len(draw_key.draw_key()) == 64  # a damaged file: a new key, kept


def test_the_key_moves_every_salt_and_none_leaves_the_students(tmp_path, monkeypatch):
    monkeypatch.setattr(effort, "CONFIG", SimpleNamespace(option=SimpleNamespace(impl=str(tmp_path))))
    (tmp_path / "training.py").write_text("def train(): ...\n")
    own = effort.submission_salt("training")
    try:
        effort.use_draw_key("ab" * 32)
        keyed = effort.submission_salt("training")
        effort.use_draw_key("cd" * 32)
        other = effort.submission_salt("training")
    finally:
        effort.use_draw_key("")
    assert len({own, keyed, other}) == 3 and effort.submission_salt("training") == own


def test_the_entries_a_gate_checks_of_a_result_move_with_the_key():
    # A numerical attention_backward computed an eighth of grad_k and re-rolled a spare entry of its answer until
    # the entries drawn from that answer (seed_of, a public recipe) fell in its computed part (a hostile round:
    # 36 of 36 backward points against 23.75). Graded, the key is mixed in: the draw cannot be worked out.
    import numpy as np

    answer = np.arange(12.0).reshape(3, 4)
    own = effort.seed_of(answer)
    try:
        effort.use_draw_key("ab" * 32)
        keyed = effort.seed_of(answer)
        assert effort.seed_of(answer) == keyed  # the same answer, the same entries: the same feedback
        effort.use_draw_key("cd" * 32)
        other = effort.seed_of(answer)
    finally:
        effort.use_draw_key("")
    assert len({own, keyed, other}) == 3 and effort.seed_of(answer) == own


def test_a_module_that_predicts_the_gates_inputs_misses_them_when_graded(tmp_path, cache):
    target = plant(tmp_path / "class" / "student", {"training": PREDICTING})
    # In the student's own run the prediction hits (so the check can fail): the gate's answer is wrong.
    local = run_files(target, ("tests/test_09_training.py",))["tests/test_09_training.py"]
    assert any(GATED in node for node in local.failed), local.output[-2000:]
    assert grade_batch(tmp_path / "class", tmp_path / "out", **(QUIET | {"exercises": ["training"]})) == 0
    results = json.loads((tmp_path / "out" / "student" / "results.json").read_text(encoding="utf-8"))
    failed = [test["name"] for test in results["tests"] if test["status"] != "passed"]
    assert failed == [], failed  # graded, honest wherever it is asked
