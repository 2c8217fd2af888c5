"""``attention-kit grade --cluster ADDRESS``: the batch's students graded on a Dask distributed cluster.

Run by: the batch's process (``grader.grading.grade``). :func:`connect` reaches
the cluster (``tcp://host:8786``, or ``local:N`` for a ``LocalCluster`` of N
worker processes on this machine) before anything is graded, and checks every
worker: each prepares the kit once (``grader.grading.cluster_worker``, a
worker plugin) and says the fingerprint of its kit and course
(``grader.grading.portable.kit_fingerprint``); a worker whose fingerprint is not the batch's, or
that cannot isolate student code, is refused with one line. The
:class:`Engine` it returns has the signature of ``pool.run_jobs``: jobs in,
``(Job, Result)`` records out, as each finishes.

One task is one student: the job (its paths made portable, ``grader.grading.portable``)
and the prepared submission's files cross to a worker as plain data; the
worker grades it in its own pool of grading processes, under the same
sandbox and limits as local grading, and sends back the plain
:class:`~grader.grading.records.Result`. Only the batch's process writes
files (atomically, as it does for local grading), so a task run twice or a
worker killed half way can neither write a row twice nor half a row.

Faults: a worker that dies has its task graded again on another worker, once
(the scheduler's ``allowed-failures``, which the batch sets to
:data:`ALLOWED_FAILURES`); a student whose workers die again (KilledWorker) is
submitted once more as a new task (a death counts against every task the worker
held; the new task is not isolated from the others), and a second time ends
``not graded: ...`` with the reason; the batch goes on.

Dask is imported here only when a batch runs with ``--cluster`` (the extra ``[cluster]``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from grader.grading.portable import convert_result, kit_fingerprint, local_text, portable, roots, submission_files
from grader.grading.records import Job, Result

LOCAL = "local:"
# Seconds to reach the scheduler, and then for a first worker to be there.
CONNECT_TIMEOUT = 20.0
# How many worker deaths a student's task may be part of before it is not graded: the first death grades it
# again elsewhere, the second ends it (the scheduler's distributed.scheduler.allowed-failures).
ALLOWED_FAILURES = 1
# Tasks in flight per worker thread: enough to keep every worker busy, few enough that a class of 100,000 is not
# all in the scheduler's memory at once.
IN_FLIGHT = 4
# The row of a student the batch could not send, or whose task its client gave up on: the scheduler was lost.
LOST = ("the Dask cluster did not grade this submission: the batch lost its scheduler (the client closed after "
        "failing to reconnect); rerun to grade it")


class ClusterError(Exception):
    """The cluster cannot grade this batch; the message is one line saying why."""


# ---------------------------------------------------------------- the command


def add_engine_arguments(parser: Any) -> None:
    """Declare ``grade``'s options for grading past one machine: ``--cluster`` and ``--shard``."""
    parser.add_argument("--cluster", default=None, metavar="ADDRESS",
                        help="grade on a Dask distributed cluster: its scheduler (tcp://host:8786), or local:N for "
                             "N worker processes on this machine; the extra [cluster]; see docs/cluster.md")
    parser.add_argument("--shard", default=None, metavar="I/N",
                        help="grade only the I-th of N deterministic slices of the class (a Slurm array, a "
                             "Kubernetes indexed job, a CI matrix); merge with `attention-kit export OUT --merge "
                             "OUT-1 ... OUT-N`")


def connect_cluster(address: str | None, template: Job, echo: Any, jobs: int | None = None) -> Any:
    """The batch's engine: the pool's ``run_jobs`` without ``address``, else the connected cluster's.

    ``jobs`` (``--jobs``): on a cluster, at most that many students graded at once (the batch's share of a
    shared cluster); None: as many as the workers have threads. None after saying in one line why the cluster
    cannot grade (nothing was graded then).
    """
    if address is None:
        from grader.grading.pool import run_jobs

        return run_jobs
    try:
        engine = connect(address, template, echo)
    except ClusterError as error:
        echo(f"error: not graded: {error}")
        return None
    engine.limit = jobs
    echo(f"Cluster: {address}, {len(engine.client.nthreads())} Dask worker(s), kit {engine.fingerprint[:12]}"
         + (f", at most {jobs} student(s) at once" if jobs else ""))
    return engine


