"""A student's folder in odd states: what the student's own `pytest` and `status` say (a student-side round).

Each test here was found by putting a released kit's `exercises/` in such a state and running the commands.
"""

from __future__ import annotations

import re
from pathlib import Path

from grader.student import status
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


def _looping_softmax(tmp_path: Path) -> tuple[Path, Path, int]:
    """A folder midway whose softmax.py loops at its top, after noting each start in a file; the loop's line."""
    folder = make_partial(tmp_path / "work", done=("softmax", "projections", "attention", "masks"))
    starts = tmp_path / "starts"
    softmax = folder / "softmax.py"
    lines = softmax.read_text(encoding="utf-8").splitlines()
    at = lines.index("import numpy as np") + 1
    lines[at:at] = [f"open({str(starts)!r}, 'a').write('x')", "while True:", "    pass"]
    softmax.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, starts, at + 2


def test_a_loop_at_the_top_of_a_module_is_blamed_there_and_run_once(tmp_path: Path):
    # Found: `while True` at the top of softmax.py cost one budget (5 s) for every module importing it (74 s for
    # `pytest`), and each of their failures blamed its own file: "importing attention.py did not finish within 5 s
    # (an infinite loop at module level?)", attention.py being fine; nor were the exercises it blocked one line.
    folder, starts, line = _looping_softmax(tmp_path)
    out = run_pytest("-m", "softmax or attention or multihead", f"--impl={folder}").stdout
    assert starts.read_text() == "x", out[-3000:]  # its import ran once, not once per module importing it
    assert "importing attention.py did not finish" not in out, out[-3000:]
    assert f"importing softmax.py did not finish within 5 s (an infinite loop at module level? it was running " \
           f"softmax.py line {line})\n" in out, out[-3000:]
    assert re.search(r"^BLOCKED +3\. attention .* until \S*softmax\.py imports: importing softmax\.py", out, re.M), out


def test_status_says_a_module_that_loops_at_its_top_does_not_import(tmp_path: Path):
    folder, _, line = _looping_softmax(tmp_path)
    result = status.run_suite(folder, ["softmax", "attention"])
    assert result["softmax"].label == f"does not import: import did not finish (a loop?), line {line}"
    assert result["attention"].label == f"does not import: import of softmax.py did not finish (a loop?), line {line}"


def test_a_call_stopped_past_its_budget_names_the_students_line_that_was_running(tmp_path: Path):
    # Found: a softmax whose body was `while True: pass` was told "softmax(x: ...) crashed ... TimeoutError ...
    # at contextlib.py line 158: self.gen.throw(typ, value, traceback)" (the budget's own frame, not the loop), and
    # to revisit "what does the line above assume about them (the number of axes, ...)"; its later tests, "was not
    # run", were sent to "the line above" too, though they show none.
    folder = make_partial(tmp_path / "work", done=("softmax",))
    softmax = folder / "softmax.py"
    text = softmax.read_text(encoding="utf-8")
    body = text.index("    x = as_float_array(")
    softmax.write_text(text[:body] + "    while True:\n        pass\n" + text[body:], encoding="utf-8")
    line = text[:body].count("\n") + 1
    out = run_pytest("-m", "softmax", f"--impl={folder}").stdout
    first = out.split("\n_____", 2)[1]
    assert "softmax(x: float64 (2, 3, 5)) did not finish\n" in first, first
    assert f"stopped at softmax.py line {line}: while True:" in first, first
    assert "contextlib" not in out and "crashed" not in first, first
    assert "stopped past its time budget at the line above: a loop whose condition never changes" in first, first
    # Its second call stopped too (the kit's diagnosis asks a function stopped once nothing, as the grader's does:
    # its probes would only wait as long); from the third on, the calls are not run.
    second, later = out.split("\n_____", 4)[2:4]
    assert "did not finish within" in second, second
    assert "was not run: your code already ran out of time" in later, later
    assert "what does the line above assume" not in later and "fix that first" in later, later


