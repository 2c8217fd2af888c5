"""The hidden tests: declared per exercise, passing on the reference, failing on the stubs."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from grader.curriculum import ROOT, load
from grader.hidden_tests import HIDDEN_DIR, catalogue
from grader.tests.waiting import HANG_SECONDS


def run_hidden(tmp_path: Path, *options: str) -> ET.Element:
    report = tmp_path / "hidden.xml"
    subprocess.run([sys.executable, "-m", "pytest", "grader/hidden_tests", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={report}", *options], cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    return ET.parse(report).getroot()


def test_every_exercise_has_hidden_tests_with_points() -> None:
    files = catalogue()
    names = load().names
    assert [f.exercise for f in files] == list(names)  # one file per exercise, in curriculum order
    for hidden in files:
        assert hidden.points > 0 and len(hidden.tests) >= 5, hidden.path.name
        assert hidden.points_per_test == hidden.points / len(hidden.tests)
        assert hidden.path.name.startswith(f"test_hidden_{hidden.path.name[12:14]}_{hidden.exercise}")


def test_hidden_files_do_not_shadow_public_test_names() -> None:
    public = {Path(e.test_file).name for e in load().exercises}
    assert not public & {path.name for path in HIDDEN_DIR.glob("test_*.py")}


def test_no_hidden_test_name_is_in_two_exercises() -> None:
    # A result, a gradebook column or a reader that goes by a test's name alone must never take one exercise's test
    # for another's: exercise 3's failing test_masks_broadcast_over_two_batch_axes was read as exercise 6's.
    owners: dict[str, set[str]] = {}
    for hidden in catalogue():
        for test in hidden.tests:
            owners.setdefault(test, set()).add(hidden.exercise)
    assert {test: sorted(names) for test, names in owners.items() if len(names) > 1} == {}


def test_all_pass_on_the_reference(tmp_path: Path) -> None:
    suite = run_hidden(tmp_path, "--impl", "solutions")
    cases = list(suite.iter("testcase"))
    assert len(cases) == sum(len(f.tests) for f in catalogue())
    problems = [case.get("name") for case in cases
                if case.find("failure") is not None or case.find("error") is not None]
    assert not problems
    assert not list(suite.iter("skipped"))


def test_all_fail_on_the_stubs_as_not_implemented(tmp_path: Path) -> None:
    suite = run_hidden(tmp_path)  # default --impl: the exercises/ stubs
    cases = list(suite.iter("testcase"))
    assert cases and not list(suite.iter("error"))
    for case in cases:
        failure = case.find("failure")
        assert failure is not None and "not implemented yet" in (failure.get("message") or ""), case.get("name")


def test_exercise_markers_select_hidden_tests(tmp_path: Path) -> None:
    suite = run_hidden(tmp_path, "--impl", "solutions", "-m", "masks")
    files = {case.get("classname") for case in suite.iter("testcase")}
    assert files == {"grader.hidden_tests.test_hidden_04_masks"}
