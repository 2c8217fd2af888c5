"""The one scoring rule: every tool's float sum of the shares is the maximum exactly.

nbgrader, Gradescope and GitHub Classroom's reporter add the tests' points up
as binary floats; these tests check, for every exercise of the manifest (with
its real tests, visible and hidden) and for every output the kit writes, that
those sums are the maxima exactly, not 23.99999999999999 or 10.0005.
"""

from __future__ import annotations

import csv
import io
import random
from fractions import Fraction
from pathlib import Path

import pytest

from grader import scoring
from grader.curriculum import ROOT, load
from grader.grading import report
from grader.grading.formats.grades_csv import gradebook_csv
from grader.grading.records import TestRecord
from grader.student.notebook import collect_tests
from grader.suite import graded_suite

HIDDEN = ROOT / "grader" / "hidden_tests"


@pytest.fixture(scope="module")
def suite() -> tuple[list, dict[str, list[str]]]:
    """The whole graded suite (both parts, hidden tests too) and each file's tests in file order."""
    files, _ = graded_suite(HIDDEN, load().names)
    return files, {f.path: collect_tests(f.path) for f in files}


def pools(suite) -> dict[str, tuple[float, int]]:
    """Pool -> (its points, its number of tests), counted here from the manifest and the files."""
    files, names = suite
    curriculum = load()
    counted: dict[str, tuple[float, int]] = {}
    for test_file in files:
        if test_file.points is not None:
            points = test_file.points
        else:
            points = curriculum.exercise(test_file.exercise).points
        previous = counted.get(test_file.pool, (points, 0))[1]
        counted[test_file.pool] = (points, previous + len(names[test_file.path]))
    return counted


# ------------------------------------------------------------------------------------ the rule itself


def test_equal_shares_are_not_exact_in_any_tool() -> None:
    """The problem the rule solves (the instructor's numbers): equal shares do not add up."""
    assert sum([24 / 23] * 23) != 24
    assert sum([round(10 / 15, 4)] * 15) == pytest.approx(10.0005)
    assert sum([0.01] * 2400) != 24  # even shares exact in decimal are not exact in binary


def test_every_pool_splits_into_positive_sixteenths_that_add_up_exactly(suite) -> None:
    counted = pools(suite)
    assert len(counted) >= 2 * len(load().exercises)  # every exercise has visible and hidden tests
    generator = random.Random(26)
    for pool, (points, tests) in counted.items():
        shares = scoring.shares(points, tests)
        assert len(shares) == tests > 0, pool
        assert all(share > 0 and (share * 16).is_integer() for share in shares), (pool, shares)
        assert max(shares) - min(shares) <= 1 / 16, (pool, shares)  # as equal as sixteenths allow
        assert abs(min(shares) - points / tests) < 1 / 16 and abs(max(shares) - points / tests) < 1 / 16
        assert sum(shares) == points and sum(reversed(shares)) == points, pool
        for _ in range(20):  # any selection of passing tests, added in any order, is exact as well
            passed = [s for s in shares if generator.random() < 0.5]
            generator.shuffle(passed)
            assert sum(passed) == float(sum(Fraction(s) for s in passed)), pool


def test_a_whole_course_adds_up_exactly(suite) -> None:
    """One long float sum over every test of both parts (a single notebook, one Gradescope submission)."""
    counted = pools(suite)
    everything = [share for points, tests in counted.values() for share in scoring.shares(points, tests)]
    curriculum = load()
    assert sum(everything) == sum(e.points + e.hidden_points for e in curriculum.exercises)


def test_the_larger_shares_are_spread_through_the_file() -> None:
    shares = scoring.shares(10, 15)  # 160 sixteenths for 15 tests: 10 of them get 11, 5 get 10
    assert sorted(set(shares)) == [0.625, 0.6875] and shares.count(0.6875) == 10
    assert shares[:5] != [0.6875] * 5 and shares[-5:] != [0.6875] * 5  # not all at one end
    assert scoring.earned(10, [True] * 15) == 10 and scoring.earned(10, [False] * 15) == 0
    assert scoring.earned(10, [True] + [False] * 14) == shares[0]


@pytest.mark.parametrize("points, tests, message", [
    (0.1, 3, r"multiple of 0\.0625"),
    (-2, 3, r"non-negative"),
    (float("nan"), 3, r"finite"),
    (1, 20, r"every test worth something"),
    (10, -1, r"tests \(-1\)"),
])
def test_points_the_rule_cannot_split_are_refused_naming_them(points, tests, message) -> None:
    with pytest.raises(ValueError, match=message):
        scoring.shares(points, tests)


def test_points_are_written_with_at_most_four_decimals() -> None:
    assert [scoring.number(v) for v in (24.0, 9.375, 123.0625, 0.0, 2 / 3)] == ["24", "9.375", "123.0625", "0",
                                                                                "0.6667"]


# ------------------------------------------------------------------------------------ every output


