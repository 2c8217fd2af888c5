"""The speed-ups of private pytest code change no grade, and switch off (``ATTENTION_KIT_NO_SPEEDUPS=1``)."""

from __future__ import annotations

import json
import shutil

import pytest

from grader.curriculum import ROOT
from grader.grading import speedups
from grader.tests.test_grade import EXERCISES, copy_reference, planted_mutant, read_grades


@pytest.mark.parametrize("value, on", [("", True), ("0", True), ("1", False)])
def test_the_switch_turns_every_speedup_off(monkeypatch, value, on):
    monkeypatch.setenv(speedups.OFF_SWITCH, value)
    assert speedups.SPEEDUPS and all(speedups.enabled(name) is on for name in speedups.SPEEDUPS)


def test_a_list_of_names_turns_off_only_those(monkeypatch):
    first, *others = speedups.SPEEDUPS
    monkeypatch.setenv(speedups.OFF_SWITCH, f"{first}, not_a_speedup")
    assert not speedups.enabled(first) and not speedups.enabled("not_a_speedup")
    assert all(speedups.enabled(name) for name in [*others, "another_one"])


def test_grades_are_the_same_with_and_without_the_speedups(tmp_path, monkeypatch):
    """The reference, a broken and an unfinished submission (every test a traceback), with the speed-ups off and
    on: the same rows and feedback."""
    from grader.grading import pool
    from grader.grading.grade import grade_batch

    folder = tmp_path / "subs"
    copy_reference(folder / "correct")
    planted_mutant(folder / "mistake")
    shutil.copytree(ROOT / "exercises", folder / "unfinished", ignore=shutil.ignore_patterns("__pycache__"))
    outcome = {}
    for off in ("1", ""):
        pool.stop_idle()  # new grading processes, which read the switch when they start
        monkeypatch.setenv(speedups.OFF_SWITCH, off)
        out = tmp_path / f"out{off or 0}"
        assert grade_batch(folder, out, jobs=1, hidden=None, exercises=EXERCISES, echo=lambda *a: None) == 0
        outcome[off] = {student: ((out / student / "feedback.md").read_text(encoding="utf-8"),
                                  [(t["name"], t.get("score"), t["status"], t["output"]) for t in  # not durations
                                   json.loads((out / student / "results.json").read_text(encoding="utf-8"))["tests"]])
                        for student in read_grades(out)}
        outcome[off]["grades.csv"] = (out / "grades.csv").read_text(encoding="utf-8")
    pool.stop_idle()
    grades = read_grades(tmp_path / "out0")
    assert float(grades["unfinished"]["score"]) < float(grades["mistake"]["score"]) < float(grades["correct"]["score"])
    assert outcome["1"] == outcome[""]
