"""An instructor's course folder: the settings of one course, kept outside the package.

A course folder holds ``course.toml`` (which exercises, their points, the
limits, the hidden tests' visibility, the Canvas assignment), ``hidden_tests/``
(the instructor's own extra hidden tests, the conventions of
``grader/hidden_tests``: ``EXERCISE = "name"``, optionally ``POINTS = n``) and,
copied from the instructor's checkout by ``attention-kit course init``, the
reference (``solutions/``), the kit's hidden tests (``kit_hidden_tests/``) and
the catalogue of known mistakes (``mutants/``) and the kit's given
implementations (``given/``), none of which the package holds.

The folder in force is the one of ``--course DIR`` (the command line sets
:data:`COURSE_ENV` for this process and the processes it starts), else of
``$ATTENTION_KIT_COURSE``, else the working directory when it holds a
``course.toml`` (:func:`find`). The packaged manifest stays the default: a
course is an overlay that ``grader.curriculum.load`` applies, the one place
every tool reads the exercises from. This module imports only the standard
library; what it checks against the kit (exercise names, dependencies) it is
given by ``grader.curriculum``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import term
from grader.term import LatePolicy

COURSE_ENV = "ATTENTION_KIT_COURSE"
COURSE_FILE = "course.toml"
HIDDEN_FOLDER = "hidden_tests"  # the instructor's own extra hidden tests
REFERENCE_FOLDER = "solutions"  # the reference, copied from the instructor's checkout
KIT_HIDDEN_FOLDER = "kit_hidden_tests"  # the kit's hidden tests, copied from the instructor's checkout
CATALOGUE_FOLDER = "mutants"  # the catalogue of known mistakes (*.toml), copied from the instructor's checkout
GIVEN_FOLDER = "given"  # the kit's given implementations (*.py, verified.json), copied from the instructor's checkout
KIT_GIVEN = ("release_files", "given")  # where a checkout keeps them, under the grader package
# The instructor's own exercises ([[exercise]] of course.toml; grader/authoring/own_exercise.py writes them):
TESTS_FOLDER = "tests"  # their public tests, tests/test_NAME.py
STUBS_FOLDER = "exercises"  # their stubs, exercises/NAME.py (made from solutions/NAME.py by `course check`)
DATA_FOLDER = "data"  # their probes' reference outputs and their mistakes' fingerprints (by `course check`)
OWN_GOLDEN = "golden.npz"
OWN_FINGERPRINTS = "fingerprints.npz"
OWN_INPUTS = "inputs.json"  # the digest of each own exercise's files when its data was written
RELEASED_PREFIX = "course_"  # a release ships them beside the kit's: tests/data/course_golden.npz, ...
OWN_KEYS = {"name": str, "title": str, "functions": list, "depends": list, "part": int, "points": (int, float),
            "hidden_points": (int, float), "hint_step": str, "hint_functions": list, "hints": list, "reading": str}
# Gradescope's visibilities (results.json "visibility") a course may give its hidden tests.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
DEFAULT_VISIBILITY = "after_published"
QUANTUM = 1 / 16  # points are split in whole sixteenths (grader/scoring.py); kept here to stay standard-library only
LIMIT_KEYS = {  # [limits] key -> (what it is, smallest allowed value)
    "call_seconds": ("CPU seconds one call of student code may take", 0.0),
    "submission_seconds": ("CPU seconds of student code for one submission's whole run", 0.0),
    "cpu_seconds": ("CPU seconds of one worker process over its life (RLIMIT_CPU)", 0.0),
    "memory_mib": ("memory of a worker, in MiB (its memory cgroup, and its address space)", 64.0),
}


class CourseError(ValueError):
    """A course whose settings do not fit the kit: one line naming the file, the setting and what is wrong."""


@dataclass(frozen=True)
class Limits:
    """The course's ``[limits]``; None where the course keeps the kit's default."""

    call_seconds: float | None = None
    submission_seconds: float | None = None
    cpu_seconds: float | None = None
    memory_mib: int | None = None


@dataclass(frozen=True)
class Course:
    """One course folder's settings, as ``course.toml`` gives them (checked against the kit by :func:`overlay`)."""

    folder: Path
    title: str | None = None
    part: str | None = None
    exercises: tuple[str, ...] | None = None  # None: every exercise of the kit
    points: dict[str, float] = field(default_factory=dict)
    hidden_points: dict[str, float] = field(default_factory=dict)
    limits: Limits = Limits()
    visibility: str = DEFAULT_VISIBILITY
    canvas_name: str | None = None
    canvas_id: str | None = None
    canvas_exercise_ids: dict[str, str] = field(default_factory=dict)  # exercise -> existing Canvas assignment id
    late: LatePolicy | None = None
    extensions: dict[str, float] = field(default_factory=dict)
    own: tuple[dict[str, Any], ...] = ()
    """The instructor's own exercises (``[[exercise]]``): the manifest's fields, checked; ``grader.curriculum``
    makes them exercises whose files are this folder's."""

    @property
    def file(self) -> Path:
        """The course's ``course.toml``."""
        return self.folder / COURSE_FILE

    @property
    def hidden_tests(self) -> Path:
        """The folder of the instructor's own extra hidden tests."""
        return self.folder / HIDDEN_FOLDER

    def settings(self) -> str:
        """Every setting that can change a grade as one canonical text: what a grade's fingerprint must include.

        Left out: the title (a heading), the export settings ([canvas]) and the term's ([late], [extensions]):
        changing them regrades nobody; every run rewrites every output from the stored results
        (``grader.grading.term_stage``).
        """
        return json.dumps({"part": self.part, "exercises": self.exercises,
                           "points": self.points, "hidden_points": self.hidden_points,
                           "limits": vars(self.limits), "visibility": self.visibility, "own": self.own},
                          sort_keys=True)


