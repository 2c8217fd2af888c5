"""Answer cells as nbgrader's autograde finds them: `grade` and the gradebook agree on cells' metadata.

Three notebooks that the two graders scored apart: a cell with the answer cell's id and no flag set (nbgrader
stopped on it: "Duplicate grade id", 0 in export; `grade` graded both cells), a copy of the answer cell whose
flag is ``1`` rather than ``true`` (nbgrader keeps the copy, `grade` read both), and a cell with another
exercise's answer id in an assignment's notebook (nbgrader: a plain cell; `grade`: an answer). And a notebook
with no answer cell left (its metadata removed: the student's code cells are graded), whose test cell and given
cell the student rewrote: nbgrader grades them as released, `grade` graded the student's functions in them.
"""

from __future__ import annotations

import copy
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from grader.authoring.notebooks import build_course
from grader.curriculum import ROOT
from grader.grading import notebook_reader
from grader.tests.test_notebooks import _grade_points, _run

pytestmark = pytest.mark.xdist_group("test_notebooks")

ASSIGNMENT = "01-softmax"
CALLS = "def softmax(x, axis=-1):\n    return _stable(x, axis)\n"


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _cell(source: str, meta: dict) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = meta
    return cell


def _notebooks(course: Path) -> dict[str, nbformat.NotebookNode]:
    """Student -> notebook: the reference (control) and the three notebooks the graders read apart."""
    source = nbformat.read(course / "source" / ASSIGNMENT / "softmax.ipynb", 4)
    reference = re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", next(
        c for c in source.cells if _meta(c).get("solution")).source, flags=re.MULTILINE)
    helped = reference.replace("def softmax(", "def _stable(", 1) + "\n\n" + CALLS  # full marks on its own
    release = nbformat.read(course / "release" / ASSIGNMENT / "softmax.ipynb", 4)
    index = next(i for i, c in enumerate(release.cells) if _meta(c).get("solution"))
    released = dict(_meta(release.cells[index]))
    made = {}
    for student in ("ref", "flagless", "truthy", "foreign", "restored"):
        nb = made[student] = copy.deepcopy(release)
        nb.cells[index].source = reference
    made["flagless"].cells[index].source = helped  # below it, a cell with its id and no flag: a plain cell
    made["flagless"].cells.insert(index + 1, _cell("# FLAGLESS\n" + CALLS, {"grade_id": "softmax-code"}))
    made["truthy"].cells[index].source = "raise RuntimeError('my old try')\n" + CALLS  # the copy below is graded
    made["truthy"].cells.insert(index + 1, _cell(reference, released | {"solution": 1}))
    made["foreign"].cells[index].source = CALLS  # the helper is in a cell with another notebook's answer id
    made["foreign"].cells.insert(index + 1, _cell("# FOREIGN\n" + helped, released | {"grade_id": "attention-code"}))
    restored = made["restored"].cells  # no answer cell: its code cells are read; the locked ones get their source back
    del restored[index].metadata["nbgrader"]
    wrong = "def softmax(x, axis=-1):\n    return x\n"
    given = next(cell for cell in restored if _meta(cell).get("grade_id") == "softmax-given")
    del given.metadata[notebook_reader.KIT_METADATA]
    given.source += "\n\n# GIVEN EDIT\n" + wrong
    restored[-1].source = "# TEST EDIT\n" + wrong  # after the answer: the one graded, were it read
    return made


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("ids") / "course"
    build_course(course, "per-exercise", ROOT / "grader" / "hidden_tests")
    _run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], course)
    return course


def test_the_reader_takes_the_answer_cells_nbgrader_takes(course, tmp_path):
    notebooks = _notebooks(course)
    paths = {}
    for student, nb in notebooks.items():
        paths[student] = tmp_path / student / ASSIGNMENT / "softmax.ipynb"
        paths[student].parent.mkdir(parents=True)
        nbformat.write(nb, str(paths[student]))
    assert "# FLAGLESS" not in notebook_reader.extract_modules(paths["flagless"])["softmax"]
    assert "my old try" not in notebook_reader.extract_modules(paths["truthy"])["softmax"]
    folder = notebook_reader.notebooks_to_folder([paths["foreign"]], tmp_path / "foreign-modules")
    assert "# FOREIGN" not in (folder / "softmax.py").read_text(encoding="utf-8")
    # In the single layout (or a notebook of no assignment) every exercise's answer id is the release's.
    assert "# FOREIGN" in notebook_reader.extract_modules(paths["foreign"])["softmax"]
    for exercises in (["softmax"], None):  # as `grade` reads an assignment's notebook, and as autograde does
        module = notebook_reader.extract_modules(paths["restored"], exercises)["softmax"]
        assert "# TEST EDIT" not in module and "# GIVEN EDIT" not in module and "def softmax(" in module


@pytest.mark.slow  # nbgrader autograde of five notebooks and `grade` of the same: about a minute
def test_nbgrader_and_grade_score_these_notebooks_alike(course, tmp_path):
    from nbgrader.api import Gradebook

    for student, nb in _notebooks(course).items():
        path = course / "submitted" / student / ASSIGNMENT / "softmax.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, str(path))
    autograde = _run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"], course, check=False)
    assert autograde.returncode == 0, autograde.stdout[-3000:] + autograde.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {s: gradebook.find_submission(ASSIGNMENT, s).score
                  for s in ("ref", "flagless", "truthy", "foreign", "restored")}
    full = scores["ref"]
    assert scores["flagless"] == scores["truthy"] == scores["restored"] == full > scores["foreign"] == 0, scores
    shutil.copytree(course / "submitted", tmp_path / "submissions")
    out = tmp_path / "grades"
    _run([sys.executable, "-m", "grader", "grade", str(tmp_path / "submissions"), "--out", str(out), "--jobs", "1"],
         ROOT, check=False)
    assert {s: _grade_points(out, s, "softmax") for s in scores} == scores
