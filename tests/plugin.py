"""The graded suite's pytest plugin: ``--impl DIR`` and the ``impl`` fixture.

``pytest`` tests the folder ``exercises/`` (your work). ``pytest --impl
solutions`` tests the reference, ``pytest --impl path/to/submission`` any
folder holding the seven modules. Each test file grades one exercise of the
manifest; its tests carry that exercise's marker, so ``pytest -m masks``
runs one exercise.

A failure is led by what to fix first (see ``pytest_runtest_makereport``):
an earlier function of the student's that fails its own probes, or a known
mistake that explains everything (``tests/diagnosis.py``).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from grader.curriculum import load as load_curriculum
from tests import failures, one_thread  # noqa: F401 - one_thread: before numpy is imported (tests.kit)
from tests.kit import CALL_BUDGET, Implementation, ImplementationError, Kit, LocalImplementation
from tests.selection import could_select

ROOT = Path(__file__).resolve().parent.parent
# A first run of a fresh copy: one line per exercise not started, not a wall of failures.
pytest_plugins = ("tests.first_run",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default="exercises",
        metavar="DIR",
        help="folder holding the seven modules to test (default: exercises)",
    )


def resolve_impl_path(config: pytest.Config) -> Path:
    """The ``--impl`` folder, relative to the working directory or the kit."""
    value = Path(config.getoption("--impl"))
    for candidate in (value, Path(config.invocation_params.dir) / value, ROOT / value):
        if candidate.is_dir():
            return candidate.resolve()
    from grader.curriculum import unknown_folder

    raise pytest.UsageError(unknown_folder(value, [Path(config.invocation_params.dir), ROOT]))


@pytest.hookimpl(trylast=True)  # after every plugin has registered its markers
def pytest_configure(config: pytest.Config) -> None:
    resolve_impl_path(config)  # a mistyped --impl stops the run with one clear line, not 140 errors
    from tests import effort  # (here: one_thread must come before numpy, which tests.effort imports)

    effort.CONFIG = config  # the gates salt their seeds with the submission's own bytes (tests/effort.py)
    for exercise in load_curriculum().exercises:
        config.addinivalue_line("markers", f"{exercise.name}: tests of exercise {exercise.number}, {exercise.title}")
    config.option.markexpr = check_mark_expression(config, config.option.markexpr)


# A name in a mark expression (pytest's own token rule), or the keyword arguments of a marker: mark(x=1).
TOKEN = re.compile(r"(?P<arguments>(?<=[\w\]])\([^)]*\))|(?P<name>[\w:+\-.\[\]\\/]+)")
OPERATORS = {"and", "or", "not"}


def check_mark_expression(config: pytest.Config, expression: str) -> str:
    """``-m`` with exercise numbers replaced by names (``-m 3`` is ``-m attention``).

    An unknown name stops the run with one line listing the exercises, closest first,
    instead of pytest's silent "140 deselected".
    """
    if not expression:
        return expression
    from grader.curriculum import closest_first
    from grader.student.hints import not_in_course

    curriculum = load_curriculum()
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    numbered = {exercise.number: exercise.name for exercise in curriculum.exercises}
    # A typo is answered with the course's own exercises (assigned or given), not the whole kit's.
    held = set(curriculum.assigned_or_given()) or set(numbered.values())
    course_names = [name for name in curriculum.names if name in held]
    course_numbers = [number for number, name in numbered.items() if name in held]
    numbers = (f"1 to {len(course_numbers)}" if course_numbers == list(range(1, len(course_numbers) + 1))
               else ", ".join(map(str, course_numbers)))

    def replace(match: re.Match[str]) -> str:
        word = match.group()
        if match["arguments"] or word in OPERATORS or word in known and word not in numbered.values():
            return word
        if word.isdigit() and int(word) in numbered:  # the kit's numbers, as status lists them (a mix keeps them)
            word = numbered[int(word)]
        if word in numbered.values():
            outside = not_in_course(word)  # a Part III release holds no tests of masks: not a silent "no tests ran"
            if outside:
                raise pytest.UsageError(f"-m {expression}: {outside}")
            return word
        raise pytest.UsageError(
            f"-m {expression}: no exercise named {word!r}; the exercises are "
            f"{', '.join(closest_first(word, course_names))} (or their numbers, {numbers}; "
            "other markers: pytest --markers)")

    return TOKEN.sub(replace, expression)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip a graded test file that ``-m`` cannot select (``pytest -m softmax`` collects one file, not all).

    Only the manifest's test files, and only when no test of theirs could match (``tests/selection.py``);
    otherwise pytest decides as usual.
    """
    expression = config.option.markexpr
    if not expression or collection_path.suffix != ".py":
        return None
    curriculum = load_curriculum()
    exercise = curriculum.exercise_of_test_file(collection_path)
    if exercise is None or could_select(expression, exercise.name, curriculum.names):
        return None
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    curriculum = load_curriculum()
    for item in items:
        exercise = curriculum.exercise_of_test_file(item.path)
        if exercise is None and getattr(getattr(item, "module", None), "EXERCISE", None):
            # Test files outside the manifest (the instructors' hidden tests) name their exercise.
            exercise = curriculum.exercise(item.module.EXERCISE)
        if exercise is not None:
            item.add_marker(getattr(pytest.mark, exercise.name))
            item.stash[EXERCISE] = exercise.name
    # Curriculum order first, then file order: the first failure is the earliest idea. Test files outside the
    # manifest (hidden tests) run after all the others: nothing student code sees in them reaches a public test.
    order = {name: index for index, name in enumerate(curriculum.names)}
    public = {item.path for item in items if curriculum.exercise_of_test_file(item.path) is not None}
    items.sort(key=lambda item: (item.path not in public, order.get(item.stash.get(EXERCISE, ""), len(order))))
    if any(item.path not in public for item in items):
        from tests import kept_values

        kept_values.refuse()  # hidden tests' values (an instructor's run) are never written to a cache


