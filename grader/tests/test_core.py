"""The kit's own invariants: stubs in sync, golden values current, stubs fail cleanly."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from grader.authoring import golden, sync
from grader.curriculum import ROOT, load
from grader.tests.waiting import HANG_SECONDS


def test_exercises_are_the_reference_with_bodies_removed():
    stale = sync.out_of_date()
    assert not stale, f"exercises/ is out of date with solutions/ ({stale}): run `python -m grader.authoring.sync`"


def test_every_public_reference_function_is_in_the_manifest():
    import ast

    for exercise in load().exercises:
        tree = ast.parse((ROOT / "solutions" / exercise.module_file).read_text(encoding="utf-8"))
        public = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
        assert public == list(exercise.functions), (
            f"solutions/{exercise.module_file} defines {public}, the manifest lists {list(exercise.functions)}"
        )


def test_golden_values_are_current():
    assert golden.is_current(), "tests/data/golden.npz is out of date: run `python -m grader.authoring.golden`"


def _run_suite(tmp_path: Path, impl: str) -> list[tuple[str, str, str]]:
    report = tmp_path / f"{Path(impl).name}.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "tests", f"--impl={impl}", "-q", "-p", "no:cacheprovider",
         f"--junitxml={report}"],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS,
    )
    assert report.is_file(), "pytest wrote no report: it could not start"
    results = []
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, text = child.tag, (child.get("message") or "") + (child.text or "")
        results.append((f"{case.get('classname')}::{case.get('name')}", outcome, text))
    return results


def test_every_graded_test_fails_on_the_stubs_as_not_implemented(tmp_path):
    results = _run_suite(tmp_path, "exercises")
    assert len(results) >= len(load().exercises) * 5, f"only {len(results)} graded tests were collected"
    wrong = [(name, outcome) for name, outcome, text in results if outcome != "failure"]
    assert not wrong, f"on the stubs these tests did not fail (or errored): {wrong}"
    unclear = [name for name, _, text in results if "not implemented yet" not in text]
    assert not unclear, f"these failures on the stubs do not say 'not implemented yet': {unclear}"
    for name, _, text in results:
        assert "site-packages" not in text and "_pytest" not in text, f"{name}: traceback through pytest internals"


def test_each_exercise_has_its_graded_tests():
    for exercise in load().exercises:
        assert (ROOT / exercise.test_file).is_file(), f"{exercise.test_file} is missing"


def test_readme_exercise_table_is_current():
    from grader.authoring import readme

    text = readme.README.read_text(encoding="utf-8")
    assert readme.render(text) == text, \
        "README.md's exercise table is out of date: run `python -m grader.authoring.readme`"
