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
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from grader import course as course_folder

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


def reference_dir() -> Path | None:
    """The reference solutions of the instructor's own copy: the course folder's, else the checkout's ``solutions/``.

    None in the student-safe package without a course folder that holds one
    (:func:`grader.course.no_reference` says where it looked and what to do).
    """
    return course_folder.reference(ROOT)


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
    part: int = 1
    reading: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    hint_step: str = ""
    hint_functions: tuple[str, ...] = ()
    """The functions whose step the hints are about (``hint_step``): feedback gives the hint for a failure of one
    of them only (a dropout's failure was given the hint on the order of residuals); () : any failure."""
    function_reading: tuple[tuple[str, str], ...] = ()
    """``(function, section)`` pairs: the section of the reading of a function's idea, where it is not the
    exercise's first one (``reading``)."""
    home: str = ""
    """The course folder of an instructor's own exercise (``[[exercise]]`` of course.toml), whose ``tests/``,
    ``solutions/``, ``hidden_tests/`` and ``mutants/`` hold its files; "" for the kit's own."""

    @property
    def test_path(self) -> Path:
        """The graded test file: in the kit's data tree (:data:`ROOT`), or an own exercise's course folder."""
        return (Path(self.home) if self.home else ROOT) / self.test_file

    def reading_of(self, function: str = "") -> str:
        """The anchor of the section of the reading that ``function``'s idea is in ("" when none is named)."""
        return dict(self.function_reading).get(function, self.reading[0] if self.reading else "")

    def reading_link(self, function: str = "") -> str:
        """Where to read about ``function``'s idea ("" when none is named).

        The kit's sections as links into docs/reading.md; a course's own link (``reading`` of its
        ``[[exercise]]``: a URL or a path) as it is.
        """
        section = self.reading_of(function)
        return section if not section or re.search(r"[/#:.]", section) else f"docs/reading.md#{section}"

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
    part: str = "all"  # the course's selection ([course] part): one of :attr:`parts`, or "all"
    dropped: tuple[str, ...] = ()  # exercises of the kit that the course folder leaves out (grader/course.py)
    given_exercises: tuple[str, ...] = ()
    """Exercises the course leaves out but keeps depend on (``grader.course.given_exercises``): in
    :attr:`exercises` (looked up, served from the reference by fair grading), never in :meth:`selection`."""

    def selection(self, part: str | int | None = None) -> tuple[Exercise, ...]:
        """The exercises this course grades: of ``part``, else ``$ATTENTION_KIT_PART``, else ``[course] part``.

        Every exercise stays in :attr:`exercises` (a Part II exercise's Part I
        dependencies are still looked up and, in fair grading, served by the
        reference); the selection decides what is graded, listed and counted.

        Raises
        ------
        ValueError
            If the part is neither a part of the manifest (:attr:`parts`) nor all.
        """
        chosen = parse_part(part if part is not None else os.environ.get(PART_ENV) or self.part, self.parts)
        assigned = tuple(exercise for exercise in self.exercises if exercise.name not in self.given_exercises)
        if chosen == "all":
            return assigned
        return tuple(exercise for exercise in assigned if str(exercise.part) == chosen)

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts the exercises belong to ("1", "2", ...), in order: a new number in the manifest adds a part."""
        return parts_of(self.exercises)

    def selected_names(self, part: str | int | None = None) -> tuple[str, ...]:
        """Names of :meth:`selection`, in curriculum order."""
        return tuple(exercise.name for exercise in self.selection(part))

    def given_names(self, part: str | int | None = None) -> tuple[str, ...]:
        """The exercises the :meth:`selection` builds on but does not assign, in curriculum order.

        A release ships them as working code marked given (``grader/release_files/given/``) with their public
        tests, so every tool that asks "which exercises are the student's" and "which are given" asks here.
        """
        assigned = set(self.selected_names(part))
        needed = {name for exercise in assigned for name in self.dependencies(exercise)}
        return tuple(name for name in self.names if name in needed and name not in assigned)

    def assigned_or_given(self, part: str | int | None = None) -> tuple[str, ...]:
        """The exercises a student of this course has working code of, or writes, in curriculum order."""
        kept = set(self.selected_names(part)) | set(self.given_names(part))
        return tuple(name for name in self.names if name in kept)

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
        numbered = [exercise for exercise in self.exercises if text.isdigit() and exercise.number == int(text)]
        if numbered:  # the kit's numbers (those of the test files), also in a course that drops an exercise
            return numbered[0]
        return self.exercise(text.lower())

    def unknown(self, name: str) -> str:
        """The one-line message for an exercise name that is not in the manifest, closest names first."""
        names = closest_first(name, self.names)
        numbers = [exercise.number for exercise in self.exercises]
        listed = (f"1 to {len(numbers)}" if numbers == list(range(1, len(numbers) + 1))
                  else ", ".join(map(str, numbers)))  # a course that drops an exercise keeps the kit's numbers
        return f"no exercise named {name!r}; the exercises are {', '.join(names)} (or their numbers, {listed})"

    def exercise_of_function(self, function: str) -> Exercise:
        """Return the exercise whose module defines ``function``."""
        for exercise in self.exercises:
            if function in exercise.functions:
                return exercise
        raise ValueError(f"no exercise defines a function named {function!r}")

    def exercise_of_test_file(self, path: str | Path) -> Exercise | None:
        """Return the exercise graded by the test file at ``path``, if any."""
        return self._by_test_file.get(Path(path).name)

    @functools.cached_property
    def _by_test_file(self) -> dict[str, Exercise]:
        """File name of each graded test file -> its exercise (asked once per test: built once)."""
        return {Path(exercise.test_file).name: exercise for exercise in self.exercises}

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
PART_ENV = "ATTENTION_KIT_PART"
ALL_PARTS = "all"


def parts_of(exercises: tuple[Exercise, ...]) -> tuple[str, ...]:
    """The distinct parts of ``exercises`` as text, in numeric order."""
    return tuple(str(part) for part in sorted({exercise.part for exercise in exercises}))


def parse_part(value: str | int, parts: tuple[str, ...] | None = None) -> str:
    """A part of the manifest (``"1"``, ``"2"``, ...) or ``"all"``, from an option or the manifest.

    Parameters
    ----------
    value : str or int
        What was given (``2``, ``" ALL "``).
    parts : tuple of str, optional
        The parts to accept; default: those of the kit's manifest (:attr:`Curriculum.parts`).

    Raises
    ------
    ValueError
        Naming the choices, if ``value`` is none of them.
    """
    choices = (*(load().parts if parts is None else parts), ALL_PARTS)
    text = str(value).strip().lower()
    if text not in choices:
        raise ValueError(f"part must be one of {', '.join(choices)}, not {value!r}")
    return text


def select_part(part: str | int | None) -> None:
    """Make ``part`` the selection of this process and of the processes it starts (None: the manifest's)."""
    if part is None:
        return
    os.environ[PART_ENV] = parse_part(part)


class ManifestError(ValueError):
    """The manifest cannot be read: one line naming the file and the problem (the kit is broken)."""


def load(path: Path = MANIFEST) -> Curriculum:
    """Parse the manifest at ``path`` (default: the kit's own), seen through the active course folder.

    The course (``grader/course.py``: ``--course DIR``, ``$ATTENTION_KIT_COURSE``)
    drops exercises, changes points, the title and the part; this is the one
    place it is applied, so every tool sees the course's view. A manifest given
    by ``path`` is read as it is.

    Raises
    ------
    ManifestError
        If the file cannot be read or parsed, or an exercise lacks a field or has one of the wrong type.
    course.CourseError
        If the course's settings do not fit the kit (one line naming the setting).
    """
    return _load(path, course_folder.active_folder() if path == MANIFEST else None)


def kit_manifest() -> Curriculum:
    """The kit's own manifest, whatever course is active (what ``attention-kit course init`` starts from)."""
    return _load(MANIFEST, None)


# As when load was a cached function: its cache, and the uncached parse of a manifest (without a course).
load.cache_clear = lambda: _load.cache_clear()  # type: ignore[attr-defined]
load.__wrapped__ = lambda path=MANIFEST: _load.__wrapped__(path, None)  # type: ignore[attr-defined]


@functools.cache
def _load(path: Path, folder: Path | None) -> Curriculum:
    try:
        curriculum = _parse(path)
    except ManifestError:
        raise
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ManifestError(f"the kit is broken: {path}: cannot be read ({error})") from None
    except KeyError as error:
        raise ManifestError(f"the kit is broken: {path}: an exercise lacks the field {error}") from None
    except (TypeError, ValueError) as error:
        raise ManifestError(f"the kit is broken: {path}: a field has the wrong type ({error})") from None
    return curriculum if folder is None else _with_course(curriculum, course_folder.read(folder))


def _with_course(curriculum: Curriculum, course: course_folder.Course) -> Curriculum:
    """``curriculum`` as ``course`` changes it (checked by :func:`grader.course.overlay`)."""
    import dataclasses

    kept, part = course_folder.overlay(course, curriculum.names,
                                       {e.name: e.depends for e in curriculum.exercises}, curriculum.parts)
    curriculum = dataclasses.replace(curriculum, exercises=(*curriculum.exercises, *own_exercises(curriculum, course)))
    given = course_folder.given_exercises(kept, {e.name: e.depends for e in curriculum.exercises})
    exercises = tuple(
        dataclasses.replace(exercise, points=course.points.get(exercise.name, exercise.points),
                            hidden_points=course.hidden_points.get(exercise.name, exercise.hidden_points))
        for exercise in curriculum.exercises if exercise.name in kept or exercise.name in given)
    chosen = part if part is not None else curriculum.part
    if chosen != ALL_PARTS and chosen not in parts_of(tuple(e for e in exercises if e.name in kept)):
        raise course_folder.CourseError(f"{course.file}: [course] part {chosen!r} keeps no exercise of "
                                        "[course] exercises")
    return Curriculum(title=course.title or curriculum.title, impl_package=curriculum.impl_package,
                      exercises=exercises, part=chosen,
                      dropped=tuple(name for name in curriculum.names if name not in kept and name not in given),
                      given_exercises=given)


def own_exercises(kit: Curriculum, course: course_folder.Course) -> tuple[Exercise, ...]:
    """The instructor's own exercises of ``course`` (its ``[[exercise]]``), numbered after the kit's."""
    return tuple(
        Exercise(number=len(kit.exercises) + index, name=entry["name"], title=entry["title"],
                 test_file=f"{course_folder.TESTS_FOLDER}/test_{entry['name']}.py",
                 functions=tuple(entry["functions"]), depends=tuple(entry["depends"]), points=entry["points"],
                 hidden_points=entry["hidden_points"], hints=tuple(entry["hints"]), part=entry["part"],
                 hint_step=entry["hint_step"], hint_functions=tuple(entry["hint_functions"]),
                 reading=(entry["reading"],) if entry["reading"] else (),
                 home=str(course.folder))
        for index, entry in enumerate(course.own, start=1))


def _parse(path: Path) -> Curriculum:
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    course = data.get("course", {})
    exercises = tuple(
        Exercise(
            number=int(entry.get("number", index)),  # a course's release keeps the kit's numbers
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
            hint_functions=tuple(entry.get("hint_functions", ())),
            function_reading=tuple(sorted(dict(entry.get("function_reading", {})).items())),
        )
        for index, entry in enumerate(data["exercise"], start=1)
    )
    return Curriculum(
        title=course.get("title", ""),
        impl_package=course.get("impl_package", "exercises"),
        exercises=exercises,
        part=parse_part(course.get("part", ALL_PARTS), parts_of(exercises)),
        given_exercises=tuple(course.get("given_exercises", ())),  # a course's release: served, not assigned
    )
