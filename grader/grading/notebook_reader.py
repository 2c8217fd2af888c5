"""Read a filled-in notebook back as modules, so ``attention-kit grade`` grades a ``.ipynb`` like a folder.

:func:`extract_modules` turns a notebook into module sources
(``{"attention": "..."}``) and :func:`notebooks_to_folder` writes them as a
submission folder. The cell metadata read here is the format that the course
builder (``grader.authoring.notebooks``) writes.

Only the standard library is imported: the grader reads notebooks without
numpy, pytest or nbformat, and no student code runs here.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT, reference_dir
from grader.curriculum import load as load_curriculum
from grader.grading.links import note, refused, skipped_link
from grader.grading.notebook_display import STAND_IN, STAND_IN_CODE, inert_display
from grader.sandbox.cell_lines import map_line

# Metadata key the notebook builder puts on the cells it gives away (reference code, input checks).
KIT_METADATA = "attention_kit"
GIVEN_ROLE = "given"
# The one assignment of the course's single layout (``attention-kit notebooks --layout single``).
SINGLE_ASSIGNMENT = "self-attention"
# The private module of the reference whose input checks the notebooks give to everyone.
CHECKS_MODULE = "_checks"
# The names IPython gives every cell, which a correct answer may use in a line left from debugging: stand-ins that do
# nothing, given where the cells use them (else the module did not import: every test of the exercise scored 0).
IPYTHON_NAMES = {
    "display": "display = lambda *objects, **options: None  # IPython's display: nothing to show when graded\n",
    "get_ipython": 'get_ipython = type("Shell", (), {"__getattr__": lambda self, name: lambda *a, **k: None})  '
                   "# IPython's shell: its calls do nothing when graded\n",
}
# Folders that never hold a student's notebook (checkpoints are stale copies).
SKIPPED_FOLDERS = {".ipynb_checkpoints", "__MACOSX", "__pycache__", ".git"}

_MAGIC = re.compile(r"^\s*(%|!(?!=))")
# A notebook is read whole, so the limits come first. Its outputs are never graded (nbgrader clears them too), but a
# student may keep large ones (a plot, a long print): a file far above any notebook's code, and a bound on the
# JSON's values (what parsing it costs in memory: big outputs are a few long strings, not millions of values).
MAX_NOTEBOOK_BYTES = 64_000_000
MAX_NOTEBOOKS_BYTES = 128_000_000  # all of one submission's notebooks
MAX_JSON_VALUES = 4_000_000
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, its escapes included


def _values(raw: bytes) -> int:
    """At least the number of JSON values in ``raw`` (each one but the first follows a comma or opens a bracket)."""
    return sum(raw.count(mark) for mark in (b",", b"[", b"{"))


def _read_notebook(notebook: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    """The parsed notebook, checked cell by cell: ValueError naming the first thing that is not as nbformat says."""
    if isinstance(notebook, Mapping):
        data: Any = notebook
        name = "the notebook"
    else:
        path = Path(notebook)
        name = path.name
        status = path.lstat()
        if not stat.S_ISREG(status.st_mode):
            raise ValueError(f"{name} is not a regular file")
        if status.st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"{name} is too large ({status.st_size} bytes; limit {MAX_NOTEBOOK_BYTES}): "
                             "clear its outputs")
        raw = path.read_bytes()
        if _values(raw) > MAX_JSON_VALUES and _values(_STRING.sub(b'""', raw)) > MAX_JSON_VALUES:
            # (the marks inside strings are text, not values: a long print of commas is one value; counted again
            # without them only where the quick count is over, as nbgrader, which clears outputs, grades it)
            raise ValueError(f"{name} holds more than {MAX_JSON_VALUES} JSON values (clear its outputs)")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{name} is not a notebook (JSON): {error}") from None
        except RecursionError:
            raise ValueError(f"{name} is nested too deeply to be a notebook") from None
    if isinstance(data, Mapping) and data.get("nbformat") == 3 and isinstance(data.get("worksheets"), list):
        data = _upgraded_from_v3(data)
    if not isinstance(data, Mapping) or not isinstance(data.get("cells"), list):
        raise ValueError(f"{name} is not a notebook: no list of cells")
    if not isinstance(notebook, Mapping) and not isinstance(data.get("metadata"), Mapping):
        raise ValueError(f"{name} is not a notebook: it has no metadata (nbformat requires it)")
    for number, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, Mapping):
            raise ValueError(f"cell {number} is not an object")
        if not isinstance(cell.get("cell_type", ""), str):
            raise ValueError(f"cell {number} cell_type is not text")
        if not isinstance(notebook, Mapping):  # a file as a student's Jupyter wrote it: what nbgrader also requires
            missing = [key for key in ("cell_type", "metadata", "source") if key not in cell]
            if missing:
                raise ValueError(f"cell {number} has no {' and no '.join(missing)} (nbformat requires them)")
            if cell["cell_type"] not in CELL_TYPES:
                raise ValueError(f"cell {number} is of type {str(cell['cell_type'])[:40]!r}, which nbformat 4 does "
                                 f"not have ({', '.join(CELL_TYPES)})")
        metadata = cell.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise ValueError(f"cell {number} metadata is not an object")
        for key in (KIT_METADATA, "nbgrader"):
            if not isinstance(metadata.get(key, {}), Mapping):
                raise ValueError(f"cell {number} metadata {key} is not an object")
        source = cell.get("source", "")
        if not (isinstance(source, str) or (isinstance(source, list) and all(isinstance(s, str) for s in source))):
            raise ValueError(f"cell {number} source is not text")
    if not isinstance(notebook, Mapping):
        _as_nbgrader_reads(data, raw, name)
    return data


def _as_nbgrader_reads(data: Mapping[str, Any], raw: bytes, name: str) -> None:
    """Raise ValueError where nbgrader's autograde stops on this file, so that both graders refuse it.

    nbconvert reads a notebook with ``nbformat.read(as_version=4)`` and validates it against nbformat's schema
    after every preprocessor (``nbformat.validate(relax_add_props=True)``), raising on the first failure; the
    autograded copy is then written as UTF-8. So nbgrader graded none of these, ``nbgrader export`` wrote 0,
    where ``grade`` gave full marks (a hostile round): an nbformat 5, a notebook without ``nbformat`` or
    ``nbformat_minor``, an ``nbformat: 3`` without worksheets, a code cell without ``outputs``, a lone surrogate
    (the JSON escape of U+D800) in a Markdown cell. Outputs are cleared before the copy is written: a surrogate
    there is kept. Where nbformat is installed (the ``notebooks`` extra, which nbgrader needs) its own reader and
    validator decide; without it, the checks below.
    """
    major, minor = data.get("nbformat"), data.get("nbformat_minor")
    if type(major) is not int or major != 4 or type(minor) is not int:  # (a 3 with worksheets is upgraded)
        raise ValueError(f"{name} is not a notebook nbformat reads: nbformat {major!r}.{minor!r} (nbformat 4, or 3 "
                         "with worksheets, and an nbformat_minor)")
    for number, cell in enumerate(data["cells"], start=1):
        if cell.get("cell_type") == "code" and not (isinstance(cell.get("outputs"), list)
                                                    and "execution_count" in cell):
            raise ValueError(f"cell {number} is a code cell without outputs or execution_count (nbformat "
                             "requires them)")
    if re.search(rb"\\u[dD][89a-fA-F]", raw):  # a surrogate escape: a pair is one character, a lone one no text
        kept = {key: value for key, value in data.items() if key != "cells"}
        kept["cells"] = [{key: value for key, value in cell.items() if key != "outputs"} for cell in data["cells"]]
        try:
            json.dumps(kept, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"{name} holds a lone surrogate (\\u{ord(error.object[error.start]):04x}), which is "
                             "no text: nbgrader cannot write it back") from None
    try:
        import nbformat
    except ImportError:
        return
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            notebook = nbformat.reads(raw.decode("utf-8"), as_version=4, capture_validation_error={})
            nbformat.validate(notebook, relax_add_props=True)
        except nbformat.ValidationError as error:
            said = str(error).strip().splitlines()[0][:200]
            raise ValueError(f"{name} is a notebook nbformat calls invalid: {said}") from None
        except Exception as error:  # noqa: BLE001 - nbformat's reader stops on it: so does nbgrader
            raise ValueError(f"{name} is not a notebook nbformat reads: {str(error)[:200]}") from None


CELL_TYPES = ("code", "markdown", "raw")


def _upgraded_from_v3(data: Mapping[str, Any]) -> dict[str, Any]:
    """An nbformat 3 notebook's cells as nbformat 4 has them, as nbformat's own upgrade (which nbgrader runs) makes.

    The worksheets' cells in order; a code cell's ``input`` is its source, a heading of level n becomes a Markdown
    line of n ``#``, an HTML cell Markdown; each cell keeps its metadata (nbgrader's among them).
    """
    cells = []
    for sheet in data["worksheets"]:
        for cell in sheet.get("cells", []) if isinstance(sheet, Mapping) else []:
            if not isinstance(cell, Mapping):
                cells.append(cell)  # said as such by the checks that follow
                continue
            kind, upgraded = cell.get("cell_type"), dict(cell)
            if kind == "code":
                upgraded = {"cell_type": "code", "metadata": cell.get("metadata", {}), "source": cell.get("input", ""),
                            "outputs": [], "execution_count": None}
            elif kind == "heading":
                level = cell.get("level", 1)
                text = " ".join(_source(cell).splitlines())
                upgraded = {"cell_type": "markdown", "metadata": cell.get("metadata", {}),
                            "source": "#" * (level if isinstance(level, int) and 0 < level < 7 else 1) + " " + text}
            elif kind == "html":
                upgraded["cell_type"] = "markdown"
            cells.append(upgraded)
    return {**{key: value for key, value in data.items() if key != "worksheets"}, "cells": cells, "nbformat": 4}


def _parse(code: str) -> ast.Module | None:
    """``code``'s syntax tree, or None when it does not parse (syntax errors, pathologically deep expressions)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _source(cell: Mapping[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def strip_magics(code: str) -> str:
    """``code`` without IPython magics and shell escapes (logical lines starting with ``%`` or ``!``).

    As IPython reads them: only a line that starts a statement is a magic. A line inside brackets, a string or
    after a backslash is Python's (``% (axis, shape)`` continuing ``"axis=%d ..."`` is an operator, a docstring's
    line may start with ``%``): removing it broke an honest student's module.
    """
    lines = code.splitlines()
    starts = _statement_starts(lines)
    # (a blank line for each: the cell's line numbers stay, for the places failures name: ``cell_lines``)
    return "\n".join("" if index in starts and _MAGIC.match(line) else line
                     for index, line in enumerate(lines)).rstrip("\n") + "\n"


