"""Records to the end: a student's result is a typed row from the worker's Result to every file written.

The worker's :class:`Result` is scored into a :class:`StudentRow` of :class:`TestEntry` records; every output
(results.json, feedback.md, Gradescope's results.json, the gradebooks, Canvas, the class report, ...) is one
module of ``grader.grading.formats``, found there and nowhere else: a format added to that folder is written
by every batch with nothing else changed (the toy format below). results.json is one of them, read back by
``StudentRow.from_json``, which names the file and the field of a broken one.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from datetime import datetime
from pathlib import Path

import pytest

from grader.curriculum import load
from grader.grading import formats, outputs
from grader.grading.class_report import report_html
from grader.grading.export import ExportError, read_graded
from grader.grading.formats import results_json
from grader.grading.records import Result, TestRecord
from grader.grading.report import finish_student, read_row
from grader.grading.rows import ResultsFileError, StudentRow, TestEntry
from grader.grading.term_stage import TermInputs, finalize
from grader.suite import TestFile as SuiteFile
from grader.term import Adjustment, LatePolicy

# Every output the kit writes, each a format of the registry.
EXPECTED = {"results.json", "feedback.md", "feedback.html", "grades.csv", "grades-long.csv", "canvas.csv",
            "report.html", "gradescope"}


@dataclasses.dataclass
class _Submission:
    """What the batch knows of a prepared submission (``grader.grading.submissions``), the fields scoring reads."""

    student: str
    source: Path
    problems: dict
    details: dict
    status: str = "ok"

    def status_of(self, graded: set[str] | None) -> str:
        return self.status


def _suite(tmp_path: Path) -> list[SuiteFile]:
    """Two exercises' (made-up) test files: softmax public and hidden with its own points, masks public."""
    return [SuiteFile(str(tmp_path / "test_softmax.py"), "softmax", None),
            SuiteFile(str(tmp_path / "test_hidden_softmax.py"), "softmax", 3, hidden=True),
            SuiteFile(str(tmp_path / "test_masks.py"), "masks", None)]


def _result(suite: list[SuiteFile], *, fail: tuple[str, ...] = (), internal: tuple[str, ...] = ()) -> Result:
    """A worker's Result with three tests per file; the named tests failed, or the grader failed on them."""
    records = []
    for test_file in suite:
        for name in ("a", "b", "c"):
            nodeid = f"{Path(test_file.path).name}::test_{name}"
            records.append(TestRecord(
                nodeid=nodeid, file=test_file.path, exercise=test_file.exercise,
                outcome="failed" if nodeid in fail else "passed", message="expected 1, observed 2" * (nodeid in fail),
                duration=0.012345, internal="the worker died" if nodeid in internal else None))
    return Result(records=tuple(records), seconds=2.6, isolation="namespaces", output="hello\n",
                  refused=("os.system",), refused_shown=1, stats={"requests": 4}, timing={"calls": 0.5})


def _row(tmp_path: Path, student: str = "ada", **kinds) -> StudentRow:
    suite = _suite(tmp_path)
    submission = _Submission(student, tmp_path / student, {}, {})
    return finish_student(tmp_path / "out", submission, "f" * 64, suite, _result(suite, **kinds))


def test_the_worker_result_becomes_a_typed_row_of_typed_entries(tmp_path: Path) -> None:
    row = _row(tmp_path, fail=("test_softmax.py::test_b",))
    assert isinstance(row, StudentRow) and all(isinstance(t, TestEntry) for t in row.tests)
    assert not hasattr(row, "results")  # no results.json dict rides along
    failed = [t for t in row.tests if not t.passed]
    assert [(t.exercise, t.name, t.score, t.nodeid) for t in failed] == [
        ("softmax", "softmax: test_b", 0.0, "test_softmax.py::test_b")]
    assert "expected 1, observed 2" in failed[0].output
    hidden = [t for t in row.tests if t.hidden]
    assert len(hidden) == 3 and all(t.visibility != "visible" for t in hidden)
    assert row.hidden_maxima["softmax"] == 3 and row.hidden_maxima["masks"] == 0
    points = load().exercise("softmax").points
    assert row.maxima["softmax"] == points + 3 and row.exercises["softmax"] < row.maxima["softmax"]
    assert row.seconds == 3 and "Refused requests to the reference" in row.output and row.graded


def test_rows_read_back_share_what_every_student_has(tmp_path: Path) -> None:
    """A batch reads every row back for its gradebook: a test's name, id and tags are kept once, not per student.

    Issue 33: the batch process grew 0.44 MiB per submission (178 KiB of rows per Part I student at the end);
    with them shared, 55 KiB.
    """
    _row(tmp_path, "ada")
    _row(tmp_path, "grace", fail=("test_softmax.py::test_b",))
    ada, grace = read_row(tmp_path / "out", "ada"), read_row(tmp_path / "out", "grace")
    for mine, theirs in zip(ada.tests, grace.tests, strict=True):
        assert mine.name is theirs.name and mine.nodeid is theirs.nodeid and mine.tags is theirs.tags
        assert mine.exercise is theirs.exercise and mine.number is theirs.number
    assert not hasattr(ada.tests[0], "__dict__")  # no dict per test entry either


