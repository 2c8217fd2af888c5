"""A killed run's temporary folders are removed by a later run (``grader.grading.scratch``), and only those."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.grading import scratch


def _gone_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _folder(path: Path, age: float) -> Path:
    path.mkdir(parents=True)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_only_the_stale_folders_of_gone_processes_are_swept(tmp_path: Path) -> None:
    gone, live, old = _gone_pid(), os.getpid(), scratch.STALE_SECONDS + 60
    killed = [_folder(tmp_path / f"attention-kit-{kind}-{gone}-x1y2", old) for kind in scratch.KINDS]
    (killed[0] / "student" / "modules").mkdir(parents=True)  # a killed batch's copy of a submission
    os.utime(killed[0], (time.time() - old, time.time() - old))
    kept = {
        "a live process's": _folder(tmp_path / f"attention-kit-run-{live}-abcd", old),
        "a gone process's, changed lately": _folder(tmp_path / f"attention-kit-run-{gone}-efgh", 10),
        "an older kit's, no pid": _folder(tmp_path / "attention-kit-run-abcd1234", old),
        "not the kit's": _folder(tmp_path / f"other-run-{gone}-abcd", old),
        "a samples folder": _folder(tmp_path / f"attention-kit-samples-{gone}-abcd", old),
    }
    link = tmp_path / f"attention-kit-grade-{gone}-link"
    link.symlink_to(kept["a live process's"])
    assert sorted(scratch.sweep(tmp_path)) == sorted(killed)
    assert not any(path.exists() for path in killed)
    assert all(path.is_dir() for path in kept.values()), [n for n, p in kept.items() if not p.is_dir()]
    assert link.is_symlink()


def test_a_new_folder_names_its_process_and_its_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    run = scratch.new_folder("run", listable=False)
    grade = scratch.new_folder("grade")
    assert run.parent == grade.parent == tmp_path
    assert run.name.startswith(f"attention-kit-run-{os.getpid()}-") and oct(run.stat().st_mode & 0o777) == "0o711"
    assert grade.name.startswith(f"attention-kit-grade-{os.getpid()}-")
    with pytest.raises(ValueError, match="kind must be one of"):
        scratch.new_folder("samples")
