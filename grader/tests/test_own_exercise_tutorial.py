"""docs/own-exercise.md, followed to the letter: its commands, in its order, in a fresh folder."""

from __future__ import annotations

import csv
import re
import shlex
import shutil
import zipfile

import pytest

from grader import cli, course
from grader.curriculum import ROOT, load

TUTORIAL = ROOT / "docs" / "own-exercise.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"(?ms)^```{language}\n(.*?)^```", TUTORIAL.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def no_course(monkeypatch, tmp_path):
    monkeypatch.setenv(course.COURSE_ENV, "")
    monkeypatch.delenv(course.COURSE_ENV)
    monkeypatch.chdir(tmp_path)
    load.cache_clear()


def test_the_tutorial_works_as_written(tmp_path, capsys):
    commands = [line for block in blocks("sh") for line in block.splitlines() if line.startswith("attention-kit ")]
    assert [shlex.split(line)[1] for line in commands] == [
        "course", "course", "course", "grade", "release", "notebooks", "gradescope"]
    (setting,) = blocks("toml")
    for line in commands:
        words = [str(ROOT) if word == "~/attention-kit" else word for word in shlex.split(line)[1:]]
        if words[0] == "grade":  # a class of one: the reference's modules (the kit's and the course's own)
            student = tmp_path / "submissions" / "ada"
            shutil.copytree(tmp_path / "my-course" / "solutions", student)
        status = cli.main(words)
        printed = capsys.readouterr()
        assert status == 0, (line, printed.out[-2000:], printed.err[-2000:])
        if words[:2] == ["course", "init"]:  # the tutorial's one edit of course.toml, as it shows it
            settings = tmp_path / "my-course" / "course.toml"
            settings.write_text(re.sub(r"(?ms)^exercises = \[.*?^\]\n", setting,
                                       settings.read_text(encoding="utf-8"), count=1), encoding="utf-8")
        if words[:2] == ["course", "check"]:
            assert "Every exercise is proven." in printed.out
            assert re.findall(r"\d+\. (\w+) +proven", printed.out) == ["softmax", "retrieval", "centre"], printed.out
    with open(tmp_path / "grades" / "grades.csv", encoding="utf-8") as stream:
        (row,) = list(csv.DictReader(stream))
    assert row["status"] == "ok" and float(row["centre"]) == 12 and float(row["score"]) == float(row["max_score"])
    assert "attention" not in row  # given, not graded
    assert (tmp_path / "student-repo" / "exercises" / "centre.py").is_file()
    assert not (tmp_path / "student-repo" / "solutions").exists()
    assert list((tmp_path / "nbgrader-course" / "source").glob("*-centre/centre.ipynb"))
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        assert "kit/tests/test_centre.py" in archive.namelist()
    # The line the tutorial quotes is the one course check prints.
    quoted = next(line for line in blocks("text")[0].splitlines() if line.startswith("fix: "))
    catalogue = tmp_path / "my-course" / "mutants" / "centre.toml"
    catalogue.write_text(catalogue.read_text(encoding="utf-8") + (
        '\n[[mutant]]\nid = "centre-unseen"\ndescription = "I wrote the same thing differently."\n'
        'hint = "None."\nreplace = "keepdims=True)"\nwith = "keepdims=True, )"\n'), encoding="utf-8")
    assert cli.main(["course", "check", "--course", "my-course", "--exercise", "centre"]) == 1
    assert quoted in capsys.readouterr().out.splitlines()
