"""What the reference sends the grader in each test, and the channel limits of the students' tests derived from it.

Run by: the batch's process (the kit's check keeps the reference's use, ``grader.grading.kit_check``; the batch
judges a student graded before it was known, :func:`judged`) and each grading process (its recorder tells the
student's worker each test's allowance, :func:`allowances`). The numbers are :class:`grader.sandbox.limits.Limits`'
fields, the allowances and the failures' words ``grader.sandbox.channel_use``'s: a test may send ``channel_factor``
times what the reference sends in it, and the tests of one file that factor times the reference's total over them
(each file its own: a flood in one exercise's tests never stops another exercise's).

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


def file_of(nodeid: str) -> str:
    """The test file a test id belongs to (its tests share one allowance of bytes)."""
    return Path(nodeid.split("::")[0]).name


def _totals(uses: dict[str, Use], nodeids: list[str]) -> dict[str, int]:
    """The reference's bytes over ``nodeids``, per test file."""
    totals: dict[str, int] = {}
    for nodeid in nodeids:
        if nodeid in uses:
            totals[file_of(nodeid)] = totals.get(file_of(nodeid), 0) + uses[nodeid].sent
    return totals


def allowances(job: Job, limits: Limits) -> tuple[dict[str, Allowance], dict[str, tuple[int, int]]]:
    """``(allowance per test id, {test file: (the bytes its tests may send, the reference's total in them)})``.

    Without the reference's use (``job.reference_use`` None), two empty tables: every test, and every file, gets
    only the grader's own bound (``channel_use.for_test`` and ``for_submission`` of None, :func:`file_allowance`),
    and the batch judges the tests later (:func:`judged`).
    """
    if job.reference_use is None or job.kit_check:
        return {}, {}
    uses = _uses(job.reference_use)
    files = {Path(path).name for path in job.files}
    totals = _totals(uses, [nodeid for nodeid in uses if file_of(nodeid) in files])
    return ({nodeid: for_test(limits, use) for nodeid, use in uses.items()},
            {name: (for_submission(limits, total), total) for name, total in totals.items()})


def file_allowance(files: dict[str, tuple[int, int]], nodeid: str, limits: Limits) -> tuple[int, int | None]:
    """``(bytes, the reference's total)`` that ``nodeid``'s file may send (the grader's bound where not known)."""
    return files.get(file_of(nodeid)) or (for_submission(limits, None), None)


def judged(result: Result, reference: Table, limits: Limits | None = None) -> Result:
    """``result`` with each test that sent more than its allowance failed, said so (a student graded unknowing).

    The allowances are the grading process's (:func:`allowances`): a test past its own fails with what it sent,
    what the reference sends and the limit; from the test at which its file's tests passed their allowance on,
    every test of that file that sent anything fails with the file's total.
    """
    limits = limits or Limits()
    uses = _uses(reference)
    totals = _totals(uses, [record.nodeid for record in result.records])
    records, sent = [], {}
    for record in result.records:
        name = file_of(record.nodeid)
        sent[name] = sent.get(name, 0) + record.sent
        total = totals.get(name, 0)
        allowance = for_submission(limits, total)
        why = over_test(limits, Use(record.sent, record.calls), for_test(limits, uses.get(record.nodeid)))
        if why is None and sent[name] >= allowance and record.sent:
            why = over_submission(limits, sent[name], allowance, total)
        if why is not None and record.internal is None:
            record = dataclasses.replace(record, outcome="failed", phase=record.phase or "call",
                                         exception=record.exception or "WorkerCrashed",
                                         message=f"{why}\n{record.message}".strip())
        records.append(record)
    return dataclasses.replace(result, records=tuple(records))