# ---------------------------------------------------------------- the engine


def parse_address(address: str) -> tuple[str, int]:
    """``(scheduler address, 0)`` or ``("", N)`` for ``local:N``.

    Raises
    ------
    ClusterError
        If ``address`` is neither a scheduler's address nor ``local:N`` with N >= 1.
    """
    if address.startswith(LOCAL):
        count = address.removeprefix(LOCAL)
        if not count.isdigit() or int(count) < 1:
            raise ClusterError(f"--cluster {address}: local:N needs a number of worker processes N >= 1")
        return "", int(count)
    if "://" not in address and ":" not in address:
        raise ClusterError(f"--cluster {address}: give a scheduler's address (tcp://host:8786) or local:N")
    return address, 0


# What the kit needs of Dask (docs/cluster.md gives them as a YAML file for the machines of a cluster of your own).
DASK_SETTINGS = {
    "distributed.worker.daemon": False,  # a worker starts the pool's grading processes
    "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,  # a student's task is run again once, elsewhere
    # A worker holds only the student it grades (Dask's default, 1.1, sends a thread a second task to queue): a
    # death counts against every task the worker held, so a worker killed by one student took a queued classmate
    # with it, and two such deaths left the classmate "not graded" (CI, test_cluster.py, once).
    "distributed.scheduler.worker-saturation": 1.0,
    # Dask's own watchers, sized for tasks of milliseconds; ours take seconds. At their defaults (a stack sample
    # every 10 ms, a health check every 20 ms, a system sample every 500 ms) they cost a LocalCluster of two
    # workers about 0.12 core-s per second, more than grading (benchmarks/cluster_cost.py).
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    # A nanny sets these in its worker's environment (one BLAS thread, an eager malloc trim), which the grading
    # processes would inherit: grading then costs about a third more CPU than on this machine. None here; and
    # every worker takes this machine's values of ENVIRONMENT (grader.grading.cluster_worker.KitPlugin).
    "distributed.nanny.pre-spawn-environ": {},
}
# What a worker's grading processes must share with local grading: how numpy's threads and malloc behave.
ENVIRONMENT = ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _dask_config() -> None:
    """Set :data:`DASK_SETTINGS` in this process (and so in a ``local:N`` cluster's scheduler and workers)."""
    import dask

    dask.config.set(DASK_SETTINGS)


# local:N: seconds between a worker's heartbeats. Dask sends one every 0.5 s up to ten workers (tasks of
# milliseconds); a student takes seconds, and a worker that dies is seen by its nanny and its closed connection,
# not by a missed heartbeat. At 0.5 s they were a third of what a LocalCluster of two costs beside grading.
LOCAL_HEARTBEAT = 5.0


def _slow_heartbeats() -> None:
    """Make the schedulers of this process ask their workers for a heartbeat every :data:`LOCAL_HEARTBEAT` s at most.

    Dask has no setting for it: the scheduler answers each heartbeat with
    ``distributed.scheduler.heartbeat_interval(workers)``. Only ``local:N`` calls
    this, whose scheduler runs in the batch's process; a cluster of your own keeps
    its scheduler's pace.
    """
    from distributed import scheduler

    dask_pace = scheduler.heartbeat_interval
    if getattr(dask_pace, "attention_kit", False):
        return

    def pace(workers: int) -> float:
        return max(LOCAL_HEARTBEAT, dask_pace(workers))

    pace.attention_kit = True  # type: ignore[attr-defined]
    scheduler.heartbeat_interval = pace


