"""The kit's diagnosis runs on a budget of its own: it never spends an exercise's time, and never runs unbounded.

At a submission's first failing test the kit probes every function of the manifest once (``tests.diagnosis.
observe_everything``, some 180 calls). Charged to each exercise's budget, as they were, a submission whose every
function sleeps just under the call limit held its grading process past the batch's stall limit (15 exercises of
60 s each), and its row came back "not graded" with the batch exiting 1; a slow but honest exercise could find
its budget spent by the feedback of another exercise's failure.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.curriculum import ROOT, load
from grader.sandbox.budget import DIAGNOSIS
from grader.sandbox.proxy import IsolatedImplementation, Limits
from tests.diagnosis import ObservationCut, observe_everything

SLEEP = 0.3  # seconds each function of the sleeping submission sleeps (then returns None)


def _sleeping_submission(folder: Path, log: Path | None = None) -> Path:
    """The reference, every function of which is replaced by one that sleeps ``SLEEP`` s and returns None.

    ``log``: each call writes a line there (run in this process only: a worker may write no such file).
    """
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    note = f"    open({str(log)!r}, 'a').write('call\\n')\n" if log is not None else ""
    for exercise in load().exercises:
        path = folder / exercise.module_file
        code = "".join(f"\n\ndef {name}(*args, **kwargs):\n    import time\n{note}    time.sleep({SLEEP})\n"
                       for name in exercise.functions)
        path.write_text(path.read_text(encoding="utf-8") + code, encoding="utf-8")
    return folder


def test_a_submission_that_sleeps_everywhere_costs_the_diagnosis_its_own_budget_only(tmp_path):
    limits = Limits(call_timeout=2.0, diagnosis_seconds=1.0)
    with IsolatedImplementation(_sleeping_submission(tmp_path / "sleeper"), limits=limits) as implementation:
        with pytest.raises(ObservationCut):
            observe_everything(implementation)
        spent = dict(implementation._budget.spent_by)
        requests = implementation.stats["requests"]
    # Charged to the diagnosis alone: no exercise lost a second of its own budget to the feedback.
    assert set(spent) == {DIAGNOSIS}, spent
    assert limits.diagnosis_seconds <= spent[DIAGNOSIS] < limits.diagnosis_seconds + 2 * SLEEP + 0.5, spent
    # Stopped once its budget was spent: a few sleeping calls, not one per probe of the manifest (about 180).
    assert requests <= limits.diagnosis_seconds / SLEEP + 3, requests


def test_modules_whose_imports_use_up_the_diagnosis_are_not_taken_for_stubs(tmp_path):
    """Imports that time out spend the diagnosis's budget; the modules not imported for want of time are no stubs."""
    folder = tmp_path / "slow_imports"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for exercise in load().exercises:
        path = folder / exercise.module_file
        path.write_text(path.read_text(encoding="utf-8") + "\nimport time\n\ntime.sleep(30)\n", encoding="utf-8")
    with IsolatedImplementation(folder, limits=Limits(call_timeout=1.0, diagnosis_seconds=1.5)) as implementation:
        with pytest.raises(ObservationCut):  # not an observation of 40 functions "not written yet"
            observe_everything(implementation)


def test_a_students_own_run_bounds_the_diagnosis_too(tmp_path, monkeypatch):
    """In a student's run (their own pytest) the diagnosis stops past ``DIAGNOSIS_BUDGET`` of time awake as well."""
    from tests import kit

    monkeypatch.setattr(kit, "DIAGNOSIS_BUDGET", 1.0)
    log = tmp_path / "calls.log"
    folder = _sleeping_submission(tmp_path / "sleeper", log)
    implementation = kit.LocalImplementation(folder, call_seconds=kit.CALL_BUDGET)
    with pytest.raises(ObservationCut):
        observe_everything(implementation)
    calls = len(log.read_text(encoding="utf-8").splitlines())
    assert 1 <= calls <= 1.0 / SLEEP + 2, calls  # a few sleeping calls, not one per probe (about 180)


def test_a_students_run_and_the_grader_give_the_diagnosis_the_same_time():
    from tests.kit import DIAGNOSIS_BUDGET

    assert Limits().diagnosis_seconds == DIAGNOSIS_BUDGET


