"""A batch graded with ``--container`` (no namespaces): what one student's worker can reach of another's.

Without a mount namespace a worker sees the machine's files as its own user: a second student's modules found the
first's in SUBMISSIONS (whose path is on the grader's command line, in ``/proc``) and ran them, for full marks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from grader.grading import grade


def _args(submissions: Path, out: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    grade.add_arguments(parser)
    return parser.parse_args([str(submissions), "--out", str(out), "--container", "--jobs", "1"])


def test_container_mode_refuses_submissions_that_another_user_could_reach(monkeypatch, capsys):
    graded: list[Path] = []
    monkeypatch.setattr(grade, "_exposed_to_workers", lambda hidden: "")  # the kit closed, as the runner does
    monkeypatch.setattr(grade, "grade_batch", lambda submissions, *a, **k: graded.append(submissions) or 0)
    base = Path(tempfile.mkdtemp(prefix="attention-kit-container-batch-"))  # the system's temp folder: o+x above
    try:
        if any(not path.stat().st_mode & 0o001 for path in base.resolve().parents):
            pytest.fail(f"the system's temp folder {base.parent} is not passable by others: this test needs one")
        submissions = base / "subs"
        for student in ("ada", "mallory"):
            (submissions / student).mkdir(parents=True)
            (submissions / student / "softmax.py").write_text("def softmax(x, axis=-1):\n    return x\n")
        os.chmod(base, 0o755)
        os.chmod(submissions, 0o755)
        assert grade.run(_args(submissions, base / "out")) == 2
        said = capsys.readouterr().err
        assert "could read the submissions" in said and "chmod 700" in said
        assert graded == []  # no student code ran
        os.chmod(submissions, 0o700)
        assert grade.run(_args(submissions, base / "out")) == 0
        assert graded == [submissions]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_bundles_runner_copies_the_upload_where_no_other_user_can_reach_it():
    # The Gradescope runner grades its private copy (a mkdtemp folder beside the upload): never refused for this.
    base = Path(tempfile.mkdtemp(prefix="attention-kit-container-batch-"))
    try:
        assert not grade._reachable(base / "submissions") and not grade._reachable(base)
        os.chmod(base, 0o711)
        assert grade._reachable(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