EXERCISE = pytest.StashKey[str]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once per process, after collection: what exists now (modules, tests, the kit) is kept out of later GC passes.

    Python's cyclic collector otherwise walks these ~60,000 long-lived objects again in every full collection
    during the tests and at pytest's exit. ``gc.freeze`` makes the whole public suite about a tenth cheaper
    (2.87 -> 2.52 CPU-s, medians of 6 alternated runs; ``benchmarks/suite_time.py --compare`` measures it). Only
    once per process: a grading process that runs many students keeps what it froze for its whole life anyway.
    """
    if not _FROZEN:
        _FROZEN.append(True)
        gc.collect()
        gc.freeze()


_FROZEN: list[bool] = []


@pytest.fixture(scope="session")
def implementation(request: pytest.FixtureRequest) -> Implementation:
    """The implementation under test: local, or the grader's isolated worker."""
    config = request.config
    factory = getattr(config, "attention_kit_implementation", None)
    path = resolve_impl_path(config)
    if factory is not None:
        return factory(path)
    try:
        local = LocalImplementation(path, call_seconds=CALL_BUDGET)  # a call stopped past its budget, as graded
    except ImplementationError as error:
        raise pytest.UsageError(str(error)) from None
    # The student's own run: the tests' own values are read back from the last run (never while grading).
    try:
        from grader.student.results_cache import cache_folder
    except ImportError:  # a release without the student commands: every run computes them
        return local
    from tests import kept_values

    kept_values.use(cache_folder())
    return local


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Keep the tests' own values this run computed, for the next (``tests.kept_values``; a local run only)."""
    from tests import kept_values

    kept_values.save()


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    """Where the tests are, when a run from another folder of the kit (``exercises/``) collected none.

    pytest takes the kit's ``testpaths`` only when run from the kit's own folder: from ``exercises/`` it looked
    there, found no test and said only "no tests ran" (a README walk).
    """
    here, root = Path(config.invocation_params.dir), config.rootpath
    if items or config.args != [str(here)] or here == root or not (root / "tests").is_dir():
        return None
    return (f"no tests in {here}: the kit's tests are in {root / 'tests'}; run pytest from the kit's folder "
            f"(cd {root}), or name them: pytest {root / 'tests'}")


@pytest.fixture
def impl(request: pytest.FixtureRequest, implementation: Implementation) -> Kit:
    """The functions of the implementation, called by name: ``impl.softmax(x)``."""
    exercise = request.node.stash.get(EXERCISE, None)
    if exercise is None:
        raise pytest.UsageError(f"{request.node.path.name} is not a test file of the manifest")
    return Kit(implementation, exercise)


