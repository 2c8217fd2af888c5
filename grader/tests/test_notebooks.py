"""Tests of the Jupyter side: the nbgrader course builder, the in-kernel checks, notebooks as submissions.

The last test is the real round trip through nbgrader (generate_assignment,
autograde, the gradebook) compared with `attention-kit grade`; it starts
Jupyter kernels and takes about a minute. It needs the `notebooks` extra,
which CI installs with `dev`.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.authoring.notebooks import (
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    END_HIDDEN,
    END_SOLUTION,
    SINGLE_ASSIGNMENT,
    build_course,
)
from grader.curriculum import ROOT, load
from grader.grading import notebook_reader
from grader.hidden_tests import catalogue
from grader.student import notebook

HIDDEN = ROOT / "grader" / "hidden_tests"
BUG = " / math.sqrt(d_k)"  # removing it: the scores are not scaled (a known mistake)


def nbgrader_meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def graded_test_names(path: Path) -> list[str]:
    """Independent of the builder: the test functions of a file, read with ast."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("course")
    build_course(out, "per-exercise", HIDDEN)
    return out


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("single")
    build_course(out, "single", HIDDEN)
    return out


def read(course: Path, exercise) -> nbformat.NotebookNode:
    return nbformat.read(course / "source" / f"{exercise.number:02d}-{exercise.name}" / f"{exercise.name}.ipynb", 4)


def reference_namespace(nb, bug: str | None = None) -> dict:
    """Run a source notebook's code cells (not the checks) as the kernel would, optionally with a bug."""
    namespace: dict = {}
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        code = cell.source
        if bug is not None and meta.get("solution"):
            assert bug in code
            code = code.replace(bug, "")
        exec(compile(code, f"<cell {cell.id}>", "exec"), namespace)
    return namespace


# ------------------------------------------------------------------------------------ generation


def test_per_exercise_course_layout(course):
    curriculum = load()
    assert (course / "nbgrader_config.py").is_file()
    assignments = sorted(p.name for p in (course / "source").iterdir())
    assert assignments == [f"{e.number:02d}-{e.name}" for e in curriculum.exercises]
    for exercise in curriculum.exercises:
        nb = read(course, exercise)
        nbformat.validate(nb)
        assert nb.nbformat == 4 and nb.metadata.kernelspec.name == "python3"
        first = nb.cells[0]
        assert first.cell_type == "markdown" and f"Exercise {exercise.number}: {exercise.title}" in first.source


def test_each_exercise_opens_with_its_sections_of_the_reading(course, single):
    from grader.authoring.notebooks import reading_sections

    sections = reading_sections()
    assert sections, "docs/reading.md has no sections"
    for exercise in load().exercises:
        cells = read(course, exercise).cells
        assert exercise.reading, f"{exercise.name} names no section of the reading"
        reading = cells[1].source  # right after the title
        for section in exercise.reading:
            assert f'<a id="{section}"></a>' in reading
            assert sections[section].splitlines()[1] in reading  # its heading, "## N. Title"
        linked = re.findall(r"\]\(#([\w-]+)\)", reading)
        assert set(linked) <= set(exercise.reading), "a link to a section this notebook does not hold"
    text = "\n".join(c.source for c in nbformat.read(single / "source" / SINGLE_ASSIGNMENT /
                                                  f"{SINGLE_ASSIGNMENT}.ipynb", 4).cells)
    for section in {s for e in load().exercises for s in e.reading}:
        assert text.count(f'<a id="{section}"></a>') == 1  # each section once, with the first exercise needing it


def test_solution_cell_keeps_signatures_and_docstrings(course):
    for exercise in load().exercises:
        nb = read(course, exercise)
        solutions = [c for c in nb.cells if nbgrader_meta(c).get("solution")]
        assert len(solutions) == 1
        cell = solutions[0]
        meta = nbgrader_meta(cell)
        assert meta["grade_id"] == f"{exercise.name}-code" and meta["grade"] is False
        tree = ast.parse(cell.source)
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert [f.name for f in functions] == list(exercise.functions)
        assert all(ast.get_docstring(f) for f in functions)
        assert cell.source.count(BEGIN_SOLUTION) == cell.source.count(END_SOLUTION) == len(exercise.functions)


