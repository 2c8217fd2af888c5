"""``attention-kit course check --course DIR``: prove every exercise of a course, and name what to fix.

First it writes what the instructor's own exercises' files imply (as the kit's
generators do for the kit): each stub ``exercises/NAME.py`` from its reference
``solutions/NAME.py``, the reference outputs of its probes
(``data/golden.npz``) and the fingerprints of its catalogued mistakes
(``data/fingerprints.npz``: what a student's feedback names them by). Then,
for every exercise the course grades (the kit's and its own):

* the reference passes its public and hidden tests;
* the stub fails cleanly: every public test fails, saying "not implemented yet";
* every catalogued mistake (``mutants/NAME.toml``) fails a public test.

Each problem is one line naming the exercise, the file and what to fix; the
exit status is 1 if there is one. Runs in this process, on the instructor's
own files (the reference is theirs); no student code is involved.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grader import course
from grader.curriculum import PACKAGE, ROOT, Exercise, load, reference_dir

NOT_WRITTEN = "not implemented yet"


@dataclass(eq=False)  # a pytest plugin: hashable by identity
class Outcomes:
    """One pytest run: each test's outcome and, for failures, the first lines of its message."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # collection errors, errors in set-up

    def pytest_runtest_logreport(self, report) -> None:  # noqa: D102 - a pytest hook
        name = report.nodeid.rsplit("::", 1)[-1]
        if report.when == "call" and report.passed:
            self.passed.append(name)
        elif report.failed and report.when == "call":
            self.failed[name] = str(report.longreprtext)
        elif report.failed:
            self.errors.append(f"{name}: {str(report.longreprtext).strip().splitlines()[-1:]}")

    def pytest_collectreport(self, report) -> None:  # noqa: D102 - a pytest hook
        if report.failed:
            self.errors.append(f"{report.nodeid or 'collection'}: {str(report.longreprtext).strip()[-300:]}")


def run(files: list[Path], impl: Path, first_failure_only: bool = False) -> Outcomes:
    """Run the test ``files`` on the modules of ``impl`` in this process, quietly."""
    from grader.quiet import run_pytest
    from tests.probes import forget_other

    for path in files:  # the kit's are the package's (tests.*); a course's own may have been edited since
        if Path(path).parent != ROOT / "tests":
            forget_other(Path(path), always=True)
    outcomes = Outcomes()
    arguments = [*map(str, files), f"--impl={impl}", f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"),
                 "-q", "--tb=short", "--no-header", "-W", "ignore::RuntimeWarning", "-p", "pytest_check.plugin",
                 "-p", "tests.plugin", "-p", "no:cacheprovider", "-p", "no:unraisableexception",
                 "-p", "no:faulthandler", *(["-x"] if first_failure_only else [])]
    code, output = run_pytest(arguments, outcomes)
    if code not in (0, 1) and not outcomes.errors:  # 0: all passed, 1: some failed; anything else: pytest could not run
        outcomes.errors.append(f"pytest exited with code {code}: {' | '.join(output.strip().splitlines()[-3:])}")
    return outcomes


# ------------------------------------------------------------------ what the own exercises' files imply

def own_exercises() -> list[Exercise]:
    """The active course's own exercises (``[[exercise]]`` of course.toml) that it grades."""
    return [exercise for exercise in load().selection() if exercise.home]


def write_stubs(folder: Path, exercises: list[Exercise]) -> list[Path]:
    """Each own exercise's stub ``exercises/NAME.py``, made from its reference as the kit's stubs are."""
    from grader.authoring.sync import build_stub

    written = []
    for exercise in exercises:
        source = folder / course.REFERENCE_FOLDER / exercise.module_file
        path = folder / course.STUBS_FOLDER / exercise.module_file
        path.parent.mkdir(exist_ok=True)
        path.write_text(build_stub(source.read_text(encoding="utf-8"), exercise.number, exercise.name),
                        encoding="utf-8")
        written.append(path)
    return written


def _clear_caches() -> None:
    import tests.diagnosis as diagnosis
    import tests.probes as probes

    for cached in (probes._golden_file, probes._keys_of, probes._golden_array, diagnosis._read_fingerprints,
                   diagnosis.load_pairs):
        cached.cache_clear()


