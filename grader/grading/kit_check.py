"""The kit's own check: the reference graded by the suite beside the students, and its verdict.

Run by: the batch's process (``grader.grading.grade``); the check's job runs
in a grading process like a student's. Whatever breaks the kit shows up as a
test the reference does not pass, and such a test is not graded for anyone:
never a student's zero.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from grader.curriculum import ROOT, reference_dir
from grader.grading import reference_use
from grader.grading.records import Job, Result
from grader.suite import TestFile

# The kit's own check (the reference graded by the suite), per process: (suite, reference, options) -> outcome.
_KIT_CHECKS: dict[str, tuple[str | None, dict[str, str]]] = {}
# What the reference sent in each test of the check of a key (``grader.grading.reference_use``), per process.
_USES: dict[str, reference_use.Table] = {}
REFERENCE_ENTRY = "the kit's reference"
# What the kit's check grades: the course's reference (read when a batch plans its check: an earlier batch in this
# process may have had another course), unless a test sets this seam.
KIT_REFERENCE: Path | None = None


def passed_store() -> Path:
    """Where the keys of the kit's checks that passed whole are kept, across batches: the instructor's cache.

    A key is the suite's fingerprint (every test file, the kit's test helpers and data, the reference, the
    manifest, the grading and sandbox code, the given code, every grade-deciding option) with the reference's
    digest: the same key is the same check, so a batch of an unchanged kit need not grade the reference again.
    Only a check that passed whole is kept (a failure may be the machine's, and is checked again).
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-kit" / "kit-checks-passed"


def _passed_before(key: str) -> bool:
    try:
        return key in passed_store().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False


def _remember_passed(key: str) -> None:
    store = passed_store()
    try:
        store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(store, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, (key + "\n").encode())  # one short append: whole, beside concurrent batches
        finally:
            os.close(descriptor)
    except OSError:
        pass  # a cache only: the next batch checks the kit again


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
    reference = found.prepare(KIT_REFERENCE or reference_dir() or ROOT / "solutions", work / ".kit", "reference")
    import sys

    import numpy

    key = f"{fingerprint}|{reference.digest}|{job.fair}|{job.policy}|{sys.version.split()[0]}|{numpy.__version__}"
    if key in _KIT_CHECKS:
        return _KIT_CHECKS[key], None, key
    if _passed_before(key) and (kept := reference_use.load(passed_store().parent, key)) is not None:
        _KIT_CHECKS[key], _USES[key] = (None, {}), kept  # (a check kept without the reference's use: run again)
        return _KIT_CHECKS[key], None, key
    if reference.status != "ok":
        return (f"the kit's reference (solutions/) is broken: {reference.status}", {}), None, key
    canary = dataclasses.replace(job, student=REFERENCE_ENTRY, folder=str(reference.folder),
                                 files=tuple(f.path for f in suite), kit_check=True)
    return None, canary, key


def used(key: str) -> reference_use.Table | None:
    """What the reference sent in each test, as the check of ``key`` measured it (None: not known yet)."""
    return _USES.get(key)


def verdict(suite: list[TestFile], result: Result, key: str) -> tuple[str | None, dict[str, str]]:
    """(why nothing can be graded, {test: why it cannot be}) from the result of the kit's check (remembered)."""
    if result.error:
        outcome: tuple[str | None, dict[str, str]] = (f"the kit is broken: {result.error}", {})
    else:
        broken = {}
        hidden = {f.path for f in suite if f.hidden}
        for record in result.records:
            # The kit's own tests must pass on its reference; an instructor's hidden test may assert what the
            # reference does not do (that is the instructor's choice), but must not crash on it.
            failed = record.outcome != "passed"
            crashed = failed and (record.exception or "AssertionError") != "AssertionError"
            if record.internal or crashed or (failed and record.file not in hidden):
                lines = [line for line in str(record.internal or record.message).splitlines() if line.strip()]
                why = next((line.strip() for line in lines if "rror" in line), lines[-1].strip() if lines else "")
                broken[record.nodeid] = f"the kit's own reference fails {record.nodeid} ({why[:200]})"
        outcome = (None, broken)
        _USES[key] = reference_use.table(result.records)  # the channel's limits follow it (``reference_use``)
        if not broken:
            reference_use.save(passed_store().parent, key, _USES[key])  # first: a key kept has its use kept
            _remember_passed(key)
    _KIT_CHECKS[key] = outcome
    return outcome
