"""``OUT/<student>/feedback.md``: what a student reads: per exercise, what passed, what failed and why.

Written from the typed row (:class:`grader.grading.rows.StudentRow`) by every batch (as each student finishes,
then again after the term's stage, when its text changed) and by ``attention-kit export --published``, which
shows the failed hidden tests by name and message (never a line of their source).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader.curriculum import load as load_curriculum
from grader.grading.escaping import escape_text, md_text
from grader.grading.files import write_changed
from grader.grading.formats import Context
from grader.grading.rows import StudentRow, typed
from grader.grading.scored import number

NAME = "feedback.md"
ORDER = 0
PER_STUDENT = True  # each student's own file, from that student's row alone
# Per exercise, feedback.md shows this many failures in full and lists the rest by name.
MAX_FAILURES_SHOWN = 4


def feedback_markdown(row: StudentRow | Mapping[str, Any], published: bool = False) -> str:
    """A student's feedback, from their typed row: per exercise, what passed, what failed, why.

    A results.json dict is read as a row (:meth:`grader.grading.rows.StudentRow.from_json`).

    Before grades are published (``published`` False, as ``attention-kit grade`` writes it) a failed
    hidden test is only counted; once they are (``attention-kit export GRADES --published``) it is
    shown like a public one, by its name and message (never a line of its source: see grade.py), unless
    the course's ``[hidden] visibility`` is ``hidden``: then it is only counted, and its idea to revisit
    given, before and after.
    """
    curriculum = load_curriculum()
    (row,) = typed([row])
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
        tests = [t for t in row.tests if t.exercise == exercise.name]
        if not tests:
            continue
        # Hidden tests count, but their names and messages wait until grades are published.
        # A course whose hidden tests' visibility is "hidden" never shows them, published or not.
        visible = [t for t in tests if t.visible or (published and t.visibility != "hidden")]
        passed = sum(t.passed for t in tests)
        points = row.exercises.get(exercise.name, 0)
        worth = number(row.maxima.get(exercise.name, 0))
        # One entry for the whole exercise: its tests did not run (nothing to count, no step to hint at: a file
        # that could not be read was told "0 of 1 tests passed" and the hint on the max trick, a README walk).
        whole = len(tests) == 1 and tests[0].nodeid is None
        lines += [
            "",
            f"## {exercise.number}. {md_text(exercise.title)} ({md_text(exercise.module_file)})",
            "",
            (f"{number(points)} / {worth} points" if points is not None else f"Not graded yet (worth {worth} points)")
            + ("; its tests did not run." if whole else f"; {passed} of {len(tests)} tests passed."),
        ]
        failed = [t for t in visible if not t.passed]
        # The first failures are the ones to read: they test the most basic properties.
        for test in failed[:MAX_FAILURES_SHOWN]:
            text = escape_text(test.output or "failed", keep="\n\t").replace("```", "` ` `")
            hidden = " (hidden test)" if not test.visible else ""
            lines += ["", f"### {escape_text(test.name)}{hidden}", "", "```text", text, "```"]
        if len(failed) > MAX_FAILURES_SHOWN:
            lines += ["", f"Also failed ({len(failed) - MAX_FAILURES_SHOWN} more; fix the ones above first):", ""]
            lines += [f"- {escape_text(test.name)}" for test in failed[MAX_FAILURES_SHOWN:]]
        unshown = [t for t in tests if not t.passed and t not in visible]
        if unshown:
            shown_later = ("their names and messages appear when grades are published"
                           if any(t.visibility != "hidden" for t in unshown)
                           else "this course shows neither their names nor their messages")
            lines += ["", f"{len(unshown)} further test(s) of this exercise failed (hidden tests: {shown_later})."]
        about = set(exercise.hint_functions)
        if failed and exercise.hints and not whole and (not about or any(about & set(t.functions) for t in failed)):
            # The hint is about one step: given where a failure is about its functions (``hint_functions``), and
            # it says which step (a dropout's failure was given the hint on the order of residuals).
            step = f" (on {md_text(exercise.hint_step)})" if exercise.hint_step else ""
            lines += ["", f"Hint{step}: {exercise.hints[0]}"]
        elif unshown:
            # Only hidden tests failed: the exercise's hint is about one step, which may not be the one they
            # found wrong (a wrong lead is worse than none); each failure's own idea to revisit says which.
            ideas = list(dict.fromkeys(t.revisit.strip() for t in unshown if t.revisit.strip()))
            lines += ["", "What the failed hidden test(s) ask you to revisit:", ""]
            lines += [f"- {md_text(idea)}" for idea in ideas] or [
                "- (no idea recorded: reread the docstrings' promises that the public tests do not try, such as "
                "edge cases and large inputs)"]
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


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write each row's feedback.md (``context.published``: with the hidden tests), when its text changed."""
    written = []
    for row in rows:
        if row.stored:  # a row the grader could not write (kept in memory for the gradebook) has no folder
            path = out / row.student / NAME
            if write_changed(path, feedback_markdown(row, published=context.published)):
                written.append(path)
    return written
