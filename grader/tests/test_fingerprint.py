"""The fingerprint that decides whether a finished student is regraded covers everything that can change a grade."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from grader.curriculum import PACKAGE
from grader.grading import fingerprint
from grader.grading.records import Job, SuiteFile, grade_deciding_fields
from grader.tests.test_grade import copy_reference, read_grades

SUITE = (SuiteFile("/kit/tests/test_01_softmax.py", "softmax"),
         SuiteFile("/kit/grader/hidden_tests/test_hidden_softmax.py", "softmax", hidden=True, points=2.0))
TEMPLATE = Job(student="", folder="", files=(), suite=SUITE, fair=True, policy="require", budget=60.0, part="all")


def test_every_job_field_says_whether_it_decides_a_grade():
    for field in dataclasses.fields(Job):
        assert field.metadata.get("grade") in (True, False), f"Job.{field.name} does not say whether it decides a grade"
        assert field.metadata.get("why"), f"Job.{field.name} does not say why"


def test_the_options_that_decide_a_grade_are_the_hashed_fields():
    # Written out here: an option that changes a grade must be in this list (and so in the fingerprint).
    assert set(grade_deciding_fields()) == {"suite", "fair", "policy", "budget", "call_budget", "memory", "course",
                                            "part", "draw_key"}


@pytest.mark.parametrize("change", [
    {"budget": 0.2},
    {"call_budget": 1.0},
    {"memory": 256},
    {"course": "[points]\nsoftmax = 8\n"},
    {"fair": False},
    {"policy": "container"},
    {"part": "1"},
    {"draw_key": "ab" * 32},  # the grader's key: other inputs drawn for every submission
    {"suite": SUITE[:1]},  # the selection: --exercise, --hidden
    {"suite": (SUITE[0], dataclasses.replace(SUITE[1], points=5.0))},  # a hidden file's POINTS
    {"suite": (SUITE[0], dataclasses.replace(SUITE[1], exercise="masks"))},
], ids=lambda change: next(iter(change)))
def test_changing_a_grade_deciding_field_changes_the_fingerprint(change):
    assert fingerprint.suite_fingerprint(dataclasses.replace(TEMPLATE, **change)) != \
        fingerprint.suite_fingerprint(TEMPLATE)


@pytest.mark.parametrize("change", [
    {"student": "ada"}, {"folder": "/tmp/ada"}, {"files": ("x.py",)}, {"scratch": "/tmp/run"},
    {"kit_check": True}, {"kit_failure": "broken"},
], ids=lambda change: next(iter(change)))
def test_what_does_not_decide_a_grade_leaves_the_fingerprint(change):
    assert fingerprint.suite_fingerprint(dataclasses.replace(TEMPLATE, **change)) == \
        fingerprint.suite_fingerprint(TEMPLATE)


def test_every_file_of_the_sandbox_is_fingerprinted():
    hashed = set(fingerprint.fingerprinted_files(TEMPLATE))
    sandbox = [p for p in (PACKAGE / "sandbox").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sandbox and not [p for p in sandbox if p not in hashed]
    for name in ("limits.py", "load.py", "plugin.py", "protocol.py", "server.py"):  # the ones it once left out
        assert PACKAGE / "sandbox" / name in hashed or not (PACKAGE / "sandbox" / name).exists()


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package's fingerprinted folders, which a test may change."""
    copy = tmp_path / "grader"
    shutil.copytree(PACKAGE / "sandbox", copy / "sandbox", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "grading").mkdir()
    for name in fingerprint.GRADING_MODULES:
        shutil.copyfile(PACKAGE / "grading" / name, copy / "grading" / name)
    shutil.copyfile(PACKAGE / "curriculum.toml", copy / "curriculum.toml")
    monkeypatch.setattr(fingerprint, "PACKAGE", copy)
    return copy


@pytest.mark.parametrize("edit", ["new file", "changed file", "changed grading module"])
def test_a_change_in_the_sandbox_or_the_grading_modules_changes_the_fingerprint(package_copy: Path, edit):
    before = fingerprint.suite_fingerprint(TEMPLATE)
    if edit == "new file":
        (package_copy / "sandbox" / "policy.toml").write_text("calls = 5\n", encoding="utf-8")
    elif edit == "changed file":
        limits = package_copy / "sandbox" / "limits.py"
        limits.write_text(limits.read_text(encoding="utf-8") + "\n# another limit\n", encoding="utf-8")
    else:
        recorder = package_copy / "grading" / "recorder.py"
        recorder.write_text(recorder.read_text(encoding="utf-8") + "\n# another message\n", encoding="utf-8")
    assert fingerprint.suite_fingerprint(TEMPLATE) != before


def test_a_rerun_with_another_budget_regrades(tmp_path, capsys):
    """The issue's bug: graded at a large budget, rerun into the same folder at a tiny one, it said "kept"."""
    from grader.grading.grade import grade_batch

    slow = copy_reference(tmp_path / "subs" / "slow")  # correct, but every softmax call takes 0.1 s
    source = (slow / "softmax.py").read_text(encoding="utf-8")
    (slow / "softmax.py").write_text(source.replace("    x = as_float_array(\"x\", x)\n",
                                                    "    import time\n    time.sleep(0.1)\n"
                                                    "    x = as_float_array(\"x\", x)\n", 1), encoding="utf-8")
    assert "time.sleep" in (slow / "softmax.py").read_text(encoding="utf-8")
    out = tmp_path / "out"
    options = {"jobs": 1, "hidden": None, "exercises": ["softmax"], "echo": lambda *args: None}
    assert grade_batch(tmp_path / "subs", out, budget=60.0, **options) == 0
    generous = read_grades(out)["slow"]
    assert float(generous["score"]) == float(generous["max_score"]) > 0
    capsys.readouterr()
    assert grade_batch(tmp_path / "subs", out, budget=60.0, **options) == 0
    assert "slow: " in (progress := capsys.readouterr().out) and "unchanged: kept" in progress  # same options: kept
    grade_batch(tmp_path / "subs", out, budget=0.3, **options)
    progress = capsys.readouterr().out
    assert "slow: " in progress and "unchanged: kept" not in progress, progress
    tight = read_grades(out)["slow"]
    assert float(tight["score"]) < float(generous["score"])


def test_the_given_code_in_force_is_fingerprinted(tmp_path, monkeypatch):
    # What fair grading runs for the exercises a view builds on: the checkout's, or an installed kit's course copy.
    from grader import course
    from grader.sandbox import given

    kit_given = set(given.KIT_GIVEN.glob("*.py"))
    assert kit_given and kit_given <= set(fingerprint.fingerprinted_files(TEMPLATE))
    (tmp_path / course.COURSE_FILE).write_text("[course]\n", encoding="utf-8")
    (tmp_path / course.GIVEN_FOLDER).mkdir()
    shutil.copyfile(given.KIT_GIVEN / "softmax.py", tmp_path / course.GIVEN_FOLDER / "softmax.py")
    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path))
    hashed = set(fingerprint.fingerprinted_files(TEMPLATE))
    assert tmp_path / course.GIVEN_FOLDER / "softmax.py" in hashed and not kit_given & hashed
