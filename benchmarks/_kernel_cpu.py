"""The CPU time of a command and everything it starts, counted by the kernel: a control group of its own.

A sampler of ``/proc`` (``grade_throughput.DescendantSampler``) misses what a process does between its last
sample and its end, and ``getrusage`` misses every process that was not waited for: against ``perf stat`` both
read ``grade`` about 6% low. A cgroup's CPU counter (cgroup v1 ``cpuacct.usage``, v2 ``cpu.stat``'s
``usage_usec``) counts every process that ever ran in the group or in a group below it: the grader's per-worker
groups are made below the group of the process that grades, so they count too. Where no group can be made here
(no cgroup controller, not writable), :func:`group` gives None and the caller falls back to the sampler.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path

_COUNT = itertools.count()


class CpuGroup:
    """One control group made for one command: ``enter`` in the child before it runs, ``seconds`` after."""

    def __init__(self, path: Path, counter: Path) -> None:
        self.path, self.counter = path, counter

    def enter(self) -> None:
        """Move the calling process into the group (``subprocess.Popen(preexec_fn=group.enter)``)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float:
        """CPU seconds (user + system) of every process the group and the groups below it ever held."""
        text = self.counter.read_text()
        if self.counter.name == "cpuacct.usage":
            return int(text) / 1e9
        return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("usage_usec")) / 1e6

    def remove(self) -> None:
        """Remove the group once its processes are gone (a few tries: the last ones may still be exiting)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def group() -> CpuGroup | None:
    """A new group below this process's own, where its CPU counter can be read; None where none can be made."""
    try:
        own = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().splitlines())
    except (OSError, ValueError):
        return None
    name = f"attention-kit-bench-{os.getpid()}-{next(_COUNT)}"
    places = [(Path("/sys/fs/cgroup") / mount, own.get(key), counter)
              for mount, key, counter in (("cpuacct", "cpuacct", "cpuacct.usage"), ("cpu,cpuacct", "cpu,cpuacct",
                                                                                     "cpuacct.usage"))]
    places.append((Path("/sys/fs/cgroup"), own.get(""), "cpu.stat"))  # cgroup v2
    for mount, path, counter in places:
        if path is None or not (mount / path.lstrip("/") / counter).exists():
            continue
        folder = mount / path.lstrip("/") / name
        try:
            folder.mkdir()
        except OSError:
            continue
        made = CpuGroup(folder, folder / counter)
        with contextlib.suppress(OSError, ValueError, StopIteration):
            made.seconds()
            return made
        made.remove()
    return None
