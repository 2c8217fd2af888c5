"""The first ``pytest`` of a fresh copy says where to start, on one screen (``tests/first_run.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load
from grader.tests.test_student_loop import SOLUTIONS, make_partial
from grader.tests.waiting import HANG_SECONDS

SCREEN = 40  # lines, pytest's header and summary included


def run_pytest(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``pytest`` as a student types it, from the kit's folder, with pytest's own settings only."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("PYTEST_") and key not in ("CI", "BUILD_NUMBER")}
    environment["COLUMNS"] = "80"
    return subprocess.run([sys.executable, "-m", "pytest", *arguments, "-p", "no:cacheprovider"], cwd=ROOT,
                          capture_output=True, text=True, env=environment, timeout=HANG_SECONDS)


def not_started_line(number: int, name: str, folder: str) -> re.Pattern[str]:
    """The line of a not-started exercise: number and name, file, tests, command, section of the reading."""
    section = load().exercise(name).reading_of()
    return re.compile(rf"^NOT STARTED +{number}\. {name} +{re.escape(folder)}/{name}\.py +(\d+) tests? +"
                      rf"pytest -m {name}(?: --impl=\S+)? +docs/reading\.md#{section}$", flags=re.MULTILINE)


def test_the_first_run_of_a_fresh_copy_fits_on_a_screen_and_names_every_exercise_once():
    done = run_pytest()  # the stubs of exercises/, as the README's first command
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout[-3000:]
    assert len(lines) <= SCREEN, f"{len(lines)} lines:\n{done.stdout[:3000]}"
    collected = int(re.search(r"^collected (\d+) items", done.stdout, flags=re.MULTILINE)[1])
    assert re.fullmatch(rf"=+ {collected} failed in [\d.]+s( \([\d:]+\))? =+", lines[-1]), lines[-1]
    counts = 0
    for exercise in load().exercises:
        found = not_started_line(exercise.number, exercise.name, "exercises").findall(done.stdout)
        assert len(found) == 1, f"exercise {exercise.number}, {exercise.name}: {len(found)} lines\n{done.stdout}"
        counts += int(found[0])
    assert counts == collected, "the lines' test counts are not the run's"
    assert "FAILURES" not in done.stdout and "not implemented yet" not in done.stdout, done.stdout


def test_the_first_started_exercise_shows_its_failures_in_full(tmp_path: Path):
    folder = make_partial(tmp_path / "work", done=("softmax",))  # exercise 1 done
    source = (SOLUTIONS / "projections.py").read_text(encoding="utf-8")
    assert "out = out + bias" in source
    (folder / "projections.py").write_text(source.replace("out = out + bias", "out = out - bias"),
                                           encoding="utf-8")  # exercise 2 started, and wrong
    done = run_pytest("-m", "softmax or projections or attention", f"--impl={folder}")
    assert done.returncode == 1, done.stdout[-3000:]
    failures = done.stdout.split("= FAILURES =", 1)[-1]
    assert "= FAILURES =" in done.stdout and "expected:" in failures and "revisit:" in failures, done.stdout
    failed = set(re.findall(r"^FAILED (tests/test_\d+_\w+)\.py::", done.stdout, flags=re.MULTILINE))
    assert failed == {"tests/test_02_projections"}, done.stdout
    shown = str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder)
    attention = not_started_line(3, "attention", shown).findall(done.stdout)
    assert len(attention) == 1 and f"pytest -m attention --impl={folder} " in done.stdout, done.stdout
    assert "NOT STARTED" not in done.stdout.replace("NOT STARTED  3. attention", "", 1), done.stdout
    summary = re.search(r"=+ (\d+) failed, (\d+) passed", done.stdout.splitlines()[-1])
    assert summary is not None, done.stdout.splitlines()[-1]
    projections = done.stdout.count("\nFAILED tests/test_02_projections.py::")
    assert int(summary[1]) == projections + int(attention[0]) and int(summary[2]) >= 15, done.stdout


@pytest.mark.parametrize("selection", [["-m", "softmax"], ["-x"]], ids=["one exercise", "stopped at the first"])
def test_a_run_that_cannot_tell_or_asks_for_one_exercise_shows_the_stubs_failures(selection: list[str]):
    # `pytest -m softmax` is the command the line gives: it must not answer with the same line.
    done = run_pytest(*selection)
    assert done.returncode == 1 and "NOT STARTED" not in done.stdout, done.stdout
    assert "softmax: not implemented yet (exercise 1, softmax.py" in done.stdout, done.stdout


def test_a_function_written_on_top_of_a_stub_makes_its_exercise_started(tmp_path: Path):
    # qkv_projections is written and calls linear, still a stub: every test fails on "not implemented yet",
    # but not every function is a stub, so the failures show (linear's message says what to write next).
    folder = make_partial(tmp_path / "work", done=())
    stub = "    raise NotImplementedError('qkv_projections: not implemented yet"
    source = (folder / "projections.py").read_text(encoding="utf-8")
    start = source.index(stub)
    written = source[:start] + "    return linear(x, w_q), linear(x, w_k), linear(x, w_v)" + \
        source[source.index("\n", start):]
    (folder / "projections.py").write_text(written, encoding="utf-8")
    done = run_pytest("-m", "projections or attention", f"--impl={folder}")
    assert done.returncode == 1 and "= FAILURES =" in done.stdout, done.stdout
    assert "linear: not implemented yet (exercise 2" in done.stdout.split("= FAILURES =", 1)[1], done.stdout
    assert re.findall(r"^NOT STARTED +(\d+)\. ", done.stdout, flags=re.MULTILINE) == ["3"], done.stdout


def test_a_run_from_the_exercises_folder_says_where_the_tests_are():
    # From exercises/ pytest collected nothing and said only "no tests ran" (a README walk).
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "softmax", "-p", "no:cacheprovider"],
                          cwd=ROOT / "exercises", capture_output=True, text=True, timeout=HANG_SECONDS,
                          env={key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")})
    assert f"the kit's tests are in {ROOT / 'tests'}; run pytest from the kit's folder" in done.stdout, done.stdout