FEEDBACK = pytest.StashKey[dict]()
# With -x, pytest-check stops at the first failed check by raising; its traceback runs through
# tests/feedback.py and says nothing the FAILURE block above it does not.
STOPPED = "AssertionError: Stopping on first failure"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Record the failures the test's checks find in its stash (``tests/failures.py``)."""
    before = failures.begin(item, lambda: {"reading": _reading_link(item), "functions": _called_so_far(item)})
    try:
        try:
            outcome = yield
            kit = getattr(item, "funcargs", {}).get("impl")
            if isinstance(kit, Kit) and not failures.recorded(item):  # its own checks passed: inputs no table holds
                with _captured(item):
                    kit.ask_unseen()
            return outcome
        except failures.ChecksStopped as stop:  # pytest-check's stop, past the test's own `except Exception`s
            raise stop.error from None
    except Exception as error:
        found = failures.recorded(item)
        if found and not found[-1].ended_the_test and not _ends_checks(error):
            # After failed checks the test's own code raised: pytest's report shows the traceback.
            failures.record(failures.Failure(f"the test stopped on {type(error).__name__} in its own code",
                                             kind=failures.RAISED))
        raise
    finally:
        failures.end(before)


def _captured(item: pytest.Item) -> Any:
    """The capture of the test's call, again, around the kit's own calls after it (``Kit.ask_unseen``).

    This wrapper's code after ``yield`` runs outside pytest's capture: a student's print in softmax (5 MB of it)
    went to the terminal of a run whose tests all passed (a student-side round).
    """
    import contextlib

    capture = item.config.pluginmanager.getplugin("capturemanager")
    return capture.item_capture("call", item) if hasattr(capture, "item_capture") else contextlib.nullcontext()


def _ends_checks(error: Exception) -> bool:
    """Whether ``error`` is how a failure is reported: pytest.fail, or pytest-check stopping (``-x``, max fail)."""
    return isinstance(error, pytest.fail.Exception) or (
        type(error) is AssertionError and str(error).startswith(("Stopping on first failure", "pytest-check max fail")))


class _Report:
    """A failure report as text that keeps pytest's ``reprcrash`` (the summary line's message)."""

    def __init__(self, text: str, reprcrash: object) -> None:
        self.text, self.reprcrash = text, reprcrash

    def toterminal(self, out: object) -> None:
        for line in self.text.splitlines():
            out.line(line)  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return self.text


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Lead every failure with what the student should fix first.

    On the first failure of a session every probe runs once through the student's functions (in
    manifest order) and the result is kept for the session. Then, for each failure:

    * when the test's calls went through another function of the student's that fails its own probes (an
      earlier exercise, or earlier in the same one; traced, ``tests/reach.py``), the failure leads with
      "First fix <the one wrong first>" and its revisit lines point there, not at ideas of the caller;
    * otherwise, when known mistakes of the exercise explain every deviating probe, "Diagnosis: ..."
      comes first, the same for every failure of the exercise.

    Outermost wrapper (tryfirst), so it sees the report after pytest-check has filled it in. The
    failures the test recorded (``tests/failures.py``) are completed the same way (the reading, the
    diagnosis, the revisit line) and put on the report as plain data, for readers that render them; the
    report's text is rendered from them.
    """
    report = yield
    report.sections = [(title, _trimmed(text)) for title, text in report.sections]
    if report.when != "call" or not report.failed:
        return report
    findings = _completed(item, failures.recorded(item))
    try:
        return _lead_with_what_to_fix_first(item, call, report, findings)
    finally:
        failures.keep(item, findings)
        failures.attach(report, findings)


# Characters of a test's captured output (its "Captured stdout call") kept: a softmax printing 5 MB at each call made
# `pytest -m softmax` print 145 MB, every failing test repeating its calls' output (a student-side round).
PRINTED_SHOWN = 2_000


def _trimmed(text: str) -> str:
    """``text`` (captured output) up to ``PRINTED_SHOWN`` characters, saying how much more there was."""
    if len(text) <= PRINTED_SHOWN:
        return text
    return f"{text[:PRINTED_SHOWN]}\n[... {len(text) - PRINTED_SHOWN:,} more characters printed, not shown]\n"


def _called_so_far(item: pytest.Item) -> str:
    """The API functions the test called so far, in the order of their first calls, separated by spaces."""
    called = getattr(getattr(item, "funcargs", {}).get("impl"), "_called", None) or []
    return " ".join(dict.fromkeys(called))


def _reading_link(item: pytest.Item) -> str:
    """The link to the section of the reading of what ``item`` checks ("" when the manifest names none).

    The section of the function the test called last (``function_reading`` in the manifest), else its
    exercise's first section.
    """
    exercise = item.stash.get(EXERCISE, "")
    if not exercise:
        return ""
    called = getattr(getattr(item, "funcargs", {}).get("impl"), "_called", None) or [""]
    return load_curriculum().exercise(exercise).reading_link(called[-1])


def _completed(item: pytest.Item, findings: list[failures.Failure]) -> list[failures.Failure]:
    """``findings`` with the test's node id, its exercise and (where the manifest names one) its reading."""
    exercise = item.stash.get(EXERCISE, "")
    reading = _reading_link(item) if exercise and findings else ""
    test = item.nodeid
    if test.startswith("::") and exercise:  # outside the kit's tree: a course's own exercise's, named as released
        own = load_curriculum().exercise(exercise)
        test = f"{own.test_file}{test}" if Path(item.path) == own.test_path else test
    called = _called_so_far(item) if findings else ""
    return [replace(failure, test=test, exercise=exercise, reading=failure.reading or reading,
                    functions=failure.functions or called) for failure in findings]


