"""Tests of the Jupyter side: the nbgrader course builder, the in-kernel checks, notebooks as submissions.

The last tests share one real round trip through nbgrader (generate_assignment,
autograde, export, generate_feedback) of six students, three of them attacks
on the kernel nbgrader used to run, compared with `attention-kit grade`; it
takes about a minute. It needs the `notebooks` extra, which CI installs with
`dev`, and the sandbox (bubblewrap), as grading does.
"""

from __future__ import annotations

import ast
import csv
import html
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
from grader.tests.waiting import HANG_SECONDS

# One xdist worker runs this file: the nbgrader round trip and the built courses (module fixtures, a minute and
# more) are then built once, not once per worker.
pytestmark = pytest.mark.xdist_group("test_notebooks")

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
            for number, (cell, name) in enumerate(zip(hidden, extra.tests, strict=True), start=1):
                inside = cell.source.split(BEGIN_HIDDEN, 1)[1].split(END_HIDDEN, 1)[0]
                assert f'check_hidden("{exercise.name}", "{name}")' in inside
                # The id is in every released notebook's metadata: it names no hidden test.
                assert nbgrader_meta(cell)["grade_id"] == f"{exercise.name}-hidden-{number}"


def test_a_course_that_hides_its_hidden_tests_names_none_in_a_cells_output():
    from grader.grading.nbgrader_autograde import TestCell, cell_outputs

    cell = TestCell("softmax-hidden-2", "softmax", "test_integer_scores", True, None, 0.5)
    for passed in (True, False):
        shown = cell_outputs(cell, passed, "" if passed else "a hidden test failed", named=False)
        text = "".join(str(o.get("text", "")) + str(o.get("evalue", "")) + "".join(o.get("traceback", []))
                       for o in shown)
        assert "test_integer_scores" not in text and "a hidden test of softmax" in text, text
    named = cell_outputs(cell, False, "expected 1.0", named=True)
    assert "test_integer_scores" in named[0]["evalue"]


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


def test_given_cells_hold_no_line_of_the_reference(course, single):
    # The exercises a notebook builds on are given as the kit's given code, never the reference's: a course that
    # assigns them next term would find its answers in this term's notebooks (the given cell is not stripped).
    from grader.tests.reference_lines import find_leaks, reference_lines

    cells = {}
    for exercise in load().exercises:
        nb = read(course, exercise)
        cells.update({f"{exercise.name}.ipynb cell {i}": c.source.encode() for i, c in enumerate(nb.cells)
                      if c.metadata.get(notebook_reader.KIT_METADATA, {}).get("role") == notebook_reader.GIVEN_ROLE})
    nb = nbformat.read(next((single / "source").rglob("*.ipynb")), 4)
    cells.update({f"single cell {i}": c.source.encode() for i, c in enumerate(nb.cells)
                  if c.metadata.get(notebook_reader.KIT_METADATA, {}).get("role") == notebook_reader.GIVEN_ROLE})
    assert len(cells) > len(load().exercises)
    # The reference's private helpers (its input checks, the tasks) are handed out on purpose; its exercises not.
    exercises = {line: where for line, where in reference_lines().items() if not where.startswith("solutions/_")}
    assert not find_leaks(cells, exercises)


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


def test_the_answer_cells_are_those_nbgrader_reads(course):
    """As nbgrader's autograde reads a notebook (DeduplicateIds, then the release's metadata and kinds back), so
    does the kit's reader: a blind round found the two gradebooks apart on each of these."""
    import copy

    exercise = load().exercise("softmax")
    nb = read(course, exercise)
    index, answer = next((i, c) for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("solution"))
    mine = "def softmax(x, axis=-1):\n    return x * 0 + 1  # MINE\n"
    # A copy of the answer cell pasted below it (its id with it): nbgrader keeps the last, the original is plain.
    pasted = copy.deepcopy(nb)
    pasted.cells.insert(index + 1, copy.deepcopy(answer))
    pasted.cells[index + 1].source = mine
    assert "# MINE" in notebook_reader.extract_modules(pasted)["softmax"]
    pasted.cells[index].source, pasted.cells[index + 1].source = mine, "_unused = 1\n"
    assert "softmax" not in notebook_reader.extract_modules(pasted)  # the earlier copy is no answer
    # The answer cell turned into Markdown: nbgrader makes it code again.
    marked = copy.deepcopy(nb)
    marked.cells[index].cell_type, marked.cells[index].source = "markdown", mine
    assert "# MINE" in notebook_reader.extract_modules(marked)["softmax"]
    # An answer cell made up (an id the release has not), beside the untouched one: a plain cell, never graded.
    made_up = copy.deepcopy(nb)
    extra = copy.deepcopy(answer)
    extra.source, extra.metadata["nbgrader"]["grade_id"] = mine, "my-own-answer"
    made_up.cells.append(extra)
    assert "# MINE" not in notebook_reader.extract_modules(made_up).get("softmax", "")