_SCANNED = re.compile(r"""[#\\'"()\[\]{}]""")


def _statement_starts(lines: list[str]) -> set[int]:
    """The indices of ``lines`` that start a logical line: outside brackets, strings and backslash continuations.

    One pass over the characters that matter (brackets, quotes, comments, backslashes); a magic line is not
    scanned (it is not Python).
    """
    starts: set[int] = set()
    depth, quote, continued = 0, "", False
    for index, line in enumerate(lines):
        if not depth and not quote and not continued:
            starts.add(index)
            if _MAGIC.match(line):
                continue  # a magic is not Python: its quotes and brackets open nothing (``!echo don't``)
        continued, position = False, 0
        while position < len(line):
            if quote:  # inside a string: find its end (a backslash escapes the next character, raw strings too)
                end = position
                while end < len(line) and not line.startswith(quote, end):
                    end += 2 if line[end] == "\\" else 1
                if end >= len(line):
                    if len(quote) == 1 and not line.endswith("\\"):
                        quote = ""  # an unterminated one-line string: Python's error, not a continuation
                    break
                position, quote = end + len(quote), ""
                continue
            found = _SCANNED.search(line, position)
            if found is None:
                break
            char, position = found.group(), found.end()
            if char == "#":
                break
            if char == "\\":
                continued = position == len(line)
                position += 1
            elif char in "'\"":
                quote = char * 3 if line.startswith(char * 2, position) else char
                position += len(quote) - 1
            elif char in "([{":
                depth += 1
            else:
                depth = max(depth - 1, 0)
    return starts