def start_local(count: int) -> Any:
    """A ``LocalCluster`` of ``count`` worker processes of one thread each, on the loopback, as the kit needs it.

    Quieter than Dask's own: heartbeats every :data:`LOCAL_HEARTBEAT` s, and no memory monitor in the workers
    and their nannies (``memory_limit=0``): each student's processes have the sandbox's memory limit, and a Dask
    worker holds one student's files at a time.
    """
    from distributed import LocalCluster

    _dask_config()
    _slow_heartbeats()
    return LocalCluster(n_workers=count, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=":0", silence_logs=40,  # logging.ERROR: a killed worker is ours to say
                        memory_limit=0, heartbeat_interval=f"{LOCAL_HEARTBEAT:g}s")


def connect(address: str, template: Job, echo: Any = print) -> Engine:
    """Reach the cluster at ``address`` and check its workers against ``template``'s kit and course.

    Raises
    ------
    ClusterError
        If Dask is not installed, the scheduler cannot be reached, no worker comes, or every worker is refused.
    """
    scheduler, count = parse_address(address)
    try:
        _dask_config()
        from distributed import Client
    except ImportError:
        raise ClusterError("--cluster needs Dask: pip install -e \".[cluster]\"") from None
    cluster = None
    try:
        if count:
            cluster = start_local(count)
            scheduler = cluster.scheduler_address
        client = Client(scheduler, timeout=CONNECT_TIMEOUT)
    except Exception as error:  # noqa: BLE001 - whatever the network says, one line and nothing graded
        if cluster is not None:
            cluster.close()
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {type(error).__name__}: "
                           f"{str(error).splitlines()[0] if str(error) else ''}"[:400]) from None
    engine = Engine(client, cluster, template, address)
    try:
        engine.check_workers(echo)
    except ClusterError:
        engine.close()
        raise
    except Exception as error:  # noqa: BLE001 - the scheduler went away, a worker broke: one line
        engine.close()
        raise ClusterError(f"the Dask cluster at {address} could not be prepared: {type(error).__name__}: "
                           f"{str(error)[:300]}") from None
    except BaseException:
        engine.close()
        raise
    return engine


