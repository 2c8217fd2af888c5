"""What a student or an instructor reads is clean: no grader internals, readable files, no false warnings.

- a crash or a timeout of a student's call is reported with the student's
  own file and line or none, never a line of the grader's code (also when
  the grader is installed, where the tests are ``grader/_kit/tests``);
- the gradebook and every student's feedback have one mode: readable by the
  instructor's user and group (umask permitting), not by other users;
- nbgrader's autograde restores the hidden tests of the generated notebooks
  without a "checksum has changed" warning per hidden cell, and still warns
  about a test cell a student changed;
- a failed check in a notebook shows its message, not the kit's frames.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import grader
from grader.curriculum import ROOT, load
from grader.grading import report
from grader.grading.formats.grades_csv import gradebook_csv
from grader.tests.waiting import HANG_SECONDS

GRADER_FILES = re.compile(r"\b(proxy|worker|server|grade|plugin|kit|feedback|report|load|limits)\.py\b")
SOLUTIONS = ROOT / "solutions"
HIDDEN = ROOT / "grader" / "hidden_tests"


def _raise_from(filename: str, error: BaseException) -> BaseException:
    """``error`` raised by code that says it is in ``filename`` (a traceback frame of that file)."""
    namespace: dict = {}
    exec(compile("def fail(error):\n    raise error\n", filename, "exec"), namespace)
    try:
        namespace["fail"](error)
    except BaseException as raised:  # noqa: BLE001 - the point is to catch it
        return raised
    raise AssertionError("not raised")


def _installed_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Make tests.crash see the kit as a wheel installs it: its data tree is grader/_kit, not the package."""
    from tests import crash

    kit = tmp_path / "site-packages" / "grader" / "_kit"
    kit.mkdir(parents=True)
    monkeypatch.setattr(crash, "_KIT", kit)


@pytest.mark.parametrize("inside", ["sandbox/proxy.py", "sandbox/worker.py", "grading/grade.py"])
def test_a_crash_in_the_graders_code_names_no_file(inside: str, monkeypatch, tmp_path) -> None:
    from tests.feedback import where_it_crashed

    _installed_layout(monkeypatch, tmp_path)
    error = _raise_from(str(Path(grader.__file__).parent / inside), TimeoutError("softmax() did not finish"))
    assert where_it_crashed(error) == ""


def test_a_crash_in_the_students_code_names_their_file_and_line(monkeypatch, tmp_path) -> None:
    from tests.feedback import where_it_crashed

    _installed_layout(monkeypatch, tmp_path)
    student = tmp_path / "ada" / "softmax.py"
    student.parent.mkdir()
    student.write_text("def fail(error):\n    raise error\n", encoding="utf-8")  # the source _raise_from runs
    error = _raise_from(str(student), ValueError("bad"))
    assert where_it_crashed(error).strip() == "at softmax.py line 2: raise error"