def _defined_functions(code: str) -> list[str]:
    """Top-level names ``code`` defines: its functions, and names bound to one (``attention_scores = _scores``).

    Found by regex when it does not parse. A name that is no function of the manifest is passed over by the caller.
    """
    tree = _parse(code)
    if tree is None:
        return re.findall(r"^def\s+(\w+)", code, flags=re.MULTILINE)
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Name, ast.Attribute,
                                                                                          ast.Lambda)):
            # A function bound to the name (not a value computed by a call: a cell that tries the functions out).
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [target.id for target in targets if isinstance(target, ast.Name)]
    return names


def _used_names(code: str) -> set[str]:
    tree = _parse(code)
    if tree is None:
        return set(re.findall(r"\w+", code))
    try:
        return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    except RecursionError:
        return set(re.findall(r"\w+", code))


def import_header(exercise: str) -> str:
    """The import lines of ``exercises/<exercise>.py`` (relative imports included), as module text."""
    path = ROOT / "exercises" / f"{exercise}.py"
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "".join("".join(lines[node.lineno - 1:node.end_lineno]) for node in imports)


def _checks_functions() -> set[str]:
    """The public input checks of ``solutions/_checks.py`` (the notebooks give them to everyone)."""
    path = (reference_dir() or ROOT / "solutions") / f"{CHECKS_MODULE}.py"
    if not path.is_file():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def _is_given(cell: Mapping[str, Any]) -> bool:
    return cell.get("metadata", {}).get(KIT_METADATA, {}).get("role") == GIVEN_ROLE


