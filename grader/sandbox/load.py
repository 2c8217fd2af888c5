"""How long a process waited for a CPU: the machine's load, which is never a student's time (Linux).

A call to a student's function has a wall-clock limit. On a machine busier than
its cores (``--jobs`` above the cores, other programs), an honest call waits
for a CPU and may overrun that limit without having run for it. Linux counts
the time a thread was ready to run but waited for a CPU (the second field of
``/proc/<pid>/schedstat``): the proxy forgives that much of a call's time, for
the worker and for the grading process answering its callbacks
(``LoadClock``), up to a bound per call. Where the system does not say,
nothing is forgiven, as before.

Only ``grader/sandbox/budget.py`` (and the facade, ``proxy``, for a worker's pid) uses this module.
"""

from __future__ import annotations

import os
from pathlib import Path


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


class LoadClock:
    """The CPU waits of this thread and of a worker's main thread, read cheaply (one ``pread`` each).

    Parameters
    ----------
    worker : int
        The host pid of the worker's process.
    """

    def __init__(self, worker: int) -> None:
        self._fds: list[int] = []
        for path in ("/proc/thread-self/schedstat", f"/proc/{worker}/schedstat"):
            try:
                self._fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                self.close()
                return
        self.mark = self.total()

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
