"""The rooms of ``grader/``: each imports only the rooms above it (see grader/__init__.py).

The order, from the bottom up: the base modules (``grader/*.py``), the
catalogue (``mutants``), ``sandbox``, ``student``, ``grading``, ``authoring``.
``cli.py`` is exempt: it dispatches to every room, importing a room only when
its command runs.

And no module of ``grader/``, ``tests/`` or ``solutions/`` is part of an import
circle: every import counts, at module level or inside a function, absolute or
relative (a lazy import inside a function only hides a circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.curriculum import ROOT

ORDER = ("base", "mutants", "sandbox", "student", "grading", "authoring")
GRADER = ROOT / "grader"


def room_of(module: str) -> str | None:
    """The room of a ``grader`` module name, None outside the rooms (tests, hidden tests, other packages)."""
    parts = module.split(".")
    if parts[0] != "grader" or (len(parts) > 1 and parts[1] in ("tests", "hidden_tests")):
        return None
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else "base"


def kit_modules() -> list[Path]:
    return sorted(p for p in GRADER.rglob("*.py") if not {"tests", "hidden_tests"} & set(p.relative_to(GRADER).parts))


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_room_names_are_the_documented_ones() -> None:
    rooms = {p.parent.name for p in GRADER.glob("*/__init__.py")} - {"tests", "hidden_tests"}
    assert rooms == set(ORDER) - {"base"}, f"rooms of grader/: {sorted(rooms)}; documented: {ORDER[1:]}"


@pytest.mark.parametrize("path", kit_modules(), ids=lambda p: p.relative_to(GRADER).as_posix())
def test_no_import_runs_up_a_room(path: Path) -> None:
    if path == GRADER / "cli.py":
        return
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    here = room_of(module)
    upward = sorted(name for name in imported_modules(path)
                    if (room := room_of(name)) and ORDER.index(room) > ORDER.index(here))
    assert not upward, f"{path.relative_to(ROOT)} ({here}) imports {upward} from a room above it"


def test_every_room_says_what_it_is_for() -> None:
    for room in ORDER[1:]:
        doc = ast.get_docstring(ast.parse((GRADER / room / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "Called by" in doc, f"grader/{room}/__init__.py needs a docstring that says who calls it"


# ------------------------------------------------------------------ no import circle

# Every module whose imports form the graph: the grader (its rooms, its own tests, the hidden tests), the graded
# suite and the reference. A circle anywhere makes the import order decide what works, so none is allowed.
GRAPH_FOLDERS = ("grader", "tests", "solutions")


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module at ``path`` (``grader/student/demo.py`` is ``grader.student.demo``)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def graph_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of :data:`GRAPH_FOLDERS` under ``root``, by dotted name."""
    return {module_name(path, root): path for folder in GRAPH_FOLDERS
            for path in sorted((root / folder).rglob("*.py")) if "__pycache__" not in path.parts}


def imports_of(name: str, source: str, known: set[str], *, is_package: bool = False) -> set[str]:
    """The modules of ``known`` that the module ``name`` imports, anywhere in it (top level or in a function).

    ``import a.b.c`` imports ``a``, ``a.b`` and ``a.b.c``; ``from a.b import c``
    imports ``a``, ``a.b`` and, when it is a module, ``a.b.c``. A relative import
    is resolved against the module's package (``is_package``: ``name`` is a
    package's ``__init__``, its own package).
    """
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(part for part in [*parts, base] if part)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            pieces = target.split(".")
            found.update(prefix for i in range(1, len(pieces) + 1) if (prefix := ".".join(pieces[:i])) in known)
    if is_package:
        found.discard(name)  # `from . import a` in a package's __init__ names the package it is running
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module name -> the modules of the kit it imports."""
    modules = graph_modules(root)
    return {name: imports_of(name, path.read_text(encoding="utf-8"), set(modules),
                             is_package=path.name == "__init__.py")
            for name, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, and every self-import.

    Tarjan's algorithm, without recursion. Each circle is listed sorted, the circles in sorted order.
    """
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = lowlink[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = lowlink[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    lowlink[node] = min(lowlink[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                lowlink[parent] = min(lowlink[parent], lowlink[node])
            if lowlink[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    circles.append(sorted(component))
    return sorted(circles)


def test_the_circle_finder_finds_circles_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d", "g"}, "g": {"d"},
             "h": {"i"}, "i": {"h"}}
    assert import_circles(graph) == [["a", "b", "c"], ["e"], ["h", "i"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_follows_relative_absolute_and_function_level_imports() -> None:
    known = {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "other"}
    source = ("from .c import thing\nimport other\n"
              "def f():\n    from pkg.b import name\n    from .. import a\n")
    assert imports_of("pkg.sub.d", source, known) == {"pkg", "pkg.sub", "pkg.sub.c", "pkg.a", "pkg.b", "other"}
    assert imports_of("pkg.x", "from . import a\nfrom .sub import c\n", known) == {"pkg", "pkg.a", "pkg.sub",
                                                                                   "pkg.sub.c"}
    assert imports_of("pkg", "from . import a\nfrom .b import name\n", known, is_package=True) == {"pkg.a", "pkg.b"}
    assert imports_of("pkg.a", "import pkg.a\n", known) == {"pkg", "pkg.a"}  # a self-import is an edge


def test_no_module_of_the_kit_is_part_of_an_import_circle() -> None:
    graph = import_graph()
    assert {"grader.student.demo", "tests.kit", "solutions.attention"} <= set(graph), "the graph misses modules"
    assert "grader.student.picture" in graph["grader.student.measured_demo"], "the graph misses an import"
    circles = import_circles(graph)
    assert not circles, "import circles (modules that import each other, directly or through others): " + "; ".join(
        " <-> ".join(circle) for circle in circles)


MOST_LINES = 620  # "no module in grader/ over about 600 lines": a module past it holds more than one job


def test_no_module_of_the_grader_is_longer_than_about_600_lines() -> None:
    long = {path.relative_to(ROOT).as_posix(): n for path in kit_modules()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long, f"modules over {MOST_LINES} lines (split them by job): {long}"
