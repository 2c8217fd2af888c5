"""Which exercises fair grading may serve from the kit's given implementations, for a reference folder.

Run by the grading process (``grader.sandbox.proxy``, when it starts a worker). The given implementations
(``grader/release_files/given``, written apart from the reference; the releases ship them as given code) compute
the kit's reference's values bit for bit (``grader/tests/test_given_bits.py``). They may stand in for a reference
only where the reference is that one: ``VERIFIED`` records the digest of each reference module they were checked
against (``python -m grader.sandbox.given --write`` after the check passes; a test keeps it current). An
instructor's reference that differs (a course that changed an exercise), or a module whose own dependencies
differ, is answered by that reference, in its own worker, as before.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from grader.curriculum import Curriculum

GIVEN_CODE = Path(__file__).resolve().parent.parent / "release_files" / "given"
VERIFIED = GIVEN_CODE / "verified.json"


def digest(path: Path) -> str | None:
    """The SHA-256 of a file's bytes, or None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def verified() -> dict[str, str]:
    """The reference modules' digests that the given code was checked against (exercise -> digest)."""
    try:
        recorded = json.loads(VERIFIED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(name): str(value) for name, value in recorded.items()} if isinstance(recorded, dict) else {}


def usable(reference: Path, curriculum: Curriculum) -> frozenset[str]:
    """The exercises whose given code may answer for ``reference``: given, verified, and so are their dependencies.

    The kit's private helpers (``_checks.py``, the tasks) are part of every module's check: a changed helper leaves
    none usable (a helper of the course's own, beside them, changes nothing).
    """
    recorded = verified()
    if not recorded or any(digest(reference / name) != value for name, value in recorded.items()
                           if name.startswith("_")):
        return frozenset()
    same = {exercise.name for exercise in curriculum.exercises
            if (GIVEN_CODE / exercise.module_file).is_file()
            and recorded.get(exercise.name) is not None
            and digest(reference / exercise.module_file) == recorded[exercise.name]}
    return frozenset(name for name in same if set(curriculum.dependencies(name)) <= same)


def current(reference: Path, curriculum: Curriculum) -> dict[str, str]:
    """What ``VERIFIED`` should record for ``reference``: its helpers' and given exercises' module digests."""
    found = {path.name: digest(path) for path in sorted(reference.glob("_*.py")) if not path.name.startswith("__")}
    found.update({exercise.name: digest(reference / exercise.module_file) for exercise in curriculum.exercises
                  if (GIVEN_CODE / exercise.module_file).is_file()})
    return {name: value for name, value in found.items() if value is not None}


def main(argv: list[str]) -> int:
    """``--write``: record the kit's reference as verified (run after test_given_bits passes); else check it."""
    from grader.curriculum import ROOT, load

    wanted = current(ROOT / "solutions", load())
    if argv[:1] == ["--write"]:
        VERIFIED.write_text(json.dumps(wanted, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    if wanted != verified():
        print(f"{VERIFIED} is not current: run grader/tests/test_given_bits.py, then "
              "python -m grader.sandbox.given --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