def write_golden(folder: Path, exercises: list[Exercise]) -> Path:
    """The reference outputs of the own exercises' probes, in ``data/golden.npz`` (from ``solutions/``)."""
    from grader.authoring.golden import serialise
    from tests.kit import LocalImplementation
    from tests.probes import KIND_SUFFIX, as_arrays, golden_keys, load_all_probes, result_kind

    functions = {function for exercise in exercises for function in exercise.functions}
    implementation = LocalImplementation(folder / course.REFERENCE_FOLDER)
    values: dict[str, np.ndarray] = {}
    for name, entry in sorted(load_all_probes().items()):
        if entry.function in functions:
            result = entry.call(implementation.function("", entry.function))
            arrays = as_arrays(result)
            values.update(zip(golden_keys(name, len(arrays)), arrays, strict=True))
            values[name + KIND_SUFFIX] = np.array(result_kind(result))
    path = folder / course.DATA_FOLDER / course.OWN_GOLDEN
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(serialise(values))
    _clear_caches()
    return path


def write_fingerprints(folder: Path, exercises: list[Exercise], echo: Callable[[str], None]) -> Path:
    """The fingerprints of the own exercises' catalogued mistakes, in ``data/fingerprints.npz``."""
    from grader.authoring.fingerprints import FORMAT, mistake_fingerprints, serialise
    from grader.mutants import load_catalogue

    names = {exercise.name for exercise in exercises}
    with tempfile.TemporaryDirectory(prefix="attention-kit-course-") as workdir:
        # a mutant whose `replace` text is not in the reference: check() says so
        mistakes, arrays = mistake_fingerprints((m for m in load_catalogue() if m.exercise in names), Path(workdir),
                                                lambda mutant, error: echo(f"  skipped {mutant.id}: {error}"))
    meta = {"format": FORMAT, "mistakes": mistakes, "calls": {}, "pairs": [], "families": []}
    path = folder / course.DATA_FOLDER / course.OWN_FINGERPRINTS
    path.write_bytes(serialise(meta, arrays))
    _clear_caches()
    return path


def derive(folder: Path, echo: Callable[[str], None] = print) -> None:
    """Write the stubs, golden values and fingerprints of the active course's own exercises."""
    exercises = own_exercises()
    if not exercises:
        return
    write_stubs(folder, exercises)
    write_golden(folder, exercises)
    write_fingerprints(folder, exercises, echo)
    active = course.active()
    (folder / course.DATA_FOLDER / course.OWN_INPUTS).write_text(
        json.dumps(course.own_digests(active) if active else {}, indent=1, sort_keys=True), encoding="utf-8")
    echo(f"Wrote {course.STUBS_FOLDER}/ (the stubs) and {course.DATA_FOLDER}/ (the probes' reference outputs, the "
         f"mistakes' fingerprints) of {', '.join(e.name for e in exercises)} from their reference and catalogue.")


# ------------------------------------------------------------------ the proof

def problems_of(exercise: Exercise, folder: Path, reference: Path, hidden: list, catalogue: list,
                workdir: Path) -> list[str]:
    """What is wrong with ``exercise``: one line each, naming the file and what to fix (empty: proven)."""
    from grader.authoring.sync import build_stub
    from grader.mutants import apply

    problems: list[str] = []
    public = exercise.test_path
    if not public.is_file():
        return [f"{exercise.name}: its public tests {public} are missing"]
    own = f"{exercise.name} ({'yours' if exercise.home else 'of the kit'})"
    hidden_files = [Path(f.path) for f in hidden if f.exercise == exercise.name]
    outcome = run([public, *hidden_files], reference)
    for error in outcome.errors:
        problems.append(f"{own}: the tests do not run on the reference: {error}")
    for name, message in outcome.failed.items():
        first = next((line.strip() for line in message.splitlines() if line.strip().startswith("E ")), "")
        problems.append(f"{own}: the reference {reference / exercise.module_file} fails {name} ({first[:160]}): "
                        "fix the reference or the test")
    if not outcome.passed and not outcome.errors:
        problems.append(f"{own}: {public} holds no test")
    stub = workdir / f"stub-{exercise.name}"  # a folder of its own: its modules are imported under its name
    stub.mkdir(exist_ok=True)
    for source in reference.glob("*.py"):  # the other modules as the reference's, the exercise's as its stub
        text = source.read_text(encoding="utf-8")
        (stub / source.name).write_text(build_stub(text, exercise.number, exercise.name)
                                        if source.name == exercise.module_file else text, encoding="utf-8")
    outcome = run([public], stub)
    for error in outcome.errors:
        problems.append(f"{own}: the tests do not run on the stub: {error}")
    for name in outcome.passed:
        problems.append(f"{own}: {name} passes on the stub (it gives points for nothing): make it check a result")
    for name, message in outcome.failed.items():
        if NOT_WRITTEN not in message:
            problems.append(f"{own}: {name} fails on the stub without saying \"{NOT_WRITTEN}\" (the test crashed "
                            "before calling the student's function?)")
    for mutant in (m for m in catalogue if m.exercise == exercise.name):
        try:
            planted = apply(mutant, workdir / mutant.id, reference)
        except ValueError as error:
            problems.append(f"{own}: mistake {mutant.id} of {folder / course.CATALOGUE_FOLDER / exercise.name}.toml "
                            f"cannot be planted ({error}): make its `replace` text of the reference")
            continue
        if not run([public], planted, first_failure_only=True).failed:
            problems.append(f"{own}: mistake {mutant.id} ({mutant.description}) is not caught: no public test of "
                            f"{public.name} fails on it; add a test that does (or drop the mistake from "
                            f"{course.CATALOGUE_FOLDER}/{exercise.name}.toml)")
    return problems


