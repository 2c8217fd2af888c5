"""A control group per worker: its memory bounded, and its CPU time counted, by the kernel (Linux).

Run by the grading process. ``RLIMIT_AS`` bounds a worker's address space,
but not what it holds outside it: memfd and tmpfs files, System V and POSIX
shared memory. A memory control group bounds all of them (the kernel charges
every page a process of the group touches, file-backed or not, to the group),
and counts the CPU time of every process in it, children included, where
the worker's own code cannot forge the number.

:func:`available` finds what this machine gives (once per process): cgroup v1
(``memory`` with ``memsw`` where swap accounting is on, ``cpuacct``) below the
grading process's own groups, or cgroup v2 where the grading process's group
delegates the ``memory`` (and ``cpu``) controllers to its children. Where a
group cannot be made (no cgroup file system, not root, v2 without delegation),
:class:`Support` says why, and the isolation line says so: nothing is dropped
silently. ``ATTENTION_KIT_SIMULATE_NO_CGROUP=1`` in the grader's environment
makes the probe report no cgroup: the seam the tests use.

:class:`WorkerGroup` is one worker's group: made before the worker runs any
student code (``proxy`` moves the worker in right after its start-up), removed
after it is killed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

SIMULATE_NO_CGROUP = "ATTENTION_KIT_SIMULATE_NO_CGROUP"
_NAMES = itertools.count()


@dataclass(frozen=True)
class Support:
    """What the kernel gives for workers' groups here: where to make them, or why there are none."""

    version: int | None  # 1 or 2; None: no groups
    memory: Path | None  # the folder to make each worker's memory group in
    cpu: Path | None  # the folder to make each worker's CPU accounting group in (v1; v2: the memory group's)
    memsw: bool = False  # v1 also bounds swap (memory.memsw.limit_in_bytes)
    missing: str = ""  # why there is no memory group, if there is none

    def describe(self) -> str:
        """The memory and CPU accounting in force, in words (for the isolation line)."""
        if self.memory is None:
            return f"NO memory cgroup ({self.missing}): memfd, tmpfs and shared memory are not bounded"
        swap = " and swap" if self.memsw or self.version == 2 else ""
        return f"a cgroup v{self.version} memory limit{swap} per worker (memfd, tmpfs and shared memory included)"


def _mounts() -> dict[str, Path]:
    """The cgroup mounts of this system: controller name (``memory``, ``cpuacct``; ``2`` for v2) -> mount point."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if " - " not in line or len(fields) < 5 or fields[3] != "/":
            continue
        kind, _, options = line.split(" - ", 1)[1].split()[:3]
        if kind == "cgroup2":
            found.setdefault("2", Path(fields[4]))
        elif kind == "cgroup":
            for option in options.split(","):
                found.setdefault(option, Path(fields[4]))
    return found


def _own_groups() -> dict[str, str]:
    """The grading process's groups: controller (``memory``, ...; ``""`` for v2) -> its path in that hierarchy."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                groups[controller] = parts[2]
    return groups


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


def sweep(support: Support) -> None:
    """Remove the empty groups that grading processes killed before their end left behind (their pid is gone)."""
    for parent in {support.memory, support.cpu} - {None}:
        try:
            entries = list(parent.glob("attention-kit-*-*"))  # type: ignore[union-attr]
        except OSError:
            continue
        for folder in entries:
            owner = folder.name.split("-")[2]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    folder.rmdir()  # refused while a process is in it: then it stays


@functools.cache
def available() -> Support:
    """What this machine gives for workers' groups (probed once per process; stale groups of others swept)."""
    found = _probe()
    sweep(found)
    return found


