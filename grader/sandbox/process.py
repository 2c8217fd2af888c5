"""A submission's worker process, seen from the grading process: its scratch folder, its start, its end.

Run by the grading process. :class:`WorkerProcess` prepares the scratch
folder the sandbox shows (the worker's code, :func:`sandbox_files`, and a copy
of the submission's modules), starts the worker (forked by the grading
process's fork server, ``grader.sandbox.server``, or started on its own in a
sandbox of its own, ``grader.sandbox.limits.command``), and kills it with
everything it started. The pipes it hands over are the channel's
(``grader.sandbox.channel``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.curriculum import kit_path
from grader.sandbox import limits as confine
from grader.sandbox import server
from grader.sandbox.limits import Limits

SANDBOX_CODE = Path(__file__).resolve().parent
WORKER_SOURCE = SANDBOX_CODE / "worker.py"
MAX_MODULE_BYTES = 1 << 20
# A folder of the batch (``grade_batch`` makes it and removes it at the end, even when a grading process
# was killed and could not remove its workers' scratch folders): the workers' scratch folders go inside.
SCRATCH_ENV = "ATTENTION_KIT_SCRATCH"


def scratch_parent() -> str | None:
    """The batch's scratch folder (``SCRATCH_ENV``), if it is set and there."""
    parent = os.environ.get(SCRATCH_ENV)
    return parent if parent and os.path.isdir(parent) else None


_COMPILED: dict[tuple[str, str], bytes | None] = {}
# A sandbox module that a student's own run imports too lives with the suite (the student's release holds no
# grader/sandbox): the worker's copy is made from it.
_WITH_THE_SUITE = {"by_code.py", "decoded.py"}


def source_of(name: str) -> Path:
    """The kit's file that the sandbox's ``name`` (``worker.py`` or one of ``limits.SANDBOX_MODULES``) is a copy of."""
    return kit_path(f"tests/{name}") if name in _WITH_THE_SUITE else SANDBOX_CODE / name  # (a checkout or a wheel)


def _compiled(name: str, filename: str, main: bool) -> bytes | None:
    """The module ``name`` of this folder as a .pyc for this interpreter (the worker's), naming ``filename``.

    Compiling the worker's ~1000 lines at every worker start cost each submission ~10 ms of CPU. The worker
    runs the same interpreter (``limits.interpreter_paths``), so the magic number matches; None (run the
    source) if compiling fails here for any reason. ``main``: the script itself (a timestamp .pyc, whose
    header is not checked when it is run as the main script); otherwise a module it imports, an unchecked
    hash-based .pyc (used as it is, whatever the copy's time stamp). Once per process.
    """
    key = (name, filename)
    if key not in _COMPILED:
        try:
            source = source_of(name).read_bytes()
            code = compile(source, filename, "exec", dont_inherit=True, optimize=0)
            if main:  # the magic number, flags 0 (timestamp-based), source mtime and size, the marshalled code
                header = bytes(12)
            else:  # flags 1 (hash-based, never checked), the source's hash
                header = (1).to_bytes(4, "little") + importlib.util.source_hash(source)
            _COMPILED[key] = importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)
        except Exception:  # noqa: BLE001 - the source itself always works
            _COMPILED[key] = None
    return _COMPILED[key]