def test_a_course_submission_is_graded_by_its_assignments_notebooks_only(course, tmp_path):
    """What nbgrader's autograde grades: the assignment's notebook; not a module or another notebook beside it."""
    from grader.grading import submissions

    exercise = load().exercise("softmax")
    answered = read(course, exercise)  # the source notebook: the reference in its answer cell
    want = notebook_reader.extract_modules(answered)["softmax"]
    entry = tmp_path / "submitted" / "alice"
    assignment = entry / f"{exercise.number:02d}-{exercise.name}"
    assignment.mkdir(parents=True)
    _write(answered, assignment / "softmax.ipynb")
    stub = nbformat.read(course / "source" / f"{exercise.number:02d}-{exercise.name}" / "softmax.ipynb", 4)
    for cell in stub.cells:
        if nbgrader_meta(cell).get("solution"):
            cell.source = "def softmax(x, axis=-1):\n    return x\n"
    _write(stub, assignment / "aaa.ipynb")  # sorts first
    (assignment / "softmax.py").write_text("def softmax(x, axis=-1):\n    return x * 0\n", encoding="utf-8")
    (entry / "exercises").mkdir()
    (entry / "exercises" / "softmax.py").write_text("def softmax(x, axis=-1):\n    return 1\n", encoding="utf-8")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert (submission.folder / "softmax.py").read_text(encoding="utf-8") == want


def test_an_assignments_notebook_gives_its_own_exercise_only(course, tmp_path):
    """Earlier exercises pasted into an assignment's answer cell (its given cell) are not graded, as in nbgrader.

    nbgrader grades an exercise by its own notebook's test cells: a student who submits only 06-multihead, with
    the given cell's softmax, projections and attention pasted into its answer cell, gets nothing for those.
    """
    from grader.grading import submissions

    multihead = load().exercise("multihead")
    answered = read(course, multihead)
    given = [cell.source for cell in answered.cells if cell.metadata.get("attention_kit", {}).get("role") == "given"]
    solution = next(cell for cell in answered.cells if nbgrader_meta(cell).get("solution"))
    solution.source = "\n\n".join(given) + "\n\n" + solution.source
    assert {"softmax", "attention", "multihead"} <= set(notebook_reader.extract_modules(answered))
    entry = tmp_path / "submitted" / "ivan"
    assignment = entry / f"{multihead.number:02d}-{multihead.name}"
    assignment.mkdir(parents=True)
    _write(answered, assignment / "multihead.ipynb")
    submission = submissions.prepare(entry, tmp_path / "work")
    graded = {path.stem for path in submission.folder.glob("*.py")}
    assert "multihead" in graded and not graded & {"softmax", "projections", "attention"}, graded
    # A notebook of the student's own (not an assignment's) still gives every exercise it defines.
    loose = notebook_reader.notebooks_to_folder([_write(answered, tmp_path / "mine.ipynb")], tmp_path / "loose")
    assert {"softmax", "attention", "multihead"} <= {path.stem for path in loose.glob("*.py")}


def test_a_notebook_with_large_outputs_is_graded_by_its_code(course, tmp_path):
    """Outputs are not graded (nbgrader clears them): 30 MB of them do not cost the student's row."""
    from grader.grading import submissions

    exercise = load().exercise("softmax")
    answered = read(course, exercise)
    solution = next(cell for cell in answered.cells if nbgrader_meta(cell).get("solution"))
    # (commas: a long print of a list's text is one JSON value, not millions, as nbgrader reads it)
    solution.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x," * 15_000_000)]
    entry = tmp_path / "submitted" / "erin"
    assignment = entry / f"{exercise.number:02d}-{exercise.name}"
    assignment.mkdir(parents=True)
    _write(answered, assignment / "softmax.ipynb")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert submission.error is None and (submission.folder / "softmax.py").is_file(), submission.error
    # Millions of tiny JSON values (what parsing would cost in memory) are refused with a line saying so.
    bloated = tmp_path / "bloated.ipynb"
    bloated.write_text('{"cells": [], "padding": [' + "[]," * 2_000_000 + "[]]}", encoding="utf-8")
    with pytest.raises(ValueError, match="JSON values"):
        notebook_reader.extract_modules(bloated)