def _marked(cells: list[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], str]]:
    """The cells nbgrader's autograde keeps as marked, with their ids, in order.

    A cell marked as nothing (no ``grade``, ``solution`` nor ``locked`` flag, nbgrader's truthiness) is a plain
    cell, as the kit's ``HalfFilledIds`` makes it; so is one without an id. Of cells that share an id (Jupyter
    copies a cell's metadata with it), only the last counts, as nbgrader's ``DeduplicateIds`` keeps it and
    empties the others.
    """
    seen: set[Any] = set()
    marked = []
    for cell in reversed(cells):
        meta = cell.get("metadata", {}).get("nbgrader")
        if not isinstance(meta, Mapping) or not any(meta.get(flag) for flag in MARKS):
            continue  # marks nothing (or only a task): a plain cell
        grade_id = meta.get("grade_id")
        if not isinstance(grade_id, str) or not grade_id or grade_id in seen:
            continue  # half-filled, or an earlier copy of a later cell: its metadata emptied
        seen.add(grade_id)
        marked.append((cell, grade_id))
    return marked[::-1]


def _answer_cells(cells: list[Mapping[str, Any]], exercises: Iterable[str] | None = None) -> list[Mapping[str, Any]]:
    """The notebook's answer cells, read as nbgrader's autograde reads them before the kit grades them.

    An answer cell is one whose nbgrader ``grade_id`` is a released answer cell's (``<exercise>-code``, what
    ``attention-kit notebooks`` writes; of ``exercises`` only, when given: the answer cells this notebook was
    released with), whatever its kind or flags now: nbgrader gives a released cell its released metadata and
    kind back (a cell turned into Markdown is code again). Only the cells :func:`_marked` keeps count; a cell
    whose id the release does not have (made up, another notebook's) is a plain cell. So ``attention-kit grade``
    and nbgrader's gradebook score the same notebook alike.
    """
    names = load_curriculum().names if exercises is None else exercises
    released = {f"{name}-code" for name in names}
    return [cell for cell, grade_id in _marked(cells) if grade_id in released]


