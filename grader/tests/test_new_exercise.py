"""``python -m grader.authoring.new_exercise``: a throw-away exercise added to a copy of the kit works.

The end-to-end test copies the kit, adds an exercise in a new part (3) with
the command, runs the regeneration commands there as CONTRIBUTING.md says,
and grades the new exercise: its graded and hidden tests pass on the
reference and fail as "not implemented yet" on the stub.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.authoring import new_exercise
from grader.authoring.new_exercise import NewExerciseError, manifest_entry, plan
from grader.curriculum import ROOT, load
from grader.tests.waiting import HANG_SECONDS

NAME = "throwaway"
# The kit's tree, as a maintainer has it (no .git, no caches).
KIT_ENTRIES = ("grader", "tests", "solutions", "exercises", "docs", "benchmarks", "conftest.py", "pyproject.toml",
               "README.md", "LICENSE")


@pytest.mark.parametrize(("arguments", "argument"), [
    (("softmax",), "NAME 'softmax'"),
    (("Bad-Name",), "NAME 'Bad-Name'"),
    (("class",), "NAME 'class'"),
    (("tests",), "NAME 'tests'"),
    (("_tasks",), "NAME '_tasks'"),
    (("fresh", "--function", "softmax"), "--function 'softmax'"),
    (("fresh", "--function", "_private"), "--function '_private'"),
    (("fresh", "--part", "0"), "--part '0'"),
    (("fresh", "--part", "III"), "--part 'III'"),
    (("fresh", "--reading", "nowhere"), "--reading 'nowhere'"),
    (("fresh", "--points", "0"), "--points 0"),
])
def test_a_bad_argument_is_refused_in_one_line_naming_it(arguments, argument, capsys, monkeypatch) -> None:
    monkeypatch.setattr(new_exercise, "create", lambda new: pytest.fail(f"{arguments} was accepted"))
    before = (ROOT / "grader" / "curriculum.toml").read_text(encoding="utf-8")
    assert new_exercise.main(list(arguments)) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"new_exercise: {argument}") and error.count("\n") == 1, error
    assert (ROOT / "grader" / "curriculum.toml").read_text(encoding="utf-8") == before
    assert not (ROOT / "solutions" / "fresh.py").exists()


def test_the_manifest_entry_is_the_exercise_and_its_defaults() -> None:
    curriculum = load()
    new = plan(curriculum, "fresh_idea", title='A "quoted" title', part="3")
    assert new.number == len(curriculum.exercises) + 1 and new.function == "fresh_idea" and new.part == 3
    (entry,) = tomllib.loads(manifest_entry(new))["exercise"]
    assert entry == {
        "name": "fresh_idea", "title": 'A "quoted" title', "test_file": f"tests/test_{new.number:02d}_fresh_idea.py",
        "functions": ["fresh_idea"], "depends": [], "part": 3, "reading": ["attention"], "points": 10,
        "hidden_points": 2, "hint_step": new_exercise.EXAMPLE_HINT_STEP, "hints": list(new_exercise.EXAMPLE_HINTS),
    }
    assert plan(curriculum, "other").part == curriculum.exercises[-1].part  # default: the last exercise's part
    with pytest.raises(NewExerciseError, match="^NAME 'masks': exercise 4 "):
        plan(curriculum, "masks")


def test_every_template_marker_is_replaced_and_the_files_parse() -> None:
    import ast

    new = plan(load(), "fresh", function="centre")
    for template in new.files:
        text = new_exercise.render(template, new)
        assert "@@" not in text, template
        if template.endswith(".py.tmpl"):
            tree = ast.parse(text)
            assert "centre" in text and ast.get_docstring(tree), template
        else:
            (mutant,) = tomllib.loads(text)["mutant"]
            assert mutant["id"].startswith("fresh-") and mutant["replace"] in new_exercise.render("solution.py.tmpl",
                                                                                                   new)


def kit_copy(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", ".ruff_cache")
    for entry in KIT_ENTRIES:
        source = ROOT / entry
        if source.is_dir():
            shutil.copytree(source, target / entry, ignore=ignore)
        else:
            shutil.copyfile(source, target / entry)
    return target


def run(root: Path, *arguments: str) -> subprocess.CompletedProcess:
    """``python ARGUMENTS`` in the copy, which imports its own ``grader`` (the working directory comes first)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ATTENTION_KIT_PART")}
    return subprocess.run([sys.executable, *arguments], cwd=root, env=environment, capture_output=True, text=True,
                          timeout=HANG_SECONDS)