def test_a_crash_in_another_of_the_students_files_names_the_line_that_called_it(monkeypatch, tmp_path) -> None:
    from tests.feedback import where_it_crashed

    _installed_layout(monkeypatch, tmp_path)
    folder = tmp_path / "ada"
    folder.mkdir()
    (folder / "ada_checks.py").write_text("def check(error):\n    raise error\n", encoding="utf-8")
    (folder / "ada_caller.py").write_text("def fail(error):\n    from ada_checks import check\n    check(error)\n",
                                          encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    import importlib
    import sys

    for module in ("ada_checks", "ada_caller"):
        monkeypatch.delitem(sys.modules, module, raising=False)  # not left behind for other tests
    try:
        importlib.import_module("ada_caller").fail(ValueError("bad"))
    except ValueError as raised:
        error = raised
    lines = [line.strip() for line in where_it_crashed(error).strip().splitlines()]
    assert lines == ["at ada_checks.py line 2: raise error", "called from ada_caller.py line 3: check(error)"]


def _grade_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> dict:
    """Grade a copy of the reference whose softmax is ``body``, on a hidden file calling softmax directly."""
    from grader.grading.records import Job, suite_files
    from grader.grading.session import grade_in_process
    from grader.suite import TestFile

    monkeypatch.setenv("ATTENTION_KIT_FRESH_PYTEST", "1")  # no second long-lived pytest session inside this one
    folder = shutil.copytree(SOLUTIONS, tmp_path / "ada", ignore=shutil.ignore_patterns("__pycache__"))
    module = folder / "softmax.py"
    module.write_text(module.read_text(encoding="utf-8") + "\n\n" + body, encoding="utf-8")
    # A file name of its own: pytest imports test files by name, once per process.
    test_file = tmp_path / "hidden" / f"test_calls_softmax_{re.sub(r'[^a-z0-9]', '_', tmp_path.name.lower())}.py"
    test_file.parent.mkdir()
    test_file.write_text("import numpy as np\n\nEXERCISE = 'softmax'\n\n\n"
                         "def test_softmax_of_zeros(impl):\n"
                         "    assert impl.softmax(np.zeros((2, 3))).shape == (2, 3)\n", encoding="utf-8")
    suite = [TestFile(str(test_file), "softmax", None, hidden=True)]
    job = Job(student="ada", folder=str(folder), files=(str(test_file),), suite=suite_files(suite))
    result = grade_in_process(job)
    assert result.records, result.error
    tests = report.score_tests(result.records, suite, {}, result.error)
    results = report.results_json(student="ada", status="graded", tests=tests, execution_time=1.0,
                                  output="", extra={})
    return {"records": result.records, "feedback": report.feedback_markdown(results),
            "results": report.results_text(results)}


@pytest.mark.parametrize("body, observed", [
    ("def softmax(x, axis=-1):\n    while True:\n        pass\n", "TimeoutError"),
    ("def _helper(x):\n    return x.nonexistent\n\n\ndef softmax(x, axis=-1):\n    return _helper(x)\n",
     "AttributeError"),
])
def test_feedback_on_a_timeout_or_a_crash_names_no_grader_file(body, observed, tmp_path, monkeypatch) -> None:
    _installed_layout(monkeypatch, tmp_path)
    graded = _grade_one(tmp_path, monkeypatch, body)
    (record,) = graded["records"]
    assert record.outcome == "failed" and observed in record.message, record
    for text in (record.message, graded["feedback"], graded["results"]):
        assert not GRADER_FILES.search(text), GRADER_FILES.search(text)
        assert "Traceback" not in text and "site-packages" not in text
    if observed == "AttributeError":  # the student's own lines are the useful part: they stay
        assert "softmax.py line" in record.message and "_helper" in record.message


# ------------------------------------------------------------------------------------ file modes


@pytest.mark.parametrize("umask, mode", [(0o022, 0o640), (0o002, 0o660), (0o077, 0o600)])
def test_feedback_results_and_gradebook_share_one_mode(umask: int, mode: int, tmp_path: Path) -> None:
    results = report.results_json(student="ada", status="graded", tests=[], execution_time=1.0, output="",
                                  extra={})
    previous = os.umask(umask)
    try:
        report.write_student(tmp_path, results)
        report.atomic_write(tmp_path / "grades.csv", gradebook_csv([results]))
        report.atomic_write(tmp_path / "grades.csv", gradebook_csv([results]))  # replaced: same mode
    finally:
        os.umask(previous)
    files = [tmp_path / "ada" / "feedback.md", tmp_path / "ada" / "results.json", tmp_path / "grades.csv"]
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in files} == {path.name: oct(mode) for path in files}
    assert not [p.name for p in tmp_path.rglob(".*.tmp")]  # no temporary file left behind


# ------------------------------------------------------------------------------------ nbgrader


