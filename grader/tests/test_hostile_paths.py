"""A hostile round on the entry paths other than plain ``grade``: Gradescope's runner and nbgrader's autograde.

Each test is one finding, written so that it failed before the fix it names: a submission that scored what it
should not (the reference's notebook through a linked folder), stopped the batch (a link to a device), saw
hidden tests' text (Gradescope's metadata), or got a 0 for the autograder's own failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.curriculum import PACKAGE, ROOT
from grader.tests.test_gradescope import bundle  # noqa: F401 - the bundle is a fixture here too
from grader.tests.waiting import HANG_SECONDS

# One xdist worker runs this file: the Gradescope bundle (a module fixture) is then built once.
pytestmark = pytest.mark.xdist_group("test_hostile_paths")

RUN_AUTOGRADER = PACKAGE / "release_files" / "gradescope" / "run_autograder"


@pytest.mark.parametrize("python", ["/nonexistent/python", '/opt/a "quoted"\\path/python'])
def test_a_runner_without_python_writes_not_graded_never_a_zero(tmp_path: Path, python: str) -> None:
    """run_autograder's own fallback, when the interpreter setup.sh installed is missing, wrote ``"score": 0``.

    Gradescope then showed the student 0 / 336 for the autograder's failure, where every other failure of the
    runner (``gradescope.failure_results(students_fault=False)``) writes no score and says NOT GRADED. The path
    named in the message is written as a JSON string, so a quote or a backslash in it leaves the file readable.
    """
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    shutil.copy(RUN_AUTOGRADER, root / "source" / "run_autograder")
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=python)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode != 0  # the run failed, and says so to Gradescope
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert "score" not in results and not results["tests"], results
    assert results["output"].startswith("NOT GRADED (no score)") and python in results["output"], results


def _linked_to_a_device(course: Path, folder: Path) -> Path:
    """A link to ``/dev/ptmx`` beside the notebook: a read that never ends (to ``/dev/zero``: a disk filled)."""
    (folder / "notes.txt").symlink_to("/dev/ptmx")
    return course / "autograded" / "ann" / NB_ASSIGNMENT / "notes.txt"  # nbgrader's copy through it


def _linked_to_the_source(course: Path, folder: Path) -> Path:
    """The assignment folder a link to the instructor's source folder, whose answer cells hold the reference."""
    shutil.rmtree(folder)
    folder.symlink_to(Path("..", "..", "source", NB_ASSIGNMENT))
    return course / "autograded" / "ann" / NB_ASSIGNMENT / "attention.ipynb"  # the source notebook, graded


NB_ASSIGNMENT = "03-attention"


