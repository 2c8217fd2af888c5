"""The fingerprint of everything besides a submission that can change its grade (run by the batch's process).

A rerun into the same ``--out`` folder keeps a student whose results carry
the same fingerprint (``grader.grading.grade``); anything that can change a
grade must therefore be in it:

- the kit's version and the results' format;
- every grade-deciding field of the batch's :class:`~grader.grading.records.Job`
  (those marked ``grade`` in ``grader.grading.records``: the budget, fairness,
  the isolation policy, the part, the suite's selection and points);
- the content of the suite's test files, ``tests/`` (its helpers and data), the data of
  a course's own exercises (their golden values and fingerprints),
  ``solutions/``, the manifest, the modules that turn outcomes into records,
  messages and scores, every file of ``grader/sandbox/`` (how student code
  is run and limited: a new file there is covered without a change here) and
  the given implementations that fair grading runs (``grader.sandbox.given.folder``).

The submission's own content (its digest) is added per student by the batch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import tomllib
from pathlib import Path

from grader import course
from grader.curriculum import PACKAGE, ROOT, reference_dir
from grader.grading.records import Job, grade_deciding_fields
from grader.sandbox import given

# The grading modules whose code shapes a record, a message or a score (besides the sandbox, hashed whole).
GRADING_MODULES = ("scored.py", "rows.py", "report.py", "recorder.py", "secrets.py", "kit_check.py",
                   "reference_use.py")


def kit_version() -> str:
    """The kit's version from pyproject.toml."""
    with contextlib.suppress(OSError, KeyError, tomllib.TOMLDecodeError):
        return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version("attention-kit")
    return "unknown"


def grade_deciding(job: Job) -> dict[str, object]:
    """The fields of ``job`` that can change a grade, by name (the suite as plain tuples)."""
    values: dict[str, object] = {}
    for name in grade_deciding_fields():
        value = getattr(job, name)
        if name == "suite":
            value = [dataclasses.astuple(entry) for entry in value]
        values[name] = value
    return values


def fingerprinted_files(job: Job) -> list[Path]:
    """Every file whose content is part of the fingerprint, sorted."""
    files = {Path(entry.path) for entry in job.suite}
    files |= set((ROOT / "tests").glob("*.py")) | set((ROOT / "tests" / "data").glob("*"))
    files |= set((reference_dir() or ROOT / "solutions").glob("*.py"))  # the instructor's reference
    files |= {PACKAGE / "curriculum.toml", *(PACKAGE / "grading" / name for name in GRADING_MODULES)}
    folder = course.active_folder()  # the golden values and fingerprints of the course's own exercises
    files |= set((folder / course.DATA_FOLDER).glob("*.npz")) if folder is not None else set()
    # The whole sandbox: bytecode caches aside (they change with the interpreter, never the code).
    files |= {path for path in (PACKAGE / "sandbox").rglob("*")
              if "__pycache__" not in path.parts and path.suffix != ".pyc"}
    given_code = given.folder()  # what fair grading runs for the exercises a module builds on (the course's copy)
    files |= set(given_code.glob("*.py")) if given_code is not None else set()
    return sorted(path for path in files if path.is_file())


def _name(path: Path) -> str:
    for base in (ROOT, PACKAGE.parent):  # names relative to the kit, wherever it is installed
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return str(path)


def suite_fingerprint(job: Job) -> str:
    """A hash of everything besides the submission that decides a grade, for the batch's ``job`` template."""
    from grader.grading.rows import RESULTS_FORMAT

    digest = hashlib.sha256(f"{kit_version()}|{RESULTS_FORMAT}".encode())
    digest.update(repr(sorted(grade_deciding(job).items())).encode())
    for path in fingerprinted_files(job):
        digest.update(_name(path).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def file_keys(job: Job) -> dict[str, str]:
    """A key per test file of ``job``'s suite: what decides the reference's verdict on that file's tests.

    The suite's fingerprint without the other hidden test files and the selection (which files, their points;
    the public test files are in every key, as hidden tests import them): the kit's check of one file holds for
    any suite that has the same file with the same kit (helpers, data, reference, grading and sandbox code, given
    code, options), so a batch of another part or selection, or after a hidden test was edited, grades the
    reference on the files it has not seen only.
    """
    from grader.grading.rows import RESULTS_FORMAT

    digest = hashlib.sha256(f"{kit_version()}|{RESULTS_FORMAT}".encode())
    # Which files are graded and for how many points (the suite, the part) decide no verdict of a test: the
    # sandbox and the tests never read the selection.
    digest.update(repr(sorted((name, value) for name, value in grade_deciding(job).items()
                              if name not in ("suite", "part"))).encode())
    suite = {entry.path: entry for entry in job.suite}
    helpers = set((ROOT / "tests").glob("*.py"))  # every public test file is in every key: hidden tests import them
    for path in fingerprinted_files(job):
        if str(path) not in suite or path in helpers:
            digest.update(_name(path).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    keys = {}
    for name, entry in suite.items():
        own = digest.copy()
        own.update(f"{_name(Path(name))}|{entry.exercise}|{entry.hidden}".encode())
        own.update(hashlib.sha256(Path(name).read_bytes()).digest() if Path(name).is_file() else b"missing")
        keys[name] = own.hexdigest()
    return keys


def student_fingerprint(suite_fingerprint: str, submission_digest: str) -> str:
    """The fingerprint a student's results carry: the suite's and the submission's content."""
    return hashlib.sha256(f"{suite_fingerprint}|{submission_digest}".encode()).hexdigest()
