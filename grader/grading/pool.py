"""The pool of long-lived grading processes: jobs in, results out, a dead or stuck process costs one row.

Run by: the batch's process (``grader.grading.grade``) runs :func:`run_jobs`;
each grading process it starts (``multiprocessing``, spawned) runs
:func:`_worker_main`, which grades one :class:`~grader.grading.records.Job`
after another with ``grader.grading.session.grade_in_process`` and sends back
a :class:`~grader.grading.records.Result`. Only these records (plain data)
cross the pipe.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from grader.curriculum import ROOT
from grader.grading.records import Job, Result


def _worker_main(connection: Any, root: str) -> None:
    """A long-lived grading process: receive jobs, grade them in process, send back results."""
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(root)
    # Ctrl-C is the parent's to handle: it stops this process; a half-graded student is not saved.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from grader.grading.implementation import close_spares, on_slow_call
    from grader.grading.session import grade_in_process

    on_slow_call(lambda: connection.send(SLOW_NOTE))  # the batch may give this process's slot to another
    with contextlib.suppress(KeyboardInterrupt):  # the parent handles Ctrl-C and stops us
        while True:
            job = connection.recv()
            if job is None:
                close_spares()  # first: its scratch folder must not outlive us
                return
            try:
                result = grade_in_process(job)
            except BaseException as error:  # a grader bug must cost one row, not the batch
                if isinstance(error, KeyboardInterrupt):
                    raise
                result = Result(isolation="unknown",
                                error=f"the grading process failed: {type(error).__name__}: {str(error)[:300]}")
            connection.send(result)


# What a grading process sends before its result when a call of its student runs long (``proxy.SLOW_CALL``).
SLOW_NOTE = ("slow",)


class _Worker:
    """One long-lived grading process, seen from the batch: its pipe, its process, the job it has."""

    def __init__(self, context: Any) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, str(ROOT)), daemon=True)
        self.process.start()
        child.close()
        self.job: Job | None = None
        self.started = 0.0
        self.slow = False  # its student is a slow one (it said so, or it has been busy for SLOW_AFTER)

    def send(self, job: Job) -> None:
        self.job, self.started, self.slow = job, time.monotonic(), False
        self.connection.send(job)

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


# A grading process busy on one student for longer than this is slow: another one takes the next student.
SLOW_AFTER = 4.0
# Slow submissions hold a process each (mostly asleep, or reniced after their first timeout) for up to their
# budget: six of them at once still leave every slot to the honest ones. A grading process is ~100 MB.
MAX_EXTRA = 6


def run_jobs(jobs: Iterable[Job], processes: int, timeout: float) -> Iterator[tuple[Job, Result]]:
    """Grade ``jobs`` in long-lived processes; yield ``(job, result)`` as each finishes.

    ``jobs`` is read lazily, one job ahead of the free processes: preparing a
    student (unpacking, parsing) overlaps the grading of the others, and a
    process is started only when there is a job for it.

    A process that dies or overruns ``timeout`` costs only its current
    student (who gets a row saying why); a fresh process takes its place.

    A slow submission does not hold up the others: once its process has
    said so (``SLOW_NOTE``: a call ran past ``proxy.SLOW_CALL``), or has been
    on one student for more than ``SLOW_AFTER`` seconds (honest ones take
    about one), it no longer counts as one of the ``processes`` slots, and
    another process takes the next student (at most ``MAX_EXTRA`` extra). The
    slow one's own cost stays bounded by its budget.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    # multiprocessing terminates daemonic processes at exit; ours must be asked to stop first (atexit runs the
    # last registered first), so that they can end their spare workers and remove their scratch folders.
    atexit.unregister(stop_idle)
    atexit.register(stop_idle)

    source = iter(jobs)
    pending: deque[Job] = deque()
    exhausted = False

    def pull() -> bool:
        nonlocal exhausted
        if not exhausted:
            try:
                pending.append(next(source))
                return True
            except StopIteration:
                exhausted = True
        return False

    if not pull():
        return
    # spawn: a clean interpreter, never a fork of a parent that may hold threads (progress bar).
    context = multiprocessing.get_context("spawn")
    # Idle processes of an earlier batch in this interpreter are reused: starting one costs
    # more CPU (interpreter, numpy, pytest, the test modules) than grading a student.
    workers = [w for w in _IDLE[:processes] if w.process.is_alive()]
    del _IDLE[:processes]
    healthy = False
    try:
        while True:
            now = time.monotonic()
            fast = sum(1 for w in workers if w.job is not None and not w.slow and now - w.started <= SLOW_AFTER)
            idle = [w for w in workers if w.job is None]
            while fast < processes and (pending or pull()):
                if not idle:
                    if len(workers) >= processes + MAX_EXTRA:
                        break
                    workers.append(_Worker(context))
                    idle.append(workers[-1])
                idle.pop(0).send(pending.popleft())
                fast += 1
            busy = [w for w in workers if w.job is not None]
            if not busy and not pending and not pull():
                break
            # Every process has a job: prepare the next one instead of waiting (its result is not late for that).
            ahead = len(pending) < 1 and not exhausted
            wait([w.connection for w in busy] + [w.process.sentinel for w in busy], timeout=0 if ahead else 0.5)
            for index, worker in enumerate(workers):
                if worker.job is None:
                    continue
                result = None
                replace = False
                if worker.connection.poll():
                    try:
                        result = worker.connection.recv()
                    except (EOFError, OSError):
                        result, replace = None, True
                    if result == SLOW_NOTE:  # its student is slow: its slot goes to the next student now
                        worker.slow, result = True, None
                        continue
                if result is None and not worker.process.is_alive():
                    worker.process.join(0.1)
                    result = Result(error=death_reason(worker.process.exitcode))
                    replace = True
                elif result is None and time.monotonic() - worker.started > timeout:
                    result = Result(error=f"the grading process gave no result within {timeout:g} s")
                    replace = True
                if result is None:
                    continue
                job, worker.job = worker.job, None
                if replace:
                    worker.stop(wait=0)
                    workers[index] = _Worker(context)
                yield job, result
            if ahead:
                pull()
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


_IDLE: list[_Worker] = []
atexit.register(stop_idle)
