"""An instructor's term in a course folder, end to end: what the trial of issue 36 found wrong.

Each test runs the real entry path (no setting stood in for): the Gradescope runner reads the bundled
course's ``[late]``; hidden tests of different exercises that share a test name score apart; the term's
input files kept in the output folder are not readable by other users; a release of a course with an
exercise of its own never asks the instructor to edit the kit; the progress line shows the final score;
``export --canvas-assignment-id`` fills that assignment in a course with ``[canvas.exercise_ids]``; the
sample class of a course demonstrates its points on the exercises it grades.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from grader import course
from grader.curriculum import load
from grader.grading import gradescope, term_stage
from grader.tests.test_gradescope_late import graded as graded_results

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



HIDDEN_SOFTMAX = '''import numpy as np

EXERCISE = "softmax"


def test_same_name(impl):
    x = np.array([[0.0, 3.0, 1.0], [2.0, -1.0, 5.0], [4.0, 4.5, -2.0]])
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    assert np.allclose(impl.softmax(x), e / e.sum(axis=-1, keepdims=True)), "softmax of a square input"
'''
HIDDEN_MASKS = '''import numpy as np

EXERCISE = "masks"


def test_same_name(impl):
    assert np.asarray(impl.causal_mask(3)).shape == (3, 3), "causal_mask(3) is 3 by 3"
'''


def test_hidden_tests_of_two_exercises_with_one_name_score_apart(tmp_path, capsys):
    # Test files outside the kit's tree (a course folder's hidden_tests/ and kit_hidden_tests/, a --hidden DIR)
    # get node ids without their file from pytest ("::test_same_name"): two such tests were one record, so a
    # softmax mistake cost the masks test its points (and the reverse), in every file of the gradebook.
    from grader import cli
    from grader.curriculum import ROOT

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_hidden_a.py").write_text(HIDDEN_SOFTMAX, encoding="utf-8")
    (hidden / "test_hidden_b.py").write_text(HIDDEN_MASKS, encoding="utf-8")
    student = tmp_path / "subs" / "ada"
    student.mkdir(parents=True)
    for module in ("softmax", "masks", "_checks"):
        (student / f"{module}.py").write_text((ROOT / "solutions" / f"{module}.py").read_text(encoding="utf-8"),
                                              encoding="utf-8")
    softmax = student / "softmax.py"  # the catalogued mistake softmax-no-keepdims: wrong on square inputs
    softmax.write_text(softmax.read_text(encoding="utf-8").replace(
        "largest = np.max(x, axis=axis, keepdims=True)", "largest = np.max(x, axis=axis)"), encoding="utf-8")
    out = tmp_path / "out"
    status = cli.main(["grade", str(student.parent), "--out", str(out), "--hidden", str(hidden), "--jobs", "1",
                       "--exercise", "softmax", "--exercise", "masks"])
    printed = capsys.readouterr()
    assert status == 0, printed.out[-2000:] + printed.err[-2000:]
    tests = json.loads((out / "ada" / "results.json").read_text(encoding="utf-8"))["tests"]
    same = {test["name"]: test for test in tests if test["name"].endswith(": test_same_name")}
    assert set(same) == {"softmax: test_same_name", "masks: test_same_name"}
    assert same["masks: test_same_name"]["score"] == same["masks: test_same_name"]["max_score"] == 2
    assert same["softmax: test_same_name"]["score"] == 0
    assert same["masks: test_same_name"]["extra_data"]["nodeid"] != same["softmax: test_same_name"]["extra_data"][
        "nodeid"]


def test_a_release_of_a_course_with_its_own_exercise_never_asks_to_edit_the_kit(tmp_path, capsys):
    # The release compared the kit's exercises/ with the stubs the course implies (its own exercise's among them)
    # and told the instructor to run `python -m grader.authoring.sync`, which would write them into the kit.
    from grader import cli

    folder = tmp_path / "course"
    assert cli.main(["course", "init", str(folder)]) == 0
    settings = folder / "course.toml"
    settings.write_text(re.sub(r"(?ms)^exercises = \[.*?^\]", 'exercises = ["softmax"]',
                               settings.read_text(encoding="utf-8"), count=1), encoding="utf-8")
    assert cli.main(["course", "exercise", "new", "centre", "--course", str(folder), "--part", "1"]) == 0
    capsys.readouterr()
    assert cli.main(["release", str(tmp_path / "release"), "--course", str(folder), "--no-git"]) == 0
    printed = capsys.readouterr()
    assert (tmp_path / "release" / "exercises" / "centre.py").is_file()
    assert "grader.authoring.sync" not in printed.out + printed.err, printed.out + printed.err
    assert "in the kit is out of date" not in printed.out + printed.err


def test_the_progress_line_shows_the_final_score_graded_or_kept(tmp_path, capsys):
    # A row graded in this run was shown with its tests' score, a kept one with its final score: a late
    # student read 60/60 in the run that graded them and 30/60 in the next.
    from grader import cli
    from grader.curriculum import ROOT

    folder = tmp_path / "course"
    assert cli.main(["course", "init", str(folder)]) == 0
    settings = folder / "course.toml"
    settings.write_text(re.sub(r"(?ms)^exercises = \[.*?^\]", 'exercises = ["softmax"]',
                               settings.read_text(encoding="utf-8"), count=1) + "\n" + LATE, encoding="utf-8")
    student = tmp_path / "subs" / "bob"
    student.mkdir(parents=True)
    for module in ("softmax", "_checks"):
        (student / f"{module}.py").write_text((ROOT / "solutions" / f"{module}.py").read_text(encoding="utf-8"),
                                              encoding="utf-8")
    times = tmp_path / "times.csv"
    times.write_text("id,submitted_at\nbob,2026-10-03T01:30:00+02:00\n", encoding="utf-8")  # two started days
    empty = tmp_path / "no-hidden"
    empty.mkdir()
    base = ["grade", str(student.parent), "--out", str(tmp_path / "out"), "--course", str(folder), "--jobs", "1",
            "--exercise", "softmax", "--hidden", str(empty)]
    capsys.readouterr()
    lines = []
    for extra in (["--times", str(times)], []):
        assert cli.main([*base, *extra]) == 0
        lines += [line for line in capsys.readouterr().out.splitlines() if line.startswith("[1/1] bob: ")]
    assert len(lines) == 2, lines
    assert lines[0].startswith("[1/1] bob: 5/10 (ok)"), lines  # half of the tests' 10 points lost
    assert lines[1].startswith("[1/1] bob: 5/10 (unchanged"), lines


def test_export_sends_the_total_to_the_assignment_named_by_its_options_in_a_course_with_exercise_ids(tmp_path,
                                                                                                     monkeypatch):
    # docs/grading.md: `export --roster R --canvas-assignment-id ID` fills an existing assignment with the total.
    # A course with [canvas.exercise_ids] (per-exercise columns by default) refused it, asking to drop a
    # --per-exercise that was never given.
    from grader.grading import export

    folder = tmp_path / "course"
    folder.mkdir()
    (folder / course.COURSE_FILE).write_text("[canvas.exercise_ids]\nsoftmax = 900011\n", encoding="utf-8")
    monkeypatch.setenv(course.COURSE_ENV, str(folder))
    roster = tmp_path / "roster.csv"
    roster.write_text(f"folder,lms_id,name,email\n{gradescope.STUDENT_ID},20401,Ada L,ada@example.edu\n",
                      encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    rows = [graded_results(15.0)]
    export.export(out, rows, roster, echo=lambda *_: None)  # the course's default: a column per exercise
    assert "(900011)" in (out / "canvas.csv").read_text(encoding="utf-8").splitlines()[0]
    export.export(out, rows, roster, assignment_id="900001", assignment_name="Homework 3", echo=lambda *_: None)
    lines = (out / "canvas.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0].endswith(",Homework 3 (900001)") and "900011" not in lines[0], lines[0]
    assert lines[2].endswith(",15"), lines
    with pytest.raises(export.ExportError, match="without --per-exercise"):  # both asked for: still refused
        export.export(out, rows, roster, per_exercise=True, assignment_id="900001", echo=lambda *_: None)


def test_the_sample_class_of_a_course_shows_its_points_on_the_exercises_it_grades(tmp_path, monkeypatch):
    # A course of softmax and masks got samples with an attention mistake and a syntax error in multihead.py,
    # neither graded there: both scored full marks, "ok", demonstrating nothing the README promises.
    import ast
    import zipfile

    from grader import cli
    from grader.grading import samples

    folder = tmp_path / "course"
    assert cli.main(["course", "init", str(folder)]) == 0
    settings = folder / "course.toml"
    settings.write_text(re.sub(r"(?ms)^exercises = \[.*?^\]", 'exercises = ["softmax", "masks"]',
                               settings.read_text(encoding="utf-8"), count=1), encoding="utf-8")
    monkeypatch.setenv(course.COURSE_ENV, str(folder))
    load.cache_clear()
    monkeypatch.setattr(samples, "REFERENCE", folder / "solutions")
    made = samples.make_samples(tmp_path / "samples")
    graded = {"softmax.py", "masks.py"}
    mistakes = [path for path in made if path.name.startswith("mistake-")]
    assert mistakes and all(path.name.split("-")[1] in ("softmax", "masks") for path in mistakes), made
    broken = set()
    for module in (tmp_path / "samples" / "syntax-error").glob("*.py"):
        try:
            ast.parse(module.read_text(encoding="utf-8"))
        except SyntaxError:
            broken.add(module.name)
    assert len(broken) == 1 and broken <= graded, broken
    with zipfile.ZipFile(tmp_path / "samples" / "missing-module.zip") as archive:
        present = {Path(name).name for name in archive.namelist()}
    assert graded - present, "the missing-module sample leaves out a module the course grades"
