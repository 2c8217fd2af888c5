"""A gate's measured call may not change the arrays the gate then computes its expected values from (issue 32).

Graded, a gate calls the student's function through the worker's ``measure_cpu`` (``tests.effort.cpu_call``),
outside the Kit, and the worker copies the call's changes to its arguments back. A hostile round rewrote the
embedding that ``train_match_head``'s gate replays its training from (every query input zero, a zero weight): the
gate agreed with itself and a numerical-gradient submission scored 23.125 against its control's 20.5. Such a change
now fails the test, as it does through the Kit, and is undone before the gate computes anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tests.failures
import tests.kit
from tests.effort import cpu_call


class RewritingWorker:
    """``measure_cpu`` as the grader's worker offers it, for code that zeroes its first argument in place."""

    def measure_cpu(self, exercise: str, name: str, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        args[0][...] = 0.0  # what the worker's reply carries back into the caller's array
        return np.zeros(3), 0.01


class Failures:
    """Stands in for pytest-check's ``check`` in the kit: keeps what would have failed the test."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def fail(self, message: str) -> None:
        self.messages.append(message)


def test_a_measured_call_that_changes_its_arguments_fails_and_is_undone(monkeypatch):
    failures = Failures()
    monkeypatch.setattr(tests.failures, "check", failures)
    embedding = np.arange(12.0).reshape(4, 3)
    result, seconds = cpu_call(tests.kit.Kit(RewritingWorker(), "distance"), "train_match_head", embedding, steps=3)
    np.testing.assert_array_equal(embedding, np.arange(12.0).reshape(4, 3))  # as the gate drew it
    assert len(failures.messages) == 1
    assert "train_match_head() changed its input" in failures.messages[0] and "in place" in failures.messages[0]
    assert seconds == 0.01 and np.array_equal(result, np.zeros(3))


def test_a_measured_call_that_leaves_its_arguments_alone_fails_nothing(monkeypatch):
    failures = Failures()
    monkeypatch.setattr(tests.failures, "check", failures)

    class Honest(RewritingWorker):
        def measure_cpu(self, exercise: str, name: str, *args: Any, **kwargs: Any) -> tuple[Any, float]:
            return np.ones(2), 0.02

    impl = tests.kit.Kit(Honest(), "distance")
    embedding = np.arange(6.0)
    assert cpu_call(impl, "train_match_head", embedding)[1] == 0.02
    assert failures.messages == [] and np.array_equal(embedding, np.arange(6.0))