def _lead_with_what_to_fix_first(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
                                 findings: list[failures.Failure]) -> pytest.TestReport:
    """The work of :func:`pytest_runtest_makereport` on a failed call; updates ``findings`` in place.

    The failures are completed as data (:func:`_what_to_fix_first`); the report's text is then rendered from
    them once (:func:`_render`), never edited as a string beside them.
    """
    # How the report's text follows from the records: pytest-check's report of them (the text pytest made
    # is exactly their rendering), pytest -x's (``stopped``), or pytest's own text after the records' part
    # (the test's own code raised after failed checks: its traceback).
    exercise = item.stash.get(EXERCISE, None)
    funcargs = getattr(item, "funcargs", {})
    unusable = call.excinfo is not None and not isinstance(call.excinfo.value, pytest.fail.Exception)
    if exercise is not None and funcargs.get("implementation") is not None and unusable and not any(
            failure.revisit for failure in findings) and STOPPED not in report.longreprtext:
        # An exception in the test's own code (a stub's or a crash's pytest.fail has its own message).
        kit = funcargs.get("impl")
        unusable_result = _completed(item, [_explain_an_unusable_result(
            report, list(getattr(kit, "_called", [])), getattr(kit, "_returned", None))])[0]
        findings.append(unusable_result)
        report.longrepr = unusable_result.message  # rendered from the record, its reading included
    text = report.longreprtext
    checks = [failure for failure in findings if not failure.ended_the_test]
    how, traceback = (None, "")
    if STOPPED in text and checks:  # pytest -x: the report without the traceback of pytest-check's stop
        how = "stopped"
        summary = failures.stopped_report(checks)[1]
        crash = getattr(report.longrepr, "reprcrash", None)  # keeps the message in pytest's summary line
        if crash is not None and STOPPED in (crash.message or ""):
            # On CI (GitHub Classroom sets CI) pytest prints the whole message in the summary: cut it there too.
            from _pytest._code.code import ReprFileLocation

            crash = ReprFileLocation(crash.path, crash.lineno, summary)
        report.longrepr = _Report(failures.stopped_report(checks)[0], crash)
    elif findings and failures.report_text(findings) == text:
        how = "report"
    elif checks and findings[-1].kind == failures.RAISED:
        after = failures.traceback_after_checks(text, len(checks))
        if after is not None:
            how, traceback = "report", after
    completed = _what_to_fix_first(item, findings)
    if completed is None:
        return report
    before, findings[:] = list(findings), completed
    lead = next((failure.diagnosis for failure in findings if failure.diagnosis), "")
    if lead:
        report.longrepr = _render(findings, how, traceback, report.longreprtext, before)
    return report


