"""A student's folder in odd states: what the student's own `pytest` and `status` say (a student-side round).

Each test here was found by putting a released kit's `exercises/` in such a state and running the commands.
"""

from __future__ import annotations

from pathlib import Path

from grader.tests.test_first_run import run_pytest
from grader.tests.test_student_loop import make_partial


def test_a_module_that_does_not_import_is_said_once_per_failure_not_chained_to_itself(tmp_path: Path):
    # Found: a syntax error in masks.py made every failure of exercise 4 print its message, then "During handling
    # of the above exception, another exception occurred:", then the message again: the gates' `once` ran its
    # computation (whose call fails the test) inside the `except` that caught the import's failure.
    folder = make_partial(tmp_path / "work", done=("softmax", "projections", "attention", "masks"))
    masks = folder / "masks.py"
    masks.write_text(masks.read_text(encoding="utf-8") + "\ndef (\n", encoding="utf-8")
    out = run_pytest("-m", "masks", f"--impl={folder}").stdout
    assert "syntax error in masks.py line" in out, out[-3000:]
    assert "During handling of the above exception" not in out, out[:3000]