def test_a_function_bound_to_its_name_is_graded_and_an_unreadable_notebook_says_why(tmp_path):
    """``attention_scores = _scores`` defines the function as a ``def`` does; a tried-out call does not."""
    from grader.grading import submissions

    answer = ("import numpy as np\n\n\ndef _scores(q, k):\n    return q @ np.swapaxes(k, -1, -2)\n\n\n"
              "attention_scores = _scores\n")
    trial = "scaled_dot_product_attention = scaled_dot_product_attention(1, 2, 3)\n"  # a value, not the function
    cells = [{"cell_type": "code", "metadata": {"nbgrader": {"solution": True}}, "source": answer},
             {"cell_type": "code", "metadata": {}, "source": trial}]
    modules = notebook_reader.extract_modules({"cells": cells})
    assert set(modules) == {"attention"} and "attention_scores = _scores" in modules["attention"]
    assert trial not in modules["attention"]
    entry = tmp_path / "frank"
    (entry / "03-attention").mkdir(parents=True)
    (entry / "03-attention" / "attention.ipynb").write_bytes(b'{"cells": [], "x": "\xe9"}')
    (entry / "01-softmax").mkdir()
    _write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def softmax(x, axis=-1):\n    return x\n",
                                                                       metadata={"nbgrader": {"solution": True}})]),
           entry / "01-softmax" / "softmax.ipynb")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert any("attention.ipynb is not graded" in line and "utf-8" in line for line in submission.refused), \
        submission.refused


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


def _run(command: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    # nbgrader's Gradebook runs the `alembic` script: this Python's, when its environment is not activated.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                        "PATH": path}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    if check:
        assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _grade_points(out: Path, student: str, exercise: str) -> float:
    results = json.loads((out / student / "results.json").read_text(encoding="utf-8"))
    return sum(t["score"] for t in results["tests"] if t.get("extra_data", {}).get("exercise") == exercise)


ASSIGNMENT = "03-attention"
ROUND_TRIP_HIDDEN = HIDDEN / "test_hidden_03_attention.py"
VICTIM = "zoe"  # graded after every attacker (nbgrader autogrades the students in name order)
LINKER = "lena"  # a submission of symbolic links, autograded on its own after the others


def _attacks(course: Path) -> dict[str, str]:
    """Student -> code appended to the untouched answer cell: each one a red-team attack on the kernel."""
    victim = course / "submitted" / VICTIM / ASSIGNMENT / "attention.ipynb"
    return {
        # Replace the test cells' function: every test cell then "passes" in the kernel.
        "eve": ("import grader.student.notebook as _kit\n"
                "_kit.check = lambda *args, **kwargs: print('passed')\n"
                "_kit.check_hidden = lambda *args, **kwargs: print('passed')\n"),
        # Print the hidden tests and the reference into the cell's output (the feedback HTML).
        "mallory": (f"for _path in [{str(ROUND_TRIP_HIDDEN)!r}, {str(ROOT / 'solutions' / 'attention.py')!r}]:\n"
                    "    try:\n        print(open(_path, encoding='utf-8').read())\n"
                    "    except Exception as _error:\n        print('cannot read', _error)\n"),
        # Rewrite a classmate's submitted notebook.
        "oscar": (f"try:\n    open({str(victim)!r}, 'w', encoding='utf-8').write('{{}}')\n"
                  "except Exception as _error:\n    print('cannot write', _error)\n"),
    }


def _copied(notebook: nbformat.NotebookNode, kind: str) -> None:
    """A cell of ``kind`` copied and pasted below itself, as Jupyter does it: its nbgrader metadata (its id) too."""
    index = next(i for i, c in enumerate(notebook.cells) if nbgrader_meta(c).get(kind))
    notebook.cells.insert(index + 1, nbformat.from_dict(json.loads(json.dumps(notebook.cells[index]))))
    notebook.cells[index + 1]["id"] = "pasted-copy"


def _kinds_changed(notebook: nbformat.NotebookNode) -> None:
    """A test cell made no test (grade false), an answer cell, and worth 50 points, by editing its metadata."""
    nbgrader_meta(next(c for c in notebook.cells if nbgrader_meta(c).get("grade"))).update(
        grade=False, solution=True, points=50)


def _bonus_cell(notebook: nbformat.NotebookNode) -> None:
    """A grade cell of the student's own: an id the release does not have, 50 points, an output saying it passed."""
    cell = nbformat.v4.new_code_cell("print('passed')", outputs=[nbformat.v4.new_output("stream", text="passed\n")])
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "locked": True, "points": 50,
                                 "schema_version": 3, "solution": False, "task": False}
    notebook.cells.append(cell)


