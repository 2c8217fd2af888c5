"""The catalogue of known mistakes ("mutants"), for instructors only.

Each file ``<exercise>.toml`` of the catalogue lists mistakes in one exercise as
``[[mutant]]`` tables::

    [[mutant]]
    id = "softmax-no-keepdims"             # unique, "<exercise>-<short-name>"
    description = "I took the max without keepdims, so it broadcast along the wrong axis."
    hint = "Which axis does the row maximum line up with when you subtract it?"
    replace = "np.max(x, axis=axis, keepdims=True)"    # exact text in solutions/<exercise>.py
    with = "np.max(x, axis=axis)"                       # what a student wrote instead
    # optional: file = "attention.py"  (default: the exercise's own module)
    # optional: count = 2              (how many occurrences `replace` has; all are replaced)

``description`` is the misconception in a student's words; ``hint`` points to
the idea without giving the code away. A mutant is ``solutions/`` with that
one text replaced. This catalogue never ships to students, nor in the kit's
wheel or sdist (its ``replace`` texts are lines of the reference): it lives in
a checkout's ``grader/mutants/`` and in the ``mutants/`` of a course folder
that ``attention-kit course init DIR --kit CHECKOUT`` makes
(:func:`grader.course.catalogue` finds it, as it finds the reference).

Called by: the fingerprints and docs builders (``grader.authoring``), the
sample class of ``attention-kit grade``, ``attention-kit mutants`` and the
project's mutation tests. It only reads and plants text; it runs nothing.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from grader import course
from grader.curriculum import PACKAGE, ROOT, load, reference_dir

FAMILY_FILE_NAME = "families.toml"


class CatalogueError(ValueError):
    """No catalogue of known mistakes here (the student-safe package without a course folder that holds one)."""


def catalogue_dir() -> Path:
    """The folder of the catalogue: the course folder's ``mutants/``, else the checkout's ``grader/mutants/``.

    Raises
    ------
    CatalogueError
        One line saying where it looked and what to do.
    """
    found = course.catalogue(PACKAGE)
    if found is not None:
        return found
    folder = course.active_folder()
    looked = [str(folder / course.CATALOGUE_FOLDER)] if folder else []
    looked.append(str(PACKAGE / "mutants"))
    raise CatalogueError(f"no catalogue of known mistakes (looked in {' and '.join(looked)}): this install is the "
                         "student-safe package; run this from your checkout of the kit, or copy its catalogue into a "
                         "course folder with `attention-kit course init DIR --kit CHECKOUT` and pass --course DIR")


@dataclass(frozen=True)
class Mutant:
    """One realistic mistake: a textual change to one reference module."""

    id: str
    exercise: str
    description: str
    hint: str
    file: str
    replace: str
    with_: str
    count: int = 1


def load_catalogue() -> list[Mutant]:
    """Every mutant of the catalogue (:func:`catalogue_dir`), in curriculum order, then file order.

    Raises
    ------
    CatalogueError
        If there is no catalogue here.
    """
    folder = catalogue_dir()
    mutants: list[Mutant] = []
    for exercise in load().exercises:
        path = folder / f"{exercise.name}.toml"
        if not path.is_file():
            continue
        for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("mutant", []):
            mutants.append(
                Mutant(
                    id=entry["id"],
                    exercise=exercise.name,
                    description=entry["description"],
                    hint=entry["hint"],
                    file=entry.get("file", exercise.module_file),
                    replace=entry["replace"],
                    with_=entry["with"],
                    count=int(entry.get("count", 1)),
                )
            )
    return mutants


def apply(mutant: Mutant, target: Path, reference: Path | None = None) -> Path:
    """Copy the reference (default: the instructor's own copy, ``reference_dir``) into ``target``, plant ``mutant``."""
    reference = reference if reference is not None else reference_dir() or ROOT / "solutions"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(reference, target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / mutant.file
    source = path.read_text(encoding="utf-8")
    found = source.count(mutant.replace)
    if found != mutant.count:
        raise ValueError(
            f"mutant {mutant.id}: expected {mutant.count} occurrence(s) of its `replace` text "
            f"in {mutant.file}, found {found}"
        )
    path.write_text(source.replace(mutant.replace, mutant.with_), encoding="utf-8")
    return target


FAMILY_KINDS = ("missing scale", "doubled scale", "reduction over another axis", "concatenation over another axis",
                "transpose", "missing term of the Jacobian", "sign flip", "off-by-one shift", "wrong dtype path",
                "missing normalisation", "missing shift", "log of an underflowed probability")


@dataclass(frozen=True)
class Family(Mutant):
    """The transformation behind a family of mistakes, planted in one function of the reference.

    ``description`` says what the student's outputs equal, in the student's words; ``revisit`` is the idea
    to go back to; ``family`` is the kind of transformation (one of :data:`FAMILY_KINDS`).
    """

    family: str = ""
    revisit: str = ""


def load_families(path: Path | None = None) -> list[Family]:
    """Every family transformation of ``path`` (default: the catalogue's ``families.toml``), in file order.

    Raises
    ------
    CatalogueError
        If ``path`` is not given and there is no catalogue here.
    ValueError
        If an entry names an unknown exercise or kind, or an id twice.
    """
    path = catalogue_dir() / FAMILY_FILE_NAME if path is None else Path(path)
    curriculum = load()
    found: list[Family] = []
    for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("family", []):
        exercise = curriculum.exercise(entry["exercise"])
        if entry["family"] not in FAMILY_KINDS:
            raise ValueError(f"family {entry['id']}: family must be one of {', '.join(FAMILY_KINDS)}, "
                             f"got {entry['family']!r}")
        if any(family.id == entry["id"] for family in found):
            raise ValueError(f"family {entry['id']} is listed twice in {path.name}")
        found.append(Family(id=entry["id"], exercise=exercise.name, description=entry["description"],
                            hint=entry["revisit"], file=entry.get("file", exercise.module_file),
                            replace=entry["replace"], with_=entry["with"], count=int(entry.get("count", 1)),
                            family=entry["family"], revisit=entry["revisit"]))
    return found
