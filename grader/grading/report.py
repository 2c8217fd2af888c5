"""Turn test outcomes into scores, and scores into the grader's files.

Scoring (``grader.scoring``): an exercise's points (manifest) are split across
its tests in whole sixteenths of a point, so every sum of shares is exact; a
passed test earns its share, a failed one nothing. A hidden test
file with its own ``POINTS`` forms a separate pool for the same exercise;
without ``POINTS`` its tests share the exercise's manifest points with the
visible ones. An exercise that cannot be graded (missing module, syntax
error, ...) earns 0 and appears as one failed entry that says why.

Files, each written atomically (a temp file, then ``os.replace``):

- ``OUT/<student>/results.json``: Gradescope's autograder format
  (https://gradescope-autograders.readthedocs.io/en/latest/specs/), with the
  grader's own bookkeeping in ``extra_data``;
- ``OUT/<student>/feedback.md``: what a student reads;
- ``OUT/grades.csv``: one row per student, rebuilt from the results.json
  files only, so an interrupted run that is resumed gives the same gradebook.

Not graded: a test that the grader itself could not run (the worker did not
start, pytest failed, ...) gets no score at all (no ``score`` key in its
entry, an empty cell in the gradebook), never a zero; the row's status says
``not graded: <reason>``. Safe output: student ids and statuses are written
with control and bidirectional characters escaped (:func:`escape_text`), and a
CSV cell that a spreadsheet would read as a formula is neutralised
(:func:`csv_cell`, the OWASP rule).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from grader import scoring
from grader.course import hidden_visibility
from grader.curriculum import load as load_curriculum
from grader.grading.escaping import csv_cell, escape_text, md_text  # noqa: F401 - csv_cell: its callers import it here
from grader.grading.records import TestRecord
from grader.grading.rows import StudentRow
from grader.suite import TestFile

# Bump when the layout of results.json changes: older results are then regraded.
RESULTS_FORMAT = 2
NOT_GRADED = "not graded"
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


def is_graded(results: dict[str, Any]) -> bool:
    """Whether every test of ``results`` has a score (no internal failure of the grader)."""
    return not str(results.get("extra_data", {}).get("status", "")).startswith(NOT_GRADED)


# The mode of the files the grader writes, before the umask: the instructor's user and group may read
# (and write) them, other users not. A umask of 022 gives rw-r-----, 002 rw-rw----, 077 rw-------.
FILE_MODE = 0o660
MAX_FAILURE_CHARS = 1500
# Per exercise, feedback.md shows this many failures in full and lists the rest by name.
MAX_FAILURES_SHOWN = 4


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never half.

    The file gets :data:`FILE_MODE` less the process's umask, the gradebook and every
    student's ``results.json`` and ``feedback.md`` alike: readable by the instructor's
    user and group, never by other users (the workers' users among them).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:  # mkstemp's own loop, with the mode of a shared file instead of its 0600
        temporary = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                             FILE_MODE)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def number(value: float | None) -> str:
    """A score for people and CSV: ``10``, ``9.375`` (:func:`grader.scoring.number`); empty for no score."""
    return "" if value is None else scoring.number(value)


def shorten(text: str, limit: int = MAX_FAILURE_CHARS) -> str:
    """Keep the start of a long failure text (the first failure is the useful one)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n... ({len(text) - limit} more characters)"


def max_points(suite: Iterable[TestFile], graded: Iterable[str]) -> dict[str, float]:
    """The points each exercise is worth: manifest points plus hidden pools with ``POINTS``."""
    curriculum = load_curriculum()
    graded = set(graded)
    totals = {name: curriculum.exercise(name).points for name in curriculum.names if name in graded}
    for test_file in suite:
        if test_file.points is not None and test_file.exercise in totals:
            totals[test_file.exercise] += test_file.points
    return totals


def hidden_points(suite: Iterable[TestFile], exercise: str) -> float:
    """The points of ``exercise``'s hidden test files that are announced apart until published (0 if shown at once)."""
    if hidden_visibility() == "visible":
        return 0.0
    return scoring.total(f.points for f in suite if f.hidden and f.exercise == exercise and f.points is not None)