def _half_filled(notebook: nbformat.NotebookNode) -> None:
    """A cell marked as an answer without an id (an entry left half-filled), holding a wrong answer."""
    index = next(i for i, c in enumerate(notebook.cells) if nbgrader_meta(c).get("solution"))
    cell = nbformat.v4.new_code_cell("def scaled_dot_product_attention(q, k, v, mask=None):\n    return v\n")
    cell.metadata["nbgrader"] = {"solution": True}
    notebook.cells.insert(index + 1, cell)


def _answer_and_test_deleted(notebook: nbformat.NotebookNode) -> None:
    """The answer cell deleted, and the test cell after it (the cell nbgrader put a deleted test cell after)."""
    index = next(i for i, c in enumerate(notebook.cells) if nbgrader_meta(c).get("solution"))
    test = next(i for i, c in enumerate(notebook.cells) if i > index and nbgrader_meta(c).get("grade"))
    del notebook.cells[test]
    del notebook.cells[index]


# Notebooks that nbgrader itself stopped on (no grade, 0 in export) while `grade` graded them: the answer cell or a
# test cell copied and pasted (the copy's id is the original's), a test cell's kind changed, a grade cell made up,
# a cell marked without an id, the answer cell deleted with the first test cell (a hostile round's two).
_EDITS = {"dupe": lambda notebook: _copied(notebook, "solution"),
          "duptest": lambda notebook: _copied(notebook, "grade"), "kinds": _kinds_changed, "bonus": _bonus_cell,
          "halfid": _half_filled, "noanswer": _answer_and_test_deleted}


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory) -> dict:
    """One course, six students, every nbgrader command once (about 45 s; `attention-kit grade` of the same
    notebooks is :func:`graded_by_kit`'s, a test later, so that no test's setup holds both).

    alice: the reference without the scaling (a known bug); zoe: the reference; stub: the released notebook
    untouched (the attackers' control); eve, mallory, oscar: the untouched notebook plus one attack each.
    """
    from nbgrader.api import Gradebook, MissingEntry

    tmp = tmp_path_factory.mktemp("round-trip")
    course = tmp / "course"
    build_course(course, "per-exercise", HIDDEN)
    _run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], course)
    release_path = course / "release" / ASSIGNMENT / "attention.ipynb"
    source = nbformat.read(course / "source" / ASSIGNMENT / "attention.ipynb", 4)
    reference = next(c for c in source.cells if nbgrader_meta(c).get("solution")).source
    assert BUG in reference
    reference = "\n".join(line for line in reference.splitlines() if "SOLUTION" not in line)
    answers = {"alice": reference.replace(BUG, ""), VICTIM: reference, "stub": None}
    for student, attack in _attacks(course).items():
        answers[student] = f"{{untouched}}\n\n{attack}"
    answers |= {student: (reference if student != "kinds" else None) for student in _EDITS}
    for student, answer in answers.items():
        notebook = nbformat.read(release_path, 4)
        cell = next(c for c in notebook.cells if nbgrader_meta(c).get("solution"))
        if answer is not None:
            cell.source = answer.replace("{untouched}", cell.source)
        _EDITS.get(student, lambda notebook: None)(notebook)
        path = course / "submitted" / student / ASSIGNMENT / "attention.ipynb"
        path.parent.mkdir(parents=True)
        _write(notebook, path)
    victim = (course / "submitted" / VICTIM / ASSIGNMENT / "attention.ipynb").read_bytes()
    # Not checked here: against a kernel the attacks make autograde fail for the victim; the tests say what broke.
    autograde = _run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"], course, check=False)
    _run([sys.executable, "-m", "nbgrader", "export"], course, check=False)
    _run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--force"], course, check=False)
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in answers:
            submission = gradebook.find_submission(ASSIGNMENT, student)
            scores[student] = (submission.score, submission.max_score)
    # A submission folder copied with its links kept (cp -r, a git clone): the notebook links to the source
    # notebook (the reference), a second link to the hidden test file. Graded after the others, on its own.
    linked = course / "submitted" / LINKER / ASSIGNMENT
    linked.mkdir(parents=True)
    (linked / "attention.ipynb").symlink_to(course / "source" / ASSIGNMENT / "attention.ipynb")
    (linked / "notes.py").symlink_to(ROUND_TRIP_HIDDEN)
    linker = _run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student", LINKER, "--force"],
                  course, check=False)
    _run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--student", LINKER, "--force"],
         course, check=False)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        try:
            linker_score = gradebook.find_submission(ASSIGNMENT, LINKER).score
        except MissingEntry:
            linker_score = None
    return {"course": course, "autograde": autograde, "scores": scores, "victim": victim,
            "students": list(answers), "linker": linker, "linker_score": linker_score, "tmp": tmp}


