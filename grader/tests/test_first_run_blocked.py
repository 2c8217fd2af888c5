"""An exercise whose every test fails because another exercise's module does not import is one line.

Found on the final code: in a fresh whole-kit release, a syntax error typed into multihead.py (exercise 6)
made the first `pytest` 688 lines, 170 of them "syntax error in multihead.py line 50": every test of
exercises 7, 8, 9, 12 and 13, which import multihead, repeated the one message that exercise 6's own
failures already give in full.
"""

from __future__ import annotations

import re
from pathlib import Path

from grader.curriculum import ROOT
from grader.tests.test_first_run import run_pytest
from grader.tests.test_student_loop import make_partial


def test_exercises_blocked_by_a_module_that_does_not_import_are_one_line_each(tmp_path: Path):
    folder = make_partial(tmp_path / "work", done=("softmax", "projections", "attention"))
    stub = (folder / "multihead.py").read_text(encoding="utf-8")
    assert "def split_heads(" in stub
    (folder / "multihead.py").write_text(stub.replace("def split_heads(", "def split_heads((", 1), encoding="utf-8")
    done = run_pytest("-m", "attention or multihead or layer", f"--impl={folder}")
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    failed = set(re.findall(r"^FAILED (tests/test_\d+_\w+)\.py::", out, flags=re.MULTILINE))
    assert failed == {"tests/test_06_multihead"}, out  # exercise 6's own failures, in full
    tests = (ROOT / "tests/test_06_multihead.py").read_text(encoding="utf-8").count("\ndef test_")
    assert out.count("syntax error in multihead.py line") <= tests + 1, out  # its tests, and the one line below
    shown = str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder)
    line = re.findall(rf"^BLOCKED +7\. layer +{re.escape(shown)}/layer\.py +(\d+) tests +fail until "
                      rf"{re.escape(shown)}/multihead\.py imports: syntax error in multihead\.py line \d+", out,
                      flags=re.MULTILINE)
    assert len(line) == 1, out
    summary = re.search(r"=+ (\d+) failed, (\d+) passed", out.splitlines()[-1])
    assert summary is not None, out.splitlines()[-1]
    multihead = out.count("\nFAILED tests/test_06_multihead.py::")
    assert int(summary[1]) == multihead + int(line[0]) and int(summary[2]) == 23, out


def test_blocked_lines_stand_in_columns(tmp_path: Path):
    # Exercises 7 and 8 both wait on multihead.py: their lines align as the NOT STARTED lines do.
    folder = make_partial(tmp_path / "work", done=("softmax", "projections", "attention"))
    stub = (folder / "multihead.py").read_text(encoding="utf-8")
    (folder / "multihead.py").write_text(stub.replace("def split_heads(", "def split_heads((", 1), encoding="utf-8")
    out = run_pytest("-m", "layer or backward", f"--impl={folder}").stdout
    blocked = [row for row in out.splitlines() if row.startswith("BLOCKED ")]
    assert len(blocked) == 2, out
    assert len({row.index("layer.py") if "layer.py" in row else row.index("backward.py") for row in blocked}) == 1
    assert len({row.index(" tests fail until ") for row in blocked}) == 1, blocked
