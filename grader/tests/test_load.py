"""The same grade on a busy machine: a small class graded idle, and again at a low priority beside a CPU hog.

The budgets count CPU time (``grader.sandbox.budget``), so neither the other
processes of the machine nor the grader's own priority may change a score or a
status. The hog is bounded: one busy process per core that stops by itself
(and is killed at the end of the test in any case). No wall-clock threshold:
the grades are compared, not the time they took.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grader.curriculum import ROOT
from grader.tests.waiting import HANG_SECONDS

# One xdist worker runs this file: the class graded idle (a module fixture) is then graded once, not once per
# worker.
pytestmark = pytest.mark.xdist_group("test_load")

HOG_SECONDS = 600  # a hog ends by itself after this long, whatever happens to the test
# A hog also dies with the test's process (Linux's parent-death signal): a run stopped half way leaves none behind.
HOG = ("import ctypes, signal, time\n"
       "ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
       "end = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n")


def _class(folder: Path) -> Path:
    """Three students of masks: honest, wrong (the upper triangle), and one whose causal_mask loops."""
    for name in ("honest", "wrong", "looping"):
        shutil.copytree(ROOT / "solutions", folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    wrong = folder / "wrong" / "masks.py"
    wrong.write_text(wrong.read_text(encoding="utf-8").replace("np.tril(", "np.triu(", 1), encoding="utf-8")
    with open(folder / "looping" / "masks.py", "a", encoding="utf-8") as module:
        module.write("\n\ndef causal_mask(n):\n    while True:\n        pass\n")
    return folder


def _grade(submissions: Path, out: Path, niceness: int) -> tuple[int, list[dict[str, str]], str]:
    command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out), "--exercise", "masks",
               "--jobs", "2", "--force"]
    done = subprocess.run(["nice", "-n", str(niceness), *command] if niceness else command, cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_SECONDS)  # a backstop only
    with open(out / "grades.csv", newline="", encoding="utf-8") as table:
        rows = sorted(csv.DictReader(table), key=lambda row: row["student"])
    return done.returncode, rows, done.stdout[-3000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> tuple[Path, int, list[dict[str, str]], str]:
    """The class graded on the machine as it is (no hog, no nice): the gradebook to compare with (a fixture of
    its own, so that the busy grading's test does not also hold this one)."""
    folder = tmp_path_factory.mktemp("load")
    submissions = _class(folder / "class")
    return (submissions, *_grade(submissions, folder / "idle", 0))


def test_the_class_graded_idle_is_what_it_seems(idle):
    _, idle_code, rows, said = idle
    assert idle_code == 0, said
    assert [row["student"] for row in rows] == ["honest", "looping", "wrong"]
    scores = {row["student"]: float(row["score"]) for row in rows}
    assert scores["honest"] == float(rows[0]["max_score"]) > scores["wrong"] > 0  # the class is what it seems
    assert 0 < scores["looping"] < scores["honest"] and "timed out" in rows[1]["status"]


def test_a_busy_machine_and_a_low_priority_give_the_same_gradebook(idle, tmp_path):
    submissions, idle_code, idle, said = idle
    assert idle_code == 0, said
    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=HOG_SECONDS)], start_new_session=True)
            for _ in range(os.cpu_count() or 1)]
    try:
        busy_code, busy, said = _grade(submissions, tmp_path / "busy", 10)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert busy_code == 0, said
    assert busy == idle  # every score and every status, to the digit


