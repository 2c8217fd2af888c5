"""Hostile submissions against the fork server (bwrap as root: one sandbox forks every worker).

Workers forked by one server share its PID, IPC, network, UTS and mount namespaces, which a sandbox per
worker never did: only their users keep them apart. Each test here is one way a submission tried to outlive
its worker or reach another submission; each must fail to.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

from grader.sandbox.proxy import IsolatedImplementation, WorkerCrashed
from grader.tests import test_isolation
from grader.tests.test_isolation import FAST, _forks_or_skip, make_submission
from grader.tests.test_isolation import _processes_of as _alive_processes_of

isolated = test_isolation.isolated  # the fixture: a planted submission's IsolatedImplementation, closed after


DAEMON_THEN_EXIT = """
def softmax(x, axis=-1):
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                time.sleep(0.1)
        os._exit(0)
    time.sleep(0.2)
    os._exit(0)  # the worker ends by itself: the grading side learns its exit code before it stops it
"""


def test_a_daemon_outlives_a_worker_that_exits_by_itself(isolated):
    impl = isolated({"softmax": DAEMON_THEN_EXIT})
    _forks_or_skip(impl)
    uid = impl._worker.uid
    with pytest.raises(WorkerCrashed):
        impl.function("softmax", "softmax")(np.zeros(2))
    impl.close()
    left = _alive_processes_of(uid)
    assert not left, f"the daemon of a worker that exited by itself still runs (pids {left}) in the fork server"


ZOMBIE_LEADER = """
def softmax(x, axis=-1):
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            import ctypes, threading
            def spin():
                while True:
                    time.sleep(0.1)
            threading.Thread(target=spin).start()
            ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread alone ends, /proc shows the process as Z
        os._exit(0)
    time.sleep(0.3)
    os._exit(0)
"""


def test_a_process_whose_main_thread_exited_is_still_killed(isolated):
    impl = isolated({"softmax": ZOMBIE_LEADER})
    _forks_or_skip(impl)
    uid = impl._worker.uid
    with pytest.raises(WorkerCrashed):
        impl.function("softmax", "softmax")(np.zeros(2))
    impl.close()
    left = _alive_processes_of(uid)
    assert not left, f"a process with a zombie main thread and a live thread survived its worker (pids {left})"


IPC_PLANTER = """
def softmax(x, axis=-1):
    import ctypes
    if ctypes.CDLL(None).shmget(0, 4096, 0o1666) < 0:  # an IPC object that outlives the worker: a tainted server
        raise OSError("shmget failed")
    return x
"""


def test_the_next_students_spare_worker_survives_a_tainted_server(tmp_path):
    # As a batch does it: the next student's spare worker starts while this one is graded (grader.grading.grade).
    attacker = IsolatedImplementation.warm(make_submission(tmp_path / "attacker", softmax=IPC_PLANTER), limits=FAST)
    _forks_or_skip(attacker)
    try:
        IsolatedImplementation.keep_spare(limits=FAST)
        attacker.function("softmax", "softmax")(np.zeros(2))
        attacker.close()
        assert attacker._worker.server.tainted
        honest = IsolatedImplementation.warm(make_submission(tmp_path / "honest"), limits=FAST)
        try:
            IsolatedImplementation.keep_spare(limits=FAST)  # the student after the honest one
            np.testing.assert_allclose(honest.function("softmax", "softmax")(np.array([0.0, 0.0])), [0.5, 0.5])
            assert honest.stats["crashed"] == 0, honest.stats
        finally:
            honest.close()
    finally:
        IsolatedImplementation.close_spares()


IPC_THEN_LOOP = """
def softmax(x, axis=-1):
    import ctypes
    ctypes.CDLL(None).shmget(0, 4096, 0o1666)
    while True:
        pass
"""


def test_a_worker_restarted_after_its_server_was_tainted_still_starts(isolated):
    impl = isolated({"softmax": IPC_THEN_LOOP})
    _forks_or_skip(impl)
    with pytest.raises(TimeoutError):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert impl._worker.server.tainted
    # The next call needs a new worker, in a new server: the submission goes on being graded (not an internal error).
    assert impl.function("masks", "causal_mask")(3).shape == (3, 3)


STOPPERS = """
def softmax(x, axis=-1):
    import os, signal
    for _ in range(3):
        if os.fork() == 0:
            os.setsid()
            while True:  # stop every other process of this user: the worker, and the server's kill helper
                try:
                    os.kill(-1, signal.SIGSTOP)
                except OSError:
                    pass
    return x