def _restored_cells(cells: list[Mapping[str, Any]], exercises: Iterable[str] | None = None) -> list[int]:
    """``id()`` of the cells whose source nbgrader's autograde replaces by the release's: its read-only cells.

    A marked cell (:func:`_marked`) whose id is one the builder gives a locked cell of these exercises (the
    given code, ``<exercise>-given`` or the single notebook's ``given-checks``; a test, ``<exercise>-test_...``;
    a hidden test, ``<exercise>-hidden-<n>``) gets the released source back at autograde, whatever a student
    wrote in it: what is in it is not the student's code. Read only where no answer cell is left: before, a
    student's edit of a test cell (a function defined in it) was graded by ``grade`` and not by nbgrader.
    """
    names = load_curriculum().names if exercises is None else exercises
    shapes = [re.compile(rf"{re.escape(name)}-(given|test_[\w-]*|hidden-\d+)") for name in names]
    single = exercises is None  # (an assignment's notebook has no given-checks cell: one with it is made up)
    return [id(cell) for cell, grade_id in _marked(cells)
            if (single and grade_id == "given-checks") or any(shape.fullmatch(grade_id) for shape in shapes)]


# The nbgrader flags that make a cell one of the release's (what DeduplicateIds looks at, by truthiness).
MARKS = ("grade", "solution", "locked")


def extract_modules(notebook: str | Path | Mapping[str, Any],
                    exercises: Iterable[str] | None = None) -> dict[str, str]:
    """Module sources for the exercises whose functions a filled-in notebook defines.

    Parameters
    ----------
    notebook : path or notebook node
        A ``.ipynb`` file or its parsed JSON (an ``nbformat`` node is a dict).
    exercises : names, optional
        The exercises whose answer cells the notebook was released with (an
        assignment's notebook: its own); default: every exercise.

    Returns
    -------
    dict
        ``{exercise name: module source}``; each module is the import header
        of ``exercises/<exercise>.py`` followed by the student's cells that
        define its functions (its answer cells, as nbgrader reads them:
        ``_answer_cells``; without any, every code cell that the builder did
        not give away and that nbgrader does not give its released source
        back: ``_restored_cells``), magics
        removed. When that code calls the given input checks
        (``as_float_array`` ...), the module imports them from ``_checks`` and
        the result has a ``"_checks"`` entry with their source. IPython's own
        names the cells use (``display``, ``get_ipython``) are stand-ins that
        do nothing (:data:`IPYTHON_NAMES`), and so are the names the cells
        import from display libraries, whose top-level uses are left out
        (:mod:`grader.grading.notebook_display`).
    """
    data = _read_notebook(notebook)
    curriculum = load_curriculum()
    cells = [cell for cell in data["cells"] if isinstance(cell, Mapping)]
    chosen = _answer_cells(cells, exercises)
    if not chosen:  # the student's code cells: not those autograde gives their released source back
        restored = _restored_cells(cells, exercises)
        chosen = [cell for cell in cells
                  if cell.get("cell_type") == "code" and not _is_given(cell) and id(cell) not in restored]
    pieces: dict[str, list[tuple[int, str]]] = {}  # exercise -> (the cell's number in the notebook, its code)
    number = {id(cell): index for index, cell in enumerate(data["cells"], start=1)}
    for cell in chosen:
        code = inert_display(strip_magics(_source(cell)))[0]
        owners = []
        for name in _defined_functions(code):
            with contextlib.suppress(ValueError):
                owner = curriculum.exercise_of_function(name).name
                if owner not in owners:
                    owners.append(owner)
        for owner in owners:
            pieces.setdefault(owner, []).append((number.get(id(cell), 0), code))
    checks = _checks_functions()
    modules: dict[str, str] = {}
    for exercise in curriculum.names:
        if exercise not in pieces:
            continue
        code = "\n\n".join(piece for _, piece in pieces[exercise])
        header = import_header(exercise)
        wanted = sorted((_used_names(code) & checks) - set(_defined_functions(code)))
        if wanted:
            # The notebook gave these input checks in a read-only cell; the module imports them instead.
            header += f"from .{CHECKS_MODULE} import {', '.join(wanted)}\n"
            checks_file = (reference_dir() or ROOT / "solutions") / f"{CHECKS_MODULE}.py"
            modules[CHECKS_MODULE] = checks_file.read_text(encoding="utf-8")
        header += "".join(IPYTHON_NAMES[name] for name in sorted(_used_names(code) & IPYTHON_NAMES.keys()))
        if STAND_IN in _used_names(code):  # a display library's names (notebook_display): inert when graded
            header += STAND_IN_CODE
        modules[exercise] = _with_line_map(f"{header}\n\n# From the notebook's cells:\n", pieces[exercise])
    return {name: modules[name] for name in sorted(modules, key=lambda n: (n != CHECKS_MODULE, n))}


