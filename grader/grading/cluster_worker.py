"""The kit on a Dask worker: the plugin that prepares and checks it once, and the task that grades one student.

Run by: a Dask worker process (``dask worker``, or a ``LocalCluster``'s), for
the batch of ``grade --cluster`` (``grader.grading.cluster``). Imported only
there: it imports Dask at the top.

:class:`KitPlugin` runs once per worker (and again on a worker that joins or
restarts): it activates the batch's course, checks that student code can be
isolated here (``grader.sandbox.limits.choose``, bubblewrap as for local
grading) and that the kit and course here have the batch's fingerprint;
:func:`verdict` says why the worker is refused (None if it is not).
:func:`grade_on_worker` is one task: it writes the student's files into a
private folder of this worker and grades them in this worker's own pool of
grading processes (``grader.grading.pool.run_jobs``): student code runs in the
pool's sandboxed workers, never in the Dask worker's process. It returns the
plain :class:`~grader.grading.records.Result` and writes nothing else: the
batch's process writes every file.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import shutil
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from distributed import WorkerPlugin, get_worker

from grader.grading.portable import convert_result, kit_fingerprint, localized, portable_text, roots
from grader.grading.records import Job, Result
from grader.grading.scratch import new_folder

PLUGIN = "attention-kit"
# What a worker says of the batch's sealed answers file when its own has another name (another reference, Python
# or numpy than the batch's: answers of no use there).
OTHER = "other"
# How a task's result says that its worker refused it (the batch then sends the student to another worker, once).
REFUSED = "refused: "
# The course folder the worker's own environment names (for a checkout that lies elsewhere than the batch's),
# read before any batch's plugin set the variable for its tasks.
_WORKER_COURSE = os.environ.get("ATTENTION_KIT_COURSE")


def plugin_name(fingerprint: str) -> str:
    """The worker plugin of one kit, course and set of options: batches with others share the cluster."""
    return f"{PLUGIN}-{fingerprint[:24]}"
# One student at a time per worker process: the pool keeps its grading processes for the next job, per process.
# Start workers with one thread each (`dask worker --nthreads 1 --nworkers N`); more threads only wait here.
_ONE_AT_A_TIME = threading.Lock()


class KitPlugin(WorkerPlugin):
    """The batch's kit and course, prepared and checked once per worker."""

    def __init__(self, fingerprint: str, template: Job, course: str | None, part: str,
                 environment: dict[str, str | None]) -> None:
        self.fingerprint, self.template, self.course, self.part = fingerprint, template, course, part
        self.environment = environment  # the batch's values of grader.grading.cluster.ENVIRONMENT
        self.refused: str | None = "not set up"
        self.scratch = ""
        self.answers: Path | None = None  # where this worker's grading processes read the sealed answers

    def setup(self, worker: Any) -> None:
        """Activate the course and the part, make this worker's scratch folder, check the kit (never raises)."""
        try:
            self.refused = self._check()
        except Exception as error:  # noqa: BLE001 - a worker that cannot be checked is refused, with the reason
            self.refused = f"its kit could not be checked: {type(error).__name__}: {str(error)[:200]}"
        if self.refused is None:
            from grader.grading.kit_check import answers_file

            self.answers = answers_file()  # (this worker's cache and reference, the course active)
            # The workers' scratch folders (grader.grading.session.use_scratch; a killed worker's: grading.scratch)
            self.scratch = str(new_folder("run", listable=False))

    def activate(self) -> None:
        """Make this process the batch's: its course, its part, numpy's threads and malloc as in local grading.

        At setup and before each of its tasks: a batch of another course or part may have graded here since
        (each has its own plugin); the pool's idle grading processes of another course are not reused.
        """
        from grader import course
        from grader.curriculum import PART_ENV

        if self.course is None:
            os.environ.pop(course.COURSE_ENV, None)
        else:
            course.activate(Path(_WORKER_COURSE or self.course))
        if self.part:
            os.environ[PART_ENV] = self.part
        else:
            os.environ.pop(PART_ENV, None)
        for name, value in self.environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _check(self) -> str | None:
        from grader import course
        from grader.curriculum import make_importable, reference_dir
        from grader.sandbox.limits import IsolationUnavailable, choose

        if multiprocessing.current_process().daemon:
            return ("it is a daemonic process and cannot start grading processes: start the workers with "
                    "DASK_DISTRIBUTED__WORKER__DAEMON=False")
        if self.course is not None:
            folder = Path(_WORKER_COURSE or self.course)
            if not (folder / course.COURSE_FILE).is_file():
                return f"no course folder {folder} here (set {course.COURSE_ENV} on the worker)"
        self.activate()
        make_importable()
        if reference_dir() is None:
            return "no reference solutions here (grade from a checkout, or give the worker the course folder)"
        try:
            choose(self.template.policy)
        except IsolationUnavailable as error:
            return f"student code cannot be isolated here: {str(error).splitlines()[0][:200]}"
        here = kit_fingerprint(localized(self.template, course=course.settings()))
        if here != self.fingerprint:
            return (f"its kit or course is not the batch's (fingerprint {here[:12]}, the batch's "
                    f"{self.fingerprint[:12]}): install the same kit and course on it")
        return None

    def teardown(self, worker: Any) -> None:
        """Stop this worker's idle grading processes, remove its scratch folder."""
        from grader.grading.pool import stop_idle

        with _ONE_AT_A_TIME:
            stop_idle()
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


