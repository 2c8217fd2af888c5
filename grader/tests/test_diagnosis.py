"""The diagnosis of known mistakes: generated files are current, and a student
whose code behaves like a catalogued mistake reads its description first."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from grader.authoring import fingerprints
from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import apply, docs, load_catalogue
from grader.mutants.report import run_tests
from tests.diagnosis import KnownMistake, describe, diagnose, load_fingerprints, matches
from tests.kit import LocalImplementation

CATALOGUE = {mutant.id: mutant for mutant in load_catalogue()}


def test_fingerprint_file_is_current():
    assert fingerprints.is_current(), \
        "tests/data/fingerprints.npz is out of date: run `python -m grader.authoring.fingerprints`"


def test_common_mistakes_page_is_current():
    assert docs.main(["--check"]) == 0, "docs/common-mistakes.md is out of date: run `python -m grader.mutants.docs`"


def test_common_mistakes_page_gives_no_code_away():
    page = docs.render()
    for mutant in CATALOGUE.values():
        # `replace` is the reference's code: the answer. One-word replacements (an operator, a
        # name) may occur in prose; whole statements must not.
        if len(mutant.replace.strip()) > 12:
            assert mutant.replace.strip() not in page, f"{mutant.id}: the reference code appears on the page"


def test_fingerprints_hold_no_pickles_and_every_softmax_mistake_but_one_is_recognisable():
    with np.load(fingerprints.FINGERPRINT_FILE, allow_pickle=False) as data:
        assert all(data[key].dtype != object for key in data.files)
    softmax = [mistake for mistake in load_fingerprints() if mistake.exercise == "softmax"]
    hidden = [mistake.id for mistake in softmax if not mistake.recognisable]
    assert hidden == ["softmax-in-place-shift"]  # it returns the right values; the Kit reports the mutation


def test_reference_matches_no_known_mistake():
    reference = LocalImplementation(ROOT / "solutions")
    for exercise in load_curriculum().names:
        assert diagnose(reference, exercise) == [], exercise


def test_stubs_match_no_known_mistake():
    stubs = LocalImplementation(ROOT / "exercises")
    for exercise in load_curriculum().names:
        assert diagnose(stubs, exercise) == [], exercise


class Exploding:
    """An implementation whose every function call raises something odd."""

    def function(self, exercise, name):
        def explode(*args, **kwargs):
            raise MemoryError("student code gone wrong")

        return explode


def test_diagnosis_never_raises():
    for exercise in load_curriculum().names:
        assert diagnose(Exploding(), exercise) == []


def test_a_mistake_made_only_of_exceptions_never_matches():
    mistake = KnownMistake("softmax-x", "softmax", "d", "h", {"softmax/mixed_scores": None})
    assert not matches(mistake, {"softmax/mixed_scores": None})


def test_ties_name_every_matching_mistake():
    first = KnownMistake("softmax-a", "softmax", "first way", "hint a", {})
    second = KnownMistake("softmax-b", "softmax", "second way", "hint b", {})
    text = describe("softmax", [first, second])
    assert text.startswith("Diagnosis: your softmax.py")
    assert "first way" in text and "second way" in text and "hint a" in text and "hint b" in text


def first_failure(output: str) -> str:
    """The text of the first failure in pytest's output (after its ___ header line)."""
    assert "= FAILURES =" in output, output[-2000:]
    after = output.split("= FAILURES =", 1)[1].splitlines()
    start = next(i for i, line in enumerate(after) if line.startswith("_"))
    return "\n".join(after[start + 1:]).lstrip()


def recognisable_ids() -> list[str]:
    """Mistakes to try: the softmax ones, and the first recognisable one of every other exercise."""
    chosen, seen = [], set()
    for mistake in load_fingerprints():
        if not mistake.recognisable or mistake.id not in CATALOGUE:
            continue
        if mistake.exercise == "softmax" or mistake.exercise not in seen:
            chosen.append(mistake.id)
            seen.add(mistake.exercise)
    return chosen


@pytest.mark.parametrize("mutant_id", recognisable_ids())
def test_first_failure_starts_with_the_diagnosis(mutant_id, tmp_path):
    mutant = CATALOGUE[mutant_id]
    target = apply(mutant, tmp_path / mutant.id)
    run = run_tests(ROOT / load_curriculum().exercise(mutant.exercise).test_file, target, tb="short")
    text = first_failure(run.output)
    assert text.startswith("Diagnosis: your "), text[:1500]
    diagnosis = text.split("\n\n", 1)[0]
    assert mutant.description in diagnosis and mutant.hint in diagnosis, diagnosis
    # Every failing test of the exercise leads with it (each test's feedback stands alone in a report).
    failures = run.output.count("\n____")
    diagnoses = sum(line.startswith("Diagnosis: ") for line in run.output.splitlines())
    assert diagnoses >= failures >= 1, (diagnoses, failures)


def test_command_line_prints_the_diagnosis_first(tmp_path):
    # The real command a student runs, in a fresh process.
    mutant = CATALOGUE["softmax-query-axis"]
    target = apply(mutant, tmp_path / mutant.id)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_01_softmax.py", f"--impl={target}", "-q",
         "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    text = first_failure(result.stdout)
    assert text.startswith("Diagnosis: your softmax.py gives exactly the outputs of a known mistake:\n"
                           f"  \"{mutant.description}\"\nHint: {mutant.hint}\n"), text[:1500]