def _probe() -> Support:
    if os.environ.get(SIMULATE_NO_CGROUP):
        return Support(None, None, None, missing="no cgroup (simulated)")
    if not Path("/proc/self/cgroup").is_file():
        return Support(None, None, None, missing="this system has no control groups")
    mounts, own = _mounts(), _own_groups()
    if "memory" in mounts and "memory" in own:  # cgroup v1
        memory = mounts["memory"] / own["memory"].lstrip("/")
        cpu = None
        for name in ("cpuacct", "cpu"):
            if name in mounts and name in own and (mounts[name] / own[name].lstrip("/") / "cpuacct.usage").exists():
                cpu = mounts[name] / own[name].lstrip("/")
                break
        if not _writable(memory):
            return Support(1, None, None, missing=f"cgroup v1, but its memory group {own['memory']} is not "
                                                  "writable here (run the grader as root)")
        return Support(1, memory, cpu if cpu is not None and _writable(cpu) else None,
                       memsw=(memory / "memory.memsw.limit_in_bytes").exists())
    if "2" in mounts and "" in own:  # cgroup v2
        group = mounts["2"] / own[""].lstrip("/")
        try:
            controllers = (group / "cgroup.controllers").read_text().split()
        except OSError:
            controllers = []
        if "memory" not in controllers:
            return Support(None, None, None, missing="cgroup v2 without the memory controller delegated to the "
                                                     "grader (e.g. systemd-run --user -p Delegate=yes)")
        try:
            delegated = (group / "cgroup.subtree_control").read_text().split()
            if "memory" not in delegated:
                (group / "cgroup.subtree_control").write_text("+memory" + (" +cpu" if "cpu" in controllers else ""))
        except OSError as error:
            return Support(None, None, None, missing=f"cgroup v2, but the grader's group cannot delegate memory "
                                                     f"to its children ({error.strerror or error})")
        if not _writable(group):
            return Support(None, None, None, missing="cgroup v2, but the grader's group is not writable")
        return Support(2, group, group)
    return Support(None, None, None, missing="no cgroup memory controller is mounted")


def unmeasured(what: str, group: WorkerGroup | None) -> str:
    """Why the peak memory of ``what`` could not be measured from outside the worker (a grader's failure)."""
    if group is None:
        reason = f"its worker has no memory control group ({available().missing or 'it could not be joined'})"
    elif group.support.version == 2:
        reason = "this kernel cannot reset a cgroup v2 group's memory.peak (Linux 6.12 and later can)"
    else:
        reason = "its control group's peak could not be read"
    return (f"the memory of {what} was not measured: {reason}; a memory test is graded only where the kernel "
            "measures it (a measurement inside the student's process can be fooled)")