def sandbox_files(plan: confine.Plan, fork_server: bool = False) -> dict[str, bytes]:
    """The worker's code as the sandbox shows it: ``worker.py`` (and .pyc), the modules beside it and their .pyc.

    ``fork_server``: also ``forkserver.py``, which only a fork server imports. Names are relative to the folder
    (``__pycache__/codec.cpython-312.pyc``); see ``limits.SANDBOX_MODULES`` and ``worker.load_modules``.
    """
    filename = confine.worker_filename(plan)  # e.g. /.attention-kit-sandbox/worker.py, in tracebacks
    files = {"worker.py": WORKER_SOURCE.read_bytes()}
    compiled = _compiled("worker.py", filename, main=True)
    if compiled is not None:
        files["worker.pyc"] = compiled
    for name in confine.SANDBOX_MODULES:
        if name == "forkserver.py" and not fork_server:
            continue
        files[name] = source_of(name).read_bytes()
        compiled = _compiled(name, str(Path(filename).with_name(name)), main=False)
        if compiled is not None:
            files[f"__pycache__/{name.removesuffix('.py')}.{sys.implementation.cache_tag}.pyc"] = compiled
    # The given implementations are never files here: they travel with a view's request (given_views).
    return files


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (names relative to ``folder``) readable by everyone, their folders listable."""
    for name, data in files.items():
        path = folder / name
        if not path.parent.is_dir():
            path.parent.mkdir(mode=0o755, parents=True)
            os.chmod(path.parent, 0o755)
        path.write_bytes(data)
        os.chmod(path, 0o644)


def describe_exit(code: int | None, mode: str) -> str:
    """How a worker ended, in words (``mode``: the plan's, since bwrap reports a signal as 128 + its number)."""
    if code is None:
        return "exit code unknown"
    number = -code if code < 0 else (code - 128 if mode == "bwrap" and code > 128 else None)
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        reason = {"SIGXCPU": ": CPU time limit", "SIGKILL": ": killed, perhaps out of memory",
                  "SIGXFSZ": ": file size limit", "SIGSEGV": ": crashed"}.get(name, "")
        return f"killed by {name}{reason}"
    return f"exit code {code}"


class WorkerProcess:
    """The worker of one submission: its scratch folder, the current process, and how to end it.

    Parameters
    ----------
    path : pathlib.Path
        The submission folder.
    modules : set of str
        The file names of the manifest's modules (``softmax.py``, ...).
    plan : grader.sandbox.limits.Plan
        How workers are confined.
    limits : grader.sandbox.limits.Limits
        The resource limits of each worker.
    fork_server : callable or None
        Where workers are forked: returns this process's fork server (a new one if the last is gone).
    """

    def __init__(self, path: Path, modules: set[str], plan: confine.Plan, limits: Limits,
                 fork_server: Callable[[], server.ForkServer] | None) -> None:
        self.path, self.modules, self.plan, self.limits = path, modules, plan, limits
        self._fork_server = fork_server
        self.server = fork_server() if fork_server is not None else None
        self.process: subprocess.Popen | server.ForkedWorker | None = None
        self.uid: int | None = None
        self.worker_pid: int | None = None  # the host pid of the current worker's own process (set by the facade)
        self.spawned_at = 0.0
        self.scratch = self._new_scratch()
        # What the garbage collector must clean up if close() is never called (kept current by spawn/stop).
        self._live: dict[str, Any] = {"process": None, "fds": {}, "scratch": self.scratch}
        weakref.finalize(self, WorkerProcess._cleanup, self._live)
        self.missing = self._prepare_scratch()

    # ------------------------------------------------------------------ scratch folder

    def _new_scratch(self) -> Path:
        """A new scratch folder: in the fork server's folder of submissions, or the batch's scratch folder."""
        parent = str(self.server.students) if self.server is not None else scratch_parent()
        return Path(tempfile.mkdtemp(prefix="attention-kit-worker-", dir=parent))

    def _prepare_scratch(self) -> set[str]:
        """Copy the worker's code (unless forked: the server has it) and the submission's modules; the missing.

        The scratch folder holds the worker's own code, public (its Python lists the folder to import it); the
        modules are this process's alone until a worker starts (:meth:`_hand_over`): without namespaces
        (``--container``, Gradescope without bubblewrap) every worker's folder lies on the one file system, its
        path on every command line in ``/proc``.
        """
        os.chmod(self.scratch, 0o755)
        if self.server is None:
            write_files(self.scratch, sandbox_files(self.plan))
        modules = self.scratch / "modules"
        modules.mkdir(mode=0o700)
        os.chmod(modules, 0o700)
        return self.copy_modules()

    def _hand_over(self) -> None:
        """Make the modules readable by the current worker's user alone, as the fork server does for its workers.

        Another worker (another student's, or the reference's that answers fair grading) runs as another user: it
        can neither list nor read them, on any plan. Without a user of its own (``uid`` None: the worker runs as
        this process's user), the folder stays this user's alone.
        """
        if self.uid is not None:
            server.hand_over(self.scratch / "modules", self.uid)

    def copy_modules(self) -> set[str]:
        """Copy the submission's modules into the scratch folder; return the missing modules."""
        modules = self.scratch / "modules"
        helpers = {p.name for p in self.path.glob("_*.py") if p.name != "__init__.py" and p.name.isascii()}
        missing = set()
        for name in sorted(self.modules | helpers):
            source = self.path / name
            if source.is_symlink() or not source.is_file() or source.stat().st_size > MAX_MODULE_BYTES:
                if name in self.modules:
                    missing.add(name.removesuffix(".py"))
                continue
            shutil.copyfile(source, modules / name)
            os.chmod(modules / name, 0o644)
        return missing

    def adopt(self, path: Path) -> None:
        """Serve the submission ``path`` instead (a spare worker that has seen no module yet)."""
        self.path = path
        self.missing = self.copy_modules()
        self._hand_over()

    # ------------------------------------------------------------------ start

    def spawn(self, niceness: int) -> dict[str, int]:
        """Start a worker; its pipes: ``requests`` (write end), ``replies`` and ``output`` (read ends).

        OSError or ``server.ServerError`` if it could not be started.
        """
        self.spawned_at = time.perf_counter()
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        output_read, output_write = os.pipe()
        # Without a PID namespace, every worker gets a user of its own, so that all its processes can be killed.
        # Each worker gets a user of its own (as root): its process limit then counts its own processes only.
        if self.process is None:
            confine.release_uid(self.uid)  # (a start that failed: no process holds it)
        self.uid = confine.fresh_uid() if self.plan.drop_to is not None else None
        try:
            if self._fork_server is not None:
                self.process = self._fork(requests_read, replies_write, output_write, niceness)
            else:
                self._hand_over()  # (a forked worker's are handed over by the fork server's client)
                self.process = self._start(requests_read, replies_write, output_write, niceness)
        except BaseException:
            for fd in (requests_write, replies_read, output_read):
                os.close(fd)
            raise
        finally:
            for fd in (requests_read, replies_write, output_write):
                os.close(fd)
        fds = {"requests": requests_write, "replies": replies_read, "output": output_read}
        self._live.update(process=self.process, fds=dict(fds), uid=self.uid if self.plan.mode != "bwrap" else None,
                          held=self.uid)
        return fds

    def _fork(self, requests_read: int, replies_write: int, output_write: int, niceness: int) -> server.ForkedWorker:
        """A worker forked by this process's fork server (replaced first if it is tainted or gone)."""
        assert self.uid is not None and self._fork_server is not None
        current = self._fork_server()
        if current is not self.server or not self.scratch.is_dir():
            # A new server (the old one's folder, this scratch folder in it, went with the old one), or a folder
            # removed under us: the submission's modules are copied again, into the new server's folder.
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.server = current
            self.scratch = self._new_scratch()
            self._live["scratch"] = self.scratch
            self.missing = self._prepare_scratch()
        return current.fork(self.scratch, self.uid, self.limits, niceness,
                            (requests_read, replies_write, output_write))

    def _start(self, requests_read: int, replies_write: int, output_write: int, niceness: int) -> subprocess.Popen:
        """A worker started on its own (its own sandbox, if any)."""
        cmd, cwd = confine.command(self.plan, self.scratch, requests_read, replies_write, uid=self.uid)
        with confine.options_in_a_file(cmd) as (cmd, option_fds):
            return subprocess.Popen(
                cmd, cwd=cwd, env=confine.worker_environment(), stdin=subprocess.DEVNULL,
                stdout=output_write, stderr=output_write, pass_fds=(requests_read, replies_write, *option_fds),
                # A submission that already ran out of time gets the CPU only when honest ones do not need it.
                preexec_fn=confine.limiter(self.limits, niceness=niceness),
                start_new_session=True,
            )

    def alive(self) -> bool:
        """Whether the worker runs and its scratch folder is there."""
        return self.process is not None and self.process.poll() is None and self.scratch.is_dir()

    # ------------------------------------------------------------------ end

    def stop(self, ended: bool, before_kill: Callable[[], None]) -> int | None:
        """Kill the worker (all its processes); return its exit status (None: there was none, or unknown).

        ``ended``: the worker closed the channel, so give it a moment to exit by itself and report its own code.
        ``before_kill``: called first, while the worker may still write (to read its last output).
        """
        process, self.process = self.process, None
        uid, self.uid = self.uid, None
        self.worker_pid = None
        self._live.update(process=None, fds={}, uid=None, held=None)
        try:
            if process is None:
                return None
            before_kill()
            if ended:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=2)
            # In a PID namespace, killing its first process ends them all; elsewhere, kill by the worker's own uid.
            return WorkerProcess._kill(process, uid if self.plan.mode != "bwrap" else None)
        finally:
            confine.release_uid(uid)  # its processes gone: the id may come round again

    def remove(self) -> None:
        """Remove the scratch folder (after ``stop``)."""
        shutil.rmtree(self.scratch, ignore_errors=True)

    @staticmethod
    def _kill(process: subprocess.Popen | server.ForkedWorker, uid: int | None = None) -> int | None:
        if isinstance(process, server.ForkedWorker):
            return process.stop()  # every process of its user, wherever it went
        if uid is not None:
            confine.kill_user(uid)  # every process the worker started, wherever it went (setsid, daemons)
            remove_leftovers(uid)
        if process.poll() is None:
            # Children first (bwrap's init of the PID namespace: killing it ends every process inside), so that
            # bwrap reaps them and no zombie is left to an init that may not reap; then the whole session.
            try:
                children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
            except OSError:
                children = []
            for child in children:
                try:
                    os.kill(int(child), signal.SIGKILL)
                except (ProcessLookupError, PermissionError, ValueError):
                    pass
            if children and str(process.args[0]).endswith("bwrap"):  # bwrap exits once its child is gone
                try:
                    process.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    pass
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the whole session, so forked children go too
            except (ProcessLookupError, PermissionError):
                pass
            process.kill()
        try:
            return process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    @staticmethod
    def _cleanup(live: dict[str, Any]) -> None:
        if live["process"] is not None:
            WorkerProcess._kill(live["process"], live.get("uid"))
        confine.release_uid(live.get("held"))
        for fd in live["fds"].values():
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(live["scratch"], ignore_errors=True)


