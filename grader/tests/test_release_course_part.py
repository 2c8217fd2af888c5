"""A release built with a course folder and ``--part`` carries the part into the student's manifest.

Found following docs/courses.md on the final code: `attention-kit course init my-course`, then in
my-course `attention-kit release --part 3 ../student` wrote a README of 80 points but a manifest of
part "all", so the student's `status` counted all 15 exercises (4, 7, 10 and 11 "no tests", the given
ones as "done" with points) out of 280 points.
"""

from __future__ import annotations

import tomllib

from grader import cli, course
from grader.curriculum import PART_ENV, ROOT, load


def test_release_part_with_a_course_folder_is_the_students_part(tmp_path, monkeypatch, capsys):
    for variable in (course.COURSE_ENV, PART_ENV):  # main sets both for its children: none left behind
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    monkeypatch.chdir(ROOT)
    folder = tmp_path / "my-course"
    folder.mkdir()
    (folder / "course.toml").write_text('[course]\ntitle = "Week 9"\npart = "all"\n', encoding="utf-8")
    out = tmp_path / "student"
    assert cli.main(["release", "--part", "3", "--course", str(folder), "--no-git", str(out)]) == 0
    capsys.readouterr()
    manifest_path = out / "grader" / "curriculum.toml"
    manifest = tomllib.loads(manifest_path.read_text(encoding="utf-8"))
    assert manifest["course"]["part"] == "3"
    assert manifest["course"]["title"] == "Week 9"  # the course's view stays
    monkeypatch.delenv(PART_ENV)
    monkeypatch.delenv(course.COURSE_ENV, raising=False)
    released = load(manifest_path)
    assert released.selected_names() == ("negation", "distance", "retrieval", "tokenization")
    assert "training" in released.given_names()


def test_a_release_without_given_code_stops_in_the_documented_line(tmp_path, monkeypatch, capsys):
    # docs/release.md shows `error: the course builds on softmax, ...` (exit 2, as a missing reference); an
    # installed kit with a course folder lacking given/ printed `attention-kit release: the course ...`, exit 1.
    from grader.sandbox import given

    for variable in (course.COURSE_ENV, PART_ENV):
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(given, "folder", lambda: None)
    status = cli.main(["release", "--part", "3", "--no-git", str(tmp_path / "student")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("error: the course builds on softmax, projections, attention, positional, multihead, "
                          "backward, training, which it does not assign: no given implementations"), err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "student").exists()


def test_the_release_readme_says_what_the_first_pytest_prints(monkeypatch):
    # The set-up block promised `"not implemented yet"` for each test; the first run prints none of that
    # (tests/first_run.py): one NOT STARTED line per exercise (grader/tests/test_first_run.py).
    from grader.authoring.release import plan_release

    for variable in (course.COURSE_ENV, PART_ENV):
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    monkeypatch.chdir(ROOT)
    readme = plan_release().texts["README.md"]
    setup = readme.split("## Set up", 1)[1].split("```", 2)[1]
    first = next(line for line in setup.splitlines() if line.startswith("pytest "))
    assert "NOT STARTED" in first and "not implemented yet" not in first, first
