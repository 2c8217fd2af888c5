"""The pool of long-lived grading processes: jobs in, results out, a dead or stuck process costs one row.

Run by: the batch's process (``grader.grading.grade``) runs :func:`run_jobs`;
each grading process it starts (``multiprocessing``, spawned) runs
:func:`_worker_main`, which grades one :class:`~grader.grading.records.Job`
after another with ``grader.grading.session.grade_in_process`` and sends back
a :class:`~grader.grading.records.Result`, with a word of progress after each
test. Only these records (plain data) cross the pipe.

At most ``processes`` grading processes run: a slow student holds one slot,
within their own CPU budget, and costs nobody else anything. Wall time only
detects a stall (no test finished for ``stall`` seconds). A stall while the
grading process waited for a CPU is the machine's: the student is graded
again on a fresh process (:data:`STALL_RETRIES` times), then reported not
graded because the machine was too busy. Any other stall, or a process that
dies, is the grader's: not graded, with the reason. Never the student's zero.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from grader.curriculum import ROOT
from grader.grading.records import Job, Result

# What a grading process sends after each test it finishes (the stall detector's heartbeat).
PROGRESS = ("progress",)
# How often a student whose grading stalled because the machine was busy is graded again, on a fresh process.
STALL_RETRIES = 2
# Until a job's first test ends, its process may also be starting (an interpreter, numpy, pytest) and collecting
# the suite: that first wait is longer by this many seconds.
STARTUP_GRACE = 60.0
# A stall is the machine's when the grading process waited for a CPU at least this share of the stalled time,
# or when the machine's runnable processes outnumbered its cores (the 1-minute load average).
MACHINE_WAIT_SHARE = 0.1
MACHINE_BUSY = "the machine was too busy"
# A grading process says PROGRESS at most this often (seconds; the first test of each job always): the stall
# detector counts seconds, and a message per test (about 200 a student) woke the batch's process, or the Dask
# worker's (grade --cluster), as often, which cost it about 0.05 core-s a student.
PROGRESS_EVERY = 0.25


def _progress(connection: Any) -> Any:
    """The hook that tells the batch of a finished test over ``connection``, at most every :data:`PROGRESS_EVERY` s."""
    last = [-math.inf]

    def done() -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            connection.send(PROGRESS)

    return done


def _worker_main(connection: Any, root: str) -> None:
    """A long-lived grading process: receive jobs, grade them in process, send back results."""
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(root)
    # Ctrl-C is the parent's to handle: it stops this process; a half-graded student is not saved.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from grader.grading import recorder
    from grader.grading.implementation import close_spares
    from grader.grading.session import grade_in_process

    with contextlib.suppress(KeyboardInterrupt):  # the parent handles Ctrl-C and stops us
        while True:
            try:
                job = connection.recv()
            except EOFError:  # the batch died (a killed Dask worker, grade --cluster): stop as if asked to
                job = None
            if job is None:
                close_spares()  # first: its scratch folder must not outlive us
                return
            recorder.on_test_done = _progress(connection)  # each job's first test is told at once
            try:
                result = grade_in_process(job)
            except BaseException as error:  # a grader bug must cost one row, not the batch
                if isinstance(error, KeyboardInterrupt):
                    raise
                result = Result(isolation="unknown",
                                error=f"the grading process failed: {type(error).__name__}: {str(error)[:300]}")
            connection.send(result)


def run_queue_seconds(pid: int) -> float | None:
    """Seconds process ``pid`` has waited for a CPU while runnable (``/proc/PID/schedstat``; None if unknown)."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _machine_busy(waited: float | None, stalled: float) -> bool:
    """Whether a stall of ``stalled`` seconds, ``waited`` of them waiting for a CPU, was the machine's."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with contextlib.suppress(OSError):
        if os.getloadavg()[0] >= cores:
            return True
    return waited is not None and waited >= MACHINE_WAIT_SHARE * stalled


class _Process:
    """One long-lived grading process, seen from the batch: its pipe, its process, its job and the job's progress."""

    def __init__(self, context: Any) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, str(ROOT)), daemon=True)
        self.process.start()
        child.close()
        # The process reads the course (and the part) from its environment once, at its start (grader.course).
        self.environment = (os.environ.get("ATTENTION_KIT_COURSE"), os.environ.get("ATTENTION_KIT_PART"))
        self.job: Job | None = None
        self.progressed = False  # the job has finished a test
        self.progress_at = 0.0  # when the job started or last finished a test (time.monotonic)
        self.waited_mark: float | None = None  # the process's wait for a CPU then (seconds)

    def send(self, job: Job) -> None:
        self.job, self.progressed = job, False
        self.mark()
        self.connection.send(job)

    def mark(self) -> None:
        self.progress_at = time.monotonic()
        self.waited_mark = run_queue_seconds(self.process.pid)

    def waited(self) -> float | None:
        """Seconds it waited for a CPU since its last progress (None if unknown)."""
        now = run_queue_seconds(self.process.pid)
        return None if now is None or self.waited_mark is None else now - self.waited_mark

    def stop(self, wait: float = 2.0) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.connection.send(None)
        self.process.join(wait)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)
        self.connection.close()