# The folders every user may write in, without a mount namespace (--container): what a worker leaves there outlives
# it (a hostile round left 20 MiB in /dev/shm, the machine's memory, after the batch; a channel between students).
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def remove_leftovers(uid: int, folders: tuple[str, ...] = SHARED_WRITABLE) -> None:
    """Remove what user ``uid`` (a worker's own, its processes gone) left in ``folders``.

    At their top, and in every folder below that another user owns and ``uid`` could write in (a hostile round left
    its files in a folder every user may write in, like /tmp/.X11-unix: they outlived the batch). Never follows a
    link (a link of its own is removed as a link; folders are opened and emptied by file descriptor).
    Its System V shared memory, message queues and semaphores go too (:func:`remove_ipc`).
    """
    remove_ipc(uid)
    for folder in folders:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            _sweep(fd, uid, depth=8)
        finally:
            os.close(fd)


def _writable_by(info: os.stat_result, uid: int) -> bool:
    """Whether a folder of another user's lets ``uid`` (no group but nogroup) create files in it."""
    mode = info.st_mode
    return bool(mode & stat.S_IWOTH or (mode & stat.S_IWGRP and info.st_gid == confine.UNPRIVILEGED_GID))


def _sweep(fd: int, uid: int, depth: int) -> None:
    """Remove ``uid``'s entries of the open folder ``fd``; look in its subfolders that ``uid`` may write in."""
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return
    for entry in entries:
        try:
            info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            is_dir = stat.S_ISDIR(info.st_mode)
            if info.st_uid == uid:
                if is_dir:
                    shutil.rmtree(entry.name, dir_fd=fd, ignore_errors=True)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            elif is_dir and depth > 0 and _writable_by(info, uid):
                inner = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    _sweep(inner, uid, depth - 1)
                finally:
                    os.close(inner)
        except OSError:
            pass