def find(explicit: str | Path | None = None, cwd: Path | None = None) -> Path | None:
    """The course folder in force: ``explicit`` (``--course``), else ``$ATTENTION_KIT_COURSE``, else the cwd's.

    Raises
    ------
    CourseError
        If ``explicit`` or the variable names a folder without a ``course.toml``.
    """
    for value, origin in ((explicit, "--course"), (os.environ.get(COURSE_ENV) or None, COURSE_ENV)):
        if value is not None:
            folder = Path(value).expanduser().resolve()
            if not (folder / COURSE_FILE).is_file():
                raise CourseError(f"{origin} {value}: no {COURSE_FILE} there "
                                  f"(create one with `attention-kit course init {value}`)")
            return folder
    here = (cwd or Path.cwd()) / COURSE_FILE
    return here.parent.resolve() if here.is_file() else None


def activate(folder: Path | None) -> None:
    """Make ``folder`` the course of this process and of every process it starts (None: keep the kit's)."""
    if folder is not None:
        os.environ[COURSE_ENV] = str(Path(folder).resolve())


def active_folder() -> Path | None:
    """The folder of ``$ATTENTION_KIT_COURSE`` (set by :func:`activate`), if any; the working directory is not read."""
    value = os.environ.get(COURSE_ENV)
    return _resolved(value) if value else None


@functools.cache
def _resolved(value: str) -> Path:
    return Path(value).resolve()  # once per value: the manifest is read through this on every load()


def active() -> Course | None:
    """The course in force (:func:`active_folder`), parsed; None without one.

    Raises
    ------
    CourseError
        If its ``course.toml`` cannot be read or a setting has the wrong type.
    """
    folder = active_folder()
    return None if folder is None else read(folder)


