"""The fork server: one sandbox per grading process that forks a worker per submission.

A worker started on its own costs an interpreter and numpy's import, about
70 ms of CPU, for every submission and every restart after a timeout. Where
each worker also runs as a user of its own (bubblewrap, the grader as root:
``limits.Plan.forks``), the grading process instead starts one sandbox whose
root process has imported numpy once (``forkserver.serve``) and asks it to
fork each worker. The users keep those workers apart, as their own sandboxes
did:

* every submission's modules are in a folder of the server's ``students/``
  folder that only its worker's user can read (the parent folder cannot be
  listed), and nothing else in the sandbox is writable;
* killing a worker kills every process of its user (``forkserver.kill_all_of``:
  those processes cannot stop the killer), and a server that finds anything of a user left afterwards (a
  process, a System V IPC object) is replaced before the next worker;
* the server itself never runs student code, answers only
  ``protocol.SERVER_REQUESTS``, and a worker closes the server's socket
  before anything else.

:class:`ForkedWorker` stands in for the ``subprocess.Popen`` of a worker
started on its own, so the rest of ``grader.sandbox.proxy`` treats both alike.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

from grader.sandbox import frames, load
from grader.sandbox import limits as confine

STARTUP_TIMEOUT = 30.0  # the server's start (an interpreter and numpy), as a worker's
# Any other answer of the server (a kill waits at most ~1 s inside): generous, since a server that does not answer
# in time is never asked again, and the workers it holds are lost with it (on a busy machine, at a low priority).
REQUEST_TIMEOUT = 60.0


def hand_over(modules: Path, uid: int) -> None:
    """Make the folder ``modules`` (a worker's copy of its submission) readable by ``uid`` alone, and nothing else.

    The folder may have been an earlier worker's (a restart: another user of the same submission), who owned it
    and could have planted links in it: it is made root's first (then no other user can change it), every entry
    that is not a plain file of one link is removed (a symbolic link would send the chmod below, as root, to its
    target: a hostile round set the interpreter of every worker to 0400 so), and only then is each file, and the
    folder, handed to ``uid``. Used for a forked worker (:meth:`ForkServer.fork`) and one started on its own
    (``process.WorkerProcess``).
    """
    if modules.is_symlink() or not modules.is_dir():
        raise OSError(f"{modules} is not a folder")
    os.chown(modules, 0, 0, follow_symlinks=False)
    os.chmod(modules, 0o700)
    with os.scandir(modules) as listing:
        entries = list(listing)
    for entry in entries:
        status = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
            if stat.S_ISDIR(status.st_mode):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
            continue
        os.chown(entry.path, uid, confine.UNPRIVILEGED_GID, follow_symlinks=False)
        os.chmod(entry.path, 0o400)  # a plain file, in a folder no one else can change now
    os.chown(modules, uid, confine.UNPRIVILEGED_GID, follow_symlinks=False)
    os.chmod(modules, 0o500)


class ServerError(RuntimeError):
    """The fork server could not be started or did not answer."""


class ForkServer:
    """One fork server (its sandbox, its socket and its folder of submissions).

    Parameters
    ----------
    plan : grader.sandbox.limits.Plan
        A plan that ``forks``.
    parent : str or None
        The folder to make the server's own folder in (the batch's scratch folder), or the system's.
    worker_files : dict of str to bytes
        The worker's code as the sandbox shows it (``process.sandbox_files``): ``worker.py``, the modules
        beside it, their compiled code; names relative to the server's folder.
    """

    def __init__(self, plan: confine.Plan, parent: str | None, worker_files: dict[str, bytes]) -> None:
        self.plan = plan
        self.folder = Path(tempfile.mkdtemp(prefix="attention-kit-server-", dir=parent))
        self.tainted = False  # something of a worker outlived it: replace this server before the next one
        self.silent = False  # it did not answer a request: never ask it again (its late answer would be misread)
        self.live = 0  # its workers not stopped yet: a tainted server is closed once they are (see ``retire``)
        self.retired = False
        self.process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self._pid: int | None = None  # the host pid of the server's own process
        try:
            os.chmod(self.folder, 0o755)
            for name, data in worker_files.items():
                path = self.folder / name
                if not path.parent.is_dir():  # __pycache__
                    path.parent.mkdir(mode=0o755)
                    os.chmod(path.parent, 0o755)
                path.write_bytes(data)
                os.chmod(path, 0o644)
            self.students = self.folder / "students"
            self.students.mkdir(mode=0o711)
            os.chmod(self.students, 0o711)  # others may pass through, never list
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                command = confine.server_command(plan, self.folder, theirs.fileno())
                with confine.options_in_a_file(command) as (command, option_fds):
                    self.process = subprocess.Popen(
                        command, env=confine.worker_environment(), stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(theirs.fileno(), *option_fds),
                        start_new_session=True)
            finally:
                theirs.close()
            self._socket = ours
        except OSError as error:
            self.close()
            raise ServerError(f"the fork server could not be started ({error})") from None

    # ------------------------------------------------------------------ requests

    def _request(self, message: dict, fds: tuple[int, ...] = (), timeout: float = REQUEST_TIMEOUT) -> dict:
        if self._socket is None:
            raise ServerError("the fork server is closed")
        try:
            self._socket.settimeout(timeout)
            socket.send_fds(self._socket, [frames.dumps(message).encode("ascii")], list(fds))
            data = self._socket.recv(1 << 16)
        except OSError as error:  # socket.timeout included
            # Never ask it again: its late answer would be read as the answer to the next request.
            self.tainted = self.silent = True
            raise ServerError(f"the fork server did not answer ({error or type(error).__name__}; "
                              f"{self._last_words()})") from None
        if not data:
            self.tainted = self.silent = True
            raise ServerError(f"the fork server ended ({self._last_words()})")
        try:
            reply = frames.loads(data.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            reply = None
        if not isinstance(reply, dict) or reply.get("status") != "ok":
            raise ServerError(f"the fork server refused {message.get('op')!r}: {str(reply)[:300]}")
        return reply

    def _last_words(self) -> str:
        process = self.process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1)  # it closed its socket: it is ending
        if process is None or process.poll() is None:
            return "it is still running"
        text = process.stderr.read().decode("utf-8", "replace").strip() if process.stderr else ""
        return f"exit status {process.returncode}; its last output: {(text.splitlines() or ['none'])[-1][:300]}"

    def fork(self, folder: Path, uid: int, limits: confine.Limits, niceness: int,
             pipes: tuple[int, ...]) -> ForkedWorker:
        """Fork a worker for the submission ``folder`` (a folder of ``students``, holding ``modules/``).

        ``pipes``: the worker's requests (read end), replies and output (write ends); they stay open here, for
        the caller to close. ``folder``'s modules are
        handed to ``uid`` (readable by it alone) first.
        """
        if folder.parent != self.students:
            raise ValueError(f"{folder}: not a folder of this server's submissions")
        os.chown(folder, 0, 0)
        os.chmod(folder, 0o711)
        hand_over(folder / "modules", uid)
        first = self._pid is None
        reply = self._request({"op": "fork", "modules": folder.name, "uid": uid,
                               "limits": confine.limit_values(limits), "niceness": niceness},
                              pipes, timeout=STARTUP_TIMEOUT if first else REQUEST_TIMEOUT)
        if first and self.process is not None:
            self._pid = load.innermost_child(self.process.pid, hops=2)  # bwrap, its init, then the server
        pid = reply.get("pid")
        if not isinstance(pid, int):
            raise ServerError(f"the fork server's answer has no pid: {str(reply)[:200]}")
        self.live += 1
        return ForkedWorker(self, pid, self._host_pid(pid), uid)

    def retire(self) -> None:
        """Fork no more workers; close once the live ones are stopped (now, if none is, or it cannot be asked).

        A tainted server is replaced before the next worker, but the workers it forked for other submissions
        of this process (a spare, a test's module-wide implementation) still run in its sandbox: closing it at
        once would end them in the middle of their submissions (the grader's failure, "the fork server ended").
        """
        self.retired = True
        if self.live <= 0 or self.silent or not self.alive:
            self.close()

    def _released(self) -> None:
        """One of its workers was stopped (see ``retire``)."""
        self.live -= 1
        if self.retired and self.live <= 0:
            self.close()

    def _host_pid(self, pid: int) -> int | None:
        """The host pid of the server's child ``pid`` (a pid of the server's PID namespace)."""
        if self._pid is None:
            return None
        try:
            children = Path(f"/proc/{self._pid}/task/{self._pid}/children").read_text().split()
        except OSError:
            return None
        for child in children:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{child}/status").read_text().splitlines():
                    if line.startswith("NSpid:"):
                        if line.split()[-1] == str(pid):
                            return int(child)
                        break
        return None

    def kill_user(self, uid: int) -> None:
        """Kill every process of ``uid`` in the sandbox; mark the server tainted if anything of it is left."""
        reply = self._request({"op": "kill", "uid": uid})
        if reply.get("tainted") is not False:
            self.tainted = True

    def wait(self, pid: int, timeout: float) -> int | None:
        """The exit code of the forked worker ``pid`` (negative: its signal), or None if it still runs."""
        code = self._request({"op": "wait", "pid": pid, "timeout": float(timeout)},
                             timeout=REQUEST_TIMEOUT + timeout).get("code")
        return code if isinstance(code, int) else None

    @property
    def alive(self) -> bool:
        """Whether the server runs and its folder of submissions is still there (a batch removes its own)."""
        return (self._socket is not None and self.process is not None and self.process.poll() is None
                and self.students.is_dir())

    def close(self) -> None:
        """Stop the server (its sandbox ends every process in it) and remove its folder."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, 9)
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            if process.stderr is not None:
                process.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class ForkedWorker:
    """A worker forked by a :class:`ForkServer`, with what ``proxy`` uses of a ``subprocess.Popen``."""

    args = ("worker forked by the fork server",)

    def __init__(self, server: ForkServer, pid: int, host_pid: int | None, uid: int) -> None:
        self.server = server
        self.server_pid = pid  # in the server's PID namespace
        self.pid = host_pid if host_pid is not None else -1
        self.uid = uid
        self.returncode: int | None = None
        self.server_lost = False  # the server ended under it (so did the worker): the grader's failure
        self._released = False  # stopped, and counted so by its server

    def poll(self) -> int | None:
        """The exit code if the worker ended (the server reaped it), else None."""
        return self.wait(0.0)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds for the worker to end; its exit code, or None if it still runs."""
        if self.returncode is None:
            try:
                self.returncode = self.server.wait(self.server_pid, 10.0 if timeout is None else timeout)
            except ServerError:
                self.returncode = -9  # the server (and so its sandbox and every worker in it) is gone
                self.server_lost = True
        return self.returncode

    def stop(self) -> int | None:
        """Kill the worker and everything it started (every process of its user); its exit code.

        Always, even when the worker already ended by itself: what it started (a daemon in a session of its
        own) outlives it in the server's namespaces, which the next submissions share.
        """
        try:
            self.server.kill_user(self.uid)
        except ServerError:
            self.server.tainted = True
            self.server_lost = self.server_lost or self.returncode is None
            self._release()
            return self.returncode
        code = self.wait(2.0)
        self._release()
        return code

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self.server._released()
