"""What the reference sends the grader in each test, and the channel limits of the students' tests derived from it.

Run by: the batch's process (the kit's check keeps the reference's use, ``grader.grading.kit_check``; the batch
judges a student graded before it was known, :func:`judged`) and each grading process (its recorder tells the
student's worker each test's allowance, :func:`allowances`). The numbers are :class:`grader.sandbox.limits.Limits`'
fields, the allowances and the failures' words ``grader.sandbox.channel_use``'s: a test may send ``channel_factor``
times what the reference sends in it, a submission that factor times the reference's total over its tests.

The reference's use is measured by the kit's check, which grades the reference through the same sandbox as the
students, and is kept with the check's key (the suite's fingerprint and the reference's digest) in the
instructor's cache beside the checks that passed: a batch of a kit checked before knows it from the start, and
each test is stopped in the grading process at its allowance. A batch that checks its kit grades the first
students beside the check: they run with only the grader's own bound (``Limits.unknown_bytes``), and the batch
judges their tests against the same allowances when the check's result comes (it holds their results until then).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from grader.grading.records import Job, Result, TestRecord
from grader.sandbox.channel_use import Allowance, Use, for_submission, for_test, over_submission, over_test
from grader.sandbox.limits import Limits

# (test id, bytes, messages) per test of the reference's run: what a Job carries.
Table = tuple[tuple[str, int, int], ...]


def table(records: tuple[TestRecord, ...]) -> Table:
    """The reference's use per test, from the records of the kit's check."""
    return tuple((record.nodeid, int(record.sent), int(record.calls)) for record in records)


def _uses(reference: Table) -> dict[str, Use]:
    return {nodeid: Use(sent, calls) for nodeid, sent, calls in reference}


def _store(folder: Path, key: str) -> Path:
    return folder / "kit-check-use" / (hashlib.sha256(key.encode()).hexdigest() + ".json")


def save(folder: Path, key: str, reference: Table) -> None:
    """Keep the reference's use measured by the check of ``key`` in the cache ``folder`` (a cache: may fail)."""
    path = _store(folder, key)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"key": key, "tests": [list(row) for row in reference]}), encoding="utf-8")
        os.replace(temporary, path)  # whole, beside concurrent batches
    except OSError:
        pass


def load(folder: Path, key: str) -> Table | None:
    """The reference's use kept for the check of ``key``, or None (never measured, or unreadable)."""
    try:
        kept = json.loads(_store(folder, key).read_text(encoding="utf-8"))
        if kept.get("key") != key:
            return None
        return tuple((str(nodeid), int(sent), int(calls)) for nodeid, sent, calls in kept["tests"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _total(uses: dict[str, Use], job: Job, order: list[str] | None = None) -> int:
    """The reference's bytes over the tests ``job`` runs (its files), or over ``order`` if given."""
    if order is not None:
        return sum(uses[nodeid].sent for nodeid in order if nodeid in uses)
    files = {Path(path).name for path in job.files}
    return sum(use.sent for nodeid, use in uses.items() if Path(nodeid.split("::")[0]).name in files)


def allowances(job: Job, limits: Limits) -> tuple[dict[str, Allowance], int, int | None]:
    """``(allowance per test id, the submission's bytes, the reference's total)`` for ``job``'s student.

    Without the reference's use (``job.reference_use`` None), an empty table: every test gets only the grader's
    own bound (``channel_use.for_test`` of None), and the batch judges the tests later (:func:`judged`).
    """
    if job.reference_use is None or job.kit_check:
        return {}, for_submission(limits, None), None
    uses = _uses(job.reference_use)
    total = _total(uses, job)
    return ({nodeid: for_test(limits, use) for nodeid, use in uses.items()},
            for_submission(limits, total), total)


def judged(result: Result, reference: Table, limits: Limits | None = None) -> Result:
    """``result`` with each test that sent more than its allowance failed, said so (a student graded unknowing).

    The allowances are the grading process's (:func:`allowances`): a test past its own fails with what it sent,
    what the reference sends and the limit; from the test at which the submission passed its allowance on, every
    test that sent anything fails with the submission's total.
    """
    limits = limits or Limits()
    uses = _uses(reference)
    total = _total(uses, Job("", "", (), ()), [record.nodeid for record in result.records])
    allowance = for_submission(limits, total)
    records, sent = [], 0
    for record in result.records:
        sent += record.sent
        why = over_test(limits, Use(record.sent, record.calls), for_test(limits, uses.get(record.nodeid)))
        if why is None and sent >= allowance and record.sent:
            why = over_submission(limits, sent, allowance, total)
        if why is not None and record.internal is None:
            record = dataclasses.replace(record, outcome="failed", phase=record.phase or "call",
                                         exception=record.exception or "WorkerCrashed",
                                         message=f"{why}\n{record.message}".strip())
        records.append(record)
    return dataclasses.replace(result, records=tuple(records))
