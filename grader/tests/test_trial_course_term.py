"""An instructor's term in a course folder, end to end: what the trial of issue 36 found wrong.

Each test runs the real entry path (no setting stood in for): the Gradescope runner reads the bundled
course's ``[late]``, hidden tests of different exercises that share a test name score apart, the term's
input files kept in the output folder are not readable by other users, and a release of a course with an
exercise of its own never asks the instructor to edit the kit.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from grader import course
from grader.curriculum import load
from grader.grading import gradescope, term_stage

LATE = ('[late]\ndeadline = "2026-10-01T23:59:00+02:00"\nper_day = 0.25\nmax_days = 3\n'
        '[extensions]\nada = 1\n')


@pytest.fixture(autouse=True)
def no_course(monkeypatch):
    """No course in force before, none left behind (``activate`` sets the variable)."""
    monkeypatch.setenv(course.COURSE_ENV, "")
    monkeypatch.delenv(course.COURSE_ENV)
    load.cache_clear()
    course.read.cache_clear()
    yield
    load.cache_clear()
    course.read.cache_clear()


def graded_results(score: float = 20.0) -> dict:
    """The results.json `grade` writes for the one Gradescope submission (two exercises of 10 points)."""
    return {"score": score, "output": "Your code passed every test.",
            "tests": [{"name": "softmax", "score": 10.0, "max_score": 10.0, "status": "passed",
                       "extra_data": {"exercise": "softmax"}},
                      {"name": "attention", "score": score - 10.0, "max_score": 10.0, "status": "passed",
                       "extra_data": {"exercise": "attention"}}],
            "extra_data": {"student": gradescope.STUDENT_ID, "status": "graded", "max_score": 20.0,
                           "exercises": {"softmax": 10.0, "attention": score - 10.0},
                           "max_exercises": {"softmax": 10.0, "attention": 10.0}}}


def test_the_gradescope_runner_applies_the_bundled_courses_late_policy(tmp_path, monkeypatch):
    # The bundle's kit/ holds the course's course.toml; run_autograder starts the runner there with no course
    # variable (Gradescope's container). `grade` is stood in for by a script writing its results.json.
    kit = tmp_path / "source" / "kit"
    kit.mkdir(parents=True)
    (kit / course.COURSE_FILE).write_text(LATE, encoding="utf-8")
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != --out ]; do shift; done\nmkdir -p \"$2/submission\"\n"
                    f"cat > \"$2/submission/results.json\" <<'END'\n{json.dumps(graded_results())}\nEND\n",
                    encoding="utf-8")
    fake.chmod(0o755)
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "submission" / "softmax.py").write_text("", encoding="utf-8")
    (root / gradescope.METADATA).write_text(json.dumps(
        {"created_at": "2026-10-03T11:00:00+02:00", "users": [{"email": "cy@uni.example", "id": 9}]}),
        encoding="utf-8")
    monkeypatch.chdir(kit)  # run_autograder's `cd "$KIT"`
    gradescope.autograde(root, kit=kit, python=str(fake))
    written = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    # Two started days late at 0.25 a day: half of 20 is lost.
    assert written["score"] == pytest.approx(10.0), written.get("output")
    assert written["extra_data"]["late"]["days_late"] == 2


def test_the_kept_term_files_are_not_readable_by_other_users(tmp_path):
    previous = os.umask(0o022)
    try:
        given = tmp_path / "given"
        given.mkdir()
        (given / "times.csv").write_text("id,submitted_at\nada,2026-10-01T12:00:00Z\n", encoding="utf-8")
        (given / "adjustments.csv").write_text("id,exercise,points,reason\nada,,1,A rubric item\n",
                                               encoding="utf-8")
        (given / "times.csv").chmod(0o644)
        (given / "adjustments.csv").chmod(0o644)
        out = tmp_path / "out"
        inputs = term_stage.load_inputs(out, given / "times.csv", given / "adjustments.csv", ("softmax",))
    finally:
        os.umask(previous)
    assert "ada" in inputs.times and inputs.adjustments["ada"][0].reason == "A rubric item"
    for name in (term_stage.TIMES_FILE, term_stage.ADJUSTMENTS_FILE):
        mode = stat.S_IMODE((out / name).stat().st_mode)
        assert mode & 0o007 == 0, f"OUT/{name} is readable by other users ({oct(mode)}), as no gradebook file is"
        assert (out / name).read_text(encoding="utf-8") == (given / name).read_text(encoding="utf-8")