@pytest.fixture(scope="module")
def graded_by_kit(round_trip) -> Path:
    """The round trip's notebooks graded by `attention-kit grade`, and alice's code as modules and as one notebook.

    A fixture of its own (about 20 s): the round trip's nbgrader commands and this grading are two jobs.
    """
    course, tmp = round_trip["course"], round_trip["tmp"]
    submissions = tmp / "submissions"
    shutil.copytree(course / "submitted", submissions, ignore=shutil.ignore_patterns(LINKER))
    modules = shutil.copytree(ROOT / "solutions", submissions / "alice-modules",
                              ignore=shutil.ignore_patterns("__pycache__"))
    text = (modules / "attention.py").read_text(encoding="utf-8")
    (modules / "attention.py").write_text(text.replace(BUG, ""), encoding="utf-8")
    shutil.copy(course / "submitted" / "alice" / ASSIGNMENT / "attention.ipynb", submissions / "alice-notebook.ipynb")
    out = tmp / "grades"
    _run([sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out)], ROOT, check=False)
    return out


def _autograded(round_trip: dict, student: str) -> nbformat.NotebookNode:
    return nbformat.read(round_trip["course"] / "autograded" / student / ASSIGNMENT / "attention.ipynb", 4)


@pytest.mark.slow
def test_an_answer_cell_that_replaces_check_scores_what_the_untouched_notebook_scores(round_trip):
    assert round_trip["scores"]["eve"] == round_trip["scores"]["stub"]
    # No test cell passed: the kernel's check never graded anything.
    cells = [c for c in _autograded(round_trip, "eve").cells if nbgrader_meta(c).get("grade")]
    assert cells and all(any(o.output_type == "error" for o in c.outputs) for c in cells)


@pytest.mark.slow  # the round trip and its grading: about a minute; CI runs it, `-m "not slow"` skips it
def test_nbgrader_autograde_agrees_with_attention_kit_grade(round_trip, graded_by_kit):
    autograde = round_trip["autograde"]
    assert autograde.returncode == 0, autograde.stderr[-3000:]
    # The hidden cells come back without nbgrader's false "checksum has changed" (grader/grading/nbgrader_cells.py).
    assert "has changed" not in autograde.stdout + autograde.stderr, autograde.stderr[-3000:]
    exercise = load().exercise("attention")
    hidden_points = sum(f.points for f in catalogue(HIDDEN) if f.exercise == "attention")
    scores = round_trip["scores"]
    alice, maximum = scores["alice"]
    assert maximum == exercise.points + hidden_points  # exactly: the cells' points are sixteenths
    assert 0 < alice < maximum  # the bug costs points, not everything
    assert scores[VICTIM] == (maximum, maximum) and scores["stub"] == (0.0, maximum)
    rows = list(csv.DictReader(io.StringIO((round_trip["course"] / "grades.csv").read_text(encoding="utf-8"))))
    assert {row["student_id"]: float(row["score"]) for row in rows} == {s: scores[s][0] for s in scores}
    assert all(row["max_score"] == repr(float(maximum)) for row in rows)  # "24.0", not "23.99999999999999"
    out = graded_by_kit
    for student in round_trip["students"]:  # every notebook: nbgrader's gradebook is grade's score, exactly
        assert _grade_points(out, student, "attention") == scores[student][0], student
    for student in ("alice-modules", "alice-notebook"):  # the same code as modules, and as one notebook
        assert _grade_points(out, student, "attention") == alice, student


