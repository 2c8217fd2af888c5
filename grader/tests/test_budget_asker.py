"""A reference's answer slowed by the asking student's own processes is the student's time, not a busy machine's.

While the reference's worker answers a student's callback (fair grading), the student's other processes and threads
run on. Thirty spinners, each in a session of its own (the kernel's autogroup gives each session an equal share),
starved the reference's answer of CPU: it reached its wall bound without using its CPU time, was judged the
machine's ("busy"), run again twice, and the row came back "not graded: the machine was too busy" with the batch
exiting 1, after four minutes. The reference's budget now asks whether the asking call has used its own CPU time
meanwhile (``Budget.asker_spent``): then the answer is stopped at once, and the time is the student's.
"""

from __future__ import annotations

from pathlib import Path

from grader.sandbox import frames, protocol
from grader.sandbox.budget import Budget
from grader.sandbox.callbacks import Callbacks
from grader.sandbox.limits import Limits


def test_an_answer_whose_asker_has_used_its_time_is_stopped_as_the_askers():
    budget = Budget(Limits())
    budget.start_call(2.0)
    budget.asker_spent = lambda: True
    assert budget.extend() is False
    assert budget.verdict == "asker" and not budget.machine_busy  # never run again as a busy machine's


def test_an_answer_whose_asker_has_time_left_runs_on():
    budget = Budget(Limits())
    budget.start_call(2.0)
    budget.asker_spent = lambda: False
    assert budget.extend() is True and budget.verdict == ""


def test_outside_a_call_nothing_is_spent():
    budget = Budget(Limits())
    assert budget.call_spent() is False
    budget.start_call(0.5)
    budget.finish_call()
    assert budget.call_spent() is False


class _StoppedWorker:
    """A reference worker whose answer is stopped (as the reference's budget stops it)."""

    limits = Limits()
    out_of_memory = False
    spent = 0.0

    def forward(self, module, name, payload, arrays, timeout, asker_spent=None):
        self.asked = asker_spent
        raise TimeoutError("stopped")

    def close(self) -> None:
        pass


def _answered(asker_spent, monkeypatch) -> tuple[dict, _StoppedWorker]:
    worker = _StoppedWorker()
    callbacks = Callbacks(Path("."), True, Limits(), lambda: worker)
    monkeypatch.setattr(callbacks, "allowed", lambda view: frozenset({("training", "train")}))
    monkeypatch.setattr(protocol, "check", lambda *args: None)  # the header's form: the protocol's tests' business
    header = {"op": "callback", "exercise": "training", "function": "train", "payload": [[], {}]}
    answer, kept, _ = callbacks.answer(header, [], "negation", 1.5, asker_spent)
    (reply, _), _ = frames.unpack(answer)
    assert not kept
    return reply, worker


def test_the_student_is_told_that_their_own_processes_used_the_time(monkeypatch):
    reply, worker = _answered(lambda: True, monkeypatch)
    assert worker.asked is not None  # the reference's worker was given the question to ask
    message = reply["error"]["message"]
    assert reply["error"]["type"] == "TimeoutError" and "your code's other processes or threads" in message, reply


def test_an_answer_that_used_the_time_left_itself_says_so(monkeypatch):
    reply, _ = _answered(lambda: False, monkeypatch)
    message = reply["error"]["message"]
    assert "used the 1.5 s of CPU time left to your call" in message and "other processes" not in message, reply
