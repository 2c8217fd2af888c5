"""A student's run imports what the grader has: the standard library, numpy and the student's own modules.

Graded, the sandbox holds Python's standard library and numpy only (``grader.sandbox.limits``): ``import torch``
fails there. A hostile round's torch autograd passed exercise 8's tests in the student's own run and scored 0 graded;
now the student's run says so first.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from grader.curriculum import ROOT
from tests.kit import LocalImplementation


def _folder(tmp_path, body: str):
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    with open(folder / "softmax.py", "a", encoding="utf-8") as module:
        module.write("\n\n_reference_softmax = softmax\n\n\ndef softmax(x, axis=-1):\n" + body
                     + "    return _reference_softmax(x, axis)\n")
    return LocalImplementation(folder)


def test_a_library_the_grader_lacks_fails_in_the_students_run_as_it_does_graded(tmp_path):
    softmax = _folder(tmp_path, "    import pytest  # noqa: F401 - installed here, not where it is graded\n").function(
        "softmax", "softmax")
    with pytest.raises(ModuleNotFoundError, match="where your code is graded") as raised:
        softmax(np.zeros((2, 3)))
    assert raised.value.name == "pytest"


def test_the_standard_library_and_numpy_import(tmp_path):
    softmax = _folder(tmp_path, "    import json, numpy.linalg  # noqa: F401, E401\n").function("softmax", "softmax")
    assert softmax(np.zeros((2, 3))).shape == (2, 3)
    import pytest as the_tests_own  # the tests' own imports are untouched

    assert the_tests_own is pytest
