"""One line for each exercise not started, instead of one failure report per test.

A fresh copy fails every test: every function of ``exercises/`` still raises
the stub's ``NotImplementedError``. Printed test by test that is a wall (over a
thousand lines, one sentence repeated); what the student needs is where to
start. So, in the terminal only, the tests of an exercise that is not started
are left out of the FAILURES section and of the short test summary, and the
exercise gets one line instead: its number and name, its file, its number of
tests, the command that runs it and its section of the reading. The tests stay
failed: the summary's counts and the exit status are pytest's own, and every
other reader of the reports (the grader's recorder, ``attention-kit status``,
the notebooks' check) sees the reports unchanged.

"Not started" is read from the outcomes, never from the files: every test of
the exercise in the run failed on a function of that exercise that raised
"not implemented yet" itself (the function the test called, not one it relies
on), and nothing else happened (no check failed, no error, no pass). A run of a
single exercise (``pytest -m softmax``, the command the line gives) shows its
failures in full, as does a run that stopped early (``-x``) or one that is not
a student's own (the grader and the notebooks supply the implementation).

Likewise an exercise whose every test failed only because another exercise's
module does not import (a syntax error in ``multihead.py`` fails every test of
the exercises that import it) is one ``BLOCKED`` line naming that module: the
broken exercise's own failures say it in full.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.curriculum import Exercise
from grader.curriculum import load as load_curriculum
from tests import failures

# The command that runs this suite when it is not plain pytest (set by `attention-kit test`): what a line suggests.
TEST_COMMAND_ENV = "ATTENTION_KIT_TEST_COMMAND"

# The sentence of a stub (``grader/authoring/sync.py``), and of a bare NotImplementedError (``tests/kit.py``).
STUB = ": not implemented yet"


@dataclass
class Outcomes:
    """What the run's tests showed, per exercise, as far as "not started" is concerned."""

    collected: Counter[str] = field(default_factory=Counter)
    """The number of tests of each exercise in the run."""
    stubbed: dict[str, set[str]] = field(default_factory=dict)
    """The node ids of each exercise's tests that failed on one of its own stubs."""
    started: set[str] = field(default_factory=set)
    """The exercises where something else happened: a pass, a failed check, a crash, an error."""
    given: frozenset[str] = frozenset()
    """The exercises the course gives rather than assigns (``Curriculum.given_names``)."""
    waiting: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    """Of each given exercise (working code a release ships), the node ids of its tests that failed only on a
    stub of an exercise the student writes, by that exercise: they pass once it is done."""
    blocked: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    """Of each exercise, the node ids of its tests that failed only because another exercise's module does
    not import, by the one sentence saying why (``syntax error in multihead.py line 50: ...``)."""

    def not_started(self) -> list[str]:
        """The exercises of the run whose every test failed on a stub of its own, in the run's order."""
        return [name for name, count in self.collected.items()
                if name not in self.started and len(self.stubbed.get(name, ())) == count]

    def only_blocked(self) -> list[str]:
        """The exercises of the run whose every test failed on one other module that does not import."""
        return [name for name, count in self.collected.items() if name not in self.started
                and len(self.blocked.get(name, {})) == 1 and sum(map(len, self.blocked[name].values())) == count]

    def only_waiting(self) -> list[str]:
        """The given exercises of the run whose every failing test waits on a stub of the student's."""
        return [name for name in self.collected if name in self.waiting and name not in self.started]


OUTCOMES = pytest.StashKey[Outcomes]()


def _exercise_of(item: pytest.Item) -> str:
    from tests.plugin import EXERCISE  # the plugin marks each test with its exercise when it collects it

    return item.stash.get(EXERCISE, "")


