"""Grade a submission through an isolated worker process (the grading side).

``IsolatedImplementation`` provides the same ``function(exercise, name)`` as ``tests.kit.LocalImplementation``, so
the graded suite runs unchanged, but the student's code never runs in the grading process. It runs in
``grader/sandbox/worker.py``, a separate, resource-limited process confined as well as this machine allows
(``grader.sandbox.limits``), started once per submission and reused for every call. Arguments and results cross two
dedicated pipes as plain data (a JSON header + the arrays' raw bytes of allowed numeric dtypes, never pickle);
exceptions come back as text and are raised here again as the same builtin type; in-place changes to array arguments
and the state of random generators are copied back after each call (the worker sends back only the arguments a call
changed), and an array the worker sent before comes back as the same object (``grader.sandbox.kept``).

Fair grading (the default): a test of exercise E runs the student's module E, while the modules E imports (the
manifest's ``depends``) are working code, so a bug in the student's softmax does not cost points in attention. Those
the graded selection does not assign (a Part III course's softmax) are the kit's given implementations
(``grader.sandbox.given.servable``: a checkout's ``grader/release_files/given``, or a course folder's ``given/``;
written apart from the reference), run in the student's own worker (``worker.py``), charged as the student's code
is. An assigned one (the worker could read its working code and print it), or one with no given implementation, is
answered by the reference, in a worker of its own (an ``IsolatedImplementation`` of the reference folder,
``fair=False``), with the student's memory limit and the CPU time the student's call has left, which it is charged:
the grading process computes nothing for a student. A test's own call of another exercise's function (exercise 12's
tests train with exercise 9's ``train``) always runs in the reference's worker, never in the student's process.

Run by the grading process. This module is the facade: it composes the
worker's process (``grader.sandbox.process``), the channel over its pipes
(``grader.sandbox.channel``), the submission's time (``grader.sandbox.budget``)
and the answers to the worker's callbacks (``grader.sandbox.callbacks``).

Example
-------
>>> with IsolatedImplementation(Path("submissions/ada")) as impl:  # doctest: +SKIP
...     softmax = impl.function("softmax", "softmax")
...     softmax(np.zeros((2, 3)))
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.sandbox import cgroup, channel_use, codec, frames, kept, load, protocol, reached, server, watched
from grader.sandbox import limits as confine
from grader.sandbox.budget import DIAGNOSIS, MACHINE_RETRIES, Budget, BudgetExhausted
from grader.sandbox.callbacks import _ANSWERS, Callbacks, answer_key, remember_answer, remembered_answer
from grader.sandbox.channel import MAX_REPLY_HEADER, Channel, Ended, Timeout, TooLarge
from grader.sandbox.errors import MachineBusy, SandboxError, WorkerCrashed
from grader.sandbox.given import servable as servable_given
from grader.sandbox.given_views import GivenViews
from grader.sandbox.limits import Limits
from grader.sandbox.measuring import Measuring
from grader.sandbox.process import SCRATCH_ENV, WorkerProcess, close_fork_servers, describe_exit, shared_fork_server
from grader.sandbox.reports import Reports
from grader.sandbox.sealed import SEALED, Held
from grader.sandbox.signatures import Signatures
from grader.sandbox.spares import Spares
from tests.kit import ImplementationError

__all__ = ["BudgetExhausted", "IsolatedImplementation", "Limits", "MachineBusy", "SandboxError", "WorkerCrashed"]
# Also here for the grading side and the tests, which use them through this module.
__all__ += ["MAX_REPLY_HEADER", "SCRATCH_ENV", "_ANSWERS"]

STARTUP_TIMEOUT = 30.0  # generous: a loaded CI machine may take a while to start Python + numpy
FAIR_VIEW_ALL = protocol.VIEW_ALL

atexit.register(lambda: IsolatedImplementation.close_spares())


def _close_server() -> None:
    IsolatedImplementation.close_spares()  # first: a spare may be a worker of the server
    close_fork_servers()


atexit.register(_close_server)


class IsolatedImplementation(Measuring, Reports, Signatures, Spares):
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
        self.policy = policy
        self.plan = confine.choose(policy)  # IsolationUnavailable: no student code without isolation
        self.restarts = 0
        # What the grader reports about this submission besides its test outcomes.
        self.internal: list[str] = []  # the grader's own failures (the affected tests are not graded)
        self.stats = {"requests": 0, "timed_out": 0, "crashed": 0, "skipped": 0}
        self.startup_seconds: list[float] = []
        self._timeouts: dict[tuple[str, str], int] = {}  # timeouts so far, per view (exercise) and called function
        self._crashes: dict[str, int] = {}  # ended workers so far, per view: one exercise's crashes cost no other's
        self._failures: dict[tuple[str, str], str] = {}
        self._callables: dict[tuple[str, str], set[str]] = {}
        self._functions: dict[tuple[str, str], Callable[..., Any]] = {}
        self._budget = Budget(self.limits)
        self._group: cgroup.WorkerGroup | None = None  # the current worker's control group, if this machine has one
        self._channel = Channel(self.limits, self._budget)
        self._callbacks = Callbacks(self.reference, fair, self.limits, self._start_reference)
        self._watched = watched.Watched(lambda: IsolatedImplementation(  # a watched call's steps run in this one
            self.path, fair=self.fair, limits=self.limits, reference=self.reference, policy=self.policy))
        # Given code runs in the worker only for exercises the graded selection does not assign (given.servable).
        self._given = GivenViews(servable_given(self.reference, self.curriculum) if fair else (),
                                 {e.name: self.curriculum.dependencies(e.name) for e in self.curriculum.exercises})
        plan = self.plan
        try:
            self._worker = WorkerProcess(self.path, {exercise.module_file for exercise in self.curriculum.exercises},
                                         plan, self.limits, (lambda: shared_fork_server(plan)) if plan.forks else None)
        except server.ServerError as error:
            raise self._internal(f"the worker process could not be started ({error})") from None
        self._adopted = False
        self._handshake_pending = False
        # The views whose sealed answers the worker holds (grader.sandbox.sealed), and their frames' bytes.
        self._sealed = Held(self.curriculum.dependencies)
        self._kept = kept.Kept()  # the arrays the worker's results gave, by its tokens (one worker's: see _spawn)
        self.out_of_memory = False  # the last worker that ended had reached its control group's memory limit
        self.group_missed = 0  # workers whose control group could not be made or joined (see ``isolation``)
        self._spawn()  # start-up overlaps the grading process's own (collecting tests, importing the reference)

    # ------------------------------------------------------------------ public API

    @property
    def isolation(self) -> str:
        """How the worker is confined, e.g. ``"namespaces (bwrap: ...) + an unprivileged user per worker"``."""
        return self.plan.description + (confine.FORKED if self._worker.server is not None else "") \
            + confine.kernel_limits(self.plan) \
            + (f" (but {self.group_missed} worker(s) could not be put in one: RLIMIT_AS only)"
               if self.group_missed else "")

    @property
    def output(self) -> str:
        """What the student's code printed so far (stdout and stderr), truncated to ``limits.output_bytes``."""
        self._channel.drain_output(0.0)
        return self._channel.output.text()

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
        if self.fair and module != exercise and module in self.curriculum.dependencies(exercise):
            # A test of ``exercise`` that calls a function of an exercise it builds on (exercise 12's tests train
            # with exercise 9's train) gets the reference's, as the exercise's own code does: a mistake there
            # costs that exercise's points only, and a course of one part needs no module of another. It runs in
            # the reference's worker too (its arguments may hold what the student's code returned).
            return self._reference_worker().function(module, name)
        # Fair: the module that defines the function is the student's, the modules it imports are the reference's.
        view = module if self.fair else FAIR_VIEW_ALL
        key = (view, module)
        if key in self._failures:
            raise ImplementationError(self._failures[key])
        if module in self._worker.missing:
            self._failures[key] = f"missing module {module}: {module}.py not found in {self.path}"
            raise ImplementationError(self._failures[key])
        if key not in self._callables:
            self._import(view, module)
        if name not in self._callables[key]:
            raise ImplementationError(f"{module}.py defines no function {name}()")
        if (view, name) not in self._functions:
            self._functions[(view, name)] = self._remote(view, module, name)
        return self._functions[(view, name)]

    def allowed_callbacks(self, view: str) -> frozenset[tuple[str, str]]:
        """The reference functions the channel serves while a request of ``view`` runs (see ``protocol``)."""
        return self._callbacks.allowed(view)

    def close(self) -> None:
        """Kill the worker (and the reference's, if one was started) and remove its scratch folder."""
        self._callbacks.close()
        self._watched.close()
        self._stop()
        self._worker.remove()

    # ------------------------------------------------------------------ the reference's worker

    def _start_reference(self) -> IsolatedImplementation:
        """A worker for the reference (fair grading's answers), confined and limited as this one is.

        Its memory limit is the student's; each answer's CPU time is bounded by what the student's call has left
        (``forward``), and charged to it; its own timeouts are not the student's, so they stop nothing else.
        """
        limits = dataclasses.replace(self.limits, student_seconds=float("inf"), function_timeouts=1 << 30,
                                     total_timeouts=1 << 30, call_timeout=max(self.limits.call_timeout,
                                                                               Limits().call_timeout))
        return IsolatedImplementation(self.reference, fair=False, limits=limits, reference=self.reference,
                                      policy=self.policy)

    def _reference_worker(self) -> IsolatedImplementation:
        worker = self._callbacks.worker()
        assert isinstance(worker, IsolatedImplementation)
        return worker

    def forward(self, module: str, name: str, payload: Any, arrays: list, timeout: float,
                asker_spent: Callable[[], bool] | None = None) -> tuple[dict, list]:
        """Run ``module.name`` in this worker on an encoded payload: the reply and its arrays, not decoded.

        The reference's worker answers fair grading's callbacks so (``grader.sandbox.callbacks``): the request
        passes through the grading process as plain data, which computes nothing. ``timeout``: its CPU seconds;
        ``asker_spent``: whether the asking call has used its own meanwhile (``Budget.asker_spent``).

        Raises
        ------
        TimeoutError
            Past ``timeout`` CPU seconds, or the asker's.
        grader.sandbox.errors.WorkerCrashed
            The worker ended (its memory limit, a reply too large, ...); ``out_of_memory`` says which.
        tests.kit.ImplementationError, grader.sandbox.errors.SandboxError
            The module does not import; the grader's own failure (a worker that does not start, a busy machine).
        """
        view = module if self.fair else FAIR_VIEW_ALL
        if (view, module) not in self._callables:
            self._import(view, module)
        header = {"op": "call", "view": view, "module": module, "function": name, "payload": payload}
        self._budget.asker_spent = asker_spent
        try:
            return self._request(header, arrays, f"{name}()", timeout=timeout)
        finally:
            self._budget.asker_spent = None

    def __enter__(self) -> IsolatedImplementation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the worker's life

    def _spawn(self) -> None:
        """Start a worker and send its init message, without waiting for it (its start-up overlaps ours)."""
        try:
            # A submission that already ran out of time gets the CPU only when honest ones do not need it.
            # Every worker at the grader's own priority: its budget is CPU time, so a lower priority would only
            # stretch a looping call's wall time (and a machine busy enough would then stop it as the machine's).
            fds = self._worker.spawn(0)
        except (OSError, server.ServerError) as error:
            raise self._internal(f"the worker process could not be started ({error})") from None
        self._channel.open(fds)
        self._given.reset()
        self._kept.reset()  # a new worker: no token names an array of the last one
        self._sealed.reset()
        dependencies = {e.name: list(self.curriculum.dependencies(e.name)) if self.fair else []
                        for e in self.curriculum.exercises}
        functions = {e.name: list(e.functions) for e in self.curriculum.exercises}
        self._callbacks.init_data = {"functions": functions, "dependencies": dependencies}
        given = sorted(self._given.usable)
        self._handshake_pending = True
        try:
            self._channel.send(frames.pack({"op": "init", "functions": functions, "dependencies": dependencies,
                                            "given": given}, []), time.monotonic() + STARTUP_TIMEOUT)
        except (Timeout, Ended):
            pass  # reported by _ready()

    def _ready(self) -> None:
        """Make sure a worker runs and has answered its init message."""
        if self._worker.process is None:
            self._spawn()
        if not self._handshake_pending:
            return
        self._handshake_pending = False
        entered = time.perf_counter()
        try:
            reply, _ = self._channel.receive(time.monotonic() + STARTUP_TIMEOUT)
        except (Timeout, Ended) as error:
            code = self._stop(ended=isinstance(error, Ended))
            last = self.output.strip().splitlines()[-1:] or ["no output"]
            raise self._internal(f"the worker process did not start ({describe_exit(code, self.plan.mode)}; "
                                 f"isolation: {self.isolation}; its last output: {last[0][:300]})") from None
        if reply.get("status") != "ok":
            self._stop()
            raise self._internal(f"the worker process did not start: {str(reply)[:300]}")
        # What this process waited for the worker (a spare's start-up overlapped the student before).
        self.startup_seconds.append(time.perf_counter() - max(entered, self._worker.spawned_at))
        process = self._worker.process
        if process is not None and process.pid > 0:
            # Before any student code runs, the worker is bwrap's innermost process (a forked one has none).
            self._worker.worker_pid = load.innermost_child(process.pid)
            # Its control group (memory bounded by the kernel, CPU time counted), before any student code runs.
            group = cgroup.WorkerGroup(cgroup.available(), self.limits.memory_bytes)
            self._group = group if group.active and group.add(self._worker.worker_pid) else None
            if self._group is None:
                group.remove()
                if group.support.memory is not None:  # said on the isolation line: never a limit dropped silently
                    self.group_missed += 1
            self._budget.attach(self._worker.worker_pid, self._worker.uid,
                                self._group.cpu_seconds if self._group is not None else None)

    def _internal(self, reason: str) -> SandboxError:
        """Record a failure of the grader itself and return the exception to raise."""
        self.internal.append(reason)
        return (MachineBusy if reason.startswith(MachineBusy.PREFIX) else SandboxError)(reason)

    def _stop(self, ended: bool = False) -> int | None:
        """Kill the worker (all its processes) and close the pipes; return its exit status.

        ``ended``: the worker closed the channel, so give it a moment to exit by itself and report its own code.
        """
        self._budget.detach()
        code = self._worker.stop(ended, lambda: self._channel.drain_output(0.0))
        self._channel.close()
        group, self._group = self._group, None
        self.out_of_memory = group is not None and group.out_of_memory()
        if group is not None:
            group.remove()
        return code

    # ------------------------------------------------------------------ requests

    def _exchange(self, header: dict, arrays: list, timeout: float) -> tuple[dict, list]:
        """Send a request; answer the worker's callbacks until its reply comes.

        Only what ``protocol`` lists is accepted from the worker: a reply with a
        known status, or a callback that the request's view may make. Student
        time (not the reference's) is charged to the budget.
        """
        view = str(header.get("view", FAIR_VIEW_ALL))
        # A worker given code of this very exercise or answers to its functions (given_views, sealed.Held), or too
        # near its lifetime CPU limit for this call (budget.worker_spent), is replaced: none is the student's doing.
        if self._given.must_restart(view) or self._sealed.about(view) or self._budget.worker_spent(timeout):
            self._stop()
        self._ready()
        self._given.attach(header)
        reference = str(self.reference)
        deadline = self._budget.start_call(timeout, view)
        channel, budget = self._channel, self._budget
        try:
            if header.get("op") == "call":
                self._send_sealed(view, deadline)
            if header.get("op") == "call" and SEALED.recorded is not None:  # the kit's check: answered there
                header = {**header, "answer_here": True}
            channel.send(frames.pack(header, arrays), deadline)
            while True:
                frame = channel.next_frame(deadline)
                if channel.test.messages < channel_use.UNLIMITED and (over := channel.spent()) is not None:
                    raise Ended(over)  # the test's allowance of messages (``channel_use``)
                started = time.monotonic()
                # The view is part of the key: an answer is replayed only where it was allowed. Only a frame that
                # starts as the worker writes a callback is looked up (a reply, often the largest frame, is not
                # hashed for nothing); any other frame is parsed and checked in full, as always.
                key = answer_key(reference, view, frame)
                remembered = remembered_answer(key)
                if remembered is None:
                    reply, reply_arrays = channel.parse(frame)
                    if reply.get("op") == "answered_here":  # only the kit's check, and only while recorded
                        if not (header.get("answer_here") and SEALED.keep_answered(view, reply, reply_arrays)):
                            raise Ended("the worker sent a message the protocol does not allow (answered_here)")
                        continue
                    if reply.get("op") == "grading_function":  # a test's own function: never remembered
                        # It runs here (it is the test's code), on the student's arguments: its CPU time is charged
                        # to the call that asked for it, as the reference's is.
                        clock = time.thread_time()
                        answer = frames.pack(*self._callbacks.run_grading_function(reply, reply_arrays))
                        deadline = budget.count_callback(started, deadline, time.thread_time() - clock)
                        channel.send(answer, deadline)
                        continue
                    if "op" not in reply:
                        try:
                            protocol.check_reply(reply)
                        except protocol.ProtocolError as error:
                            raise Ended(f"the worker sent a message the protocol does not allow ({error})") \
                                from None
                        opened = reply.get(protocol.ANSWERED)  # the sealed answers' CPU: the call's, as if asked
                        if type(opened) is float and 0.0 < opened < math.inf:
                            budget.count_callback(time.monotonic(), deadline, opened)
                        return reply, reply_arrays
                    try:
                        answer, keep, cpu = self._callbacks.answer(reply, reply_arrays, view, budget.call_left(),
                                                                   budget.call_spent)
                    except SandboxError as error:  # the reference's worker failed: the grader's, not the student's
                        self._stop()
                        raise self._internal(str(error)) from None
                    if keep:
                        remember_answer(key, answer, cpu)
                        SEALED.record(view, frame, answer, cpu)  # only while the kit's check runs
                else:
                    answer, cpu = remembered
                    SEALED.record(view, frame, answer, cpu)
                deadline = budget.count_callback(started, deadline, cpu)
                # Sending is the student's time: a worker that reads its answer slowly spends its own budget.
                channel.send(answer, deadline)
        finally:
            budget.finish_call()

    def _send_sealed(self, view: str, deadline: float) -> None:
        """Give a student's worker (fair grading) ``view``'s sealed answers, once per worker, before its first call.

        At most an eighth of its memory (``Held.room``), its limits raised by as much: the kit's bytes, not its own.
        """
        if self._sealed.has(view) or not self.fair or self.path == self.reference:
            return
        held = self.limits.memory_bytes // protocol.ANSWERS_SHARE
        frame = SEALED.request(view, held)
        self._sealed.given(view, 0)  # asked once per worker, even when there are none
        if frame is None:
            return
        forget = self._sealed.room(len(frame), held)  # the views it must forget first (sent again if they come back)
        if forget:
            self._channel.send(frames.pack({"op": "forget_answers", "views": forget}, []), deadline)
        self._channel.send(frame, deadline)
        self._sealed.given(view, len(frame))
        if self._group is not None:
            self._group.allow(sum(self._sealed.sizes.values()))

    def _request(self, header: dict, arrays: list, what: str, counted: bool = True,
                 timeout: float | None = None) -> tuple[dict, list]:
        """One exchange with the worker, turning a timeout or a dead worker into a clear error.

        ``counted``: the request counts as a call in ``stats`` (an import counts only when it fails);
        ``timeout``: fewer CPU seconds than the call's own limit.
        """
        __tracebackhide__ = True  # the grader's internals are no part of a student's failure report
        # Counted per exercise (a looping function costs its own exercise's tests only), or budget.DIAGNOSIS's.
        view = self._budget.account(str(header.get("view", FAIR_VIEW_ALL)))
        so_far = self._timeouts.get((view, what), 0)
        if view == DIAGNOSIS:  # a function once stopped past its time is not probed: the probe would wait as long
            so_far = max([so_far] + [self.limits.function_timeouts for _, name in self._timeouts if name == what])
        total = sum(count for (seen, _), count in self._timeouts.items() if seen == view)
        if so_far >= self.limits.function_timeouts or total >= self.limits.total_timeouts:
            self.stats["skipped"] += 1
            raise TimeoutError(f"{what} was not run: your code already ran out of time {max(so_far, total)} times "
                               "(an infinite loop?); fix that first")
        exhausted = self._budget.exhausted(what, view)
        if exhausted is not None:
            self.stats["skipped"] += 1
            raise exhausted
        if (crashes := self._crashes.get(view, 0)) >= self.limits.total_crashes:
            self.stats["skipped"] += 1
            raise WorkerCrashed(f"{what} was not run: your code ended the worker process {crashes} times already "
                                f"while {view} was graded; fix that first")
        if (spent := self._channel.spent()) is not None:  # the test's or the submission's channel allowance
            self.stats["skipped"] += 1
            raise WorkerCrashed(f"{what} was not run: {spent}")
        limit = self._budget.call_timeout(view)
        timeout = limit if timeout is None else min(timeout, limit)
        self.stats["requests"] += counted
        try:
            return self._retried(header, arrays, timeout, what)
        except Timeout:
            self.stats["timed_out"] += 1
            self._budget.timed_out()
            self.stats["requests"] += not counted
            self._timeouts[(view, what)] = so_far + 1
            self._stop()
            self.restarts += 1
            raise self._budget.expired(what, timeout) from None
        except TooLarge as error:
            self.stats["crashed"] += 1
            self._crashes[view] = self._crashes.get(view, 0) + 1
            self.stats["requests"] += not counted
            self._stop()
            self.restarts += 1
            said = self._channel.refusal(*error.args)  # its header's limit, one frame's, the test's or all
            raise WorkerCrashed(f"{what} {said}" if said.startswith("sent") else f"{what} was stopped: {said}") \
                from None
        except Ended as error:
            self.stats["crashed"] += 1
            self._crashes[view] = self._crashes.get(view, 0) + 1
            self.stats["requests"] += not counted
            detail = str(error)
            process = self._worker.process
            code = self._stop(ended=not detail)
            self.restarts += 1
            if isinstance(process, server.ForkedWorker) and process.server_lost:
                self.stats["crashed"] -= 1  # not the student's doing: the sandbox of every worker went
                self._crashes[view] -= 1
                raise self._internal(f"the fork server (the sandbox of the workers) ended while running {what}") \
                    from None
            if detail:
                raise WorkerCrashed(f"{detail} while running {what}") from None
            if self.out_of_memory:
                raise WorkerCrashed(f"your code used more than {self.limits.memory_bytes >> 20} MiB of memory (files "
                                    f"in memory and shared memory included), and the kernel stopped it while running "
                                    f"{what}; use less memory") from None
            raise WorkerCrashed(f"your code ended the worker process ({describe_exit(code, self.plan.mode)}) "
                                f"while running {what}") from None

    def _retried(self, header: dict, arrays: list, timeout: float, what: str) -> tuple[dict, list]:
        """``_exchange``, run again on a fresh worker when the machine's load stopped it (``budget.MACHINE_RETRIES``).

        A call the load stopped was not charged; past the retries, MachineBusy: this test is not graded.
        """
        for attempt in range(MACHINE_RETRIES + 1):
            received, sent_frames = self._channel.received, self._channel.frames
            try:
                return self._exchange(header, arrays, timeout)
            except Timeout:
                if not self._budget.machine_busy:
                    raise
                # Nothing of an attempt the machine stopped is the student's: neither its time nor its bytes.
                self._channel.received, self._channel.frames = received, sent_frames
                self.stats["machine_busy"] = self.stats.get("machine_busy", 0) + 1
                self._stop()
                self.restarts += 1
                if attempt == MACHINE_RETRIES:
                    break
        budget = self._budget
        raise self._internal(f"{MachineBusy.PREFIX}: {what} had used {budget.last_cpu:.1f} s of its {timeout:g} s "
                             f"of CPU time after {budget.last_wall:.0f} s, {MACHINE_RETRIES + 1} times")

    # ------------------------------------------------------------------ imports and calls

    def _import(self, view: str, module: str) -> None:
        failures = self._failures if self._budget.account(view) == view else {}  # the diagnosis's: not kept
        key = (view, module)
        try:
            reply, _ = self._request({"op": "import", "view": view, "module": module}, [], f"importing {module}.py",
                                     counted=False)
        except BudgetExhausted as error:
            raise ImplementationError(str(error)) from None  # not remembered: the budget is the reason, not the module
        except TimeoutError:
            failures[key] = message = (f"importing {module}.py did not finish within {self.limits.call_timeout:g} s "
                                       "(an infinite loop at module level?)")
            raise ImplementationError(message) from None
        except WorkerCrashed as error:
            said = str(error).split(" while running ")[0]  # "... (exit code 3)", without the request's name
            failures[key] = message = said.replace("your code ended", f"importing {module}.py ended")
            raise ImplementationError(message) from None
        if reply.get("status") != "ok":
            failures[key] = message = str(reply.get("message", f"importing {module}.py failed"))
            raise ImplementationError(message)
        callables = reply.get("callables")
        self._callables[key] = {n for n in callables if isinstance(n, str)} if isinstance(callables, list) else set()

    def _signature(self, name: str) -> inspect.Signature | None:
        """The API's signature of ``name`` (from the reference), so failure messages name arguments."""
        try:
            return inspect.signature(self._callbacks.implementation().function(name, name))
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

    def _call(self, view: str, module: str, name: str, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True
        arrays: list = []
        functions: list[Callable[..., Any]] = []
        payload = codec.encode([list(args), kwargs], arrays, functions)
        header = reached.asked({"op": "call", "view": view, "module": module, "function": name, "payload": payload,
                                "kept": True})
        if (tokens := self._kept.tokens(arrays)) is not None:  # arrays the worker gave, passed back (kept.Sent.take)
            header["tokens"] = tokens
        steps = self._watched.prepare(header, functions, module, args, kwargs, self._signature, self._budget.call_left)
        self._callbacks.grading_functions = functions
        try:
            reply, reply_arrays = self._request(header, arrays, f"{name}()")
        finally:
            self._callbacks.grading_functions = []
        reply = steps.claims_dropped(reply) if steps is not None else reply
        reached.note(reply, view, students=self.path != self.reference)  # for the blame: names only, checked
        status = reply.get("status")
        result = self._call_result(name, reply, reply_arrays, arrays, args, kwargs) if status == "ok" else None
        if steps is not None:
            steps.note(name, result, status == "ok")
        if status == "ok":
            return result
        if status == "error":
            info = reply["error"] if isinstance(reply.get("error"), dict) else {}
            if info.get("type") == "SystemExit":
                self.stats["crashed"] += 1  # said in the row's status, as an exit that ends the worker is
                raise WorkerCrashed(str(info.get("message")))
            raise codec.rebuild_exception(info)
        raise WorkerCrashed(str(reply.get("message", f"the worker could not run {name}()")))

    def _call_result(self, name: str, reply: dict, reply_arrays: list, sent: list, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True
        try:  # the result, and the in-place changes and generator states copied back onto the arguments
            self._kept.resolve(reply.get(protocol.KEPT), reply_arrays, sent)  # the arrays it sent before, as they were
            result = codec.receive_result(reply.get("payload"), reply_arrays, args, kwargs)
        except (ValueError, KeyError, TypeError, IndexError, RecursionError, MemoryError, OverflowError) as error:
            raise WorkerCrashed(f"the worker sent a malformed result for {name}(): {error}") from None
        codec.reissue_warnings(reply.get("warnings"))
        return result

