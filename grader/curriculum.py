"""Read the curriculum manifest, the one list of exercises every tool uses.

The manifest is ``grader/curriculum.toml``. It owns the order of the
exercises, their titles, test files, public functions, dependencies, points,
hints and the sections of the reading (docs/reading.md) each one relies on.
Import this module (it needs only the standard library) instead of writing an
exercise name anywhere else.
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path(__file__).with_name("curriculum.toml")
ROOT = MANIFEST.parent.parent


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
    part: int = 1
    reading: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    hint_step: str = ""

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
    def given_modules(self) -> tuple[str, ...]:
        """The modules students get ready made (the exercises' ``given``), in curriculum order."""
        return tuple(dict.fromkeys(module for exercise in self.exercises for module in exercise.given))

    @property
    def names(self) -> tuple[str, ...]:
        """Exercise names in curriculum order."""
        return tuple(exercise.name for exercise in self.exercises)

    def exercise(self, name: str) -> Exercise:
        """Return the exercise called ``name``."""
        for exercise in self.exercises:
            if exercise.name == name:
                return exercise
        raise ValueError(self.unknown(name))

    def lookup(self, name_or_number: str | int) -> Exercise:
        """The exercise called ``name_or_number``, or numbered so (``"3"`` is exercise 3), as students type it.

        Raises
        ------
        ValueError
            One line naming the valid exercises, the closest to what was typed first.
        """
        text = str(name_or_number).strip()
        if text.isdigit() and 1 <= int(text) <= len(self.exercises):
            return self.exercises[int(text) - 1]
        return self.exercise(text.lower())

    def unknown(self, name: str) -> str:
        """The one-line message for an exercise name that is not in the manifest, closest names first."""
        names = closest_first(name, self.names)
        return (f"no exercise named {name!r}; the exercises are {', '.join(names)} "
                f"(or their numbers, 1 to {len(self.names)})")

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


def closest_first(name: str, valid: tuple[str, ...] | list[str]) -> list[str]:
    """``valid`` with the names most like ``name`` first (difflib's ratio), the rest in their order."""
    close = difflib.get_close_matches(name.lower(), list(valid), n=len(valid), cutoff=0.5)
    return close + [item for item in valid if item not in close]


def unknown_folder(value: str | Path, places: list[Path]) -> str:
    """The one-line message for an ``--impl`` folder that does not exist.

    Lists the folders in ``places`` that hold a module of the manifest (the
    implementations one could have meant), the closest to ``value`` first.
    """
    modules = {exercise.module_file for exercise in load().exercises}
    found: list[str] = []
    for place in places:
        if not place.is_dir():
            continue
        for folder in sorted(place.iterdir()):
            if folder.is_dir() and folder.name not in found and any((folder / m).is_file() for m in modules):
                found.append(folder.name)
    looked = " and ".join(dict.fromkeys(str(place) for place in places))
    if not found:
        return f"--impl {value}: no such folder (looked in {looked})"
    names = closest_first(Path(value).name, found)
    return f"--impl {value}: no such folder (looked in {looked}); folders holding exercise modules: {', '.join(names)}"


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
            part=int(entry.get("part", 1)),
            reading=tuple(entry.get("reading", ())),
            given=tuple(entry.get("given", ())),
            hint_step=entry.get("hint_step", ""),
        )
        for index, entry in enumerate(data["exercise"], start=1)
    )
    return Curriculum(
        title=course.get("title", ""),
        impl_package=course.get("impl_package", "exercises"),
        exercises=exercises,
    )
