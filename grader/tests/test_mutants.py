"""Mutation testing of the graded suite: every known mistake must fail a test.

Each catalogue entry (``grader/mutants/<exercise>.toml``) is planted in a copy
of ``solutions/`` and its own exercise's test file runs against it, stopping
at the first failure. The runs happen once per session, in parallel worker
processes, for the entries selected (``-k softmax`` runs only those).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import Mutant, load_catalogue
from grader.mutants.report import MutantResult, as_text, run_catalogue, run_mutant

CATALOGUE = load_catalogue()
BY_ID = {mutant.id: mutant for mutant in CATALOGUE}


def test_catalogue_is_not_empty_and_covers_softmax():
    assert len(CATALOGUE) >= 8
    assert sum(mutant.exercise == "softmax" for mutant in CATALOGUE) >= 8


def test_ids_are_unique():
    ids = [mutant.id for mutant in CATALOGUE]
    assert sorted({i for i in ids if ids.count(i) > 1}) == []


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda mutant: mutant.id)
def test_entry_is_complete(mutant: Mutant):
    assert re.fullmatch(rf"{mutant.exercise}-[a-z0-9]+(-[a-z0-9]+)*", mutant.id), (
        f"{mutant.id}: ids are '<exercise>-<short-name>' in lower case"
    )
    assert mutant.description.strip(), f"{mutant.id} has no description"
    assert mutant.hint.strip(), f"{mutant.id} has no hint"
    assert mutant.replace != mutant.with_, f"{mutant.id} changes nothing"
    # The hint is shown to students: it must not hand over the mutant's code.
    assert mutant.replace.strip() not in mutant.hint, f"{mutant.id}: the hint quotes the reference code"


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda mutant: mutant.id)
def test_replace_text_applies(mutant: Mutant):
    path = ROOT / "solutions" / mutant.file
    assert path.is_file(), f"{mutant.id}: solutions/{mutant.file} does not exist"
    found = path.read_text(encoding="utf-8").count(mutant.replace)
    assert found == mutant.count, (
        f"{mutant.id}: `replace` occurs {found} time(s) in solutions/{mutant.file}, the entry says {mutant.count}"
    )


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Callable[[Mutant], MutantResult]:
    """The result of a mutant whose test_mutant_is_caught item was collected, run with its exercise's others.

    One exercise's selected mutants run at once, when the first of them is asked for, so that each test stays
    well under a minute (the whole catalogue at once took 100 s). Under xdist every worker collects every
    item, and each used to run the whole catalogue itself: an exercise's results are now kept in the
    session's shared temporary folder, computed by the first worker that asks (under a lock), read by the
    others.
    """
    wanted = {
        item.callspec.params["mutant"].id
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_mutant_is_caught" and hasattr(item, "callspec")
    }
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "mutant-results"
    shared.mkdir(exist_ok=True)
    done: dict[str, MutantResult] = {}

    def result(mutant: Mutant) -> MutantResult:
        if mutant.id not in done:
            chunk = [other for other in CATALOGUE
                     if other.exercise == mutant.exercise and (other.id in wanted or other is mutant)]
            done.update(_shared_results(shared / f"{mutant.exercise}-{len(chunk)}", chunk))
        return done[mutant.id]

    return result


def _shared_results(path: Path, chunk: list[Mutant]) -> dict[str, MutantResult]:
    """The results of ``chunk``: read from ``path``.json when a worker wrote them, else run and written."""
    import fcntl
    import json

    with open(path.with_suffix(".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while one runs the chunk
        stored = path.with_suffix(".json")
        if stored.is_file():
            data = json.loads(stored.read_text(encoding="utf-8"))
            return {key: MutantResult(BY_ID[key], caught_by=value["caught_by"], error=value["error"])
                    for key, value in data.items()}
        found = {found.mutant.id: found for found in run_catalogue(chunk, first_failure_only=True)}
        stored.write_text(json.dumps({key: {"caught_by": value.caught_by, "error": value.error}
                                      for key, value in found.items()}), encoding="utf-8")
        return found


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda mutant: mutant.id)
def test_mutant_is_caught(mutant: Mutant, results: Callable[[Mutant], MutantResult]):
    result = results(mutant)
    test_file = Path(load_curriculum().exercise(mutant.exercise).test_file)
    assert result.error is None, f"{mutant.id}: {result.error}"
    assert result.caught_by, (
        f"{mutant.id} passes every test of {test_file}: the suite misses "
        f"\"{mutant.description}\" (add a test that fails on it)"
    )


def test_report_flags_an_uncaught_mutant(tmp_path):
    # A change to a docstring is a "mutant" no test can catch: the report must say so.
    harmless = Mutant(id="softmax-docstring", exercise="softmax", description="I reworded the docstring.",
                      hint="-", file="softmax.py", replace="Normalise ``x`` along", with_="Normalise x along")
    result = run_mutant(harmless, tmp_path)
    assert result.error is None and not result.caught
    assert "UNCAUGHT softmax-docstring" in as_text([result])
    assert "0/1 mutants caught; not caught: softmax-docstring" in as_text([result])


def test_report_names_a_stale_replace_text(tmp_path):
    stale = Mutant(id="softmax-stale", exercise="softmax", description="-", hint="-", file="softmax.py",
                   replace="text that is not in the reference", with_="x")
    result = run_mutant(stale, tmp_path)
    assert not result.caught and "found 0" in result.error
