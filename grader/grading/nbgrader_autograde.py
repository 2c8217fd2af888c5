"""nbgrader's autograde without a kernel: the answer cells graded in the kit's sandbox, as ``grade`` grades them.

nbgrader's own ``Execute`` step runs the student's whole notebook in a kernel,
as the instructor, and scores each test cell by whether it raised. The
student's cells share that kernel with the tests: an answer cell can replace
the function a test cell calls, read the hidden tests and the reference into
its output, or write another student's files. The course that
``attention-kit notebooks`` builds replaces that step (its
``nbgrader_config.py``: :func:`autograde_preprocessors`) with
:class:`GradeInSandbox`, which runs no cell of the notebook:

1. the test cells to grade are read from nbgrader's gradebook (the cells that
   ``generate_assignment`` saved), never from the student's copy;
2. the notebook, as nbgrader sanitized it, is graded by
   ``grader.grading.grade.grade_batch`` exactly as ``attention-kit grade``
   grades a ``.ipynb``: its answer cells become modules
   (``grader.grading.notebook_reader``), which run in the kit's sandbox (an
   unprivileged user that sees neither the reference nor the hidden tests),
   with the course folder's limits; without isolation it refuses;
3. each test cell gets its outcome as its output: a passed test a line on
   stdout, a failed one an error output holding the kit's feedback message
   (never a line of the hidden tests or the reference: the grading process
   scrubs them). nbgrader's ``SaveAutoGrades`` then gives a cell its points
   when it has no error output, so the gradebook equals ``grade``'s scores.

A grader failure raises :class:`NotGraded` (the batch said "not graded", a
test cell the kit does not know, points or tests that differ from the
kit's): nbgrader reports that submission as failed and keeps no autograded
copy of it, so a rerun grades it again; it is never a zero. The in-kernel
``grader.student.notebook.check`` stays what students practise with.

Needs nbgrader (imported only here and when the course's configuration loads it).
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import List, Unicode

from grader import course
from grader.curriculum import PACKAGE, ROOT, make_importable, reference_dir, select_part
from grader.grading.links import refusal
from grader.grading.notebook_reader import SINGLE_ASSIGNMENT
from grader.grading.rows import ResultsFileError, StudentRow, TestEntry

# How nbgrader_config.py names the step (nbconvert imports preprocessors given as strings).
IMPORT_NAME = f"{__name__}.GradeInSandbox"
CHECK, CHECK_HIDDEN = "check", "check_hidden"
STUDENT = "submission"  # the one entry of the scratch batch (never a name the student chose)
FAILED = "CheckFailed"  # the error name a failed test cell shows, as the in-kernel check raises it
HIDDEN_MESSAGE = "a hidden test failed (this course does not show hidden tests' messages)"


class NotGraded(RuntimeError):
    """The kit could not grade this notebook: nbgrader reports the submission as failed (never a zero)."""


@dataclass(frozen=True)
class TestCell:
    """A test cell of the gradebook: which graded test it runs, and its points."""

    grade_id: str
    exercise: str
    test: str
    hidden: bool
    folder: str | None  # the hidden tests' folder the course was built with (None: the kit's)
    points: float

    @property
    def key(self) -> tuple[str, str, bool]:
        """What identifies its test among ``grade``'s results."""
        return (self.exercise, self.test, self.hidden)


