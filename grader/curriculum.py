"""Read the curriculum manifest, the one list of exercises every tool uses.

The manifest is ``grader/curriculum.toml``. It owns the order of the
exercises, their titles, test files, public functions, dependencies, points
and hints. Import this module (it needs only the standard library) instead of
writing an exercise name anywhere else.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MANIFEST = PACKAGE / "curriculum.toml"
# The kit's data tree (tests/, solutions/, exercises/, conftest.py, pyproject.toml). In a checkout (or an
# editable install) that is the repository; an installed wheel carries it inside the package, as
# ``grader/_kit/``, so that nothing named ``tests`` or ``solutions`` lands at the top of site-packages.
PACKAGED_KIT = PACKAGE / "_kit"
ROOT = PACKAGED_KIT if (PACKAGED_KIT / "tests").is_dir() else PACKAGE.parent
INSTALLED = ROOT == PACKAGED_KIT


def kit_path(relative: str | Path) -> Path:
    """The file of the kit at ``relative`` (as in the repository: ``grader/cli.py``, ``tests/kit.py``).

    ``grader/...`` is the package itself, everything else the kit's data tree
    (:data:`ROOT`), so the same names work in a checkout and in an installed wheel.
    """
    parts = Path(relative).parts
    if parts and parts[0] == "grader":
        return PACKAGE.joinpath(*parts[1:])
    return ROOT.joinpath(*parts)


def misnamed(folder: str | Path, filename: str) -> str | None:
    """A file in ``folder`` whose name differs from ``filename`` only in case (``Softmax.py``), if any.

    Python imports ``softmax`` only from ``softmax.py`` on a case-sensitive file
    system (Linux, the graders), whatever the student's own machine accepted.
    """
    try:
        names = sorted(path.name for path in Path(folder).iterdir())
    except OSError:
        return None
    return next((name for name in names if name != filename and name.lower() == filename.lower()), None)


def make_importable() -> None:
    """Let this process import the kit's ``tests`` package (the graded suite's helpers) from :data:`ROOT`.

    The kit's own processes (the command line, the grader, a notebook's check)
    call this; nothing else sees ``tests`` as a top-level package.
    """
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Exercise:
    """One exercise of the curriculum, as the manifest describes it."""

    number: int
    name: str
    title: str
    test_file: str
    functions: tuple[str, ...]
    depends: tuple[str, ...]
    points: float
    hidden_points: float
    hints: tuple[str, ...]

    @property
    def module_file(self) -> str:
        """The file a student fills in, e.g. ``softmax.py``."""
        return f"{self.name}.py"


@dataclass(frozen=True)
class Curriculum:
    """The ordered exercises and course-wide settings."""

    title: str
    impl_package: str
    exercises: tuple[Exercise, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Exercise names in curriculum order."""
        return tuple(exercise.name for exercise in self.exercises)

    def exercise(self, name: str) -> Exercise:
        """Return the exercise called ``name``."""
        for exercise in self.exercises:
            if exercise.name == name:
                return exercise
        raise ValueError(f"no exercise named {name!r}; the exercises are {', '.join(self.names)}")

    def exercise_of_function(self, function: str) -> Exercise:
        """Return the exercise whose module defines ``function``."""
        for exercise in self.exercises:
            if function in exercise.functions:
                return exercise
        raise ValueError(f"no exercise defines a function named {function!r}")

    def exercise_of_test_file(self, path: str | Path) -> Exercise | None:
        """Return the exercise graded by the test file at ``path``, if any."""
        name = Path(path).name
        for exercise in self.exercises:
            if Path(exercise.test_file).name == name:
                return exercise
        return None

    def dependencies(self, name: str) -> tuple[str, ...]:
        """All exercises that ``name`` imports, directly or indirectly, in order."""
        seen: set[str] = set()
        pending = list(self.exercise(name).depends)
        while pending:
            current = pending.pop()
            if current not in seen:
                seen.add(current)
                pending.extend(self.exercise(current).depends)
        return tuple(n for n in self.names if n in seen)


@functools.cache
def load(path: Path = MANIFEST) -> Curriculum:
    """Parse the manifest at ``path`` (default: the kit's own)."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    course = data.get("course", {})
    exercises = tuple(
        Exercise(
            number=index,
            name=entry["name"],
            title=entry["title"],
            test_file=entry["test_file"],
            functions=tuple(entry["functions"]),
            depends=tuple(entry.get("depends", ())),
            points=float(entry["points"]),
            hidden_points=float(entry.get("hidden_points", 0)),
            hints=tuple(entry.get("hints", ())),
        )
        for index, entry in enumerate(data["exercise"], start=1)
    )
    return Curriculum(
        title=course.get("title", ""),
        impl_package=course.get("impl_package", "exercises"),
        exercises=exercises,
    )
