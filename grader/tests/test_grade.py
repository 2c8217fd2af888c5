"""End-to-end tests of `attention-kit grade` on a small class of made-up students."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load
from grader.grading import submissions
from grader.grading.formats.grades_csv import TERM_COLUMNS
from grader.grading.grade import grade_batch
from grader.grading.samples import break_syntax, zip_folder
from grader.mutants import apply, load_catalogue

# One xdist worker runs this file: the sample batch graded once (a module fixture) is then built once,
# not once per worker.
pytestmark = pytest.mark.xdist_group("test_grade")

REFERENCE = ROOT / "solutions"
# A few exercises keep these tests fast; "multihead" and "masks" hold the planted static problems.
EXERCISES = ["softmax", "masks", "multihead"]
QUIET = {"echo": lambda *args: None, "hidden": None, "jobs": 2}
GRADESCOPE_TOP = {"score", "execution_time", "output", "tests"}
GRADESCOPE_TEST = {"name", "score", "max_score", "status", "output", "visibility"}


def copy_reference(target: Path) -> Path:
    shutil.copytree(REFERENCE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def planted_mutant(target: Path):
    """A caught mutant from the catalogue (softmax-no-keepdims if it still applies)."""
    catalogue = sorted(load_catalogue(), key=lambda m: m.id != "softmax-no-keepdims")
    for mutant in catalogue:
        try:
            apply(mutant, target)
            return mutant
        except ValueError:
            continue
    raise AssertionError("no mutant of the catalogue applies to solutions/")


def graded_exercises(selected: list[str]) -> list[str]:
    return [e.name for e in load().exercises if (ROOT / e.test_file).is_file() and e.name in selected]


def read_grades(out: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8")))
    return {row["student"]: row for row in rows}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Eight students covering every kind of entry, graded once."""
    root = tmp_path_factory.mktemp("class")
    folder = root / "submissions"
    folder.mkdir()
    copy_reference(folder / "correct")
    mutant = planted_mutant(folder / "mutant")
    copy_reference(folder / "missing")
    (folder / "missing" / "positional.py").unlink()
    copy_reference(folder / "syntax")
    line = break_syntax(folder / "syntax")
    copy_reference(folder / "binary")
    (folder / "binary" / "masks.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    copy_reference(folder / "nested" / "exercises")
    zip_folder(copy_reference(root / "staging"), folder / "zipped.zip", prefix="hw1")
    with zipfile.ZipFile(folder / "evil.zip", "w") as archive:
        archive.writestr("../softmax.py", "print('escaped')\n")
    (folder / "notes.txt").write_text("not a submission\n")
    out = root / "out"
    options = QUIET | {"exercises": sorted(set(EXERCISES) | {mutant.exercise})}
    assert grade_batch(folder, out, **options) == 0
    return {"folder": folder, "out": out, "mutant": mutant, "syntax_line": line, "grades": read_grades(out),
            "options": options}


def results(out: Path, student: str) -> dict:
    return json.loads((out / student / "results.json").read_text(encoding="utf-8"))


def test_every_entry_gets_a_row(batch):
    # notes.txt is not a submission format, but an entry: it gets a row that says why it scored nothing.
    assert set(batch["grades"]) == {"correct", "mutant", "missing", "syntax", "binary", "nested", "zipped", "evil",
                                    "notes"}
    assert "unsupported format" in batch["grades"]["notes"]["status"]
    header = (batch["out"] / "grades.csv").read_text().splitlines()[0].split(",")
    assert header == ["student", "status", "score", "max_score", *load().names, *TERM_COLUMNS]


@pytest.mark.parametrize("student", ["correct", "nested", "zipped"])
def test_correct_submissions_get_full_marks(batch, student):
    row = batch["grades"][student]
    assert row["status"] == "ok"
    assert float(row["score"]) == float(row["max_score"]) > 0
    for name in graded_exercises(batch["options"]["exercises"]):
        assert float(row[name]) == load().exercise(name).points


def test_a_mutant_loses_points_in_its_exercise(batch):
    row = batch["grades"]["mutant"]
    exercise = batch["mutant"].exercise
    assert row["status"] == "ok"
    assert float(row[exercise]) < load().exercise(exercise).points
    assert float(row["score"]) < float(row["max_score"])
    feedback = (batch["out"] / "mutant" / "feedback.md").read_text()
    assert "expected" in feedback and "revisit" in feedback


def test_static_problems_have_their_status_and_cost_their_exercise(batch):
    grades = batch["grades"]
    graded = graded_exercises(batch["options"]["exercises"])
    syntax = f"syntax error in multihead.py line {batch['syntax_line']}"
    binary, missing = "masks.py is not a text file", "missing module positional"
    for student, exercise, status in (("syntax", "multihead", syntax), ("binary", "masks", binary),
                                      ("missing", "positional", missing)):
        # An exercise this batch does not grade (``--exercise``) is no problem of the row's.
        assert grades[student]["status"] == (status if exercise in graded else "ok"), (student, graded)
        if exercise in graded:
            assert float(grades[student][exercise]) == 0
    # The other exercises are graded as usual.
    assert float(grades["syntax"]["softmax"]) == load().exercise("softmax").points
    feedback = (batch["out"] / "syntax" / "feedback.md").read_text()
    assert "was never closed" in feedback


def test_unsafe_zip_is_refused_but_gets_a_row(batch):
    row = batch["grades"]["evil"]
    assert row["status"].startswith("unreadable submission") and "unsafe path" in row["status"]
    assert float(row["score"]) == 0
    assert not (batch["folder"].parent / "softmax.py").exists()


def test_results_json_has_the_gradescope_fields(batch):
    data = results(batch["out"], "mutant")
    assert GRADESCOPE_TOP <= set(data)
    assert data["tests"] and all(GRADESCOPE_TEST <= set(test) for test in data["tests"])
    assert {test["status"] for test in data["tests"]} == {"passed", "failed"}
    assert data["score"] == pytest.approx(sum(test["score"] for test in data["tests"]), abs=1e-3)
    assert sum(t["max_score"] for t in data["tests"]) == pytest.approx(float(batch["grades"]["mutant"]["max_score"]))


def test_rerun_skips_unchanged_and_force_regrades(batch, tmp_path):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    shutil.copytree(batch["folder"] / "mutant", folder / "mutant")
    assert grade_batch(folder, out, **batch["options"]) == 0
    first = (out / "grades.csv").read_text()
    stamp = (out / "mutant" / "results.json").stat().st_mtime_ns
    assert grade_batch(folder, out, **batch["options"]) == 0
    assert (out / "grades.csv").read_text() == first
    assert (out / "mutant" / "results.json").stat().st_mtime_ns == stamp  # skipped, not regraded
    assert grade_batch(folder, out, force=True, **batch["options"]) == 0
    assert (out / "mutant" / "results.json").stat().st_mtime_ns != stamp
    assert (out / "grades.csv").read_text() == first
    # A changed submission is regraded without --force.
    shutil.rmtree(folder / "mutant")
    copy_reference(folder / "mutant")
    assert grade_batch(folder, out, **batch["options"]) == 0
    assert read_grades(out)["mutant"]["score"] == read_grades(out)["mutant"]["max_score"]


def test_interrupted_run_then_rerun_equals_an_uninterrupted_run(batch, tmp_path):
    # What a run killed partway leaves: some students done, some not started, one results.json
    # half written, and the gradebook of an earlier run (here: none).
    out = tmp_path / "out"
    shutil.copytree(batch["out"], out)
    (out / "grades.csv").unlink()
    shutil.rmtree(out / "correct")
    (out / "zipped" / "feedback.md").unlink()
    text = (out / "syntax" / "results.json").read_text()
    (out / "syntax" / "results.json").write_text(text[: len(text) // 2])
    assert grade_batch(batch["folder"], out, **batch["options"]) == 0
    assert (out / "grades.csv").read_text() == (batch["out"] / "grades.csv").read_text()
    assert json.loads((out / "syntax" / "results.json").read_text())["extra_data"]["student"] == "syntax"


def test_hidden_tests_count_with_their_own_points(tmp_path):
    folder, hidden = tmp_path / "subs", tmp_path / "hidden"
    copy_reference(folder / "correct")
    # (every test must pass on the reference, a hidden one too: a uniform softmax earns half of these)
    uniform = copy_reference(folder / "uniform") / "softmax.py"
    uniform.write_text(uniform.read_text(encoding="utf-8") + "\n\ndef softmax(x, axis=-1):\n"
                       "    x = np.asarray(x, dtype=float)\n    return np.full_like(x, 1.0 / x.shape[axis])\n",
                       encoding="utf-8")
    hidden.mkdir()
    (hidden / "test_extra_softmax.py").write_text(
        "import numpy as np\n\nEXERCISE = 'softmax'\nPOINTS = 3\n\n\n"
        "def test_uniform(impl):\n    assert np.allclose(impl.softmax(np.zeros((2, 3))), 1 / 3)\n\n\n"
        "def test_peaked(impl):\n    assert impl.softmax(np.array([0.0, 10.0]))[1] > 0.99, 'the larger score wins'\n"
    )
    out = tmp_path / "out"
    assert grade_batch(folder, out, echo=lambda *a: None, hidden=hidden, jobs=1, exercises=["softmax"]) == 0
    softmax = load().exercise("softmax").points
    row = read_grades(out)["correct"]
    assert float(row["softmax"]) == softmax + 3 == float(row["max_score"])
    extra = [t for t in results(out, "uniform")["tests"] if "hidden" in t["tags"]]
    assert sorted(t["score"] for t in extra) == [0.0, 1.5], extra  # each of the two a half of its 3 points
    data = results(out, "correct")
    assert {t["visibility"] for t in data["tests"] if "hidden" in t["tags"]} == {"after_published"}


def test_zip_extraction_limits(tmp_path):
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("softmax.py", "#" * (submissions.MAX_FILE_BYTES + 1))
    prepared = submissions.prepare(bomb, tmp_path / "work")
    assert prepared.status.startswith("unreadable submission") and "too large" in prepared.status
    absolute = tmp_path / "absolute.zip"
    with zipfile.ZipFile(absolute, "w") as archive:
        archive.writestr("/etc/softmax.py", "x = 1\n")
    assert "unsafe path" in submissions.prepare(absolute, tmp_path / "work").status


def test_a_broken_softmax_does_not_blame_a_correct_attention_in_a_graded_batch(tmp_path):
    # Fair grading serves softmax from the reference to attention: attention gets all its points. Without
    # it (--no-fair), attention's failures lead with the function to fix first, never with a diagnosis of
    # attention.py.
    folder = tmp_path / "submissions"
    student = copy_reference(folder / "student")
    source = (student / "softmax.py").read_text(encoding="utf-8")
    start = source.index("def softmax(")
    (student / "softmax.py").write_text(source[:start] + (
        "def softmax(x, axis=-1):\n    x = as_float_array('x', x)\n"
        "    e = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
        "    return e / np.sum(e, axis=axis, keepdims=True)\n"), encoding="utf-8")
    options = QUIET | {"exercises": ["softmax", "attention"]}
    assert grade_batch(folder, tmp_path / "fair", **options) == 0
    row = read_grades(tmp_path / "fair")["student"]
    assert float(row["attention"]) == load().exercise("attention").points, row  # no hidden tests here
    assert grade_batch(folder, tmp_path / "unfair", fair=False, **options) == 0
    feedback = (tmp_path / "unfair" / "student" / "feedback.md").read_text(encoding="utf-8")
    assert "First fix softmax() in softmax.py (exercise 1, softmax)" in feedback
    assert "Diagnosis: your attention.py" not in feedback


def test_not_graded_rows_read_as_not_graded_in_the_summary_and_the_feedback():
    # "31 graded" beside "NOT GRADED: 31" and a feedback "0 so far / 22 points" read as a score: they are not one.
    from grader.grading.report import feedback_markdown, results_json, summary

    def row(student, status, score):
        tests = [{"name": "t", "score": score, "max_score": 2.0, "status": "passed" if score else "failed",
                  "visibility": "visible",
                  "output": "", "extra_data": {"exercise": "softmax", "nodeid": "t"}}]
        return results_json(student=student, status=status, tests=tests, execution_time=0.0, output="",
                            extra={"fingerprint": "", "source": student, "isolation": "x"})

    rows = [row("ada", "ok", 2.0), row("bob", "not graded: the machine was too busy", 0.0)]
    text = summary(rows, graded=2, reused=0, seconds=1.0)
    assert text.splitlines()[0].startswith("2 submission(s): 1 graded, 1 NOT graded, 0 unchanged"), text
    feedback = feedback_markdown(rows[1])
    assert "not graded yet" in feedback and "so far" not in feedback and "/ 2**" not in feedback, feedback
    assert "Score: **2 / 2**" in feedback_markdown(rows[0])


def test_an_exercise_that_did_not_run_is_said_so_without_a_count_or_a_hint():
    # An unreadable zip's feedback said "0 of 1 tests passed" and gave the hint on the max trick (a README walk).
    from grader.grading.report import feedback_markdown, results_json

    tests = [{"name": "softmax: did not run", "score": 0.0, "max_score": 12.0, "status": "failed",
              "visibility": "visible", "output": "softmax.py could not be graded: unreadable submission",
              "extra_data": {"exercise": "softmax"}}]
    feedback = feedback_markdown(results_json(student="dave", status="unreadable submission", tests=tests,
                                              execution_time=0.0, output="",
                                              extra={"fingerprint": "", "source": "dave", "isolation": "x"}))
    assert "0 / 12 points; its tests did not run." in feedback and "of 1 tests passed" not in feedback, feedback
    assert "Hint" not in feedback and "softmax.py could not be graded: unreadable submission" in feedback, feedback


def test_a_row_that_could_not_be_written_reads_as_not_graded_on_the_terminal_too(tmp_path, capsys):
    # The progress line said "0/12 (not graded: ...)" where grades.csv leaves the cell empty: no score, not a 0.
    student = tmp_path / "subs" / "ada"
    student.mkdir(parents=True)
    for module in ("softmax", "_checks"):
        shutil.copy(ROOT / "solutions" / f"{module}.py", student / f"{module}.py")
    (tmp_path / "out" / "ada" / "results.json").mkdir(parents=True)  # the grader cannot write the row's file
    capsys.readouterr()
    assert grade_batch(tmp_path / "subs", tmp_path / "out", **(QUIET | {"exercises": ["softmax"], "jobs": 1})) == 1
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("[1/1] ada: "))
    assert line.startswith("[1/1] ada: no score (not graded: the grader could not write"), line
    assert read_grades(tmp_path / "out")["ada"]["score"] == ""


def test_a_row_not_written_for_want_of_space_is_written_once_the_workers_are_gone(tmp_path, monkeypatch):
    # A hostile round (--container, --jobs 2): bob's worker filled the disk of OUT while it ran (fallocate in
    # /var/tmp, removed when it was stopped); alice was "not graded" and the batch failed.
    import errno

    from grader.grading import report

    student = tmp_path / "subs" / "alice"
    student.mkdir(parents=True)
    for module in ("softmax", "_checks"):
        shutil.copy(ROOT / "solutions" / f"{module}.py", student / f"{module}.py")
    write, full = report.write_student, [True]

    def write_student(out, row):
        if full.pop() if full else False:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(out, row)

    monkeypatch.setattr(report, "write_student", write_student)
    assert grade_batch(tmp_path / "subs", tmp_path / "out", **(QUIET | {"exercises": ["softmax"], "jobs": 1})) == 0
    assert read_grades(tmp_path / "out")["alice"]["score"] not in ("", "0")


def test_grades_help_names_every_kind_of_submission(capsys: pytest.CaptureFixture[str]) -> None:
    # `grade --help` said "one folder or .zip per student" where the docs and the reader take notebooks too
    # (docs/grading.md: "one folder, .zip or .ipynb per student").
    from grader.cli import main

    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    assert ".ipynb" in " ".join(capsys.readouterr().out.split())
