"""``attention-kit status`` on an unchanged tree reads its last results back instead of running the suite."""

from __future__ import annotations

import argparse
import shutil

import pytest

from grader.curriculum import PART_ENV, ROOT
from grader.student import results_cache, status

PART_I = ("softmax", "projections", "attention")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A student midway: the stubs, with softmax done; the cache in the test's own folder."""
    monkeypatch.setenv("ATTENTION_KIT_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    shutil.copytree(ROOT / "exercises", work, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "solutions" / "_checks.py", work)
    shutil.copy(ROOT / "solutions" / "softmax.py", work)
    return work


def _runs(monkeypatch) -> list[list[str]]:
    """The pytest runs made from now on (their arguments), still run."""
    runs: list[list[str]] = []
    real = status.run_pytest

    def counted(arguments, *plugins):
        runs.append(list(arguments))
        return real(arguments, *plugins)

    monkeypatch.setattr(status, "run_pytest", counted)
    return runs


def test_an_unchanged_tree_is_not_run_again_and_reads_the_same(folder, monkeypatch):
    first = status.run_suite(folder, PART_I, cached=True)
    runs = _runs(monkeypatch)
    again = status.run_suite(folder, PART_I, cached=True)
    assert runs == []
    assert status.render_plain(again) == status.render_plain(first)
    assert [t.failures for e in again.exercises for t in e.tests] == [t.failures for e in first.exercises
                                                                       for t in e.tests]
    assert any(t.failures for e in again.exercises for t in e.tests)  # failures as data came back too
    assert status.run_suite(folder, ("softmax",), cached=True).passed == first["softmax"].passed and runs == []


def test_an_edit_a_new_file_or_a_kit_change_runs_it_again(folder, monkeypatch):
    status.run_suite(folder, PART_I, cached=True)
    runs = _runs(monkeypatch)
    shutil.copy(ROOT / "solutions" / "projections.py", folder)
    after_edit = status.run_suite(folder, PART_I, cached=True)
    assert len(runs) == 1 and after_edit["projections"].state == status.DONE
    (folder / "helpers.py").write_text("X = 1\n", encoding="utf-8")  # a module the others may import
    status.run_suite(folder, PART_I, cached=True)
    assert len(runs) == 2
    monkeypatch.setattr(results_cache, "KIT_FILES", (*results_cache.KIT_FILES, "README.md"))  # as if the kit changed
    status.run_suite(folder, PART_I, cached=True)
    assert len(runs) == 3
    status.run_suite(folder, PART_I)  # uncached by default (watch, demo): always runs
    assert len(runs) == 4


def test_only_the_exercises_not_kept_are_run(folder, monkeypatch):
    status.run_suite(folder, ("softmax",), cached=True)
    runs = _runs(monkeypatch)
    status.run_suite(folder, PART_I, cached=True)
    assert len(runs) == 1 and not any("test_01_softmax" in argument for argument in runs[0])


def test_a_timed_out_result_is_not_kept(folder, monkeypatch):
    key = results_cache.fingerprint(folder)
    timed_out = {"tests": [{"name": "t", "exercise": "softmax", "passed": False,
                            "message": "softmax() did not finish within 5 s: an infinite loop?", "failures": []}],
                 "error": ""}
    results_cache.write(folder, key, {"softmax": timed_out, "projections": {"tests": [], "error": ""}})
    assert set(results_cache.read(folder, key)) == {"projections"}


def test_the_command_reruns_on_request(folder, monkeypatch, capsys):
    monkeypatch.setenv(PART_ENV, "1")  # Part I is enough
    assert status.run(argparse.Namespace(impl=str(folder), rerun=False)) == 0
    runs = _runs(monkeypatch)
    assert status.run(argparse.Namespace(impl=str(folder), rerun=False)) == 0
    assert runs == []
    assert status.run(argparse.Namespace(impl=str(folder), rerun=True)) == 0
    assert len(runs) == 1
    printed = capsys.readouterr().out.split("\n\n", 1)[1]  # after the title line
    assert printed.count("Progress:") == 3


def test_an_unwritable_cache_is_no_error(folder, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("ATTENTION_KIT_CACHE", str(blocker / "cache"))
    assert status.run_suite(folder, ("softmax",), cached=True)["softmax"].state == status.DONE


def test_two_files_tests_of_one_name_stay_two_results(tmp_path):
    # Outside the kit's tree (a course folder's own exercises) pytest's node ids lack the file ("::test_x"): two
    # exercises' tests of one name were one result, the second one's failure told as the first one's.
    from types import SimpleNamespace

    recorder = status._Recorder(tmp_path)
    for path, outcome in (("own/test_a.py", "passed"), ("own/test_b.py", "failed")):
        recorder.pytest_runtest_logreport(SimpleNamespace(
            nodeid="::test_x", location=(path, 3, "test_x"), failed=outcome == "failed", skipped=False,
            outcome=outcome, longreprtext="AssertionError: b's own", longrepr=None, when="call", sections=[]))
    assert sorted((test.name, test.passed) for test in recorder.tests.values()) == [("test_x", False),
                                                                                  ("test_x", True)]
