"""A course of any mix of parts (grader/course.py): what it leaves out and needs is given, from the reference."""

from __future__ import annotations

import csv
import io
import re
import shutil
import tomllib

import pytest

from grader import cli, course
from grader.authoring.release_contents import manifest_for_course
from grader.curriculum import MANIFEST, ROOT, load

# Parts I and III: retrieval (part 3) imports attention, which the course leaves out; [points] of attention
# and [hidden_points] of projections stay in the file, as after deleting their exercises' lines.
MIX = """\
[course]
exercises = ["softmax", "masks", "retrieval", "tokenization"]
[points]
attention = 5
[hidden_points]
projections = 1
"""
# By hand from grader/curriculum.toml (points + hidden_points): softmax 10 + 2, masks 10 + 2,
# retrieval 20 + 4, tokenization 20 + 4.
MAXIMA = {"softmax": 12, "masks": 12, "retrieval": 24, "tokenization": 24}


@pytest.fixture(autouse=True)
def no_course(monkeypatch):
    monkeypatch.setenv(course.COURSE_ENV, "")
    monkeypatch.delenv(course.COURSE_ENV)
    monkeypatch.chdir(ROOT)


@pytest.fixture
def mix(tmp_path):
    folder = tmp_path / "mix"
    folder.mkdir()
    (folder / "course.toml").write_text(MIX, encoding="utf-8")
    return folder


def test_parts_one_and_three_keep_what_they_need_as_given(mix):
    course.activate(mix)
    curriculum = load()
    assert curriculum.selected_names() == ("softmax", "masks", "retrieval", "tokenization")
    assert curriculum.given_exercises == ("attention",)
    assert "attention" in curriculum.names and "attention" not in curriculum.dropped
    assert curriculum.dependencies("retrieval") == ("softmax", "attention")
    assert sum(e.points + e.hidden_points for e in curriculum.selection()) == sum(MAXIMA.values())
    assert course.given_exercises(("retrieval",), {"softmax": (), "attention": ("softmax",),
                                                   "retrieval": ("attention",)}) == ("softmax", "attention")


def test_status_grade_and_release_agree_on_the_set_and_the_total(mix, tmp_path, capsys):
    assert cli.main(["status", "--course", str(mix), "--impl", "solutions"]) == 0
    printed = capsys.readouterr().out
    # The given exercise is listed as given (working code to read, not graded); an exercise neither kept nor
    # needed is not listed at all.
    assert "14. retrieval" in printed and "projections" not in printed
    assert re.search(r"3\. attention\s+done given", printed)
    assert "60/60 points" in printed and "out of 72" in printed
    subs = tmp_path / "subs"
    (subs / "student").mkdir(parents=True)
    for module in ("softmax", "masks", "retrieval", "tokenization", "_checks", "_facts", "_tokenization_corpus"):
        shutil.copy(ROOT / "solutions" / f"{module}.py", subs / "student")  # no attention.py: it is given
    out = tmp_path / "out"
    assert cli.main(["grade", str(subs), "--course", str(mix), "--out", str(out), "--jobs", "1"]) == 0, \
        capsys.readouterr()
    text = (out / "grades.csv").read_text(encoding="utf-8")
    assert next(csv.reader(io.StringIO(text))) == ["student", "status", "score", "max_score", *MAXIMA,
                                                    "score_before", "adjustments", "days_late", "late_penalty"]
    row = next(csv.DictReader(io.StringIO(text)))
    assert (row["status"], float(row["score"]), float(row["max_score"])) == ("ok", 72, 72), row
    course.activate(mix)
    released = tomllib.loads(manifest_for_course(MANIFEST.read_text(encoding="utf-8"), load()))
    assert released["course"]["given_exercises"] == ["attention"]
    assert [e["name"] for e in released["exercise"]] == ["softmax", "attention", "masks", "retrieval", "tokenization"]


def test_the_notebooks_are_those_of_the_course_and_given_ones_are_not_assigned(mix, tmp_path, capsys):
    assert cli.main(["notebooks", str(tmp_path / "nb"), "--course", str(mix)]) == 0, capsys.readouterr()
    built = sorted(path.name for path in (tmp_path / "nb" / "source").iterdir())
    assert built == ["01-softmax", "04-masks", "14-retrieval", "15-tokenization"]


def test_status_says_a_given_exercise_waits_on_the_students_exercises_it_calls(mix, capsys):
    # The given attention calls the student's softmax: on the stubs its tests fail, so it is not "done" yet.
    assert cli.main(["status", "--course", str(mix), "--impl", "exercises"]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if re.match(r"\s+3\. attention", line))
    assert "done" not in row and row.endswith("its tests pass once your exercise 1 does"), row
    assert cli.main(["status", "--course", str(mix), "--impl", "solutions"]) == 0
    assert re.search(r"3\. attention\s+done given: working code to read, not yours to write$", capsys.readouterr().out,
                     re.M)
