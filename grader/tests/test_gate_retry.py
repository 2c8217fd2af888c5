"""A cost gate's second attempt runs on inputs of its own: remembering answers buys nothing (issue 32).

A gate that finds a call over its CPU allowance tries once more (a busy
machine may have slowed the first). Graded, the worker lets the slow call
finish and reports its CPU time, so code that remembers its answers by their
inputs (a numerical estimate, slow the first time) would answer the same
inputs again at no cost. Here a stand-in for the grader's worker charges a
call only for inputs it has not seen (the reference computes the answers):
every gate must still fail it as too costly.
"""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

import pytest

import solutions.backward
import solutions.distance
import solutions.negation
import solutions.training
from tests.effort import within_budget

SLOW = 30.0  # CPU seconds charged for inputs seen the first time: far over any gate's allowance


class RememberingWorker:
    """``measure_cpu`` as the grader's worker offers it, for code that remembers each answer by its inputs."""

    modules = {"backward": solutions.backward, "training": solutions.training, "negation": solutions.negation,
               "distance": solutions.distance}

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def measure_cpu(self, exercise: str, name: str, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        key = hashlib.sha256(pickle.dumps((name, args, sorted(kwargs.items())))).hexdigest()
        seconds = 0.0 if key in self.seen else SLOW
        self.seen.add(key)
        return getattr(self.modules[exercise], name)(*args, **kwargs), seconds


class Impl:
    """What a test's ``impl`` offers the gates: the implementation behind it, and its exercise."""

    measures_elsewhere = False

    def __init__(self, exercise: str) -> None:
        self._implementation, self._exercise = RememberingWorker(), exercise

    def measure(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, int]:
        """A call's result and its peak memory: none here (the memory gate, asked first, passes; its time is tried)."""
        return getattr(RememberingWorker.modules[self._exercise], name)(*args, **kwargs), 0


def test_the_second_attempt_draws_inputs_of_its_own():
    drawn, calls = [], []

    def draw(attempt: int) -> int:
        drawn.append(attempt)
        return 100 + attempt

    def call(inputs: int) -> tuple[int, float]:
        calls.append(inputs)
        return inputs, (5.0 if inputs == 100 else 0.5)

    assert within_budget(draw, call, budget=1.0) == (101, 101, 0.5)
    assert drawn == [0, 1] and calls == [100, 101]
    calls.clear()
    assert within_budget(lambda attempt: 7, lambda inputs: (calls.append(inputs), 0.1), budget=1.0)[2] == 0.1
    assert calls == [7]  # within the allowance: no second attempt


@pytest.mark.parametrize(("module", "exercise", "name"), [
    ("tests.test_08_backward", "backward", "attention_backward"),
    ("tests.test_08_backward", "backward", "layer_norm_backward"),
    ("tests.test_09_training", "training", "model_gradients"),
    ("tests.test_12_negation", "negation", "pooled_gradients"),
    ("tests.test_13_distance", "distance", "train_match_head"),
])
def test_a_gate_fails_code_that_answers_its_retry_from_memory(module: str, exercise: str, name: str):
    import importlib

    gate = importlib.import_module(module)._gate
    impl = Impl(exercise)
    failures = gate(impl, name) if exercise == "backward" else gate(impl)
    assert failures, f"{name}: a call charged {SLOW} s for new inputs and nothing for repeated ones passed the gate"
    assert "CPU time" in failures[0].what, failures[0]
    assert len(impl._implementation.seen) >= 2  # it did try again, on other inputs


@pytest.mark.parametrize(("module", "exercise", "name"), [
    ("tests.test_08_backward", "backward", "softmax_backward"),
    ("tests.test_09_training", "training", "model_gradients"),
    ("tests.test_12_negation", "negation", "pooled_gradients"),
    ("tests.test_13_distance", "distance", "train_match_head"),
])
def test_a_gates_inputs_follow_the_submissions_own_bytes(module: str, exercise: str, name: str, tmp_path,
                                                         monkeypatch):
    """Answers stored for a gate's inputs, computed beforehand, change the file, and so the inputs (issue 32)."""
    import importlib
    from types import SimpleNamespace

    from tests import effort

    gate = importlib.import_module(module)._gate
    seen = {}
    for label, text in (("one", "# one\n"), ("same", "# one\n"), ("other", "# other\n")):
        folder = tmp_path / label
        folder.mkdir()
        (folder / f"{exercise}.py").write_text(text, encoding="utf-8")
        monkeypatch.setattr(effort, "CONFIG", SimpleNamespace(option=SimpleNamespace(impl=str(folder))))
        impl = Impl(exercise)
        gate(impl, name) if exercise == "backward" else gate(impl)
        seen[label] = sorted(impl._implementation.seen)
    assert seen["one"] == seen["same"], "the same bytes must give the same inputs (the same feedback)"
    assert not set(seen["one"]) & set(seen["other"]), "other bytes must give other inputs"
