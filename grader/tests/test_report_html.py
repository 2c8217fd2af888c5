"""The class report (OUT/report.html): its sections, every student text escaped, checked in a real headless browser.

The browser is Debian's Chromium (``apt-get install chromium``; .ci/run installs it when it runs as root). Without
it the browser test FAILS and says how to install it: it is never skipped as a pass. ``ATTENTION_KIT_CHROMIUM``
names another Chromium-compatible binary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.curriculum import load
from grader.grading import formats
from grader.grading.class_report import diagnoses, misconceptions, report_html
from grader.grading.report import RESULTS_FORMAT
from grader.grading.rows import StudentRow
from grader.tests.waiting import HANG_SECONDS

HOSTILE = '<script>alert("id")</script>'
ATTRIBUTE = '"><img src=x onerror=alert(1)>'
BIDI = "eve\u202egnp.exe"
MISTAKE = 'I took the maximum </td><script>alert("mistake")</script> without keepdims.'


def row(student: str, fraction: float, *, status: str = "ok", output: str = "") -> StudentRow:
    """A student's results (no grading: made here) with one exercise, softmax, at ``fraction`` of its points."""
    exercise = load().exercise("softmax")
    tests = [{"name": "softmax: test_rows_sum_to_one", "score": exercise.points * fraction,
              "max_score": exercise.points, "status": "passed" if fraction == 1 else "failed", "output": output,
              "tags": ["softmax"], "visibility": "visible",
              "extra_data": {"exercise": "softmax", "nodeid": "tests/test_01_softmax.py::test_rows_sum_to_one"}}]
    graded = not status.startswith("not graded")
    results = {"score": exercise.points * fraction, "tests": tests, "output": "", "execution_time": 1,
               "extra_data": {"student": student, "status": status,
                              "exercises": {"softmax": exercise.points * fraction if graded else None},
                              "max_exercises": {"softmax": exercise.points}, "max_score": exercise.points,
                              "format": RESULTS_FORMAT}}
    return StudentRow.from_json(results)


def diagnosis(description: str) -> str:
    return (f'Diagnosis: your softmax.py gives exactly the outputs of a known mistake:\n  "{description}"\n'
            "Hint: which axis?\n\nsoftmax(x) crashed")


@pytest.fixture
def hostile_class() -> list[StudentRow]:
    return [row("alice", 1.0), row(HOSTILE, 0.5, output=diagnosis(MISTAKE)),
            row(ATTRIBUTE, 0.0, output=diagnosis(MISTAKE), status=f"does not import: {HOSTILE}"),
            row(BIDI, 0.0, status="not graded: the worker did not start <b>bold</b>")]


def test_the_report_names_each_misconception_with_who_and_the_rows_not_graded(hostile_class):
    found = misconceptions(hostile_class)
    assert found == [("softmax", MISTAKE, sorted([HOSTILE, ATTRIBUTE]))]
    page = report_html(hostile_class)
    assert "Misconceptions diagnosed" in page and "Most failed tests" in page and "NOT GRADED" in page
    assert "<svg" in page and page.count("<figure>") == 2  # the course total and softmax
    assert "the worker did not start &lt;b&gt;bold&lt;/b&gt;" in page


def test_every_student_text_is_escaped(hostile_class):
    page = report_html(hostile_class)
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(&quot;id&quot;)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "\u202e" not in page and "eve\\u202egnp.exe" in page  # the bidi override shown, not obeyed
    assert "script-src" not in page and "default-src 'none'" in page  # and no script could run anyway


def test_diagnoses_reads_single_grouped_and_family_diagnoses():
    grouped = ('Diagnosis: your m.py gives exactly the outputs of 2 known mistakes made together:\n  - "A"\n'
               '    Hint: x\n  - it gives the outputs of one of these:\n    - "B"\n      Hint: y\nsoftmax failed')
    family = ("Diagnosis (a family of mistakes: scaling): on every input where your m.py goes wrong, it divides "
              "by d.\nRevisit: scaling")
    assert diagnoses(grouped) == ["A", "B"]
    assert diagnoses(family) == ["scaling: it divides by d"]
    assert diagnoses("expected 1, observed 2") == []


# ----------------------------------------------------------------------------------------------- a real browser