def test_test_cells_are_the_graded_tests_with_the_graders_points(course):
    hidden_files = {f.exercise: f for f in catalogue(HIDDEN)}
    for exercise in load().exercises:
        nb = read(course, exercise)
        graded = [c for c in nb.cells if nbgrader_meta(c).get("grade")]
        assert all(nbgrader_meta(c)["locked"] and not nbgrader_meta(c)["solution"] for c in graded)
        visible = [c for c in graded if BEGIN_HIDDEN not in c.source]
        hidden = [c for c in graded if BEGIN_HIDDEN in c.source]
        names = graded_test_names(ROOT / exercise.test_file)
        assert [nbgrader_meta(c)["grade_id"] for c in visible] == [f"{exercise.name}-{n}" for n in names]
        assert all(f'check("{exercise.name}", "{n}")' in c.source for c, n in zip(visible, names, strict=True))
        points = [nbgrader_meta(c)["points"] for c in visible]
        assert sum(points) == exercise.points  # exactly: nbgrader adds them up as floats
        # As equal as whole sixteenths allow: within one sixteenth of each other, every one worth something.
        assert min(points) > 0 and max(points) - min(points) <= 1 / 16 and all((16 * p).is_integer() for p in points)
        extra = hidden_files.get(exercise.name)
        assert len(hidden) == (len(extra.tests) if extra else 0)
        if extra:
            assert sum(nbgrader_meta(c)["points"] for c in hidden) == extra.points
            for cell, name in zip(hidden, extra.tests, strict=True):
                inside = cell.source.split(BEGIN_HIDDEN, 1)[1].split(END_HIDDEN, 1)[0]
                assert f'check_hidden("{exercise.name}", "{name}")' in inside


def test_dependencies_are_given_read_only(course):
    curriculum = load()
    for exercise in curriculum.exercises:
        nb = read(course, exercise)
        given = [c for c in nb.cells
                 if c.metadata.get(notebook_reader.KIT_METADATA, {}).get("role") == notebook_reader.GIVEN_ROLE]
        assert len(given) == 1 and nbgrader_meta(given[0])["locked"] and not nbgrader_meta(given[0])["solution"]
        defined = {n.name for n in ast.parse(given[0].source).body if isinstance(n, ast.FunctionDef)}
        wanted = {f for d in curriculum.dependencies(exercise.name) for f in curriculum.exercise(d).functions}
        assert wanted <= defined
        assert not defined & set(exercise.functions)


def test_single_layout_holds_every_exercise_in_order(single):
    curriculum = load()
    path = single / "source" / SINGLE_ASSIGNMENT / f"{SINGLE_ASSIGNMENT}.ipynb"
    nb = nbformat.read(path, 4)
    solutions = [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("solution")]
    assert solutions == [f"{name}-code" for name in curriculum.names]
    given = [c for c in nb.cells if c.metadata.get(notebook_reader.KIT_METADATA)]
    defined = {n.name for c in given for n in ast.parse(c.source).body if isinstance(n, ast.FunctionDef)}
    assert not defined & {f for e in curriculum.exercises for f in e.functions}  # nothing of the exercises given
    total = sum(nbgrader_meta(c).get("points", 0) for c in nb.cells)
    assert math.isclose(total, sum(e.points for e in curriculum.exercises) + sum(f.points for f in catalogue(HIDDEN)))


def test_building_twice_gives_the_same_files(course, tmp_path):
    build_course(tmp_path, "per-exercise", HIDDEN)
    for path in (course / "source").rglob("*.ipynb"):
        assert (tmp_path / path.relative_to(course)).read_bytes() == path.read_bytes()


# ------------------------------------------------------------------------------------ in the kernel


def test_check_passes_on_the_reference_code_of_the_notebook(course, capsys):
    exercise = load().exercise("attention")
    namespace = reference_namespace(read(course, exercise))
    names = graded_test_names(ROOT / exercise.test_file)
    for name in names:
        notebook.check("attention", name, namespace)
    hidden = next(f for f in catalogue(HIDDEN) if f.exercise == "attention")
    notebook.check_hidden("attention", hidden.tests[0], namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"passed: {name}" for name in [*names, hidden.tests[0]]]


def test_check_fails_with_the_suites_feedback_and_runs_the_file_once(course, monkeypatch):
    namespace = reference_namespace(read(course, load().exercise("attention")), bug=BUG)
    runs = []
    original = notebook.run_test_file
    monkeypatch.setattr(notebook, "run_test_file", lambda *a: runs.append(a) or original(*a))
    with pytest.raises(AssertionError) as failure:
        notebook.check("attention", "test_scores_match_the_formula", namespace)
    text = str(failure.value)
    assert "expected:" in text and "observed:" in text and "revisit:" in text and "sqrt(d_k)" in text
    assert "Diagnosis:" in text  # the known mistake is named, as pytest shows it
    notebook.check("attention", "test_scores_shape_with_batch_axes", namespace)
    assert len(runs) == 1  # the second test came from the cache
    namespace = reference_namespace(read(course, load().exercise("attention")))  # the cell run again
    notebook.check("attention", "test_scores_shape_with_batch_axes", namespace)
    assert len(runs) == 2


def test_check_names_the_missing_function():
    with pytest.raises(AssertionError, match=r"define attention_scores\(\) in the cell above"):
        notebook.check("attention", "test_scores_match_the_formula", {})
    with pytest.raises(LookupError):
        notebook.check("softmax", "test_that_does_not_exist", {})


# ------------------------------------------------------------------------------------ notebooks as modules


