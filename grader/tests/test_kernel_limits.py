"""Limits the kernel enforces on a worker: memory outside its address space, CPU time counted from outside.

Red-team cases: a worker that holds memory in memfd files or System V shared
memory (neither counts against ``RLIMIT_AS``) is stopped by its memory control
group; the call fails, the next call works, and the grading process is unharmed.
Where no control group can be made, the isolation line says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from grader.sandbox import cgroup, load
from grader.sandbox.proxy import IsolatedImplementation, Limits, WorkerCrashed
from grader.tests.test_isolation import make_submission
from grader.tests.waiting import HANG_SECONDS, SETTLE_SECONDS

SMALL = Limits(memory_bytes=200 << 20, call_timeout=10.0)

MEMFD = """
import os
def softmax(x, axis=-1):
    files = []
    chunk = b"x" * (1 << 20)
    for _ in range(240):  # 240 MiB in memfd files of 1 MiB each (the file-size limit), beside a 200 MiB limit
        fd = os.memfd_create("held")
        os.write(fd, chunk)
        files.append(fd)
    return x
"""

SYSV = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def causal_mask(n):
    held = []
    for _ in range(16):  # 512 MiB of System V shared memory, attached 32 MiB at a time
        shmid = libc.shmget(0, 32 << 20, 0o1600)
        if shmid < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        address = libc.shmat(shmid, None, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "shmat")
        ctypes.memset(address, 1, 32 << 20)
        libc.shmdt(ctypes.c_void_p(address))
        held.append(shmid)
    return held
"""


@pytest.fixture
def isolated(tmp_path):
    """Factory: an IsolatedImplementation of a planted submission (``make_submission``), closed after the test."""
    opened: list[IsolatedImplementation] = []

    def build(changes: dict[str, str], limits: Limits) -> IsolatedImplementation:
        implementation = IsolatedImplementation(make_submission(tmp_path / f"student{len(opened)}", **changes),
                                                limits=limits)
        opened.append(implementation)
        return implementation

    yield build
    for implementation in opened:
        implementation.close()


def _needs_a_group(impl) -> None:
    if impl._group is None and cgroup.available().memory is None:
        pytest.skip(f"no memory cgroup on this machine: {cgroup.available().missing}")


def test_memfd_files_beyond_the_memory_limit_stop_the_call(isolated):
    impl = isolated({"softmax": MEMFD}, limits=SMALL)
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)  # the worker is up, in its group
    _needs_a_group(impl)
    with pytest.raises((WorkerCrashed, MemoryError, OSError)) as caught:
        impl.function("softmax", "softmax")(np.zeros(2))
    if isinstance(caught.value, WorkerCrashed):
        assert "used more than 200 MiB of memory" in str(caught.value)
    assert impl.function("positional", "alibi_bias")(3, 2).shape == (2, 3, 3)  # a fresh worker; the grader is fine
    assert impl.internal == []  # the student's failure, graded as such


def test_system_v_shared_memory_beyond_the_memory_limit_stops_the_call(isolated):
    impl = isolated({"masks": SYSV}, limits=SMALL)
    assert impl.function("softmax", "softmax")(np.zeros(2)).shape == (2,)
    _needs_a_group(impl)
    with pytest.raises((WorkerCrashed, MemoryError, OSError)) as caught:
        impl.function("masks", "causal_mask")(2)
    if isinstance(caught.value, WorkerCrashed):
        assert "used more than 200 MiB of memory" in str(caught.value)
    assert impl.function("positional", "alibi_bias")(3, 2).shape == (2, 3, 3)
    assert impl.internal == []


def test_the_isolation_line_says_what_bounds_memory():
    line = subprocess.run(
        [sys.executable, "-c", "from grader.sandbox.limits import choose; print(choose('none').summary)"],
        capture_output=True, text=True, check=True, env={**os.environ, cgroup.SIMULATE_NO_CGROUP: "1"},
    ).stdout
    assert "NO memory cgroup (no cgroup (simulated))" in line
    assert "memfd, tmpfs and shared memory are not bounded" in line
    here = cgroup.available()
    assert ("NO memory cgroup" in here.describe()) == (here.memory is None)


def test_a_workers_cpu_time_is_read_from_outside_it_children_included():
    child = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                              "pid = os.fork()\n"
                              "end = time.process_time() + 0.3\n"
                              "while time.process_time() < end: pass\n"
                              "if pid: os.waitpid(pid, 0)\n"
                              "time.sleep(30)\n"])
    try:
        clock = load.CpuClock(child.pid)
        deadline = time.monotonic() + SETTLE_SECONDS  # polled: ends once it holds
        while clock.own() < 0.55 and time.monotonic() < deadline:  # its own 0.3 s and its reaped child's
            time.sleep(0.05)
        assert clock.own() >= 0.55
    finally:
        child.kill()
        child.wait()
    ended = clock.own()
    assert ended >= 0.55  # read after the process ended: its last reading stands, no error
    clock.close()


def test_a_group_counts_the_cpu_time_of_every_process_in_it():
    group = cgroup.WorkerGroup(cgroup.available(), 256 << 20)
    if group.cpu is None:
        group.remove()
        pytest.skip(f"no CPU accounting group here: {cgroup.available().missing or 'no cpuacct'}")
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nsys.stdin.read(1)\n"
                              "end = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"],
                             stdin=subprocess.PIPE)
    folders = list(group.folders)
    try:
        assert group.add(child.pid)
        child.communicate(b"x", timeout=HANG_SECONDS)
        assert group.cpu_seconds() >= 0.3
    finally:
        child.kill()
        child.wait()
        group.remove()
    assert folders and not any(folder.exists() for folder in folders)  # removed with the worker


def test_cgroup_v2_is_used_where_memory_is_delegated_and_named_where_not(tmp_path, monkeypatch):
    group = tmp_path / "unified" / "user.slice" / "grader"
    group.mkdir(parents=True)
    monkeypatch.setattr(cgroup, "_mounts", lambda: {"2": tmp_path / "unified"})
    monkeypatch.setattr(cgroup, "_own_groups", lambda: {"": "/user.slice/grader"})
    monkeypatch.delenv(cgroup.SIMULATE_NO_CGROUP, raising=False)
    (group / "cgroup.controllers").write_text("cpu io pids\n")  # no memory controller given to the grader
    cgroup.available.cache_clear()
    try:
        missing = cgroup.available()
        assert missing.memory is None and "without the memory controller delegated" in missing.missing
        assert missing.describe().startswith("NO memory cgroup (cgroup v2 without the memory controller")
        (group / "cgroup.controllers").write_text("cpu memory pids\n")
        (group / "cgroup.subtree_control").write_text("")
        cgroup.available.cache_clear()
        found = cgroup.available()
        assert (found.version, found.memory, found.cpu) == (2, group, group)
        assert (group / "cgroup.subtree_control").read_text() == "+memory +cpu"  # delegated on to the workers
        assert "a cgroup v2 memory limit and swap per worker" in found.describe()
    finally:
        cgroup.available.cache_clear()
