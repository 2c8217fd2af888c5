"""`demo --causal` in a course without exercise 4 does not promise that exercise.

Found on the final code: in a Part III release (exercises 1-3 and 6 given, 4 not part of the course),
`attention-kit demo --causal` printed "causal mask: np.tril (until exercise 4, masks, passes)", an exercise
the student's course does not have (`pytest -m masks` there says "not part of this course").
"""

from __future__ import annotations

import shutil

import pytest

from grader import cli
from grader.curriculum import PART_ENV, ROOT

SOLUTIONS = ROOT / "solutions"


@pytest.mark.parametrize(("part", "said"), [("3", "np.tril (this course has no exercise 4, masks)"),
                                             ("1", "np.tril (until exercise 4, masks, passes)")])
def test_the_causal_demo_names_exercise_4_only_where_the_course_has_it(part, said, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv(PART_ENV, part)
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    shutil.copytree(SOLUTIONS, work, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "exercises" / "masks.py", work / "masks.py")  # exercise 4 not done (or not there)
    status = cli.main(["demo", "--causal", "--impl", str(work), "--out", str(tmp_path / "d.png")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"causal mask: {said}\n" in out, out
