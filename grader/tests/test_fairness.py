"""Fair partial credit: a bug in one exercise costs points in that exercise only.

A submission that is the reference with one bug planted in softmax is graded
twice with ``attention-kit grade``. Fair (the default): every other exercise
gets full points, because the exercises that import softmax are served the
reference softmax. ``--no-fair``: attention, multihead and layer run on the
student's own softmax and lose points too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from grader.curriculum import ROOT, load
from grader.tests.waiting import HANG_SECONDS

# One xdist worker runs this file: the class graded once (a module fixture) is then built once,
# not once per worker.
pytestmark = pytest.mark.xdist_group("test_fairness")

# Summing over the second-to-last axis: the weights of a key, not of a query, add up to 1.
BUG = ("totals = np.sum(exponentials, axis=axis, keepdims=True)",
       "totals = np.sum(exponentials, axis=-2, keepdims=True)")
DEPENDENT = ("attention", "multihead", "layer")


def points_by_exercise(results: dict) -> dict[str, tuple[float, float]]:
    """(score, max_score) per exercise, from the tests' names or extra data."""
    names = load().names
    totals: dict[str, list[float]] = {name: [0.0, 0.0] for name in names}
    for test in results["tests"]:
        exercise = (test.get("extra_data") or {}).get("exercise")
        if exercise is None:
            found = [name for name in sorted(names, key=len, reverse=True) if name in test["name"]]
            assert found, f"cannot tell the exercise of test {test['name']!r}"
            exercise = found[0]
        totals[exercise][0] += test["score"]
        totals[exercise][1] += test["max_score"]
    return {name: (score, maximum) for name, (score, maximum) in totals.items()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dict[str, tuple[float, float]]]:
    """Points per exercise of the softmax-bug submission, graded fair (True) and not fair (False)."""
    folder = tmp_path_factory.mktemp("fairness")
    student = folder / "submissions" / "softmax_bug"
    shutil.copytree(ROOT / "solutions", student, ignore=shutil.ignore_patterns("__pycache__"))
    source = (student / "softmax.py").read_text(encoding="utf-8")
    assert source.count(BUG[0]) == 1, "the planted bug no longer matches solutions/softmax.py"
    (student / "softmax.py").write_text(source.replace(*BUG), encoding="utf-8")
    outcome = {}
    for fair in (True, False):
        out = folder / ("fair" if fair else "unfair")
        command = [sys.executable, "-m", "grader", "grade", str(student.parent), "--out", str(out), "--jobs", "1"]
        completed = subprocess.run(command + ([] if fair else ["--no-fair"]), cwd=ROOT, capture_output=True,
                                   text=True, timeout=HANG_SECONDS)
        assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
        results = json.loads((out / "softmax_bug" / "results.json").read_text(encoding="utf-8"))
        outcome[fair] = points_by_exercise(results)
    return outcome


def test_the_bug_costs_softmax_points(graded: dict) -> None:
    for fair in (True, False):
        score, maximum = graded[fair]["softmax"]
        assert 0 <= score < maximum, (fair, score, maximum)


def test_fair_grading_gives_every_other_exercise_full_points(graded: dict) -> None:
    for name, (score, maximum) in graded[True].items():
        if name != "softmax":
            assert maximum > 0 and score == pytest.approx(maximum), (name, score, maximum)


def test_without_fairness_the_dependent_exercises_lose_points_too(graded: dict) -> None:
    for name in DEPENDENT:
        score, maximum = graded[False][name]
        assert score < maximum - 1e-9, (name, score, maximum)
    for name in ("projections", "masks", "positional"):  # they do not import softmax
        score, maximum = graded[False][name]
        assert score == pytest.approx(maximum), (name, score, maximum)


@pytest.mark.parametrize("part", [part for part in load().parts if part != load().parts[0]])
def test_a_later_part_graded_alone_gives_the_reference_full_marks(part: str, tmp_path) -> None:
    # Graded alone, a part has none of the earlier parts' modules: whatever of them its code or its tests use
    # (exercise 12's tests train with exercise 9's train) comes from the reference, as fair grading says.
    student = tmp_path / "submissions" / "reference_of_the_part"
    student.mkdir(parents=True)
    chosen = load().selection(part)
    shutil.copy(ROOT / "solutions" / "_checks.py", student / "_checks.py")  # the reference's own helpers
    for exercise in chosen:
        shutil.copy(ROOT / "solutions" / exercise.module_file, student / exercise.module_file)
        for given in exercise.given:
            shutil.copy(ROOT / "solutions" / f"{given}.py", student / f"{given}.py")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(student.parent), "--out", str(out), "--jobs", "1",
               "--part", part]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    results = json.loads((out / student.name / "results.json").read_text(encoding="utf-8"))
    points = points_by_exercise(results)
    for exercise in chosen:
        score, maximum = points[exercise.name]
        assert maximum > 0 and score == pytest.approx(maximum), (exercise.name, score, maximum)


def test_a_function_passed_to_a_served_dependency_runs_the_students_own(tmp_path) -> None:
    # Fair grading answers a call of an earlier exercise's function from the reference, across the channel, and a
    # function cannot cross it: a correct pooled_gradients that self-checked with numerical_gradient(lambda ...)
    # lost 8.25 of negation's 24 points, its feedback blaming the value it returned (a hostile round). Such a call
    # now runs the student's own numerical_gradient, as it does in the student's own pytest.
    from grader.grading.grade import grade_batch
    from grader.tests.test_trust import copy_reference, read_grades

    folder = tmp_path / "submissions"
    student = copy_reference(folder / "selfcheck")
    negation = student / "negation.py"
    text = negation.read_text(encoding="utf-8")
    marker = "def pooled_gradients("
    head, tail = text.split(marker, 1)
    signature, body = tail.split('"""', 2)[0], '"""'.join(tail.split('"""', 2)[1:])
    check = ("\n    from .backward import numerical_gradient\n"
             "    assert np.allclose(numerical_gradient(lambda z: float(np.sum(z ** 2)), np.ones(2)), 2.0)\n")
    docstring, rest = body.split('"""', 1)
    negation.write_text(head + marker + signature + '"""' + docstring + '"""' + check + rest, encoding="utf-8")
    out = tmp_path / "out"
    assert grade_batch(folder, out, jobs=1, exercises=["negation"], echo=lambda *a: None) == 0
    row = read_grades(out)["selfcheck"]
    assert row["status"] == "ok" and float(row["score"]) == float(row["max_score"]), row
