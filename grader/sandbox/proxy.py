"""Grade a submission through an isolated worker process (the grading side).

``IsolatedImplementation`` provides the same ``function(exercise, name)`` as
``tests.kit.LocalImplementation``, so the graded suite runs unchanged, but the
student's code never runs in the grading process. It runs in
``grader/sandbox/worker.py``, a separate, resource-limited process confined as well as
this machine allows (``grader.sandbox.limits``), started once per submission and
reused for every call. Arguments and results cross two dedicated pipes as
plain data (a JSON header + the arrays' raw bytes of allowed numeric dtypes,
never pickle); exceptions come back as text and are raised here again as the
same builtin type; in-place changes to array arguments and the state of
random generators are copied back after each call (the worker sends back
only the arguments a call changed).

Fair grading (the default): a test of exercise E runs the student's module E,
while the modules E imports (the manifest's ``depends``) are answered by the
reference implementation, here in the grading process, so a bug in the
student's softmax does not cost points in attention.

Example
-------
>>> with IsolatedImplementation(Path("submissions/ada")) as impl:  # doctest: +SKIP
...     softmax = impl.function("softmax", "softmax")
...     softmax(np.zeros((2, 3)))
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import inspect
import math
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.sandbox import limits as confine
from grader.sandbox import load, protocol, server, worker
from grader.sandbox.limits import Limits
from tests.kit import ImplementationError, LocalImplementation

__all__ = ["IsolatedImplementation", "Limits", "SandboxError", "WorkerCrashed"]

worker.load_numpy()
WORKER_SOURCE = Path(worker.__file__)
PROTOCOL_SOURCE = Path(protocol.__file__)
# The largest JSON header the grading side parses from a worker (honest ones are a few kilobytes).
MAX_REPLY_HEADER = 4 << 20
STARTUP_TIMEOUT = 30.0  # generous: a loaded CI machine may take a while to start Python + numpy
MAX_MODULE_BYTES = 1 << 20
# The protocol pipes' capacity (the kernel's default is 64 KiB): a large frame (a training batch and its
# gradients, up to a few MiB) then crosses in a few writes and reads instead of one wake-up per 64 KiB on both
# sides. Kept small enough that a machine grading many submissions at once stays well within the kernel's
# per-user allowance of pipe memory (fs.pipe-user-pages-soft); where the kernel refuses, the default stays.
PIPE_BYTES = 256 << 10
FAIR_VIEW_ALL = protocol.VIEW_ALL
# A call's wall-clock limit is moved on by the time the worker and the grading process waited for a CPU (a machine
# busier than its cores: ``grader.sandbox.load``), up to this many times the limit itself over a whole submission,
# and only until its first timeout (a submission that loops gets no more: its calls end as they always did).
LOAD_ALLOWANCE = 2.0
# A call shorter than this is charged in full to the budget (reading the CPU waits costs more than it could forgive).
LOAD_CHECK_AFTER = 0.2
# A call still running after this many seconds makes its submission a slow one (the suite's longest honest call
# takes a tenth of a second): ``on_slow`` is called once per submission, and the batch then stops counting that
# grading process as one of its ``--jobs`` (``grader.grading.grade.run_jobs``), instead of after 4 s of grading.
SLOW_CALL = 1.5
on_slow: Callable[[], None] | None = None
CALLBACK_START = b'{"h":{"op":"callback",'  # how the worker's callback frames begin (see Worker.forwarder)


# Fair grading's callbacks, answered before: (reference folder, the callback's frame) -> the answer's frame.
# The reference is a pure function of its arguments (random generators travel with their state), and the
# graded tests use seeded inputs, so students whose code gets as far as the same callback ask the very same
# question; the answer is sent again without decoding, running the reference or encoding. Per process.
_ANSWERS: dict[tuple[str, str, bytes], bytes] = {}
# The spare worker of this process (see IsolatedImplementation.warm): (its options, the implementation).
_SPARES: list[tuple[str, Any]] = []
_ANSWERS_MAX_BYTES = 32 << 20
# A folder of the batch (``grade_batch`` makes it and removes it at the end, even when a grading process
# was killed and could not remove its workers' scratch folders): the workers' scratch folders go inside.
SCRATCH_ENV = "ATTENTION_KIT_SCRATCH"


def _scratch_parent() -> str | None:
    parent = os.environ.get(SCRATCH_ENV)
    return parent if parent and os.path.isdir(parent) else None
_answers_bytes = 0


def _remember_answer(key: tuple[str, bytes], answer: bytes) -> None:
    global _answers_bytes
    size = len(key[-1]) + len(answer)
    if size > _ANSWERS_MAX_BYTES // 8:  # a large answer is rarely asked again: never let it fill the cache
        return
    if _answers_bytes + size > _ANSWERS_MAX_BYTES:
        _ANSWERS.clear()  # simpler than LRU, and a class rarely fills it: most questions recur
        _answers_bytes = 0
    _ANSWERS[key] = answer
    _answers_bytes += size


atexit.register(lambda: IsolatedImplementation.close_spares())

_SERVER: list[server.ForkServer] = []  # this process's fork server, if its plan forks (see grader.sandbox.server)


def _fork_server(plan: confine.Plan) -> server.ForkServer:
    """The fork server of this process, started (or replaced, if it died or something of a worker outlived it)."""
    if _SERVER and (_SERVER[0].tainted or not _SERVER[0].alive):
        _SERVER.pop().close()
    if not _SERVER:
        files = server.worker_files(WORKER_SOURCE, PROTOCOL_SOURCE, _compiled_worker(confine.worker_filename(plan)))
        _SERVER.append(server.ForkServer(plan, _scratch_parent(), files))
    return _SERVER[0]


def _close_server() -> None:
    IsolatedImplementation.close_spares()  # first: a spare may be a worker of the server
    while _SERVER:
        with contextlib.suppress(Exception):
            _SERVER.pop().close()


atexit.register(_close_server)

_COMPILED: dict[str, bytes | None] = {}


def _compiled_worker(filename: str) -> bytes | None:
    """worker.py as a .pyc for this interpreter (the worker's), its code naming ``filename``; once per process.

    Compiling the ~1000 lines at every worker start cost each submission ~10 ms of CPU. The worker runs the
    same interpreter (``limits.interpreter_paths``), so the magic number matches; None (run the source) if
    compiling fails here for any reason.
    """
    if filename not in _COMPILED:
        try:
            import importlib.util
            import marshal

            code = compile(WORKER_SOURCE.read_bytes(), filename, "exec", dont_inherit=True, optimize=0)
            # A .pyc header: the magic number, flags 0 (timestamp-based), source mtime and size (not checked when
            # a .pyc is run as the main script), then the marshalled code object.
            _COMPILED[filename] = importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code)
        except Exception:  # noqa: BLE001 - the source itself always works
            _COMPILED[filename] = None
    return _COMPILED[filename]


def _estimated_bytes(value: Any) -> int:
    """A generous estimate of what a reference function may allocate for these arguments (float64 bytes).

    Integers (sizes: ``init_weight(rng, n, m)``, ``causal_mask(n)``) give their product, or the largest one
    squared (a mask is n x n); arrays give their size, and their rows times the most positions of any of them (scores
    are positions x positions). Small for every honest call, far over the limit for a 9000 x 9000 request.
    """
    sizes: list[int] = []
    rows: list[int] = []
    positions: list[int] = []
    stack, seen = [value], 0
    while stack and seen < 10_000:
        item = stack.pop()
        seen += 1
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            if item > 1:
                sizes.append(item)
        elif isinstance(item, np.ndarray):
            rows.append(item.size // max(item.shape[-1], 1) if item.ndim else 1)
            positions.append(item.shape[-2] if item.ndim >= 2 else 1)
            positions.append(item.size)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    elements = 0
    if sizes:
        elements = max(sizes) ** 2  # an n x n mask from one size
        product = 1
        for size in sizes:
            product = min(product * size, 1 << 62)
        elements = max(elements, product)
    if rows:
        elements = max(elements, max(rows) * max(positions[0::2]), max(positions[1::2]))
    return elements * 8


class WorkerCrashed(RuntimeError):
    """The worker process ended (or misbehaved) while running student code."""


class SandboxError(RuntimeError):
    """The grader itself failed (the worker could not start, ...): never the student's fault.

    Every such failure is also listed in ``IsolatedImplementation.internal``,
    so the grader reports the tests it hit as not graded, whatever the test
    did with the exception.
    """


class _Timeout(Exception):
    pass


class _Ended(Exception):
    pass


class _TooLarge(Exception):
    pass


class BudgetExhausted(TimeoutError):
    """The submission has used up its time budget: the remaining calls are not run."""


def _describe_exit(code: int | None, mode: str) -> str:
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


class IsolatedImplementation:
    """A submission folder whose functions run in an isolated worker process.

    Parameters
    ----------
    path : pathlib.Path
        The submission folder (the seven modules of the manifest).
    fair : bool, optional
        Serve each exercise's dependencies from ``reference`` (default True).
    limits : Limits, optional
        Resource limits of the worker (default ``Limits()``).
    reference : pathlib.Path, optional
        The reference implementation used for fair grading.

    Notes
    -----
    Only the manifest's modules (``<exercise>.py``) and private helper modules
    (``_name.py``, as ``solutions/_checks.py``) are copied into the worker's
    scratch folder; never a conftest.py, a package ``__init__`` or anything
    else. Symbolic links are not followed.
    """

    def __init__(self, path: Path | str, *, fair: bool = True, limits: Limits | None = None,
                 reference: Path | str = ROOT / "solutions", policy: str = "require") -> None:
        self.path = Path(path).resolve()
        if not self.path.is_dir():
            raise ImplementationError(f"--impl {path}: no such folder")
        self.fair = fair
        self.limits = limits or Limits()
        self.reference = Path(reference).resolve()
        self.curriculum = load_curriculum()
        self.plan = confine.choose(policy)  # IsolationUnavailable: no student code without isolation
        self.restarts = 0
        # What the grader reports about this submission besides its test outcomes.
        self.internal: list[str] = []  # the grader's own failures (the affected tests are not graded)
        self.refused: list[str] = []  # the distinct callbacks the channel refused (at most 20; see refusals)
        self.refusals = 0
        self.stats = {"requests": 0, "timed_out": 0, "crashed": 0, "skipped": 0}
        self.slow = False  # a call of this submission ran past SLOW_CALL
        self.spent = 0.0  # seconds of student code so far (the reference's time not counted)
        self.reference_spent = 0.0  # seconds of the reference's time for this submission's callbacks
        self.call_seconds = 0.0  # wall seconds of all exchanges with the worker (start-up waits excluded)
        self.received = 0  # bytes the worker sent so far
        self._uid: int | None = None
        self._init_data: dict[str, dict[str, list[str]]] = {"functions": {}, "dependencies": {}}
        self._allowed: dict[str, frozenset[tuple[str, str]]] = {}
        self._timeouts: dict[str, int] = {}  # timeouts so far, per called function
        self.startup_seconds: list[float] = []
        self._output = bytearray()
        self._dropped = 0
        self._process: subprocess.Popen | None = None
        self._fds: dict[str, int] = {}
        self._pollers: dict[bool, Any] = {}
        self._load: load.LoadClock | None = None  # the CPU waits of the current worker and of this process
        self._worker_pid: int | None = None  # the host pid of the current worker's own process
        self._forgiven = 0.0  # seconds of the current call's CPU waits added to its deadline
        self._slow_at = math.inf  # when the current call makes this submission a slow one (see SLOW_CALL)
        self.forgiven = 0.0  # seconds of CPU waits forgiven to this submission so far (see LOAD_ALLOWANCE)
        self._buffer = bytearray()
        self._failures: dict[tuple[str, str], str] = {}
        self._callables: dict[tuple[str, str], set[str]] = {}
        self._functions: dict[tuple[str, str], Callable[..., Any]] = {}
        self._reference_impl: LocalImplementation | None = None
        self._grading_functions: list[Callable[..., Any]] = []  # the functions among the current call's arguments
        self._server: server.ForkServer | None = None
        if self.plan.forks:
            try:
                self._server = _fork_server(self.plan)
            except server.ServerError as error:
                raise self._internal(f"the worker process could not be started ({error})") from None
        self._scratch = self._new_scratch()
        # What the garbage collector must clean up if close() is never called (kept current by _spawn/_stop).
        self._live: dict[str, Any] = {"process": None, "fds": {}, "scratch": self._scratch}
        weakref.finalize(self, IsolatedImplementation._cleanup, self._live)
        self._missing = self._prepare_scratch()
        self._adopted = False
        self._handshake_pending = False
        self._spawned_at = 0.0
        self._spawn()  # start-up overlaps the grading process's own (collecting tests, importing the reference)

    # ------------------------------------------------------------------ a warm worker

    @classmethod
    def warm(cls, path: Path | str, **options: Any) -> IsolatedImplementation:
        """An implementation of ``path`` whose worker is already up, if one was kept (see ``keep_spare``).

        A spare is a worker started for no one: it has imported numpy and
        answered its init message, and has never seen a student's module (it
        imports lazily). Adopting it copies ``path``'s modules into its own
        scratch folder (which its sandbox shows live), so the student's first
        call does not wait for a start-up. Otherwise a fresh one is started.
        """
        key = repr(sorted(options.items()))
        while _SPARES:
            spare_key, spare = _SPARES.pop()
            alive = spare._process is not None and spare._process.poll() is None and spare._scratch.is_dir()
            if spare_key == key and alive and not spare._adopted:
                spare._adopt(Path(path))
                return spare
            spare.close()
        return cls(path, **options)

    @staticmethod
    def close_spares() -> None:
        """Stop the spare worker of this process, if any (and remove its scratch folder)."""
        while _SPARES:
            with contextlib.suppress(Exception):
                _SPARES.pop()[1].close()

    @classmethod
    def keep_spare(cls, **options: Any) -> None:
        """Start a worker now for the next ``warm`` call with the same ``options`` (one spare per process).

        Where workers are forked (``Plan.forks``), a fork takes milliseconds: only the fork server is started
        (if it is not running), and no spare is kept.
        """
        while _SPARES:
            _SPARES.pop()[1].close()
        the_plan = confine.choose(options.get("policy", "require"))
        if the_plan.forks:
            _fork_server(the_plan)
            return
        empty = Path(tempfile.mkdtemp(prefix="attention-kit-spare-", dir=_scratch_parent()))
        try:
            spare = cls(empty, **options)
        finally:
            shutil.rmtree(empty, ignore_errors=True)
        _SPARES.append((repr(sorted(options.items())), spare))

    def _adopt(self, path: Path) -> None:
        self.path = path.resolve()
        if not self.path.is_dir():
            self.close()
            raise ImplementationError(f"--impl {path}: no such folder")
        self._adopted = True
        self._missing = self._copy_modules()

    # ------------------------------------------------------------------ public API

    @property
    def isolation(self) -> str:
        """How the worker is confined, e.g. ``"namespaces (bwrap: ...) + an unprivileged user per worker"``."""
        return self.plan.description + (confine.FORKED if self._server is not None else "")

    @property
    def output(self) -> str:
        """What the student's code printed so far (stdout and stderr), truncated to ``limits.output_bytes``."""
        self._drain_output(0.0)
        text = self._output.decode("utf-8", errors="replace")
        if self._dropped:
            text += f"\n[... {self._dropped} more bytes of output not kept]"
        return text

    def function(self, exercise: str, name: str) -> Callable[..., Any]:
        """Return a callable that runs the student's ``name`` in the worker.

        Raises
        ------
        tests.kit.ImplementationError
            If the module defining ``name`` is missing or cannot be imported,
            or does not define ``name``.
        """
        try:
            module = self.curriculum.exercise_of_function(name).name
        except ValueError as error:
            raise ImplementationError(str(error)) from None
        # Fair: the module that defines the function is the student's, the modules it imports are the reference's.
        view = module if self.fair else FAIR_VIEW_ALL
        key = (view, module)
        if key in self._failures:
            raise ImplementationError(self._failures[key])
        if module in self._missing:
            self._failures[key] = f"missing module {module}: {module}.py not found in {self.path}"
            raise ImplementationError(self._failures[key])
        if key not in self._callables:
            self._import(view, module)
        if name not in self._callables[key]:
            raise ImplementationError(f"{module}.py defines no function {name}()")
        if (view, name) not in self._functions:
            self._functions[(view, name)] = self._remote(view, module, name)
        return self._functions[(view, name)]

    def close(self) -> None:
        """Kill the worker and remove its scratch folder."""
        self._stop()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> IsolatedImplementation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ scratch folder

    def _new_scratch(self) -> Path:
        """A new scratch folder: in the fork server's folder of submissions, or the batch's scratch folder."""
        parent = str(self._server.students) if self._server is not None else _scratch_parent()
        return Path(tempfile.mkdtemp(prefix="attention-kit-worker-", dir=parent))

    def _prepare_scratch(self) -> set[str]:
        """Copy the worker script (and its compiled code) and the submission's modules; return the missing modules."""
        os.chmod(self._scratch, 0o755)
        if self._server is not None:  # a forked worker runs the server's copy of the worker
            modules = self._scratch / "modules"
            modules.mkdir(mode=0o755)
            return self._copy_modules()
        for source in (WORKER_SOURCE, PROTOCOL_SOURCE):
            shutil.copyfile(source, self._scratch / source.name)
            os.chmod(self._scratch / source.name, 0o644)
        compiled = _compiled_worker(confine.worker_filename(self.plan))
        if compiled is not None:
            (self._scratch / "worker.pyc").write_bytes(compiled)
            os.chmod(self._scratch / "worker.pyc", 0o644)
        modules = self._scratch / "modules"
        modules.mkdir(mode=0o755)
        os.chmod(modules, 0o755)
        return self._copy_modules()

    def _copy_modules(self) -> set[str]:
        """Copy the submission's modules into the scratch folder; return the missing modules."""
        modules = self._scratch / "modules"
        wanted = {exercise.module_file for exercise in self.curriculum.exercises}
        helpers = {p.name for p in self.path.glob("_*.py") if p.name != "__init__.py" and p.name.isascii()}
        missing = set()
        for name in sorted(wanted | helpers):
            source = self.path / name
            if source.is_symlink() or not source.is_file() or source.stat().st_size > MAX_MODULE_BYTES:
                if name in wanted:
                    missing.add(name.removesuffix(".py"))
                continue
            shutil.copyfile(source, modules / name)
            os.chmod(modules / name, 0o644)
        return missing

    # ------------------------------------------------------------------ the worker process

    def _spawn(self) -> None:
        """Start a worker and send its init message, without waiting for it (its start-up overlaps ours)."""
        self._spawned_at = time.perf_counter()
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        output_read, output_write = os.pipe()
        # Without a PID namespace, every worker gets a user of its own, so that all its processes can be killed.
        # Each worker gets a user of its own (as root): its process limit then counts its own processes only.
        self._uid = confine.fresh_uid() if self.plan.drop_to is not None else None
        try:
            if self._server is not None:
                self._process = self._fork(requests_read, replies_write, output_write)
            else:
                self._process = self._start(requests_read, replies_write, output_write)
        except (OSError, server.ServerError) as error:
            for fd in (requests_write, replies_read, output_read):
                os.close(fd)
            raise self._internal(f"the worker process could not be started ({error})") from None
        finally:
            for fd in (requests_read, replies_write, output_write):
                os.close(fd)
        self._fds = {"requests": requests_write, "replies": replies_read, "output": output_read}
        self._finish_spawn()

    def _fork(self, requests_read: int, replies_write: int, output_write: int) -> server.ForkedWorker:
        """A worker forked by this process's fork server (replaced first if it is tainted or gone)."""
        assert self._uid is not None
        current = _fork_server(self.plan)
        if current is not self._server or not self._scratch.is_dir():
            # A new server (the old one's folder, this scratch folder in it, went with the old one), or a folder
            # removed under us: the submission's modules are copied again, into the new server's folder.
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._server = current
            self._scratch = self._new_scratch()
            self._live["scratch"] = self._scratch
            self._missing = self._prepare_scratch()
        return current.fork(self._scratch, self._uid, self.limits, 10 if self.stats["timed_out"] else 0,
                            (requests_read, replies_write, output_write))

    def _start(self, requests_read: int, replies_write: int, output_write: int) -> subprocess.Popen:
        """A worker started on its own (its own sandbox, if any)."""
        cmd, cwd = confine.command(self.plan, self._scratch, requests_read, replies_write, uid=self._uid)
        return subprocess.Popen(
            cmd, cwd=cwd, env=confine.worker_environment(), stdin=subprocess.DEVNULL,
            stdout=output_write, stderr=output_write, pass_fds=(requests_read, replies_write),
            # A submission that already ran out of time gets the CPU only when honest ones do not need it.
            preexec_fn=confine.limiter(self.limits, niceness=10 if self.stats["timed_out"] else 0),
            start_new_session=True,
        )

    def _finish_spawn(self) -> None:
        """Set up the new worker's pipes and send its init message (not waiting for the answer)."""
        requests_write, replies_read, output_read = (self._fds[name] for name in ("requests", "replies", "output"))
        for fd in self._fds.values():
            os.set_blocking(fd, False)
        for fd in (requests_write, replies_read):
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        # What _wait waits for, registered once per worker: its replies and output, and (while a frame is being
        # sent) room in the requests pipe.
        self._pollers = {False: select.poll(), True: select.poll()}
        for poller in self._pollers.values():
            poller.register(replies_read, select.POLLIN)
            poller.register(output_read, select.POLLIN)
        self._pollers[True].register(requests_write, select.POLLOUT)
        self._buffer = bytearray()
        self._live.update(process=self._process, fds=dict(self._fds),
                          uid=self._uid if self.plan.mode != "bwrap" else None)
        dependencies = {e.name: list(self.curriculum.dependencies(e.name)) if self.fair else []
                        for e in self.curriculum.exercises}
        functions = {e.name: list(e.functions) for e in self.curriculum.exercises}
        self._init_data = {"functions": functions, "dependencies": dependencies}
        self._handshake_pending = True
        try:
            self._send(worker.pack({"op": "init", "functions": functions, "dependencies": dependencies}, []),
                       time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Ended):
            pass  # reported by _ready()

    def _ready(self) -> None:
        """Make sure a worker runs and has answered its init message."""
        if self._process is None:
            self._spawn()
        if not self._handshake_pending:
            return
        self._handshake_pending = False
        entered = time.perf_counter()
        try:
            reply, _ = self._receive(time.monotonic() + STARTUP_TIMEOUT)
        except (_Timeout, _Ended) as error:
            code = self._stop(ended=isinstance(error, _Ended))
            last = self.output.strip().splitlines()[-1:] or ["no output"]
            raise self._internal(f"the worker process did not start ({_describe_exit(code, self.plan.mode)}; "
                                 f"isolation: {self.isolation}; its last output: {last[0][:300]})") from None
        if reply.get("status") != "ok":
            self._stop()
            raise self._internal(f"the worker process did not start: {str(reply)[:300]}")
        # What this process waited for the worker (a spare's start-up overlapped the student before).
        self.startup_seconds.append(time.perf_counter() - max(entered, self._spawned_at))
        if self._process is not None and self._process.pid > 0:
            # Before any student code runs, the worker is bwrap's innermost process (a forked one has none).
            self._worker_pid = load.innermost_child(self._process.pid)
            self._load = load.LoadClock(self._worker_pid)
            if self.stats["timed_out"]:
                self._lower_priority()

    def _internal(self, reason: str) -> SandboxError:
        """Record a failure of the grader itself and return the exception to raise."""
        self.internal.append(reason)
        return SandboxError(reason)

    def _stop(self, ended: bool = False) -> int | None:
        """Kill the worker (all its processes) and close the pipes; return its exit status.

        ``ended``: the worker closed the channel, so give it a moment to exit by itself and report its own code.
        """
        process, self._process = self._process, None
        uid, self._uid = self._uid, None
        if self._load is not None:
            self._load.close()
            self._load = None
        self._worker_pid = None
        self._live.update(process=None, fds={}, uid=None)
        if process is None:
            return None
        self._drain_output(0.0)
        if ended:
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        # In a PID namespace, killing its first process ends them all; elsewhere, kill by the worker's own uid.
        code = IsolatedImplementation._kill(process, uid if self.plan.mode != "bwrap" else None)
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = {}
        self._pollers = {}
        return code

    @staticmethod
    def _kill(process: subprocess.Popen | server.ForkedWorker, uid: int | None = None) -> int | None:
        if isinstance(process, server.ForkedWorker):
            return process.stop()  # every process of its user, wherever it went
        if uid is not None:
            confine.kill_user(uid)  # every process the worker started, wherever it went (setsid, daemons)
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
            IsolatedImplementation._kill(live["process"], live.get("uid"))
        for fd in live["fds"].values():
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(live["scratch"], ignore_errors=True)

    # ------------------------------------------------------------------ channel IO (poll, no threads)

    def _drain_output(self, timeout: float) -> None:
        fd = self._fds.get("output")
        while fd is not None and select.select([fd], [], [], timeout)[0]:
            if not self._read_output(fd):
                return
            timeout = 0.0

    def _read_output(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, worker.READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            chunk = b""
        if not chunk:
            self._fds.pop("output", None)
            for poller in self._pollers.values():
                with contextlib.suppress(KeyError):
                    poller.unregister(fd)
            os.close(fd)
            return False
        room = self.limits.output_bytes - len(self._output)
        self._output += chunk[: max(room, 0)]
        self._dropped += max(len(chunk) - max(room, 0), 0)
        return True

    def _wait(self, deadline: float, write: bool) -> tuple[bool, bool]:
        """Wait for the replies pipe (or the requests pipe, when ``write``) until ``deadline``, draining output.

        Any event on a pipe counts (a closed end reports POLLHUP or POLLERR, not POLLIN or POLLOUT): the read or
        write that follows then finds it closed, as after select.
        """
        poller, replies, requests = self._pollers[write], self._fds["replies"], self._fds["requests"]
        while True:
            now = time.monotonic()
            remaining = deadline + self._forgiven - now
            if now >= self._slow_at:
                self._noticed_slow()
            elif self._slow_at < now + remaining:  # wake up when the call becomes slow, to say so
                remaining = self._slow_at - now + 1e-3
            if remaining <= 0:
                if self._forgive():
                    # Past its time, a call runs on at a lower priority: an honest one still ends, one that loops
                    # takes little from the others while it uses up its allowance.
                    self._lower_priority()
                    continue
                raise _Timeout
            replies_ready = writable = False
            for fd, _ in poller.poll(remaining * 1000):  # milliseconds, rounded up
                if fd == replies:
                    replies_ready = True
                elif fd == requests:
                    writable = True
                elif fd == self._fds.get("output"):
                    self._read_output(fd)
            if replies_ready or writable:
                return replies_ready, writable

    def _noticed_slow(self) -> None:
        self._slow_at = math.inf
        self.slow = True
        if on_slow is not None:
            with contextlib.suppress(Exception):  # telling is a courtesy: never the student's failure
                on_slow()

    def _forgive(self) -> bool:
        """At a call's deadline: move it on by the CPU waits so far (the load's time); False if nothing more."""
        if self._load is None or self.stats["timed_out"]:
            return False
        allowance = LOAD_ALLOWANCE * self.limits.call_timeout - self.forgiven
        waited = min(self._load.waited(), allowance)
        if waited <= self._forgiven + 0.001:
            return False
        self._forgiven = waited
        return True

    def _lower_priority(self) -> None:
        """Let the worker run only when the honest ones leave a CPU free (nice 10, for its scheduling group too).

        bwrap makes the worker lead a session of its own, and with autogroup scheduling (the default of most
        Linux systems) a session is a scheduling group whose own nice value is what counts against the
        grading processes: the process's nice value alone would change nothing.
        """
        if self._worker_pid is None:
            return
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self._worker_pid, 10)
        with contextlib.suppress(OSError), open(f"/proc/{self._worker_pid}/autogroup", "w") as group:
            group.write("10")

    def _read_replies(self, check_prefix: bool = True) -> None:
        # One pipe's worth, or the rest of a frame whose (checked) size is known, so a large frame takes a few
        # reads; a small one never allocates more than READ_BYTES for its read.
        wanted = worker.READ_BYTES
        if len(self._buffer) >= worker.PREFIX.size:
            _, head_len, body_len = worker.PREFIX.unpack_from(self._buffer)
            wanted = min(max(wanted, worker.PREFIX.size + head_len + body_len - len(self._buffer)), PIPE_BYTES)
        try:
            chunk = os.read(self._fds["replies"], wanted)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            raise _Ended
        self._buffer += chunk
        # Checked wherever the buffer grows (here, also while an answer is being sent, when nothing should come;
        # _next_frame checks before anything else): the grading process never holds more than one allowed frame
        # of a worker's bytes.
        if check_prefix:
            self._check_frame_prefix()
        allowance = min(self.limits.reply_bytes, self.limits.student_reply_bytes - self.received)
        if len(self._buffer) > worker.PREFIX.size + MAX_REPLY_HEADER + max(allowance, 0):
            raise _TooLarge(len(self._buffer))

    def _send(self, data: bytes, deadline: float) -> None:
        # Write first, wait only when the pipe is full: a whole frame usually goes in one system call.
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fds["requests"], view) :]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise _Ended from None
            readable, _ = self._wait(deadline, write=True)
            if readable:
                self._read_replies()

    def _check_frame_prefix(self) -> None:
        """Refuse a frame whose declared size is over the limits before any more of it is read."""
        if len(self._buffer) < worker.PREFIX.size:
            return
        _, head_len, body_len = worker.PREFIX.unpack_from(self._buffer)
        allowance = min(self.limits.reply_bytes, self.limits.student_reply_bytes - self.received)
        if head_len > MAX_REPLY_HEADER or head_len + body_len > allowance:
            raise _TooLarge(head_len + body_len)

    def _next_frame(self, deadline: float) -> bytes:
        """The next whole frame from the worker, as received (never more than the reply limits)."""
        while True:
            size = None
            if len(self._buffer) >= worker.PREFIX.size:  # (the usual first pass finds nothing buffered)
                self._check_frame_prefix()
                try:
                    size = worker.frame_size(self._buffer)
                except ValueError as error:  # garbage on the channel: the student wrote to it
                    raise _Ended(f"the worker sent a malformed message ({error})") from None
            if size is not None:
                if size == len(self._buffer):  # the usual case: nothing after the frame (one copy, not two)
                    frame = bytes(self._buffer)
                    self._buffer.clear()
                else:
                    with memoryview(self._buffer) as view:
                        frame = bytes(view[:size])
                    del self._buffer[:size]
                self.received += size
                return frame
            readable, _ = self._wait(deadline, write=False)
            if readable:
                self._read_replies(check_prefix=False)  # checked at the top of the loop, before anything else

    @staticmethod
    def _parse(frame: bytes) -> tuple[dict, list]:
        try:
            parsed = worker.unpack(frame)
        except Exception as error:  # noqa: BLE001 - garbage on the channel: the student wrote to it
            raise _Ended(f"the worker sent a malformed message ({error})") from None
        if parsed is None:
            raise _Ended("the worker sent a malformed message (a truncated frame)")
        return parsed[0]

    def _receive(self, deadline: float) -> tuple[dict, list]:
        return self._parse(self._next_frame(deadline))

    def _exchange(self, header: dict, arrays: list, timeout: float) -> tuple[dict, list]:
        """Send a request; answer the worker's callbacks until its reply comes.

        Only what ``protocol`` lists is accepted from the worker: a reply with a
        known status, or a callback that the request's view may make. Student
        time (not the reference's) is added to ``spent``.
        """
        self._forgiven = 0.0
        self._ready()
        if self._load is not None:
            self._load.start()
        view = str(header.get("view", FAIR_VIEW_ALL))
        reference = str(self.reference)
        begun = time.monotonic()
        reference_seconds = 0.0
        deadline = begun + timeout
        if on_slow is not None and not self.slow:
            self._slow_at = begun + SLOW_CALL
        callbacks = 0
        try:
            self._send(worker.pack(header, arrays), deadline)
            while True:
                frame = self._next_frame(deadline)
                callbacks += 1
                if callbacks > self.limits.callbacks_per_call + 1:
                    raise _Ended(f"your code asked the reference more than {self.limits.callbacks_per_call} times "
                                 "in one call")
                started = time.monotonic()
                # The view is part of the key: an answer is replayed only where it was allowed. Only a frame that
                # starts as the worker writes a callback is looked up (a reply, often the largest frame, is not
                # hashed for nothing); any other frame is parsed and checked in full, as always.
                key = (reference, view, frame)
                answer = _ANSWERS.get(key) if frame.startswith(CALLBACK_START, worker.PREFIX.size) else None
                if answer is None:
                    reply, reply_arrays = self._parse(frame)
                    if reply.get("op") == "grading_function":  # a test's own function: never remembered
                        answer = worker.pack(*self._run_grading_function(reply, reply_arrays))
                        deadline = self._count_reference_time(started, deadline, reference_seconds)
                        reference_seconds += time.monotonic() - started
                        self._send(answer, deadline)
                        continue
                    if "op" not in reply:
                        try:
                            protocol.check_reply(reply)
                        except protocol.ProtocolError as error:
                            raise _Ended(f"the worker sent a message the protocol does not allow ({error})") \
                                from None
                        return reply, reply_arrays
                    answer, allowed = self._callback(reply, reply_arrays, view)
                    if allowed:
                        _remember_answer(key, answer)
                deadline = self._count_reference_time(started, deadline, reference_seconds)
                reference_seconds += time.monotonic() - started
                # Sending is the student's time: a worker that reads its answer slowly spends its own budget.
                self._send(answer, deadline)
        finally:
            self._slow_at = math.inf
            wall = time.monotonic() - begun
            if wall > LOAD_CHECK_AFTER:  # a long call: the time it waited for a CPU is not the student's either
                self._forgive()
            self.call_seconds += wall
            self.spent += max(0.0, wall - reference_seconds - self._forgiven)
            self.reference_spent += reference_seconds
            self.forgiven += self._forgiven
            self._forgiven = 0.0

    def _count_reference_time(self, started: float, deadline: float, so_far: float) -> float:
        """The call's deadline, moved on by the reference's time since ``started`` (up to the submission's limit)."""
        spent = time.monotonic() - started
        if self.reference_spent + so_far + spent < self.limits.reference_seconds:
            return deadline + spent  # the reference's time does not count against the student (up to a limit)
        return deadline

    def allowed_callbacks(self, view: str) -> frozenset[tuple[str, str]]:
        """The reference functions the channel serves while a request of ``view`` runs (see ``protocol``)."""
        if view not in self._allowed:
            self._allowed[view] = protocol.reference_functions(
                view, self._init_data["dependencies"], self._init_data["functions"]) if self.fair else frozenset()
        return self._allowed[view]

    def _callback(self, header: dict, arrays: list, view: str) -> tuple[bytes, bool]:
        """Answer a callback (fair grading): the answer's frame, and whether it was allowed.

        A callback for anything but the functions of ``view``'s dependencies is
        refused (a PermissionError in the student's code) and recorded. A
        reference error goes back as its type and message only: no traceback,
        no source line of the reference.
        """
        try:
            protocol.check(header, protocol.CALLBACKS)
        except protocol.ProtocolError as error:
            raise _Ended(f"the worker sent a message the protocol does not allow ({error})") from None
        exercise, name = header["exercise"], header["function"]
        if (exercise, name) not in self.allowed_callbacks(view):
            self.refusals += 1
            what = f"{exercise[:40]}.{name[:40]}()"
            reason = (f"the reference's {what} was asked for while grading {view}" if self.fair else
                      f"the reference's {what} was asked for under --no-fair")
            if reason not in self.refused and len(self.refused) < 20:
                self.refused.append(reason)
            info = {"type": "PermissionError", "builtins": ["PermissionError"], "traceback": [],
                    "message": f"refused: {reason}; fair grading serves only the functions of the exercises "
                               f"that {view} imports"}
            return worker.pack({"status": "error", "error": info}, []), False
        limit = self.limits.reference_bytes
        try:
            if self._reference_impl is None:
                self._reference_impl = LocalImplementation(self.reference)
            function = self._reference_impl.function(exercise, name)
            args, kwargs = worker.decode(header["payload"], arrays)
            estimate = _estimated_bytes([args, kwargs])
            if estimate > limit:  # refused before the reference runs: it would run in the grading process
                raise MemoryError(f"the reference's {exercise}.{name}() was asked for about {estimate >> 20} MiB "
                                  f"(the grader computes at most {limit >> 20} MiB for one call); use smaller sizes")
            result = function(*args, **kwargs)
            answer_arrays: list = []
            payload = worker.result_payload(result, [list(args), kwargs], header["payload"], arrays, answer_arrays)
            answer = worker.pack({"status": "ok", "payload": payload}, answer_arrays)
            del result, answer_arrays, payload
            if len(answer) > min(limit, self.limits.reply_bytes):
                raise MemoryError(f"the reference's answer of {exercise}.{name}() would be {len(answer) >> 20} MiB "
                                  f"(the grader sends at most {min(limit, self.limits.reply_bytes) >> 20} MiB); "
                                  "use smaller sizes")
        except Exception as error:  # noqa: BLE001 - raised again in the student's code, as in-process
            info = worker.exception_info(error)
            info["traceback"] = []  # the reference's frames and source lines stay on this side
            return worker.pack({"status": "error", "error": info}, []), not isinstance(error, MemoryError)
        return answer, True

    def _run_grading_function(self, header: dict, arrays: list) -> tuple[dict, list]:
        """Run a function the test passed as an argument (e.g. a model's ``predict``) for the worker.

        Only functions of the call in progress can be reached, by their index; the arguments are plain data.
        """
        try:
            protocol.check(header, protocol.CALLBACKS)
        except protocol.ProtocolError as error:
            raise _Ended(f"the worker sent a message the protocol does not allow ({error})") from None
        try:
            index = header.get("index")
            if type(index) is not int or not 0 <= index < len(self._grading_functions):
                raise ValueError("this function belongs to an earlier call and cannot be called any more")
            args, kwargs = worker.decode(header["payload"], arrays)
            result = self._grading_functions[index](*args, **kwargs)
            answer_arrays: list = []
            payload = worker.result_payload(result, [list(args), kwargs], header["payload"], arrays, answer_arrays)
        except Exception as error:  # noqa: BLE001 - raised again in the student's code, as in-process
            info = worker.exception_info(error)
            info["traceback"] = []  # the test's frames and source lines stay on this side (hidden tests too)
            return {"status": "error", "error": info}, []
        return {"status": "ok", "payload": payload}, answer_arrays

    def _request(self, header: dict, arrays: list, what: str, counted: bool = True) -> tuple[dict, list]:
        """One exchange with the worker, turning a timeout or a dead worker into a clear error.

        ``counted``: the request counts as a call in ``stats`` (an import counts only when it fails).
        """
        __tracebackhide__ = True  # the grader's internals are no part of a student's failure report
        so_far, total = self._timeouts.get(what, 0), sum(self._timeouts.values())
        if so_far >= self.limits.function_timeouts or total >= self.limits.total_timeouts:
            self.stats["skipped"] += 1
            raise TimeoutError(f"{what} was not run: your code already ran out of time {max(so_far, total)} times "
                               "(an infinite loop?); fix that first")
        budget = self.limits.student_seconds
        if self.spent >= budget:
            self.stats["skipped"] += 1
            raise BudgetExhausted(f"{what} was not run: your code has used up its time budget ({budget:g} s for all "
                               "the tests of a submission); make the slow function faster")
        if self.stats["crashed"] >= self.limits.total_crashes:
            self.stats["skipped"] += 1
            raise WorkerCrashed(f"{what} was not run: your code ended the worker process {self.stats['crashed']} "
                                "times already; fix that first")
        if self.received >= self.limits.student_reply_bytes:
            self.stats["skipped"] += 1
            raise WorkerCrashed(f"{what} was not run: your code has sent its whole reply budget "
                                f"({self.limits.student_reply_bytes} bytes); return smaller values")
        timeout = min(self.limits.call_timeout, budget - self.spent)
        self.stats["requests"] += counted
        try:
            return self._exchange(header, arrays, timeout)
        except _Timeout:
            self.stats["timed_out"] += 1
            self.stats["requests"] += not counted
            self._timeouts[what] = so_far + 1
            self._stop()
            self.restarts += 1
            if timeout < self.limits.call_timeout:
                raise BudgetExhausted(f"{what} did not finish: your code used up its time budget ({budget:g} s for "
                                   "all the tests of a submission)") from None
            raise TimeoutError(f"{what} did not finish within {self.limits.call_timeout:g} s: an infinite loop?") \
                from None
        except _TooLarge as error:
            self.stats["crashed"] += 1
            self.stats["requests"] += not counted
            self._stop()
            self.restarts += 1
            raise WorkerCrashed(f"{what} sent a reply of {error.args[0]} bytes, more than the grader accepts "
                                f"({self.limits.reply_bytes} bytes per reply, {self.limits.student_reply_bytes} "
                                "in all); return smaller values") from None
        except _Ended as error:
            self.stats["crashed"] += 1
            self.stats["requests"] += not counted
            detail = str(error)
            process = self._process
            code = self._stop(ended=not detail)
            self.restarts += 1
            if isinstance(process, server.ForkedWorker) and process.server_lost:
                self.stats["crashed"] -= 1  # not the student's doing: the sandbox of every worker went
                raise self._internal(f"the fork server (the sandbox of the workers) ended while running {what}") \
                    from None
            if detail:
                raise WorkerCrashed(f"{detail} while running {what}") from None
            raise WorkerCrashed(f"your code ended the worker process ({_describe_exit(code, self.plan.mode)}) "
                                f"while running {what}") from None

    # ------------------------------------------------------------------ imports and calls

    def _import(self, view: str, module: str) -> None:
        key = (view, module)
        try:
            reply, _ = self._request({"op": "import", "view": view, "module": module}, [], f"importing {module}.py",
                                     counted=False)
        except BudgetExhausted as error:
            raise ImplementationError(str(error)) from None  # not remembered: the budget is the reason, not the module
        except TimeoutError:
            self._failures[key] = (f"importing {module}.py did not finish within {self.limits.call_timeout:g} s "
                                   "(an infinite loop at module level?)")
            raise ImplementationError(self._failures[key]) from None
        except WorkerCrashed as error:
            message = str(error).split(" while running ")[0]  # "... (exit code 3)", without the request's name
            self._failures[key] = message.replace("your code ended", f"importing {module}.py ended")
            raise ImplementationError(self._failures[key]) from None
        if reply.get("status") != "ok":
            self._failures[key] = str(reply.get("message", f"importing {module}.py failed"))
            raise ImplementationError(self._failures[key])
        callables = reply.get("callables")
        self._callables[key] = {n for n in callables if isinstance(n, str)} if isinstance(callables, list) else set()

    def _signature(self, name: str) -> inspect.Signature | None:
        """The API's signature of ``name`` (from the reference), so failure messages name arguments."""
        try:
            if self._reference_impl is None:
                self._reference_impl = LocalImplementation(self.reference)
            return inspect.signature(self._reference_impl.function(name, name))
        except Exception:  # noqa: BLE001 - only used to label arguments
            return None

    def _remote(self, view: str, module: str, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return self._call(view, module, name, args, kwargs)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"{module}.{name}, run in the isolated worker"
        signature = self._signature(name)
        if signature is not None:
            call.__signature__ = signature  # type: ignore[attr-defined]
        return call

    def measure(self, exercise: str, name: str, *args: Any, **kwargs: Any) -> tuple[Any, int | None]:
        """Call ``name`` in the worker and return ``(result, peak bytes allocated during the call)``.

        The peak is measured with ``tracemalloc`` where the student's code runs (None when that code stopped
        the tracing itself); see ``tests.kit.Kit.measure``.
        """
        self.function(exercise, name)  # imports the module, or raises ImplementationError
        module = self.curriculum.exercise_of_function(name).name
        view = module if self.fair else FAIR_VIEW_ALL
        return self._call(view, module, name, args, kwargs, measure_memory=True)

    def _call(self, view: str, module: str, name: str, args: tuple, kwargs: dict,
              measure_memory: bool = False) -> Any:
        __tracebackhide__ = True
        arrays: list = []
        functions: list[Callable[..., Any]] = []
        payload = worker.encode([list(args), kwargs], arrays, functions)
        header = {"op": "call", "view": view, "module": module, "function": name, "payload": payload}
        if measure_memory:
            header["measure_memory"] = True
        self._grading_functions = functions
        try:
            reply, reply_arrays = self._request(header, arrays, f"{name}()")
        finally:
            self._grading_functions = []
        status = reply.get("status")
        if status == "ok" and measure_memory:
            peak = reply.get("peak_memory")
            result = self._call_result(name, reply, reply_arrays, args, kwargs)
            return result, peak if type(peak) is int else None
        if status == "ok":
            return self._call_result(name, reply, reply_arrays, args, kwargs)
        if status == "error":
            info = reply.get("error")
            info = info if isinstance(info, dict) else {}
            if info.get("type") == "SystemExit":
                raise WorkerCrashed(str(info.get("message")))
            raise worker.rebuild_exception(info)
        raise WorkerCrashed(str(reply.get("message", f"the worker could not run {name}()")))

    def _call_result(self, name: str, reply: dict, reply_arrays: list, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True
        try:  # the result, and the in-place changes and generator states copied back onto the arguments
            result = worker.receive_result(reply.get("payload"), reply_arrays, args, kwargs)
        except (ValueError, KeyError, TypeError, IndexError, RecursionError, MemoryError, OverflowError) as error:
            raise WorkerCrashed(f"the worker sent a malformed result for {name}(): {error}") from None
        worker.reissue_warnings(reply.get("warnings"))
        return result
