"""How the isolated worker is started: resource limits, user and kernel namespaces.

The best available confinement is chosen once per process:

* ``bwrap`` (bubblewrap) present and working: the worker gets its own mount,
  PID, network, IPC and UTS namespaces. Its file system holds the scratch
  folder (the student's modules, read-only), the Python installation and
  numpy (read-only), the system libraries and nothing else: not the kit, not
  ``solutions/``, not the tests, not other submissions. There is no network.
  When the grader runs as root, the worker also drops to an unprivileged user
  of its own (``fresh_uid``, no account needed) before it touches student code,
  and the workers of one grading process are forked by one sandbox
  (``Plan.forks``, ``server_command``; see ``grader.sandbox.server``).
* otherwise there is no isolation, and :func:`choose` refuses to run student
  code (``IsolationUnavailable``, naming what is missing and how to get it),
  unless the caller's policy says otherwise:

  - ``"container"`` (the Gradescope runner: each submission already runs alone
    in a throw-away container): the container is the isolation; as root the
    worker still runs as an unprivileged user, one of its own per worker
    (``fresh_uid``), so that all its processes can be killed by uid;
  - ``"none"`` (``attention-kit grade --accept-no-isolation``): the instructor
    accepts the risk; the plan's description starts with "NOT ISOLATED".

Resource limits (CPU seconds, address space, file size, processes) are set in
the child before it executes anything, in every mode.

``ATTENTION_KIT_SIMULATE_NO_BWRAP=1`` in the grader's environment makes the
probe report bubblewrap unusable: the seam the tests use to check the
refusal without uninstalling anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import getpass
import itertools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.call_limits import CALL_SECONDS, DIAGNOSIS_SECONDS, FUNCTION_TIMEOUTS

UNPRIVILEGED_UID = 65534  # nobody
UNPRIVILEGED_GID = 65534  # nogroup
# Where the worker script and the submission's modules appear inside the bwrap sandbox: a folder of its own at
# the top, so that it can never hide a bound interpreter (a venv under /work or /kit would vanish behind it).
SANDBOX_DIR = "/.attention-kit-sandbox"
WORKER_FILE = SANDBOX_DIR + "/worker.py"
WORKER_CODE = SANDBOX_DIR + "/worker.pyc"  # worker.py compiled by the grading process (see worker_filename)
MODULES_DIR = SANDBOX_DIR + "/submission"
PROTOCOL_FILE = SANDBOX_DIR + "/protocol.py"
# The modules worker.py imports from beside it (see worker.load_modules), each bound there when its folder holds
# it, and their __pycache__ (compiled by the grading process) if any: protocol.py is one of them.
SANDBOX_MODULES = ("protocol.py", "frames.py", "codec.py", "generators.py", "calls.py", "by_code.py", "decoded.py",
                   "forkserver.py", "stand_ins.py", "kept.py", "keyrings.py", "cell_lines.py")
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")  # shared libraries the interpreter needs
SIMULATE_NO_BWRAP = "ATTENTION_KIT_SIMULATE_NO_BWRAP"
NO_FORK_SERVER = "ATTENTION_KIT_NO_FORK_SERVER"
FORKED = "; the workers forked by one such sandbox per grading process"
STUDENTS_DIR = SANDBOX_DIR + "/students"  # the fork server's folder of submissions (one folder each)
POLICIES = ("require", "container", "none")
# Without a PID namespace, each worker runs as a user of its own, from this range (no account needed):
# killing "every process of that user" then ends everything the submission started, and RLIMIT_NPROC
# counts that submission's processes only.
UID_BASE = 1_500_000_000
_UIDS = itertools.count()
_HELD: set[int] = set()  # the ids that live workers of this process hold (fresh_uid)


class IsolationUnavailable(RuntimeError):
    """No way to confine student code here, and the policy does not accept running it unconfined."""


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
        CPU seconds one call may use before the worker is killed (``grader.sandbox.budget``: the grader waits
        longer in wall time, on a busy machine).
    output_bytes : int
        How much of the student's printed output is kept.
    """

    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 20
    processes: int = 32
    call_timeout: float = CALL_SECONDS  # (grader.call_limits: a student's own run stops calls there too)
    # Open files of each worker process (RLIMIT_NOFILE): bounds how many memfd or shared-memory files it can hold.
    open_files: int = 256
    output_bytes: int = 65536
    # The time budget of each exercise of a submission (CPU seconds of its student code, what that asks of the
    # reference included; past it that exercise's remaining tests fail at once).
    student_seconds: float = 60.0
    # The time budget of the kit's diagnosis of a submission (its probes of every function, run once at the first
    # failing test, ``tests.diagnosis.observe_everything``): its own, charged to no exercise, so the feedback never
    # uses up a test's time; past it the diagnosis names nothing (the reference's probes cost about 0.3 s).
    diagnosis_seconds: float = DIAGNOSIS_SECONDS  # as in a student's run (grader.call_limits)
    # The channel (``grader.sandbox.channel_use``): what a test may send is ``channel_factor`` times what the
    # reference sends in that test, at least ``test_bytes`` bytes and ``test_messages`` messages (a reply per call,
    # a request per callback); what a submission may send, ``channel_factor`` times the reference's total, at least
    # ``student_reply_bytes``. ``reply_bytes`` bounds one frame (what the grading process holds at once), and
    # ``unknown_bytes`` a submission while the reference's use is not known yet (its kit's first check runs beside
    # it; the batch judges its tests when the check ends).
    channel_factor: float = 100.0
    test_bytes: int = 16 << 20
    test_messages: int = 5000
    reply_bytes: int = 64 << 20
    reply_header_bytes: int = 4 << 20  # the JSON header of one frame (honest ones are a few kilobytes)
    student_reply_bytes: int = 512 << 20
    unknown_bytes: int = 8 << 30
    # After this many timeouts of one function, or of all calls together, later calls fail at once:
    # a loop that never ends costs a student's run a bounded time, not one call_timeout per test.
    function_timeouts: int = FUNCTION_TIMEOUTS  # (grader.call_limits)
    total_timeouts: int = 6
    # After this many ended workers (crashes, exits, oversized replies) while one exercise is graded, that
    # exercise's later calls fail at once: each one costs a fresh worker's start-up, which is not the student's
    # time. Counted per exercise, as timeouts are: a flood in attention costs no test of layer.
    total_crashes: int = 12

    def longest_test(self) -> float:
        """The most CPU (or sleep) seconds of student code one test may cost (its exercise's budget, the diagnosis's).

        The diagnosis may run at the test's failure. A batch waits longer than that for a test: its stall limit
        (``attention-kit grade --timeout``) is raised to twice this plus a minute where it was set lower.
        """
        return self.student_seconds + self.diagnosis_seconds

    def describe(self) -> str:
        """The limits in one line, for the terminal next to the isolation."""
        return (f"{self.call_timeout:g} CPU s per call, {self.student_seconds:g} CPU s per exercise, "
                f"{self.diagnosis_seconds:g} s for the diagnosis, {self.memory_bytes >> 20} MiB memory, "
                f"{self.cpu_seconds} CPU s per worker, "
                f"{self.processes} processes, {self.open_files} open files, "
                f"replies up to {self.reply_bytes >> 20} MiB; "
                f"the channel {self.channel_factor:g}x the reference's use, per test (at least "
                f"{self.test_bytes >> 20} MiB, {self.test_messages} messages) and per file of tests (at least "
                f"{self.student_reply_bytes >> 20} MiB)")