def score_tests(
    records: Sequence[TestRecord],
    suite: list[TestFile],
    problems: dict[str, str],
    not_graded: str | None = None,
    details: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Gradescope test entries, with scores, for one student.

    Parameters
    ----------
    records : sequence of TestRecord
        One per test that ran (``grader.grading.records.TestRecord``).
    suite : list of TestFile
        The graded suite (defines the pools and points).
    problems : dict
        Exercise -> why it was not run (static checks); it earns 0.
    not_graded : str, optional
        Why the grader could not run the tests (its own failure); exercises
        without records get no score. A record with ``internal`` set (the
        grader failed during that test) gets no score either.
    details : dict, optional
        Exercise -> a longer explanation of its problem, shown instead of the short one.
    """
    curriculum = load_curriculum()
    files = {test_file.path: test_file for test_file in suite}
    exercises_with_tests = [name for name in curriculum.names if any(f.exercise == name for f in suite)]
    pools: dict[str, float] = {name: curriculum.exercise(name).points for name in exercises_with_tests}
    for test_file in suite:
        if test_file.points is not None:
            pools[test_file.pool] = test_file.points
    sizes = Counter(files[record.file].pool for record in records if record.file in files)
    # Each pool's shares in the order its tests ran (file order), taken one by one below.
    shares = {pool: iter(scoring.shares(pools[pool], size)) for pool, size in sizes.items()}
    entries: list[dict[str, Any]] = []
    for exercise in curriculum.exercises:
        if exercise.name not in exercises_with_tests:
            continue
        mine = [r for r in records if r.exercise == exercise.name and r.file in files]
        if exercise.name not in problems and not mine and not_graded:
            entries.append({
                "name": f"{exercise.name}: not graded",
                "number": f"{exercise.number}",
                "max_score": max_points(suite, [exercise.name])[exercise.name],
                "status": "failed",
                "output": f"{NOT_GRADED}: {not_graded}\n(the grader failed, not your code: your instructor will "
                          "grade it again)",
                "tags": [exercise.name],
                "visibility": "visible",
                "extra_data": {"exercise": exercise.name, "nodeid": None, "duration": 0.0,
                               "not_graded": not_graded, "hidden_max": hidden_points(suite, exercise.name)},
            })
            continue
        reason = problems.get(exercise.name) or (None if mine else "its tests did not run")
        if reason is not None:
            worth = max_points(suite, [exercise.name])[exercise.name]
            entries.append({
                "name": f"{exercise.name}: not graded",
                "number": f"{exercise.number}",
                "score": 0.0,
                "max_score": worth,
                "status": "failed",
                "output": f"{exercise.module_file} could not be graded: {(details or {}).get(exercise.name, reason)}",
                "tags": [exercise.name],
                "visibility": "visible",
                "extra_data": {"exercise": exercise.name, "nodeid": None, "duration": 0.0,
                               "hidden_max": hidden_points(suite, exercise.name)},
            })
            continue
        for index, record in enumerate(mine, start=1):
            test_file = files[record.file]
            share = next(shares[test_file.pool])
            if record.internal:
                entries.append({
                    "name": f"{exercise.name}: {record.nodeid.split('::', 1)[-1]}",
                    "number": f"{exercise.number}.{index}",
                    "max_score": share,
                    "status": "failed",
                    "output": f"{NOT_GRADED}: {record.internal}\n(the grader failed, not your code: your "
                              "instructor will grade it again)",
                    "tags": [exercise.name] + (["hidden"] if test_file.hidden else []),
                    "visibility": hidden_visibility() if test_file.hidden else "visible",
                    "extra_data": {"exercise": exercise.name, "nodeid": record.nodeid, "duration": 0.0,
                                   "not_graded": record.internal},
                })
                continue
            passed = record.outcome == "passed"
            output = "" if passed else shorten(record.message or "failed")
            if not passed and record.output:
                output += "\n\nOutput printed during the test:\n" + shorten(record.output, 500)
            entries.append({
                "name": f"{exercise.name}: {record.nodeid.split('::', 1)[-1]}",
                "number": f"{exercise.number}.{index}",
                "score": share if passed else 0.0,
                "max_score": share,
                "status": "passed" if passed else "failed",
                "output": output,
                "tags": [exercise.name] + (["hidden"] if test_file.hidden else []),
                "visibility": hidden_visibility() if test_file.hidden else "visible",
                "extra_data": {
                    "exercise": exercise.name,
                    "nodeid": record.nodeid,
                    "duration": round(record.duration, 4),
                },
            })
    return entries


def exercise_totals(tests: list[dict[str, Any]]) -> tuple[dict[str, float | None], dict[str, float]]:
    """Per-exercise score and maximum from scored test entries, in curriculum order.

    An exercise with a test that was not graded has no score (None).
    """
    scores: dict[str, float | None] = {}
    maxima: dict[str, float] = {}
    for name in load_curriculum().names:
        mine = [t for t in tests if t["extra_data"]["exercise"] == name]
        if mine:
            graded = all("score" in t for t in mine)
            scores[name] = scoring.total(t["score"] for t in mine) if graded else None
            maxima[name] = scoring.total(t["max_score"] for t in mine)
    return scores, maxima


def visible_score_line(tests: list[dict[str, Any]]) -> str:
    """The score as a student may see it before grades are published: the hidden tests' points stay out.

    Gradescope shows the ``output`` text at once; hidden tests (visibility
    ``after_published``) are only announced by their total worth.
    """
    shown = [t for t in tests if t.get("visibility", "visible") == "visible"]
    later = [t for t in tests if t.get("visibility", "visible") != "visible"]
    # An exercise that could not be graded is one visible row worth its public and hidden points: its hidden part
    # is announced with the hidden tests, so the public maximum is the same for every student.
    moved = sum(t.get("extra_data", {}).get("hidden_max", 0.0) for t in shown)
    line = (f"Score: {number(sum(t.get('score', 0.0) for t in shown))} / "
            f"{number(sum(t['max_score'] for t in shown) - moved)}")
    if later or moved:
        worth = sum(t["max_score"] for t in later) + moved
        total = sum(t["max_score"] for t in tests)
        line += (f" (public tests)\nHidden tests: worth {number(worth)} more points (total {number(total)}); "
                 "their results appear when grades are published.")
    return line


def results_json(
    *,
    student: str,
    status: str,
    tests: list[dict[str, Any]],
    execution_time: float,
    output: str,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """One student's results in Gradescope's ``results.json`` format."""
    scores, maxima = exercise_totals(tests)
    scored = scoring.total(t.get("score", 0.0) for t in tests)
    summary = f"Status: {escape_text(status)}\n" + visible_score_line(tests)
    if not all(v is not None for v in scores.values()):
        summary += "\n(not graded yet: the tests the grader could not run have no score)"
    if extra.get("isolation") and extra["isolation"] != "not run":
        summary += f"\nIsolation: {escape_text(extra['isolation'])}"
    return {
        "score": scored,
        "execution_time": max(1, round(execution_time)),
        "output": summary + (f"\n\nOutput of your code:\n{shorten(output, 2000)}" if output.strip() else ""),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "student": student,
            "status": status,
            "exercises": scores,
            "max_exercises": maxima,
            "max_score": scoring.total(maxima.values()),
            "format": RESULTS_FORMAT,
            **extra,
        },
    }


def feedback_markdown(results: StudentRow | dict[str, Any], published: bool = False) -> str:
    """A student's feedback, from their typed row (or a results.json): per exercise, what passed, failed, why.

    Before grades are published (``published`` False, as ``attention-kit grade`` writes it) a failed
    hidden test is only counted; once they are (``attention-kit export GRADES --published``) it is
    shown like a public one, by its name and message (never a line of its source: see grade.py).
    """
    curriculum = load_curriculum()
    row = results if isinstance(results, StudentRow) else StudentRow.from_results(results)
    if row.graded:
        score_line = f"Score: **{number(row.score)} / {number(row.max_score)}**"
    else:  # the grader could not run every test: no score yet, only what the tests that ran earned
        score_line = (f"Score: **not graded yet** (the grader could not run every test; the tests it ran earned "
                      f"{number(row.computed)} of their points). Your instructor reruns the grading.")
    lines = [
        f"# Feedback: {md_text(curriculum.title)}",
        "",
        score_line,
    ]
    lines += term_lines(row)
    if row.status != "ok":
        lines += ["", f"Note: {md_text(row.status)}"]
    if not row.isolated:
        lines += ["", f"Note: this submission was graded WITHOUT isolation ({md_text(row.isolation)})."]
    for exercise in curriculum.exercises:
        tests = [t for t in row.tests if t["extra_data"]["exercise"] == exercise.name]
        if not tests:
            continue
        # Hidden tests count, but their names and messages wait until grades are published.
        visible = [t for t in tests if published or t["visibility"] == "visible"]
        passed = sum(t["status"] == "passed" for t in tests)
        points = row.exercises.get(exercise.name, 0)
        worth = number(row.maxima.get(exercise.name, 0))
        lines += [
            "",
            f"## {exercise.number}. {md_text(exercise.title)} ({md_text(exercise.module_file)})",
            "",
            (f"{number(points)} / {worth} points" if points is not None else f"Not graded yet (worth {worth} points)")
            + f"; {passed} of {len(tests)} tests passed.",
        ]
        failed = [t for t in visible if t["status"] == "failed"]
        # The first failures are the ones to read: they test the most basic properties.
        for test in failed[:MAX_FAILURES_SHOWN]:
            text = escape_text(test["output"] or "failed", keep="\n\t").replace("```", "` ` `")
            hidden = " (hidden test)" if test["visibility"] != "visible" else ""
            lines += ["", f"### {escape_text(test['name'])}{hidden}", "", "```text", text, "```"]
        if len(failed) > MAX_FAILURES_SHOWN:
            lines += ["", f"Also failed ({len(failed) - MAX_FAILURES_SHOWN} more; fix the ones above first):", ""]
            lines += [f"- {escape_text(test['name'])}" for test in failed[MAX_FAILURES_SHOWN:]]
        hidden_failed = 0 if published else sum(t["status"] == "failed" for t in tests if t["visibility"] != "visible")
        if hidden_failed:
            lines += ["", f"{hidden_failed} further test(s) of this exercise failed (hidden tests: their names "
                      "and messages appear when grades are published)."]
        if failed or hidden_failed:
            if exercise.hints:
                lines += ["", f"Hint: {exercise.hints[0]}"]
    return "\n".join(lines) + "\n"


def term_lines(row: StudentRow) -> list[str]:
    """feedback.md's lines on manual points (each with its reason) and the late penalty ([] when neither)."""
    from grader.grading.term_stage import late_line

    late = row.late if row.late is not None and row.late.days_late else None
    if not row.adjustments and late is None:
        return []
    lines = ["", f"Score from the tests: {number(row.computed)}; after the changes below: {number(row.score)}", ""]
    for item in row.adjustments:
        where = f" ({md_text(item.exercise)})" if item.exercise else ""
        lines.append(f"- {'+' if item.points >= 0 else ''}{number(item.points)} points{where}: {md_text(item.reason)}")
    if late is not None:
        lines.append(f"- {md_text(late_line(late))}")
    return lines


def write_student(out: Path, results: dict[str, Any]) -> None:
    """Write a student's feedback.md, then results.json (its presence marks the student done)."""
    folder = out / results["extra_data"]["student"]
    atomic_write(folder / "feedback.md", feedback_markdown(results))
    atomic_write(folder / "results.json", results_text(results))


def results_text(results: dict[str, Any]) -> str:
    """The text of a results.json: a line per top-level key and per test.

    As readable as an indented dump for a person skimming it, and written by
    json's C encoder (an indented dump goes through its pure-Python one, which
    cost the grader a twentieth of a second per student).
    """
    parts = []
    for key, value in results.items():
        if key == "tests" and isinstance(value, list) and value:
            body = "[\n" + ",\n".join("  " + json.dumps(test) for test in value) + "\n ]"
        else:
            body = json.dumps(value)
        parts.append(f" {json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


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


def summary(rows: list[dict[str, Any]], *, graded: int, reused: int, seconds: float, top: int = 5) -> str:
    """The terminal summary: counts, distribution, most failed tests, isolation."""
    not_graded = [r for r in rows if not is_graded(r)]  # never kept from a last run: all of this one
    lines = [
        f"{len(rows)} submission(s): {graded - len(not_graded)} graded, "
        + (f"{len(not_graded)} NOT graded, " if not_graded else "")
        + f"{reused} unchanged since the last run ({seconds:.1f} s)",
    ]
    if not rows:
        return "\n".join(lines)
    graded_rows = [r for r in rows if is_graded(r)]
    percentages = [100 * r["score"] / r["extra_data"]["max_score"] if r["extra_data"]["max_score"] else 0.0
                   for r in graded_rows]
    if percentages:
        mean = sum(percentages) / len(percentages)
        lines += ["", f"Score distribution (mean {mean:.1f}%):", *histogram(percentages)]
    problems = Counter(r["extra_data"]["status"] for r in rows if r["extra_data"]["status"] != "ok")
    if problems:
        lines += ["", "Submissions with problems:"]
        lines += [f"  {count:3d} x {escape_text(status)[:300]}" for status, count in problems.most_common(top)]
    failed = Counter(t["name"] for r in rows for t in r["tests"]
                     if t["status"] == "failed" and t["extra_data"].get("nodeid") and "score" in t)
    if failed:
        lines += ["", "Most failed tests:"]
        lines += [f"  {count:3d} x {escape_text(name)}" for name, count in failed.most_common(top)]
    isolation = Counter(r["extra_data"].get("isolation", "?") for r in rows)
    lines += ["", "Isolation: " + "; ".join(f"{escape_text(name)} ({count})"
                                            for name, count in isolation.most_common())]
    if not_graded:
        names = ", ".join(escape_text(r["extra_data"]["student"]) for r in not_graded[:10])
        more = f" and {len(not_graded) - 10} more" if len(not_graded) > 10 else ""
        lines += ["", f"NOT GRADED: {len(not_graded)} submission(s) ({names}{more}): the grader itself failed, "
                      "not the students' code, and no score was recorded for what it could not run. First reason: "
                      f"{escape_text(not_graded[0]['extra_data']['status'])[:400]}",
                  "Fix the cause, then rerun the same command: it grades those students again."]
    return "\n".join(lines)
