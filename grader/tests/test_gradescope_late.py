"""The course's [late] on Gradescope: the submission time and the students come from Gradescope's metadata."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from grader import course
from grader.grading import gradescope
from grader.term import LatePolicy

DEADLINE = datetime.fromisoformat("2026-10-01T23:59:00+02:00")


def graded(score: float = 20.0) -> dict:
    """A graded results.json as `grade` writes it for the one Gradescope submission (two exercises of 10)."""
    return {"score": score, "output": "Your code passed every test.",
            "tests": [{"name": "softmax", "score": 10.0, "max_score": 10.0, "status": "passed",
                       "extra_data": {"exercise": "softmax"}},
                      {"name": "attention", "score": score - 10.0, "max_score": 10.0, "status": "passed",
                       "extra_data": {"exercise": "attention"}}],
            "extra_data": {"student": gradescope.STUDENT_ID, "status": "graded", "max_score": 20.0,
                           "exercises": {"softmax": 10.0, "attention": score - 10.0},
                           "max_exercises": {"softmax": 10.0, "attention": 10.0}}}


def metadata(folder: Path, created_at: str, *users: dict) -> Path:
    path = folder / gradescope.METADATA
    path.write_text(json.dumps({"id": 1, "created_at": created_at, "users": list(users),
                                "assignment": {"due_date": "2026-10-01T23:59:00+02:00"}}), encoding="utf-8")
    return path


@pytest.fixture
def policy(monkeypatch):
    """A course with [late] per_day 0.1, max_days 3, and extensions for ada (2 days) and bob (3 days)."""
    monkeypatch.setattr(course, "late_policy", lambda: (LatePolicy(DEADLINE, 0.1, 3),
                                                         {"ada@uni.example": 2.0, "4711": 3.0}))


def test_a_late_submission_loses_a_tenth_per_started_day(policy, tmp_path):
    path = metadata(tmp_path, "2026-10-03T11:00:00+02:00", {"email": "cy@uni.example", "id": 9, "name": "Cy"})
    results = gradescope.with_late_policy(graded(), path)
    assert results["score"] == pytest.approx(16.0)  # 1 day 11 hours late: 2 started days, 20% lost
    assert results["extra_data"]["computed"]["score"] == pytest.approx(20.0)
    assert results["extra_data"]["late"]["days_late"] == 2
    assert "2 started days" in results["output"] and "Score from the tests: 20" in results["output"]


def test_an_extension_is_found_by_email_or_id_and_a_group_gets_the_longest(policy, tmp_path):
    on_time = metadata(tmp_path, "2026-10-03T11:00:00+02:00", {"email": "ada@uni.example", "id": 1, "name": "A"})
    assert gradescope.with_late_policy(graded(), on_time)["score"] == pytest.approx(20.0)
    group = metadata(tmp_path, "2026-10-04T12:00:00+02:00", {"email": "ada@uni.example", "id": 1},
                     {"email": "bob@uni.example", "id": 4711})
    results = gradescope.with_late_policy(graded(), group)
    assert results["extra_data"]["late"]["extension_days"] == 3.0
    assert results["score"] == pytest.approx(20.0)  # 2 days 12 hours late, 3 days' extension: on time


def test_a_name_a_student_chose_picks_no_extension(policy, tmp_path):
    # Gradescope's name is the student's to edit: named "ada" (or "4711"), cy would get ada's (bob's) extension.
    path = metadata(tmp_path, "2026-10-03T11:00:00+02:00", {"email": "cy@uni.example", "id": 9, "name": "ada"},
                    {"email": "dee@uni.example", "id": 10, "name": "4711"})
    results = gradescope.with_late_policy(graded(), path)
    assert results["extra_data"]["late"]["extension_days"] == 0.0 and results["score"] == pytest.approx(16.0)


def test_an_email_at_another_domain_picks_no_extension(monkeypatch, tmp_path):
    # "ada" (a folder id) has 2 days; ada@mail.example is some other student, who shares only the part before the @.
    monkeypatch.setattr(course, "late_policy", lambda: (LatePolicy(DEADLINE, 0.1, 3), {"ada": 2.0}))
    path = metadata(tmp_path, "2026-10-03T11:00:00+02:00", {"email": "ada@mail.example", "id": 9})
    results = gradescope.with_late_policy(graded(), path)
    assert results["extra_data"]["late"]["extension_days"] == 0.0 and results["score"] == pytest.approx(16.0)


def test_without_a_readable_time_the_score_stays_and_the_output_says_why(policy, tmp_path):
    for path in (tmp_path / "absent.json", metadata(tmp_path, "yesterday"), metadata(tmp_path, "2026-10-03T11:00")):
        results = gradescope.with_late_policy(graded(), path)
        assert results["score"] == pytest.approx(20.0)
        assert "No late penalty applied" in results["output"]
        assert str(tmp_path) not in results["output"]  # never a path of the run's private copy (removed after it)


def test_nothing_changes_without_a_policy_or_without_a_score(monkeypatch, policy, tmp_path):
    path = metadata(tmp_path, "2026-10-09T11:00:00+02:00")
    not_graded = {key: value for key, value in graded().items() if key != "score"}
    assert gradescope.with_late_policy(not_graded, path) == not_graded
    monkeypatch.setattr(course, "late_policy", lambda: (None, {}))
    assert gradescope.with_late_policy(graded(), path) == graded()


def test_past_max_days_the_score_is_zero(policy, tmp_path):
    path = metadata(tmp_path, "2026-10-06T00:00:01+02:00", {"email": "cy@uni.example"})
    results = gradescope.with_late_policy(graded(), path)
    assert results["score"] == 0.0 and results["extra_data"]["late"]["fraction"] == 1.0


def test_run_autograder_applies_it(policy, tmp_path):
    # `grade` itself is stood in for by a script writing the results.json it would write: this checks the wiring.
    # It also rewrites Gradescope's metadata as the student's code might: the time read before grading counts.
    fake = tmp_path / "fake-python"
    on_time = json.dumps({"created_at": "2026-10-01T12:00:00+02:00", "users": []})
    fake.write_text(f"#!/bin/sh\necho '{on_time}' > {tmp_path / 'autograder' / gradescope.METADATA}\n"
                    "while [ \"$1\" != --out ]; do shift; done\nmkdir -p \"$2/submission\"\n"
                    f"cat > \"$2/submission/results.json\" <<'END'\n{json.dumps(graded())}\nEND\n", encoding="utf-8")
    fake.chmod(0o755)
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "submission" / "softmax.py").write_text("", encoding="utf-8")
    metadata(root, "2026-10-03T11:00:00+02:00", {"email": "cy@uni.example"})
    gradescope.autograde(root, python=str(fake))
    written = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert written["score"] == pytest.approx(16.0) and written["extra_data"]["late"]["days_late"] == 2