def _secret_lines(release: nbformat.NotebookNode) -> set[str]:
    """The lines of the hidden test file and of the exercise's reference that a student never sees."""
    public = {line.strip() for cell in release.cells for line in cell.source.splitlines()}
    for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "exercises").glob("*.py")]:
        public |= {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    secret = set()
    for path in (ROUND_TRIP_HIDDEN, ROOT / "solutions" / "attention.py"):
        secret |= {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    return {line for line in secret - public if len(line) >= 25}


@pytest.mark.slow
def test_copied_cells_and_changed_metadata_are_graded_as_the_release_reads_them(round_trip):
    """nbgrader's own steps stopped on these notebooks (no grade; 0 in export): the kit's OverwriteCells."""
    scores = round_trip["scores"]
    for student in ("dupe", "duptest", "bonus", "halfid"):  # the reference's answer: full marks, and no more
        assert scores[student] == scores[VICTIM], student
    assert scores["kinds"] == scores["stub"]  # a test cell's kind changed on the untouched notebook: still a test
    assert scores["noanswer"] == scores["stub"]  # no answer: what no answer scores, graded (autograde exits 0)


@pytest.mark.slow
def test_an_answer_cell_that_prints_the_graders_files_leaks_nothing(round_trip):
    course = round_trip["course"]
    secret = _secret_lines(nbformat.read(course / "release" / ASSIGNMENT / "attention.ipynb", 4))
    assert len(secret) > 20  # the attack had something to find
    notebook = _autograded(round_trip, "mallory")
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    text = "\n".join(f"{o.get('text', '')}\n{o.get('evalue', '')}\n" + "\n".join(o.get("traceback", []))
                     + json.dumps(o.get("data", {})) for o in outputs)
    feedback = course / "feedback" / "mallory" / ASSIGNMENT / "attention.html"
    assert feedback.is_file(), round_trip["autograde"].stderr[-2000:]
    page = html.unescape(re.sub(r"<[^>]+>", "", feedback.read_text(encoding="utf-8")))
    for where, content in (("the autograded notebook", text), ("the feedback", page)):
        leaked = sorted(line for line in secret if line in content)
        assert not leaked, f"{where} shows {len(leaked)} secret line(s), e.g. {leaked[0]!r}"
    # Only the test cells have outputs: no cell of the student's ran where nbgrader could see it.
    assert all(not c.get("outputs") for c in notebook.cells if not nbgrader_meta(c).get("grade"))


@pytest.mark.slow
def test_an_answer_cell_cannot_write_another_students_notebook(round_trip):
    victim = round_trip["course"] / "submitted" / VICTIM / ASSIGNMENT / "attention.ipynb"
    assert victim.read_bytes() == round_trip["victim"]
    assert round_trip["scores"][VICTIM][0] == round_trip["scores"][VICTIM][1]  # graded after the attack, in full
    assert round_trip["scores"]["oscar"] == round_trip["scores"]["stub"]


@pytest.mark.slow
def test_a_submission_of_links_is_refused_and_nothing_they_point_at_is_copied(round_trip):
    """A notebook linking to the source notebook (the reference) and a link to a hidden test file: refused.

    nbgrader copies the submitted folder as the instructor, following links; the kit refuses the
    submission (not graded, never a score of the reference) and removes the copies nbgrader made.
    """
    course, linker = round_trip["course"], round_trip["linker"]
    output = linker.stdout + linker.stderr
    assert "symbolic links" in output and "attention.ipynb" in output, output[-3000:]
    maximum = round_trip["scores"][VICTIM][1]
    assert round_trip["linker_score"] in (None, 0.0) and round_trip["linker_score"] != maximum
    hidden = ROUND_TRIP_HIDDEN.read_bytes()
    for folder in ("autograded", "feedback"):
        for path in (course / folder / LINKER).rglob("*") if (course / folder / LINKER).exists() else []:
            assert not path.is_file() or hidden not in path.read_bytes(), path
            assert path.name != "notes.py", path

