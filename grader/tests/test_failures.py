"""Failures are data (issue 22): recorded by the checks, rendered by each reader, never parsed back."""

from __future__ import annotations

import ast
import json
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from grader.curriculum import ROOT
from grader.quiet import run_pytest
from grader.student import status
from tests import failures
from tests.failures import (
    CHECK_FAILED,
    CRASHED,
    NOT_IMPLEMENTED,
    RAISED,
    RULE,
    UNUSABLE,
    WRONG_RESULT,
    Failure,
    failures_of,
    graded_text,
    student_text,
)

SOLUTIONS = ROOT / "solutions"

# A test file of exercise 1 (softmax) whose tests fail in known ways on the reference itself.
PROBE_TESTS = '''
import numpy as np
from tests.feedback import call_or_explain, expect, expect_shape, fail_now

EXERCISE = "softmax"


def test_two_checks(impl):
    out = impl.softmax(np.zeros((2, 3)))
    expect_shape(out.T, (2, 3), what="the shape of softmax(x)", idea="keep the shape")
    expect(False, what="a second property", expected="yes", observed="no", idea="think again")


def test_crash(impl):
    call_or_explain(impl.softmax, np.ones(3), axis=5, what="softmax(x, axis=5)", idea="valid axes")


def test_wrong_result(impl):
    fail_now(what="softmax(x)", expected="a tuple", observed="ndarray", idea="return a pair")


def test_the_test_cannot_use_it(impl):
    impl.softmax(np.ones(3)).no_such_method()


def test_check_then_its_own_error(impl):
    expect(False, what="w", expected="e", observed="o", idea="i")
    impl.softmax(np.ones(3)).no_such_method()


def test_passes(impl):
    expect(True, what="nothing", expected="", observed="", idea="")
'''


class _Reports:
    """Keeps the failed call reports of an inner pytest run, by test name."""

    def __init__(self) -> None:
        self.reports: dict[str, Any] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call":
            self.reports[report.nodeid.rsplit("::", 1)[-1]] = report


def run_probe_tests(tmp_path: Path, impl: Path, name: str = "test_failures_probe.py") -> dict[str, Any]:
    (tmp_path / name).write_text(PROBE_TESTS, encoding="utf-8")
    reports = _Reports()
    with pytest.MonkeyPatch.context() as patch:
        # pytest-check shapes its report differently inside an xdist worker (CI runs with -n auto): the inner
        # run is a student's plain pytest run, so it must not see the outer run's worker.
        patch.delenv("PYTEST_XDIST_WORKER", raising=False)
        code, printed = run_pytest([str(tmp_path / name), f"--impl={impl}", f"--rootdir={tmp_path}", "-c",
                                    str(ROOT / "pyproject.toml"), "-p", "no:cacheprovider", "-p", "tests.plugin",
                                    "-p", "pytest_check.plugin"], reports)
    assert code == pytest.ExitCode.TESTS_FAILED, printed
    return reports.reports


@pytest.fixture(scope="module")
def reference_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_probe_tests(tmp_path_factory.mktemp("probe"), SOLUTIONS)


def test_a_failed_check_is_recorded_with_its_fields(reference_reports):
    first, second = failures_of(reference_reports["test_two_checks"])
    assert first.what == "the shape of softmax(x)" and first.kind == CHECK_FAILED
    assert (first.expected, first.observed, first.revisit) == ("shape (2, 3)", "shape (3, 2)", "keep the shape")
    assert first.test == "test_failures_probe.py::test_two_checks" and first.exercise == "softmax"
    assert first.reading == "docs/reading.md#attention"  # grader/curriculum.toml: softmax reads "attention"
    assert first.diagnosis == ""  # the reference makes no known mistake
    assert (second.what, second.expected, second.observed, second.revisit) == (
        "a second property", "yes", "no", "think again")
    assert failures_of(reference_reports["test_passes"]) == []


def test_what_ended_a_test_is_recorded_with_its_kind(reference_reports):
    (crash,) = failures_of(reference_reports["test_crash"])
    assert crash.kind == CRASHED and crash.what == "softmax(x, axis=5)" and crash.revisit == "valid axes"
    assert crash.expected == "a result (these inputs are valid)"
    assert crash.observed.startswith(
        "ValueError: axis=5 is out of range for x of shape (3,)\n            at softmax.py line ")
    (wrong,) = failures_of(reference_reports["test_wrong_result"])
    assert (wrong.kind, wrong.expected, wrong.observed) == (WRONG_RESULT, "a tuple", "ndarray")
    (unusable,) = failures_of(reference_reports["test_the_test_cannot_use_it"])
    assert unusable.kind == UNUSABLE and unusable.what == "the test could not use what softmax() returned"
    assert unusable.observed == ("AttributeError: 'numpy.ndarray' object has no attribute 'no_such_method' (your "
                                 "softmax() returned a numpy array of shape (3,) and dtype float64)")