def _students_own_run(config: pytest.Config) -> bool:
    """False where the implementation is supplied (the grader, the notebooks): they keep no outcomes here."""
    return getattr(config, "attention_kit_implementation", None) is None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Count the tests of each exercise in the run (a student's run only)."""
    if not _students_own_run(session.config):
        return
    outcomes = session.config.stash[OUTCOMES] = Outcomes(given=frozenset(load_curriculum().given_names()))
    for item in session.items:
        if _exercise_of(item):
            outcomes.collected[_exercise_of(item)] += 1


def failed_on_own_stub(item: pytest.Item, exercise: Exercise) -> bool:
    """Whether the test ended on the function it called raising "not implemented yet", and on nothing else.

    The function must be one of ``exercise``'s and the one the test called last: a function the student
    wrote that relies on a stub still counts as started.
    """
    called = getattr(getattr(item, "funcargs", {}).get("impl"), "_called", None) or [""]
    found = failures.recorded(item)
    return (called[-1] in exercise.functions and len(found) == 1 and found[0].kind == failures.NOT_IMPLEMENTED
            and found[0].what.startswith(f"{called[-1]}{STUB}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note whether the test failed on a stub of its own exercise (or did anything else)."""
    report = yield
    outcomes = item.config.stash.get(OUTCOMES, None)
    name = _exercise_of(item)
    if outcomes is None or not name or report.skipped or (report.passed and call.when != "call"):
        return report
    if report.failed and call.when == "call" and (why := blocked_by(item, load_curriculum().exercise(name))):
        outcomes.blocked.setdefault(name, {}).setdefault(why, set()).add(item.nodeid)
        return report
    if name in outcomes.given:  # working code the release ships: it fails only on the student's stubs
        if report.failed:
            waits_for = failed_on_a_stub(item) if call.when == "call" else ""
            if waits_for:
                outcomes.waiting.setdefault(name, {}).setdefault(waits_for, set()).add(item.nodeid)
            else:
                outcomes.started.add(name)
        return report
    if call.when == "call" and report.failed and failed_on_own_stub(item, load_curriculum().exercise(name)):
        outcomes.stubbed.setdefault(name, set()).add(item.nodeid)
    else:
        outcomes.started.add(name)
    return report


# tests/kit.py's sentences
IMPORT_FAILED = re.compile(r"(?:syntax error in|importing) (?P<module>\w+\.py)\b|missing module (?P<missing>\w+):")


def blocked_by(item: pytest.Item, exercise: Exercise) -> str:
    """The one sentence saying which other exercise's module did not import, if the test failed on that only."""
    found = failures.recorded(item)
    if len(found) != 1 or found[0].kind != failures.UNAVAILABLE:
        return ""
    module = failed_module(found[0].what)
    return found[0].what if module and module != exercise.module_file else ""


def failed_module(why: str) -> str:
    """The file of the module that ``why`` (one of tests/kit.py's sentences) says did not import, or ""."""
    match = IMPORT_FAILED.match(why)
    return (match["module"] or f"{match['missing']}.py") if match else ""


def failed_on_a_stub(item: pytest.Item) -> str:
    """The exercise whose stub the test ended on ("not implemented yet", and nothing else), or ""."""
    found = failures.recorded(item)
    if len(found) != 1 or found[0].kind != failures.NOT_IMPLEMENTED or STUB not in found[0].what:
        return ""
    try:
        return load_curriculum().exercise_of_function(found[0].what.split(STUB)[0].strip()).name
    except ValueError:
        return ""


def _shown(path: Path, config: pytest.Config) -> str:
    """``path`` as the student would type it: relative to where pytest was started, when it is below it."""
    try:
        return str(path.relative_to(config.invocation_params.dir))
    except ValueError:
        return str(path)


def not_started_lines(config: pytest.Config, names: list[str]) -> list[str]:
    """One line for each exercise of ``names``: number and name, file, tests, command, reading, in columns."""
    from tests.plugin import resolve_impl_path

    curriculum = load_curriculum()
    outcomes = config.stash[OUTCOMES]
    folder = resolve_impl_path(config)
    given = config.getoption("--impl")
    impl = "" if given == "exercises" else f" --impl={given}"  # the command tests the same folder as this run
    # Run by `attention-kit test` (an installed kit: plain pytest there knows no --impl): its own command.
    command = os.environ.get(TEST_COMMAND_ENV, "")
    rows = []
    for name in names:
        exercise = curriculum.exercise(name)
        count = outcomes.collected[name]
        rows.append((f"{exercise.number:>2}. {name}", _shown(folder / exercise.module_file, config),
                     f"{count} test{'s' if count != 1 else ''}",
                     f"{command} -m {name}" if command else f"pytest -m {name}{impl}",
                     exercise.reading_link()))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return [("NOT STARTED " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
             + "  " + row[4]).rstrip() for row in rows]


def waiting_lines(config: pytest.Config, names: list[str]) -> list[str]:
    """One line for each given exercise of ``names`` whose failing tests wait on the student's stubs."""
    curriculum = load_curriculum()
    outcomes = config.stash[OUTCOMES]
    lines = []
    for name in names:
        exercise = curriculum.exercise(name)
        waits = outcomes.waiting[name]
        count = sum(map(len, waits.values()))
        under = set(curriculum.dependencies(name)) - outcomes.given | set(waits)  # what it builds on of yours
        on = ", ".join(str(e.number) for e in curriculum.exercises if e.name in under)
        lines.append(f"GIVEN       {exercise.number:>2}. {name}: working code you need not write; {count} of its "
                     f"{outcomes.collected[name]} tests fail until your exercise{'s' if len(under) > 1 else ''} "
                     f"{on} pass{'' if len(under) > 1 else 'es'} (they call them)")
    return lines


def blocked_lines(config: pytest.Config, names: list[str]) -> list[str]:
    """One line for each exercise of ``names`` whose tests all fail on another module that does not import."""
    from tests.plugin import resolve_impl_path

    curriculum = load_curriculum()
    outcomes = config.stash[OUTCOMES]
    folder = resolve_impl_path(config)
    rows = []
    for name in names:
        exercise = curriculum.exercise(name)
        (why, ids), = outcomes.blocked[name].items()
        module = _shown(folder / failed_module(why), config)
        rows.append((f"{exercise.number:>2}. {name}", _shown(folder / exercise.module_file, config),
                     f"{len(ids)} test{'s' if len(ids) != 1 else ''} fail until {module} imports: {why}"))
    widths = [max((len(row[column]) for row in rows), default=0) for column in range(2)]  # in columns, as above
    return [f"BLOCKED     {row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}" for row in rows]


def _folded(config: pytest.Config) -> tuple[list[str], list[str], list[str]]:
    """The exercises to show as one line each: not started, given ones waiting on them, blocked ones.

    All empty when the run is a single exercise's, or not a student's.
    """
    outcomes = config.stash.get(OUTCOMES, None)
    if (outcomes is None or len(outcomes.collected) < 2 or config.option.no_summary
            or not _students_own_run(config)):
        return [], [], []
    return outcomes.not_started(), outcomes.only_waiting(), outcomes.only_blocked()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # around the terminal's own summary (FAILURES, short summary)
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> Generator[None, None, None]:
    """Leave the not-started exercises' tests out of the report sections; one line per exercise after them.

    The tests are taken out of the reporter's list of failures while it writes its sections, and put
    back before it counts them for the last line, so the counts are the real ones.
    """
    names, waiting, blocked = _folded(config)
    if not names and not waiting and not blocked:
        return (yield)
    outcomes = config.stash[OUTCOMES]
    hidden = set().union(*(outcomes.stubbed[name] for name in names),
                         *(ids for name in waiting for ids in outcomes.waiting[name].values()),
                         *(ids for name in blocked for ids in outcomes.blocked[name].values()))
    failed = terminalreporter.stats.get("failed", [])
    terminalreporter.stats["failed"] = [report for report in failed if report.nodeid not in hidden]
    try:
        result = yield
    finally:
        terminalreporter.stats["failed"] = failed
    for line in blocked_lines(config, blocked):
        terminalreporter.write_line(line, red=True)
    for line in waiting_lines(config, waiting):
        terminalreporter.write_line(line, cyan=True)
    for line in not_started_lines(config, names) if names else []:
        terminalreporter.write_line(line, yellow=True)
    return result