"""


def test_the_servers_kill_helper_cannot_be_stopped_by_the_user_it_kills(isolated):
    # The helper that kills a worker's user becomes that user: if the user's processes can stop it, the server
    # waits for it forever (every request after that times out) and the user's processes live on.
    for _ in range(2):
        impl = isolated({"softmax": STOPPERS})
        _forks_or_skip(impl)
        uid, server = impl._worker.uid, impl._worker.server
        with contextlib.suppress(TimeoutError):  # if the stoppers stopped the worker before it answered
            impl.function("softmax", "softmax")(np.zeros(2))
        impl.close()
        left = _alive_processes_of(uid)
        assert not left and not server.tainted, (
            f"the fork server did not kill the user of a worker (left: {left}; server tainted: {server.tainted})")


KEYRING = """
def softmax(x, axis=-1):
    import ctypes, platform
    keyctl = {"x86_64": 250, "aarch64": 219}[platform.machine()]
    add_key = {"x86_64": 248, "aarch64": 217}[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if x == "plant":  # in the user keyring and the user's persistent keyring: both outlive every process
        persistent = libc.syscall(keyctl, 22, ctypes.c_long(-1), ctypes.c_long(-4))  # KEYCTL_GET_PERSISTENT
        for ring in (-4, persistent):
            if libc.syscall(add_key, b"user", b"leak", b"a note for the next worker", 26, ctypes.c_long(ring)) < 0:
                raise OSError(ctypes.get_errno(), "add_key: " + __import__("os").strerror(ctypes.get_errno()))
        return "planted"
    persistent = libc.syscall(keyctl, 22, ctypes.c_long(-1), ctypes.c_long(0))
    found = []
    for ring in (-4, -5, persistent):
        key = libc.syscall(keyctl, 10, ctypes.c_long(ring), b"user", b"leak", ctypes.c_long(0))  # KEYCTL_SEARCH
        if key >= 0:
            buffer = ctypes.create_string_buffer(100)
            size = libc.syscall(keyctl, 11, ctypes.c_long(key), buffer, ctypes.c_long(100))  # KEYCTL_READ
            found.append(buffer.raw[:size].decode())
    return found
"""


def test_a_worker_finds_no_keys_left_by_an_earlier_worker_of_its_uid(isolated, monkeypatch):
    # A grading process has 64 uids (grader.sandbox.limits.fresh_uid): the 65th worker has the first one's uid.
    # Kernel keyrings of a user (its user keyring, its persistent keyring) outlive all its processes.
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the planted keyring syscalls are written for x86_64 and aarch64, not {platform.machine()}")
    from grader.sandbox import limits

    uid = limits.fresh_uid()
    monkeypatch.setattr(limits, "fresh_uid", lambda: uid)
    first = isolated({"softmax": KEYRING})
    try:
        assert first.function("softmax", "softmax")("plant") == "planted"
    except Exception as error:  # noqa: BLE001 - the worker's seccomp filter refuses the key calls (keyrings.py)
        assert "Operation not permitted" in str(error), error  # refused, not failed another way
        return
    first.close()
    later = isolated({"softmax": KEYRING})
    assert later._worker.uid == uid
    assert later.function("softmax", "softmax")("read") == [], "a worker read keys an earlier submission left"


def test_a_late_answer_of_the_fork_server_is_never_taken_for_the_next_one(isolated, monkeypatch):
    # A server that answers a request too late (a loaded machine) must not be asked again: its late answer
    # would be read as the answer to the next request (another student's fork, wait or kill).
    import signal
    import threading
    import time

    from grader.sandbox import server
    from grader.sandbox.proxy import SandboxError

    first = isolated({})
    _forks_or_skip(first)
    assert first.function("masks", "causal_mask")(2).shape == (2, 2)
    late = first._worker.server
    os.kill(late._pid, signal.SIGSTOP)  # the server is slow to answer (here: stopped for 0.5 s)
    resume = threading.Timer(0.5, os.kill, (late._pid, signal.SIGCONT))
    resume.start()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(server, "STARTUP_TIMEOUT", 0.1)
            patch.setattr(server, "REQUEST_TIMEOUT", 0.1)
            with pytest.raises(SandboxError):
                isolated({})  # its fork request times out: a grader's failure, that student is not graded
    finally:
        resume.join()
    time.sleep(0.3)  # the server answers that fork now, late
    second = isolated({})
    np.testing.assert_allclose(second.function("softmax", "softmax")(np.array([0.0, 0.0])), [0.5, 0.5])
    # The worker the grading side waits for, lowers and kills is the one forked for this student (it has
    # answered, so it has dropped to its user by now).
    process = second._worker.process
    assert process.pid > 0 and os.stat(f"/proc/{process.pid}").st_uid == second._worker.uid
    assert second.stats["crashed"] == 0, second.stats
    uid = second._worker.uid
    second.close()
    assert not _alive_processes_of(uid)
