"""Score a student: the worker's typed test records become typed test entries, and those a typed row.

Called by: the batch (``grader.grading.grade``), with the
:class:`grader.grading.records.Result` a grading process sent back; what it
makes (:class:`grader.grading.rows.StudentRow`) is what every format writes.

Scoring (``grader.scoring``): an exercise's points (manifest) are split across
its tests in whole sixteenths of a point, so every sum of shares is exact; a
passed test earns its share, a failed one nothing. A hidden test file with its
own ``POINTS`` forms a separate pool for the same exercise; without ``POINTS``
its tests share the exercise's manifest points with the visible ones. An
exercise that cannot be graded (missing module, syntax error, ...) earns 0 and
appears as one failed entry that says why.

Not graded: a test that the grader itself could not run (the worker did not
start, pytest failed, ...) gets no score at all (``score`` None, no ``score``
key in results.json, an empty cell in the gradebook), never a zero; the row's
status says ``not graded: <reason>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from grader import scoring
from grader.course import hidden_visibility
from grader.curriculum import load as load_curriculum
from grader.grading.escaping import escape_text
from grader.grading.records import TestRecord
from grader.grading.rows import NOT_GRADED, StudentRow, TestEntry
from grader.suite import TestFile

MAX_FAILURE_CHARS = 1500
_REGRADE = "\n(the grader failed, not your code: your instructor will grade it again)"


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


def score_tests(
    records: Sequence[TestRecord],
    suite: list[TestFile],
    problems: dict[str, str],
    not_graded: str | None = None,
    details: dict[str, str] | None = None,
) -> list[TestEntry]:
    """The scored test entries of one student.

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
    entries: list[TestEntry] = []
    for exercise in curriculum.exercises:
        if exercise.name not in exercises_with_tests:
            continue
        mine = [r for r in records if r.exercise == exercise.name and r.file in files]
        whole = {"number": f"{exercise.number}", "status": "failed", "exercise": exercise.name,
                 "tags": (exercise.name,), "max_score": max_points(suite, [exercise.name])[exercise.name],
                 "hidden_points": _hidden_share(suite, exercise)}
        if exercise.name not in problems and not mine and not_graded:  # the grader's failure: no score
            entries.append(TestEntry(name=f"{exercise.name}: not graded", **whole, not_graded=not_graded,
                                     output=f"{NOT_GRADED}: {not_graded}{_REGRADE}"))
            continue
        reason = problems.get(exercise.name) or (None if mine else "its tests did not run")
        if reason is not None:
            # The student's code kept it from running (a syntax error, a missing module): 0, not "not graded".
            entries.append(TestEntry(name=f"{exercise.name}: did not run", **whole, score=0.0,
                                     output=f"{exercise.module_file} could not be graded: "
                                            f"{(details or {}).get(exercise.name, reason)}"))
            continue
        for index, record in enumerate(mine, start=1):
            test_file = files[record.file]
            share = next(shares[test_file.pool])
            common = {"name": f"{exercise.name}: {record.nodeid.split('::', 1)[-1]}",
                      "number": f"{exercise.number}.{index}", "max_score": share, "exercise": exercise.name,
                      "tags": (exercise.name,) + (("hidden",) if test_file.hidden else ()),
                      "visibility": hidden_visibility() if test_file.hidden else "visible", "nodeid": record.nodeid}
            if record.internal:
                entries.append(TestEntry(**common, status="failed", output=f"{NOT_GRADED}: {record.internal}{_REGRADE}",
                                         not_graded=record.internal))
                continue
            passed = record.outcome == "passed"
            # The message quotes the student's exceptions and prints: control and bidi characters escaped here,
            # once, for every file that shows it (results.json, which Gradescope decodes and shows, feedback).
            output = "" if passed else escape_text(shorten(record.message or "failed"), keep="\n\t")
            if not passed and record.output:
                printed = escape_text(shorten(record.output, 500), keep="\n\t")
                output += "\n\nOutput printed during the test:\n" + printed
            entries.append(TestEntry(**common, score=share if passed else 0.0, status="passed" if passed else "failed",
                                     output=output, duration=round(record.duration, 4),
                                     revisit="" if passed else record.revisit,
                                     functions=() if passed else record.functions))
    return entries


def _hidden_share(suite: list[TestFile], exercise: Any) -> float:
    """Of a whole exercise's one entry (it did not run), its hidden tests' points (0 if they are shown at once)."""
    if hidden_visibility() == "visible":
        return 0.0
    return max(0.0, max_points(suite, [exercise.name])[exercise.name] - exercise.points)


