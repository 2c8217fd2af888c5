"""A worker's CPU time, and how long it waited for a CPU, read from outside it by the kernel's counters (Linux).

A call to a student's function is charged the CPU seconds of the processes that
did its work (:class:`CpuClock`): the worker's own process with its threads and
the children it reaped (``/proc/<pid>/stat``), the processes of its user that
still run, or, where the worker has a control group of its own
(``grader.sandbox.cgroup``), the group's counter. The worker's code cannot
change any of these numbers. A machine busier than its cores stretches a
call's wall time, never its CPU time.

Linux also counts the time a thread was ready to run but waited for a CPU (the
second field of ``/proc/<pid>/schedstat``, :class:`LoadClock`): the budget uses
it to tell a call that sleeps (the student's doing) from one that waits for a
CPU (the machine's).

Only ``grader/sandbox/budget.py`` (and the facade, ``proxy``, for a worker's pid) uses this module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_seconds(data: bytes, children: bool) -> float:
    """The user and system time (and its reaped children's, if ``children``) of a ``/proc/<pid>/stat`` line, in s."""
    fields = data.rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the line)
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: the children it waited for
    return ticks / _TICKS


def user_processes_seconds(uid: int, exclude: int) -> float:
    """CPU seconds of the live processes of ``uid`` other than ``exclude`` (a worker's children, daemons)."""
    total = 0.0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for entry in entries:
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as stat:
                total += _stat_seconds(stat.read(), children=False)
        except (OSError, ValueError, IndexError):  # it ended meanwhile: its time is its parent's now, or gone
            continue
    return total


class CpuClock:
    """The CPU seconds a worker's processes used, read from outside the worker (never a number it reports).

    Parameters
    ----------
    worker : int
        The host pid of the worker's process.
    uid : int or None
        The worker's own user, if it has one: its other live processes are counted too (at :meth:`total`).
    group : callable or None
        Returns the CPU seconds of the worker's control group (None: not counted there), which already
        holds every process the worker started.
    """

    def __init__(self, worker: int, uid: int | None = None,
                 group: Callable[[], float | None] | None = None) -> None:
        self.worker, self.uid, self.group = worker, uid, group
        self._last = 0.0  # the last value read of the worker's own process (kept when it has ended)
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open(f"/proc/{worker}/stat", os.O_RDONLY | os.O_CLOEXEC)

    def own(self) -> float:
        """CPU seconds of the worker's process and the children it reaped (cheap: one ``pread``)."""
        if self.group is not None:
            counted = self.group()
            if counted is not None:
                return counted
        if self._fd is not None:
            try:
                self._last = _stat_seconds(os.pread(self._fd, 1024, 0), children=True)
            except (OSError, ValueError, IndexError):  # the process ended: its last reading stands
                self.close()
        return self._last

    def total(self) -> float:
        """CPU seconds of all the worker's processes (reads ``/proc`` of every process unless it has a group)."""
        own = self.own()
        if self.group is not None and self.group() is not None:
            return own
        return own + (user_processes_seconds(self.uid, self.worker) if self.uid is not None else 0.0)

    def close(self) -> None:
        """Close the file it reads."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def innermost_child(pid: int, hops: int = 4) -> int:
    """The process at the end of ``pid``'s chain of first children (bwrap, its init, then the worker)."""
    for _ in range(hops):
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            break
        if not children:
            break
        pid = int(children[0])
    return pid


_YIELDING_POLICIES = (3, 5)  # SCHED_BATCH, SCHED_IDLE (sched(7))


def scheduling(pid: int) -> tuple[int, int] | None:
    """``pid``'s main thread's nice value and scheduling policy (``/proc/<pid>/stat``), or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[16]), int(fields[38])  # nice (field 19 of the line), policy (field 41)
    except (OSError, ValueError, IndexError):
        return None


class LoadClock:
    """The CPU waits of this thread and of a worker's main thread, read cheaply (one ``pread`` each).

    Parameters
    ----------
    worker : int
        The host pid of the worker's process.
    """

    def __init__(self, worker: int) -> None:
        self._fds: list[int] = []
        self.worker = worker
        self.priority = scheduling(worker)  # the worker's own at its start, before any student code ran
        for path in ("/proc/thread-self/schedstat", f"/proc/{worker}/schedstat"):
            try:
                self._fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                self.close()
                return
        self.mark = self.total()

    def lowered(self) -> bool:
        """Whether the worker's main thread now yields the CPU more than it did at its start (the student's doing).

        ``os.nice(19)`` or ``SCHED_IDLE`` in student code makes the thread wait for a CPU whenever anything else
        runs, without spending CPU time: that wait is the student's, never the machine's load, so the call must
        not be forgiven as "busy" and run again (where the kernel does not group each session's processes,
        ``kernel.sched_autogroup_enabled=0``, any other load on the machine starved such a call for ever).
        """
        now = scheduling(self.worker)
        if now is None or self.priority is None:
            return False
        return now[0] > self.priority[0] or (now[1] != self.priority[1] and now[1] in _YIELDING_POLICIES)

    def total(self) -> float | None:
        """Seconds both threads have waited for a CPU so far; None where unknown."""
        if len(self._fds) != 2:
            return None
        try:
            return sum(int(os.pread(fd, 128, 0).split()[1]) for fd in self._fds) / 1e9
        except (OSError, ValueError, IndexError):
            return None

    def start(self) -> None:
        """Count from now."""
        self.mark = self.total()

    def waited(self) -> float:
        """Seconds both threads waited for a CPU since ``start`` (0 where unknown)."""
        now = self.total()
        if now is None or self.mark is None:
            return 0.0
        return max(0.0, now - self.mark)

    def close(self) -> None:
        """Close the files it reads."""
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
