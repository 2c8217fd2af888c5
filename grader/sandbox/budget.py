"""A submission's time: each call's deadline and the submission's budget (run by the grading process).

Two limits bound the student's code (``Limits.call_timeout`` per call,
``Limits.student_seconds`` per submission), and both are counted here, in wall
time, by :class:`Budget`: a call starts (:meth:`Budget.start_call`), the
channel asks how long it may still wait (:meth:`Budget.left`) and, at the
deadline, whether the call may run on (:meth:`Budget.extend`: the time the
worker and this process waited for a CPU is forgiven, ``grader.sandbox.load``);
the reference's time is not the student's (:meth:`Budget.count_reference`);
the call is charged when it ends (:meth:`Budget.finish_call`). Whether a
submission may still run code, and why not, is :meth:`Budget.exhausted` and
:meth:`Budget.expired`.

Only ``grader.sandbox.proxy`` (the facade) and ``grader.sandbox.channel`` (its
waits) use it; a change of what is counted (CPU time instead of wall time)
belongs in this file alone.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable

from grader.sandbox import load
from grader.sandbox.limits import Limits

# A call's wall-clock limit is moved on by the time the worker and the grading process waited for a CPU (a machine
# busier than its cores: ``grader.sandbox.load``), up to this many times the limit itself over a whole submission,
# and only until its first timeout (a submission that loops gets no more: its calls end as they always did).
LOAD_ALLOWANCE = 2.0
# A call shorter than this is charged in full to the budget (reading the CPU waits costs more than it could forgive).
LOAD_CHECK_AFTER = 0.2


class BudgetExhausted(TimeoutError):
    """The submission has used up its time budget: the remaining calls are not run."""


class Budget:
    """The time of one submission's calls: deadlines, what is forgiven, what is charged.

    Parameters
    ----------
    limits : grader.sandbox.limits.Limits
        ``call_timeout`` (per call), ``student_seconds`` (per submission) and
        ``reference_seconds`` (the reference's time that is not charged).
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.spent = 0.0  # seconds of student code so far (the reference's time not counted)
        self.reference_spent = 0.0  # seconds of the reference's time for this submission's callbacks
        self.call_seconds = 0.0  # wall seconds of all exchanges with the worker (start-up waits excluded)
        self.forgiven = 0.0  # seconds of CPU waits forgiven to this submission so far (see LOAD_ALLOWANCE)
        self.slow = False  # a call of this submission ran past its ``slow_after`` (see start_call)
        self.after_timeout = False  # a call timed out: nothing more is forgiven, and workers run at a lower priority
        self._load: load.LoadClock | None = None  # the CPU waits of the current worker and of this process
        self._worker_pid: int | None = None  # the host pid of the current worker's own process
        self._forgiven = 0.0  # seconds of the current call's CPU waits added to its deadline
        self._slow_at = math.inf  # when the current call makes this submission a slow one
        self._on_slow: Callable[[], None] | None = None
        self._begun = 0.0
        self._reference_seconds = 0.0  # the reference's time in the current call

    # ------------------------------------------------------------------ the worker whose waits are forgiven

    def attach(self, worker_pid: int) -> None:
        """Count the CPU waits of the worker ``worker_pid`` (a new worker, before any student code runs)."""
        self.detach()
        self._worker_pid = worker_pid
        self._load = load.LoadClock(worker_pid)
        if self.after_timeout:
            self.lower_priority()

    def detach(self) -> None:
        """The worker is gone: stop reading its waits."""
        if self._load is not None:
            self._load.close()
            self._load = None
        self._worker_pid = None

    def lower_priority(self) -> None:
        """Let the worker run only when the honest ones leave a CPU free (nice 10, for its scheduling group too).

        bwrap makes the worker lead a session of its own, and with autogroup scheduling (the default of most
        Linux systems) a session is a scheduling group whose own nice value is what counts against the
        grading processes: the process's nice value alone would change nothing.
        """
        if self._worker_pid is None:
            return
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self._worker_pid, 10)
        with contextlib.suppress(OSError), open(f"/proc/{self._worker_pid}/autogroup", "w") as group:
            group.write("10")

    # ------------------------------------------------------------------ before a call: may it run, for how long

    def exhausted(self, what: str) -> BudgetExhausted | None:
        """Why ``what`` (a call or an import) may not run: the submission has no time left; None if it may."""
        budget = self.limits.student_seconds
        if self.spent >= budget:
            return BudgetExhausted(f"{what} was not run: your code has used up its time budget ({budget:g} s for "
                                   "all the tests of a submission); make the slow function faster")
        return None

    def call_timeout(self) -> float:
        """The longest the next call may take: the per-call limit, or what is left of the submission's."""
        return min(self.limits.call_timeout, self.limits.student_seconds - self.spent)

    def expired(self, what: str, timeout: float) -> TimeoutError:
        """Why a call given ``timeout`` seconds did not finish: the exception to raise (after ``timed_out``)."""
        if timeout < self.limits.call_timeout:
            return BudgetExhausted(f"{what} did not finish: your code used up its time budget "
                                   f"({self.limits.student_seconds:g} s for all the tests of a submission)")
        return TimeoutError(f"{what} did not finish within {self.limits.call_timeout:g} s: an infinite loop?")

    def timed_out(self) -> None:
        """A call timed out: from now on nothing is forgiven, and later workers run at a lower priority."""
        self.after_timeout = True

    # ------------------------------------------------------------------ during a call

    def start_call(self, timeout: float, slow_after: float | None = None,
                   on_slow: Callable[[], None] | None = None) -> float:
        """Start a call of ``timeout`` seconds; its deadline (``time.monotonic``).

        ``slow_after``: after that many seconds, ``on_slow`` is called (once per submission) and ``slow`` set.
        """
        self._forgiven = 0.0
        self._reference_seconds = 0.0
        if self._load is not None:
            self._load.start()
        self._begun = time.monotonic()
        if slow_after is not None and not self.slow:
            self._slow_at, self._on_slow = self._begun + slow_after, on_slow
        return self._begun + timeout

    def left(self, deadline: float) -> float:
        """Seconds to wait before the call's ``deadline`` (moved on by what was forgiven); at most until it is slow.

        0 or less: the deadline has come (see :meth:`extend`).
        """
        now = time.monotonic()
        remaining = deadline + self._forgiven - now
        if now >= self._slow_at:
            self._noticed_slow()
        elif self._slow_at < now + remaining:  # wake up when the call becomes slow, to say so
            remaining = self._slow_at - now + 1e-3
        return remaining

    def extend(self) -> bool:
        """At a call's deadline: whether it may run on (its CPU waits were forgiven); False: it timed out.

        Past its time, a call runs on at a lower priority: an honest one still ends, one that loops takes
        little from the others while it uses up its allowance.
        """
        if self._forgive():
            self.lower_priority()
            return True
        return False

    def count_reference(self, started: float, deadline: float) -> float:
        """The call's deadline, moved on by the reference's time since ``started`` (up to the submission's limit)."""
        spent = time.monotonic() - started
        moved = deadline
        if self.reference_spent + self._reference_seconds + spent < self.limits.reference_seconds:
            moved = deadline + spent  # the reference's time does not count against the student (up to a limit)
        self._reference_seconds += time.monotonic() - started
        return moved

    def finish_call(self) -> None:
        """The call ended (answered, failed or timed out): charge the student's part of its time."""
        self._slow_at = math.inf
        wall = time.monotonic() - self._begun
        if wall > LOAD_CHECK_AFTER:  # a long call: the time it waited for a CPU is not the student's either
            self._forgive()
        self.call_seconds += wall
        self.spent += max(0.0, wall - self._reference_seconds - self._forgiven)
        self.reference_spent += self._reference_seconds
        self.forgiven += self._forgiven
        self._forgiven = 0.0
        self._reference_seconds = 0.0

    def _noticed_slow(self) -> None:
        self._slow_at = math.inf
        self.slow = True
        if self._on_slow is not None:
            with contextlib.suppress(Exception):  # telling is a courtesy: never the student's failure
                self._on_slow()

    def _forgive(self) -> bool:
        """Move the call's deadline on by its CPU waits so far (the load's time); False if nothing more."""
        if self._load is None or self.after_timeout:
            return False
        allowance = LOAD_ALLOWANCE * self.limits.call_timeout - self.forgiven
        waited = min(self._load.waited(), allowance)
        if waited <= self._forgiven + 0.001:
            return False
        self._forgiven = waited
        return True
