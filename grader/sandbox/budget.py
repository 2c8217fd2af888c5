"""A submission's time: each call's budget and the submission's, in CPU seconds (run by the grading process).

Two limits bound the student's code (``Limits.call_timeout`` per call,
``Limits.student_seconds`` per exercise of a submission: a looping function
costs its own exercise's tests, not the others'), and both count the CPU time of
the processes that did the work (the worker, its threads and its children),
read from outside the worker by the kernel's counters
(``grader.sandbox.load.CpuClock``; a control group's where the worker has
one). A busy machine stretches a call's wall time, never its CPU time, so an
honest call gets the same verdict at any load or priority.

Wall time only bounds how long the grader waits. At each check
(:meth:`Budget.extend`, when :meth:`Budget.left` says the time to look has
come) a call has either

* used its CPU budget: it timed out (``verdict`` "cpu"), with the message of
  old ("did not finish within 5 s: an infinite loop?");
* slept (neither ran nor waited for a CPU, ``load.LoadClock``) for as long
  as its budget: it timed out too ("idle"), the student's doing;
* run past ``WALL_FACTOR`` times its budget (plus ``WALL_SLACK``) in wall
  time without either: the machine's fault ("busy"). The call is not charged,
  and the facade retries it on a fresh worker (``MACHINE_RETRIES``), then
  reports the row not graded ("the machine was too busy (rerun)");
* none of these: it runs on, until the next check.

Fair grading's callbacks (for the exercises the kit has no given
implementation of) are answered by the reference in a worker of its own, as
confined as the student's (``grader.sandbox.callbacks``): the
reference's CPU time is the student's (what a student's code asks of the
reference is charged to it), while the wall time the call waited for that
answer is neither its CPU nor its sleep (:meth:`Budget.count_callback`). The
call is charged when it ends
(:meth:`Budget.finish_call`). The kit's diagnosis (its probes of every function
at a submission's first failing test) is charged to an account of its own,
:data:`DIAGNOSIS`, with ``Limits.diagnosis_seconds`` (:meth:`Budget.observing`):
the feedback never spends an exercise's budget, and a submission whose every
function sleeps or loops costs the diagnosis a bounded time, not one budget per
exercise. Whether a submission may still run code, and why
not, is :meth:`Budget.exhausted` and :meth:`Budget.expired`.

Only ``grader.sandbox.proxy`` (the facade) and ``grader.sandbox.channel`` (its
waits) use it; what is counted is decided in this file alone.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator

from grader.sandbox import load
from grader.sandbox.limits import Limits
from tests.kit import cpu_used

# The grader waits for a call at most this many times its CPU budget, plus WALL_SLACK seconds, in wall time (the
# reference's time not counted): a call that has neither used its CPU budget nor slept for it by then waited for a
# CPU all that time (a machine busier than its cores, or a grader run at a low priority).
WALL_FACTOR = 8.0
WALL_SLACK = 10.0
# How many times a call stopped by the machine's load is run again, each time on a fresh worker.
MACHINE_RETRIES = 2
# The shortest wait between two checks of a long call (reading the counters costs a little).
CHECK_AT_LEAST = 0.05
# The account of the calls the kit's diagnosis makes (``Budget.observing``): not an exercise's, so no view's name.
DIAGNOSIS = "(the kit's diagnosis)"
_CPUS = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class BudgetExhausted(TimeoutError):
    """The submission has used up its time budget: the remaining calls are not run."""


class Budget:
    """The time of one submission's calls: deadlines, what is forgiven, what is charged.

    Parameters
    ----------
    limits : grader.sandbox.limits.Limits
        ``call_timeout`` (per call) and ``student_seconds`` (per exercise of the submission).
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.spent = 0.0  # CPU (and sleep) seconds of student code so far (calls the machine's load stopped: none)
        self.spent_by: dict[str, float] = {}  # the same, per view (the exercise whose module was called)
        self._view = ""  # the current call's view
        self.reference_spent = 0.0  # CPU seconds of the reference's answers to this submission's callbacks (charged)
        self.call_seconds = 0.0  # wall seconds of all exchanges with the worker (start-up waits excluded)
        self.forgiven = 0.0  # wall seconds of calls not charged (waits for a CPU, sleeps, calls run again)
        self.verdict = ""  # why the last call was stopped: "cpu", "idle" (the student's) or "busy" (the machine's)
        self._lowered = False  # the last call's worker lowered its own priority (its waits for a CPU: its own)
        self.last_cpu = 0.0  # CPU seconds of the last call, as charged (or not, if it was run again)
        self.last_wall = 0.0  # its wall seconds
        self.last_queued = 0.0  # of them, its worker's and this process's waits for a CPU (the machine's load)
        self._cpu: load.CpuClock | None = None  # the CPU time of the current worker's processes
        self._load: load.LoadClock | None = None  # the CPU waits of the current worker and of this process
        self._timeout = 0.0  # the current call's CPU budget
        self._cpu_mark = 0.0
        self._next_check = math.inf  # when the current call is checked next (``time.monotonic``)
        self._begun = 0.0
        self._reference_seconds = 0.0  # wall seconds the current call waited for the reference's answers
        self._reference_cpu = 0.0  # CPU seconds of those answers (the student's: charged with the call)
        self._observing = 0  # inside ``observing``: calls are charged to DIAGNOSIS, not to their view
        # While this (the reference's) worker answers a student's callback: whether the asking call has used its CPU
        # budget meanwhile (its other processes and threads run on: ``call_spent`` of the student's budget).
        self.asker_spent: Callable[[], bool] | None = None

    # ------------------------------------------------------------------ the worker whose time is counted

    def attach(self, worker_pid: int, uid: int | None = None,
               group: Callable[[], float | None] | None = None) -> None:
        """Count the CPU time of the worker ``worker_pid`` (a new worker, before any student code runs).

        ``uid``: the worker's own user (its other processes are counted too); ``group``: the CPU seconds of
        its control group, which holds them all (``cgroup.WorkerGroup.cpu_seconds``).
        """
        self.detach()
        self._cpu = load.CpuClock(worker_pid, uid, group)
        self._load = load.LoadClock(worker_pid)

    def worker_spent(self, timeout: float) -> bool:
        """Whether a call of ``timeout`` CPU seconds could reach the worker's own lifetime limit (RLIMIT_CPU).

        That limit is the worker's, not the call's: a call well within its budget, in a worker that earlier calls
        had brought near it, was killed by SIGXCPU and counted as the student's crash. Such a worker is replaced
        before the call instead.
        """
        used = self._cpu.own() if self._cpu is not None else 0.0
        return used > 0.5 and used + timeout >= self.limits.cpu_seconds

    def detach(self) -> None:
        """The worker is gone: stop reading its counters."""
        for clock in (self._cpu, self._load):
            if clock is not None:
                clock.close()
        self._cpu = self._load = None

    # ------------------------------------------------------------------ before a call: may it run, for how long

    def account(self, view: str) -> str:
        """Whose time a call of ``view`` is: its exercise's (the view), or :data:`DIAGNOSIS` inside ``observing``."""
        return DIAGNOSIS if self._observing else view

    def _allowance(self, account: str) -> float:
        return self.limits.diagnosis_seconds if account == DIAGNOSIS else self.limits.student_seconds

    @contextlib.contextmanager
    def observing(self) -> Iterator[Callable[[], bool]]:
        """The calls made inside are the kit's diagnosis: charged to :data:`DIAGNOSIS`, within its own budget.

        Yields a function that tells whether that budget is spent (a call was or will be refused: what was
        observed is incomplete, and the diagnosis must name nothing).
        """
        self._observing += 1
        try:
            yield lambda: self.spent_by.get(DIAGNOSIS, 0.0) >= self.limits.diagnosis_seconds
        finally:
            self._observing -= 1

    def exhausted(self, what: str, view: str = "") -> BudgetExhausted | None:
        """Why ``what`` (a call or an import of ``view``) may not run: its exercise has no time left; None if it may."""
        account = self.account(view)
        budget = self._allowance(account)
        if self.spent_by.get(account, 0.0) >= budget:
            return BudgetExhausted(f"{what} was not run: your code has used up its time budget ({budget:g} s for "
                                   "the tests of one exercise); make the slow function faster" if account != DIAGNOSIS
                                   else f"{what} was not run: the kit's diagnosis has used up its {budget:g} s")
        return None

    def call_timeout(self, view: str = "") -> float:
        """The most CPU time the next call of ``view`` may use: the per-call limit, or what is left of its budget."""
        account = self.account(view)
        return min(self.limits.call_timeout, self._allowance(account) - self.spent_by.get(account, 0.0))

    def expired(self, what: str, timeout: float) -> TimeoutError:
        """Why a call given ``timeout`` seconds did not finish: the exception to raise (after ``timed_out``)."""
        if timeout < self.limits.call_timeout:
            return BudgetExhausted(f"{what} did not finish: your code used up its time budget "
                                   f"({self.limits.student_seconds:g} s for the tests of one exercise)")
        used = f" ({cpu_used(self.last_cpu, self.last_wall, self.last_queued)})" if self.verdict == "cpu" else ""
        return TimeoutError(f"{what} did not finish within {self.limits.call_timeout:g} s: an infinite loop?{used}")

    def timed_out(self) -> None:
        """A call timed out (kept for the facade; nothing changes for the later calls)."""

    @property
    def machine_busy(self) -> bool:
        """Whether the last call was stopped by the machine's load (it is not charged: run it again)."""
        return self.verdict == "busy"

    def wall_limit(self, timeout: float) -> float:
        """The longest the grader waits for a call of ``timeout`` CPU seconds (the reference's time excluded)."""
        return WALL_FACTOR * timeout + WALL_SLACK

    # ------------------------------------------------------------------ during a call

    def start_call(self, timeout: float, view: str = "") -> float:
        """Start a call of ``timeout`` CPU seconds of ``view``; its first check time (``time.monotonic``)."""
        self._view = self.account(view)
        self._reference_seconds = 0.0
        self._reference_cpu = 0.0
        self._timeout = timeout
        self.verdict = ""
        self._lowered = False
        if self._load is not None:
            self._load.start()
        self._cpu_mark = self._cpu.own() if self._cpu is not None else 0.0
        self._begun = time.monotonic()
        self._next_check = self._begun + timeout
        return self._next_check

    def left(self, deadline: float) -> float:
        """Seconds to wait before the call's next check (0 or less: check now, see :meth:`extend`).

        During a call, the checks are the budget's (``deadline``, what :meth:`start_call` returned, is kept for
        the channel's sake); outside one (a worker's start-up), ``deadline`` is a plain wall-clock limit.
        """
        now = time.monotonic()
        remaining = (self._next_check if self._next_check < math.inf else deadline) - now
        return remaining

    def _used(self, full: bool) -> float:
        """CPU seconds of the current call so far, the reference's answers included.

        ``full``: every process of the worker, a longer read.
        Without a CPU clock (the worker's pid unknown), its wall time less its waits for a CPU, as of old.
        """
        if self._cpu is None:
            wall = time.monotonic() - self._begun - self._reference_seconds
            return max(0.0, wall - (self._load.waited() if self._load is not None else 0.0)) + self._reference_cpu
        return max(0.0, (self._cpu.total() if full else self._cpu.own()) - self._cpu_mark) + self._reference_cpu

    def call_spent(self) -> bool:
        """Whether the current call has used its CPU budget, every process of the worker counted.

        Asked while the reference answers one of its callbacks (``asker_spent`` of the reference's budget): the
        student's other processes and threads may be running meanwhile.
        """
        return self._next_check < math.inf and self._used(full=True) >= self._timeout

    def call_left(self) -> float:
        """CPU seconds the current call has left (for a callback the reference answers on its behalf)."""
        return self._timeout - self._used(full=False)

    def extend(self) -> bool:
        """At a check: whether the call may run on; False: it is stopped (``verdict`` says why)."""
        if self._next_check == math.inf:  # not in a call: a plain deadline
            return False
        now = time.monotonic()
        wall = now - self._begun - self._reference_seconds
        cpu = self._used(full=True)
        waited = self._load.waited() if self._load is not None else 0.0
        idle = wall - (cpu - self._reference_cpu) - waited  # the worker's own sleep (the reference's CPU: not in wall)
        timeout, limit = self._timeout, self.wall_limit(self._timeout)
        if cpu >= timeout:
            self.verdict = "cpu"
        elif idle >= timeout:
            self.verdict = "idle"
        elif self.asker_spent is not None and self.asker_spent():
            # A reference's answer slowed because the asking student's processes took the CPUs (many of them, each
            # in a session of its own, can starve it): the student's time, never a busy machine's.
            self.verdict = "asker"
        elif wall >= limit:
            # Waits for a CPU that the student's code brought on itself (a nice value raised, SCHED_IDLE) are its
            # sleep: a machine busy with anything else would otherwise have the call forgiven and run again for ever.
            lowered = self._load is not None and self._load.lowered()
            self.verdict = "idle" if lowered else "busy"
            self._lowered = lowered
        if self.verdict:
            return False
        # The earliest the call could reach a limit: its CPU budget on every CPU at once, its sleep, the wall bound.
        self._next_check = now + max(CHECK_AT_LEAST, min((timeout - cpu) / _CPUS, timeout - idle, limit - wall))
        return True

    def count_callback(self, started: float, deadline: float, cpu: float = 0.0) -> float:
        """A callback answered since ``started``: its ``cpu`` seconds are the call's, its wait is not its sleep.

        The student's worker waited for the answer (the reference's worker did the work, and its CPU seconds,
        ``cpu``, are charged to the call as its own); that wall time is taken out of the call's wall and
        sleep, so a busy machine never turns it into the student's time. Returns ``deadline`` unchanged.
        """
        spent = time.monotonic() - started
        self._reference_seconds += spent
        self._reference_cpu += cpu
        self._next_check += spent
        if self._reference_cpu and self._next_check < math.inf:  # the call may now be over its CPU: look soon
            self._next_check = min(self._next_check, time.monotonic() + CHECK_AT_LEAST)
        return deadline

    def finish_call(self) -> None:
        """The call ended (answered, failed or timed out): charge its time (unless the machine stopped it).

        Charged: its CPU time, or, if more, its sleep too (its wall time less the reference's and less its waits
        for a CPU): a submission that sleeps in every call uses up its budget as one that computes does, and
        neither a busy machine nor a low priority changes what is charged.
        """
        self._next_check = math.inf
        wall = time.monotonic() - self._begun
        cpu = self._used(full=wall > 0.2 or bool(self.verdict))
        waited = self._load.waited() if self._load is not None and not self._lowered else 0.0
        awake = wall - self._reference_seconds - waited
        own = cpu - self._reference_cpu
        charged = (max(own, awake) if self._cpu is not None else own) + self._reference_cpu
        self.last_cpu, self.last_wall, self.last_queued = cpu, wall, waited
        self.call_seconds += wall
        if self.verdict == "busy":
            self.forgiven += wall
        else:
            self.spent += charged
            self.spent_by[self._view] = self.spent_by.get(self._view, 0.0) + charged
            self.forgiven += max(0.0, wall - self._reference_seconds - (charged - self._reference_cpu))
        self.reference_spent += self._reference_cpu
        self._reference_seconds = self._reference_cpu = 0.0