class AnswersPlugin(WorkerPlugin):
    """The batch's sealed answers (``grader.sandbox.sealed``), merged into a worker's own on every worker.

    The kit's check records them on the machine that ran it, in its cache; a worker of another machine without
    them answers every callback through its grading process: the same grades, at a second of wall time and about
    0.4 CPU-s more a student. Written where that worker's grading processes read them, merged with what it has.
    """

    def __init__(self, fingerprint: str, name: str, digest: str, data: bytes) -> None:
        self.fingerprint, self.name, self.digest, self.data = fingerprint, name, digest, data

    def setup(self, worker: Any) -> None:
        """Merge the answers into this worker's file of the same name (never raises: they only save time)."""
        with contextlib.suppress(Exception):
            path = _answers_path(worker, self.fingerprint)
            if path is not None and path.name == self.name and _digest(path) != self.digest:
                from grader.sandbox import sealed

                sealed.merge_into(path, sealed.parse(self.data))
        self.data = b""  # kept by the scheduler for workers that join later, not by each worker


def answers_plugin_name(fingerprint: str) -> str:
    """The answers plugin of one kit and course (registered again, it replaces the one before)."""
    return f"{PLUGIN}-answers-{fingerprint[:24]}"


def _answers_path(worker: Any, fingerprint: str) -> Path | None:
    plugin = worker.plugins.get(plugin_name(fingerprint))
    return None if plugin is None or plugin.refused is not None else plugin.answers


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def answers_state(name: str, fingerprint: str, dask_worker: Any = None) -> str:
    """The sha256 of this worker's sealed answers ("" without them; :data:`OTHER` under another name).

    Run by ``client.run`` (in the worker's event loop, beside a task: it reads, never changes, the environment).
    """
    path = _answers_path(dask_worker, fingerprint)
    return OTHER if path is None or path.name != name else _digest(path)


def read_answers(name: str, fingerprint: str, dask_worker: Any = None) -> bytes:
    """The content of this worker's sealed answers file ``name`` (b"" without it), for the batch (``client.run``)."""
    path = _answers_path(dask_worker, fingerprint)
    try:
        return path.read_bytes() if path is not None and path.name == name else b""
    except OSError:
        return b""


def verdict(dask_worker: Any, name: str) -> str | None:
    """Why this worker is refused (None if it grades), as its plugin ``name`` found (run by ``client.run``)."""
    plugin = dask_worker.plugins.get(name)
    return "the kit's plugin is not set up" if plugin is None else plugin.refused


def _write_files(folder: Path, files: tuple[tuple[str, bytes], ...]) -> None:
    """Write the submission's files under ``folder`` (relative names only: the batch made them)."""
    for name, content in files:
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"a submission file name that leaves its folder: {name!r}")
        target = folder.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def grade_on_worker(job: Job, files: tuple[tuple[str, bytes], ...], fingerprint: str, stall: float) -> Result:
    """One task: grade one student's submission here, in this worker's own pool; the plain result, nothing written.

    ``job`` is portable (``grader.grading.cluster.portable``), ``files`` the prepared submission's files.
    """
    from grader.grading.pool import run_jobs

    worker = get_worker()
    plugin = worker.plugins.get(plugin_name(fingerprint))
    why = "the batch's kit is not set up on it" if plugin is None else plugin.refused
    if why is not None:
        if plugin is not None and plugin.refused is not None:  # joined after the batch's check: it leaves now
            worker.loop.add_callback(worker.close, nanny=True, executor_wait=False,
                                     reason=f"attention-kit: refused: {why}"[:200])
        return Result(error=f"Dask worker {worker.address} {REFUSED}{why}")
    with _ONE_AT_A_TIME:
        plugin.activate()  # this batch's course and part (another batch's task may have run here since)
        here = roots()  # this machine's kit and, now, this batch's course: where its "<course>/..." paths lie
        private = new_folder("submission")
        try:
            folder = private / (Path(job.folder).name or "submission")
            folder.mkdir()
            _write_files(folder, files)
            answers = str(plugin.answers or "") if job.kit_check else ""  # the check records into this worker's
            local = localized(job, here, folder=str(folder), scratch=plugin.scratch, answers=answers)
            results = [result for _, result in run_jobs([local], 1, stall)]
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(private)
    if not results:  # cannot happen: the pool yields one result per job
        return Result(error="the Dask worker's pool gave no result")
    return convert_result(results[0], lambda text: portable_text(text, here))
