"""Gradescope's text of a submission with an exercise that could not run gives the course's public maximum.

Found on the final code: the Gradescope bundle of a course of 180 public + 36 hidden points, on a submission
whose masks.py had a syntax error, showed "Score: 160.6875 / 182 (public tests)" and "Hidden tests: worth 34
more points": the exercise's one "not graded" entry (worth its public and hidden points, 12) counted as public.
"""

from __future__ import annotations

import pytest

from grader.curriculum import load
from grader.grading import report
from grader.grading.records import TestRecord
from grader.student.notebook import collect_tests
from grader.suite import HIDDEN_DIR, graded_suite


@pytest.mark.parametrize("not_graded", [None, "the worker died"])
def test_an_exercise_that_did_not_run_keeps_its_hidden_points_hidden(not_graded) -> None:
    curriculum = load()
    files, _ = graded_suite(HIDDEN_DIR, curriculum.names)
    records = [TestRecord(nodeid=f"{f.path}::{name}", file=f.path, exercise=f.exercise, outcome="passed")
               for f in files if f.exercise != "masks" for name in collect_tests(f.path)]
    problems = {} if not_graded else {"masks": "syntax error in masks.py line 53"}
    tests = report.score_tests(records, files, problems, not_graded)
    public = sum(e.points for e in curriculum.exercises)
    hidden = sum(e.hidden_points for e in curriculum.exercises)
    masks = curriculum.exercise("masks")
    assert masks.hidden_points > 0  # else this test checks nothing
    line = report.visible_score_line(tests)
    assert line.startswith(f"Score: {report.number(public - masks.points)} / {report.number(public)} (public tests)")
    assert f"worth {report.number(hidden)} more points (total {report.number(public + hidden)})" in line
    # Gradescope's own sums are unchanged: the entry is still worth the exercise's public and hidden points.
    assert sum(t.max_score for t in tests) == public + hidden
    # "not graded" is the grader's failure only (no score); the student's code that kept masks from running is 0.
    whole = next(t for t in tests if t.exercise == "masks")
    assert (whole.name, whole.score) == (("masks: not graded", None) if not_graded else ("masks: did not run", 0.0))


def test_with_hidden_tests_shown_at_once_the_whole_exercise_stays_public(monkeypatch) -> None:
    # A course whose [hidden] visibility is "visible" shows hidden tests at once: nothing is announced apart.
    from grader.grading import scored

    monkeypatch.setattr(scored, "hidden_visibility", lambda: "visible")
    curriculum = load()
    files, _ = graded_suite(HIDDEN_DIR, curriculum.names)
    records = [TestRecord(nodeid=f"{f.path}::{name}", file=f.path, exercise=f.exercise, outcome="passed")
               for f in files if f.exercise != "masks" for name in collect_tests(f.path)]
    tests = report.score_tests(records, files, {"masks": "syntax error in masks.py line 53"})
    total = sum(e.points + e.hidden_points for e in curriculum.exercises)
    masks = curriculum.exercise("masks")
    line = report.visible_score_line(tests)
    assert line == f"Score: {report.number(total - masks.points - masks.hidden_points)} / {report.number(total)}"