def test_extract_modules_from_solution_cells(course):
    curriculum = load()
    exercise = curriculum.exercise("multihead")
    nb = read(course, exercise)
    solution = next(c for c in nb.cells if nbgrader_meta(c).get("solution"))
    solution.source = "%load_ext autoreload\n!pip list\n" + solution.source
    modules = notebook_reader.extract_modules(nb)
    assert set(modules) == {"multihead", "_checks"}  # the given dependencies are not the student's
    source = modules["multihead"]
    assert "from .attention import scaled_dot_product_attention" in source and "%load_ext" not in source
    assert "!pip" not in source
    ast.parse(source)
    # Without nbgrader metadata, every code cell that defines the exercise's functions counts.
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    assert set(notebook_reader.extract_modules(nb)) == {"multihead", "_checks"}


def test_a_filled_single_notebook_grades_like_the_reference(single, tmp_path):
    """Every module extracted from the source notebook (the reference) passes the whole graded suite."""
    from grader.student.status import run_suite

    nb = nbformat.read(single / "source" / SINGLE_ASSIGNMENT / f"{SINGLE_ASSIGNMENT}.ipynb", 4)
    folder = notebook_reader.notebooks_to_folder([_write(nb, tmp_path / "all.ipynb")], tmp_path / "modules")
    result = run_suite(folder)
    assert result.passed == result.total > 0


def _write(nb, path: Path) -> Path:
    nbformat.write(nb, str(path))
    return path


# ------------------------------------------------------------------------------------ the nbgrader round trip


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _grade_points(out: Path, student: str, exercise: str) -> float:
    results = json.loads((out / student / "results.json").read_text(encoding="utf-8"))
    return sum(t["score"] for t in results["tests"] if t.get("extra_data", {}).get("exercise") == exercise)


@pytest.mark.slow  # about a minute (two nbgrader runs start kernels); CI runs it, `-m "not slow"` skips it
def test_nbgrader_autograde_agrees_with_attention_kit_grade(tmp_path):
    from nbgrader.api import Gradebook

    exercise = load().exercise("attention")
    assignment = f"{exercise.number:02d}-{exercise.name}"
    course = tmp_path / "course"
    build_course(course, "per-exercise", HIDDEN)
    _run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], course)

    release = nbformat.read(course / "release" / assignment / "attention.ipynb", 4)
    source = nbformat.read(course / "source" / assignment / "attention.ipynb", 4)
    answer = next(c for c in release.cells if nbgrader_meta(c).get("solution"))
    assert "raise NotImplementedError()" in answer.source and BUG not in answer.source
    assert all(ast.get_docstring(f) for f in ast.parse(answer.source).body if isinstance(f, ast.FunctionDef))
    assert not any(BEGIN_HIDDEN in c.source or "check_hidden(" in c.source for c in release.cells)
    # The student's answer: the reference body with one known bug.
    reference = next(c for c in source.cells if nbgrader_meta(c).get("solution")).source
    assert BUG in reference
    answer.source = "\n".join(line for line in reference.splitlines() if "SOLUTION" not in line).replace(BUG, "")
    submitted = course / "submitted" / "alice" / assignment / "attention.ipynb"
    submitted.parent.mkdir(parents=True)
    _write(release, submitted)
    autograde = _run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"], course)
    # The hidden cells come back without nbgrader's false "checksum has changed" (grader/grading/nbgrader_cells.py).
    assert "has changed" not in autograde.stdout + autograde.stderr, autograde.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, "alice")
        nbgrader_score, nbgrader_max = submission.score, submission.max_score
    hidden_points = sum(f.points for f in catalogue(HIDDEN) if f.exercise == "attention")
    assert nbgrader_max == exercise.points + hidden_points  # exactly: the cells' points are sixteenths
    assert 0 < nbgrader_score < nbgrader_max  # the bug costs points, not everything
    _run([sys.executable, "-m", "nbgrader", "export"], course)
    (row,) = csv.DictReader(io.StringIO((course / "grades.csv").read_text(encoding="utf-8")))
    assert row["max_score"] == repr(float(exercise.points + hidden_points))  # "24.0", not "23.99999999999999"
    assert float(row["score"]) == nbgrader_score

    # The same code as a module submission, as one notebook, and as a folder of notebooks.
    submissions = tmp_path / "submissions"
    modules = shutil.copytree(ROOT / "solutions", submissions / "modules", ignore=shutil.ignore_patterns("__pycache__"))
    text = (modules / "attention.py").read_text(encoding="utf-8")
    (modules / "attention.py").write_text(text.replace(BUG, ""), encoding="utf-8")
    shutil.copy(submitted, submissions / "notebook.ipynb")
    shutil.copytree(course / "submitted" / "alice", submissions / "notebooks")
    out = tmp_path / "grades"
    _run([sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out)], ROOT)
    for student in ("modules", "notebook", "notebooks"):
        assert _grade_points(out, student, "attention") == nbgrader_score, student  # the same shares, exactly