# System V IPC objects outlive their creator without an IPC namespace (shm_rmid_forced is 0 by default): a hostile
# round left 32 MiB of shared memory and a message queue of its text after the batch, a channel to the next student.
# Their columns in /proc/sysvipc: the id (the second) and the owner's and creator's uids, which IPC_SET cannot change
# for the creator's (it can give the object to root).
_SYSV_IPC = {"shm": (1, 7, 9), "msg": (1, 7, 9), "sem": (1, 4, 6)}


def remove_ipc(uid: int) -> None:
    """Remove the System V IPC objects that user ``uid`` created or owns (IPC_RMID, as root)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for kind, (ident, owner, creator) in _SYSV_IPC.items():
        try:
            rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            try:
                if uid not in (int(fields[owner]), int(fields[creator])):
                    continue
                number = int(fields[ident])
            except (IndexError, ValueError):
                continue
            if kind == "shm":
                libc.shmctl(number, 0, None)  # IPC_RMID: gone once nothing has it attached (its processes are gone)
            elif kind == "msg":
                libc.msgctl(number, 0, None)
            else:
                libc.semctl(number, 0, 0)


# ---------------------------------------------------------------- this process's fork server

_SERVER: list[server.ForkServer] = []  # this process's fork server, if its plan forks (see grader.sandbox.server)
_RETIRED: list[server.ForkServer] = []  # replaced servers whose last workers still run (see ForkServer.retire)


def shared_fork_server(plan: confine.Plan) -> server.ForkServer:
    """The fork server of this process, started (or replaced, if it died or something of a worker outlived it)."""
    if _SERVER and (_SERVER[0].tainted or not _SERVER[0].alive):
        old = _SERVER.pop()
        old.retire()  # closed now, or once the workers it holds for other submissions are stopped
        _RETIRED[:] = [retired for retired in [*_RETIRED, old] if retired.process is not None]
    if not _SERVER:
        _SERVER.append(server.ForkServer(plan, scratch_parent(), sandbox_files(plan, fork_server=True)))
    return _SERVER[0]


def close_fork_servers() -> None:
    """Close this process's fork server and the retired ones (at exit; after its spare workers are closed)."""
    while _SERVER or _RETIRED:
        with contextlib.suppress(Exception):
            (_SERVER or _RETIRED).pop().close()
