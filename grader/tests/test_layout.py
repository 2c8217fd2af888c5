"""The rooms of ``grader/``: each imports only the rooms above it (see grader/__init__.py).

The order, from the bottom up: the base modules (``grader/*.py``), the
catalogue (``mutants``), ``sandbox``, ``student``, ``grading``, ``authoring``.
``cli.py`` is exempt: it dispatches to every room, importing a room only when
its command runs.
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
