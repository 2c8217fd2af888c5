"""``attention-kit mutants``: run the catalogue of known mistakes against the suite.

Each mutant is planted in a fresh copy of ``solutions/`` and its own
exercise's test file runs against it with ``pytest.main`` inside a
long-lived worker process (one per CPU), so no mutant pays for an
interpreter start-up and the whole catalogue takes seconds. A mutant is
*caught* when at least one test fails. The report lists, per
exercise, every mutant, what it gets wrong, and the tests that caught it;
an uncaught mutant is a hole in the suite, and the command exits with 1.

Usage::

    attention-kit mutants                     # every exercise
    attention-kit mutants --exercise masks    # one exercise
    attention-kit mutants --json              # machine-readable
    attention-kit mutants --jobs 1            # no worker processes

``grader/tests/test_mutants.py`` runs the same check in CI.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import CatalogueError, Mutant, apply, load_catalogue


@dataclass
class MutantResult:
    """What the graded suite made of one mutant."""

    mutant: Mutant
    caught_by: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def caught(self) -> bool:
        """True when the mutant was planted and at least one test failed."""
        return self.error is None and bool(self.caught_by)


class _FailedTests:
    """A pytest plugin that remembers the node ids of failing tests, in order."""

    def __init__(self) -> None:
        self.node_ids: list[str] = []

    def pytest_runtest_logreport(self, report: object) -> None:
        node_id = getattr(report, "nodeid", "")
        if getattr(report, "failed", False) and node_id not in self.node_ids:
            self.node_ids.append(node_id)


@dataclass
class SuiteRun:
    """The outcome of one in-process pytest run."""

    exit_code: int
    output: str
    failed: list[str]


def run_tests(test_file: Path, impl_dir: Path, *, first_failure_only: bool = False, tb: str = "no",
              keyword: str | None = None) -> SuiteRun:
    """Run one graded test file against ``impl_dir`` in this process, quietly.

    Parameters
    ----------
    test_file : pathlib.Path
        The graded test file.
    impl_dir : pathlib.Path
        The folder holding the seven modules (``--impl``).
    first_failure_only : bool, optional
        Stop at the first failing test (``-x``).
    tb : str, optional
        pytest's ``--tb`` style for the captured output.
    keyword : str, optional
        Only the tests that this pytest ``-k`` expression selects.

    Returns
    -------
    SuiteRun
        pytest's exit code, its terminal output and the failing node ids.
    """
    failed = _FailedTests()
    arguments = [
        str(test_file), f"--impl={impl_dir}", f"--rootdir={ROOT}", "-q", f"--tb={tb}", "--no-header",
        "-W", "ignore::RuntimeWarning",
        # Only the plugins the suite needs: auto-loaded plugins and the unraisable-exception
        # hook (a full garbage collection per session) cost more than the tests themselves.
        "-p", "pytest_check.plugin", "-p", "tests.plugin",  # the kit's conftest does not reach a course's own tests
        "-p", "no:cacheprovider", "-p", "no:unraisableexception",
        "-p", "no:threadexception", "-p", "no:doctest", "-p", "no:junitxml", "-p", "no:pastebin",
        "-p", "no:logging", "-p", "no:setuponly", "-p", "no:setupplan", "-p", "no:stepwise",
        "-p", "no:faulthandler",
    ]
    if first_failure_only:
        arguments.append("-x")
    if keyword is not None:
        arguments += ["-k", keyword]
    from grader.quiet import run_pytest

    code, output = run_pytest(arguments, failed)
    return SuiteRun(code, output, failed.node_ids)


def run_mutant(mutant: Mutant, workdir: Path, *, first_failure_only: bool = False) -> MutantResult:
    """Plant ``mutant`` under ``workdir`` and run its exercise's test file on it.

    Parameters
    ----------
    mutant : Mutant
        The catalogue entry.
    workdir : pathlib.Path
        A scratch folder; the mutated copy of ``solutions/`` goes into
        ``workdir / mutant.id``.
    first_failure_only : bool, optional
        Stop at the first failing test (``-x``): enough to know the mutant
        is caught, not to list every test that catches it.

    Returns
    -------
    MutantResult
        The failing tests' node ids, or an error when the mutant's text is
        not found or pytest could not run the file.
    """
    try:
        target = apply(mutant, Path(workdir) / mutant.id)
    except ValueError as error:
        return MutantResult(mutant, error=str(error))
    test_file = load_curriculum().exercise(mutant.exercise).test_path
    if not test_file.is_file():
        return MutantResult(mutant, error=f"{load_curriculum().exercise(mutant.exercise).test_file} does not exist yet")
    run = run_tests(test_file, target, first_failure_only=first_failure_only)
    if run.exit_code not in (0, 1):  # 0: all passed, 1: some failed; anything else: pytest could not run
        last = run.output.strip().splitlines()[-3:]
        return MutantResult(mutant, error=f"pytest exited with code {run.exit_code}: " + " | ".join(last))
    return MutantResult(mutant, caught_by=run.failed)


def _run_in_worker(job: tuple[Mutant, str, bool]) -> MutantResult:
    mutant, workdir, first_failure_only = job
    return run_mutant(mutant, Path(workdir), first_failure_only=first_failure_only)


def run_catalogue(
    mutants: list[Mutant], *, first_failure_only: bool = False, jobs: int | None = None
) -> list[MutantResult]:
    """Run every mutant in ``mutants``, in ``jobs`` worker processes, in catalogue order.

    Parameters
    ----------
    mutants : list of Mutant
        The entries to run.
    first_failure_only : bool, optional
        Stop each run at its first failing test (see `run_mutant`).
    jobs : int, optional
        Worker processes (default: one per CPU). With 1, or a single mutant,
        everything runs in this process.

    Returns
    -------
    list of MutantResult
        One result per mutant, in the order given.
    """
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(mutants)))
    with tempfile.TemporaryDirectory(prefix="attention-kit-mutants-") as workdir:
        if jobs == 1:
            return [run_mutant(mutant, Path(workdir), first_failure_only=first_failure_only) for mutant in mutants]
        # "spawn": a fresh interpreter per worker, safe whatever threads this process runs.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            return list(pool.map(_run_in_worker, [(mutant, workdir, first_failure_only) for mutant in mutants]))


def as_json(results: list[MutantResult]) -> str:
    """The results as a JSON document (a list of one object per mutant)."""
    return json.dumps(
        [
            {
                "id": result.mutant.id,
                "exercise": result.mutant.exercise,
                "description": result.mutant.description,
                "caught": result.caught,
                "caught_by": result.caught_by,
                "error": result.error,
            }
            for result in results
        ],
        indent=2,
    )


def as_text(results: list[MutantResult]) -> str:
    """The results for a terminal: per exercise, each mutant and its catching tests."""
    lines: list[str] = []
    for exercise in load_curriculum().exercises:
        mine = [result for result in results if result.mutant.exercise == exercise.name]
        if not mine:
            continue
        caught = sum(result.caught for result in mine)
        lines.append(f"{exercise.number}. {exercise.name}: {caught}/{len(mine)} mutants caught")
        for result in mine:
            mark = "caught  " if result.caught else "UNCAUGHT"
            lines.append(f"  {mark} {result.mutant.id}: {result.mutant.description}")
            if result.error is not None:
                lines.append(f"           error: {result.error}")
            for node_id in result.caught_by:
                lines.append(f"           - {node_id}")
        lines.append("")
    missed = [result.mutant.id for result in results if not result.caught]
    total = f"{len(results) - len(missed)}/{len(results)} mutants caught"
    lines.append(total + (f"; not caught: {', '.join(missed)}" if missed else ""))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attention-kit mutants``."""
    parser.add_argument("--exercise", metavar="NAME", help="only the mutants of this exercise")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes (default: one per CPU)")


def run(args: argparse.Namespace) -> int:
    """Run the catalogue and print the report; 1 when a mutant is not caught, 2 without a catalogue."""
    try:
        mutants = load_catalogue()
    except CatalogueError as error:
        print(f"error: {error}")
        return 2
    if args.exercise:
        try:
            load_curriculum().exercise(args.exercise)
        except ValueError as error:
            print(error)
            return 2
        mutants = [mutant for mutant in mutants if mutant.exercise == args.exercise]
    results = run_catalogue(mutants, jobs=args.jobs)
    print(as_json(results) if args.json else as_text(results))
    return 0 if all(result.caught for result in results) else 1