def _number(value: Any, where: str, *, minimum: float = 0.0, quantum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise CourseError(f"{where} must be a number of at least {minimum:g}, not {value!r}")
    if quantum is not None and not (value / quantum).is_integer():
        raise CourseError(f"{where} must be a multiple of {quantum} (points are split in sixteenths), not {value!r}")
    return float(value)


@functools.cache
def read(folder: Path) -> Course:
    """Parse ``folder/course.toml`` (types and ranges; :func:`overlay` checks it against the kit).

    Raises
    ------
    CourseError
        One line naming the file and the setting.
    """
    path = Path(folder) / COURSE_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise CourseError(f"{path}: cannot be read ({error})") from None
    except tomllib.TOMLDecodeError as error:
        raise CourseError(f"{path}: not valid TOML ({error})") from None
    known = {"course", "points", "hidden_points", "limits", "hidden", "canvas", "late", "extensions", "exercise"}
    for key in data:
        if key not in known:
            raise CourseError(f"{path}: unknown setting [{key}] (the settings are {', '.join(sorted(known))})")

    def table(name: str) -> dict[str, Any]:
        value = data.get(name, {})
        if not isinstance(value, dict):
            raise CourseError(f"{path}: {name} must be a table ([{name}])")
        return value

    course = table("course")
    for key in course:
        if key not in ("title", "part", "exercises"):
            raise CourseError(f"{path}: unknown setting [course] {key} (the settings are title, part, exercises)")
    title, part, exercises = course.get("title"), course.get("part"), course.get("exercises")
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise CourseError(f"{path}: [course] title must be a non-empty text, not {title!r}")
    if part is not None and not isinstance(part, (str, int)):
        raise CourseError(f"{path}: [course] part must be a part's number or \"all\", not {part!r}")
    if exercises is not None:
        if not isinstance(exercises, list) or not exercises or not all(isinstance(n, str) for n in exercises):
            raise CourseError(f"{path}: [course] exercises must be a non-empty list of exercise names")
        twice = sorted({n for n in exercises if exercises.count(n) > 1})
        if twice:
            raise CourseError(f"{path}: [course] exercises names {twice[0]!r} twice")
    points = {name: _number(value, f"{path}: [points] {name}", quantum=QUANTUM)
              for name, value in table("points").items()}
    hidden_points = {name: _number(value, f"{path}: [hidden_points] {name}", quantum=QUANTUM)
                     for name, value in table("hidden_points").items()}
    limits: dict[str, Any] = {}
    for key, value in table("limits").items():
        if key not in LIMIT_KEYS:
            raise CourseError(f"{path}: unknown setting [limits] {key} (the limits are {', '.join(LIMIT_KEYS)})")
        number = _number(value, f"{path}: [limits] {key} ({LIMIT_KEYS[key][0]})", minimum=LIMIT_KEYS[key][1])
        if number <= 0:
            raise CourseError(f"{path}: [limits] {key} ({LIMIT_KEYS[key][0]}) must be positive, not {value!r}")
        limits[key] = int(number) if key == "memory_mib" else number
    visibility = table("hidden").get("visibility", DEFAULT_VISIBILITY)
    if visibility not in VISIBILITIES:
        raise CourseError(f"{path}: [hidden] visibility must be one of {', '.join(VISIBILITIES)}, not {visibility!r}")
    canvas = table("canvas")
    unknown = sorted(set(canvas) - {"assignment_name", "assignment_id", "exercise_ids"})
    if unknown:
        raise CourseError(f"{path}: unknown setting [canvas] {unknown[0]} (the settings are assignment_name, "
                          "assignment_id, and the table [canvas.exercise_ids])")
    name, identifier = canvas.get("assignment_name"), canvas.get("assignment_id")
    exercise_ids = canvas.get("exercise_ids", {})
    if not isinstance(exercise_ids, dict):
        raise CourseError(f"{path}: [canvas] exercise_ids must be a table ([canvas.exercise_ids] with lines "
                          "EXERCISE = ASSIGNMENT_ID)")
    for exercise, value in exercise_ids.items():
        if not str(value).strip().isascii() or not str(value).strip().isdigit():
            raise CourseError(f"{path}: [canvas.exercise_ids] {exercise} must be the number at the end of the "
                              f"assignment's address (.../assignments/123456), not {value!r}")
    try:
        late = term.parse_late(path, data.get("late"))
        extensions = term.parse_extensions(path, data.get("extensions"))
    except term.TermError as error:
        raise CourseError(str(error)) from None
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise CourseError(f"{path}: [canvas] assignment_name must be a non-empty text, not {name!r}")
    if identifier is not None:
        identifier = str(identifier).strip()
        if not identifier.isascii() or not identifier.isdigit():
            raise CourseError(f"{path}: [canvas] assignment_id must be the number at the end of the assignment's "
                              f"address (.../assignments/123456), not {canvas['assignment_id']!r}")
    own = data.get("exercise", [])
    if not isinstance(own, list):
        raise CourseError(f"{path}: [[exercise]] must be tables of exercises of your own ([[exercise]], twice [[ ]])")
    return Course(Path(folder).resolve(), title=title, part=None if part is None else str(part),
                  exercises=None if exercises is None else tuple(exercises), points=points,
                  hidden_points=hidden_points, limits=Limits(**limits), visibility=visibility,
                  canvas_name=name, canvas_id=identifier,
                  canvas_exercise_ids={str(k): str(v).strip() for k, v in exercise_ids.items()},
                  late=late, extensions=extensions,
                  own=tuple(own_exercise(entry, f"{path}: [[exercise]] {index}") for index, entry in
                            enumerate(own, start=1)))


def own_exercise(entry: Any, where: str) -> dict[str, Any]:
    """One ``[[exercise]]`` of course.toml, checked (types, names); one line naming the setting otherwise."""
    if not isinstance(entry, dict):
        raise CourseError(f"{where} must be a table")
    name = entry.get("name")
    if not isinstance(name, str) or not name.isidentifier() or not name.islower() or name.startswith("_"):
        raise CourseError(f"{where}: name must be a module name (lower-case letters, digits and _), not {name!r}")
    where = f"{where.rsplit(': ', 1)[0]}: [[exercise]] {name}"
    for key in entry:
        if key not in OWN_KEYS:
            raise CourseError(f"{where}: unknown setting {key} (the settings are {', '.join(OWN_KEYS)})")
    for key in ("title", "functions"):
        if key not in entry:
            raise CourseError(f"{where}: {key} is missing")
    checked = ({"depends": [], "part": 1, "points": 10, "hidden_points": 0, "hint_step": "", "hint_functions": [],
                "hints": [], "reading": ""} | entry)
    for key, kind in OWN_KEYS.items():
        value = checked[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise CourseError(f"{where}: {key} has the wrong type ({value!r})")
        if kind is list and not all(isinstance(item, str) for item in value):
            raise CourseError(f"{where}: {key} must be a list of texts")
    if not checked["functions"] or not all(f.isidentifier() for f in checked["functions"]):
        raise CourseError(f"{where}: functions must name the module's public functions, not {checked['functions']!r}")
    if unknown := [name for name in checked["hint_functions"] if name not in checked["functions"]]:
        raise CourseError(f"{where}: hint_functions must name some of its functions "
                          f"({', '.join(checked['functions'])}), not {', '.join(map(repr, unknown))}")
    if checked["reading"] and (len(checked["reading"]) > 300 or not re.fullmatch(r"[^\s\x00-\x1f\x7f<>\"'`]+",
                                                                           checked["reading"])):
        raise CourseError(f"{where}: reading must be one link, a URL or a path (e.g. notes/week5.md#gates), without "
                          f"spaces or quotes, not {checked['reading'][:80]!r}")
    if checked["part"] < 1:
        raise CourseError(f"{where}: part must be a positive whole number, not {checked['part']!r}")
    for key in ("points", "hidden_points"):
        checked[key] = _number(checked[key], f"{where}: {key}", quantum=QUANTUM)
    return checked


def overlay(course: Course, names: tuple[str, ...], depends: dict[str, tuple[str, ...]],
            parts: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """Check ``course`` against the kit's exercises; returns the names it keeps (kit order) and its part.

    Parameters
    ----------
    course : Course
        The parsed course.
    names : tuple of str
        The kit's exercises, in order (the packaged manifest).
    depends : dict
        Each exercise's direct dependencies (the manifest's ``depends``).
    parts : tuple of str
        The parts of the kit's exercises.

    Raises
    ------
    CourseError
        An unknown exercise, a dependency left out, an unknown part: one line naming the setting.
    """
    path = course.file
    own = tuple(entry["name"] for entry in course.own)
    for name in own:
        if name in names or own.count(name) > 1:
            raise CourseError(f"{path}: [[exercise]] {name}: "
                              + ("an exercise of the kit has that name" if name in names else "named twice"))
        for needed in next(entry["depends"] for entry in course.own if entry["name"] == name):
            if needed not in (*names, *own):
                raise CourseError(f"{path}: [[exercise]] {name}: depends names {needed!r}, which is no exercise")
    names = (*names, *own)
    depends = depends | {entry["name"]: tuple(entry["depends"]) for entry in course.own}
    parts = (*parts, *(str(entry["part"]) for entry in course.own))
    kept = course.exercises if course.exercises is not None else names
    for table, given in (("[course] exercises", kept), ("[points]", course.points),
                         ("[hidden_points]", course.hidden_points),
                         ("[canvas.exercise_ids]", course.canvas_exercise_ids)):
        for name in given:
            if name not in names:
                raise CourseError(f"{path}: {table} names {name!r}, which is not an exercise of the kit "
                                  f"nor of yours (the exercises are {', '.join(names)})")
    # A dependency the course leaves out is not refused: it is given, served from the reference (given_exercises).
    # [points] and [hidden_points] of an exercise the course leaves out are ignored: its points go with it.
    part = course.part
    if part is not None:
        part = part.strip().lower()
        kept_parts = {p for p in parts if p != "all"}
        if part != "all" and part not in kept_parts:
            raise CourseError(f"{path}: [course] part must be one of {', '.join((*sorted(kept_parts), 'all'))}, "
                              f"not {course.part!r}")
    return tuple(name for name in names if name in kept), part


def given_exercises(kept: tuple[str, ...], depends: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The exercises that ``kept`` depends on, directly or not, but leaves out: given, not assigned.

    A course may keep any mix of exercises (Parts I and III, say). What its
    exercises import and it leaves out is neither graded nor counted, and is
    served from the reference when its exercises are graded (fair grading), as
    a Part III course is served Parts I and II; a release gives it as working
    code. ``depends`` is each exercise's direct dependencies (the manifest's
    ``depends``); the order is that of ``depends``' keys (the kit's order).
    """
    seen: set[str] = set()
    pending = [d for name in kept for d in depends.get(name, ())]
    while pending:
        current = pending.pop()
        if current not in seen and current not in kept:
            seen.add(current)
            pending.extend(depends.get(current, ()))
    return tuple(name for name in depends if name in seen)


def limits() -> Limits:
    """The active course's ``[limits]`` (all None without a course): the one place the grader reads them from."""
    course = active()
    return course.limits if course is not None else Limits()


def hidden_visibility() -> str:
    """The Gradescope visibility of the hidden tests' results: the course's ``[hidden] visibility``."""
    course = active()
    return course.visibility if course is not None else DEFAULT_VISIBILITY


def canvas() -> tuple[str | None, str | None]:
    """The active course's Canvas assignment (name, id); (None, None) without one."""
    course = active()
    return (course.canvas_name, course.canvas_id) if course is not None else (None, None)


def canvas_exercise_ids() -> dict[str, str]:
    """The active course's existing Canvas assignments per exercise (``[canvas.exercise_ids]``; {} without)."""
    course = active()
    return dict(course.canvas_exercise_ids) if course is not None else {}


def late_policy() -> tuple[LatePolicy | None, dict[str, float]]:
    """The active course's ``[late]`` (None without one) and ``[extensions]`` (student id -> days)."""
    course = active()
    return (course.late, dict(course.extensions)) if course is not None else (None, {})


def settings() -> str:
    """The active course's settings as one text for fingerprints ("" without a course)."""
    course = active()
    return course.settings() if course is not None else ""


def extra_hidden_tests() -> Path | None:
    """The active course's own hidden tests folder, when it holds a test file."""
    course = active()
    if course is None or not course.hidden_tests.is_dir():
        return None
    return course.hidden_tests if any(course.hidden_tests.glob("test_*.py")) else None


def own_data(name: str, kit_data: Path | None = None) -> Path | None:
    """The file ``name`` of the own exercises' data (golden values, fingerprints), if any.

    That of the active course's ``data/``; else, in a student's release, the copy
    beside the kit's files in ``kit_data`` (``tests/data/course_NAME``).
    """
    folder = active_folder()
    for path in (folder / DATA_FOLDER / name if folder is not None else None,
                 kit_data / f"{RELEASED_PREFIX}{name}" if kit_data is not None else None):
        if path is not None and path.is_file():
            return path
    return None


def own_digests(course: Course) -> dict[str, str]:
    """Each own exercise's name -> the digest of what its stub and data are derived from.

    That is its reference, its public tests and its catalogue of mistakes.
    """
    import hashlib

    digests = {}
    for entry in course.own:
        digest = hashlib.sha256()
        name = entry["name"]
        for path in (course.folder / REFERENCE_FOLDER / f"{name}.py", course.folder / TESTS_FOLDER / f"test_{name}.py",
                     course.folder / CATALOGUE_FOLDER / f"{name}.toml"):
            digest.update(f"\0{path.name}\0".encode() + (path.read_bytes() if path.is_file() else b"(missing)"))
        digests[name] = digest.hexdigest()
    return digests


def stale_own_data() -> str | None:
    """One line when an own exercise of the active course changed since ``course check`` derived its data; else None.

    Its stub, its probes' reference outputs and its mistakes' fingerprints are
    derived from its files: stale, they would grade a correct answer wrong.
    """
    course = active()
    if course is None or not course.own:
        return None
    try:
        recorded = json.loads((course.folder / DATA_FOLDER / OWN_INPUTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    changed = [name for name, digest in own_digests(course).items() if recorded.get(name) != digest]
    if not changed:
        return None
    return (f"{course.folder}: your exercise {changed[0]} changed since its stub and data were derived from it: "
            f"run `attention-kit course check --course {course.folder}`")


def reference(kit_root: Path) -> Path | None:
    """The reference solutions of the instructor's own copy: the course's ``solutions/``, else ``kit_root``'s.

    ``kit_root`` is the kit's data tree (a checkout holds ``solutions/``; an
    installed wheel never does). None when neither has one: see :func:`no_reference`.
    """
    folder = active_folder()
    for candidate in ((folder / REFERENCE_FOLDER) if folder else None, Path(kit_root) / REFERENCE_FOLDER):
        if candidate is not None and (candidate / "__init__.py").is_file():
            return candidate
    return None


def kit_hidden_tests(package: Path) -> Path | None:
    """The kit's hidden tests of the instructor's own copy: the course's ``kit_hidden_tests/``, else the checkout's."""
    folder = active_folder()
    for candidate in ((folder / KIT_HIDDEN_FOLDER) if folder else None, Path(package) / HIDDEN_FOLDER):
        if candidate is not None and any(candidate.glob("test_*.py")):
            return candidate
    return None


def catalogue(package: Path) -> Path | None:
    """The catalogue of known mistakes of the instructor's own copy: the course's ``mutants/``, else the checkout's.

    ``package`` is the ``grader`` package; a checkout keeps the catalogue in
    ``grader/mutants/*.toml``, which the wheel and the sdist leave out (its
    ``replace`` texts are lines of the reference). None when neither has one.
    """
    folder = active_folder()
    for candidate in ((folder / CATALOGUE_FOLDER) if folder else None, Path(package) / "mutants"):
        if candidate is not None and any(candidate.glob("*.toml")):
            return candidate
    return None


def given_code(package: Path) -> Path | None:
    """The kit's given implementations of the instructor's own copy: the course's ``given/``, else the checkout's.

    ``package`` is the ``grader`` package; a checkout keeps them in ``grader/release_files/given/`` (with
    ``verified.json``), which the wheel and the sdist leave out: they are working answers of the exercises they
    implement. The one place every reader of the given code (fair grading, releases, notebooks, the grade's
    fingerprint) finds it. None when neither has one: see :func:`no_given_code`.
    """
    folder = active_folder()
    for candidate in ((folder / GIVEN_FOLDER) if folder else None, Path(package).joinpath(*KIT_GIVEN)):
        if candidate is not None and any(candidate.glob("*.py")):
            return candidate
    return None


def no_given_code(package: Path) -> str:
    """The one line saying where the given implementations were looked for and how to get them."""
    folder = active_folder()
    looked = [str(folder / GIVEN_FOLDER)] if folder else []
    looked.append(str(Path(package).joinpath(*KIT_GIVEN)))
    return (f"no given implementations of the exercises this course builds on and does not assign (looked in "
            f"{' and '.join(looked)}): this install is the student-safe package; build from your checkout of the "
            "kit, or copy them into a course folder with `attention-kit course init DIR --kit CHECKOUT` and pass "
            "--course DIR")


def no_reference(kit_root: Path) -> str:
    """The one line saying where the reference was looked for and what to do."""
    folder = active_folder()
    looked = [str(folder / REFERENCE_FOLDER)] if folder else []
    looked.append(str(Path(kit_root) / REFERENCE_FOLDER))
    return (f"no reference solutions (looked in {' and '.join(looked)}): this install is the student-safe "
            "package; grade from your checkout of the kit, or copy its reference into a course folder with "
            "`attention-kit course init DIR --kit CHECKOUT` and pass --course DIR")