class Engine:
    """A connected cluster whose workers hold this batch's kit: ``engine(jobs, processes, stall)`` grades jobs."""

    def __init__(self, client: Any, cluster: Any, template: Job, address: str) -> None:
        self.client, self.cluster, self.address = client, cluster, address
        self.fingerprint = kit_fingerprint(template)
        self.template = template
        self.task: Any = None  # the task each student is (a seam for the tests); cluster_worker.grade_on_worker
        self.limit: int | None = None  # --jobs: at most this many students in flight (None: the window's)
        self.echo: Any = lambda *args: None  # the batch's terminal (check_workers is given it)

    def check_workers(self, echo: Any) -> None:
        """Prepare the kit on every worker (a plugin, also for workers that join later); refuse the others."""
        self.echo = echo
        from grader import course
        from grader.curriculum import PART_ENV
        from grader.grading import cluster_worker

        try:
            self.client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
        except Exception:  # noqa: BLE001 - a TimeoutError, or the scheduler went away
            raise ClusterError(f"no Dask worker joined the scheduler at {self.address} within "
                               f"{CONNECT_TIMEOUT:g} s: start some with `dask worker {self.address}`") from None
        folder = course.active_folder()
        plugin = cluster_worker.KitPlugin(self.fingerprint, portable(self.template),
                                          str(folder) if folder else None, os.environ.get(PART_ENV, ""),
                                          {name: os.environ.get(name) for name in ENVIRONMENT})
        name = cluster_worker.plugin_name(self.fingerprint)  # one per kit, course and options
        self.client.register_plugin(plugin, name=name)
        with contextlib.suppress(Exception):  # a scheduler of your own: graded again once, as on local:N
            self.client.run_on_scheduler(_allow_failures, ALLOWED_FAILURES,
                                         DASK_SETTINGS["distributed.scheduler.worker-saturation"])
        verdicts = self.client.run(cluster_worker.verdict, name=name)
        refused = {worker: why for worker, why in verdicts.items() if why}
        for worker, why in refused.items():
            echo(f"refused: Dask worker {worker}: {why}")
        if refused:
            self.client.retire_workers(workers=list(refused), close_workers=True)
        if len(refused) == len(verdicts):
            raise ClusterError(f"every worker of the Dask cluster at {self.address} was refused "
                               "(see above); nothing was graded")
        self.task = cluster_worker.grade_on_worker
        self.share_answers()

    def share_answers(self, checked_on: str | None = None) -> None:
        """Give the workers the sealed answers of the kit's check (``grader.sandbox.sealed``) that they lack.

        The check records them in the cache of the machine that ran it: this one's, or ``checked_on``'s (a worker
        that has just run it: its answers are merged into this machine's first). Workers of other machines get
        them by a plugin (also those that join later). A speed-up only: whatever fails here costs time, never a
        grade. ``local:N`` shares this machine's cache already.
        """
        import hashlib

        from grader.grading import cluster_worker, kit_check
        from grader.sandbox import sealed

        path = kit_check.answers_file()
        if self.cluster is not None or path is None:
            return
        try:
            states = self.client.run(cluster_worker.answers_state, path.name, self.fingerprint)
            data = path.read_bytes() if path.is_file() else b""
            if checked_on and states.get(checked_on) not in (None, "", cluster_worker.OTHER,
                                                              hashlib.sha256(data).hexdigest()):
                found = self.client.run(cluster_worker.read_answers, path.name, self.fingerprint,
                                        workers=[checked_on]).get(checked_on)
                if found:
                    sealed.merge_into(path, sealed.parse(found))
                    data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if data and len(data) <= sealed.MAX_TABLE_BYTES + (16 << 20) and any(
                    state not in (cluster_worker.OTHER, digest) for state in states.values()):
                self.client.register_plugin(cluster_worker.AnswersPlugin(self.fingerprint, path.name, digest, data),
                                            name=cluster_worker.answers_plugin_name(self.fingerprint))
        except Exception as error:  # noqa: BLE001 - answers known in advance only save time: said, never fatal
            self.echo(f"note: fair grading's answers known in advance were not shared with the workers "
                      f"({type(error).__name__}: {str(error)[:160]}): they grade the same, asking the reference "
                      "through their grading processes")

    def __call__(self, jobs: Iterable[Job], processes: int, stall: float) -> Iterator[tuple[Job, Result]]:
        """Grade ``jobs`` on the cluster; yield ``(job, result)`` as each finishes.

        ``processes`` is the local pool's; here :attr:`limit` (``--jobs``) caps the students in flight.
        """
        from distributed import as_completed

        from grader.grading import cluster_worker

        here = roots()
        pending = iter(list(jobs))
        run = uuid.uuid4().hex[:12]
        counter = itertools.count()
        window = max(1, IN_FLIGHT * sum(self.client.nthreads().values()))
        window = min(window, self.limit) if self.limit else window
        futures: dict[Any, Job] = {}
        completed = as_completed()
        # A worker's death counts against every task it held, the student beside the one that killed it too (and
        # the kit's check): a KilledWorker is submitted once more as a new task, and only a second one ends the row.
        again: set[int] = set()

        # Students not sent: the client was not connected to its scheduler when their turn came (Dask keeps a task
        # submitted while it reconnects or closes, and it never finishes: the batch waited for it forever).
        unsent: list[Job] = []

        def submit(job: Job) -> None:
            if self.client.status != "running":
                unsent.append(job)
                return
            try:
                future = self.client.submit(self.task, portable(job, here), submission_files(job.folder),
                                            self.fingerprint, stall, key=f"attention-kit-{run}-{next(counter)}",
                                            pure=False, retries=0)
            except Exception:  # noqa: BLE001 - a client closed meanwhile (ClosedClientError): the cluster is gone
                unsent.append(job)
                return
            futures[future] = job
            completed.add(future)

        for job in itertools.islice(pending, window):
            submit(job)
        try:
            for future in self._finished(completed, futures, unsent, submit):
                if future is None:  # the client closed for good: nobody left is graded, each is a row "not graded"
                    for job in [*futures.values(), *unsent, *pending]:
                        yield job, Result(error=LOST)
                    futures.clear()
                    return
                job = futures.pop(future)
                killed = future.status == "error" and type(future.exception()).__name__ == "KilledWorker"
                result = self._result(future, here)
                if job.kit_check and not killed and not result.error:  # its answers, for the other machines
                    with contextlib.suppress(Exception):
                        self.share_answers(next(iter(self.client.who_has(future).get(future.key, ())), None))
                future.release()
                # A worker that joined after the batch's check and was refused (another kit) leaves the cluster:
                # the student it had is the batch's to grade elsewhere, not a row "not graded".
                refused = (result.error or "").startswith("Dask worker ") and cluster_worker.REFUSED in result.error
                if (killed or refused) and id(job) not in again:
                    again.add(id(job))
                    submit(job)
                    continue
                for following in itertools.islice(pending, 1):
                    submit(following)
                yield job, result
        finally:  # one batch per connection: the stream's end is the engine's
            for future in futures:
                with contextlib.suppress(Exception):  # (a closed client refuses to cancel)
                    future.cancel()
            self.close()

    def _finished(self, completed: Any, futures: dict[Any, Job], unsent: list[Job], submit: Any) -> Iterator[Any]:
        """The futures of ``completed`` as each finishes; then None if the client closed with students left.

        ``as_completed`` alone waits forever for a task submitted while the client was losing its scheduler: here
        the client's state is looked at between results. Students not sent while it reconnected are sent once it
        is connected again.
        """
        while True:
            batch = completed.next_batch(block=False)
            if batch:
                yield from batch
                continue
            if not futures and not unsent:
                return
            status = self.client.status
            if status == "running" and unsent:
                waiting = list(unsent)
                unsent.clear()
                for job in waiting:
                    submit(job)
                continue
            if status == "closed" and not completed.has_ready():
                # What a closed client still holds never finishes (it cancelled what the scheduler had: those
                # came above).
                yield None
                return
            with completed.thread_condition:  # as as_completed waits: woken by a result, else every 0.1 s
                completed.thread_condition.wait(timeout=0.1)

    def _result(self, future: Any, here: list[tuple[str, Path]]) -> Result:
        """The student's result, or why the cluster could not grade them (a "not graded" row, never a zero)."""
        from distributed import KilledWorker

        try:
            result = future.result()
        except KilledWorker as error:  # its workers died (killed, out of memory) while they had it, each time
            last, times = getattr(error, "last_worker", None), getattr(error, "allowed_failures", ALLOWED_FAILURES) + 1
            return Result(error=f"the Dask workers grading it died {times} times, twice over (KilledWorker, "
                                f"last {getattr(last, 'address', last) or 'unknown'}); rerun to grade it again")
        except Exception as error:  # noqa: BLE001 - lost scheduler, cancelled task: one row, the batch goes on
            return Result(error=f"the Dask cluster did not grade this submission: {type(error).__name__}: "
                                f"{str(error)[:300]}")
        if not isinstance(result, Result):
            return Result(error=f"the Dask worker sent back {type(result).__name__}, not a result")
        return convert_result(result, lambda text: local_text(text, here))

    def close(self) -> None:
        """Leave the cluster (and stop it, if it is this batch's ``local:N``)."""
        with contextlib.suppress(Exception):
            self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()


def _allow_failures(count: int, saturation: float = 1.0, dask_scheduler: Any = None) -> None:
    """On the scheduler: a task may be part of ``count`` worker deaths before it fails (KilledWorker).

    And a worker thread holds ``saturation`` tasks (``DASK_SETTINGS``' worker-saturation): a scheduler of the
    instructor's own, started without the kit's settings, then keeps no classmate queued behind a student
    whose code kills its worker.
    """
    dask_scheduler.allowed_failures = count
    dask_scheduler.WORKER_SATURATION = saturation