def _render(findings: list[failures.Failure], how: str | None, traceback: str, text: str,
            before: list[failures.Failure] | None = None) -> str:
    """The report's text, with its lead, rendered from the completed ``findings``.

    ``how``: "report" (pytest-check's report, with pytest's ``traceback`` of the test's own code after the
    records' part when there is one), "stopped" (pytest -x), or None: the records do not describe the report
    (none was recorded, an error of a fixture): the lead before pytest's own ``text``.
    """
    lead = next((failure.diagnosis for failure in findings if failure.diagnosis), "")
    if how == "stopped":
        checks = [failure for failure in findings if not failure.ended_the_test]
        stopped = failures.stopped_report(checks)[0]  # leads with the checks' diagnosis already: never twice
        return stopped if stopped.startswith(lead) else f"{lead}\n\n{stopped}"
    if how == "report":
        return failures.report_text(findings, traceback=traceback)
    # pytest's own text (under pytest-xdist, pytest-check's report is not always the records' rendering): each
    # record's message, as pytest printed it, becomes the completed record's (its revisit line replaced).
    for old, new in sorted(zip(before or [], findings, strict=False), key=lambda pair: -len(pair[0].message)):
        if old.revisit != new.revisit and old.message.strip():
            text = text.replace(old.message.strip(), new.message.strip())
    return f"{lead}\n\n{text}"


def _what_to_fix_first(item: pytest.Item, findings: list[failures.Failure]) -> list[failures.Failure] | None:
    """``findings`` completed: the lead (what to fix first, or the diagnosis) and the revisit line it implies.

    None when there is nothing to complete (not a test of the manifest, no implementation, no observation).
    """
    exercise = item.stash.get(EXERCISE, None)
    funcargs = getattr(item, "funcargs", {})
    implementation = funcargs.get("implementation")
    if exercise is None or implementation is None:
        return None
    findings = list(findings)
    from tests import api_signatures, diagnosis, kept_state  # only when a test fails

    state = item.config.stash.setdefault(FEEDBACK, {})
    if state.get("implementation") is not implementation:
        state.clear()
        state["implementation"] = implementation
        try:
            state["observation"] = diagnosis.observe_everything(implementation)
        except Exception:  # noqa: BLE001 - feedback must never break the run
            state["observation"] = None
    observation = state["observation"]
    if observation is None:
        return findings
    kit = funcargs.get("impl")
    try:
        kept = kept_state.check(kit, exercise, state.setdefault("kept", {})) if _a_wrong_value(findings) else None
    except Exception:  # noqa: BLE001 - feedback must never break the run
        kept = None
    if kept:
        return _led(findings, kept, None)  # first: what earlier calls left (the outputs below may come from it)
    called = list(getattr(kit, "_called", []))
    try:
        culprit = diagnosis.blame(implementation, called, observation, getattr(kit, "_reached", None))
    except Exception:  # noqa: BLE001
        culprit = None
    crash = next((failure for failure in findings if failure.kind == failures.CRASHED), None)
    if culprit is not None and crash is not None:
        # A crash is blamed on the function whose line raised, not on another one that also fails its
        # probes: that one comes first only when it is the caller (its line may have raised on the
        # dependency's wrong result) or the one that raised. A crash elsewhere names the function that
        # crashed, when it fails its own probes; otherwise the crash's own message stands alone.
        crashed = diagnosis.crashed_in(implementation, crash.observed)
        if crashed is not None and crashed not in culprit:
            bad = set(observation.deviating_functions(behaviour_only=True))
            culprit = (crashed, culprit[1], ()) if crashed in bad else None
    diagnoses = state.setdefault("diagnoses", {})
    families = state.setdefault("families", {})
    if exercise not in diagnoses:
        found = diagnosis.diagnose(implementation, exercise, observation)
        # (what a catalogued diagnosis can be about: a family's own words say where it holds)
        state.setdefault("touched", {})[exercise] = (diagnosis.functions_of(found), diagnosis.changes(found)) \
            if found else None
        unchecked = diagnosis.unexplained_input_checks(exercise, observation, found) if found else []
        diagnoses[exercise] = diagnosis.describe(exercise, found, unchecked)
        # No catalogued mistake: a family of mistakes, when one transformation explains every deviation.
        families[exercise] = None if found else diagnosis.diagnose_family(implementation, exercise, observation)
        if families[exercise] is not None:
            diagnoses[exercise] = diagnosis.describe_family(exercise, families[exercise])
    if not diagnoses[exercise] or families.get(exercise) is not None:  # (a known mistake stays first)
        # A function the test called whose parameters are not the API's, or a call that left out a parameter whose
        # default is not the API's (a crash too: causal=True raises): before a family, which reads the probes'
        # raises and values as a mistake of the idea (tests/api_signatures.py).
        try:
            changed = api_signatures.check(kit, exercise, state.setdefault("signatures", {})) \
                if _not_a_stub(findings) else None
        except Exception:  # noqa: BLE001 - feedback must never break the run
            changed = None
        if changed:  # its revisit line names the API's signature first, then the check's own
            return _led(findings, changed[0], changed[1], then=True)
    touched = state.get("touched", {}).get(exercise)
    # The known mistakes cannot be what this test found (blind rounds: a dropout that wrote over its input led by the
    # feed-forward's catalogued relu, a float64 result by a scale taken from the wrong axis, a padding mask by the
    # causal mask's diagonal): they lead nothing here.
    unexplained = bool(diagnoses[exercise] and touched and _unexplained(
        findings, load_curriculum().exercise(exercise).functions, *touched))
    # A family is matched on outputs too: an input changed in place is none of its (a two-mistake round: a dropout
    # that zeroed x in place and never rescaled was led, on every in-place failure, by "a scale").
    if families.get(exercise) is not None and any(failure.expected == failures.LEFT_INTACT for failure in findings):
        unexplained = True
    if culprit is not None:
        dependency, caller, also = culprit
        # Every idea of the caller's gives way to fixing the dependency first.
        lead = diagnosis.describe_blame(dependency, caller, observation, also)
        if diagnoses[exercise] and not unexplained and dependency in load_curriculum().exercise(exercise).functions:
            # The exercise's known mistake explains everything, the dependency included: it stays.
            lead += "\n" + diagnoses[exercise]
        return _led(findings, lead, diagnosis.revisit_dependency(dependency), keep_named=True, afterwards=True)
    if unexplained:
        return _led_by_first_step(findings, implementation, called, observation, getattr(kit, "_reached", None))
    if diagnoses[exercise]:
        family = families.get(exercise)  # the family's idea replaces the tests' (a symptom's) revisit lines
        return _led(findings, diagnoses[exercise], family.revisit if family is not None else None)
    return _led_by_first_step(findings, implementation, called, observation, getattr(kit, "_reached", None))


