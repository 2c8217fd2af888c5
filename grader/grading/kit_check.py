"""The kit's own check: the reference graded by the suite beside the students, and its verdict.

Run by: the batch's process (``grader.grading.grade``); the check's job runs
in a grading process like a student's. Whatever breaks the kit shows up as a
test the reference does not pass, and such a test is not graded for anyone:
never a student's zero.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT, reference_dir
from grader.grading import reference_use
from grader.grading.fingerprint import file_keys
from grader.grading.records import Job, Result
from grader.suite import TestFile

# The kit's own check (the reference graded by the suite), per process: (suite, reference, options) -> outcome.
_KIT_CHECKS: dict[str, tuple[str | None, dict[str, str]]] = {}
# What the reference sent in each test of the check of a key (``grader.grading.reference_use``), per process;
# while a check runs, what its files checked before measured and the keys of the others.
_USES: dict[str, reference_use.Table] = {}
_PENDING: dict[str, tuple[reference_use.Table, dict[str, str]]] = {}
REFERENCE_ENTRY = "the kit's reference"
# What the kit's check grades: the course's reference (read when a batch plans its check: an earlier batch in this
# process may have had another course), unless a test sets this seam.
KIT_REFERENCE: Path | None = None


def passed_store() -> Path:
    """The instructor's cache folder of the kit's checks: each test file's that passed whole, across batches.

    A file's key (``fingerprint.file_keys``: the test file, the kit's test helpers and data, the reference, the
    manifest, the grading and sandbox code, the given code, every grade-deciding option but the selection) with
    the reference's digest, Python's and numpy's versions: the same key is the same check, so a batch of an
    unchanged kit, or of another part or selection of it, grades the reference on the files not checked yet only.
    Only a file that passed whole is kept, with what the reference sent in each test (``reference_use``): a
    failure may be the machine's, and is checked again.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-kit"


def answers_file(reference: Path | None = None) -> Path | None:
    """Where the kit's check keeps ``reference``'s answers to its callbacks, sealed (``grader.sandbox.sealed``).

    ``reference``: by default the one in force in this process, which answers its students' callbacks.
    """
    from grader.sandbox import sealed

    reference = reference or reference_dir() or ROOT / "solutions"
    try:
        return sealed.file_for(passed_store(), reference)
    except OSError:
        return None


def plan(suite: list[TestFile], job: Job, work: Path,
         fingerprint: str) -> tuple[tuple[str | None, dict[str, str]] | None, Job | None, str]:
    """The kit's own check (the reference graded by the suite): ``(outcome if known, the job to run, its key)``.

    Whatever breaks the kit (a reference that does not import or is wrong, broken golden data, a hidden test
    that does not import or parse, an argument the channel cannot carry) shows up as a test the reference does
    not pass: such a test is not graded for anyone, never a student's zero. The job runs beside the students'
    (``grade_batch``), so it costs no time of its own; :func:`verdict` reads its result.
    """
    from grader.grading import submissions as found

    (work / ".kit").mkdir(exist_ok=True)  # apart from the students' folders (a student may be called "reference")
    source = KIT_REFERENCE or reference_dir() or ROOT / "solutions"
    reference = found.prepare(source, work / ".kit", "reference")
    _with_dependencies(source, reference)
    import sys

    import numpy

    environment = f"{reference.digest}|{job.fair}|{job.policy}|{sys.version.split()[0]}|{numpy.__version__}"
    key = f"{fingerprint}|{environment}"
    if key in _KIT_CHECKS:
        return _KIT_CHECKS[key], None, key
    if reference.status != "ok":
        return (f"the kit's reference (solutions/) is broken: {reference.status}", {}), None, key
    # Each test file's check is kept apart (``reference_use``): one whose key was checked before, by a batch of
    # this suite or of another selection of the same kit, passed whole and is not graded again.
    keys = {path: f"{file_key}|{environment}" for path, file_key in file_keys(job).items()}
    known = {path: reference_use.load(passed_store(), file_key) for path, file_key in keys.items()}
    unknown = tuple(f.path for f in suite if known.get(f.path) is None)
    passed = tuple(row for path in keys if path not in unknown for row in known[path] or ())
    if not unknown:
        _KIT_CHECKS[key], _USES[key] = (None, {}), passed
        return _KIT_CHECKS[key], None, key
    _PENDING[key] = (passed, {path: keys[path] for path in unknown})
    # The answers it records are named here, by the reference it grades: a grading process names a student's file
    # by the reference in force there, which a seam of this process (KIT_REFERENCE) or a change of the reference
    # during the batch can make another (a broken check's answers then opened by every student of the good one).
    canary = dataclasses.replace(job, student=REFERENCE_ENTRY, folder=str(reference.folder), files=unknown,
                                 kit_check=True, answers=str(answers_file(source) or ""))
    return None, canary, key


def _with_dependencies(source: Path, reference: Any) -> None:
    """Put beside the selected modules of the check the reference's modules they build on (a selection's check).

    The check's worker answers its own fair-grading callbacks where its folder holds the modules they need
    (``grader.sandbox.worker``): with them, a check of Part III alone asks nothing of the grading process either.
    Only the selection's tests run, so nothing more is graded; the check's key (the folder's digest) says so.
    """
    from grader.curriculum import load as load_curriculum
    from grader.grading import submissions as found

    if reference.folder is None or reference.status != "ok":
        return
    curriculum = load_curriculum()
    missing = [module for module in (curriculum.exercise(name).module_file for name in curriculum.given_names())
               if (source / module).is_file() and not (reference.folder / module).exists()]
    for module in missing:
        shutil.copyfile(source / module, reference.folder / module)
    if missing:
        reference.digest = found.folder_digest(reference.folder)


def used(key: str) -> reference_use.Table | None:
    """What the reference sent in each test, as the check of ``key`` measured it (None: not known yet)."""
    return _USES.get(key)


def _why(record: Any) -> str:
    """Why the reference failed a test, from the record's fields.

    The grader's own failure, the exception that ended the test, or the failure's first line (what differed);
    no line is picked by its words.
    """
    if record.internal:
        return _first_line(record.internal)
    first = _first_line(record.message)
    if record.exception and record.exception != "AssertionError":
        return f"{record.exception}: {first}" if first else record.exception
    return first or "failed"


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def verdict(result: Result, key: str) -> tuple[str | None, dict[str, str]]:
    """(why nothing can be graded, {test: why it cannot be}) from the result of the kit's check (remembered)."""
    if result.error:
        outcome: tuple[str | None, dict[str, str]] = (f"the kit is broken: {result.error}", {})
    else:
        broken = {}
        for record in result.records:
            # Every test must pass on the reference, an instructor's hidden test too: one that fails on it (a
            # wrong expected value) would take its points from every student, silently (a hostile round's
            # instructor lost 2 of 14 points of every row, exit 0). It is not graded for anyone, and said.
            if record.internal or record.outcome != "passed":
                broken[record.nodeid] = f"the kit's own reference fails {record.nodeid} ({_why(record)[:200]})"
        outcome = (None, broken)
        passed, pending = _PENDING.pop(key, ((), {}))
        # The channel's limits follow the reference's use (``reference_use``): what the files checked before
        # measured, and this check.
        _USES[key] = passed + reference_use.table(result.records)
        for path, file_key in pending.items():  # each file whose every test passed: not graded again
            records = tuple(record for record in result.records if record.file == path)
            if records and not any(record.nodeid in broken for record in records):
                reference_use.save(passed_store(), file_key, reference_use.table(records))
    _KIT_CHECKS[key] = outcome
    return outcome
