"""Held-out mistakes: realistic errors the suite was NOT tuned to (never in grader/mutants/).

Each ``benchmarks/heldout/<exercise>.toml`` lists ``[[mistake]]`` tables::

    [[mistake]]
    id = "ho-softmax-loop-rows"      # unique
    run = "softmax"                  # the exercise whose tests a student runs (pytest -m softmax)
    idea = []                        # catalogued mistake ids it truly is ([]: none of them)
    also = []                        # ids that look the same on every input (naming them is right too)
    blame = ""                       # a function of an earlier exercise / earlier in the same one that
                                     # the first failure must name first ("" when none)
    [[mistake.edit]]
    file = "softmax.py"
    function = "softmax"             # replace the whole top-level function by `code` ...
    code = '''def softmax(x, axis=-1): ...'''
    # ... or a text edit:  replace = "..."  with = "..."  (count = 1)

The fingerprints (grader/fingerprints.py) read only grader/mutants/, so nothing here can leak into the
diagnosis. ``benchmarks/heldout_mistakes.py`` plants each mistake and prints the figures.
"""

from __future__ import annotations

import ast
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


@dataclass(frozen=True)
class Edit:
    file: str
    function: str = ""
    code: str = ""
    replace: str = ""
    with_: str = ""
    count: int = 1


@dataclass(frozen=True)
class HeldOut:
    id: str
    run: str
    idea: tuple[str, ...]
    also: tuple[str, ...]
    blame: str
    note: str
    edits: tuple[Edit, ...] = field(default=())


def load(folder: Path = HERE) -> list[HeldOut]:
    """Every held-out mistake of ``folder`` (this one by default), file by file (sorted), in file order."""
    found = []
    for path in sorted(Path(folder).glob("*.toml")):
        for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("mistake", []):
            edits = tuple(Edit(file=e["file"], function=e.get("function", ""), code=e.get("code", ""),
                               replace=e.get("replace", ""), with_=e.get("with", ""), count=int(e.get("count", 1)))
                          for e in entry["edit"])
            found.append(HeldOut(entry["id"], entry["run"], tuple(entry.get("idea", ())),
                                 tuple(entry.get("also", ())), entry.get("blame", ""), entry.get("note", ""), edits))
    return found


def _replace_function(source: str, name: str, code: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            lines = source.splitlines(keepends=True)
            return "".join(lines[:start]) + code.strip("\n") + "\n" + "".join(lines[node.end_lineno:])
    raise ValueError(f"no top-level function {name}() to replace")


def plant(mistake: HeldOut, target: Path, reference: Path = ROOT / "solutions") -> Path:
    """Copy the reference into ``target`` and apply the mistake's edits."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(reference, target, ignore=shutil.ignore_patterns("__pycache__"))
    for edit in mistake.edits:
        path = target / edit.file
        source = path.read_text(encoding="utf-8")
        if edit.function:
            source = _replace_function(source, edit.function, edit.code)
        else:
            found = source.count(edit.replace)
            if found != edit.count:
                raise ValueError(f"{mistake.id}: expected {edit.count} occurrence(s) of its replace text in "
                                 f"{edit.file}, found {found}")
            source = source.replace(edit.replace, edit.with_)
        path.write_text(source, encoding="utf-8")
    return target