def test_the_batch_keeps_only_a_class_view_of_each_row(tmp_path: Path) -> None:
    """Issue 33: the batch's memory does not grow with the class's texts (the rows were 60 KiB each, Part I).

    Every student's own files are written from the whole row; what stays for the class's formats shares every
    test entry another student has, and keeps a failure's message only where it names a known mistake.
    """
    ada, grace = _row(tmp_path, "ada"), _row(tmp_path, "grace", fail=("test_softmax.py::test_b",))
    named = 'Diagnosis: your softmax.py gives exactly the outputs of a known mistake:\n  "it forgets the max"\n'
    failed = next(t for t in grace.tests if not t.passed)
    grace = dataclasses.replace(grace, tests=tuple(dataclasses.replace(t, output=named + t.output) if t is failed
                                                   else t for t in grace.tests))
    shared: dict = {}
    views = [outputs.class_view(row, shared) for row in (ada, grace)]
    for mine, theirs in zip(*(view.tests for view in views), strict=True):
        assert mine is theirs or not (mine.passed and theirs.passed)  # a passed test: one entry for the class
    assert views[1].output == "" and views[1].timing == {} and views[1].calls == {}
    kept = next(t for t in views[1].tests if not t.passed)
    assert kept.output == named + failed.output  # the class report reads its diagnosis
    plain = outputs.class_view(_row(tmp_path, "bob", fail=("test_softmax.py::test_b",)), shared)
    assert next(t for t in plain.tests if not t.passed).output == ""  # no mistake named: its message is the file's
    assert (views[1].score, views[1].exercises, views[1].hidden_maxima) == (grace.score, grace.exercises,
                                                                           grace.hidden_maxima)
    assert "it forgets the max" in report_html(views)


def test_the_last_stage_reads_the_rows_one_at_a_time(tmp_path: Path) -> None:
    """A student's own files are written before the next row is read: the rows are never all in memory."""
    rows = [_row(tmp_path, name) for name in ("ada", "bob", "cy")]
    out = tmp_path / "out"
    for name in ("ada", "bob", "cy"):
        (out / name / "feedback.md").unlink()

    def one_at_a_time():
        for index, row in enumerate(rows):
            assert [(out / r.student / "feedback.md").is_file() for r in rows] == [i < index for i in range(3)]
            yield row

    code, kept = outputs.write_gradebooks(out, one_at_a_time(), None, TermInputs(), lambda _: None)
    assert code == 0 and [row.student for row in kept] == ["ada", "bob", "cy"]
    assert (out / "grades.csv").read_text(encoding="utf-8").count("\n") == 4


def test_results_json_reads_back_to_the_same_row_and_the_same_bytes(tmp_path: Path) -> None:
    """A resumed batch and `export` read results.json back: the row it was written from, the file unchanged."""
    row = _row(tmp_path, internal=("test_masks.py::test_c",))
    assert not row.graded and any(t.score is None and t.not_graded for t in row.tests)
    late = LatePolicy(datetime.fromisoformat("2026-10-01T23:59:00+02:00"), 0.25, 3)
    inputs = TermInputs(late=late, times={"ada": datetime.fromisoformat("2026-10-02T10:00:00+02:00")},
                        adjustments={"ada": (Adjustment("softmax", 1.5, "rubric: clear names"),)})
    (kept,) = outputs.write_outputs(tmp_path / "out", [row], inputs, formats.Context(echo=lambda _: None))
    final = finalize(row, inputs)  # the whole row, which the student's own files are written from
    assert final.term_applied and final.late.days_late == 1 and final.computed == row.computed
    assert kept == outputs.class_view(final, {})  # what the batch keeps of it for the class's formats
    path = tmp_path / "out" / "ada" / "results.json"
    text = path.read_text(encoding="utf-8")
    again = read_row(tmp_path / "out", "ada")
    assert again == final
    assert results_json.results_text(again.to_json()) == text
    data = json.loads(text)
    assert "score" not in next(t for t in data["tests"] if t["extra_data"].get("not_graded"))
    assert data["extra_data"]["adjustments"] == [{"exercise": "softmax", "points": 1.5,
                                                  "reason": "rubric: clear names"}]