def course_limits(budget: float, call_budget: float, memory_mib: int, cpu_seconds: float | None = None) -> Limits:
    """A course's limits: CPU seconds per exercise (of a submission) and per call, MiB of memory per worker.

    The one place the settings an instructor may change (``attention-kit grade --budget/--call-budget/--memory``,
    and a course folder's ``[limits]``, whose ``cpu_seconds`` is ``cpu_seconds`` here) become limits.
    """
    for name, value, least in (("budget", budget, 0.0), ("call budget", call_budget, 0.0),
                               ("memory", memory_mib, 63)):
        if not value > least:
            raise ValueError(f"the {name} must be above {least:g}, not {value!r}")
    limits = Limits(student_seconds=float(budget), call_timeout=float(call_budget), memory_bytes=int(memory_mib) << 20)
    return limits if not cpu_seconds else dataclasses.replace(limits, cpu_seconds=max(1, round(cpu_seconds)))


@dataclass(frozen=True)
class Plan:
    """The chosen confinement: ``mode`` is "bwrap", "rlimits" or "container"."""

    mode: str
    drop_to: int | None  # uid the worker switches to, if any
    description: str
    isolated: bool = True
    missing: str = ""  # why there are no namespaces, if there are none

    @property
    def forks(self) -> bool:
        """Whether workers are forked by a fork server (see ``forkserver.serve``) instead of started one by one.

        Only where each worker also gets a user of its own (bwrap, as root): the users keep the workers of one
        server apart, as their own sandboxes would. ``ATTENTION_KIT_NO_FORK_SERVER=1`` starts them one by one.
        """
        return self.mode == "bwrap" and self.drop_to is not None and os.environ.get(NO_FORK_SERVER) != "1"

    @property
    def summary(self) -> str:
        """``description``, whether the workers are forked, and the kernel's memory limits (what the grader prints)."""
        return f"{self.description}{FORKED if self.forks else ''}{kernel_limits(self)}"


