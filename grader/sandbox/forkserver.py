"""The fork server: forks each submission's worker from one process that imported numpy once.

Run by the fork server, in a sandbox like a worker's, as root with only
CAP_SETUID and CAP_SETGID (``worker.py --serve`` imports this module from
beside it, as it does ``frames`` and ``protocol``); it never runs student code.
:func:`kill_all_of` is also run by the grading process, to kill the processes of
a worker started on its own (``limits.kill_user``). The grading side's client of
this server is :mod:`grader.sandbox.server`.

It imports only the standard library and the sandbox-side modules beside it.
"""

from __future__ import annotations

import os
import resource
import traceback
from collections.abc import Callable

from . import frames, protocol

# Resource limits of a forked worker, in the order the grading process sends them (see grader.sandbox.limits).
_LIMITS = ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_NOFILE")


def apply_limits(values: list[int], niceness: int = 0) -> None:
    """Apply a worker's resource limits to this process (the one place they are applied, forked or started).

    ``values`` are those of ``_LIMITS`` in order (``grader.sandbox.limits.limit_values``); no core files, no
    POSIX message queue. Run in the child, before anything of the student's.
    """
    if niceness:
        os.nice(niceness)
    for rlimit, value in zip(_LIMITS, values, strict=True):
        # (the address space's hard limit leaves room for the kit's sealed answers: ``worker`` raises the soft one
        # by their size as they come; an eighth, the most a worker holds, ``proxy._send_sealed``)
        room = {"RLIMIT_CPU": 1, "RLIMIT_AS": value // protocol.ANSWERS_SHARE}.get(rlimit, 0)
        resource.setrlimit(getattr(resource, rlimit), (value, value + room))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # no POSIX message queue outlives it
_NOGROUP = 65534
_KILLER_UID = 65534  # the real and saved uid of the helper that kills a worker's user (see _kill_user)
# The workers this server forked and has not reaped yet: only their exit statuses are kept (a child that student
# code gives the server, with CLONE_PARENT, is reaped and forgotten; its pid may later be a worker's).
_FORKED: set[int] = set()


def serve(control_fd: int, students: str, run_worker: Callable[[int, int, str, int, int], int]) -> int:
    """The fork server: start each submission's worker by forking this process, numpy already imported.

    The grading process starts one server per grading process, in a sandbox like a worker's, except that it
    shows ``students`` (one folder per submission, each readable by that submission's own user only) instead
    of one submission's modules. The server runs as root with only CAP_SETUID and CAP_SETGID and never runs
    student code: it answers the requests of ``protocol.SERVER_REQUESTS`` on ``control_fd`` (a Unix socket;
    ``fork`` brings the new worker's three pipes with it). A forked worker drops to its submission's user,
    in a session of its own, with its limits, before it touches anything of the submission; it then runs
    exactly what a worker started on its own runs (``run_worker``: ``worker.forked_worker``). Starting a
    worker this way costs a fork, not an interpreter and numpy's import (about 70 ms of CPU each).
    """
    import socket

    from . import keyrings  # noqa: F401 - for every forked worker (worker._shut_keyrings), imported once here

    os.set_inheritable(control_fd, False)
    control = socket.socket(fileno=control_fd)
    exited: dict[int, int] = {}  # pid -> wait status of the forked workers that ended
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
        except OSError:
            return 0
        if not data:
            return 0
        try:
            message = frames.loads(data.decode("utf-8"))
            op = protocol.check(message, protocol.SERVER_REQUESTS)
            if op != "fork" and fds:
                raise ValueError(f"{op}: no file descriptors expected")
            if op == "fork":
                reply = _fork_worker(message, fds, control_fd, students, run_worker)
                fds = []  # closed by _fork_worker
            elif op == "kill":
                reply = _kill_user(message["uid"], exited)
            elif op == "wait":
                reply = {"status": "ok", "code": _wait_for(message["pid"], message["timeout"], exited)}
            else:  # cannot happen: check() allows only the operations above
                raise ValueError(f"operation {op!r} is not served")
        except Exception as error:  # noqa: BLE001 - a bad request is answered, never the end of the server
            reply = {"status": "error", "message": f"{type(error).__name__}: {error}"[:300]}
        for fd in fds:
            _close_quietly(fd)
        control.send(frames.dumps(reply).encode("ascii"))


def _fork_worker(message: dict, fds: list[int], control_fd: int, students: str,
                 run_worker: Callable[..., int]) -> dict:
    """Fork a worker for one submission (see :func:`serve`); the reply holds its pid."""
    try:
        name, uid, limits = message["modules"], message["uid"], message["limits"]
        if len(fds) != 3:
            raise ValueError(f"fork: expected 3 file descriptors, got {len(fds)}")
        if not name or name.startswith(".") or "/" in name:
            raise ValueError(f"fork: bad submission folder name {name[:40]!r}")
        if (not 0 < uid < 2**31 or uid == _KILLER_UID or len(limits) != len(_LIMITS)
                or not all(isinstance(n, int) for n in limits)):
            raise ValueError("fork: bad uid or limits")
        modules = os.path.join(students, name, "modules")
        pid = os.fork()
    except BaseException:
        for fd in fds:
            _close_quietly(fd)
        raise
    if pid == 0:  # the worker: nothing of the server's but numpy and this code
        code = 70
        try:
            requests, replies, output = fds
            os.close(control_fd)
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.close(output)
            low, high = sorted((requests, replies))
            for start, end in ((3, low), (low + 1, high), (high + 1, 1 << 20)):  # nothing else of the server's
                os.closerange(start, end)
            os.setsid()  # a session (and a scheduling group) of its own, as a worker started by bwrap
            apply_limits(limits, message["niceness"])
            code = run_worker(requests, replies, modules, uid, _NOGROUP)  # drops to uid first
        except BaseException:  # noqa: BLE001 - told on the worker's output, which the grading side reports
            traceback.print_exc()
        finally:
            os._exit(code)
    for fd in fds:
        _close_quietly(fd)
    _FORKED.add(pid)
    return {"status": "ok", "pid": pid}


def _processes_of(uid: int) -> list[int]:
    """The live processes of ``uid`` in this PID namespace: those with a thread that is not a zombie.

    Not the main thread's state alone: a process whose main thread ended (``SYS_exit``) shows as a zombie in
    ``/proc/<pid>/stat`` while its other threads run on.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            tasks = os.listdir(f"/proc/{entry}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{entry}/task/{task}/stat", "rb") as stat:
                    state = stat.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                found.append(int(entry))
                break
    return found


def _reap(exited: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in _FORKED:
            _FORKED.discard(pid)
            exited[pid] = status
        if len(exited) > 10_000:  # statuses nobody asked for (never in practice)
            exited.pop(next(iter(exited)))


def kill_all_of(uid: int, killer_uid: int, gid: int = _NOGROUP) -> None:
    """Send SIGKILL to every process of ``uid``, from a fork of this process that never executes anything.

    ``kill(-1)`` with ``uid`` as effective uid reaches exactly that user's processes. The killer's real and
    saved uids are ``killer_uid`` (never a worker's), so that the user's processes cannot signal it back: a
    SIGSTOP would stop it, and whoever waits for it. Executing a program (``kill -9 -1``) would not do:
    executing sets the saved uid to the effective one. The grading side uses this too (``limits.kill_user``).
    """
    import signal

    killer = os.fork()
    if killer == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(killer_uid, uid, killer_uid)
            if os.getresuid() == (killer_uid, uid, killer_uid):
                os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(killer, 0)


def _kill_user(uid: int, exited: dict[int, int]) -> dict:
    """Kill every process of ``uid``; say whether anything of it is left (a reason to start a new server)."""
    import time

    if not 0 < uid < 2**31 or uid == _KILLER_UID:
        raise ValueError("kill: bad uid")
    for attempt in range(20):
        _reap(exited)
        if attempt and not _processes_of(uid):  # always once: what /proc cannot tell apart is killed too
            break
        kill_all_of(uid, _KILLER_UID)
        time.sleep(0.0005 * attempt)
    _reap(exited)
    left = _processes_of(uid)
    # What could outlive a worker's processes in the namespaces it shares with the next ones: System V IPC
    # objects (files are impossible: nothing but the submission's own folder is writable, and POSIX queues
    # are disabled by RLIMIT_MSGQUEUE). Any of them, or a process that survived, and the server is replaced.
    ipc = 0
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                ipc += max(len(table.read().splitlines()) - 1, 0)
        except OSError:
            ipc += 1  # cannot tell: assume the worst
    return {"status": "ok", "left": len(left), "tainted": bool(left or ipc)}


def _wait_for(pid: int, timeout: float, exited: dict[int, int]) -> int | None:
    """The exit code of forked worker ``pid`` (negative: the signal that ended it), waiting up to ``timeout``."""
    import time

    deadline = time.monotonic() + max(0.0, min(float(timeout), 10.0))
    while True:
        _reap(exited)
        if pid in exited:
            status = exited.pop(pid)
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
