"""How the isolated worker is started: resource limits, user and kernel namespaces.

The best available confinement is chosen once per process:

* ``bwrap`` (bubblewrap) present and working: the worker gets its own mount,
  PID, network, IPC and UTS namespaces. Its file system holds the scratch
  folder (the student's modules, read-only), the Python installation and
  numpy (read-only), the system libraries and nothing else: not the kit, not
  ``solutions/``, not the tests, not other submissions. There is no network.
  When the grader runs as root, the worker also drops to an unprivileged user
  (nobody, 65534) before it touches student code.
* otherwise: resource limits only (and the unprivileged user when running as
  root and the Python installation is readable by that user).

Resource limits (CPU seconds, address space, file size, processes) are set in
the child before it executes anything, in every mode.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

UNPRIVILEGED_UID = 65534  # nobody
UNPRIVILEGED_GID = 65534  # nogroup
# Where the worker script and the submission's modules appear inside the bwrap sandbox: a folder of its own at
# the top, so that it can never hide a bound interpreter (a venv under /work or /kit would vanish behind it).
SANDBOX_DIR = "/.attention-kit-sandbox"
WORKER_FILE = SANDBOX_DIR + "/worker.py"
MODULES_DIR = SANDBOX_DIR + "/submission"
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")  # shared libraries the interpreter needs


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker process.

    Parameters
    ----------
    cpu_seconds : int
        CPU time of the worker over its life (RLIMIT_CPU); exceeding it kills
        the worker, and the next call starts a fresh one.
    memory_bytes : int
        Address space of the worker (RLIMIT_AS): a larger allocation raises
        MemoryError in the student's code.
    file_bytes : int
        Largest file the worker may write (RLIMIT_FSIZE).
    processes : int
        Processes and threads of the worker's user (RLIMIT_NPROC): stops fork bombs.
    call_timeout : float
        Wall-clock seconds one call may take before the worker is killed.
    output_bytes : int
        How much of the student's printed output is kept.
    """

    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 20
    processes: int = 32
    call_timeout: float = 5.0
    output_bytes: int = 65536
    # After this many timeouts of one function, or of all calls together, later calls fail at once:
    # a loop that never ends costs a student's run a bounded time, not one call_timeout per test.
    function_timeouts: int = 2
    total_timeouts: int = 6


@dataclass(frozen=True)
class Plan:
    """The chosen confinement: ``mode`` is "bwrap" or "rlimits"."""

    mode: str
    drop_to: int | None  # uid the worker switches to, if any
    description: str


def interpreter_paths() -> tuple[str, str, list[str]]:
    """The grading interpreter, numpy's site directory and the folders they need, read-only."""
    import numpy

    executable = os.path.realpath(sys.executable)
    site = str(Path(numpy.__file__).resolve().parent.parent)
    needed = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), site, os.path.dirname(executable)}
    return executable, site, sorted(needed)


def _readable_by_others(path: str) -> bool:
    """Whether a user with no relation to the owner can reach and read ``path``."""
    current = Path(path)
    for folder in [current, *current.parents]:
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def _bwrap_base(bwrap: str, as_root: bool) -> list[str]:
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if as_root:
        # No user namespace: the worker is real root with only the capabilities to drop to nobody, which it
        # does first thing (a user namespace would map its uid back to root outside).
        privileges = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        privileges = ["--unshare-user"]
    return [bwrap, *namespaces, *privileges, "--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]


def _binds(paths: list[str]) -> list[str]:
    """Read-only binds of ``paths`` (outermost first), with world-traversable parent folders."""
    arguments: list[str] = []
    made: set[str] = set()
    bound: list[str] = []
    for path in sorted(set(paths), key=len):
        if not os.path.exists(path) or any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
            bound.append(path)
            continue
        for parent in reversed(Path(path).parents):
            name = str(parent)
            if name != "/" and name not in made and not any(name.startswith(b + "/") for b in bound):
                arguments += ["--perms", "0755", "--dir", name]
                made.add(name)
        arguments += ["--ro-bind", path, path]
        bound.append(path)
    return arguments


@functools.cache
def plan() -> Plan:
    """Find the best confinement that works on this machine (probed once per process)."""
    as_root = os.geteuid() == 0
    bwrap = shutil.which("bwrap")
    if bwrap and sys.platform.startswith("linux"):
        executable, _, needed = interpreter_paths()
        probe = [*_bwrap_base(bwrap, as_root), *_binds([*SYSTEM_DIRS, *needed]), executable, "-I", "-S", "-c", ""]
        try:
            works = subprocess.run(probe, capture_output=True, timeout=20, env=worker_environment()).returncode == 0
        except (OSError, subprocess.SubprocessError):
            works = False
        if works:
            user = f" + unprivileged user ({UNPRIVILEGED_UID})" if as_root else " + user namespace"
            return Plan("bwrap", UNPRIVILEGED_UID if as_root else None,
                        f"namespaces (bwrap: mount, pid, net, ipc, uts){user} + rlimits")
    drop = None
    if as_root:
        executable, site, _ = interpreter_paths()
        if _readable_by_others(executable) and _readable_by_others(os.path.join(site, "numpy", "__init__.py")):
            drop = UNPRIVILEGED_UID
    user = f" + unprivileged user ({UNPRIVILEGED_UID})" if drop is not None else ""
    return Plan("rlimits", drop, f"rlimits only (no namespaces available){user}")


def worker_environment() -> dict[str, str]:
    """The scrubbed environment of the worker: nothing inherited but the basics."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
    }


def command(the_plan: Plan, scratch: Path, requests_fd: int, replies_fd: int) -> tuple[list[str], str]:
    """The worker's command line and working directory for ``scratch`` (holding worker.py and modules/)."""
    executable, site, needed = interpreter_paths()
    modules, worker = str(scratch / "modules"), str(scratch / "worker.py")
    prefix: list[str] = []
    cwd = modules
    if the_plan.mode == "bwrap":
        prefix = [
            *_bwrap_base(shutil.which("bwrap") or "bwrap", os.geteuid() == 0),
            *_binds([*SYSTEM_DIRS, *needed]),
            "--perms", "0755", "--dir", SANDBOX_DIR,
            "--ro-bind", worker, WORKER_FILE,
            "--ro-bind", modules, MODULES_DIR,
            "--chdir", MODULES_DIR,
        ]
        modules, worker, cwd = MODULES_DIR, WORKER_FILE, "/"
    arguments = ["--requests", str(requests_fd), "--replies", str(replies_fd), "--modules", modules, "--site", site]
    if the_plan.drop_to is not None:
        arguments += ["--uid", str(the_plan.drop_to), "--gid", str(UNPRIVILEGED_GID)]
    return [*prefix, executable, "-I", "-S", "-B", worker, *arguments], cwd


def limiter(limits: Limits) -> Callable[[], None]:
    """The ``preexec_fn`` that applies ``limits`` in the child before it executes anything."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply
