"""The term's workflow: late penalties with extensions, manual points, --only, grading.log, Canvas, no regrades."""

from __future__ import annotations

import csv
import io
import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from grader import course, scoring, term
from grader.curriculum import ROOT, load
from grader.grading import export
from grader.grading.grade import grade_batch
from grader.mutants import apply, load_catalogue

EXERCISE = "softmax"
QUIET = {"echo": lambda *args: None, "hidden": None, "jobs": 2, "exercises": [EXERCISE]}
DEADLINE = "2026-10-01T23:59:00+02:00"
COURSE = f"""[late]
deadline = "{DEADLINE}"
per_day = 0.25
max_days = 2

[extensions]
alice = 3

[canvas]
assignment_name = "HW 1"

[canvas.exercise_ids]
softmax = 4242
"""
# alice: 2.5 days after the course's deadline, inside her 3-day extension: on time.
# bob: 1 hour after the deadline (one started day: 25% lost), and a manual point with a reason.
TIMES = "id,submitted_at\nalice,2026-10-04T10:00:00+02:00\nbob,2026-10-01T22:59:30Z\n"
ADJUSTMENTS = "id,exercise,points,reason\nbob,softmax,1.5,Rubric item 2: the docstring explains the max trick\n"


def read_grades(out: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}


def results(out: Path, student: str) -> dict:
    return json.loads((out / student / "results.json").read_text())


@pytest.fixture(scope="module")
def term_batch(tmp_path_factory):
    """alice (the reference) and bob (a caught softmax mistake), graded once in a course with [late]."""
    root = tmp_path_factory.mktemp("term")
    folder = root / "course"
    folder.mkdir()
    (folder / "course.toml").write_text(COURSE, encoding="utf-8")
    submissions = root / "subs"
    shutil.copytree(ROOT / "solutions", submissions / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "solutions", submissions / "bob", ignore=shutil.ignore_patterns("__pycache__"))
    mutant = next(m for m in load_catalogue() if m.exercise == EXERCISE)
    apply(mutant, submissions / "bob")
    (root / "times.csv").write_text(TIMES, encoding="utf-8")
    (root / "adjustments.csv").write_text(ADJUSTMENTS, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(folder))
        out = root / "out"
        lines: list[str] = []
        assert grade_batch(submissions, out, **QUIET | {"echo": lines.append}, times=root / "times.csv",
                           adjustments=root / "adjustments.csv") == 0
        yield {"root": root, "folder": folder, "subs": submissions, "out": out, "lines": lines}


def test_late_with_an_extension_and_manual_points(term_batch):
    out = term_batch["out"]
    alice, bob = results(out, "alice"), results(out, "bob")
    full = load().exercise(EXERCISE).points  # no hidden tests here (QUIET)
    assert alice["score"] == alice["extra_data"]["max_score"] == full  # late by the deadline, not by her extension
    assert alice["extra_data"]["late"]["days_late"] == 0
    tests = bob["extra_data"]["computed"]["score"]
    assert 0 < tests < full
    assert bob["extra_data"]["late"]["days_late"] == 1
    assert bob["score"] == round((tests + 1.5) * 0.75, 4)  # the points added, then a quarter lost
    grades = read_grades(out)
    assert float(grades["bob"]["score"]) == bob["score"] and float(grades["bob"]["score_before"]) == tests
    assert grades["bob"]["days_late"] == "1" and float(grades["bob"]["late_penalty"]) == 0.25
    feedback = (out / "bob" / "feedback.md").read_text()
    assert "+1.5 points (softmax): Rubric item 2: the docstring explains the max trick" in feedback
    assert "1 started day after the deadline" in feedback and "25% of the score lost" in feedback
    assert "extension" in json.dumps(alice["extra_data"]["late"])


