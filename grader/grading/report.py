"""The batch's side of a student's files: their first write, reading them back, and the terminal summary.

Scoring is ``grader.grading.scored`` (the worker's records into a typed
:class:`grader.grading.rows.StudentRow`); every file is a format of
``grader.grading.formats`` (results.json, feedback.md, grades.csv, ...), each
written atomically (``grader.grading.files``). Here:

- :func:`write_student`: a student's ``feedback.md`` and ``results.json`` as
  soon as they are graded (results.json last: its presence marks them done, so
  an interrupted run that is resumed gives the same gradebook);
- :func:`read_results` / :func:`read_row`: a stored results.json, if complete
  and of this format, for a resumed batch and ``attention-kit export``;
- :func:`summary`: what the terminal says at the end.

Safe output: student ids and statuses are written with control and
bidirectional characters escaped (:func:`escape_text`), and a CSV cell that a
spreadsheet would read as a formula is neutralised (:func:`csv_cell`, the
OWASP rule).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from grader.course import hidden_visibility
from grader.curriculum import load as load_curriculum
from grader.grading.escaping import csv_cell, escape_text, md_text  # noqa: F401 - csv_cell: its callers import it here
from grader.grading.files import FILE_MODE, atomic_write  # noqa: F401 - their callers import them here
from grader.grading.formats import feedback_md
from grader.grading.formats import results_json as results_file
from grader.grading.formats.feedback_md import MAX_FAILURES_SHOWN, feedback_markdown, term_lines  # noqa: F401
from grader.grading.formats.results_json import results_text  # noqa: F401 - its callers import it here
from grader.grading.records import Result, TestRecord
from grader.grading.rows import NOT_GRADED, RESULTS_FORMAT, ResultsFileError, StudentRow, typed
from grader.grading.scored import (  # noqa: F401 - the scoring's API, kept where its callers find it
    MAX_FAILURE_CHARS,
    exercise_totals,
    max_points,
    number,
    results_json,
    score_tests,
    scored_row,
    shorten,
    visible_score_line,
)

# How the worker says that a module did not import (worker.describe_import_error, tests.kit.describe_import_error).
_IMPORT_FAILURE = re.compile(r"(?:importing (?P<raised>[\w.-]+\.py) raised|syntax error in (?P<syntax>[\w.-]+\.py) "
                             r"line \d+:)[^\n]*")
DOES_NOT_IMPORT = "does not import"


def import_failures(records: Iterable[Any]) -> list[str]:
    """``does not import: <its error line>`` once per module that did not import when the tests ran.

    A module can parse and still fail to import (an import of a missing package, a name error at the top,
    a misplaced ``from __future__``); the static checks cannot see that, the row's status must. Read from the
    public tests only: the status is shown before grades are published, the hidden tests' messages are not.
    """
    curriculum = load_curriculum()
    lines: dict[str, str] = {}
    for record in records:
        if (record.outcome != "failed" or record.internal
                or curriculum.exercise_of_test_file(str(record.file)) is None):
            continue
        for match in _IMPORT_FAILURE.finditer(str(record.message)):
            module = match["raised"] or match["syntax"]
            lines.setdefault(module, f"{DOES_NOT_IMPORT}: {match[0].strip()[:300]}")
    return list(lines.values())


def is_graded(results: StudentRow | Mapping[str, Any]) -> bool:
    """Whether every test of a row (or a results.json dict) has a score (no internal failure of the grader)."""
    if isinstance(results, StudentRow):
        return results.graded
    return not str(results.get("extra_data", {}).get("status", "")).startswith(NOT_GRADED)


def write_student(out: Path, row: StudentRow | Mapping[str, Any]) -> None:
    """Write a student's feedback.md, then results.json (its presence marks the student done)."""
    (row,) = typed([row])
    folder = out / row.student
    atomic_write(folder / feedback_md.NAME, feedback_markdown(row))
    atomic_write(folder / results_file.NAME, results_text(row.to_json()))