def _unexplained(findings: list[failures.Failure], own: tuple[str, ...], touched: frozenset[str],
                 changed: frozenset[str]) -> bool:
    """Whether the exercise's known mistakes cannot explain this test's failures.

    They are matched on outputs: an input changed in place is none of theirs; a dtype, a shape or a bad input
    accepted is theirs only where one of them changes that on a probe (``changed``: ``diagnosis.changes``); and a
    test of the exercise's functions (``own``) none of which they touch (``diagnosis.functions_of``: the functions
    their outputs change, and those these call or are called by) found something else.
    """
    if any(failure.expected == failures.LEFT_INTACT for failure in findings):
        return True
    from tests import feedback  # only when a test fails

    if any(kind is not None and kind not in changed
           for kind in (feedback.kind_of_expected(failure.expected) for failure in findings)):
        return True
    about = {name for failure in findings for name in failure.functions.split()} & set(own)
    return bool(about) and not about & touched


def _not_a_stub(findings: list[failures.Failure]) -> bool:
    """Whether a check failed on a value or a raise of the student's own (not a stub, a timeout, a missing function)."""
    quiet = {failures.NOT_IMPLEMENTED, failures.UNAVAILABLE, failures.TIMED_OUT}
    return any(failure.kind not in quiet for failure in findings)


def _a_wrong_value(findings: list[failures.Failure]) -> bool:
    """Whether a check failed on a value (not a crash, a stub, a timeout or a missing function): state can explain."""
    quiet = {failures.CRASHED, failures.NOT_IMPLEMENTED, failures.UNAVAILABLE, failures.TIMED_OUT}
    return any(failure.kind not in quiet for failure in findings)


