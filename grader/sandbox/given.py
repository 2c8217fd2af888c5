"""Which exercises fair grading may serve from the kit's given implementations, for a reference folder.

Run by the grading process (``grader.sandbox.proxy``, when it starts a worker). The given implementations
(``grader/release_files/given`` of a checkout, written apart from the reference; the releases ship them as given
code) compute the kit's reference's values bit for bit (``grader/tests/test_given_bits.py``). They are working
answers, so the wheel and the sdist leave them out like the reference: an installed kit finds them in the course
folder (``given/``, copied by ``attention-kit course init DIR --kit CHECKOUT``), :func:`folder` (that is,
``grader.course.given_code``) is where every reader looks. Without them, fair grading asks the reference.
They may stand in for a reference only where the reference is that one: ``verified.json`` beside them records
the digest of each reference module they were checked against (``python -m grader.sandbox.given --write`` after
the check passes; a test keeps it current). An instructor's reference that differs (a course that changed an
exercise), or a module whose own dependencies differ, is answered by that reference, in its own worker, as before.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from grader import course
from grader.curriculum import PACKAGE, Curriculum

KIT_GIVEN = PACKAGE.joinpath(*course.KIT_GIVEN)  # a checkout's; the wheel and the sdist leave it out
VERIFIED = "verified.json"


def folder() -> Path | None:
    """The given implementations in force: the active course's ``given/``, else the checkout's, else None."""
    return course.given_code(PACKAGE)


def missing() -> str:
    """The one line saying where :func:`folder` looked and how to get the given code (when it found none)."""
    return course.no_given_code(PACKAGE)


def digest(path: Path) -> str | None:
    """The SHA-256 of a file's bytes, or None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def verified(where: Path | None) -> dict[str, str]:
    """The reference modules' digests that the given code in ``where`` was checked against (exercise -> digest)."""
    if where is None:
        return {}
    try:
        recorded = json.loads((where / VERIFIED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(name): str(value) for name, value in recorded.items()} if isinstance(recorded, dict) else {}


def usable(reference: Path, curriculum: Curriculum) -> frozenset[str]:
    """The exercises whose given code may answer for ``reference``: given, verified, and so are their dependencies.

    The kit's private helpers (``_checks.py``, the tasks) are part of every module's check: a changed helper leaves
    none usable (a helper of the course's own, beside them, changes nothing). No given code found: none.
    """
    where = folder()
    recorded = verified(where)
    if where is None or not recorded or any(digest(reference / name) != value for name, value in recorded.items()
                           if name.startswith("_")):
        return frozenset()
    same = {exercise.name for exercise in curriculum.exercises
            if (where / exercise.module_file).is_file()
            and recorded.get(exercise.name) is not None
            and digest(reference / exercise.module_file) == recorded[exercise.name]}
    return frozenset(name for name in same if set(curriculum.dependencies(name)) <= same)


def servable(reference: Path, curriculum: Curriculum) -> frozenset[str]:
    """The exercises whose given code may run in a student's worker: :func:`usable`, and not assigned.

    A worker's code can read whatever its process holds (frames, ``sys.modules``, code objects: bytecode is as
    good as source) and encode it into what it prints or raises, past any scrubbing of feedback; a student who
    can resubmit would then hand in the given code as their own answer. So a worker holds the given code only of
    exercises that neither the graded selection (``--part``: ``Curriculum.selection``) nor the course (its
    ``[course] part``, the kit's own: every part) assigns, which a release hands out as given code anyway
    (``grader.authoring.release_given``): ``grade --part 3`` in a course of every part still assigns Part I. An
    assigned dependency is answered from outside the worker, by the reference's own
    (``grader.sandbox.callbacks``, with the answers the kit's check recorded: ``grader.sandbox.sealed``).
    """
    assigned = {*curriculum.selected_names(), *curriculum.selected_names(curriculum.part)}
    return usable(reference, curriculum) - frozenset(assigned)


def current(reference: Path, curriculum: Curriculum, where: Path = KIT_GIVEN) -> dict[str, str]:
    """What ``verified.json`` should record for ``reference``: its helpers' and given exercises' module digests."""
    found = {path.name: digest(path) for path in sorted(reference.glob("_*.py")) if not path.name.startswith("__")}
    found.update({exercise.name: digest(reference / exercise.module_file) for exercise in curriculum.exercises
                  if (where / exercise.module_file).is_file()})
    return {name: value for name, value in found.items() if value is not None}


def main(argv: list[str]) -> int:
    """``--write``: record the kit's reference as verified (run after test_given_bits passes); else check it.

    A checkout's tool: the kit's reference and the checkout's given code (``KIT_GIVEN``).
    """
    from grader.curriculum import ROOT, load

    wanted = current(ROOT / "solutions", load())
    if argv[:1] == ["--write"]:
        (KIT_GIVEN / VERIFIED).write_text(json.dumps(wanted, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    if wanted != verified(KIT_GIVEN):
        print(f"{KIT_GIVEN / VERIFIED} is not current: run grader/tests/test_given_bits.py, then "
              "python -m grader.sandbox.given --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