def test_an_error_of_the_test_after_failed_checks_is_recorded_after_them(reference_reports):
    report = reference_reports["test_check_then_its_own_error"]
    check, raised = failures_of(report)
    assert check.kind == CHECK_FAILED and (raised.kind, raised.what) == (
        RAISED, "the test stopped on AttributeError in its own code")
    assert status.failure_message(report) == ("FAILURE: w\n  expected: e\n  observed: o\n"
                                              "  read:     docs/reading.md#attention\n  revisit:  i")
    assert "AttributeError" in report.longreprtext  # pytest still shows the traceback


def test_the_report_shows_what_students_saw_before(reference_reports):
    report = reference_reports["test_two_checks"]
    node = report.nodeid
    assert report.longreprtext == (
        f"{node}:0: the shape of softmax(x)\n\n"
        "FAILURE: the shape of softmax(x)\n  expected: shape (2, 3)\n  observed: shape (3, 2)\n"
        "  read:     docs/reading.md#attention\n  revisit:  keep the shape\n"
        "FAILURE: a second property\n  expected: yes\n  observed: no\n"
        "  read:     docs/reading.md#attention\n  revisit:  think again\n"
        "------------------------------------------------------------\nFailed Checks: 2")
    assert failures.report_text(failures_of(report)) == report.longreprtext
    wrong = reference_reports["test_wrong_result"].longreprtext
    assert wrong == ("softmax(x)\n  expected: a tuple\n  observed: ndarray\n"
                     "  read:     docs/reading.md#attention\n  revisit:  return a pair")


def test_a_stub_is_recorded_as_not_implemented(tmp_path):
    reports = run_probe_tests(tmp_path, ROOT / "exercises", "test_failures_probe_stub.py")
    (stub,) = failures_of(reports["test_two_checks"])
    assert stub.kind == NOT_IMPLEMENTED and stub.ended_the_test
    assert stub.what == "softmax: not implemented yet (exercise 1, softmax.py; run `pytest -m softmax`)"
    assert (stub.expected, stub.observed, stub.revisit) == ("", "", "")
    # one sentence, then the link to the exercise's section of the reading on a line of its own
    assert stub.reading == "docs/reading.md#attention"
    assert stub.message == f"{stub.what}\n  read:     docs/reading.md#attention"


def test_a_diagnosis_is_recorded_with_every_failure_of_the_exercise(tmp_path):
    folder = tmp_path / "global_max"
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "softmax.py").read_text(encoding="utf-8")
    (folder / "softmax.py").write_text(source.replace("np.max(x, axis=axis, keepdims=True)", "np.max(x)"),
                                       encoding="utf-8")
    result = status.run_suite(folder, ["softmax"])["softmax"]
    failed = [test for test in result.tests if not test.passed]
    assert failed and all(test.failures for test in failed)
    for test in failed:
        lead = test.failures[0].diagnosis
        assert lead.startswith("Diagnosis: your softmax.py gives exactly the outputs of a known mistake:")
        assert all(failure.diagnosis == lead for failure in test.failures)
        # status shows the data rendered: the diagnosis, then the failed checks
        blocks = "\n".join(f"FAILURE: {f.what}\n  expected: {f.expected}\n  observed: {f.observed}\n"
                           f"  read:     docs/reading.md#attention\n  revisit:  {f.revisit}" for f in test.failures)
        assert test.message == f"{lead}\n{blocks}"


# ------------------------------------------------------------------------------------------- plain data

CHECK = Failure("the shape of f(x)", "shape (2, 3)", "shape (3, 2)", "keep the shape", test="t.py::test_a",
                exercise="softmax", reading="docs/reading.md#attention")
SECOND = Failure("values", "[1. 1.]", "[1. 0.]", "normalise each row", test="t.py::test_a")
CRASH = Failure("f(x) crashed", "a result", "ValueError: no\n            at f.py line 3: raise", "every input",
                kind=CRASHED, test="t.py::test_a")