def chromium() -> str:
    found = os.environ.get("ATTENTION_KIT_CHROMIUM") or next(
        (path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None)
    if found is None:
        pytest.fail("no headless browser: install Debian's Chromium (`apt-get install chromium`; .ci/run does as "
                    "root) or set ATTENTION_KIT_CHROMIUM; the class report's browser check is never skipped")
    return found


def open_in_browser(page: Path, tmp_path: Path) -> tuple[Path, list[str], str]:
    """Load ``page`` headless: its screenshot, the console messages it logged, and the DOM it built."""
    flags = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", "--window-size=1200,1800"]
    shot = tmp_path / f"{page.stem}.png"
    done = subprocess.run([*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True,
                          timeout=HANG_SECONDS)
    console = [line for line in done.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=HANG_SECONDS).stdout
    return shot, console, dom


def test_the_browser_check_sees_a_console_error(tmp_path):
    """The check itself can fail: a page that logs an error (and one that runs a script) is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("boom")</script></body></html>')
    _, console, _ = open_in_browser(page, tmp_path)
    assert any("boom" in line for line in console), "the browser's console messages were not seen"


def test_the_report_renders_in_a_headless_browser_without_a_console_message(hostile_class, tmp_path):
    out = tmp_path / "out"
    written = formats.write_all(out, hostile_class, formats.Context(echo=lambda _: None), only=("report.html",))
    assert written == [out / "report.html"]
    shot, console, dom = open_in_browser(out / "report.html", tmp_path)
    assert not console, f"the report logged to the browser's console: {console}"
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
    # The hostile names are text on the page, not elements.
    assert "<script" not in dom and "<img" not in dom and "onerror=alert(1)&gt;" in dom
    assert "Misconceptions diagnosed" in dom


def test_a_new_format_is_one_module_and_the_feedback_page_escapes_everything(hostile_class, tmp_path):
    from grader.grading.formats import feedback_html

    assert "feedback.html" in [module.NAME for module in formats.formats()]  # found, not listed anywhere else
    hostile = hostile_class[2]  # the attribute-breaking id, a diagnosis naming a script
    for row in hostile_class:
        (tmp_path / "out" / row.student).mkdir(parents=True, exist_ok=True)
    rows = [row for row in hostile_class if "/" not in row.student]
    written = formats.write_all(tmp_path / "out", rows, formats.Context(echo=lambda _: None), only=("feedback.html",))
    assert len(written) == len(rows)
    page = (tmp_path / "out" / hostile.student / "feedback.html").read_text()
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;alert(&quot;mistake&quot;)" in page
    assert "<h2>1. Softmax" in page and "<pre>" in page
    _, console, dom = open_in_browser(tmp_path / "out" / hostile.student / "feedback.html", tmp_path)
    assert not console and "<script" not in dom and "Diagnosis: your softmax.py" in dom
    converted = feedback_html.markdown_to_html("- a\n- b\n\n```text\n<x>\n```")
    assert converted == "<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<pre>\n&lt;x&gt;\n</pre>"


def test_a_hidden_test_that_shares_a_public_ones_name_is_told_apart_in_the_summaries():
    # One student failed the hidden test_rollout_keeps_float32 only: "2 x" counted a public test beside it.
    from grader.grading import class_report, report
    from grader.grading.rows import StudentRow, TestEntry

    def entry(number: str, status: str, hidden: bool) -> TestEntry:
        return TestEntry("explain: test_rollout_keeps_float32", number, 1.0, status, "", "explain",
                         score=1.0 if status == "passed" else 0.0, nodeid=f"file{number}::test_rollout_keeps_float32",
                         tags=("explain", "hidden") if hidden else ("explain",))

    row = StudentRow(student="ada", status="ok", score=1.0, computed=1.0, max_score=2.0, exercises={"explain": 1.0},
                     computed_exercises={"explain": 1.0}, maxima={"explain": 2.0},
                     tests=(entry("10.1", "passed", False), entry("10.2", "failed", True)))
    text = report.summary([row], graded=1, reused=0, seconds=1.0)
    assert "1 x explain: test_rollout_keeps_float32 (hidden)" in text, text
    page = "\n".join(class_report._failed_tests_section([row]))
    assert "test_rollout_keeps_float32 (hidden)" in page, page