def test_a_courses_limits_are_options_printed_on_the_limits_line(tmp_path):
    from grader.sandbox.limits import Limits, course_limits

    limits = course_limits(30, 2.5, 512)
    assert (limits.student_seconds, limits.call_timeout, limits.memory_bytes) == (30.0, 2.5, 512 << 20)
    defaults = Limits()
    assert course_limits(defaults.student_seconds, defaults.call_timeout, defaults.memory_bytes >> 20) == defaults
    shutil.copytree(ROOT / "solutions", tmp_path / "class" / "ada", ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
               "--exercise", "softmax", "--jobs", "1", "--call-budget", "2.5", "--memory", "512", "--budget", "30"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    limits_lines = [line for line in done.stdout.splitlines() if line.startswith("Limits: ")]
    expected = "Limits: 2.5 CPU s per call, 30 CPU s per exercise, 20 s for the diagnosis, 512 MiB memory"
    assert limits_lines and all(line.startswith(expected) for line in limits_lines), limits_lines
    refused = subprocess.run([*command[:-6], "--memory", "10"], cwd=ROOT, capture_output=True, text=True,
                             timeout=HANG_SECONDS)
    assert refused.returncode == 2 and "--memory at least 64" in refused.stderr


def test_a_students_own_run_stops_a_call_past_its_cpu_budget(tmp_path):
    from tests.kit import FUNCTION_TIMEOUTS, ImplementationError, LocalImplementation

    folder = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    with open(folder / "masks.py", "a", encoding="utf-8") as module:
        module.write("\n\ndef causal_mask(n):\n    while True:\n        pass\n")
    (folder / "positional.py").write_text("while True:\n    pass\n", encoding="utf-8")  # a loop at import
    implementation = LocalImplementation(folder, call_seconds=0.3)
    causal_mask = implementation.function("masks", "causal_mask")
    for _ in range(FUNCTION_TIMEOUTS):
        with pytest.raises(TimeoutError, match=r"causal_mask\(\) did not finish within 0.3 s: an infinite loop\?"):
            causal_mask(3)
    with pytest.raises(TimeoutError, match=r"causal_mask\(\) was not run: your code already ran out of time 2 times"):
        causal_mask(3)  # at once: a loop costs a run a few budgets, not one per test
    with pytest.raises(ImplementationError, match=r"importing positional.py did not finish within 0.3 s"):
        implementation.function("positional", "alibi_bias")
    assert implementation.function("softmax", "softmax")(np.zeros(2)).tolist() == [0.5, 0.5]  # the rest still runs


def test_a_call_stopped_past_its_cpu_budget_says_how_much_cpu_it_used():
    # A loop uses its CPU budget in as much wall time; threads use it faster (the budget counts them all), a
    # sleep hardly at all: the message says which, so torch on two threads is not taken for an infinite loop.
    from tests.kit import call_budget, cpu_used

    with pytest.raises(TimeoutError, match=r"^f\(\) did not finish within 0.2 s: an infinite loop\? \(it used 0\.\d s "
                                           r"of CPU time in \d+\.\d s"):
        with call_budget("f()", 0.2):
            while True:
                pass
    assert "several threads at once" in cpu_used(4.0, 2.0) and "torch.set_num_threads(1)" in cpu_used(4.0, 2.0)
    assert "mostly waited" in cpu_used(0.1, 2.0)
    assert cpu_used(1.9, 2.0) == "it used 1.9 s of CPU time in 2.0 s"
    # A loop on a busy machine: 5 s of CPU in 13.7 s, 8.7 of them waiting for a CPU. It was told "it mostly waited
    # (a sleep, input, a lock)" (a hostile round on a loaded 2-core machine): the waits were the machine's.
    said = cpu_used(5.0, 13.7, 8.7)
    assert said == ("it used 5.0 s of CPU time in 13.7 s (8.7 s of it waiting for a CPU: the machine was busy)"), said
    assert "mostly waited" in cpu_used(0.5, 13.7, 8.7)  # asleep for most of the time it was not queued


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="the run-queue delay is Linux's")
def test_a_students_own_run_stops_a_sleeping_call_and_never_a_waiting_one(monkeypatch):
    import time

    from tests import kit

    def sleeper():
        time.sleep(3)

    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"sleeper\(\) did not finish within 0.3 s"):
        with kit.call_budget("sleeper()", 0.3):
            sleeper()
    assert time.monotonic() - started < 2.5  # about twice its budget asleep, not the old 8 times plus 10 s

    def spin(cpu_seconds):
        end = time.process_time() + cpu_seconds
        while time.process_time() < end:
            pass

    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=20)]) for _ in range(os.cpu_count() or 1)]
    try:  # under the load of the hogs, wall time stretches past the budget: the CPU time does not
        with kit.call_budget("spin()", 0.3):
            spin(0.15)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

    # A call whose every wall second was spent waiting for a CPU (as the kernel reports it) is the machine's.
    begun = time.monotonic()
    monkeypatch.setattr(kit, "run_queue_seconds", lambda: time.monotonic() - begun)
    with kit.call_budget("waiting()", 0.3):
        time.sleep(1.0)