@pytest.mark.parametrize("plant", [_linked_to_a_device, _linked_to_the_source], ids=["device", "source-folder"])
def test_nbgrader_autograde_refuses_linked_submissions_before_copying_them_and_grades_the_next_student(tmp_path,
                                                                                                       plant):
    """Links that ``nbgrader autograde`` followed before the kit's refusal, which came after nbgrader's copy.

    nbgrader copies a submission's files to ``autograded/`` (``shutil.copy``, following links) before any of its
    steps runs. A link to ``/dev/ptmx`` blocked that copy for good, and ``zed``, graded after ``ann``, was never
    graded; ann's assignment folder a link to ``../../source/03-attention`` (a link a git clone keeps) got the
    source notebook graded as hers: full marks, 24 of 24, for no work. Such a folder is now refused before
    nbgrader copies it: ann is not graded (never a score), zed is.
    """
    pytest.importorskip("nbgrader")
    from nbgrader.api import Gradebook, MissingEntry

    from grader.authoring.notebooks import build_course

    assignment, course = NB_ASSIGNMENT, tmp_path / "course"
    build_course(course, "per-exercise", ROOT / "grader" / "hidden_tests")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                        "PATH": path}
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course,
                   env=env, check=True, capture_output=True, timeout=HANG_SECONDS)
    for student in ("ann", "zed"):
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        shutil.copy(course / "release" / assignment / "attention.ipynb", folder)
    copied = plant(course, course / "submitted" / "ann" / assignment)
    with open(tmp_path / "autograde.log", "w", encoding="utf-8") as log:
        autograde = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"],
                                     cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + HANG_SECONDS
        while autograde.poll() is None and not copied.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if autograde.poll() is None and plant is _linked_to_a_device:  # nbgrader is reading the device: stop it
            os.killpg(autograde.pid, signal.SIGKILL)
        autograde.wait(timeout=HANG_SECONDS)
    said = (tmp_path / "autograde.log").read_text(encoding="utf-8")
    assert not copied.exists(), "nbgrader copied through the link: " + said[-2000:]
    assert autograde.returncode == 1, said[-3000:]  # nbgrader reports ann as failed, after grading zed
    assert "ann/03-attention not graded: refused:" in said and "symbolic link" in said, said[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        with pytest.raises(MissingEntry):
            gradebook.find_submission(assignment, "ann")  # not graded: no score at all
        zed = gradebook.find_submission(assignment, "zed")
        assert zed.score == 0.0 and zed.max_score > 0  # the untouched notebook, graded
    assert (course / "autograded" / "zed" / assignment / "attention.ipynb").is_file()


def test_gradescope_students_code_cannot_read_the_submission_metadata(bundle: Path, tmp_path: Path) -> None:  # noqa: F811
    """Gradescope's submission_metadata.json holds the student's previous submissions with their whole results.

    ``previous_submissions[].results`` is each earlier run's results.json: the hidden tests' names, messages
    (inputs, expected values) and scores, which students see only once grades are published, and the total. In
    Gradescope's container the worker runs as an unprivileged user without namespaces: the file, readable by
    everyone, was read by the student's code and sent back in a public test's message. The runner reads it
    before any student code runs, and then leaves it to root alone.
    """
    from grader.grading.gradescope import CONTAINER_ENV
    from grader.sandbox.limits import SIMULATE_NO_BWRAP
    from grader.tests.test_entry_paths import RUNTIME_READER, STUBS, autograde, copy_modules, leaks

    root = Path(tempfile.mkdtemp(prefix="attention-kit-metadata-")) / "autograder"
    metadata = root / "submission_metadata.json"
    hidden = {"name": "attention: test_hidden_shape (hidden)", "score": 0.0, "max_score": 2.0, "status": "failed",
              "output": "expected shape (11, 29), observed (29, 11) HIDDEN-METADATA-7f3c",
              "visibility": "after_published"}
    content = json.dumps({"created_at": "2026-01-10T10:00:00+00:00", "users": [{"email": "ada@uni.example"}],
                          "previous_submissions": [{"submission_time": "2026-01-09T10:00:00+00:00", "score": 301.5,
                                                    "results": {"score": 301.5, "tests": [hidden]}}]})

    def upload(targets: dict[str, Path]) -> Path:
        metadata.write_text(content, encoding="utf-8")
        os.chmod(metadata, 0o644)  # as Gradescope leaves it
        folder = copy_modules(STUBS, tmp_path / "reader")
        (folder / "softmax.py").write_text(RUNTIME_READER.format(paths=[str(metadata)]), encoding="utf-8")
        return folder

    try:
        results, _ = autograde(bundle, upload, root, **{SIMULATE_NO_BWRAP: "1", CONTAINER_ENV: "1"})
        text = json.dumps(results, ensure_ascii=False)
        assert "Error" in text  # the reader ran and said why it read nothing
        assert not leaks(text, content.encode()), "the student's code read submission_metadata.json"
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def test_a_gradescope_run_past_every_budget_is_not_graded_never_a_zero(tmp_path, monkeypatch) -> None:
    """A run stopped at ``run_seconds`` wrote ``"score": 0`` and blamed the student's code ("an endless loop").

    ``run_seconds`` is the longest a submission can make a run take (every exercise's budget, which counts its
    loops and sleeps, the diagnosis's, and the grader's own slack): a run past it is the grader's or the
    machine's, and Gradescope showed the student 0 for it, with the points of every test they passed lost.
    """
    from grader.grading import gradescope

    def stopped(command, **options):
        raise subprocess.TimeoutExpired(command, options.get("timeout"))

    monkeypatch.setattr(gradescope.subprocess, "run", stopped)
    root = tmp_path / "autograder"
    shutil.copytree(ROOT / "solutions", root / "submission", ignore=shutil.ignore_patterns("__pycache__"))
    results = gradescope.autograde(root)
    written = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert written == results
    assert "score" not in results and not results["tests"], results
    assert results["output"].startswith("NOT GRADED (no score)"), results["output"]