def _led(findings: list[failures.Failure], lead: str, revisit: str | None,
         keep_named: bool = False, then: bool = False, afterwards: bool = False) -> list[failures.Failure]:
    """``findings`` with ``lead`` as their diagnosis and, when given, ``revisit`` as every revisit line they have.

    ``keep_named``: a revisit line that names a convention or a question of precision stays, after ``revisit``
    (the dependency to fix first may be wrong only in that way, as its own tests say). ``then``: every revisit
    line stays, after ``revisit`` (a lead that may explain part of the failure only: a default not the API's).
    ``afterwards``: every other revisit line stays too, as what to revisit should the test still fail once
    ``revisit`` is done (a dependency blamed first: the caller may have a mistake of its own, which a two-mistake
    round found hidden until the dependency was fixed, though fixing it changed nothing there).
    """
    from tests import steps

    def line(failure: failures.Failure) -> str:
        if revisit is None or not failure.revisit:
            return failure.revisit
        if then:
            return f"first {revisit}; then, if it still fails: {failure.revisit}"
        if keep_named and steps.names_a_convention(failure.revisit):
            return f"{revisit}; here: {failure.revisit}"
        if afterwards and failure.revisit != revisit:
            return f"{revisit}; should it still fail then, this test's own idea: {failure.revisit}"
        return revisit

    return [replace(failure, diagnosis=lead, revisit=line(failure)) for failure in findings]


def _led_by_first_step(findings: list[failures.Failure], implementation: Any, called: list[str],
                       observation: Any, reached: Any = None) -> list[failures.Failure]:
    """Nothing known explains the failure: lead with the step whose output first differs (``tests/steps.py``).

    Never over a message that already names a convention or a precision: the step would bury it.
    """
    from tests import steps

    if findings and all("ValueError" in failure.expected for failure in findings):
        return findings  # a bad input's missing check: no step's output explains it (cs231n's eps=0 was told one)
    if any(failure.expected == failures.LEFT_INTACT for failure in findings):
        # An input changed in place: a step's outputs explain none of it (a two-mistake round: a dropout that zeroed
        # x in place and never rescaled was led, on every in-place failure, by "a scale").
        return findings
    step = steps.first_step(implementation, called, observation, reached)
    if step is None or any(steps.names_a_convention(failure.message) for failure in findings):
        return findings
    from tests import diagnosis, relations

    crash = next((failure for failure in findings if failure.kind == failures.CRASHED), None)
    if crash is not None and diagnosis.crashed_in(implementation, crash.observed) not in (None, step.function):
        return findings  # the crash's own line lies in another function: a step elsewhere would contradict it
    crashes = [failure.what for failure in findings if failure.kind == failures.CRASHED]
    if any(relations.contradicted(step.claim, call) for call in crashes):
        return findings  # a family of inputs that this test's own crash lies outside of: it explains not everything
    text = step.text
    if step.general and not relations.shown_alike(step.text, [failure.observed for failure in findings]):
        text = step.general  # the fixed inputs' numbers (a factor) only above failures that show the same
    return _led(findings, text, step.revisit or None)


def _described(value: Any) -> str:
    """A result in a few words: its type, and an array's shape and dtype or a tuple's or a dict's items."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"a dict with the keys {', '.join(map(repr, list(value)[:6]))}"
    return "None" if value is None else f"a {type(value).__name__}"


def _explain_an_unusable_result(report: pytest.TestReport, called: list[str],
                                returned: tuple[str, Any] | None = None) -> failures.Failure:
    """A failure without a revisit line: the test itself could not use what the student's function returned.

    Returns the failure that explains it (the caller completes it and renders it as the report's text).

    (Crashes inside the student's code are explained by the Kit; this is an exception in the test's own
    code, e.g. ``out.sum(axis=-1)`` on a list, or ``a, b = result`` on a single array.)
    """
    crash = getattr(report.longrepr, "reprcrash", None)
    observed = crash.message.splitlines()[0] if crash is not None and crash.message else report.outcome
    function = called[-1] if called else "your function"
    name = f"{function}()" if called else function
    if returned is not None and returned[0] == function:  # what came back, which the message never said
        observed += f" (your {name} returned {_described(returned[1])})"
    failure = failures.Failure(
        kind=failures.UNUSABLE,
        what=f"the test could not use what {name} returned",
        expected="what the Returns section of its docstring promises (type, number of items, shape, dtype)",
        observed=observed,
        revisit=f"return exactly what the docstring of {name} describes: a numpy array (or the tuple or dict "
        "it names), with the shape and dtype it gives")
    return failure