def death_reason(exitcode: int | None) -> str:
    """Why a grading process ended without a result, from its exit code."""
    if exitcode is not None and exitcode < 0:
        if -exitcode == 9:
            return "the grading process was killed (signal 9: out of memory?)"
        return f"the grading process was killed by signal {-exitcode}"
    return f"the grading process exited with code {exitcode}"


@dataclass
class _Outcome:
    """What one look at a busy process found: a result to yield, and whether the process must be replaced."""

    result: Result | None = None
    replace: bool = False
    retry: bool = False  # a stall of the machine's: grade the job again on a fresh process


def _look(worker: _Process, stall: float, attempts: int) -> _Outcome:
    """Read what ``worker`` sent (progress, a result), or tell that it died or stalled."""
    while worker.connection.poll():
        try:
            message = worker.connection.recv()
        except (EOFError, OSError):
            break
        if message == PROGRESS:
            worker.mark()
            worker.progressed = True
            continue
        return _Outcome(result=message)
    if not worker.process.is_alive():
        worker.process.join(0.1)
        return _Outcome(result=Result(error=death_reason(worker.process.exitcode)), replace=True)
    stalled = time.monotonic() - worker.progress_at
    if stalled <= stall + (0.0 if worker.progressed else STARTUP_GRACE):
        return _Outcome()
    waited = worker.waited()
    if _machine_busy(waited, stalled):
        if attempts < STALL_RETRIES:
            return _Outcome(replace=True, retry=True)
        return _Outcome(result=Result(error=f"{MACHINE_BUSY}: no test finished within {stall:g} s, "
                                            f"{attempts + 1} times; rerun"), replace=True)
    return _Outcome(result=Result(error=f"the grading process gave no result within {stall:g} s"), replace=True)


def run_jobs(jobs: Iterable[Job], processes: int, stall: float) -> Iterator[tuple[Job, Result]]:
    """Grade ``jobs`` in at most ``processes`` long-lived processes; yield ``(job, result)`` as each finishes.

    A process that dies, or finishes no test for ``stall`` seconds, costs only
    its current student, who gets a row saying why (the machine's stalls are
    retried first); a fresh process takes its place.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    # multiprocessing terminates daemonic processes at exit; ours must be asked to stop first (atexit runs the
    # last registered first), so that they can end their spare workers and remove their scratch folders.
    atexit.unregister(stop_idle)
    atexit.register(stop_idle)

    queue: deque[tuple[Job, int]] = deque((job, 0) for job in jobs)  # (job, stalls so far)
    if not queue:
        return
    # spawn: a clean interpreter, never a fork of a parent that may hold threads (progress bar).
    context = multiprocessing.get_context("spawn")
    # Idle processes of an earlier batch in this interpreter are reused: starting one costs
    # more CPU (interpreter, numpy, pytest, the test modules) than grading a student.
    environment = (os.environ.get("ATTENTION_KIT_COURSE"), os.environ.get("ATTENTION_KIT_PART"))
    for stale in [w for w in _IDLE if w.environment != environment]:  # another course's: its curriculum is not ours
        _IDLE.remove(stale)
        stale.stop(wait=1.0)
    workers = [w for w in _IDLE[:processes] if w.process.is_alive()]
    del _IDLE[:processes]
    attempts: dict[int, int] = {}  # id(job) -> stalls so far, for the job a process has
    healthy = False
    try:
        while queue or any(w.job is not None for w in workers):
            for worker in workers:
                if worker.job is None and queue:
                    job, attempt = queue.popleft()
                    attempts[id(job)] = attempt
                    worker.send(job)
            while queue and len(workers) < processes:
                workers.append(_Process(context))
                job, attempt = queue.popleft()
                attempts[id(job)] = attempt
                workers[-1].send(job)
            busy = [w for w in workers if w.job is not None]
            wait([w.connection for w in busy] + [w.process.sentinel for w in busy], timeout=0.5)
            for index, worker in enumerate(workers):
                if worker.job is None:
                    continue
                outcome = _look(worker, stall, attempts[id(worker.job)])
                if outcome.result is None and not outcome.retry:
                    continue
                job, worker.job = worker.job, None
                if outcome.replace:
                    worker.stop(wait=0)
                    workers[index] = _Process(context)
                if outcome.retry:
                    queue.appendleft((job, attempts[id(job)] + 1))
                    continue
                assert outcome.result is not None
                yield job, outcome.result
        healthy = True
    finally:
        for worker in workers:
            if healthy and worker.job is None and worker.process.is_alive():
                _IDLE.append(worker)
            else:
                worker.stop(wait=1.0 if worker.job is None else 0)


def stop_idle() -> None:
    """Stop the idle grading processes kept for a later batch in this interpreter."""
    while _IDLE:
        _IDLE.pop().stop(wait=1.0)


_IDLE: list[_Process] = []
atexit.register(stop_idle)