class WorkerGroup:
    """One worker's group: its memory limit, its processes' CPU time, and its removal.

    Parameters
    ----------
    support : Support
        Where groups are made (:func:`available`); with none, every method does nothing.
    memory_bytes : int
        The most memory (and swap) the worker's processes may hold together.
    """

    def __init__(self, support: Support, memory_bytes: int) -> None:
        self.support = support
        self.folders: list[Path] = []
        self.memory: Path | None = None
        self.cpu: Path | None = None
        self._usage: int | None = None  # an open file of the CPU counter
        self._peak: int | None = None  # cgroup v2: the open file of memory.peak that was reset (``start_peak``)
        self.memory_bytes = memory_bytes
        if support.memory is None:
            return
        name = f"attention-kit-{os.getpid()}-{next(_NAMES)}"
        try:
            self.memory = self._make(support.memory / name)
            if support.version == 1:
                (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if support.memsw:
                    (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                if support.cpu is not None:
                    self.cpu = self._make(support.cpu / name)
                    self._usage = os.open(self.cpu / "cpuacct.usage", os.O_RDONLY | os.O_CLOEXEC)
            else:
                (self.memory / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):
                    (self.memory / "memory.swap.max").write_text("0")
                self.cpu = self.memory
                self._usage = os.open(self.memory / "cpu.stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.remove()  # a group half made is no group: the caller sees ``active`` False

    def allow(self, extra: int) -> None:
        """Set the memory limit to the worker's own plus ``extra`` bytes: the kit's sealed answers it holds."""
        if self.memory is None:
            return
        limit = str(self.memory_bytes + extra)
        with contextlib.suppress(OSError):
            if self.support.version == 2:
                (self.memory / "memory.max").write_text(limit)
                return
            names = ["memory.limit_in_bytes", *(["memory.memsw.limit_in_bytes"] if self.support.memsw else [])]
            # (v1: the memory limit never above the memory and swap one, so the larger is written first)
            growing = int((self.memory / "memory.limit_in_bytes").read_text()) < int(limit)
            for name in (reversed(names) if growing else names):
                (self.memory / name).write_text(limit)

    def _make(self, folder: Path) -> Path:
        folder.mkdir()
        self.folders.append(folder)
        return folder

    @property
    def active(self) -> bool:
        """Whether the memory limit is in force for the processes added."""
        return self.memory is not None

    def add(self, pid: int) -> bool:
        """Move the process ``pid`` (before it runs student code) into the group; False if it could not be."""
        if self.memory is None:
            return False
        try:
            for folder in {self.memory, self.cpu} - {None}:
                (folder / "cgroup.procs").write_text(str(pid))  # type: ignore[operator]
        except OSError:
            return False
        return True

    def cpu_seconds(self) -> float | None:
        """CPU seconds of every process the group ever held (None: not counted here)."""
        if self._usage is None:
            return None
        try:
            data = os.pread(self._usage, 4096, 0)
            if self.support.version == 1:
                return int(data) / 1e9
            for line in data.decode().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def start_peak(self) -> int | None:
        """Start measuring the group's peak memory from now; return its usage now (bytes), None if it cannot be.

        cgroup v1: ``memory.max_usage_in_bytes`` (and ``memory.memsw.max_usage_in_bytes``) reset by writing 0
        (the peak becomes the current usage). cgroup v2: ``memory.peak`` reset for one open file by writing to it
        (Linux 6.12 and later); an older kernel cannot reset it, and the peak is then not measured here.
        """
        if self.memory is None:
            return None
        self._close_peak()
        try:
            if self.support.version == 1:
                names = ["memory.max_usage_in_bytes"] + (["memory.memsw.max_usage_in_bytes"] if self.support.memsw
                                                         else [])
                for name in names:
                    (self.memory / name).write_text("0")
                usage = "memory.memsw.usage_in_bytes" if self.support.memsw else "memory.usage_in_bytes"
                return int((self.memory / usage).read_text())
            self._peak = os.open(self.memory / "memory.peak", os.O_RDWR | os.O_CLOEXEC)
            os.write(self._peak, b"reset\n")
            return int((self.memory / "memory.current").read_text())
        except (OSError, ValueError):
            self._close_peak()
            return None

    def peak(self) -> int | None:
        """The group's peak memory (bytes) since :meth:`start_peak`, swap included where counted; None: unknown."""
        if self.memory is None:
            return None
        try:
            if self.support.version == 1:
                name = "memory.memsw.max_usage_in_bytes" if self.support.memsw else "memory.max_usage_in_bytes"
                return int((self.memory / name).read_text())
            if self._peak is None:
                return None
            return int(os.pread(self._peak, 64, 0))
        except (OSError, ValueError):
            return None

    def _close_peak(self) -> None:
        if self._peak is not None:
            with contextlib.suppress(OSError):
                os.close(self._peak)
            self._peak = None

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the group for reaching its memory limit."""
        if self.memory is None:
            return False
        events = "memory.oom_control" if self.support.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.memory / events).read_text().splitlines():
                key, value = line.split()
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False

    def remove(self) -> None:
        """Remove the group (its processes killed first, by the caller); retried while the last ones are reaped."""
        self._close_peak()
        if self._usage is not None:
            with contextlib.suppress(OSError):
                os.close(self._usage)
            self._usage = None
        for folder in reversed(self.folders):
            for attempt in range(20):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt == 0 and (folder / "cgroup.kill").exists():
                        with contextlib.suppress(OSError):
                            (folder / "cgroup.kill").write_text("1")
                    time.sleep(0.01 * (attempt + 1))
        self.folders = []
        self.memory = self.cpu = None