def test_the_diagnosis_of_the_reference_fits_its_budget_and_charges_no_exercise(tmp_path):
    folder = tmp_path / "reference"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    with IsolatedImplementation(folder) as implementation:
        observation = observe_everything(implementation)
        spent = dict(implementation._budget.spent_by)
    assert observation.deviating_functions() == [], observation.deviating_functions()
    assert not observation.unwritten, observation.unwritten
    assert set(spent) == {DIAGNOSIS}, spent
    # The reference's whole observation costs about 0.3 s (CPU, or time awake); the budget is well above it.
    assert spent[DIAGNOSIS] < Limits().diagnosis_seconds / 4, spent


def test_a_batch_waits_for_a_test_as_long_as_its_budgets_allow(tmp_path, monkeypatch):
    """The stall limit (``--timeout``) is never below what one test may use: a course's larger budget raises it."""
    from grader.grading import grade
    from grader.grading.pool import run_jobs

    stalls: list[float] = []

    def engine(address, template, echo, jobs=None):
        def run(jobs_, processes, stall):
            stalls.append(stall)
            return run_jobs(jobs_, processes, stall)
        return run

    monkeypatch.setattr(grade, "connect_cluster", engine)
    folder = tmp_path / "class"
    shutil.copytree(ROOT / "solutions", folder / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    code = grade.grade_batch(folder, tmp_path / "out", echo=lambda *args: None, hidden=None, jobs=1,
                             exercises=["softmax"], budget=400.0)
    assert code == 0
    assert stalls and stalls[0] >= 2 * (400.0 + Limits().diagnosis_seconds), stalls
    assert stalls[0] > Limits(student_seconds=400.0).longest_test(), stalls
    # A --timeout given is the instructor's, as given (a test of the stall detector sets 2 s).
    grade.grade_batch(folder, tmp_path / "again", echo=lambda *args: None, hidden=None, jobs=1,
                      exercises=["softmax"], budget=400.0, timeout=250.0)
    assert stalls[-1] == 250.0, stalls


def test_crashes_in_the_diagnosis_cost_no_other_exercise_its_imports(tmp_path):
    """A module whose every call ends the worker uses up the diagnosis's crashes: another exercise still imports.

    A hostile round: attention's functions ended the worker at every call; the diagnosis's cap of crashes was
    reached, its imports of masks, positional, multihead and layer were refused, and that refusal was kept for
    their own tests (Part I: 28 points where attention's 12 were all it should cost).
    """
    folder = tmp_path / "crasher"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "attention.py"
    path.write_text(path.read_text(encoding="utf-8") + "".join(
        f"\n\ndef {name}(*args, **kwargs):\n    import os\n    os._exit(7)\n"
        for name in load().exercise("attention").functions), encoding="utf-8")
    with IsolatedImplementation(folder, limits=Limits(call_timeout=2.0)) as implementation:
        try:
            observe_everything(implementation)
        except ObservationCut:
            pass  # (cut or not: what it refused must not outlive it)
        mask = implementation.function("masks", "causal_mask")(3)
    assert mask.shape == (3, 3) and bool(mask[2, 0]) and not bool(mask[0, 2])


def _looping_padding_mask(folder: Path) -> Path:
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "masks.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n\ndef padding_mask(lengths, max_len):\n    while True:\n"
                    "        pass\n", encoding="utf-8")
    return folder


def test_the_graded_diagnosis_does_not_probe_a_function_a_test_saw_loop(tmp_path):
    # Its probes would each wait out the call limit (twice, in the diagnosis's own account: 10 CPU-s of a looping
    # submission's grading for feedback that already leads with the loop).
    limits = Limits(call_timeout=1.0, diagnosis_seconds=20.0)
    with IsolatedImplementation(_looping_padding_mask(tmp_path / "loopy"), limits=limits) as implementation:
        with pytest.raises(TimeoutError, match="did not finish"):
            implementation.function("masks", "padding_mask")(np.array([2, 1]), 3)
        timed_out = implementation.stats["timed_out"]
        observed = observe_everything(implementation)
        assert implementation.stats["timed_out"] == timed_out  # no probe of it ran into the limit again
        spent = implementation._budget.spent_by.get(DIAGNOSIS, 0.0)
    assert spent < limits.call_timeout, spent
    assert observed.deviates and any(name for name in observed.outputs if "padding" in name)


def test_a_students_own_diagnosis_does_not_probe_a_function_a_test_saw_loop(tmp_path):
    from tests import kit

    implementation = kit.LocalImplementation(_looping_padding_mask(tmp_path / "loopy"), call_seconds=1.0)
    with pytest.raises(TimeoutError, match="did not finish"):
        implementation.function("masks", "padding_mask")(np.array([2, 1]), 3)
    observe_everything(implementation)
    assert implementation.timeouts == {"padding_mask": 1}  # the probes were not run: none timed out