def test_the_batch_writes_the_class_report_and_the_log(term_batch):
    out = term_batch["out"]
    page = (out / "report.html").read_text()
    assert "Misconceptions diagnosed" in page and "without keepdims" in page
    section = page.split("Misconceptions diagnosed")[1].split("</table>")[0]
    assert "<td class=\"names\">bob</td>" in section and "alice" not in section
    assert "Rubric item 2" in page.split("Late submissions and manual points")[1]
    log = (out / "grading.log").read_text().splitlines()
    assert log[0].startswith("== ") and "attention-kit" in log[0] and "course: " in log[0]
    assert any(line.startswith("   limits: ") for line in log)
    assert any(line.strip().startswith("bob\tgraded\t") and "-> 1.6406" in line for line in log)


def test_changing_the_term_and_canvas_settings_regrades_nobody_and_keeps_the_points(term_batch, tmp_path):
    out, folder = tmp_path / "out", term_batch["folder"]
    shutil.copytree(term_batch["out"], out)
    stamps = {s: (out / s / "results.json").stat().st_mtime_ns for s in ("alice", "bob")}
    fingerprints = {s: results(out, s)["extra_data"]["fingerprint"] for s in ("alice", "bob")}
    changed = tmp_path / "course"
    shutil.copytree(folder, changed)
    (changed / "course.toml").write_text(COURSE.replace("per_day = 0.25", "per_day = 0.5")
                                         .replace('"HW 1"', '"Homework 1"').replace("4242", "4343")
                                         .replace("alice = 3", "alice = 1"), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(changed))
        assert grade_batch(term_batch["subs"], out, **QUIET) == 0  # no --times/--adjustments: the kept ones
    for student in ("alice", "bob"):
        assert results(out, student)["extra_data"]["fingerprint"] == fingerprints[student]
    log = (out / "grading.log").read_text()
    assert log.count("== ") == 2 and "\tkept\t" in log.split("== ")[-1] and "\tgraded\t" not in log.split("== ")[-1]
    bob = results(out, "bob")
    tests = bob["extra_data"]["computed"]["score"]
    assert bob["score"] == round((tests + 1.5) * 0.5, 4)  # the new per_day, the kept manual point
    alice = results(out, "alice")
    # Her extension shrank to a day: 1 day 10 hours after it, 2 started days at the new 50% each: nothing left.
    assert alice["extra_data"]["late"]["days_late"] == 2 and alice["score"] == 0.0
    assert stamps["bob"] != (out / "bob" / "results.json").stat().st_mtime_ns  # rewritten, not regraded


def test_only_regrades_that_student_and_keeps_their_manual_points(term_batch, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(term_batch["out"], out)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(term_batch["folder"]))
        assert grade_batch(term_batch["subs"], out, **QUIET, only=["bob"]) == 0
        assert grade_batch(term_batch["subs"], out, **QUIET, only=["nobody"]) == 2
    last = (out / "grading.log").read_text().split("== ")[-1]
    assert "bob\tgraded\t" in last and "alice\tkept\t" in last and "only bob" in last
    assert "Rubric item 2" in (out / "bob" / "feedback.md").read_text()  # never lost on a regrade
    assert results(out, "bob")["score"] == results(term_batch["out"], "bob")["score"]


def test_canvas_per_exercise_columns_fill_existing_assignments(term_batch, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,lms_id,name,email\nalice,1,Alice,a@x\nbob,2,Bob,b@x\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(term_batch["folder"]))
        out = tmp_path / "out"
        shutil.copytree(term_batch["out"], out)
        assert grade_batch(term_batch["subs"], out, **QUIET, roster=roster) == 0
    rows = list(csv.reader(io.StringIO((out / "canvas.csv").read_text())))
    exercise = load().exercise(EXERCISE)
    assert rows[0][5:] == [f"{exercise.number}. {exercise.title} (4242)"]
    assert float(rows[3][5]) == results(out, "bob")["extra_data"]["exercises"][EXERCISE]  # the final points


def test_a_whole_submission_adjustment_is_never_dropped_from_per_exercise_canvas(term_batch, tmp_path):
    # Per-exercise Canvas columns have no place for it: Canvas's sum would silently lack the -10 that grades.csv
    # has (a hostile tester's, issue 37). Refused in one line; grades.csv is written all the same.
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,lms_id,name,email\nalice,1,Alice,a@x\nbob,2,Bob,b@x\n", encoding="utf-8")
    whole = tmp_path / "whole.csv"
    whole.write_text("id,exercise,points,reason\nbob,,-10,late form\n", encoding="utf-8")
    said: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(term_batch["folder"]))
        out = tmp_path / "out"
        shutil.copytree(term_batch["out"], out)
        (out / "canvas.csv").unlink(missing_ok=True)
        code = grade_batch(term_batch["subs"], out, **(QUIET | {"echo": said.append}), roster=roster,
                           adjustments=whole)
    assert code == 2 and not (out / "canvas.csv").exists()
    assert any("manual points of a whole submission (bob) have no column among per-exercise Canvas" in line
               for line in said), said
    assert float(read_grades(out)["bob"]["score"]) == results(out, "bob")["score"]  # the gradebook is written


def test_a_rerun_never_leaves_an_earlier_runs_canvas_or_report_beside_its_grades(term_batch, tmp_path):
    """canvas.csv and report.html follow every run's grades.csv, with or without --roster.

    An instructor graded with --roster, changed [late] per_day and graded again without --roster: grades.csv
    had the new scores while canvas.csv kept the old ones (24.0938 against 28.9125), ready to be imported. And a
    run whose Canvas export was refused left canvas.csv and report.html (written after it) from the run before.
    The roster is now kept as OUT/roster.csv, as times.csv and adjustments.csv are; a refused Canvas export
    removes the earlier canvas.csv and every other format is still written.
    """
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,lms_id,name,email\nalice,1,Alice,a@x\nbob,2,Bob,b@x\n", encoding="utf-8")
    out, changed = tmp_path / "out", tmp_path / "course"
    shutil.copytree(term_batch["out"], out)
    shutil.copytree(term_batch["folder"], changed)
    toml = changed / "course.toml"

    def canvas_bob() -> float:
        rows = list(csv.reader(io.StringIO((out / "canvas.csv").read_text())))
        return float(next(row for row in rows if row[0] == "Bob")[5])

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(changed))
        assert grade_batch(term_batch["subs"], out, **QUIET, roster=roster) == 0
        assert (out / "roster.csv").is_file() and canvas_bob() == results(out, "bob")["score"]
        toml.write_text(COURSE.replace("per_day = 0.25", "per_day = 0.5"), encoding="utf-8")
        assert grade_batch(term_batch["subs"], out, **QUIET) == 0  # no --roster: the kept one
        bob = float(read_grades(out)["bob"]["score"])
        assert bob == results(out, "bob")["score"] == canvas_bob()
        # A refused Canvas export: no canvas.csv of the last run is left, report.html is this run's.
        whole = tmp_path / "whole.csv"
        whole.write_text("id,exercise,points,reason\nbob,,-1,late form\n", encoding="utf-8")
        toml.write_text(COURSE.replace("per_day = 0.25", "per_day = 0.1"), encoding="utf-8")
        said: list[str] = []
        assert grade_batch(term_batch["subs"], out, **(QUIET | {"echo": said.append}), adjustments=whole) == 2
        assert not (out / "canvas.csv").exists()
        assert any("was removed" in line for line in said), said
    assert "late form" in (out / "report.html").read_text()
    assert float(read_grades(out)["bob"]["score"]) == results(out, "bob")["score"] != bob


def test_the_score_rule():
    assert scoring.final_score(10, [2.5], 0.25) == 9.375
    assert scoring.final_score(1, [-3], 0.0) == 0.0  # never below 0
    assert scoring.final_score(10, [], 1.0) == 0.0
    with pytest.raises(ValueError, match="late_fraction"):
        scoring.final_score(10, [], 1.5)
    policy = term.LatePolicy(datetime.fromisoformat(DEADLINE), 0.1, 3)
    on_time = term.lateness(policy, datetime.fromisoformat("2026-10-01T23:59:00+02:00"))
    a_second = term.lateness(policy, datetime.fromisoformat("2026-10-01T23:59:01+02:00"))
    extended = term.lateness(policy, datetime.fromisoformat("2026-10-03T23:00:00+02:00"), 2)
    too_late = term.lateness(policy, datetime.fromisoformat("2026-10-05T00:00:00+02:00"))
    assert (on_time.days_late, a_second.days_late, a_second.fraction) == (0, 1, 0.1)
    assert extended.days_late == 0 and too_late.days_late == 4 and too_late.fraction == 1.0


@pytest.mark.parametrize(("text", "message"), [
    ("id,submitted_at\nalice,yesterday\n", "row 2 column submitted_at: 'yesterday' is not an ISO 8601 time"),
    ("id,submitted_at\nalice,2026-10-01T10:00:00\n", "row 2 column submitted_at: '2026-10-01T10:00:00' has no offset"),
    ("id,when\nalice,2026-10-01T10:00:00Z\n", "row 1: missing column 'submitted_at'"),
])
def test_a_bad_times_file_names_its_row_and_column(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(term.TermError, match=message):
        term.read_times(path)


@pytest.mark.parametrize(("text", "message"), [
    ("id,exercise,points,reason\nbob,softmax,lots,x\n", "row 2 column points: 'lots' is not a number"),
    ("id,exercise,points,reason\nbob,softmax,1,\n", "row 2 column reason: empty"),
    ("id,exercise,points,reason\nbob,nope,1,x\n", "row 2 column exercise: 'nope' is not an exercise"),
    # Points as a person writes them, bounded: a float() that takes 1e308 made every later export fail
    # (OverflowError), and one that takes 1_5 read 15 (a hostile tester's, issue 37).
    ("id,exercise,points,reason\nbob,softmax,1e308,x\n", "row 2 column points: '1e308' is not a number of points"),
    ("id,exercise,points,reason\nbob,softmax,1_5,x\n", "row 2 column points: '1_5' is not a number of points"),
    ("id,exercise,points,reason\nbob,softmax,nan,x\n", "row 2 column points: 'nan' is not a number of points"),
    ("id,exercise,points,reason\nbob,,20000,x\n", "row 2 column points: '20000' is more than 10000 points"),
    ("id,exercise,points,reason\nbob,softmax,1,x\nbobb,,2,x\n", "row 3 column id: 'bobb' is not a submission"),
    ("id,exercise,points,reason\nBob,,2,x\n", "'Bob' is not a submission of this batch \\(did you mean 'bob'"),
])
def test_a_bad_adjustments_file_names_its_row_and_column(tmp_path, text, message):
    path = tmp_path / "a.csv"
    path.write_text(text)
    with pytest.raises(term.TermError, match=message):
        term.read_adjustments(path, tuple(load().names), {"bob", "carol"})


def test_points_for_an_exercise_the_batch_does_not_grade_are_refused(tmp_path, monkeypatch):
    # A Part I course's gradebook has no backward column: its points went to the total alone (a README walk).
    from grader.curriculum import PART_ENV
    from grader.grading.grade import _course_names

    monkeypatch.setenv(PART_ENV, "1")
    path = tmp_path / "a.csv"
    path.write_text("id,exercise,points,reason\nbob,backward,1,rubric\n")
    with pytest.raises(term.TermError, match=r"'backward' is not an exercise of the course \(softmax, [^)]*layer;"):
        term.read_adjustments(path, _course_names(), {"bob"})
    path.write_text("id,exercise,points,reason\nbob,layer,1,rubric\n")
    assert term.read_adjustments(path, _course_names(), {"bob"})["bob"][0].exercise == "layer"


def test_points_written_as_people_write_them_are_read() -> None:
    for text, points in (("2", 2.0), ("-1.5", -1.5), ("+3", 3.0), (".5", 0.5), ("4.", 4.0), ("-10000", -10000.0)):
        assert term._POINTS.fullmatch(text) and float(text) == points


def test_a_times_row_of_another_student_is_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,submitted_at\nbob,2026-10-01T10:00:00Z\nzed,2026-10-01T10:00:00Z\n")
    with pytest.raises(term.TermError, match="row 3 column id: 'zed' is not a submission of this batch"):
        term.read_times(path, {"bob"})
    assert set(term.read_times(path)) == {"bob", "zed"}  # without the batch's ids (reading a kept copy)


@pytest.mark.parametrize(("toml", "message"), [
    ('[late]\ndeadline = "2026-10-01"\nper_day = 0.1\nmax_days = 2\n', "has no offset"),
    ('[late]\ndeadline = "2026-10-01T00:00:00Z"\nper_day = 2\nmax_days = 2\n', r"\[late\] per_day must be"),
    ('[late]\ndeadline = "2026-10-01T00:00:00Z"\nper_day = 0.1\n', r"\[late\] needs max_days"),
    ("[extensions]\nbob = -1\n", r"\[extensions\] bob must be a number of days"),
    ("[canvas.exercise_ids]\nsoftmax = \"abc\"\n", r"\[canvas.exercise_ids\] softmax must be the number"),
])
def test_bad_term_settings_stop_with_one_line(tmp_path, toml, message):
    (tmp_path / "course.toml").write_text(toml)
    with pytest.raises(course.CourseError, match=message):
        course.read(tmp_path)


def test_the_export_keeps_exercise_ids_out_of_a_total_only_canvas_file(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "course.toml").write_text(COURSE)
    monkeypatch.setenv(course.COURSE_ENV, str(folder))
    assert course.canvas_exercise_ids() == {"softmax": "4242"}
    assert export.canvas_assignment().column == "HW 1"


def test_the_course_templates_commented_term_settings_parse_when_uncommented(tmp_path, capsys):
    from grader import cli

    assert cli.main(["course", "init", str(tmp_path / "c")]) == 0
    text = (tmp_path / "c" / "course.toml").read_text()
    keys = ("# [", f"# {load().names[0]} =", "# deadline", "# per_day", "# max_days", '# "student-id"')
    (tmp_path / "c" / "course.toml").write_text("\n".join(line[2:] if line.startswith(keys) else line
                                                         for line in text.splitlines()))
    parsed = course.read(tmp_path / "c")
    assert parsed.late is not None and parsed.late.per_day == 0.1 and parsed.late.max_days == 3
    assert parsed.extensions == {"student-id": 2.0} and parsed.canvas_exercise_ids == {load().names[0]: "123457"}


def test_export_and_term_settings_are_not_part_of_the_fingerprint(tmp_path, monkeypatch):
    settings = []
    for index, extra in enumerate(("", COURSE, COURSE.replace("0.25", "0.5") + '\n[course]\ntitle = "Other"\n')):
        (tmp_path / str(index)).mkdir()
        (tmp_path / str(index) / "course.toml").write_text(extra)
        monkeypatch.setenv(course.COURSE_ENV, str(tmp_path / str(index)))
        settings.append(course.settings())
    assert len(set(settings)) == 1
    (tmp_path / "limits").mkdir()
    (tmp_path / "limits" / "course.toml").write_text(COURSE + "[limits]\ncall_seconds = 2\n")
    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path / "limits"))
    assert course.settings() != settings[0]  # a setting that decides a grade still does


def test_the_command_line_takes_the_term_options_and_refuses_a_bad_file_before_grading(term_batch, tmp_path, capsys,
                                                                                       monkeypatch):
    from grader import cli

    monkeypatch.setenv(course.COURSE_ENV, str(term_batch["folder"]))  # --course sets it: restored after the test

    out, empty = tmp_path / "out", tmp_path / "no-hidden"
    shutil.copytree(term_batch["out"], out)
    empty.mkdir()
    bad = tmp_path / "bad.csv"
    bad.write_text("id,exercise,points,reason\nbob,softmax,1,\n")
    base = ["grade", str(term_batch["subs"]), "--out", str(out), "--exercise", EXERCISE, "--jobs", "1",
            "--hidden", str(empty), "--course", str(term_batch["folder"])]
    assert cli.main([*base, "--adjustments", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--adjustments {bad} row 2 column reason: empty" in err and (out / "adjustments.csv").read_text() == \
        ADJUSTMENTS  # the kept file is untouched by a refused one
    good = tmp_path / "good.csv"
    good.write_text("id,exercise,points,reason\nalice,,-1,Copied the docstring of a classmate (agreed penalty)\n")
    assert cli.main([*base, "--adjustments", str(good), "--only", "alice"]) == 0
    assert "Copied the docstring" in (out / "alice" / "feedback.md").read_text()
    assert "Rubric item 2" not in (out / "bob" / "feedback.md").read_text()  # the new file replaced the old
    last = (out / "grading.log").read_text().split("== ")[-1]
    assert "alice\tgraded\t10 -> 9 / 10" in last and "bob\tkept\t" in last


def test_an_extension_for_an_id_no_entry_has_is_said_with_the_gradebook(tmp_path, monkeypatch):
    # An instructor's round: "extnded = 1" beside "extended = 2" gave the student nothing, and grade said nothing.
    from grader.grading import outputs, term_stage

    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "course.toml").write_text(COURSE.replace("alice = 3", "alice = 3\nalcie = 1\nzed = 2"))
    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path / "course"))
    inputs = term_stage.load_inputs(tmp_path / "out", None, None, (EXERCISE,), {"alice", "bob"})
    assert inputs.notes == ("[extensions] of the course: alcie, zed: no submission has this id (a typo? an "
                            "extension for a student yet to submit is kept)",), inputs.notes
    assert inputs.extensions == {"alice": 3.0, "alcie": 1.0, "zed": 2.0}  # kept, never refused
    said: list[str] = []
    outputs.write_gradebooks(tmp_path / "out", [], None, inputs, said.append)
    assert said[0].startswith("note: [extensions] of the course: alcie, zed: no submission has this id"), said
    assert term_stage.load_inputs(tmp_path / "out2", None, None, (EXERCISE,), {"alice", "alcie", "zed"}).notes == ()


def test_a_row_with_more_cells_than_the_header_is_refused(tmp_path):
    # An unquoted comma, a decimal comma's 1,5 or a reason's, made an extra cell that was dropped in silence:
    # bob got 1 point with the reason "5", and the real reason was lost.
    path = tmp_path / "a.csv"
    path.write_text("id,exercise,points,reason\nbob,softmax,1,5,Rubric item 2\n")
    with pytest.raises(term.TermError, match=r"--adjustments .* row 2: 5 cells, but the header has 4; .*double quotes"):
        term.read_adjustments(path, (EXERCISE,), {"bob"})
    path.write_text('id,exercise,points,reason\nbob,softmax,1.5,"good, clear docstring"\n')
    assert term.read_adjustments(path, (EXERCISE,), {"bob"})["bob"][0].reason == "good, clear docstring"
    times = tmp_path / "t.csv"
    times.write_text("id,submitted_at\nbob,2026-10-01T10:00:00Z,extra\n")
    with pytest.raises(term.TermError, match=r"--times .* row 2: 3 cells, but the header has 2"):
        term.read_times(times, {"bob"})


def test_an_exercise_s_manual_points_take_from_the_total_what_its_column_loses():
    # masks -20 on masks' 12 points: its column stops at 0 (12 lost), and the total lost 20, so the
    # per-exercise Canvas columns added up to 46 beside a grades.csv total of 38.
    from grader.grading.rows import StudentRow
    from grader.grading.term_stage import TermInputs, finalize

    row = StudentRow(student="ken", status="ok", score=58.0, computed=58.0, max_score=58.0,
                     exercises={"softmax": 12.0, "masks": 12.0, "rowmax": 34.0},
                     computed_exercises={"softmax": 12.0, "masks": 12.0, "rowmax": 34.0},
                     maxima={"softmax": 12.0, "masks": 12.0, "rowmax": 34.0})
    late = term.LatePolicy(datetime.fromisoformat(DEADLINE), 0.25, 2)
    for times, factor in (({}, 1.0), ({"ken": datetime.fromisoformat("2026-10-02T10:00:00+02:00")}, 0.75)):
        inputs = TermInputs(late=late, times=times,
                            adjustments={"ken": (term.Adjustment("masks", -20.0, "copied masks"),
                                                 term.Adjustment("softmax", 1.0, "rubric"))})
        final = finalize(row, inputs)
        assert final.exercises == {"softmax": 13 * factor, "masks": 0.0, "rowmax": 34 * factor}
        assert final.score == sum(final.exercises.values()) == 47 * factor
    whole = finalize(row, TermInputs(adjustments={"ken": (term.Adjustment("", -60.0, "void"),)}))
    assert whole.score == 0 and whole.exercises["masks"] == 12  # the whole submission's points: the total only


def test_a_refused_export_keeps_the_canvas_csv_of_the_same_scores(term_batch, tmp_path):
    # `export --per-exercise --canvas-assignment-id 12` is refused (bad options); it removed the canvas.csv the
    # last run wrote from these very results.json, so a typo of the options lost a good export.
    import argparse

    roster = tmp_path / "roster.csv"
    roster.write_text("folder,lms_id,name,email\nalice,1,Alice,a@x\nbob,2,Bob,b@x\n", encoding="utf-8")
    out = tmp_path / "out"
    shutil.copytree(term_batch["out"], out)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(term_batch["folder"]))
        assert grade_batch(term_batch["subs"], out, **QUIET, roster=roster) == 0
        before = (out / "canvas.csv").read_text(encoding="utf-8")
        parser = argparse.ArgumentParser()
        export.add_arguments(parser)
        args = parser.parse_args([str(out), "--per-exercise", "--canvas-assignment-id", "12"])
        assert export.run(args) == 2
    assert (out / "canvas.csv").read_text(encoding="utf-8") == before


def test_an_export_under_a_course_that_dropped_a_graded_exercise_is_refused(term_batch, tmp_path, capsys):
    # The instructor dropped softmax from [course] exercises and exported the gradebook again: --per-exercise was
    # a traceback (no exercise named 'softmax'), the total a canvas.csv of the old selection's points.
    import argparse

    roster = tmp_path / "roster.csv"
    roster.write_text("folder,lms_id,name,email\nalice,1,Alice,a@x\nbob,2,Bob,b@x\n", encoding="utf-8")
    changed = tmp_path / "course"
    changed.mkdir()
    (changed / "course.toml").write_text('[course]\nexercises = ["masks"]\n', encoding="utf-8")
    out = tmp_path / "out"
    shutil.copytree(term_batch["out"], out)
    parser = argparse.ArgumentParser()
    export.add_arguments(parser)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(course.COURSE_ENV, str(changed))
        for options in ([], ["--per-exercise"]):
            assert export.run(parser.parse_args([str(out), "--roster", str(roster), *options])) == 2
            assert "was graded with exercise(s) softmax, which the course no longer has" in capsys.readouterr().err
    assert not (out / "canvas.csv").exists()