def parse_test_cell(grade_id: str, source: str, points: float) -> TestCell | None:
    """The test a cell of the built course runs (its ``check``/``check_hidden`` call), or None for another cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in (CHECK, CHECK_HIDDEN) and len(node.args) >= 2):
            continue
        arguments = [arg.value for arg in node.args[:2] if isinstance(arg, ast.Constant)]
        folder = next((k.value.value for k in node.keywords if k.arg == "folder"
                       and isinstance(k.value, ast.Constant)), None)
        if len(arguments) == 2 and all(isinstance(a, str) for a in arguments):
            return TestCell(grade_id, arguments[0], arguments[1], node.func.id == CHECK_HIDDEN,
                            folder if isinstance(folder, str) else None, float(points))
    return None


def saved_test_cells(db_url: str, notebook: str, assignment: str) -> list[TestCell]:
    """The autograded test cells of ``notebook`` as ``generate_assignment`` saved them (the instructor's copy).

    Raises
    ------
    NotGraded
        If the notebook is not in the gradebook, or one of its autograded code cells is not a test of the kit.
    """
    cells = []
    with Gradebook(db_url) as gradebook:
        try:
            saved = gradebook.find_notebook(notebook, assignment)
        except MissingEntry:
            raise NotGraded(f"{assignment}/{notebook} is not in the gradebook: "
                            "run nbgrader generate_assignment") from None
        sources = {cell.name: cell for cell in saved.source_cells}
        answers = {cell.name for cell in saved.solution_cells}
        for grade_cell in saved.grade_cells:
            source = sources.get(grade_cell.name)
            if grade_cell.cell_type != "code" or source is None or grade_cell.name in answers:
                continue  # a manually graded cell: nbgrader leaves it to a grader
            cell = parse_test_cell(grade_cell.name, source.source, grade_cell.max_score)
            if cell is None:
                raise NotGraded(f"cell {grade_cell.name} of {assignment}/{notebook} is an autograded cell that "
                                "runs no test of the kit; the kit grades outside the kernel and cannot run it")
            cells.append(cell)
    return cells


def hidden_folders(cells: list[TestCell]) -> list[Path]:
    """The hidden tests' folders the course was built with: each cell's ``folder``, else the kit's own."""
    folders: list[Path] = []
    for cell in cells:
        if not cell.hidden:
            continue
        folder = Path(cell.folder) if cell.folder else course.kit_hidden_tests(PACKAGE)
        if folder is None or not folder.is_dir():
            raise NotGraded(f"cell {cell.grade_id} runs a hidden test of {cell.exercise}, and its folder "
                            f"({cell.folder or 'the kit hidden tests'}) is not on this machine")
        if folder not in folders:
            folders.append(folder)
    return folders


def grade_notebook(notebook: Any, exercises: list[str], hidden: list[Path], fair: bool) -> StudentRow:
    """``attention-kit grade``'s results (``results.json``) for one notebook, graded in the sandbox.

    Raises
    ------
    NotGraded
        If the batch refused (no isolation, no reference) or did not grade every test.
    """
    from grader.grading.grade import grade_batch, limit_defaults
    from grader.grading.report import read_row

    make_importable()  # the grading processes import `tests` from the kit
    if reference_dir() is None:
        raise NotGraded(course.no_reference(ROOT))
    budget, call_budget, memory = limit_defaults()
    said: list[str] = []
    with tempfile.TemporaryDirectory(prefix="attention-kit-nbgrader-") as scratch:
        submissions = Path(scratch) / "submissions"
        submissions.mkdir()
        nbformat.write(notebook, str(submissions / f"{STUDENT}.ipynb"))
        out = Path(scratch) / "grades"
        with contextlib.redirect_stdout(io.StringIO()):  # the batch's progress lines
            status = grade_batch(submissions, out, jobs=min(2, os.cpu_count() or 1), fair=fair,
                                 hidden=hidden or None, budget=budget,
                                 call_budget=call_budget, memory=memory, isolation="require",
                                 exercises=exercises, echo=said.append)
        try:
            results = read_row(out, STUDENT)
        except ResultsFileError as error:  # the grader's own file is broken: not graded, said as such
            raise NotGraded(str(error)) from None
    if status == 2 or results is None:
        raise NotGraded("; ".join(line for line in said if line.startswith("error")) or "; ".join(said[-3:]))
    if not results.graded:
        raise NotGraded(results.status)
    return results


def outcomes(cells: list[TestCell], results: StudentRow | Mapping[str, Any]) -> dict[str, tuple[bool, str]]:
    """grade_id -> (passed, the message a failed cell shows), from ``grade``'s row for these cells.

    ``results``: the typed row, or a mapping whose ``tests`` are results.json's test entries.

    Raises
    ------
    NotGraded
        If the cells and the kit's tests differ (a test added, renamed or repointed since the course
        was built): nbgrader's scores would then differ from ``grade``'s.
    """
    from grader.grading.scored import entries

    by_test: dict[tuple[str, str, bool], TestEntry] = {}
    whole: dict[str, TestEntry] = {}  # exercise -> its one entry when it could not be run (0 points)
    for test in results.tests if isinstance(results, StudentRow) else entries(results["tests"]):
        if test.nodeid is None:
            whole[test.exercise] = test
        else:
            by_test[(test.exercise, test.nodeid.split("::", 1)[-1], test.hidden)] = test
    rebuild = "build the course again (attention-kit notebooks) and run nbgrader generate_assignment"
    found: dict[str, tuple[bool, str]] = {}
    for cell in cells:
        if cell.exercise in whole:
            found[cell.grade_id] = (False, whole[cell.exercise].output)
            continue
        test = by_test.pop(cell.key, None)
        if test is None:
            raise NotGraded(f"cell {cell.grade_id} runs {cell.test} of {cell.exercise}, which the kit's graded "
                            f"suite does not hold: {rebuild}")
        if not math.isclose(test.max_score, cell.points, abs_tol=1e-9):
            raise NotGraded(f"cell {cell.grade_id} is worth {cell.points:g} points and the kit gives its test "
                            f"{test.max_score:g}: {rebuild}")
        passed = test.passed
        message = "" if passed else test.output or "failed"
        if message and cell.hidden and test.visibility == "hidden":
            message = HIDDEN_MESSAGE
        found[cell.grade_id] = (passed, message)
    for exercise, cell_points in _points_by_exercise(cells).items():
        if exercise in whole and not math.isclose(whole[exercise].max_score, cell_points, abs_tol=1e-9):
            raise NotGraded(f"the test cells of {exercise} are worth {cell_points:g} points and the kit gives it "
                            f"{whole[exercise].max_score:g}: {rebuild}")
    if by_test:
        exercise, test, _ = next(iter(by_test))
        raise NotGraded(f"the kit's graded suite has {len(by_test)} test(s) without a cell (e.g. {test} of "
                        f"{exercise}): {rebuild}")
    return found


def _points_by_exercise(cells: list[TestCell]) -> dict[str, float]:
    points: dict[str, float] = {}
    for cell in cells:
        points[cell.exercise] = points.get(cell.exercise, 0.0) + cell.points
    return points


def cell_outputs(cell: TestCell, passed: bool, message: str, named: bool = True) -> list[Any]:
    """The outputs of a graded test cell: a line on stdout when it passed, the kit's failure message otherwise.

    ``named``: False for a hidden test of a course that shows no hidden test's name (``[hidden] visibility =
    "hidden"``): its outputs say "a hidden test of <exercise>".
    """
    label = cell.test if named else f"a hidden test of {cell.exercise}"
    if passed:
        return [nbformat.v4.new_output("stream", name="stdout", text=f"passed: {label}\n")]
    text = f"{cell.exercise}: {cell.test} failed\n\n{message}" if named else f"{label} failed\n\n{message}"
    return [nbformat.v4.new_output("error", ename=FAILED, evalue=text, traceback=[f"{FAILED}: {text}"])]


class GradeInSandbox(NbGraderPreprocessor):
    """nbgrader's autograde step that grades the answer cells in the kit's sandbox instead of running a kernel."""

    no_fair = List(Unicode(), default_value=[SINGLE_ASSIGNMENT], help=(
        "Assignments graded as `attention-kit grade --no-fair` (each exercise on the student's own earlier "
        "functions): the single layout's. The others are graded with fair grading, as their given cells say.")
    ).tag(config=True)
    course = Unicode("", help=(
        "The kit's course folder (its course.toml: points, limits, hidden tests) the course was built with; "
        "default: $ATTENTION_KIT_COURSE, else the working directory's course.toml.")).tag(config=True)
    part = Unicode("", help="The part (--part) the course was built for; default: the course's.").tag(config=True)

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """Grade ``nb`` in the sandbox and write each test cell's outcome; no cell of it runs here."""
        ids = resources["nbgrader"]
        course.activate(Path(self.course) if self.course else course.find())
        select_part(self.part or None)
        cells = saved_test_cells(ids["db_url"], ids["notebook"], ids["assignment"])
        if not cells:
            return nb, resources
        exercises = list(dict.fromkeys(cell.exercise for cell in cells))
        fair = ids["assignment"] not in self.no_fair
        self.log.info("Grading %s of %s in the kit's sandbox (exercises: %s)", ids["notebook"], ids["student"],
                      ", ".join(exercises))
        refuse_links(self.config, ids)
        results = grade_notebook(nb, exercises, hidden_folders(cells), fair)
        found = outcomes(cells, results)
        named = course.hidden_visibility() != "hidden"
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
            if cell.cell_type == "code" and grade_id in found:
                test = next(c for c in cells if c.grade_id == grade_id)
                cell.outputs = cell_outputs(test, *found[grade_id], named=named or not test.hidden)
        return nb, resources


def refuse_links(config: Any, ids: Mapping[str, str]) -> None:
    """Refuse a submission folder that holds a symbolic or hard link: nbgrader copied what it points at.

    nbgrader reads ``submitted/<student>/<assignment>`` and copies it to ``autograded/`` as the instructor,
    following links: a notebook that links to the source notebook was graded as the reference, a link to a
    hidden test file was copied into the student's feedback; a hard link to the source notebook is that file
    under the student's name. A link is never followed nor read (``grader.grading.links.refusal``, the rule
    ``grade`` applies): :func:`refuse_before_copying` refuses such a folder before nbgrader copies it; here, for
    a copy made all the same (an nbgrader the kit could not hook), the copies nbgrader made of links are
    removed from ``autograded/`` and the submission is not graded.

    Raises
    ------
    NotGraded
        If the submitted folder holds a symbolic link (a file or a folder) or a hard link, naming them.
    """
    from nbgrader.coursedir import CourseDirectory

    folders = CourseDirectory(config=config)
    submitted = Path(folders.format_path(folders.submitted_directory, ids["student"], ids["assignment"]))
    autograded = Path(folders.format_path(folders.autograded_directory, ids["student"], ids["assignment"]))
    linked = _linked_folders(submitted, Path(folders.format_path(folders.submitted_directory, ".", ".")))
    if linked:  # nbgrader read the notebook through it (nbgrader removes a failed assignment's copy)
        raise NotGraded(_refused(linked, {"symbolic"}, folders=True))
    links, kinds = _links(submitted)
    if not links:
        return
    for link in links:  # what nbgrader copied through them leaves the instructor's autograded folder
        copy = autograded / link
        with contextlib.suppress(OSError):
            if copy.is_dir() and not copy.is_symlink():
                shutil.rmtree(copy)
            else:
                copy.unlink()
    raise NotGraded(_refused(links, kinds))


def _links(submitted: Path) -> tuple[list[Path], set[str]]:
    """The entries of ``submitted`` (relative to it) that are never read: links, and files of no regular kind."""
    links, kinds = [], set()
    for root, directories, files in os.walk(submitted):  # os.walk never descends into a linked folder
        for name in [*directories, *files]:
            path = Path(root) / name
            why = refusal(path)  # grade's one rule: a symbolic link, or a hard link (the same file)
            if why is None and name in files:
                with contextlib.suppress(OSError):
                    why = None if stat.S_ISREG(path.lstat().st_mode) else "special"
            if why is not None:
                links.append(path.relative_to(submitted))
                kinds.add("hard" if "hard" in why else "special" if why == "special" else "symbolic")
    return links, kinds


def _linked_folders(submitted: Path, base: Path) -> list[Path]:
    """The folders below ``base`` (``submitted/``) down to ``submitted`` itself that are symbolic links.

    ``submitted/<student>/<assignment>`` that links elsewhere (a link a git clone or ``cp -r`` kept, to
    ``../../source/<assignment>`` or a classmate's folder) made nbgrader grade what it points at as the student's:
    the source notebook, the reference in its answer cells, scored full marks for an untouched notebook.
    """
    submitted, base = Path(os.path.normpath(submitted)), Path(os.path.normpath(base))
    return [folder.relative_to(base) for folder in reversed([submitted, *submitted.parents])
            if base in folder.parents and folder.is_symlink()]


def _refused(links: list[Path], kinds: set[str], folders: bool = False) -> str:
    names = ", ".join(str(link) for link in links[:5]) + (" ..." if len(links) > 5 else "")
    if folders:
        what = f"the submission's folder is a symbolic link ({names}), which is"
    else:
        said = " and ".join(f"{kind} files" if kind == "special" else f"{kind} links" for kind in sorted(kinds))
        what = f"the submission holds {said} ({names}), which are"
    return f"refused: {what} never followed nor read; ask the student to submit the files themselves"


def refuse_before_copying() -> None:
    """Have nbgrader's autograde refuse a submission of links before it copies the submission (once per process).

    nbgrader's ``Autograde.init_assignment`` copies every file of ``submitted/<student>/<assignment>`` to
    ``autograded/`` with ``shutil.copy``, which follows links, before any preprocessor runs: a link to a device
    (``/dev/zero``: a copy that fills the instructor's disk; ``/dev/ptmx``: a read that never ends) stopped
    ``nbgrader autograde`` at that student, and no student after them was graded (a hostile round); a link to a
    hidden test put the test into ``autograded/`` until :func:`refuse_links` removed it. The submitted folder is
    now looked at first, as :func:`refuse_links` looks at it: one that holds a link (or a FIFO, a device, a
    socket) is not copied, and the student is reported as failed (not graded, never a score); nbgrader goes on
    with the next. So is one whose student or assignment folder is itself a link (:func:`_linked_folders`): a
    folder linking to ``source/<assignment>`` was graded as the reference, full marks.
    """
    from nbgrader.converters.autograde import Autograde

    copy = Autograde.init_assignment
    if getattr(copy, "refuses_links", False):
        return

    def init_assignment(self: Any, assignment_id: str, student_id: str) -> None:
        submitted = Path(self._format_source(assignment_id, student_id))
        linked = _linked_folders(submitted, Path(self._format_source(".", ".")))
        links, kinds = (linked, {"symbolic"}) if linked else _links(submitted)
        if links:
            said = _refused(links, kinds, folders=bool(linked))
            self.log.error("%s/%s not graded: %s", student_id, assignment_id, said)
            raise NotGraded(said)
        copy(self, assignment_id, student_id)

    init_assignment.refuses_links = True  # type: ignore[attr-defined]
    Autograde.init_assignment = init_assignment


def autograde_preprocessors() -> list[Any]:
    """The autograde steps of nbgrader, ``Execute`` (a kernel, as the instructor) replaced by :class:`GradeInSandbox`.

    Raises
    ------
    RuntimeError
        If this nbgrader's autograde has no ``Execute`` step to replace (the course must not fall back to it).
    """
    from nbgrader.converters.autograde import Autograde

    refuse_before_copying()  # what nbgrader copies before these steps run (every course's config calls this)
    defaults = Autograde.class_traits()["autograde_preprocessors"].default()
    if Execute not in defaults:
        raise RuntimeError("nbgrader's autograde has no Execute step: this nbgrader is not one the kit supports")
    return [IMPORT_NAME if step is Execute else step for step in defaults]
