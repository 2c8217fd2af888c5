"""``pytest -m NAME`` collects only that exercise's test file, and never drops a file that could match."""

from __future__ import annotations

import pytest

from grader.curriculum import ROOT, load
from tests.selection import could_select

NAMES = load().names


class _Collected:
    """Records the test modules pytest collected."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.tests: set[str] = set()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.nodeid.endswith(".py"):
            self.modules.add(report.nodeid.rsplit("/", 1)[-1])

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.tests = {item.nodeid for item in session.items}


def _collect(*arguments: str) -> _Collected:
    collected = _Collected()
    code = pytest.main([str(ROOT / "tests"), "--impl", str(ROOT / "solutions"), "--co", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"), *arguments],
                       plugins=[collected])
    assert code in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), code
    return collected


@pytest.mark.parametrize("expression", ["softmax", "1"])
def test_m_one_exercise_collects_only_its_file(expression):
    collected = _collect("-m", expression)
    assert collected.modules == {"test_01_softmax.py"}
    assert collected.tests and all(test.startswith("tests/test_01_softmax.py::") for test in collected.tests)


def test_m_skips_no_file_a_test_could_be_selected_from():
    # Whatever the expression, the tests selected are those selected when every file is collected.
    everything = _collect()
    for expression in ("masks or attention", "not softmax", "softmax and not slow", "not (2 or 3)"):
        selected = _collect("-m", expression)
        assert selected.tests == _select(everything.tests, expression), expression
        assert len(selected.modules) < len(NAMES) or expression.startswith("not ")


def _select(tests: set[str], expression: str) -> set[str]:
    """The tests of ``tests`` an expression of exercise names (or numbers) and ``slow`` selects, by hand."""
    names = {str(number): name for number, name in enumerate(NAMES, 1)}
    python = " ".join(names.get(word, word) for word in expression.replace("(", " ( ").replace(")", " ) ").split())
    chosen = set()
    for test in tests:
        exercise = load().exercise_of_test_file(test.split("::")[0])
        values = {name: name == exercise.name for name in NAMES} | {"slow": False}
        if eval(python, {"__builtins__": {}}, values):  # noqa: S307 - an expression of this test's own
            chosen.add(test)
    return chosen


@pytest.mark.parametrize(("expression", "exercise", "expected"), [
    ("softmax", "softmax", True),
    ("softmax", "masks", False),
    ("softmax or masks", "masks", True),
    ("softmax and masks", "softmax", False),  # no test carries two exercises' markers
    ("not softmax", "masks", True),
    ("not softmax", "softmax", False),
    ("slow", "softmax", True),  # a test of any file may be marked slow
    ("softmax and not slow", "masks", False),
    ("softmax and not slow", "softmax", True),
    ("slow and not slow", "softmax", False),
    ("(slow or masks) and not slow", "softmax", False),
    ("(slow or masks) and not slow", "masks", True),
    ("softmax(x=1)", "masks", True),  # a marker with arguments: never decided here
    ("", "masks", True),
    ("((", "masks", True),  # malformed: pytest says so itself
])
def test_could_select(expression, exercise, expected):
    assert could_select(expression, exercise, NAMES) is expected
