"""A call that lowers its own priority waits for a CPU by its own doing: the student's time, never a busy machine's.

A call is forgiven as the machine's ("busy": run again on a fresh worker, twice, then the row is "not graded: the
machine was too busy") when it reached its wall bound having neither used its CPU budget nor slept, that is, having
waited for a CPU (its main thread's run delay, ``/proc/<pid>/schedstat``). Student code can make its main thread
wait without spending CPU time: ``os.nice(19)`` or ``os.sched_setscheduler(0, os.SCHED_IDLE, ...)``, both allowed
to any user, then a loop. Wherever anything else runs beside it in the same scheduling group (the kernel without
autogroup, ``kernel.sched_autogroup_enabled=0``, or a grader and its workers in one cgroup), such a call starves, is
judged "busy", and the submission's row is "not graded" on every rerun, while the same code times out (0 points)
on an idle machine. The load clock now remembers the worker's nice value and policy at its start
(``load.LoadClock.lowered``), and a call whose worker lowered them is judged the student's ("idle"), charged its
waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import load
from grader.sandbox.budget import Budget
from grader.sandbox.limits import Limits

_LOWERS = ("import os, sys\n"
           "sys.stdin.readline()\n"
           "{change}\n"
           "print('done', flush=True)\n"
           "sys.stdin.readline()\n")


def _child(change: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _LOWERS.format(change=change)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("change", ["os.nice(5)", "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))"])
def test_the_load_clock_sees_a_worker_lower_its_own_priority(change):
    if not Path(f"/proc/{os.getpid()}/stat").is_file():
        pytest.skip("no /proc/<pid>/stat here")
    child = _child(change)
    try:
        clock = load.LoadClock(child.pid)  # as the budget attaches it: before any student code ran
        try:
            assert clock.lowered() is False
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"
            assert clock.lowered() is True
        finally:
            clock.close()
    finally:
        child.kill()
        child.wait()


def test_a_worker_that_keeps_its_priority_is_not_lowered():
    if not Path(f"/proc/{os.getpid()}/stat").is_file():
        pytest.skip("no /proc/<pid>/stat here")
    child = _child("pass")
    try:
        clock = load.LoadClock(child.pid)
        try:
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"
            assert clock.lowered() is False
        finally:
            clock.close()
    finally:
        child.kill()
        child.wait()


class _Starved:
    """A load clock whose worker waited for a CPU for the whole call (``lowered``: by its own doing)."""

    def __init__(self, lowered: bool) -> None:
        self._lowered = lowered

    def start(self) -> None:
        pass

    def waited(self) -> float:
        return 1e6

    def lowered(self) -> bool:
        return self._lowered

    def close(self) -> None:
        pass


class _NoCpu:
    """A CPU clock of a worker that spent nothing (it only waited)."""

    def own(self) -> float:
        return 0.0

    def total(self) -> float:
        return 0.0

    def close(self) -> None:
        pass


@pytest.mark.parametrize("lowered, verdict", [(False, "busy"), (True, "idle")])
def test_a_call_starved_by_its_own_priority_is_the_students(lowered, verdict):
    budget = Budget(Limits())
    budget._cpu, budget._load = _NoCpu(), _Starved(lowered)
    budget.start_call(1.0)
    budget._begun -= budget.wall_limit(1.0) + 1  # the call reached its wall bound, all of it waiting for a CPU
    assert budget.extend() is False
    assert budget.verdict == verdict
    assert budget.machine_busy is (not lowered)  # only the machine's load is forgiven and run again
    budget.finish_call()
    if lowered:
        assert budget.spent >= 1.0  # its waits are charged, as a sleep is
    else:
        assert budget.spent == 0.0
