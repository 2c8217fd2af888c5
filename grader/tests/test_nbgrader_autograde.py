"""The step that replaces nbgrader's kernel at autograde (``grader.grading.nbgrader_autograde``), without nbgrader runs.

What it does end to end (six students through nbgrader, three of them
attacks on the kernel) is tested by the round trip of ``test_notebooks.py``;
here: it is the course's configuration, it refuses without isolation, and
it refuses rather than scores when the course's cells and the kit's tests differ.
"""

from __future__ import annotations

import nbformat
import pytest

pytest.importorskip("nbgrader")

from nbgrader.preprocessors import Execute  # noqa: E402

from grader.authoring.notebooks import build_course  # noqa: E402
from grader.curriculum import ROOT  # noqa: E402
from grader.grading import nbgrader_autograde as step  # noqa: E402

HIDDEN = ROOT / "grader" / "hidden_tests"


def test_the_course_autogrades_without_nbgraders_kernel(tmp_path) -> None:
    build_course(tmp_path, "per-exercise", HIDDEN)
    config = (tmp_path / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.Autograde.autograde_preprocessors = autograde_preprocessors()" in config
    steps = step.autograde_preprocessors()
    assert Execute not in steps and steps.count(step.IMPORT_NAME) == 1
    # Each notebook tells students that its test cells are a practice aid, not the grade.
    notebook = nbformat.read(tmp_path / "source" / "01-softmax" / "softmax.ipynb", 4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert "practice aid only" in text and "nothing they print counts" in text


def _notebook() -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def softmax(x, axis=-1):\n    return x\n")])


def test_without_isolation_the_step_refuses(monkeypatch) -> None:
    from grader.sandbox import limits

    def unavailable(policy: str = "require") -> None:
        raise limits.IsolationUnavailable("no user namespaces here (test)")

    monkeypatch.setattr(limits, "choose", unavailable)
    with pytest.raises(step.NotGraded, match="no user namespaces here"):
        step.grade_notebook(_notebook(), ["softmax"], [], fair=True)


def _cell(test: str, points: float = 1.0, hidden: bool = False) -> step.TestCell:
    return step.TestCell(f"softmax-{test}", "softmax", test, hidden, None, points)


def _result(test: str, passed: bool, points: float = 1.0, hidden: bool = False, visibility: str = "visible") -> dict:
    return {"name": f"softmax: {test}", "score": points if passed else 0.0, "max_score": points,
            "status": "passed" if passed else "failed", "output": "" if passed else f"{test}: expected 1, saw 2",
            "tags": ["softmax"] + (["hidden"] if hidden else []), "visibility": visibility,
            "extra_data": {"exercise": "softmax", "nodeid": f"tests/test_01_softmax.py::{test}"}}


def test_outcomes_are_the_graders_per_cell() -> None:
    cells = [_cell("test_a"), _cell("test_b"), _cell("test_c", hidden=True), _cell("test_d", hidden=True)]
    results = {"tests": [_result("test_a", True), _result("test_b", False), _result("test_c", False, hidden=True),
                         _result("test_d", False, hidden=True, visibility="hidden")]}
    found = step.outcomes(cells, results)
    assert found["softmax-test_a"] == (True, "")
    assert found["softmax-test_b"] == (False, "test_b: expected 1, saw 2")
    assert found["softmax-test_c"] == (False, "test_c: expected 1, saw 2")
    assert found["softmax-test_d"] == (False, step.HIDDEN_MESSAGE)  # a course that shows no hidden message
    passed, failed = step.cell_outputs(cells[0], True, ""), step.cell_outputs(cells[1], False, "test_b: saw 2")
    assert [o.output_type for o in passed] == ["stream"] and passed[0].name == "stdout"
    assert [o.output_type for o in failed] == ["error"] and "test_b: saw 2" in failed[0].evalue


def test_an_exercise_that_could_not_run_fails_every_cell() -> None:
    whole = {"name": "softmax: not graded", "score": 0.0, "max_score": 2.0, "status": "failed",
             "output": "softmax.py could not be graded: syntax error, line 3", "tags": ["softmax"],
             "visibility": "visible", "extra_data": {"exercise": "softmax", "nodeid": None}}
    found = step.outcomes([_cell("test_a"), _cell("test_b")], {"tests": [whole]})
    assert set(found.values()) == {(False, whole["output"])}
    with pytest.raises(step.NotGraded, match="worth 3 points"):
        step.outcomes([_cell("test_a"), _cell("test_b", points=2.0)], {"tests": [whole]})


@pytest.mark.parametrize("change", ["renamed", "added", "points"])
def test_cells_that_differ_from_the_kits_tests_are_not_graded(change: str) -> None:
    """A course built from other tests would score otherwise than grade: refused (a rerun grades it), never a zero."""
    cells = [_cell("test_a"), _cell("test_b")]
    tests = {"renamed": [_result("test_a", True), _result("test_b2", True)],
             "added": [_result("test_a", True), _result("test_b", True), _result("test_c", True)],
             "points": [_result("test_a", True), _result("test_b", True, points=1.5)]}[change]
    with pytest.raises(step.NotGraded, match="build the course again"):
        step.outcomes(cells, {"tests": tests})


def test_only_the_kits_test_calls_are_test_cells() -> None:
    hidden = ('# Hidden test\n### BEGIN HIDDEN TESTS\nfrom grader.student.notebook import check_hidden\n\n'
              'check_hidden("softmax", "test_x", folder="/somewhere")\n### END HIDDEN TESTS')
    assert step.parse_test_cell("id", hidden, 2) == step.TestCell("id", "softmax", "test_x", True, "/somewhere", 2.0)
    assert step.parse_test_cell("id", 'check("softmax", "test_y")', 1).key == ("softmax", "test_y", False)
    for other in ("assert softmax([0]) == 1", "check(name, 'test_y')", "def broken(:"):
        assert step.parse_test_cell("id", other, 1) is None


def test_the_course_folders_limits_apply_and_a_grader_failure_is_not_a_score(tmp_path, monkeypatch) -> None:
    import json

    from grader import course
    from grader.authoring import notebooks
    from grader.grading import grade, report

    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "course.toml").write_text("[limits]\nsubmission_seconds = 30\ncall_seconds = 2\nmemory_mib = 512\n",
                                        encoding="utf-8")
    monkeypatch.setenv(course.COURSE_ENV, str(folder))  # restored after the test
    # The course built in this course folder grades with it, wherever nbgrader runs.
    assert f"c.GradeInSandbox.course = {str(folder.resolve())!r}" in notebooks._grading_settings()
    seen: dict = {}

    def batch(submissions, out, **options):
        seen.update(options, notebooks=sorted(p.name for p in submissions.iterdir()))
        (out / step.STUDENT).mkdir(parents=True)
        (out / step.STUDENT / "feedback.md").write_text("", encoding="utf-8")
        results = {"score": 0.0, "tests": [], "extra_data": {
            "student": step.STUDENT, "status": "not graded: it broke", "exercises": {}, "max_exercises": {},
            "max_score": 0.0, "format": report.RESULTS_FORMAT}}
        (out / step.STUDENT / "results.json").write_text(json.dumps(results), encoding="utf-8")
        return 1

    monkeypatch.setattr(grade, "grade_batch", batch)
    with pytest.raises(step.NotGraded, match="not graded: it broke"):
        step.grade_notebook(_notebook(), ["softmax"], [], fair=False)
    assert (seen["budget"], seen["call_budget"], seen["memory"]) == (30, 2, 512)
    assert seen["isolation"] == "require" and seen["fair"] is False and seen["exercises"] == ["softmax"]
    assert seen["notebooks"] == [f"{step.STUDENT}.ipynb"]


def test_a_course_config_that_cannot_load_the_kit_stops_nbgrader(monkeypatch) -> None:
    """nbgrader logs an exception in its config file and goes on with its defaults (a kernel, as the instructor):
    the course's config stops it instead (SystemExit passes through traitlets' config loading)."""
    import sys

    from grader.authoring import notebooks

    text = notebooks.CONFIG_TEMPLATE.format(course_id="c", grading="")

    class Config(dict):
        def __getattr__(self, name):
            return self.setdefault(name, Config())

        def __setattr__(self, name, value):
            self[name] = value

    config = Config()
    namespace = {"get_config": lambda: config, "__file__": "/course/nbgrader_config.py"}
    exec(compile(text, "nbgrader_config.py", "exec"), dict(namespace))  # the kit loads: every step is the kit's
    assert config["Autograde"]["autograde_preprocessors"] and config["GenerateFeedback"]["preprocessors"]
    assert config["GenerateFeedback"]["exporter_class"].__name__ == "FeedbackExporter"  # links checked too
    monkeypatch.setitem(sys.modules, "grader.grading.nbgrader_autograde", None)  # an environment without it
    with pytest.raises(SystemExit, match="could not load the kit .*would run students' notebooks in a kernel"):
        exec(compile(text, "nbgrader_config.py", "exec"), dict(namespace))


def test_the_feedback_shows_no_hidden_test_and_runs_no_script_of_the_student() -> None:
    import re

    import nbformat
    from traitlets.config import Config

    from grader.grading.nbgrader_cells import feedback_exporter, feedback_preprocessors

    hidden = nbformat.v4.new_code_cell(
        '# Hidden test of softmax: it runs when your notebook is graded.\n### BEGIN HIDDEN TESTS\n'
        'from grader.student.notebook import check_hidden\n\n'
        'check_hidden("softmax", "test_secret_name", folder="/home/teacher/private")\n### END HIDDEN TESTS')
    hidden.metadata["nbgrader"] = {"grade": True, "locked": True, "grade_id": "h", "points": 1, "solution": False}
    markdown = nbformat.v4.new_markdown_cell('<script>document.title="XSS"</script>\n<img src=x onerror="alert(1)">')
    # Link syntax becomes HTML after SanitizeHTML has run: inline, reference, mixed case, entity-encoded, other
    # schemes, an image (a hostile tester's, on generate_feedback's page).
    links = nbformat.v4.new_markdown_cell(
        "[hint](javascript:alert(1)) [ref][1] [case](JaVaScRiPt:alert(2)) [entity](&#106;avascript:alert(3)) "
        "[vb](vbscript:msgbox(1)) [page](data:text/html,<script>alert(4)</script>) ![pic](javascript:alert(5)) "
        "[fine](https://example.org/reading)\n\n[1]: javascript:alert('ref')")
    notebook = nbformat.v4.new_notebook(cells=[markdown, links, hidden])
    config = Config()
    config.HTMLExporter.sanitize_html = True
    exporter = feedback_exporter()(config=config)
    for preprocessor in feedback_preprocessors():
        if preprocessor.__name__ in ("ClearHiddenTests", "SanitizeFeedback"):  # GetGrades needs nbgrader's gradebook
            exporter.register_preprocessor(preprocessor(config=config), enabled=True)
    page, _ = exporter.from_notebook_node(notebook)
    assert "test_secret_name" not in page and "/home/teacher/private" not in page and "check_hidden" not in page
    assert "Hidden test of softmax" in page
    assert "<script>document.title" not in page and not re.search(r"<img[^>]*onerror", page)
    assert "&lt;script&gt;document.title" in page  # shown as text
    targets = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert not [t for t in targets if re.match(r"\s*(javascript|vbscript|data:text)", t, re.IGNORECASE)], targets
    assert "https://example.org/reading" in targets and "#harmful-link" in targets
