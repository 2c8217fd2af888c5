"""The given implementations (grader/release_files/given/): what a release hands out as working code.

A release ships the exercises its selection builds on and does not assign as
working code marked given (``grader/authoring/release_given.py``). That code
is a second implementation, not the reference: these tests check it passes
the same public tests, holds no line of the reference, says it is given, and
exists for every exercise some selection of the kit builds on.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import course
from grader.authoring.release_allowlist import ReleaseError
from grader.authoring.release_given import GIVEN_MARK, given_files
from grader.curriculum import ROOT, load
from grader.sandbox.given import KIT_GIVEN as GIVEN_DIR
from grader.tests.reference_lines import find_leaks, folder_texts, reference_lines
from grader.tests.test_release import _normalise, reference_bodies
from grader.tests.waiting import HANG_SECONDS


def given_modules() -> list[Path]:
    return sorted(GIVEN_DIR.glob("*.py"))


def test_every_exercise_a_selection_builds_on_has_a_given_implementation() -> None:
    curriculum = load()
    needed = {name for part in curriculum.parts for name in curriculum.given_names(part)}
    assert {"softmax", "training"} <= needed  # Parts II and III build on Part I and on exercise 9
    have = {path.stem for path in given_modules()}
    assert needed <= have, f"no given implementation of {sorted(needed - have)} (grader/release_files/given/)"
    assert have <= set(curriculum.names), f"given files of no exercise: {sorted(have - set(curriculum.names))}"


def test_the_given_implementations_pass_their_public_tests(tmp_path: Path) -> None:
    folder = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", folder)  # the stubs and the given task modules, as a release has them
    for path in given_modules():
        shutil.copyfile(path, folder / path.name)
    files = [load().exercise(path.stem).test_file for path in given_modules()]
    done = subprocess.run([sys.executable, "-m", "pytest", *files, f"--impl={folder}", "-q", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "-o", "addopts="], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_no_given_file_holds_a_line_or_two_body_lines_of_the_reference() -> None:
    leaks = find_leaks(folder_texts(GIVEN_DIR), reference_lines())
    assert not leaks, "\n".join(leaks)
    bodies = reference_bodies()
    found = []
    for path in given_modules():
        lines = [_normalise(line) for line in path.read_text(encoding="utf-8").splitlines()]
        pairs = set(zip(lines, lines[1:], strict=False))
        for name, body in bodies.items():
            found += [f"{path.name}: {name} {pair!r}" for pair in set(zip(body, body[1:], strict=False)) & pairs]
    assert not found, "\n".join(found)


def test_every_given_file_says_it_is_given_and_where_to_read() -> None:
    for path in given_modules():
        docstring = path.read_text(encoding="utf-8").split('"""')[1]
        exercise = load().exercise(path.stem)
        assert docstring.startswith(f"Exercise {exercise.number}, {exercise.name}: {GIVEN_MARK}"), path.name
        assert exercise.test_file in docstring and f"docs/reading.md#{exercise.reading[0]}" in docstring, path.name


def test_a_selection_building_on_an_exercise_without_a_given_file_stops_the_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    part_3, part_2 = _selection("3"), _selection("2")
    partial = tmp_path / course.GIVEN_FOLDER  # a course folder's copy, which is read before the checkout's
    partial.mkdir()
    for path in given_modules():
        if path.stem != "training":
            shutil.copyfile(path, partial / path.name)
    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path))
    with pytest.raises(ReleaseError, match=r"build on exercise 9, training, which the course does not assign"):
        given_files(part_3)
    texts, tests = given_files(part_2)  # Part II builds on Part I only: it needs no training
    assert "exercises/softmax.py" in texts and "tests/test_01_softmax.py" in tests


def test_where_no_given_code_is_found_a_build_stops_and_fair_grading_asks_the_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An installed kit (the wheel holds no given code) with a course folder made without --kit, or none.
    from grader.authoring import notebooks
    from grader.sandbox import given

    part_3 = _selection("3")
    monkeypatch.setattr(given, "PACKAGE", tmp_path / "site-packages" / "grader")
    (tmp_path / course.COURSE_FILE).write_text("[course]\n", encoding="utf-8")  # the kit's settings
    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path))
    assert given.folder() is None and given.usable(ROOT / "solutions", load()) == frozenset()
    with pytest.raises(ReleaseError) as stopped:
        given_files(part_3)
    line = str(stopped.value)
    assert "\n" not in line and "softmax" in line and "course init DIR --kit CHECKOUT" in line
    assert f"looked in {tmp_path / course.GIVEN_FOLDER} and {tmp_path / 'site-packages'}" in line
    with pytest.raises(RuntimeError, match=r"give exercise softmax: no given implementations .* --kit CHECKOUT"):
        notebooks.working_code("softmax")  # never the reference's code instead
    assert given_files(_selection("1")) == ({}, [])  # Part I builds on nothing: it needs none


def test_the_course_folders_given_code_comes_before_the_checkouts(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.curriculum import PACKAGE
    from grader.sandbox import given

    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path))
    assert given.folder() == GIVEN_DIR == PACKAGE / "release_files" / "given"  # the course has none: the checkout's
    (tmp_path / course.GIVEN_FOLDER).mkdir()
    assert given.folder() == GIVEN_DIR  # an empty folder is none
    shutil.copyfile(GIVEN_DIR / "softmax.py", tmp_path / course.GIVEN_FOLDER / "softmax.py")
    assert given.folder() == tmp_path / course.GIVEN_FOLDER


def _selection(part: str) -> object:
    """The kit's curriculum seen as a course of ``part`` (what the release command sees with that part)."""
    import dataclasses

    return dataclasses.replace(load(), part=part)


def test_fair_grading_sends_the_course_folders_given_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An installed kit's course folder: the view's request carries its copy, not a file the package no longer has.
    from grader.sandbox.given_views import GivenViews

    (tmp_path / course.GIVEN_FOLDER).mkdir()
    mine = GIVEN_DIR.joinpath("softmax.py").read_text(encoding="utf-8") + "\n# the course's copy\n"
    (tmp_path / course.GIVEN_FOLDER / "softmax.py").write_text(mine, encoding="utf-8")
    monkeypatch.setenv(course.COURSE_ENV, str(tmp_path))
    header = {"view": "attention"}
    GivenViews({"softmax"}, {"attention": ["softmax"]}).attach(header)
    assert header["given"] == {"softmax": mine}