def _alembic_on_path(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nbgrader's Gradebook runs the ``alembic`` command: give it this Python's when no script is on PATH."""
    if shutil.which("alembic"):
        return
    folder.mkdir()
    script = folder / "alembic"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m alembic "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def test_autograde_restores_hidden_tests_without_checksum_warnings(tmp_path: Path, monkeypatch) -> None:
    """generate_assignment's own steps, then autograde's cell overwriting: nbgrader's and the kit's."""
    pytest.importorskip("nbgrader")
    from nbgrader import utils
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import ClearHiddenTests, ComputeChecksums, LockCells, SaveCells
    from nbgrader.preprocessors import OverwriteCells as NbgraderOverwriteCells

    from grader.authoring.notebooks import BEGIN_HIDDEN, build_course
    from grader.grading import nbgrader_cells

    _alembic_on_path(tmp_path / "bin", monkeypatch)
    exercise = load().exercise("softmax")
    assignment = f"{exercise.number:02d}-{exercise.name}"
    build_course(tmp_path / "course", "per-exercise", HIDDEN)
    config = (tmp_path / "course" / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "sanitize_preprocessors()" in config  # the course uses the kit's OverwriteCells
    assert nbgrader_cells.IMPORT_NAME in nbgrader_cells.sanitize_preprocessors()
    source = nbformat.read(tmp_path / "course" / "source" / assignment / f"{exercise.name}.ipynb", 4)
    database = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(database) as gradebook:
        gradebook.add_assignment(assignment)
    resources = {"nbgrader": {"notebook": exercise.name, "assignment": assignment, "db_url": database}}
    released = copy.deepcopy(source)
    for step in (LockCells(), ComputeChecksums(), SaveCells(), ClearHiddenTests(), ComputeChecksums()):
        released, resources = step.preprocess(released, resources)
    hidden = [c.metadata.nbgrader["grade_id"] for c in source.cells if BEGIN_HIDDEN in c.source]
    assert hidden and not any(BEGIN_HIDDEN in c.source for c in released.cells)
    # What `nbgrader validate` checks in the students' copy: every checksum is the one nbgrader computes.
    marked = [c for c in released.cells if "checksum" in c.metadata.get("nbgrader", {})]
    assert marked and all(utils.compute_checksum(c) == c.metadata.nbgrader["checksum"] for c in marked)

    def overwrite(kind: type, notebook) -> tuple[list[tuple[str, str]], object]:
        changes: list[tuple[str, str]] = []
        step = kind()
        step.report_change = lambda name, attr, old, new: changes.append((name, attr))
        done, _ = step.preprocess(copy.deepcopy(notebook), resources)
        return changes, done

    changes, _ = overwrite(NbgraderOverwriteCells, released)
    assert sorted(name for name, attr in changes if attr == "checksum") == sorted(hidden)  # nbgrader#1961
    changes, graded = overwrite(nbgrader_cells.OverwriteCells, released)
    assert changes == []
    assert [c.source for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") in hidden] == [
        c.source for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id") in hidden]
    # A student who edits a test cell is still reported, and the cell restored.
    tampered = copy.deepcopy(released)
    cell = next(c for c in tampered.cells if c.metadata.get("nbgrader", {}).get("grade_id") == hidden[0])
    cell.source += "\nprint('edited')"
    changes, graded = overwrite(nbgrader_cells.OverwriteCells, tampered)
    assert changes == [(hidden[0], "checksum")]
    restored = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == hidden[0])
    assert BEGIN_HIDDEN in restored.source and "edited" not in restored.source


def test_a_failed_check_in_a_notebook_shows_no_line_of_the_kit() -> None:
    pytest.importorskip("IPython")
    code = ("import numpy as np\n"
            "def softmax(x, axis=-1):\n    return np.asarray(x, dtype=float)\n"
            "from grader.student.notebook import check\n"
            "check('softmax', 'test_rows_sum_to_one')\n")
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "IPython", "--colors=NoColor", "--no-banner", "-c", code],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    shown = done.stdout + done.stderr
    assert "CheckFailed: softmax: test_rows_sum_to_one failed" in shown, shown
    assert "notebook.py" not in shown and "Traceback" not in shown, shown
