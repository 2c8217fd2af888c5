"""``attention-kit notebooks``: build an nbgrader course holding the kit's exercises (instructors).

::

    attention-kit notebooks OUT_DIR [--layout per-exercise|single] [--hidden DIR]

writes ``OUT_DIR/nbgrader_config.py`` and ``OUT_DIR/source/<assignment>/<notebook>.ipynb``:

* ``per-exercise`` (default): one assignment per exercise (``01-softmax``
  ...), one notebook each. The exercises it builds on are given as working
  code in a read-only cell (the kit's given implementations, never the
  reference's code), as ``attention-kit grade`` serves them (fair grading).
* ``single``: one assignment ``self-attention`` with every exercise in one
  notebook; earlier cells define what later ones use.

Everything comes from the kit: the order, titles and points from the
manifest, the teaching text and the code from ``solutions/`` (each body
between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so the
released notebook keeps signatures and docstrings), and one autograded test
cell per graded test of ``tests/`` and of the hidden tests. In the student's
kernel a test cell calls ``grader.student.notebook.check``, which runs the
kit's own test: a practice aid, never a grade. ``nbgrader autograde`` runs no
cell: the course's ``nbgrader_config.py`` replaces nbgrader's kernel by
``grader.grading.nbgrader_autograde``, which grades the answer cells in the
kit's sandbox as ``attention-kit grade`` does and writes each test cell's
outcome. The points of a cell are the points ``attention-kit grade`` gives
that test, so the two agree.

Only the standard library is imported at the top (``cli.py`` imports this
module to build ``--help``); nbformat and pytest are imported when it runs.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import course, scoring
from grader.authoring.notebook_order import assignment_name, release_order
from grader.curriculum import PACKAGE, PART_ENV, ROOT, Exercise, reference_dir
from grader.curriculum import load as load_curriculum
from grader.grading.notebook_reader import CHECKS_MODULE, GIVEN_ROLE, KIT_METADATA, SINGLE_ASSIGNMENT
from grader.suite import HIDDEN_DIR

LAYOUTS = ("per-exercise", "single")
NBGRADER_SCHEMA = 3
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
INDENT = "    "

# The course's nbgrader_config.py, formatted with course_id and grading (str.format: braces doubled).
CONFIG_TEMPLATE = (Path(__file__).resolve().parent / "templates" / "nbgrader_config.py.tmpl").read_text(
    encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Reading the reference


@dataclass(frozen=True)
class Function:
    """A public function of a reference module, split where nbgrader's solution region goes."""

    name: str
    head: str  # decorators, signature and docstring, verbatim
    body: str  # the rest of the function, verbatim
    uses: frozenset[str]


@dataclass(frozen=True)
class Module:
    """One reference module, cut into the parts a notebook shows."""

    name: str
    docstring: str
    imports: tuple[str, ...]  # non-relative imports, one statement each (no __future__)
    private: tuple[tuple[str, str, frozenset[str]], ...]  # (defined name, source, names used), module order
    functions: tuple[Function, ...]
    code: str  # every top-level statement but the docstring and imports (what a given cell shows)


def _segment(lines: list[str], node: ast.stmt) -> str:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "".join(lines[start - 1:node.end_lineno])


def _names(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))