@pytest.mark.parametrize("break_it, field", [
    (lambda d: d["tests"][1].update(max_score="2"), "tests[1].max_score: expected a number"),
    (lambda d: d["extra_data"].pop("student"), "extra_data.student: missing"),
    (lambda d: d["extra_data"]["exercises"].update(softmax="ten"), "extra_data.exercises.softmax"),
    (lambda d: d["tests"][0]["extra_data"].pop("exercise"), "tests[0].extra_data.exercise: missing"),
    (lambda d: d.update(tests={}), "tests: expected a list"),
])
def test_a_broken_results_json_is_refused_naming_the_file_and_the_field(tmp_path: Path, break_it, field) -> None:
    _row(tmp_path)
    path = tmp_path / "out" / "ada" / "results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    break_it(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResultsFileError, match="ada/results.json") as raised:
        StudentRow.read(path)
    assert field in str(raised.value)
    with pytest.raises(ExportError) as exported:  # `attention-kit export` says the same, as one line
        read_graded(tmp_path / "out")
    assert str(path) in str(exported.value) and field in str(exported.value)


def test_every_output_is_one_format_of_the_registry() -> None:
    names = [module.NAME for module in formats.formats()]
    assert EXPECTED <= set(names) and len(names) == len(set(names))
    batch = {m.NAME for m in formats.formats() if getattr(m, "BATCH", True)}
    assert "gradescope" not in batch and {"results.json", "feedback.md", "grades.csv"} <= batch


TOY = '''"""A toy format: one line per student."""
from grader.grading.files import atomic_write

NAME = "toy.txt"
ORDER = 99


def write(out, rows, context):
    lines = [f"{row.student} {row.score:g}/{row.max_score:g} {sum(t.passed for t in row.tests)} passed"
             for row in rows]
    atomic_write(out / NAME, "\\n".join(lines) + "\\n")
    return [out / NAME]
'''


def test_a_new_format_is_its_module_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module dropped into the formats' folder is written by the batch's last stage: no list names it."""
    folder = tmp_path / "more_formats"
    folder.mkdir()
    (folder / "toy.py").write_text(TOY, encoding="utf-8")
    monkeypatch.setattr(formats, "__path__", [*formats.__path__, str(folder)])
    monkeypatch.delitem(sys.modules, "grader.grading.formats.toy", raising=False)
    importlib.invalidate_caches()
    try:
        rows = [_row(tmp_path, "ada"), _row(tmp_path, "bob", fail=("test_masks.py::test_a",))]
        written = outputs.write_outputs(tmp_path / "out", rows, TermInputs(), formats.Context(echo=lambda _: None))
        toy = (tmp_path / "out" / "toy.txt").read_text(encoding="utf-8").splitlines()
    finally:
        sys.modules.pop("grader.grading.formats.toy", None)
    assert [line.split()[0] for line in toy] == ["ada", "bob"] and toy[0].endswith(" 9 passed")
    assert toy[1].endswith(" 8 passed") and len(written) == 2
    assert (tmp_path / "out" / "grades.csv").is_file()  # beside the kit's own


def test_a_students_folder_is_made_for_the_instructors_user_and_group_only(tmp_path: Path) -> None:
    # Its name is the student's: other users of the machine may not list the class (the files were 640 already).
    import os
    import stat

    from grader.grading.files import atomic_write

    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "out" / "alice" / "results.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out" / "alice").stat().st_mode) == 0o750
    assert stat.S_IMODE((tmp_path / "out" / "alice" / "results.json").stat().st_mode) == 0o640


def test_an_exercise_that_did_not_run_keeps_its_hidden_maximum(tmp_path: Path) -> None:
    """A syntax error in one module: its exercise is one "did not run" entry worth the whole exercise.

    grades-long.csv then said ``max 12, hidden_max 0`` for that exercise where every classmate's row says
    ``max 12, hidden_max 2``: the hidden points were counted in ``max`` and missing from ``hidden_max``, so
    ``max - hidden_max`` (the public maximum) was wrong for that student only.
    """
    from grader.grading.formats.grades_long import long_csv

    suite = _suite(tmp_path)
    broken = _Submission("bob", tmp_path / "bob", {"softmax": "syntax error in softmax.py line 3"}, {},
                         status="syntax error in softmax.py line 3")
    bob = finish_student(tmp_path / "out", broken, "f" * 64, suite, _result(suite))
    ada = _row(tmp_path, "ada")
    assert [t.name for t in bob.tests if t.exercise == "softmax"] == ["softmax: did not run"]
    assert bob.maxima == ada.maxima and bob.hidden_maxima == ada.hidden_maxima == {"softmax": 3, "masks": 0}
    assert read_row(tmp_path / "out", "bob").hidden_maxima == ada.hidden_maxima  # read back from results.json
    lines = {line.split(",")[0] + "/" + line.split(",")[4]: line.split(",")[6:8]
             for line in long_csv([ada, bob]).splitlines()[1:]}
    assert lines["bob/softmax"] == lines["ada/softmax"]
