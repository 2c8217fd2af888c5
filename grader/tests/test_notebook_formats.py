"""Notebook files that nbgrader's own autograde reads one way: ``attention-kit grade`` reads them the same way.

A hostile round found two kinds on which the course's two graders disagreed: an nbformat 3 notebook (nbgrader
upgrades it and grades it; grade found "no list of cells" and gave 0) and files nbformat calls invalid (a cell
without metadata or source, a cell type nbformat 4 does not have: nbgrader stops on them and exports 0; grade
graded them). grade now upgrades the first as nbformat does and refuses the second, saying what is missing.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from grader.grading import notebook_reader

ANSWER = "import numpy as np\n\n\ndef softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis=axis, keepdims=True))\n" \
         "    return e / e.sum(axis=axis, keepdims=True)\n"


def _notebook() -> nbformat.NotebookNode:
    answer = nbformat.v4.new_code_cell(ANSWER, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": "softmax-code", "schema_version": 3}})
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Softmax"), answer,
                                           nbformat.v4.new_code_cell("softmax(np.zeros(3))")])


def test_an_nbformat_3_notebook_gives_the_modules_of_its_upgrade(tmp_path):
    current, old = tmp_path / "v4.ipynb", tmp_path / "v3.ipynb"
    current.write_text(nbformat.writes(_notebook(), 4), encoding="utf-8")
    old.write_text(nbformat.writes(nbformat.convert(_notebook(), 3), 3), encoding="utf-8")
    assert json.loads(old.read_text(encoding="utf-8"))["nbformat"] == 3
    modules = notebook_reader.extract_modules(current)
    assert "softmax" in modules and "def softmax(x, axis=-1)" in modules["softmax"]
    assert notebook_reader.extract_modules(old) == modules


@pytest.mark.parametrize(("change", "said"), [
    (lambda nb: nb["cells"][0].pop("metadata"), "cell 1 has no metadata"),
    (lambda nb: nb["cells"][1].pop("source"), "cell 2 has no source"),
    (lambda nb: nb.pop("metadata"), "it has no metadata"),
    (lambda nb: nb["cells"][0].update(cell_type="heading", level=1), "cell 1 is of type 'heading'"),
])
def test_a_file_nbformat_calls_invalid_is_refused_saying_why(tmp_path, change, said):
    data = json.loads(nbformat.writes(_notebook(), 4))
    change(data)
    path = tmp_path / "broken.ipynb"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        notebook_reader.extract_modules(path)
    assert said in str(raised.value), raised.value


@pytest.mark.parametrize(("change", "said"), [
    (lambda nb: nb.update(nbformat=5), "nbformat 5"),
    (lambda nb: nb.pop("nbformat_minor"), "nbformat 4.None"),
    (lambda nb: nb.pop("nbformat"), "nbformat None"),
    (lambda nb: nb.update(nbformat=3), "nbformat 3"),  # a 3 without worksheets: nbformat's upgrade stops
    (lambda nb: nb["cells"][1].pop("outputs"), "cell 2 is a code cell without outputs"),
    (lambda nb: nb["cells"][0].update(source="# Softmax \ud800"), "lone surrogate"),
    (lambda nb: nb["cells"][1].update(execution_count="one"), "nbformat calls invalid"),
])
def test_a_file_nbgrader_stops_on_is_refused_by_grade_too(tmp_path, change, said):
    # A hostile round: each of these got 12/12 from `grade` and no grade from nbgrader's autograde (0 exported):
    # nbconvert reads with nbformat and validates after every preprocessor; the copy is written as UTF-8.
    data = json.loads(nbformat.writes(_notebook(), 4))
    change(data)
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps(data), encoding="utf-8")  # ensure_ascii: a lone surrogate is a \ud800 escape
    with pytest.raises(ValueError) as raised:
        notebook_reader.extract_modules(path)
    assert said in str(raised.value), raised.value


def test_a_surrogate_in_an_output_or_a_pair_is_read(tmp_path):
    # nbgrader clears the outputs before it writes the notebook, and a pair is one character: both graded.
    data = json.loads(nbformat.writes(_notebook(), 4))
    data["cells"][2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "\ud800"}]
    data["cells"][0]["source"] += " \U0001f600"
    path = tmp_path / "fine.ipynb"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert "def softmax(x, axis=-1)" in notebook_reader.extract_modules(path)["softmax"]