def entries(tests: Iterable[TestEntry | Mapping[str, Any]]) -> list[TestEntry]:
    """``tests`` as typed entries (a results.json's test dict is read by :meth:`TestEntry.from_json`)."""
    return [t if isinstance(t, TestEntry) else TestEntry.from_json(t) for t in tests]


def exercise_totals(tests: Iterable[TestEntry | Mapping[str, Any]]) -> tuple[dict[str, float | None], dict[str, float]]:
    """Per-exercise score and maximum from scored test entries, in curriculum order.

    An exercise with a test that was not graded has no score (None).
    """
    tests = entries(tests)
    scores: dict[str, float | None] = {}
    maxima: dict[str, float] = {}
    for name in load_curriculum().names:
        mine = [t for t in tests if t.exercise == name]
        if mine:
            graded = all(t.graded for t in mine)
            scores[name] = scoring.total(t.score for t in mine) if graded else None
            maxima[name] = scoring.total(t.max_score for t in mine)
    return scores, maxima


def visible_score_line(tests: Iterable[TestEntry | Mapping[str, Any]]) -> str:
    """The score as a student may see it before grades are published: the hidden tests' points stay out.

    Gradescope shows the ``output`` text at once; hidden tests (visibility
    ``after_published``) are only announced by their total worth.
    """
    tests = entries(tests)
    shown = [t for t in tests if t.visible]
    later = [t for t in tests if not t.visible]
    # An exercise that did not run is one visible entry worth its public and hidden points: the hidden part
    # stays with the hidden tests, so the public maximum is the course's whatever ran.
    held = sum(t.hidden_points for t in shown)
    line = (f"Score: {number(sum(t.score or 0.0 for t in shown))} / "
            f"{number(sum(t.max_score for t in shown) - held)}")
    if later or held:
        worth = sum(t.max_score for t in later) + held
        total = sum(t.max_score for t in tests)
        line += (f" (public tests)\nHidden tests: worth {number(worth)} more points (total {number(total)}); "
                 "their results appear when grades are published.")
    return line


def scored_row(*, student: str, status: str, tests: Iterable[TestEntry | Mapping[str, Any]], seconds: float,
               output: str, refused_shown: Sequence[str] = (), shown_status: str | None = None,
               **bookkeeping: Any) -> StudentRow:
    """One student's typed row, before the term's stage: its score, per exercise, and the text on top.

    ``shown_status``: the status the text on top says (a student reads it before grades are published), where it
    differs from ``status`` (the gradebook's): what the public tests saw only.
    ``bookkeeping``: the grader's own fields of :class:`StudentRow` (``fingerprint``, ``source``,
    ``isolation``, ``isolated``, ``kit_version``, ``refused``, ``calls``, ``timing``). ``refused_shown``: the
    refused requests to the reference that the student may read (said at the end of the text).
    """
    tests = tuple(entries(tests))
    scores, maxima = exercise_totals(tests)
    score = scoring.total(t.score or 0.0 for t in tests)
    summary = f"Status: {escape_text(status if shown_status is None else shown_status)}\n" + visible_score_line(tests)
    if not all(t.score is not None for t in tests if t.visible):
        summary += "\n(not graded yet: the tests the grader could not run have no score)"
    isolation = bookkeeping.get("isolation")
    if isolation and isolation != "not run":
        summary += f"\nIsolation: {escape_text(isolation)}"
    # What the student's code printed: control and bidi characters escaped, and every line indented, so that no
    # printed "Status:" or "Score:" line can pass for the grader's own above it (Gradescope shows this text).
    printed = escape_text(shorten(output, 2000), keep="\n\t")
    text = summary + ("\n\nOutput of your code (indented):\n" + "\n".join(f"    {line}" for line in printed.split("\n"))
                      if output.strip() else "")
    if refused_shown:
        text += ("\n\nRefused requests to the reference (they cannot earn points):\n  "
                 + "\n  ".join(escape_text(reason) for reason in refused_shown))
    return StudentRow(student=student, status=status, score=score, computed=score,
                      max_score=scoring.total(maxima.values()), exercises=scores, computed_exercises=dict(scores),
                      maxima=maxima, tests=tests, seconds=max(1, round(seconds)), output=text, computed_output=text,
                      **{key: tuple(value) if key == "refused" else value for key, value in bookkeeping.items()})


def results_json(*, student: str, status: str, tests: Iterable[TestEntry | Mapping[str, Any]],
                 execution_time: float, output: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """One student's results in Gradescope's ``results.json`` format (the JSON of :func:`scored_row`)."""
    return scored_row(student=student, status=status, tests=tests, seconds=execution_time, output=output,
                      **extra).to_json()