def read_module(path: Path) -> Module:
    """Cut the module at ``path`` into docstring, imports, private helpers and public functions."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    docstring = ast.get_docstring(tree, clean=True) or ""
    imports, private, functions, code = [], [], [], []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not (isinstance(node, ast.ImportFrom) and (node.level or node.module == "__future__")):
                imports.append(_segment(lines, node).strip())
            continue
        code.append(_segment(lines, node).rstrip() + "\n")
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            docnode = node.body[0]
            if not (isinstance(docnode, ast.Expr) and isinstance(docnode.value, ast.Constant)):
                raise ValueError(f"{path.name}: public function {node.name} has no docstring")
            head = "".join(lines[min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1:docnode.end_lineno])
            body = "".join(lines[docnode.end_lineno:node.end_lineno]).strip("\n") + "\n"
            functions.append(Function(node.name, head, body, _names(node)))
        else:
            targets = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [
                t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)]
            for target in targets:
                private.append((target, _segment(lines, node).rstrip() + "\n", _names(node)))
    return Module(path.stem, docstring, tuple(imports), tuple(private), tuple(functions), "\n\n".join(code))


def reference(name: str) -> Module:
    """The reference module ``solutions/<name>.py``."""
    return read_module((reference_dir() or ROOT / "solutions") / f"{name}.py")


def working_code(name: str) -> Module:
    """What a notebook gives for exercise ``name``, which the exercise built on: the kit's given implementation.

    Never the reference's code where the kit has a given implementation checked against the reference in use
    (``grader.sandbox.given``): a course that assigns ``name`` next term must not find its answer in this term's
    notebooks. An exercise with none (an instructor's own) is given as its reference.
    """
    from grader.sandbox import given

    where = given.folder()
    if where is None and not load_curriculum().exercise(name).home:  # a kit's exercise: never its reference
        raise RuntimeError(f"the notebooks give exercise {name}: {given.missing()}")
    if name in given.usable(reference_dir() or ROOT / "solutions", load_curriculum()):
        return read_module(where / f"{name}.py")
    return reference(name)


def _indent(text: str, prefix: str = INDENT) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


def solution_code(module: Module) -> str:
    """The module's public functions, each body inside a solution region.

    Private helpers of the reference (``_gelu_tanh`` ...) go inside the
    region of each function that uses them, so the released notebook shows
    none of them and never runs a bare ``raise NotImplementedError()`` at the
    top level of a cell.
    """
    defined = {name: (source, uses) for name, source, uses in module.private}
    blocks = []
    for function in module.functions:
        needed: list[str] = []
        pending = sorted(function.uses & set(defined))
        while pending:
            name = pending.pop()
            if name not in needed:
                needed.append(name)
                pending.extend(sorted(defined[name][1] & set(defined)))
        order = [name for name, _, _ in module.private if name in needed]
        helpers = "".join(_indent(defined[name][0]) + "\n" for name in order)
        blocks.append(f"{function.head}{INDENT}{BEGIN_SOLUTION}\n{helpers}{function.body}{INDENT}{END_SOLUTION}\n")
    return "\n\n".join(blocks)


def checks_code() -> str:
    """The reference's input checks (``solutions/_checks.py`` without docstring and imports)."""
    path = (reference_dir() or ROOT / "solutions") / f"{CHECKS_MODULE}.py"
    return read_module(path).code if path.is_file() else ""


def docstring_markdown(text: str) -> str:
    """A module docstring (reStructuredText-ish) as Markdown: inline code, section titles, literal blocks."""
    out: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if re.fullmatch(r"-{3,}|={3,}", line.strip()) and out and out[-1].strip():
            out[-1] = f"### {out[-1].strip()}"
            continue
        if line.rstrip().endswith("::") and following.strip() == "":
            line = line.rstrip()[:-1]
        out.append(re.sub(r"``(.+?)``", r"`\1`", line))
    return "\n".join(out).strip()


# ---------------------------------------------------------------------------------------------
# The graded tests and their points


@dataclass(frozen=True)
class GradedTest:
    """One test of the graded suite as a notebook cell: which check, and its points."""

    exercise: str
    name: str
    points: float
    hidden: bool
    folder: str | None = None  # a hidden test folder other than the kit's own
    number: int = 0  # a hidden test's place among its exercise's hidden tests (1, 2, ...)

    @property
    def grade_id(self) -> str:
        """The nbgrader cell id: ``<exercise>-<test>``; a hidden test's ``<exercise>-hidden-<number>``.

        A hidden test's name is no part of its id: the id is in every released notebook's metadata.
        """
        name = f"hidden-{self.number}" if self.hidden else self.name
        return re.sub(r"[^A-Za-z0-9_-]", "_", f"{self.exercise}-{name}")


def graded_tests(hidden: Path | None) -> dict[str, list[GradedTest]]:
    """Exercise -> its graded tests in file order (visible, then hidden), with the grader's points.

    The points are those of ``attention-kit grade``: each pool (the
    exercise's manifest points, or a hidden file's own ``POINTS``) is split
    between the tests that share it by the scoring rule (whole sixteenths,
    so nbgrader's float sum of the cells' points is the maximum exactly).
    """
    from grader.student.notebook import collect_tests
    from grader.suite import graded_suite

    suite, warnings = graded_suite(hidden)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    curriculum = load_curriculum()
    names = {test_file.path: collect_tests(test_file.path) for test_file in suite}
    pools: dict[str, float] = {name: curriculum.exercise(name).points for name in curriculum.names}
    sizes: dict[str, int] = {}
    for test_file in suite:
        if test_file.points is not None:
            pools[test_file.pool] = test_file.points
        sizes[test_file.pool] = sizes.get(test_file.pool, 0) + len(names[test_file.path])
    custom = None
    if hidden is not None and hidden.resolve() != HIDDEN_DIR.resolve():
        custom = str(hidden.resolve())
    tests: dict[str, list[GradedTest]] = {name: [] for name in curriculum.names}
    shares = {pool: iter(scoring.shares(pools[pool], size)) for pool, size in sizes.items()}
    for test_file in suite:
        mine = tests[test_file.exercise]
        for name in names[test_file.path]:
            number = sum(test.hidden for test in mine) + 1 if test_file.hidden else 0
            mine.append(GradedTest(test_file.exercise, name, next(shares[test_file.pool]), test_file.hidden,
                                   custom if test_file.hidden else None, number))
    return tests


# ---------------------------------------------------------------------------------------------
# Cells


def _nbgrader(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
              points: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"grade": grade, "grade_id": grade_id, "locked": locked,
                            "schema_version": NBGRADER_SCHEMA, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


class NotebookBuilder:
    """Collects the cells of one notebook, with stable cell ids (the output is deterministic)."""

    def __init__(self, stem: str) -> None:
        import nbformat

        self.nbformat = nbformat
        self.stem = re.sub(r"[^A-Za-z0-9_-]", "-", stem)
        self.cells: list[Any] = []

    def _id(self) -> str:
        return f"{self.stem}-{len(self.cells):03d}"[-64:]

    def markdown(self, text: str, metadata: dict[str, Any] | None = None) -> None:
        """Add a markdown cell."""
        self.cells.append(self.nbformat.v4.new_markdown_cell(text.strip(), id=self._id(), metadata=metadata or {}))

    def code(self, text: str, metadata: dict[str, Any] | None = None) -> None:
        """Add a code cell."""
        self.cells.append(self.nbformat.v4.new_code_cell(text.strip("\n"), id=self._id(), metadata=metadata or {}))

    def read_only(self, text: str, grade_id: str) -> None:
        """Add a locked code cell the builder gives away (reference code)."""
        metadata = _nbgrader(grade_id, locked=True) | {KIT_METADATA: {"role": GIVEN_ROLE},
                                                      "editable": False, "deletable": False}
        self.code(text, metadata)

    def notebook(self) -> Any:
        """The nbformat v4 notebook with a python3 kernel."""
        notebook = self.nbformat.v4.new_notebook(cells=self.cells)
        notebook.metadata["kernelspec"] = dict(KERNELSPEC)
        notebook.metadata["language_info"] = {"name": "python"}
        return notebook


def _checks_module() -> list[Module]:
    path = (reference_dir() or ROOT / "solutions") / f"{CHECKS_MODULE}.py"
    return [read_module(path)] if path.is_file() else []


def _imports(modules: list[Module]) -> str:
    seen: list[str] = []
    for module in modules:
        seen += [line for line in module.imports if line not in seen]
    return "\n".join(seen)


def _given_modules(names: tuple[str, ...]) -> list[Module]:
    """The manifest's given modules (``_tasks.py`` ...): students get them ready made."""
    return [reference(name) for name in names]


def _given(builder: NotebookBuilder, exercise: Exercise, dependencies: tuple[str, ...], grade_id: str,
           given: tuple[str, ...] = ()) -> None:
    """The read-only cell with the input checks, the given modules and the reference code of ``dependencies``."""
    curriculum = load_curriculum()
    if dependencies:
        earlier = ", ".join(f"{curriculum.exercise(n).number} ({n})" for n in dependencies)
        builder.markdown(
            f"## Given: the exercises this one builds on\n\n"
            f"Exercise {exercise.number} uses the functions of exercise(s) {earlier}. The cell below defines "
            "them with working code the kit gives (written apart from the reference), so this exercise is graded "
            "on its own code only (as "
            "`attention-kit grade` does by default). It also holds the input checks (`as_float_array`, "
            "`require_ndim` ...) that raise the `ValueError`s the tests ask for; you may use them. "
            "Run it, do not edit it."
        )
    else:
        builder.markdown(
            "## Given: input checks\n\n"
            "The cell below defines small input checks (`as_float_array`, `require_ndim` ...) that raise a "
            "`ValueError` naming the argument, as the tests ask. You may use them. Run it, do not edit it."
        )
    if given:
        builder.markdown("The same cell defines, ready made, what "
                         + ", ".join(f"`{name}.py`" for name in given)
                         + " holds (for this exercise: the task it trains on, e.g. `antecedent_task(rng, n)`).")
    parts = [checks_code()] + [module.code for module in _given_modules(given)] + [
        working_code(name).code for name in dependencies]
    builder.read_only("\n\n".join(part.strip() for part in parts if part.strip()) + "\n", grade_id)


READING = ROOT / "docs" / "reading.md"
_ANCHOR = re.compile(r'^<a id="(?P<id>[\w-]+)"></a>\n', re.M)


def reading_sections(path: Path = READING) -> dict[str, str]:
    """Section id -> its Markdown (anchor and heading included), from the reading at ``path``.

    A section runs from its ``<a id="..."></a>`` anchor to the next anchor or the next
    level-2 heading without one (``## Further reading``). Empty when there is no reading.
    """
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    starts = list(_ANCHOR.finditer(text))
    sections = {}
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        body = text[match.start():end]
        heading = re.search(r"^## ", body[match.end() - match.start():], re.M)
        following = re.search(r"^## ", body[match.end() - match.start() + (heading.end() if heading else 0):], re.M)
        if following:  # a heading that is not this section's own (e.g. "## Further reading")
            body = body[:match.end() - match.start() + (heading.end() if heading else 0) + following.start()]
        sections[match["id"]] = body.strip() + "\n"
    return sections


def reading_notation(path: Path = READING) -> str:
    """The reading's notation block (the fenced block starting "Notation"), or ""."""
    if not path.is_file():
        return ""
    match = re.search(r"^```text\nNotation.*?^```$", path.read_text(encoding="utf-8"), re.M | re.S)
    return match.group() if match else ""


def reading_markdown(ids: tuple[str, ...], shown: set[str] | None = None) -> str:
    """The Markdown of the reading's sections ``ids`` for a notebook ("" when none is available).

    Links to sections that are not in this notebook become plain text; ``shown``
    (updated) holds the ids already in the notebook, which are not repeated.
    """
    sections = reading_sections()
    shown = set() if shown is None else shown
    chosen = [section for section in ids if section in sections and section not in shown]
    if not chosen:
        return ""
    shown.update(chosen)

    def link(match: re.Match[str]) -> str:
        return match.group() if match["id"] in shown else match["text"]

    body = "\n\n".join(sections[section] for section in chosen)
    body = re.sub(r"\[(?P<text>[^\]]+)\]\(#(?P<id>[\w-]+)\)", link, body)
    notation = "" if "notation" in shown else reading_notation()
    shown.add("notation")
    intro = ("*From the reading (`docs/reading.md` in the kit), the section"
             f"{'s' if len(chosen) > 1 else ''} this exercise builds on.*")
    return "\n\n".join(part for part in (intro, notation, body) if part)


def _introduction(builder: NotebookBuilder, exercise: Exercise, shown: set[str] | None = None) -> None:
    """The exercise's title, its sections of the reading, and the teaching text of its reference module."""
    text = docstring_markdown(reference(exercise.name).docstring)
    # The docstring opens with "Exercise 3: <summary>."; the heading already says which exercise.
    summary, _, rest = text.partition("\n\n")
    summary = re.sub(r"^Exercise \d+:\s*", "", summary)
    builder.markdown(f"# Exercise {exercise.number}: {exercise.title}\n\n*{summary.strip()}*")
    reading = reading_markdown(getattr(exercise, "reading", ()), shown)
    if reading:
        builder.markdown(reading)
    builder.markdown(f"## The exercise\n\n{rest}" if rest.strip() else "## The exercise")


def _exercise_cells(builder: NotebookBuilder, exercise: Exercise, tests: list[GradedTest]) -> None:
    """The task, the solution cell and the test cells of one exercise."""
    module = reference(exercise.name)
    names = ", ".join(f"`{f.name}`" for f in module.functions)
    builder.markdown(
        f"## Your task\n\nWrite the body of {names} in the next cell. Keep the names and signatures; "
        f"the docstrings say what each function takes and returns. Stuck? `attention-kit hint {exercise.name}`."
    )
    builder.code(solution_code(module), _nbgrader(f"{exercise.name}-code", solution=True))
    visible = [t for t in tests if not t.hidden]
    hidden = [t for t in tests if t.hidden]
    text = (
        "## Check your work\n\n"
        f"Each cell below runs one test of the {'course' if exercise.home else 'kit'}'s graded suite "
        f"(`{exercise.test_file}`) against the "
        "functions you defined above, from the most basic property to the most subtle; fix the first "
        "failure first. A passing test prints `passed: <test>`.\n\n"
        "These cells are a practice aid only: they run in your kernel, and nothing they print counts. "
        "When your notebook is graded, the kit takes the answer cell above (only that cell: keep everything "
        "your functions need in it), runs the same tests on it in isolation, and writes each test's outcome "
        "into its cell."
    )
    if hidden:
        text += " Some cells are empty here: they stand for hidden tests that run when your notebook is graded."
    builder.markdown(text)
    for test in visible:
        builder.code(f'from grader.student.notebook import check\n\ncheck("{exercise.name}", "{test.name}")',
                     _nbgrader(test.grade_id, grade=True, locked=True, points=test.points))
    for test in hidden:
        folder = f", folder={test.folder!r}" if test.folder else ""
        builder.code(
            f"# Hidden test of {exercise.name}: it runs when your notebook is graded.\n"
            f"{BEGIN_HIDDEN}\nfrom grader.student.notebook import check_hidden\n\n"
            f'check_hidden("{exercise.name}", "{test.name}"{folder})\n{END_HIDDEN}',
            _nbgrader(test.grade_id, grade=True, locked=True, points=test.points),
        )


def per_exercise_notebook(exercise: Exercise, tests: list[GradedTest]) -> Any:
    """The notebook of one exercise, its dependencies given as working code (``working_code``)."""
    builder = NotebookBuilder(exercise.name)
    _introduction(builder, exercise)
    dependencies = load_curriculum().dependencies(exercise.name)
    modules = [*(working_code(name) for name in dependencies), reference(exercise.name)]
    builder.code(_imports([*_checks_module(), *_given_modules(exercise.given), *modules]))
    _given(builder, exercise, dependencies, f"{exercise.name}-given", exercise.given)
    _exercise_cells(builder, exercise, tests)
    return builder.notebook()


def single_notebook(tests: dict[str, list[GradedTest]]) -> Any:
    """One notebook with every exercise of the course's selection, in curriculum order."""
    from grader.grading.escaping import md_text

    curriculum = load_curriculum()
    selected = curriculum.selection()
    builder = NotebookBuilder(SINGLE_ASSIGNMENT)
    builder.markdown(
        f"# {md_text(curriculum.title)}\n\n"  # the course folder's text: shown, never markup
        + "\n".join(f"{e.number}. {e.title} ({e.points:g} points)" for e in selected)
        + "\n\nWork from top to bottom: each exercise uses the functions you wrote before it."
    )
    # Exercises outside the course's selection that the selected ones build on are given as working code.
    names = {e.name for e in selected}
    needed = {dep for e in selected for dep in curriculum.dependencies(e.name)} - names
    given = tuple(name for name in curriculum.names if name in needed)
    modules = [*(working_code(name) for name in given), *(reference(e.name) for e in selected)]
    builder.code(_imports([*_checks_module(), *_given_modules(curriculum.given_modules), *modules]))
    first = selected[0]
    _given(builder, first, given, "given-checks", curriculum.given_modules)
    shown: set[str] = set()  # the reading's sections already in the notebook
    for exercise in selected:
        _introduction(builder, exercise, shown)
        _exercise_cells(builder, exercise, tests[exercise.name])
    return builder.notebook()


# ---------------------------------------------------------------------------------------------
# The course


def _grading_settings() -> str:
    """The config lines that grade with the course folder and part this course was built with ("" for the kit's)."""
    lines = []
    folder = course.active_folder()
    if folder is not None:
        lines.append(f"c.GradeInSandbox.course = {str(folder)!r}  # the kit's course folder (course.toml)\n")
    part = os.environ.get(PART_ENV)
    if part:
        lines.append(f"c.GradeInSandbox.part = {part!r}\n")
    return "".join(lines)


def build_course(out: Path, layout: str = "per-exercise", hidden: Path | None = HIDDEN_DIR) -> list[Path]:
    """Write the nbgrader course into ``out``; returns the notebooks written.

    Parameters
    ----------
    out : pathlib.Path
        The course folder (created if needed; existing notebooks are replaced).
    layout : {"per-exercise", "single"}
        One assignment per exercise, or one assignment with everything.
    hidden : pathlib.Path, optional
        Folder of hidden test files; None or a missing folder for none.
    """
    import nbformat

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    curriculum = load_curriculum()
    tests = graded_tests(hidden if hidden is not None and hidden.is_dir() else None)
    out.mkdir(parents=True, exist_ok=True)
    course_id = re.sub(r"[^a-z0-9-]+", "-", curriculum.title.lower()).strip("-") or "attention-kit"
    (out / "nbgrader_config.py").write_text(CONFIG_TEMPLATE.format(course_id=course_id, grading=_grading_settings()),
                                            encoding="utf-8")
    if layout == "single":
        notebooks = {out / "source" / SINGLE_ASSIGNMENT / f"{SINGLE_ASSIGNMENT}.ipynb": single_notebook(tests)}
    else:
        notebooks = {
            out / "source" / assignment_name(e) / f"{e.name}.ipynb": per_exercise_notebook(e, tests[e.name])
            for e in curriculum.selection()
        }
    for path, notebook in notebooks.items():
        nbformat.validate(notebook)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, str(path))
    return list(notebooks)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit notebooks``."""
    parser.add_argument("out", type=Path, metavar="OUT_DIR", help="the nbgrader course folder to write")
    parser.add_argument("--layout", choices=LAYOUTS, default="per-exercise",
                        help="one assignment per exercise (default) or one notebook with all exercises")
    parser.add_argument("--hidden", type=Path, default=None, metavar="DIR",
                        help="folder of hidden test files (default: grader/hidden_tests if present)")


def run(args: argparse.Namespace) -> int:
    """Run ``attention-kit notebooks``."""
    try:
        import nbformat  # noqa: F401
    except ImportError:
        print("error: the notebooks need the extra: pip install 'attention-kit[notebooks]'", file=sys.stderr)
        return 2
    # Default: the kit's hidden tests of the instructor's own copy (the course folder's copy, else the checkout's).
    hidden = args.hidden if args.hidden is not None else course.kit_hidden_tests(PACKAGE)
    if hidden is not None and not hidden.is_dir():
        print(f"error: --hidden {hidden}: no such folder", file=sys.stderr)
        return 2
    try:
        written = build_course(args.out, args.layout, hidden)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    first = written[0].parent.name
    order = release_order() if args.layout == "per-exercise" else []
    if order:
        print("\nRelease order (the working code of an earlier exercise is its answer):\n  " + "\n  ".join(order))
    print(f"\nNext, in {args.out}:\n  nbgrader generate_assignment {first}   # the student version, in release/\n"
          f"  nbgrader autograde {first}             # after collecting into submitted/<student>/{first}/")
    return 0
