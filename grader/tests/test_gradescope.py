"""The Gradescope bundle: its layout, and run_autograder on a correct and a buggy submission.

results.json is checked against Gradescope's published autograder format
(https://gradescope-autograders.readthedocs.io/en/latest/specs/).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load
from grader.grading import gradescope
from grader.tests.waiting import HANG_SECONDS

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
TOP_LEVEL = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
             "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
               "visibility", "extra_data"}


def check_results(results: dict) -> None:
    """Fail unless ``results`` follows Gradescope's results.json format."""
    assert set(results) <= TOP_LEVEL, set(results) - TOP_LEVEL
    assert isinstance(results["score"], (int, float))
    assert isinstance(results["execution_time"], (int, float)) and results["execution_time"] >= 0
    assert isinstance(results.get("output", ""), str)
    assert results["visibility"] in VISIBILITY
    assert results["stdout_visibility"] in VISIBILITY
    assert isinstance(results["tests"], list)
    for test in results["tests"]:
        assert set(test) <= TEST_FIELDS, set(test) - TEST_FIELDS
        assert isinstance(test["name"], str) and test["name"]
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert 0 <= test["score"] <= test["max_score"] + 1e-9
        assert test["status"] in ("passed", "failed")
        assert isinstance(test.get("output", ""), str)
        assert test.get("visibility", "visible") in VISIBILITY
    if results["tests"]:
        total = sum(test["score"] for test in results["tests"])
        assert results["score"] == pytest.approx(total, abs=0.01)  # per-test scores are rounded


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle built by the command line, unpacked as Gradescope does into ROOT/source."""
    folder = tmp_path_factory.mktemp("gradescope")
    zip_path = folder / "autograder.zip"
    built = subprocess.run([sys.executable, "-m", "grader", "gradescope", str(zip_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=HANG_SECONDS)
    assert built.returncode == 0, built.stderr
    source = folder / "template" / "source"
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(source)
        for info in archive.infolist():  # extractall drops the mode bits
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(source / info.filename, mode)
    return zip_path


def test_bundle_layout(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        modes = {info.filename: (info.external_attr >> 16) & 0o777 for info in archive.infolist()}
    assert {"setup.sh", "run_autograder"} <= names  # at the root of the zip, not in a folder
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    for exercise in load().exercises:
        assert f"kit/solutions/{exercise.module_file}" in names
        assert f"kit/{exercise.test_file}" in names
    assert any(name.startswith("kit/grader/hidden_tests/test_") for name in names)
    assert {"kit/pyproject.toml", "kit/conftest.py", "kit/README.md", "kit/LICENSE", "kit/grader/grading/grade.py",
            "kit/docs/student-loop.md"} <= names
    assert not any(name.startswith("kit/grader/tests/") or "__pycache__" in name for name in names)
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(bundle.parent / "template" / "source" / script)], check=True)


def run_autograder(bundle: Path, tmp_path: Path, submission: Path) -> dict:
    """Run the unpacked run_autograder under a temporary AUTOGRADER_ROOT; return results.json."""
    root = tmp_path / "autograder"
    shutil.copytree(bundle.parent / "template", root)
    shutil.copytree(submission, root / "submission")
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    completed = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env,
                               capture_output=True, text=True, timeout=HANG_SECONDS)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    results_file = root / "results" / "results.json"
    assert results_file.is_file(), completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads(results_file.read_text(encoding="utf-8"))


def test_correct_submission_gets_full_marks(bundle: Path, tmp_path: Path) -> None:
    submission = tmp_path / "upload"
    shutil.copytree(ROOT / "solutions", submission / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    results = run_autograder(bundle, tmp_path, submission)
    check_results(results)
    assert results["tests"], results.get("output")
    failed = [test["name"] for test in results["tests"] if test["status"] != "passed"]
    assert not failed
    maximum = sum(test["max_score"] for test in results["tests"])
    assert results["score"] == pytest.approx(maximum)
    assert maximum >= sum(exercise.points for exercise in load().exercises)


def test_buggy_submission_loses_points_with_feedback(bundle: Path, tmp_path: Path) -> None:
    submission = tmp_path / "upload"
    shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
    masks = submission / "masks.py"
    text = masks.read_text(encoding="utf-8")
    assert "np.tril(" in text
    masks.write_text(text.replace("np.tril(", "np.triu(", 1), encoding="utf-8")  # causal mask sees the future
    results = run_autograder(bundle, tmp_path, submission)
    check_results(results)
    failed = [test for test in results["tests"] if test["status"] == "failed"]
    assert failed
    assert 0 < results["score"] < sum(test["max_score"] for test in results["tests"])
    assert all(test["score"] < test["max_score"] for test in failed)
    assert any(test.get("output") for test in failed)


def test_empty_submission_still_writes_results(bundle: Path, tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    results = run_autograder(bundle, tmp_path, empty)
    check_results(results)
    assert results["score"] == 0


def test_the_fallback_results_follow_the_format() -> None:
    results = gradescope.failure_results("The submission is empty.", 0.25)
    results.setdefault("execution_time", 0)
    check_results(results)
    assert results["score"] == 0 and results["output"]


def test_refuses_to_overwrite_a_bundle(tmp_path: Path) -> None:
    target = tmp_path / "autograder.zip"
    target.write_bytes(b"keep me")
    completed = subprocess.run([sys.executable, "-m", "grader", "gradescope", str(target)], cwd=ROOT,
                               capture_output=True, text=True, timeout=HANG_SECONDS)
    assert completed.returncode == 1 and target.read_bytes() == b"keep me"


@pytest.mark.slow  # about a minute: a fresh venv and `pip install -e` of the bundled kit
def test_setup_installs_the_kit(bundle: Path, tmp_path: Path) -> None:
    root = tmp_path / "autograder"
    shutil.copytree(bundle.parent / "template", root)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["AUTOGRADER_ROOT"] = str(root)
    completed = subprocess.run(["bash", str(root / "source" / "setup.sh")], cwd=root, env=env,
                               capture_output=True, text=True, timeout=HANG_SECONDS)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert (root / "venv" / "bin" / "python").is_file()
    assert (root / "source" / "kit").stat().st_mode & 0o077 == 0  # out of reach of the worker's user
    submission = tmp_path / "upload"
    shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(submission, root / "submission")
    env.pop("AUTOGRADER_PYTHON", None)
    graded = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env,
                            capture_output=True, text=True, timeout=HANG_SECONDS)
    assert graded.returncode == 0, graded.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    check_results(results)
    assert all(test["status"] == "passed" for test in results["tests"])


def test_a_zip_of_the_modules_inside_the_upload_is_graded(bundle: Path, tmp_path: Path) -> None:
    submission = tmp_path / "upload"
    submission.mkdir()
    with zipfile.ZipFile(submission / "my-attention.zip", "w") as archive:
        for path in sorted((ROOT / "solutions").glob("*.py")):
            archive.write(path, path.name)
    results = run_autograder(bundle, tmp_path, submission)
    check_results(results)
    assert results["tests"] and all(test["status"] == "passed" for test in results["tests"]), results["output"]
    public, hidden = gradescope.total_points()
    assert results["score"] == pytest.approx(public + hidden)


def test_the_bundle_states_its_total_and_results_agree(bundle: Path, tmp_path: Path) -> None:
    curriculum = load()
    public = sum(exercise.points for exercise in curriculum.exercises)
    hidden = sum(exercise.hidden_points for exercise in curriculum.exercises)
    assert gradescope.total_points() == (public, hidden)
    with zipfile.ZipFile(bundle) as archive:
        readme = archive.read("README.md").decode()
    assert f"total points on Gradescope to **{public + hidden:g}**" in readme
    built = subprocess.run([sys.executable, "-m", "grader", "gradescope", str(tmp_path / "again.zip")], cwd=ROOT,
                           capture_output=True, text=True, timeout=HANG_SECONDS)
    assert f"Total points to set on Gradescope: {public + hidden:g} ({public:g} public tests + {hidden:g} hidden" \
        in built.stdout


def test_the_visible_score_leaves_hidden_tests_out() -> None:
    from grader.grading.report import visible_score_line
    from grader.grading.rows import TestEntry

    tests = [TestEntry("softmax: a", "1.1", 2.0, "passed", "", "softmax", score=1.0, visibility="visible"),
             TestEntry("softmax: b", "1.2", 3.0, "failed", "x", "softmax", score=0.0, visibility="after_published")]
    line = visible_score_line(tests)
    assert line.startswith("Score: 1 / 2 (public tests)") and "worth 3 more points (total 5)" in line
    assert visible_score_line(tests[:1]) == "Score: 1 / 2"


def test_a_run_may_take_every_exercises_budget_and_the_builder_says_what_timeout_to_set(tmp_path, monkeypatch):
    """A submission slow in every exercise spends each one's budget: the run waits for that.

    The instructor is told what timeout to set on Gradescope where 10 minutes are too few (a run stopped early
    loses every point).
    """
    from grader.curriculum import PART_ENV
    from grader.grading.records import STUDENT_BUDGET
    from grader.sandbox.limits import Limits

    monkeypatch.setenv(PART_ENV, "all")
    needed = gradescope.run_seconds()
    assert needed >= len(load().exercises) * STUDENT_BUDGET + Limits().diagnosis_seconds, needed
    built = subprocess.run([sys.executable, "-m", "grader", "gradescope", str(tmp_path / "all.zip")], cwd=ROOT,
                           capture_output=True, text=True, timeout=HANG_SECONDS)
    assert built.returncode == 0, built.stderr
    assert f"to at least {math.ceil(needed / 60)} minutes" in built.stdout, built.stdout