PROVEN = "proven.json"  # in data/: each exercise proven by the last check -> the digest of what was proven
KIT_HELPERS = ("tests/feedback.py", "tests/kit.py", "tests/plugin.py", "tests/probes.py", "tests/diagnosis.py",
               "tests/failures.py", "tests/crash.py", "conftest.py", "grader/mutants/__init__.py")


def digest(exercise: Exercise, reference: Path, hidden: list, catalogue: Path | None) -> str:
    """The digest of everything ``exercise``'s proof depends on: unchanged, it need not be proven again.

    Its reference module and those of the exercises it depends on, the
    reference's private modules, its public and hidden tests, its catalogue of
    mistakes and the kit's test helpers.
    """
    modules = [e.module_file for e in load().exercises if e.name == exercise.name
               or e.name in load().dependencies(exercise.name)]
    paths = [reference / module for module in modules] + sorted(reference.glob("_*.py"))
    paths += [exercise.test_path, *sorted(Path(f.path) for f in hidden if f.exercise == exercise.name)]
    paths += [(catalogue or Path()) / f"{exercise.name}.toml", *(ROOT / helper for helper in KIT_HELPERS)]
    sha = hashlib.sha256()
    for path in paths:
        sha.update(f"\0{path.name}\0".encode() + (path.read_bytes() if path.is_file() else b"(none)"))
    return sha.hexdigest()


def check(folder: Path, exercises: tuple[str, ...] = (), echo: Callable[[str], None] = print,
          full: bool = False) -> int:
    """Derive, then prove every exercise of the active course (or of ``exercises``); returns the exit status.

    An exercise proven by an earlier check and unchanged since (:func:`digest`)
    is not proven again, unless ``full``.
    """
    from grader.mutants import CatalogueError, load_catalogue
    from grader.suite import hidden_folders, hidden_test_files

    with contextlib.redirect_stdout(io.StringIO()):
        curriculum = load()
    chosen = [e for e in curriculum.selection() if not exercises or e.name in exercises]
    for name in exercises:
        curriculum.exercise(name)  # ValueError naming the exercises
    reference = reference_dir()
    if reference is None:
        echo(f"error: {course.no_reference(ROOT)}")
        return 2
    derive(folder, echo)
    try:
        catalogue = load_catalogue()
    except CatalogueError:
        catalogue = []
    hidden = hidden_test_files(hidden_folders())
    problems: list[str] = []
    record = folder / course.DATA_FOLDER / PROVEN
    try:
        proven = {} if full else json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        proven = {}
    catalogue_folder = course.catalogue(PACKAGE)
    with tempfile.TemporaryDirectory(prefix="attention-kit-check-") as workdir:
        for exercise in chosen:
            started = time.perf_counter()
            key = digest(exercise, reference, hidden, catalogue_folder)
            mistakes = sum(m.exercise == exercise.name for m in catalogue)
            if proven.get(exercise.name) == key:
                echo(f"  {exercise.number:>2}. {exercise.name:<14} proven: reference, stub, {mistakes} mistake(s) "
                     "(unchanged since the last check; --full proves it again)")
                continue
            proven.pop(exercise.name, None)
            found = problems_of(exercise, folder, reference, hidden, catalogue, Path(workdir))
            verdict = "proven" if not found else f"{len(found)} to fix"
            echo(f"  {exercise.number:>2}. {exercise.name:<14} {verdict}: reference, stub, {mistakes} mistake(s) "
                 f"({time.perf_counter() - started:.1f} s)")
            problems += found
            if not found:
                proven[exercise.name] = key
    record.parent.mkdir(exist_ok=True)
    record.write_text(json.dumps(proven, indent=1, sort_keys=True), encoding="utf-8")
    for line in problems:
        echo(f"fix: {line}")
    echo("Every exercise is proven." if not problems else f"{len(problems)} thing(s) to fix (above).")
    return 1 if problems else 0


def main_check(folder: Path, exercises: tuple[str, ...], full: bool = False) -> int:
    """``attention-kit course check``: the active course is ``folder``."""
    return check(folder, exercises, echo=lambda line: print(line, file=sys.stderr if line.startswith("error")
                                                            else sys.stdout), full=full)