def read_results(out: Path, student: str) -> dict[str, Any] | None:
    """A student's complete results.json, or None if it is missing, partial or outdated."""
    folder = out / student
    try:
        results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(results, dict) or results.get("extra_data", {}).get("format") != RESULTS_FORMAT:
        return None
    if not (folder / "feedback.md").is_file():
        return None
    return results


def read_row(out: Path, student: str) -> StudentRow | None:
    """A student's complete stored row, or None if it is missing, partial or of another format.

    Raises
    ------
    grader.grading.rows.ResultsFileError
        If the file is of this format but a field is broken: the message names the file and the field.
    """
    results = read_results(out, student)
    return None if results is None else StudentRow.from_json(results, str(out / student / results_file.NAME))


def _calls_status(stats: dict[str, int]) -> str:
    """What the row says about calls that timed out, crashed or were not run ("" if none)."""
    total = stats.get("requests", 0) + stats.get("skipped", 0)
    bad = stats.get("timed_out", 0) + stats.get("crashed", 0) + stats.get("skipped", 0)
    if not bad:
        return ""
    parts = ", ".join(f"{stats.get(key, 0)} {label}" for key, label in
                      (("timed_out", "timed out"), ("crashed", "crashed"), ("skipped", "not run")) if stats.get(key))
    if bad >= total:
        return f"every call timed out or crashed ({parts})"
    return f"{bad} of {total} calls timed out or crashed ({parts})"


def student_status(submission: Any, result: Result, records: tuple[TestRecord, ...],
                   graded: set[str] | None = None) -> str:
    """The row's status: ``not graded: ...`` first (the grader's failure), then the submission's own problems.

    ``graded``: the exercises the suite grades (``grade --exercise``); another's missing module is not a problem.
    """
    internal = result.error or next((r.internal for r in records if r.internal), None)
    parts = [f"not graded: {internal}"] if internal else []
    own = submission.status_of(graded)
    if own != "ok":
        parts.append(own)
    parts += import_failures(records)
    if result.stats:
        parts.append(_calls_status(result.stats))
    if result.refusals:
        parts.append(f"{result.refusals} request(s) to the reference refused (not the exercise's dependencies)")
    if result.isolated is False:
        parts.append("graded without isolation")
    return "; ".join(part for part in parts if part) or "ok"


def finish_student(out: Path, submission: Any, fingerprint: str, suite: list[Any], result: Result) -> StudentRow:
    """Score one student (the worker's typed result) into their typed row, and write their files.

    Raises whatever writing raises: the batch then keeps an :func:`unwritable_row` in memory.
    """
    from grader.grading.fingerprint import kit_version

    records = result.records
    graded = {test_file.exercise for test_file in suite}
    status = student_status(submission, result, records, graded)
    # What the text on top says (Gradescope shows it at once): only what the public tests saw. A call that crashed
    # or timed out, a refusal, an internal failure during a hidden test tells of the hidden test's input.
    hidden = {test_file.path for test_file in suite if test_file.hidden}
    shown = student_status(submission, result.before_hidden(), tuple(r for r in records if r.file not in hidden),
                           graded) if hidden and hidden_visibility() != "visible" else status
    if status.startswith(NOT_GRADED) and not shown.startswith(NOT_GRADED):  # (the row has no score: say so)
        shown = f"{NOT_GRADED}: the grader failed during the hidden tests" + ("" if shown == "ok" else f"; {shown}")
    row = scored_row(student=submission.student, status=status, shown_status=shown,
                     tests=score_tests(records, suite, submission.problems, result.error, submission.details),
                     seconds=result.seconds, output=result.output,
                     # the hidden tests' refusals (names the student's code chose) stay unseen
                     refused_shown=result.refused[:result.refused_shown],
                     fingerprint=fingerprint, source=submission.source.name, isolation=result.isolation,
                     isolated=result.isolated, kit_version=kit_version(), refused=result.refused,
                     calls=dict(result.stats), timing=dict(result.timing))
    write_student(out, row)
    return row


