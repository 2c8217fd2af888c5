"""The graded suite: which test files run, in what order, and how their points are pooled.

The public test files come from the manifest (``grader/curriculum.toml``); the
instructors' hidden tests from a folder (default ``grader/hidden_tests``), read
statically so that no test code runs where this is imported. Every room reads
the suite from here: the student's notebook checks, the grader, the course
builder.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import course, scoring
from grader.curriculum import PACKAGE, load

HIDDEN_DIR = PACKAGE / "hidden_tests"


def hidden_folders() -> list[Path]:
    """The hidden test folders of the instructor's own copy (empty in the student-safe package).

    The kit's hidden tests (the course folder's copy, else the checkout's), then
    the course folder's own extra ones (``grader/course.py``).
    """
    return [folder for folder in (course.kit_hidden_tests(PACKAGE), course.extra_hidden_tests()) if folder]


@dataclass(frozen=True)
class TestFile:
    """One test file of the graded suite, and how its tests are scored.

    ``points`` is None for the manifest's own files (the exercise's points
    are shared) and for hidden files without ``POINTS``.
    """

    path: str
    exercise: str
    points: float | None = None
    hidden: bool = False

    @property
    def pool(self) -> str:
        """The tests that share one amount of points."""
        return self.path if self.points is not None else self.exercise


def _literal(tree: ast.Module, name: str) -> Any:
    """The literal value of a module-level ``name = ...`` (None if absent or not a literal)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            with contextlib.suppress(ValueError):
                return ast.literal_eval(node.value)
    return None


def hidden_test_files(folder: Path | list[Path]) -> list[Any]:
    """The hidden test files in ``folder`` (or in each of several), read statically (no test code runs here).

    A file of an exercise that the course folder drops (``Curriculum.dropped``) is
    left out: it is simply not graded.
    """
    names = load().names
    dropped = load().dropped
    found = []
    folders = [folder] if isinstance(folder, (str, Path)) else list(folder)
    for path in [path for one in folders for path in sorted(Path(one).glob("test_*.py"))]:
        try:  # one line naming the file, whatever is wrong with it
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as error:
            raise ValueError(f"hidden test file {path}: syntax error line {error.lineno}: {error.msg}") from None
        except UnicodeDecodeError as error:
            raise ValueError(f"hidden test file {path}: not UTF-8 (byte {error.start})") from None
        except OSError as error:
            raise ValueError(f"hidden test file {path}: cannot be read ({error.strerror or error})") from None
        exercise = _literal(tree, "EXERCISE")
        if exercise is None:
            # Longest name first, so "multihead" is not mistaken for a shorter name inside it.
            matches = [n for n in sorted((*names, *dropped), key=len, reverse=True) if n in path.stem.split("_")]
            exercise = matches[0] if matches else None
        if exercise in dropped:
            continue
        if exercise not in names:
            raise ValueError(f"hidden test file {path}: set EXERCISE = one of {', '.join(names)}")
        points = _literal(tree, "POINTS")
        if points is None and load().exercise(exercise).hidden_points:
            points = load().exercise(exercise).hidden_points  # the manifest's points for the kit's hidden tests
        if points is not None and (isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0):
            raise ValueError(f"hidden test file {path}: POINTS must be a non-negative number, not {points!r}")
        if points is not None and not (points / scoring.QUANTUM).is_integer():  # the rule splits whole quanta
            raise ValueError(f"hidden test file {path}: POINTS must be a multiple of {scoring.QUANTUM} "
                             f"(grader/scoring.py splits points in sixteenths), not {points!r}")
        twin = next((f for f in found if Path(f.path).name == path.name), None)
        if twin is not None:  # pytest imports both by their name: the second would not be collected
            raise ValueError(f"hidden test file {path}: has the name of {twin.path}; rename one of them")
        found.append(TestFile(str(path.resolve()), exercise, None if points is None else float(points), hidden=True))
    return found


def graded_suite(hidden: Path | list[Path] | None, exercises: list[str] | None = None) -> tuple[list[Any], list[str]]:
    """The test files to run, in curriculum order (visible then hidden), and warnings.

    ``hidden`` is a folder of hidden test files, or several (the kit's, the
    course's own: :func:`hidden_folders`). ``exercises`` restricts the suite to those exercises (default: the course's
    selection, ``Curriculum.selection``: Part I, Part II or all).
    """
    for name in exercises or ():
        load().exercise(name)  # raises ValueError naming the valid exercises
    exercises = list(exercises or load().selected_names())
    warnings = []
    visible = []
    for exercise in load().exercises:
        if exercises and exercise.name not in exercises:
            continue
        path = exercise.test_path
        if path.is_file():
            visible.append(TestFile(str(path), exercise.name))
        else:
            warnings.append(f"{exercise.test_file} is missing: exercise {exercise.name} is not graded")
    extra = hidden_test_files(hidden) if hidden else []
    extra = [f for f in extra if not exercises or f.exercise in exercises]
    order = {name: index for index, name in enumerate(load().names)}
    suite = sorted(visible + extra, key=lambda f: (order[f.exercise], f.hidden))
    return suite, warnings