def kernel_limits(the_plan: Plan) -> str:
    """What bounds a worker's memory outside its address space, in force or missing (for the isolation line).

    A memory control group per worker (``grader.sandbox.cgroup``) bounds anonymous memory, memfd and tmpfs files,
    System V and POSIX shared memory and children together; an IPC namespace per sandbox keeps System V objects
    apart (its ``kernel.shm*`` limits stay the kernel's: the sandbox holds no privilege to lower them, and the
    memory group bounds what they hold); the open-file limit bounds how many such files a process holds.
    """
    from grader.sandbox import cgroup

    ipc = "an IPC namespace per sandbox" if the_plan.mode == "bwrap" else "NO IPC namespace"
    tmpfs = ", size-capped read-only tmpfs" if the_plan.mode == "bwrap" and _tmpfs_size() else ""
    return f"; memory: {cgroup.available().describe()}, {ipc}, an open-file limit{tmpfs}"


def interpreter_paths() -> tuple[str, str, list[str]]:
    """The grading interpreter, numpy's site directory and the folders they need, read-only."""
    import numpy

    executable = os.path.realpath(sys.executable)
    site = str(Path(numpy.__file__).resolve().parent.parent)
    needed = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), site, os.path.dirname(executable)}
    return executable, site, sorted(needed)


def numpy_paths() -> list[str]:
    """The folders of numpy itself: the package and its bundled shared libraries (``numpy.libs`` of a wheel)."""
    import numpy

    package = Path(numpy.__file__).resolve().parent
    return [str(path) for path in (package, package.parent / "numpy.libs") if path.is_dir()]