CHECK_READ = "  read:     docs/reading.md#attention"  # a failure that knows its section links it
LEAD = "Diagnosis: your f.py gives exactly the outputs of a known mistake:\n  \"I did X.\"\nHint: think."


def test_a_failure_crosses_a_process_boundary_as_a_dict_of_str():
    data = CHECK.as_dict()
    assert set(data) == {"what", "expected", "observed", "revisit", "kind", "reading", "diagnosis", "test",
                         "exercise", "functions"}
    assert all(isinstance(value, str) for value in data.values())
    assert Failure.from_dict(json.loads(json.dumps(data))) == CHECK
    assert pickle.loads(pickle.dumps(CHECK)) == CHECK
    with pytest.raises(AttributeError):
        CHECK.what = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(("data", "named"), [
    ({"what": "w", "colour": "red"}, "colour"),
    ({"expected": "e"}, "'what'"),
    ({"what": "w", "kind": "exploded"}, "kind"),
    ({"what": 3}, "what"),
])
def test_bad_plain_data_is_refused_naming_what_is_wrong(data, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        Failure.from_dict(data)


def test_a_report_carries_the_failures_as_plain_data():
    class Report:  # what pytest-xdist rebuilds a report from: its attributes, as plain data
        pass

    report = Report()
    failures.attach(report, [CHECK, CRASH])  # type: ignore[arg-type]
    assert json.loads(json.dumps(getattr(report, failures.REPORT_ATTRIBUTE))) == [CHECK.as_dict(), CRASH.as_dict()]
    assert failures_of(report) == [CHECK, CRASH]
    assert failures_of(Report()) == []


# ------------------------------------------------------------------------------------------- rendering


def test_status_text_is_the_diagnosis_then_the_failed_checks():
    checks = [Failure(**{**CHECK.as_dict(), "diagnosis": LEAD}), SECOND]
    assert student_text(checks) == (
        f"{LEAD}\nFAILURE: the shape of f(x)\n  expected: shape (2, 3)\n  observed: shape (3, 2)\n"
        f"{CHECK_READ}\n  revisit:  keep the shape\nFAILURE: values\n  expected: [1. 1.]\n  observed: [1. 0.]\n"
        "  revisit:  normalise each row")
    assert student_text([CRASH], separator="\n\n") == (
        "f(x) crashed\n  expected: a result\n  observed: ValueError: no\n            at f.py line 3: raise\n"
        "  revisit:  every input")
    assert student_text([CHECK, CRASH]).endswith(f"{CHECK_READ}\n  revisit:  keep the shape")  # the checks, alone
    assert student_text([]) == ""


def test_graded_text_of_a_public_test_is_the_report_without_the_count():
    assert graded_text([CHECK, SECOND], hidden=False) == (
        "t.py::test_a:0: the shape of f(x)\n\nFAILURE: the shape of f(x)\n  expected: shape (2, 3)\n"
        "  observed: shape (3, 2)\n"
        f"{CHECK_READ}\n  revisit:  keep the shape\nFAILURE: values\n  expected: [1. 1.]\n"
        "  observed: [1. 0.]\n  revisit:  normalise each row")
    with_lead = [Failure(**{**CRASH.as_dict(), "diagnosis": LEAD})]
    assert graded_text(with_lead, hidden=False) == (
        f"{LEAD}\n\nf(x) crashed\n  expected: a result\n  observed: ValueError: no\n"
        "            at f.py line 3: raise\n  revisit:  every input")
    assert graded_text([CHECK, CRASH], hidden=False) == (
        "t.py::test_a:0: the shape of f(x)\n\nFAILURE: the shape of f(x)\n  expected: shape (2, 3)\n"
        f"  observed: shape (3, 2)\n{CHECK_READ}\n  revisit:  keep the shape\n"
        f"{RULE}\nFailed Checks: 1\n{RULE}\n"
        "f(x) crashed\n  expected: a result\n  observed: ValueError: no\n            at f.py line 3: raise\n"
        "  revisit:  every input")


def test_graded_text_of_a_hidden_test_is_what_the_recorder_gave():
    # The recorder's _hidden_failure (grader/grading/grade.py) gave these for the same reports.
    checks = [Failure(**{**CHECK.as_dict(), "diagnosis": LEAD}), SECOND]
    assert graded_text(checks, hidden=True) == (
        "t.py::test_a:0: the shape of f(x)\n\nFAILURE: the shape of f(x)\n  expected: shape (2, 3)\n"
        "  observed: shape (3, 2)\n"
        f"{CHECK_READ}\n  revisit:  keep the shape\nFAILURE: values\n  expected: [1. 1.]\n"
        "  observed: [1. 0.]\n  revisit:  normalise each row")  # no diagnosis in front of a hidden test
    assert graded_text([CRASH], hidden=True) == (
        "f(x) crashed\n  expected: a result\n  observed: ValueError: no\n            at f.py line 3: raise\n"
        "  revisit:  every input")
    assert graded_text([Failure(**{**CRASH.as_dict(), "diagnosis": LEAD})], hidden=True) == "  revisit:  every input"
    unusable = Failure("the test could not use what f() returned", "what it promises", "AttributeError: x",
                       "return what the docstring says", kind=UNUSABLE)
    assert graded_text([unusable], hidden=True) == "  revisit:  return what the docstring says"
    assert graded_text([], hidden=True) == ""


# ------------------------------------------------------------------------------------------- no parsing back

# Reading failure text back: its markers in a regex, a startswith, an `in`, a partition.
PARSING = [
    re.compile(r"""re\.\w+\(.*(FAILURE(?!S)|Failed Checks|revisit:)"""),  # (FAILURES: pytest's section)
    re.compile(r"""startswith\(\s*\(?\s*f?["'](FAILURE|Failed Checks|Diagnosis|First fix|\s*revisit)"""),
    re.compile(r"""["'](FAILURE:?\s?|Failed Checks:?\s?|\s*revisit:\s*|Diagnosis:)["']\s*(not\s+)?in\s"""),
    re.compile(r"""partition\(\s*["'](FAILURE|Failed Checks|revisit)"""),
    re.compile(r"""\bLEADS\b"""),
]
# No function may read failure text back (the recorder renders tests.failures.graded_text).
ALLOWED_FUNCTIONS: set[str] = set()


def _parsing_lines(path: Path) -> list[tuple[int, str, str]]:
    """(line number, enclosing function, line) of each line of ``path`` that reads failure text back."""
    source = path.read_text(encoding="utf-8")
    spans = [(node.lineno, node.end_lineno or node.lineno, node.name) for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        if any(pattern.search(line) for pattern in PARSING):
            inside = [span for span in spans if span[0] <= number <= span[1]]
            function = min(inside, key=lambda span: span[1] - span[0])[2] if inside else ""
            found.append((number, function, line.strip()))
    return found


def test_the_old_ways_of_parsing_failure_text_are_recognised(tmp_path):
    old = tmp_path / "old.py"
    old.write_text('''
_REVISIT = re.compile(r"^(\\s*revisit:\\s+).*$", re.MULTILINE)
def a(text, line, lines):
    head, marker, rest = text.partition("Failed Checks:")
    if "revisit:" not in text: pass
    if any(line.startswith("FAILURE: ") for line in lines): pass
    if text.lstrip().startswith(LEADS): pass
    text = re.sub(r"\\n-{20,}\\nFailed Checks: \\d+\\s*$", "", text)
''', encoding="utf-8")
    assert [number for number, _, _ in _parsing_lines(old)] == [2, 4, 5, 6, 7, 8]


def test_no_module_parses_failure_text_back():
    kit_tests = ROOT / "grader" / "tests"  # the kit's own tests read the messages to check them
    modules = [path for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "grader").rglob("*.py")]
               if not path.is_relative_to(kit_tests)]
    found = [f"{path.relative_to(ROOT)}:{number} ({function}): {line}"
             for path in modules for number, function, line in _parsing_lines(path)
             if function not in ALLOWED_FUNCTIONS]
    assert len(modules) > 50 and not found, "\n".join(found)


def test_what_a_check_expected_is_read_back_as_its_kind():
    """The words of tests/feedback.py's shape, dtype and bad-input checks are read back (the plugin's judgement of
    whether a known mistake can explain a failure) by the same file: each is its kind, other words none."""
    from tests import feedback

    assert feedback.kind_of_expected(feedback.shape_words((2, 3))) == "shape"
    assert feedback.kind_of_expected(feedback.shape_words((4,), array=True)) == "shape"
    assert feedback.kind_of_expected(feedback.dtype_words("float32")) == "dtype"
    assert feedback.kind_of_expected(feedback.input_check_words("mask")) == "input check"
    for other in ("the reference values (to a relative 1e-07)", "numbers", "a numpy.ndarray", "no warning",
                  "a ValueError whose message names 'mask'", "rows (the last axis) summing to 1"):
        assert feedback.kind_of_expected(other) is None, other
