"""A failure is data, rendered once (issue 34.7): the terminal's report of a failed test is the rendering of its
records (``tests/failures.py``), with the lead the plugin completed them with, never a string edited beside them.
"""

from __future__ import annotations

import re
import shutil

from grader.curriculum import ROOT
from grader.tests.test_failures import run_probe_tests
from tests import failures
from tests.failures import RAISED, RULE, UNUSABLE, failures_of


def _global_max(folder):
    """solutions/ with softmax's maximum taken over the whole array (a known mistake, on values)."""
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "softmax.py").read_text(encoding="utf-8")
    (folder / "softmax.py").write_text(source.replace("np.max(x, axis=axis, keepdims=True)", "np.max(x)"),
                                       encoding="utf-8")
    return folder


def test_a_led_report_is_the_rendering_of_its_records(tmp_path):
    reports = run_probe_tests(tmp_path, _global_max(tmp_path / "global_max"), "test_failures_probe_rendered.py")
    failed = {name: report for name, report in reports.items() if report.failed}
    assert set(failed) == {"test_two_checks", "test_crash", "test_wrong_result", "test_the_test_cannot_use_it",
                           "test_check_then_its_own_error"}, sorted(failed)
    for name, report in failed.items():
        records = failures_of(report)
        # Led, but for test_two_checks: a shape the known mistake (on values) cannot give is not its to lead.
        led = name != "test_two_checks"
        assert records and records[0].diagnosis.startswith("Diagnosis: your softmax.py") == led, (name, records)
        text = report.longreprtext
        traceback = ""
        if records[-1].kind == RAISED:  # pytest's traceback of the test's own code follows the records' part
            checks = sum(not record.ended_the_test for record in records)
            # pytest-check's closing of its checks: a second rule follows before 3.1, the traceback at once from 3.1.
            traceback = re.split(rf"{RULE}\nFailed Checks: {checks}\n(?:{RULE}\n)?", text, maxsplit=1)[1]
            assert "AttributeError" in traceback, text
        assert text == failures.report_text(records, traceback=traceback), name
    # What the test could not use is a record like any other, shown with its link to the reading.
    (unusable,) = failures_of(failed["test_the_test_cannot_use_it"])
    assert unusable.kind == UNUSABLE and unusable.reading == "docs/reading.md#attention"
    assert "  read:     docs/reading.md#attention\n" in failed["test_the_test_cannot_use_it"].longreprtext