def outcomes(root: Path, *arguments: str) -> list[tuple[str, str, str]]:
    report = root / "report.xml"
    report.unlink(missing_ok=True)
    run(root, "-m", "pytest", *arguments, "-q", "-p", "no:cacheprovider", f"--junitxml={report}")
    assert report.is_file(), f"pytest {' '.join(arguments)} wrote no report: it could not start"
    results = []
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, text = child.tag, (child.get("message") or "") + (child.text or "")
        results.append((f"{case.get('classname')}::{case.get('name')}", outcome, text))
    return results


def created_files(number: int) -> tuple[str, ...]:
    return (f"solutions/{NAME}.py", f"tests/test_{number:02d}_{NAME}.py",
            f"grader/hidden_tests/test_hidden_{number:02d}_{NAME}.py")


@pytest.mark.slow  # about 30 to 60 s: `fingerprints` plants every mistake of the catalogue; CI runs it
def test_a_throwaway_exercise_in_a_new_part_works_after_the_regeneration_commands(tmp_path: Path) -> None:
    root = kit_copy(tmp_path / "kit")
    created = run(root, "-m", "grader.authoring.new_exercise", NAME, "--title", "A throw-away exercise",
                  "--part", "3")
    assert created.returncode == 0, created.stderr
    number = len(load().exercises) + 1
    for path in (*created_files(number), f"grader/mutants/{NAME}.toml"):
        assert (root / path).is_file(), path
        assert path in created.stdout
    linted = run(root, "-m", "ruff", "check", *(str(root / path) for path in created_files(number)), "--no-cache")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    again = run(root, "-m", "grader.authoring.new_exercise", NAME)
    assert again.returncode == 2 and again.stderr.startswith(f"new_exercise: NAME '{NAME}'"), again.stderr

    for module in ("grader.authoring.sync", "grader.authoring.golden", "grader.authoring.fingerprints",
                   "grader.mutants.docs", "grader.authoring.readme"):
        done = run(root, "-m", module)
        assert done.returncode == 0, f"{module}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    for module in ("grader.authoring.sync", "grader.authoring.golden", "grader.mutants.docs",
                   "grader.authoring.readme"):
        done = run(root, "-m", module, "--check")
        assert done.returncode == 0, f"{module} --check: {done.stdout}{done.stderr}"

    manifest = tomllib.loads((root / "grader" / "curriculum.toml").read_text(encoding="utf-8"))
    assert manifest["exercise"][-1]["name"] == NAME and manifest["exercise"][-1]["part"] == 3
    assert "# The one curriculum manifest." in (root / "grader" / "curriculum.toml").read_text(encoding="utf-8")
    assert f"`pytest -m {NAME}`" in (root / "README.md").read_text(encoding="utf-8")
    assert "A throw-away exercise" in (root / "docs" / "common-mistakes.md").read_text(encoding="utf-8")

    for folder in ("tests", "grader/hidden_tests"):
        reference = outcomes(root, folder, "--impl", "solutions", "-m", NAME)
        assert len(reference) >= 5 and all(outcome == "passed" for _, outcome, _ in reference), reference
        stub = outcomes(root, folder, "-m", NAME)
        assert len(stub) == len(reference)
        for name, outcome, text in stub:
            assert outcome == "failure" and "not implemented yet" in text, (name, outcome, text)
            assert "_pytest" not in text and "Traceback" not in text, (name, text)

    status = run(root, "-m", "grader", "status", "--impl", "solutions", "--part", "3")
    assert status.returncode == 0, status.stderr
    # The new part's own exercises are graded; what they build on is listed as given, never as to do.
    head = status.stdout.split("Progress")[0]
    assert NAME in status.stdout and re.search(r"1\. softmax\s+done given", head), status.stdout