def _all_passed(suite) -> dict:
    """results.json of a student whose every test passed (the grader's own scoring of fabricated records)."""
    files, names = suite
    records = [TestRecord(nodeid=f"{f.path}::{name}", file=f.path, exercise=f.exercise, outcome="passed")
               for f in files for name in names[f.path]]
    tests = report.score_tests(records, files, {})
    return report.results_json(student="ada", status="graded", tests=tests, execution_time=1.0, output="",
                               extra={})


def test_results_json_and_gradescope_sums_are_the_maxima_exactly(suite) -> None:
    results = _all_passed(suite)
    curriculum = load()
    maximum = sum(e.points + e.hidden_points for e in curriculum.exercises)
    tests = results["tests"]
    # Gradescope adds the tests' scores and max_scores itself: exact, in the file's order or any other.
    assert sum(t["score"] for t in tests) == sum(t["max_score"] for t in tests) == maximum
    assert sum(t["score"] for t in reversed(tests)) == maximum
    assert results["score"] == results["extra_data"]["max_score"] == maximum
    for exercise in curriculum.exercises:
        mine = [t["score"] for t in tests if t["extra_data"]["exercise"] == exercise.name]
        maximum = exercise.points + exercise.hidden_points
        assert sum(mine) == results["extra_data"]["exercises"][exercise.name] == maximum
    text = report.results_text(results)
    assert "0.99999" not in text and "0000001" not in text


def test_the_gradebook_columns_add_up_to_the_total(suite) -> None:
    results = _all_passed(suite)
    half = dict(results, tests=[dict(t, score=0.0) if i % 2 else t for i, t in enumerate(results["tests"])])
    half = report.results_json(student="bob", status="graded", tests=half["tests"], execution_time=1.0,
                               output="", extra={})
    rows = list(csv.DictReader(io.StringIO(gradebook_csv([results, half]))))
    names = load().selected_names()
    for row in rows:
        cells = [Fraction(row[name]) for name in names]  # the written decimals, read exactly
        assert sum(cells) == Fraction(row["score"]), row["student"]
    assert rows[0]["score"] == rows[0]["max_score"] == scoring.number(results["score"])


def test_notebook_cell_points_add_up_exactly() -> None:
    from grader.authoring.notebooks import graded_tests

    tests = graded_tests(HIDDEN)
    curriculum = load()
    for exercise in curriculum.exercises:
        points = [t.points for t in tests[exercise.name]]
        assert all(p > 0 for p in points)
        assert sum(points) == exercise.points + exercise.hidden_points, exercise.name
    assert sum(t.points for ts in tests.values() for t in ts) == sum(
        e.points + e.hidden_points for e in curriculum.exercises)  # the single notebook


