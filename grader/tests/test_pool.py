"""The pool of grading processes: at most --jobs of them, and wall time that only detects a stall.

A slow student holds one slot within their own budget; a grading process that finishes tests is never
stopped, however long the student takes in all; a stall is retried when the machine was busy, and is
otherwise the grader's failure, never the student's zero.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.grading import pool
from grader.grading.records import Job, suite_files
from grader.suite import graded_suite
from grader.tests.test_trust import copy_reference

SLEEPY_SOFTMAX = ("\n\n_honest_softmax, _calls = softmax, [0]\n\n\ndef softmax(x, axis=-1):\n    import time\n\n"
                  "    _calls[0] += 1\n    if _calls[0] > {answered}:\n        time.sleep({seconds})\n"
                  "    return _honest_softmax(x, axis)\n")


def _jobs(*folders: tuple[str, Path]) -> list[Job]:
    suite = graded_suite(None, ["softmax"])[0]
    return [Job(student=name, folder=str(path), files=tuple(f.path for f in suite), suite=suite_files(suite),
                budget=60.0) for name, path in folders]


def _sleepy(folder: Path, seconds: float, answered: int = 0) -> Path:
    """The reference, its softmax sleeping ``seconds`` at each call past the first ``answered`` of each worker."""
    student = copy_reference(folder)
    with open(student / "softmax.py", "a", encoding="utf-8") as module:
        module.write(SLEEPY_SOFTMAX.format(seconds=seconds, answered=answered))
    return student


@pytest.fixture
def started(monkeypatch):
    """The grading processes the pool starts, counted."""
    count = []
    original = pool._Process.__init__

    def counting(self, context):
        count.append(1)
        original(self, context)

    monkeypatch.setattr(pool._Process, "__init__", counting)
    pool.stop_idle()  # no process of an earlier test is reused: every one is counted
    yield count
    pool.stop_idle()


def test_a_student_who_keeps_finishing_tests_is_never_stopped_by_wall_time(tmp_path, started):
    # Each test of this student takes well under the stall limit, all of them together far more: wall time
    # only detects a stall (before, a whole-student wall limit made such a student the kit's failure).
    jobs = _jobs(("patient", _sleepy(tmp_path / "patient", 0.25)))
    [(job, result)] = list(pool.run_jobs(jobs, processes=1, stall=6.0))
    assert result.error is None, result.error
    assert result.seconds > 6.0  # longer than the stall limit in all
    assert all(record.outcome == "passed" for record in result.records)
    assert len(started) == 1


def test_at_most_jobs_grading_processes_run(tmp_path, started):
    # A slow student holds its slot; the honest one waits for it rather than costing another process.
    jobs = _jobs(("slow", _sleepy(tmp_path / "slow", 0.2)), ("honest", copy_reference(tmp_path / "honest")))
    finished = [(job.student, result.error) for job, result in pool.run_jobs(jobs, processes=1, stall=60.0)]
    assert finished == [("slow", None), ("honest", None)]
    assert len(started) == 1


def test_a_stall_while_the_machine_is_busy_is_retried_then_reported_as_the_machines(tmp_path, started,
                                                                                     monkeypatch):
    monkeypatch.setattr(pool, "_machine_busy", lambda waited, stalled: True)
    jobs = _jobs(("stuck", _sleepy(tmp_path / "stuck", 4.0, answered=2)))  # (a first test ends, then stalls)
    [(job, result)] = list(pool.run_jobs(jobs, processes=1, stall=1.5))
    assert result.error.startswith(pool.MACHINE_BUSY), result.error
    assert "rerun" in result.error
    assert len(started) == 1 + pool.STALL_RETRIES + 1  # the first, one per retry, and the last one's successor


def test_a_stall_of_an_idle_machine_is_the_graders_failure_at_once(tmp_path, started, monkeypatch):
    monkeypatch.setattr(pool, "_machine_busy", lambda waited, stalled: False)
    stuck = _sleepy(tmp_path / "stuck", 4.0, answered=2)  # (a first test ends, then every call stalls)
    jobs = _jobs(("stuck", stuck), ("honest", copy_reference(tmp_path / "honest")))
    results = {job.student: result for job, result in pool.run_jobs(jobs, processes=1, stall=1.5)}
    assert results["stuck"].error == "the grading process gave no result within 1.5 s"
    assert results["honest"].error is None  # the batch went on, on a fresh process
    assert len(started) == 2


def test_a_stall_is_the_machines_when_the_process_waited_for_a_cpu_or_the_load_was_over_the_cores(monkeypatch):
    import os

    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert pool._machine_busy(waited=5.0, stalled=10.0)
    assert not pool._machine_busy(waited=0.1, stalled=10.0)
    assert not pool._machine_busy(waited=None, stalled=10.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count() or 1) + 1, 0.5, 0.5))
    assert pool._machine_busy(waited=0.0, stalled=10.0)
    assert pool.run_queue_seconds(os.getpid()) >= 0.0
    assert pool.run_queue_seconds(-1) is None


def test_a_grading_process_whose_batch_died_ends_quietly_and_closes_its_spares(monkeypatch):
    # A Dask worker killed half way (grade --cluster) leaves its pool's grading processes with a closed pipe: each
    # printed an EOFError traceback and skipped close_spares(), whose scratch folder must not outlive it.
    import multiprocessing
    import signal
    import sys

    from grader.curriculum import ROOT
    from grader.grading import implementation, recorder

    closed: list[bool] = []
    monkeypatch.setattr(implementation, "close_spares", lambda: closed.append(True))
    monkeypatch.setattr(recorder, "on_test_done", recorder.on_test_done)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    parent, child = multiprocessing.Pipe()
    parent.close()  # the batch (the Dask worker) is gone
    handler = signal.getsignal(signal.SIGINT)
    try:
        pool._worker_main(child, str(ROOT))
    finally:
        signal.signal(signal.SIGINT, handler)
    assert closed == [True]


def test_a_grading_process_tells_its_progress_at_most_every_quarter_second_and_each_jobs_first_test_at_once(
        monkeypatch):
    # A message per test (about 200 a student) woke the batch's process, or a Dask worker's, as often: the stall
    # detector needs seconds, so the tests finished within PROGRESS_EVERY of the last message told say nothing.
    sent: list[object] = []

    class Connection:
        send = staticmethod(sent.append)

    clock = [1000.0]
    monkeypatch.setattr(pool.time, "monotonic", lambda: clock[0])
    done = pool._progress(Connection())
    for _ in range(20):  # 20 tests in 0.2 s: the first is told
        done()
        clock[0] += 0.01
    assert sent == [pool.PROGRESS]
    clock[0] += pool.PROGRESS_EVERY
    done()  # a quarter of a second later: told
    assert sent == [pool.PROGRESS] * 2
    pool._progress(Connection())()  # the next job's first test: told at once, however soon
    assert sent == [pool.PROGRESS] * 3
