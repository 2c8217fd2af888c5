"""A notebook's display lines, made inert in the module graded from its cells: plots and displays, not the answer.

Run by: the grading process, on a notebook's answer cells as text
(``grader.grading.notebook_reader.notebook_modules``); nothing here runs the student's code.

A student's answer cell may plot or display what it computed (``import matplotlib.pyplot as plt``,
``plt.imshow(weights)``, ``from IPython.display import display``), or check itself with the kit's in-notebook
helpers (``from grader.student.notebook import check``). Every check in Jupyter passes; the graded module, which
runs in a worker with numpy and the standard library only, did not import (``ModuleNotFoundError``) and the
exercise scored 0. A module graded from a notebook therefore binds each name imported from a display library
to an inert stand-in, and leaves out the cells' top-level statements that use such a name, or a name one of them
made (``fig, ax = plt.subplots()`` then ``ax.imshow(w)``): they only show things. What the answer computes
never comes from a display library, so nothing graded is lost. A function that plots inside its body calls the
stand-in, which does nothing (its result unpacks into two, as ``plt.subplots()``'s does).

The line count of the cells is kept (a statement left out becomes ``pass`` and blank lines), so that a failure's
line number is the cell's.
"""

from __future__ import annotations

import ast

# Libraries that only show things in a notebook, and the kit's in-notebook helpers: never in a grading worker.
DISPLAY_LIBRARIES = frozenset({"IPython", "ipywidgets", "matplotlib", "seaborn", "plotly", "tqdm", "grader"})
STAND_IN = "_shown_in_jupyter_only"
STAND_IN_CODE = f'''
class _ShownInJupyterOnly:
    """A display library's stand-in when graded: every use does nothing (the notebook shows; grading does not)."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __iter__(self):
        return iter((self, self))

    def __getitem__(self, key):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


{STAND_IN} = _ShownInJupyterOnly()
'''


def _display_root(node: ast.Import | ast.ImportFrom) -> bool:
    """Whether an import statement imports from a display library (every one of its names)."""
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] in DISPLAY_LIBRARIES
    return all(alias.name.split(".")[0] in DISPLAY_LIBRARIES for alias in node.names)


def _bound(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The names an import statement binds (``import a.b`` binds ``a``)."""
    return [alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name != "*"]


def _assigned(node: ast.stmt) -> set[str]:
    """The names a statement binds at module level (targets, loop variables, ``with ... as``, definitions)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        names.add(node.name)
    return names


def inert_display(code: str) -> tuple[str, bool]:
    """``code`` with its display imports bound to the stand-in and its display statements left out.

    Returns ``(code, whether the stand-in is used)``. Code that does not parse comes back unchanged (its
    module fails to import with Python's own message, as before).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code, False
    lines = code.split("\n")
    shown: set[str] = set()  # names that hold a display library's objects, or what their statements made
    replaced = False
    taken: dict[int, int] = {}  # first line of each top-level statement -> how many statements start on it
    for node in tree.body:
        taken[node.lineno] = taken.get(node.lineno, 0) + 1
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and _display_root(node):
            names = _bound(node)
            shown.update(names)
            text = (" = ".join(names) + f" = {STAND_IN}") if names else "pass"
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and shown & {
                n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            shown.update(_assigned(node))
            text = "pass"
        else:
            continue
        end = node.end_lineno or node.lineno
        if taken[node.lineno] > 1 or node.col_offset or any(n.lineno == end and n is not node and n.lineno in taken
                                                              for n in tree.body):
            continue  # shares a line with another statement: left as it is
        lines[node.lineno - 1] = text + "  # shown in Jupyter only"
        for index in range(node.lineno, end):
            lines[index] = ""
        replaced = True
    return "\n".join(lines), replaced
