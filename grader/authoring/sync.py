"""Build ``exercises/`` from ``solutions/``: the reference with the bodies removed.

``solutions/`` is the single source: module docstrings, imports, function
signatures and docstrings are copied verbatim into the stubs; every public
function body becomes ``raise NotImplementedError(...)`` naming the function;
private helpers (names starting with ``_``) and private modules are left out,
except the manifest's given modules (an exercise's ``given``, e.g.
``_tasks.py``), which students get as they are: copied verbatim.

Usage::

    python -m grader.authoring.sync           # rewrite exercises/ from solutions/
    python -m grader.authoring.sync --check   # exit 1 if exercises/ is out of date
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from grader.curriculum import ROOT, load, reference_dir

STUB_HEADER = "# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.\n"


def _is_private_import(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.level > 0 and (node.module or "").startswith("_")


def build_stub(source: str, exercise_number: int, exercise_name: str) -> str:
    """Return the stub module for one reference module's ``source``."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    pieces: list[str] = []
    for node in tree.body:
        segment = "".join(lines[node.lineno - 1 : node.end_lineno])
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # module docstring
            pieces.append(segment + "\n" + STUB_HEADER)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if not _is_private_import(node):
                blank = "\n" if isinstance(node, ast.ImportFrom) and node.module == "__future__" else ""
                pieces.append(segment + blank)
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            docstring = node.body[0]
            if not (isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)):
                raise ValueError(f"{exercise_name}.py: public function {node.name} has no docstring")
            head = "".join(lines[node.lineno - 1 : docstring.end_lineno])
            message = (
                f"{node.name}: not implemented yet (exercise {exercise_number}, "
                f"{exercise_name}.py; run `pytest -m {exercise_name}`)"
            )
            pieces.append("\n\n" + head + f"    raise NotImplementedError({message!r})\n")
    text = ""
    for piece in pieces:
        text += piece
    # one blank line after the imports block, PEP 8 spacing before functions
    return text.replace("\n\n\n\n", "\n\n\n").rstrip("\n") + "\n"


def expected_stubs() -> dict[Path, str]:
    """The exercise files that the current reference implies."""
    curriculum = load()
    package_doc = ('"""Your implementations: fill in the modules, in curriculum order'
                   + (f" ({', '.join(m + '.py' for m in curriculum.given_modules)} given ready made)"
                      if curriculum.given_modules else "") + '."""\n')
    stubs = {ROOT / "exercises" / "__init__.py": package_doc}
    reference = reference_dir() or ROOT / "solutions"  # the instructor's own copy (course folder or checkout)
    for exercise in curriculum.exercises:
        source = (reference / exercise.module_file).read_text(encoding="utf-8")
        stubs[ROOT / "exercises" / exercise.module_file] = build_stub(source, exercise.number, exercise.name)
    for module in curriculum.given_modules:
        stubs[ROOT / "exercises" / f"{module}.py"] = (reference / f"{module}.py").read_text(encoding="utf-8")
    return stubs


def out_of_date() -> list[str]:
    """Exercise files that differ from what the reference implies."""
    return [
        str(path.relative_to(ROOT))
        for path, text in expected_stubs().items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.sync", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = out_of_date()
        for name in stale:
            print(f"out of date: {name} (run `python -m grader.authoring.sync`)")
        return 1 if stale else 0
    for path, text in expected_stubs().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print("exercises/ rewritten from solutions/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