def _printing_softmax(tmp_path: Path, tail: str = "") -> Path:
    """A folder whose softmax prints a long line at each call (then ``tail``, lines of its body)."""
    folder = make_partial(tmp_path / "work", done=("softmax",))
    softmax = folder / "softmax.py"
    text = softmax.read_text(encoding="utf-8")
    body = text.index("    x = as_float_array(")
    softmax.write_text(text[:body] + "    print('PRINTED' * 20_000)\n" + tail + text[body:], encoding="utf-8")
    return folder


def test_what_a_passing_function_prints_stays_captured(tmp_path: Path):
    # Found: a softmax that printed 5 MB at each call put 10 MB on the terminal of a run whose 15 tests all passed:
    # the calls the kit makes after a passing test (the unseen-input gate) ran outside pytest's capture.
    done = run_pytest("-m", "softmax", f"--impl={_printing_softmax(tmp_path)}")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "PRINTED" not in done.stdout, done.stdout[:3000]


def test_what_a_failing_function_prints_is_shown_cut_short(tmp_path: Path):
    # Found: the same softmax, wrong as well, made `pytest -m softmax` print 145 MB: pytest shows each failing test's
    # captured output in full.
    done = run_pytest("-m", "softmax", f"--impl={_printing_softmax(tmp_path, '    return x * 2' + chr(10))}")
    assert done.returncode == 1 and "Captured stdout call" in done.stdout, done.stdout[-3000:]
    assert "more characters printed, not shown]" in done.stdout, done.stdout[-3000:]
    assert len(done.stdout) < 200_000, len(done.stdout)


def test_a_deleted_module_blocks_the_exercises_importing_it_in_one_line_each(tmp_path: Path):
    # Found: with softmax.py deleted (or renamed Softmax.py), `pytest` printed 926 lines: every test of the exercises
    # importing it in full ("importing attention.py raised ModuleNotFoundError ..."), where a syntax error in
    # softmax.py makes them one BLOCKED line each (99 lines), as the README promises.
    folder = make_partial(tmp_path / "work", done=("softmax", "projections", "attention"))
    (folder / "softmax.py").rename(folder / "Softmax.py")
    out = run_pytest("-m", "softmax or attention", f"--impl={folder}").stdout
    assert "FAILED tests/test_03_attention.py" not in out, out[-3000:]
    assert re.search(r"^BLOCKED +3\. attention .* until \S*softmax\.py imports: missing module softmax: softmax\.py "
                     r"not found in \S+ \(found Softmax\.py: rename it to softmax\.py\); attention\.py imports it "
                     r"\(attention\.py line \d+\)$", out, re.M), out[-3000:]
    result = status.run_suite(folder, ["softmax", "attention"])
    assert result["attention"].label == "does not import: softmax.py is missing"


def test_an_array_subclass_is_judged_as_the_plain_array_the_grader_sees(tmp_path: Path):
    # Found: a softmax returning np.matrix (2-D) or a masked array failed 4 tests in the student's own run ("each row
    # sums to 1: expected shape (4,), observed (4, 1)", a matrix's sum keeping two axes, sent to the formula) and
    # passed graded, whose worker returns a plain ndarray.
    folder = make_partial(tmp_path / "work", done=("softmax",))
    softmax = folder / "softmax.py"
    softmax.write_text(softmax.read_text(encoding="utf-8").replace(
        "def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:",
        "def softmax(x, axis=-1):\n    r = _softmax(x, axis)\n"
        "    return np.asmatrix(r) if r.ndim == 2 else np.ma.masked_invalid(r)\n\n\n"
        "def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:", 1), encoding="utf-8")
    done = run_pytest("-m", "softmax", "-W", "ignore::PendingDeprecationWarning", f"--impl={folder}")
    assert done.returncode == 0, done.stdout[-3000:]
