"""A notebook's magics are the lines IPython reads as magics: lines that start a statement, nothing else.

A hostile round found an honest answer cell that ``grade`` (and the course's nbgrader autograde, which reads
notebooks the same way) scored 0 for a syntax error that Jupyter never saw: ``strip_magics`` removed every line
starting with ``%``, so the second line of an old-style format (``"axis=%d" <newline> % axis``, as black breaks a
long line before its operator) went, and the module no longer parsed.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest

from grader.grading import notebook_reader

CELL = '''%matplotlib inline
!pip install numpy
import numpy as np


def softmax(x, axis=-1):
    """Weights along ``axis``.

    % of the mass per entry; each row sums to 1
    """
    x = np.asarray(x, dtype=float)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError("axis=%d is out of range for x of shape %s"
                         % (axis, x.shape))
    total = 7 \\
%   2
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
    %time softmax(np.zeros(3))
!echo don't
x = ')'
%who
'''


def test_only_lines_that_start_a_statement_are_magics():
    kept = notebook_reader.strip_magics(CELL)
    ast.parse(kept)  # the answer parses as it ran in Jupyter
    lines = kept.splitlines()
    assert "                         % (axis, x.shape))" in lines  # the operator of a continued line
    assert "    % of the mass per entry; each row sums to 1" in lines  # a docstring's line
    assert "%   2" in lines  # after a backslash
    for magic in ("%matplotlib inline", "!pip install numpy", "    %time softmax(np.zeros(3))", "!echo don't",
                  "%who"):
        assert magic not in lines, magic


def test_a_notebook_whose_answer_continues_a_line_with_percent_gives_a_module_that_parses():
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "source": CELL, "outputs": [], "execution_count": None}]}
    modules = notebook_reader.extract_modules(notebook)
    ast.parse(modules["softmax"])


def test_a_debugging_line_with_ipythons_own_names_leaves_the_answer_graded(tmp_path):
    # In Jupyter display() and get_ipython() need no import; graded, the module raised NameError at import and a
    # correct softmax scored 0 (a hostile round's finding, on grade and on nbgrader's autograde alike).
    import importlib.util

    import numpy as np

    cell = ("import numpy as np\n\n\ndef softmax(x, axis=-1):\n    shifted = np.exp(x - np.max(x, axis=axis, "
            "keepdims=True))\n    return shifted / shifted.sum(axis=axis, keepdims=True)\n\n\n"
            "display(softmax(np.array([1.0, 2.0])))\nget_ipython().run_line_magic('time', 'softmax(np.zeros(3))')\n"
            "get_ipython().system('id')\n")
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "source": cell, "outputs": [], "execution_count": None}]}
    path = tmp_path / "softmax.py"
    path.write_text(notebook_reader.extract_modules(notebook)["softmax"], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("graded_softmax", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports: the stand-ins do nothing
    np.testing.assert_allclose(module.softmax(np.array([0.0, 0.0])), [0.5, 0.5])


DISPLAYING = '''import numpy as np
import matplotlib.pyplot as plt
from IPython.display import display, HTML
from grader.student.notebook import check


def softmax(x, axis=-1):
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    plt.title("a plot inside the answer does nothing when graded")
    return shifted / shifted.sum(axis=axis, keepdims=True)


fig, ax = plt.subplots(figsize=(3,
                                2))
ax.imshow(softmax(np.ones((2, 2))))
for row in range(2):
    ax.text(0, row, "a label")
plt.show()
display(HTML("<b>done</b>"))
check("softmax")
kept = softmax(np.zeros(4))
'''


def test_an_answer_that_imports_a_display_library_stays_graded(tmp_path, monkeypatch):
    # A correct answer cell that imports matplotlib, IPython.display or the kit's own check passed every check in
    # Jupyter, and graded (a worker has numpy and the standard library only) its module did not import: 0 points,
    # on grade and on nbgrader's autograde alike (a hostile round's finding). Those imports are stand-ins now, and
    # the top-level lines that only show things are left out; the line numbers stay the cell's.
    import importlib.util
    import sys

    import numpy as np

    for name in ("matplotlib", "matplotlib.pyplot", "IPython", "IPython.display", "grader.student.notebook"):
        monkeypatch.setitem(sys.modules, name, None)  # as in a worker: importing any of them fails
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "source": DISPLAYING, "outputs": [], "execution_count": None}]}
    text = notebook_reader.extract_modules(notebook)["softmax"]
    path = tmp_path / "softmax.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("graded_softmax", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    np.testing.assert_allclose(module.softmax(np.array([0.0, 0.0])), [0.5, 0.5])
    np.testing.assert_allclose(module.kept, np.full(4, 0.25))  # the answer's own top-level lines still run
    cell_lines = text.split("# From the notebook's cells:\n", 1)[1].split("\n")
    assert cell_lines[DISPLAYING.split("\n").index("plt.show()")].startswith("pass")  # same line as in the cell


def test_a_failure_in_a_notebook_names_the_cell_and_its_line(tmp_path):
    # A notebook student never saw softmax.py: its line numbers were the cell's, shifted by the import lines put on
    # top (and by each magic line taken out). A failure now names the notebook's cell and the cell's own line.
    import importlib.util

    from grader.grading.static_checks import _parse_problem
    from grader.sandbox.codec import exception_info, import_error_text

    cell = ("%%time\nimport numpy as np\n\n\ndef softmax(x, axis=-1):\n    %time 1\n"
            "    raise ZeroDivisionError('on purpose')\n")
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Softmax"},
        {"cell_type": "code", "id": "a", "metadata": {}, "source": cell, "outputs": [], "execution_count": None}]}
    path = tmp_path / "softmax.py"
    path.write_text(notebook_reader.extract_modules(notebook)["softmax"], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("graded_softmax", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ZeroDivisionError) as raised:
        module.softmax(np.zeros(2))
    info = exception_info(raised.value, keep=str(tmp_path))
    assert "notebook cell 2 line 7, in softmax: raise ZeroDivisionError('on purpose')" in str(info), info
    broken = notebook_reader.extract_modules({**notebook, "cells": [notebook["cells"][0], {
        **notebook["cells"][1], "source": cell.replace("def softmax(x, axis=-1):", "def softmax(x, axis=-1)")}]})
    assert _parse_problem("softmax.py", broken["softmax"].encode())[0] == "syntax error in notebook cell 2 line 5"
    path.write_text(broken["softmax"], encoding="utf-8")
    with pytest.raises(SyntaxError) as raised:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    said = import_error_text("softmax", raised.value, str(tmp_path))
    assert said.startswith("syntax error in notebook cell 2 line 5"), said
