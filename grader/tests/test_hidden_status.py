"""The text a student reads at once (Gradescope's ``output``) says nothing of what happened in a hidden test.

Found by a hostile student: a softmax that ends its process only on an input no public test gives (a long float32
row) passed every public test, and the visible status line said "1 of N calls timed out or crashed (1 crashed)"
above the public score. Resubmitting with other thresholds searched the hidden test's input one bit at a time
before grades were out. The status a student reads now counts what the public tests saw only; the gradebook's
status (the instructor's) still counts every call.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.grading.grade import grade_batch
from grader.tests.test_trust import copy_reference, read_grades

# Ends its worker on a float32 input longer than any public test's (the hidden test below gives 5000 entries).
CRASHES_ON_LONG_FLOAT32 = '''
_softmax_of_reference = softmax


def softmax(x, axis=-1):
    import numpy as _np
    import os as _os
    if _np.asarray(x).dtype == _np.float32 and _np.size(x) > 2000:
        _os._exit(7)
    return _softmax_of_reference(x, axis)
'''

HIDDEN = '''
import numpy as np

EXERCISE = "softmax"


def test_long_float32_row(impl):
    row = np.linspace(-3.0, 3.0, 5000).astype(np.float32)
    assert abs(float(np.sum(impl.softmax(row))) - 1.0) < 1e-4
'''


def test_a_crash_in_a_hidden_test_is_not_in_the_status_a_student_reads(tmp_path: Path) -> None:
    folder, hidden = tmp_path / "submissions", tmp_path / "hidden"
    copy_reference(folder / "prober", softmax=CRASHES_ON_LONG_FLOAT32)
    hidden.mkdir()
    (hidden / "test_secret_long_softmax.py").write_text(HIDDEN, encoding="utf-8")
    out = tmp_path / "out"
    assert grade_batch(folder, out, jobs=1, hidden=hidden, exercises=["softmax"], echo=lambda *a: None) == 0
    row = read_grades(out)["prober"]
    assert "1 crashed" in row["status"], row  # the instructor's gradebook: every call, the hidden test's too
    results = json.loads((out / "prober" / "results.json").read_text(encoding="utf-8"))
    shown = results["output"]
    assert shown.startswith("Status: ok\n"), shown
    assert "crash" not in shown and "timed out" not in shown, shown
    hidden_entries = [t for t in results["tests"] if "test_long_float32_row" in t.get("name", "")]
    assert hidden_entries and all(t["visibility"] != "visible" for t in hidden_entries), results["tests"]
    assert all(t["score"] == 0 for t in hidden_entries)  # it failed, and says so once grades are published


WRONG_HIDDEN = '''
import numpy as np

from tests.feedback import expect_close

EXERCISE = "softmax"


def test_rows_sum_to_two(impl):
    out = impl.softmax(np.zeros((2, 3)))
    expect_close(out.sum(axis=-1), np.full(2, 2.0), what="row sums", idea="rows sum to one")
'''


def test_a_hidden_test_the_reference_fails_is_graded_for_no_one(tmp_path: Path) -> None:
    # An instructor's hidden test with a wrong expected value took its points from every student, silently: the
    # reference failed it, the kit's check let an assertion of a course's hidden test pass as "the instructor's
    # choice", and a correct submission scored 12 of 14 with exit 0 (a hostile round). The reference must pass
    # every test; one it fails is not graded for anyone, the batch exits 1, and no file carries a score.
    folder, hidden = tmp_path / "submissions", tmp_path / "hidden"
    copy_reference(folder / "honest")
    hidden.mkdir()
    (hidden / "test_mine_softmax.py").write_text(WRONG_HIDDEN, encoding="utf-8")
    out = tmp_path / "out"
    assert grade_batch(folder, out, jobs=1, hidden=hidden, exercises=["softmax"], echo=lambda *a: None) == 1
    row = read_grades(out)["honest"]
    assert row["status"].startswith("not graded: the kit's own reference fails"), row
    assert "test_rows_sum_to_two" in row["status"] and "row sums" in row["status"], row
    assert row["score"] == "", row
    results = json.loads((out / "honest" / "results.json").read_text(encoding="utf-8"))
    assert "score" not in results and not any("score" in test for test in results["tests"]), results
    assert results["output"].startswith("Status: not graded"), results["output"]