def _with_line_map(header: str, pieces: list[tuple[int, str]]) -> str:
    """``header`` then the cells' code, two lines apart, under a first line that maps them (``cell_lines``)."""
    spans, line = [], 2 + header.count("\n")  # (the map's own line comes first)
    for cell, code in pieces:
        count = code.count("\n") + (not code.endswith("\n"))
        spans.append((line, cell, 1, count))
        line += count + 1 + code.endswith("\n")
    return map_line(spans) + header + "\n\n".join(code for _, code in pieces)


def assignment_name(exercise: Any) -> str:
    """``01-softmax``: the folder of an exercise's assignment in a per-exercise course (its number and name)."""
    return f"{exercise.number:02d}-{exercise.name}"


def course_notebooks(notebooks: Iterable[Path]) -> list[Path]:
    """Of ``notebooks``, those a course of ``attention-kit notebooks`` asks for, in the manifest's order.

    ``<NN-name>/<name>.ipynb`` (per exercise) and ``self-attention/self-attention.ipynb`` (one assignment): the
    notebooks nbgrader's own autograde grades. Other notebooks and modules beside them are not graded.
    """
    from grader.curriculum import load as load_curriculum

    wanted = [(assignment_name(e), f"{e.name}.ipynb") for e in load_curriculum().exercises]
    wanted.append((SINGLE_ASSIGNMENT, f"{SINGLE_ASSIGNMENT}.ipynb"))
    found = {(path.parent.name, path.name): path for path in sorted(notebooks, reverse=True)}  # the first wins
    return [found[key] for key in wanted if key in found]


def find_notebooks(folder: Path, depth: int = 3) -> list[Path]:
    """The ``.ipynb`` files in ``folder`` and up to ``depth`` levels below (checkpoints skipped), sorted."""
    found: list[Path] = []
    pending = [(Path(folder), 0)]
    while pending:
        current, level = pending.pop()
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED_FOLDERS or entry.name.startswith(".") or skipped_link(entry):
                continue
            if entry.is_file() and entry.suffix.lower() == ".ipynb" and not refused(entry):
                found.append(entry)
            elif entry.is_dir() and level < depth:
                pending.append((entry, level + 1))
    return sorted(found)


def _assignment_exercise(notebook: Path) -> str | None:
    """The exercise whose assignment ``notebook`` is (``03-attention/attention.ipynb``), or None (any other)."""
    for exercise in load_curriculum().exercises:
        if notebook.parent.name == assignment_name(exercise) and notebook.name == f"{exercise.name}.ipynb":
            return exercise.name
    return None


def notebooks_to_folder(notebooks: Iterable[Path], target: Path, problems: list[str] | None = None) -> Path:
    """Write the modules of ``notebooks`` as ``.py`` files into ``target``; returns ``target``.

    An exercise defined in several notebooks is taken from the first (in the
    order given). The notebook of an exercise's assignment in a per-exercise
    course (``03-attention/attention.ipynb``) gives that exercise only, as
    nbgrader grades it by that notebook's test cells: code of another
    exercise pasted into it (a later notebook's given cell) is not graded. A
    notebook that cannot be read is skipped: its exercises show up as
    missing modules in the grade, and ``problems`` (if given) receives one
    line saying why.
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    for notebook in notebooks:
        own = _assignment_exercise(Path(notebook))
        try:
            modules = extract_modules(notebook, None if own is None else [own])
        except (ValueError, OSError, RecursionError, MemoryError) as error:
            if problems is not None:
                problems.append(f"{Path(notebook).name}: {error}")
            note(Path(notebook), f"not graded ({error})")  # on the student's row: why its exercises are missing
            continue
        for name, source in modules.items():
            if own is not None and name not in (own, CHECKS_MODULE):
                continue
            if name not in written:
                (target / f"{name}.py").write_text(source, encoding="utf-8")
                written.add(name)
    return target
