"""A hostile round on the entry paths other than plain ``grade``: Gradescope's runner, nbgrader, a cluster.

Each test is one finding: a way a run on that path gave a submission a score it should not have (a 0 for the
autograder's own failure), written so that it failed before the fix it names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.curriculum import PACKAGE
from grader.tests.waiting import HANG_SECONDS

RUN_AUTOGRADER = PACKAGE / "release_files" / "gradescope" / "run_autograder"


@pytest.mark.parametrize("python", ["/nonexistent/python", '/opt/a "quoted"\\path/python'])
def test_a_runner_without_python_writes_not_graded_never_a_zero(tmp_path: Path, python: str) -> None:
    """run_autograder's own fallback, when the interpreter setup.sh installed is missing, wrote ``"score": 0``.

    Gradescope then showed the student 0 / 336 for the autograder's failure, where every other failure of the
    runner (``gradescope.failure_results(students_fault=False)``) writes no score and says NOT GRADED. The path
    named in the message is written as a JSON string, so a quote or a backslash in it leaves the file readable.
    """
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    shutil.copy(RUN_AUTOGRADER, root / "source" / "run_autograder")
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=python)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode != 0  # the run failed, and says so to Gradescope
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert "score" not in results and not results["tests"], results
    assert results["output"].startswith("NOT GRADED (no score)") and python in results["output"], results