def unwritable_row(submission: Any, suite: list[Any], error: BaseException) -> StudentRow:
    """A row for a student whose results could not be scored or written (kept in memory for the gradebook)."""
    reason = f"not graded: the grader could not write this student's results ({type(error).__name__}: {error})"
    tests = score_tests([], suite, {}, reason.removeprefix("not graded: "), None)
    return scored_row(student=submission.student, status=reason[:500], tests=tests, seconds=0.0, output="",
                      fingerprint="", source=str(submission.source.name), isolation="not run", stored=False)


def stored_row(out: Path, student: str) -> StudentRow | None:
    """A student's stored row for a resumed batch: None if missing, partial, of another format or broken."""
    try:
        return read_row(out, student)
    except ResultsFileError:  # a file of this format that is not a row: the student is graded again
        return None


def histogram(percentages: list[float], bins: int = 10, width: int = 30) -> list[str]:
    """A text histogram of scores in percent, one line per bin."""
    counts = [0] * bins
    for value in percentages:
        counts[min(bins - 1, int(value * bins / 100))] += 1
    peak = max(counts) or 1
    lines = []
    for index, count in enumerate(counts):
        low, high = index * 100 // bins, (index + 1) * 100 // bins
        label = f"{low:3d}-{high:3d}%" if index < bins - 1 else f"{low:3d}-100%"
        lines.append(f"  {label} | {'#' * round(count * width / peak):<{width}} {count}")
    return lines


def summary(rows: Iterable[StudentRow | Mapping[str, Any]], *, graded: int, reused: int, seconds: float,
            top: int = 5) -> str:
    """The terminal summary: counts, distribution, most failed tests, isolation."""
    rows = typed(rows)
    not_graded = [r for r in rows if not r.graded]  # never kept from a last run: all of this one
    lines = [
        f"{len(rows)} submission(s): {graded - len(not_graded)} graded, "
        + (f"{len(not_graded)} NOT graded, " if not_graded else "")
        + f"{reused} unchanged since the last run ({seconds:.1f} s)",
    ]
    if not rows:
        return "\n".join(lines)
    graded_rows = [r for r in rows if r.graded]
    percentages = [100 * r.score / r.max_score if r.max_score else 0.0
                   for r in graded_rows]
    if percentages:
        mean = sum(percentages) / len(percentages)
        lines += ["", f"Score distribution (mean {mean:.1f}%):", *histogram(percentages)]
    problems = Counter(r.status for r in rows if r.status != "ok")
    if problems:
        lines += ["", "Submissions with problems:"]
        lines += [f"  {count:3d} x {escape_text(status)[:300]}" for status, count in problems.most_common(top)]
    failed = Counter(t.shown_name for r in rows for t in r.tests if not t.passed and t.nodeid and t.graded)
    if failed:
        lines += ["", "Most failed tests:"]
        lines += [f"  {count:3d} x {escape_text(name)}" for name, count in failed.most_common(top)]
    isolation = Counter(r.isolation or "?" for r in rows)
    lines += ["", "Isolation: " + "; ".join(f"{escape_text(name)} ({count})"
                                            for name, count in isolation.most_common())]
    if not_graded:
        names = ", ".join(escape_text(r.student) for r in not_graded[:10])
        more = f" and {len(not_graded) - 10} more" if len(not_graded) > 10 else ""
        lines += ["", f"NOT GRADED: {len(not_graded)} submission(s) ({names}{more}): the grader itself failed, "
                      "not the students' code, and no score was recorded for what it could not run. First reason: "
                      f"{escape_text(not_graded[0].status)[:400]}",
                  "Fix the cause, then rerun the same command: it grades those students again."]
    return "\n".join(lines)