def hidden_paths() -> list[str]:
    """Folders the worker must never see although a bound folder holds them.

    Every site-packages and dist-packages (the kit itself, with solutions and hidden tests, may be
    installed there: ``grader/_kit``), every entry of the grading process's ``sys.path`` beyond the
    standard library, and the kit.

    The sandbox covers each with an empty file system and shows numpy's own folders again (``numpy_paths``).
    """
    import site
    import sysconfig

    import grader
    from grader.curriculum import ROOT

    keep = {os.path.realpath(p) for p in (sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"))}
    keep |= {os.path.join(p, "lib-dynload") for p in keep}
    candidates: set[str] = set()
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/usr/local"}
    for prefix in prefixes:
        for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages", "lib*/python3/dist-packages"):
            candidates.update(str(p) for p in Path(prefix).glob(pattern))
    with contextlib.suppress(Exception):
        candidates.update(site.getsitepackages())
    with contextlib.suppress(Exception):
        candidates.add(site.getusersitepackages())
    candidates.update(p for p in sys.path if p and os.path.isdir(p))
    candidates.add(os.path.dirname(numpy_paths()[0]))
    candidates.update({str(ROOT), str(Path(grader.__file__).parent)})
    hidden = {os.path.realpath(p) for p in candidates if os.path.isdir(p)} - keep
    return sorted(hidden, key=len)


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


# The size of each tmpfs that covers a hidden folder (read-only for the worker in any case): a few pages.
HIDING_TMPFS_BYTES = 64 << 10


@functools.cache
def _tmpfs_size() -> list[str]:
    """``--size`` for the next ``--tmpfs``, where this bubblewrap knows it (0.7 and later); else nothing."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return []
    try:
        said = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return ["--size", str(HIDING_TMPFS_BYTES)] if "--size" in said.stdout + said.stderr else []


def _hide(hidden: list[str], bound: list[str]) -> list[str]:
    """Cover each of ``hidden`` that a bind of ``bound`` shows with an empty tmpfs; then bind numpy again.

    Only numpy's own folders come back (read-only), nothing else of any site-packages.
    """
    roots = [os.path.realpath(b) for b in bound if os.path.exists(b)] + [b for b in bound if os.path.exists(b)]
    arguments: list[str] = []
    covered: list[str] = []
    for path in hidden:  # outermost first; one inside a covered folder is hidden already
        if any(path == c or path.startswith(c.rstrip("/") + "/") for c in covered):
            continue
        if any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            arguments += ["--perms", "0555", *_tmpfs_size(), "--tmpfs", path]
            covered.append(path)
    for path in numpy_paths():
        arguments += ["--ro-bind", path, path]
    return arguments


@functools.cache
def plan() -> Plan:
    """Find the best confinement that works on this machine (probed once per process)."""
    as_root = os.geteuid() == 0
    bwrap = None if os.environ.get(SIMULATE_NO_BWRAP) else shutil.which("bwrap")
    if not sys.platform.startswith("linux"):
        missing = f"kernel namespaces are Linux only (this is {sys.platform})"
    elif bwrap is None:
        missing = "bubblewrap (bwrap) is not installed" + (" (simulated)" if os.environ.get(SIMULATE_NO_BWRAP) else "")
    else:
        executable, _, needed = interpreter_paths()
        probe = [*_bwrap_base(bwrap, as_root), *_binds([*SYSTEM_DIRS, *needed]), executable, "-I", "-S", "-c", ""]
        try:
            done = subprocess.run(probe, capture_output=True, timeout=20, env=worker_environment())
            works, said = done.returncode == 0, done.stderr.decode(errors="replace").strip().splitlines()
        except (OSError, subprocess.SubprocessError) as error:
            works, said = False, [str(error)]
        if works:
            user = " + an unprivileged user per worker" if as_root else " + user namespace"
            return Plan("bwrap", UNPRIVILEGED_UID if as_root else None,
                        f"namespaces (bwrap: mount, pid, net, ipc, uts){user} + rlimits")
        missing = ("bubblewrap is installed but cannot create namespaces here (user namespaces disabled, or a "
                   f"container without the privilege): {(said or ['no message'])[-1][:200]}")
    drop = None
    if as_root:
        executable, site, _ = interpreter_paths()
        if _readable_by_others(executable) and _readable_by_others(os.path.join(site, "numpy", "__init__.py")):
            drop = UNPRIVILEGED_UID
    user = " + an unprivileged user per worker" if drop is not None else ""
    return Plan("rlimits", drop, f"rlimits only (no namespaces available){user}", isolated=False, missing=missing)


def refusal(missing: str) -> str:
    """Why the grader will not run student code here, and what to do about it."""
    return (f"student code cannot be isolated on this machine: {missing}. Install bubblewrap "
            "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) on Linux with user "
            "namespaces enabled, or grade on Gradescope (attention-kit gradescope), where each submission runs "
            "in a container of its own. To grade here anyway, with student code able to read and write what "
            f"{'root' if os.geteuid() == 0 else 'you'} can, pass --accept-no-isolation.")


@functools.cache
def choose(policy: str = "require") -> Plan:
    """The plan to grade with under ``policy`` ("require", "container" or "none"); see the module docstring.

    Raises
    ------
    IsolationUnavailable
        If there are no namespaces and ``policy`` does not accept that.
    """
    if policy not in POLICIES:
        raise ValueError(f"isolation policy {policy!r}: expected one of {', '.join(POLICIES)}")
    found = plan()
    if found.mode == "bwrap":
        return found
    as_root = os.geteuid() == 0
    if policy == "container":
        if as_root and found.drop_to is None:
            executable, _, _ = interpreter_paths()
            raise IsolationUnavailable(
                f"{found.missing}, and the Python installation ({executable}) cannot be read by an unprivileged "
                "user, so student code would run as root: install the kit's environment where every user can "
                "read it (e.g. /opt or /autograder, not /root)")
        user = "an unprivileged user per worker" if as_root else f"the container's user ({getpass.getuser()})"
        return Plan("container", found.drop_to,
                    f"the container (one submission per container; no namespaces: {found.missing}) + {user} "
                    "+ rlimits", missing=found.missing)
    if policy == "none":
        if as_root and found.drop_to is not None:
            user = "an unprivileged user per worker"
        else:
            user = "root" if as_root else f"your own user ({getpass.getuser()})"
        return Plan("rlimits", found.drop_to,
                    f"NOT ISOLATED ({found.missing}; accepted with --accept-no-isolation): rlimits only, "
                    f"student code runs as {user}", isolated=False, missing=found.missing)
    raise IsolationUnavailable(refusal(found.missing))


def fresh_uid() -> int:
    """A user id of its own for one worker (see ``UID_BASE``): unique among the live workers of this machine.

    This process's 64 come round, but never to one a live worker holds (:func:`release_uid` gives it back): a
    submission that ended its worker 65 times got the reference's worker's user, and read its modules.
    """
    for _ in range(64):
        uid = UID_BASE + (os.getpid() % (1 << 22)) * 64 + next(_UIDS) % 64
        if uid not in _HELD:
            _HELD.add(uid)
            return uid
    raise RuntimeError("all 64 user ids of this grading process are held by live workers")


def release_uid(uid: int | None) -> None:
    """Give back a worker's user id once every process of it is gone (its worker stopped)."""
    _HELD.discard(uid)


def kill_user(uid: int) -> None:
    """Kill every process of ``uid`` (see ``forkserver.kill_all_of``: its processes cannot stop the killer).

    The killer's real and saved uid are a user of its own, below the workers' range, one per grading process.
    """
    from grader.sandbox import forkserver

    helper = UID_BASE - 1 - os.getpid() % (1 << 22)
    for _ in range(3):
        try:
            forkserver.kill_all_of(uid, helper, UNPRIVILEGED_GID)
        except OSError:
            return
        if not any(_owner(pid) == uid and not _ended(pid) for pid in _pids()):
            return


def _ended(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _pids() -> list[str]:
    try:
        return [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


# The machine's choice of numerical kernels (OPENBLAS_CORETYPE pinned by its environment: without it the scrubbed
# worker's matrix products differed from the grading process's in the last bit); never what the worker may reach.
KERNEL_SELECTORS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                    "MKL_DEBUG_CPU_TYPE", "NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES")


def worker_environment() -> dict[str, str]:
    """The scrubbed environment of the worker: nothing inherited but the basics and the machine's kernel choice."""
    threads = dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"), "1")
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **threads} | {
        name: os.environ[name] for name in KERNEL_SELECTORS if name in os.environ}


def worker_filename(the_plan: Plan) -> str:
    """The file name that the worker's compiled code gives its frames (in tracebacks).

    Where the worker sees ``worker.py`` in the sandbox; elsewhere just ``worker.py`` (one name for every
    worker, so that the code is compiled once per grading process, and no path of the grading machine in a
    student's output).
    """
    return WORKER_FILE if the_plan.mode == "bwrap" else "worker.py"


def command(the_plan: Plan, scratch: Path, requests_fd: int, replies_fd: int,
            uid: int | None = None) -> tuple[list[str], str]:
    """The worker's command line and working directory for ``scratch`` (holding worker.py and modules/).

    ``uid``: the user the worker drops to, instead of the plan's (see ``fresh_uid``). When ``scratch`` also
    holds ``worker.pyc`` (worker.py compiled by the grading process, whose interpreter the worker runs), the
    worker runs that and does not compile its own source again at every start.
    """
    executable, site, needed = interpreter_paths()
    modules, worker = str(scratch / "modules"), str(scratch / "worker.py")
    compiled = scratch / "worker.pyc"
    if compiled.is_file():
        worker = str(compiled)
    prefix: list[str] = []
    cwd = modules
    if the_plan.mode == "bwrap":
        prefix = [
            *_bwrap_base(shutil.which("bwrap") or "bwrap", os.geteuid() == 0),
            *_binds([*SYSTEM_DIRS, *needed]),
            *_hide(hidden_paths(), [*SYSTEM_DIRS, *needed]),
            "--perms", "0755", "--dir", SANDBOX_DIR,
            "--ro-bind", str(scratch / "worker.py"), WORKER_FILE,
            *(["--ro-bind", str(compiled), WORKER_CODE] if compiled.is_file() else []),
            *_module_binds(scratch),
            "--ro-bind", modules, MODULES_DIR,
            "--chdir", MODULES_DIR,
        ]
        modules, worker, cwd = MODULES_DIR, WORKER_CODE if compiled.is_file() else WORKER_FILE, "/"
    arguments = ["--requests", str(requests_fd), "--replies", str(replies_fd), "--modules", modules, "--site", site]
    if the_plan.drop_to is not None:
        arguments += ["--uid", str(uid if uid is not None else the_plan.drop_to), "--gid", str(UNPRIVILEGED_GID)]
    # -u: what student code prints reaches "Output of your code" even when the worker is killed mid-call.
    return [*prefix, executable, "-I", "-S", "-B", "-u", worker, *arguments], cwd


@contextlib.contextmanager
def options_in_a_file(cmd: list[str]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """``cmd`` with bubblewrap's own options read from a file (``--args FD``), and the fds to pass to it.

    Inside the sandbox, process 1 is bubblewrap: its command line (``/proc/1/cmdline``) would otherwise show
    every bind and every hidden folder of the grading machine (where the kit, the reference and the hidden tests
    are) to student code. A command that is not bubblewrap's is given back as it is. The file is closed on exit.
    """
    executable = interpreter_paths()[0]
    start = next((i for i in range(1, len(cmd)) if cmd[i] == executable and cmd[i + 1:i + 3] == ["-I", "-S"]), None)
    if not cmd or os.path.basename(cmd[0]) != "bwrap" or start is None or not hasattr(os, "memfd_create"):
        yield cmd, ()
        return
    fd = os.memfd_create("bwrap-options", 0)  # not inherited unless passed
    try:
        os.write(fd, b"".join(os.fsencode(option) + b"\0" for option in cmd[1:start]))
        os.lseek(fd, 0, os.SEEK_SET)
        yield [cmd[0], "--args", str(fd), *cmd[start:]], (fd,)
    finally:
        os.close(fd)


def _module_binds(folder: Path) -> list[str]:
    """Bwrap's binds of what lies beside worker.py in ``folder``: ``SANDBOX_MODULES``, ``__pycache__``, ``given/``.

    ``given/`` holds the given implementations that fair grading runs (``grader.sandbox.worker``).
    """
    binds = []
    for name in (*SANDBOX_MODULES, "__pycache__", "given"):
        if (folder / name).exists():
            binds += ["--ro-bind", str(folder / name), f"{SANDBOX_DIR}/{name}"]
    return binds


def server_command(the_plan: Plan, folder: Path, control_fd: int) -> list[str]:
    """The fork server's command line: ``folder`` holds worker.py (and .pyc), the modules beside it and ``students/``.

    The sandbox is a worker's (``command``), except that it shows ``students/`` (the submissions' folders,
    each readable by its own worker's user only) where a worker's shows its one submission.
    """
    if not the_plan.forks:
        raise ValueError(f"plan {the_plan.mode!r}: no fork server without bwrap and a user per worker")
    executable, site, needed = interpreter_paths()
    compiled = folder / "worker.pyc"
    prefix = [
        *_bwrap_base(shutil.which("bwrap") or "bwrap", os.geteuid() == 0),
        *_binds([*SYSTEM_DIRS, *needed]),
        *_hide(hidden_paths(), [*SYSTEM_DIRS, *needed]),
        "--perms", "0755", "--dir", SANDBOX_DIR,
        "--ro-bind", str(folder / "worker.py"), WORKER_FILE,
        *(["--ro-bind", str(compiled), WORKER_CODE] if compiled.is_file() else []),
        *_module_binds(folder),
        "--ro-bind", str(folder / "students"), STUDENTS_DIR,
        "--chdir", "/",
    ]
    worker = WORKER_CODE if compiled.is_file() else WORKER_FILE
    return [*prefix, executable, "-I", "-S", "-B", "-u", worker,
            "--serve", str(control_fd), "--students", STUDENTS_DIR, "--site", site]


def limit_values(limits: Limits) -> list[int]:
    """``limits`` as a fork server applies them: CPU seconds, address space, file size, processes, open files."""
    return [limits.cpu_seconds, limits.memory_bytes, limits.file_bytes, limits.processes, limits.open_files]


def limiter(limits: Limits, niceness: int = 0) -> Callable[[], None]:
    """The ``preexec_fn`` that applies ``limits`` (and ``niceness``) in the child before it executes anything.

    The limits are applied by ``forkserver.apply_limits``, as in a forked worker: one applier for both.
    """
    from grader.sandbox.forkserver import apply_limits

    values = limit_values(limits)

    def apply() -> None:
        apply_limits(values, niceness)

    return apply
