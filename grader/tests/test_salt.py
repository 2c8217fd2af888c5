"""A gate's salt reads every graded file, and the long training runs are drawn with it (issue 32).

A hostile round kept a model trained beforehand for exercise 9's long runs, whose task and seed were fixed,
and answered them from it (honest training everywhere else): 30/30 against 27.375 for the same submission
without it. The runs are now drawn from the submission's salt, and the salt reads every file that is graded
(the exercises' modules and the private ``_*.py`` helpers), so answers kept in any of them move the inputs.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests import effort


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(effort, "CONFIG", SimpleNamespace(option=SimpleNamespace(impl=str(tmp_path))))
    (tmp_path / "training.py").write_text("def train(): ...\n")
    (tmp_path / "_kept.py").write_text("KEPT = 1\n")
    return tmp_path


def test_every_graded_file_moves_the_salt(folder):
    first = effort.submission_salt("training")
    (folder / "_kept.py").write_text("KEPT = 22\n")  # answers kept in a private helper (another size: the
    # salt reads a file again when its size, time or inode changes)
    second = effort.submission_salt("training")
    (folder / "negation.py").write_text("WEIGHTS = [0.5]\n")  # or in another exercise's module
    third = effort.submission_salt("training")
    assert len({first, second, third}) == 3


def test_files_that_are_not_graded_leave_the_salt(folder):
    salt = effort.submission_salt("training")
    (folder / "__init__.py").write_text("# the package's\n")
    (folder / "scratch.py").write_text("x = 1\n")  # not an exercise's module: never graded
    (folder / "_notes").mkdir()
    assert effort.submission_salt("training") == salt
    assert effort.submission_salt("negation") != salt  # each gate its own (no negation.py yet: none)
    assert effort.submission_salt("negation") == 0


def test_the_long_runs_are_drawn_for_the_submission(folder):
    from tests.test_09_training import _long_run

    train_set, test, seed = _long_run(0)
    (folder / "_kept.py").write_text("KEPT = 333\n")
    other_set, _, other_seed = _long_run(0)
    assert seed != other_seed and not np.array_equal(train_set["tokens"], other_set["tokens"])
    again_set, _, again_seed = _long_run(0)
    assert again_seed == other_seed and np.array_equal(again_set["tokens"], other_set["tokens"])  # the same code
    assert _long_run(1)[2] != other_seed  # another attempt, another draw