def _alembic_on_path(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nbgrader's Gradebook runs the ``alembic`` command: give it this Python's when no script is on PATH."""
    import os
    import shutil
    import sys

    if shutil.which("alembic"):
        return
    folder.mkdir()
    script = folder / "alembic"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m alembic "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def test_nbgraders_own_sum_of_the_cells_is_the_maximum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nbgrader adds the cells' points in its database (SQL SUM over floats): the export's max_score."""
    pytest.importorskip("nbgrader")
    from nbgrader.api import Gradebook

    _alembic_on_path(tmp_path / "bin", monkeypatch)

    from grader.authoring.notebooks import graded_tests

    tests = graded_tests(HIDDEN)
    curriculum = load()
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        for exercise in curriculum.exercises:
            gradebook.add_assignment(exercise.name)
            gradebook.add_notebook(exercise.name, exercise.name)
            for test in tests[exercise.name]:
                gradebook.add_grade_cell(test.grade_id, exercise.name, exercise.name, max_score=test.points,
                                         cell_type="code")
        for exercise in curriculum.exercises:
            maximum = gradebook.find_assignment(exercise.name).max_score
            assert maximum == exercise.points + exercise.hidden_points, (exercise.name, maximum)
            assert repr(float(maximum)) == f"{exercise.points + exercise.hidden_points:.1f}"  # what export prints


def test_the_classroom_reporter_total_is_the_maximum_exactly(capsys) -> None:
    """Each step's tests' scores add up to its max_score, and the reporter's sum of all steps to the total."""
    from grader.student import classroom
    from grader.student.status import run_suite

    curriculum = load()
    names = curriculum.names
    ran = run_suite(str(ROOT / "solutions"), names)
    overall = 0.0
    for name in names:
        result = classroom._runner_format(ran[name])
        scores = [t["score"] for t in result["tests"]]
        assert sum(scores) == result["max_score"] == curriculum.exercise(name).points, name
        overall += sum(scores)
    assert overall == sum(e.points for e in curriculum.exercises)
    assert classroom.main(["softmax", "--impl", str(ROOT / "solutions")]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    tests, points = ran["softmax"].total, curriculum.exercise("softmax").points
    assert line.startswith(f"softmax: {tests}/{tests} tests, {points:g}/{points:g} points"), line


@pytest.mark.parametrize("appended, said", [
    ("def broken(:\n", "softmax.py does not import: syntax error in softmax.py line {line}: invalid syntax"),
    ("undefined_name\n", "softmax.py does not import: NameError: name 'undefined_name' is not defined "
                         "(softmax.py line {line})"),
])
def test_the_classroom_log_names_an_import_failure(appended: str, said: str, tmp_path: Path, capsys) -> None:
    import shutil

    from grader.student import classroom

    impl = shutil.copytree(ROOT / "solutions", tmp_path / "impl", ignore=shutil.ignore_patterns("__pycache__"))
    module = impl / "softmax.py"
    text = module.read_text(encoding="utf-8").rstrip("\n") + "\n"
    module.write_text(text + appended, encoding="utf-8")
    assert classroom.main(["softmax", "--impl", str(impl)]) == 0  # the tests ran; the reporter marks them failed
    out = capsys.readouterr().out
    assert said.format(line=text.count("\n") + 1) in out.splitlines(), out


def test_hidden_points_the_rule_cannot_split_are_refused_naming_the_file(tmp_path: Path) -> None:
    from grader.suite import hidden_test_files

    path = tmp_path / "test_extra_softmax.py"
    path.write_text("EXERCISE = 'softmax'\nPOINTS = 0.1\n\n\ndef test_a(impl):\n    pass\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"test_extra_softmax\.py: POINTS must be a multiple of 0\.0625"):
        hidden_test_files(tmp_path)
    path.write_text("EXERCISE = 'softmax'\nPOINTS = 2.5\n\n\ndef test_a(impl):\n    pass\n", encoding="utf-8")
    assert [f.points for f in hidden_test_files(tmp_path)] == [2.5]


@pytest.mark.parametrize("why", ["missing", "not graded"])
def test_an_exercise_that_could_not_be_graded_keeps_its_hidden_points_out_of_the_public_maximum(suite, why) -> None:
    # One visible row stands for the whole exercise (public and hidden points): Gradescope's text said
    # "Score: 20 / 285 (public tests) ... worth 51 more" for a student missing decoding.py, 280 and 56 for the rest.
    files, names = suite
    curriculum = load()
    lost = curriculum.exercises[-1]
    records = [TestRecord(nodeid=f"{f.path}::{name}", file=f.path, exercise=f.exercise, outcome="passed")
               for f in files for name in names[f.path] if why == "missing" or f.exercise != lost.name]
    problems = {lost.name: f"missing module {lost.name}"} if why == "missing" else {}
    tests = report.score_tests(records, files, problems, "the grader crashed" if why == "not graded" else None)
    public = sum(e.points for e in curriculum.exercises)
    hidden = sum(e.hidden_points for e in curriculum.exercises)
    assert lost.hidden_points > 0
    line = report.visible_score_line(tests)
    expected = f"Score: {scoring.number(public - lost.points)} / {scoring.number(public)} (public tests)"
    assert line.startswith(expected), line
    assert f"worth {scoring.number(hidden)} more points (total {scoring.number(public + hidden)})" in line


def test_a_failure_quoting_terminal_and_bidi_characters_reaches_results_json_escaped(suite) -> None:
    # A student's exception message and prints: ESC, BEL, a C1 CSI and a right-to-left override, which Gradescope
    # would show decoded from results.json (its JSON escapes are undone by any reader).
    files, names = suite
    hostile = "\x1b[2J\x1b[32m PASSED \x1b]0;pwned\x07 \u202egnirts \x9bx"
    records = [TestRecord(nodeid=f"{f.path}::{name}", file=f.path, exercise=f.exercise, outcome="failed",
                          message=f"ValueError: {hostile}\nsecond line\tand a tab", output=f"printed {hostile}")
               for f in files[:1] for name in names[files[0].path][:1]]
    results = report.results_json(student="ada", status="graded", tests=report.score_tests(records, files, {}),
                                  execution_time=1.0, output="", extra={})
    output = next(test["output"] for test in results["tests"] if "second" in test["output"])
    for character in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert character not in output, repr(character)
    assert "\\x1b[2J" in output and "\\u202egnirts" in output and "\\x9bx" in output
    assert "\nsecond line\tand a tab" in output and "Output printed during the test:\nprinted \\x1b" in output


def test_what_the_code_printed_reaches_the_top_text_escaped_and_indented() -> None:
    # Gradescope shows results.json's top-level output: a print of ESC, a right-to-left override and NUL, and lines
    # that imitate the grader's own ("Status: ok", "Score: 120 / 120"), right under the real header.
    from grader.grading.scored import scored_row

    printed = "\x1b[2J\u202eevil\x00\nStatus: ok\nScore: 120 / 120"
    row = scored_row(student="mallory", status="ok", tests=(), seconds=1.0, output=printed)
    for character in ("\x1b", "\u202e", "\x00"):
        assert character not in row.output, repr(character)
    shown = row.output.split("Output of your code", 1)[1]
    assert "\n    Status: ok\n    Score: 120 / 120" in shown, shown
    assert not any(line.startswith(("Status:", "Score:")) for line in shown.splitlines()), shown
