"""The tests' own values kept between a student's runs (tests/kept_values.py): exact, safe, never while grading."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grader.curriculum import ROOT
from tests import kept_values
from tests.kinds import remembered


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh store in ``tmp_path`` (this process's own is put back afterwards)."""
    monkeypatch.setattr(kept_values, "_STORE", [])
    monkeypatch.setattr(kept_values, "_REFUSED", [])  # (this run collects files outside the manifest: refused)
    kept_values.use(tmp_path)
    return tmp_path


def _next_run(folder: Path) -> None:
    """What a new pytest process does: this run's values written, the file read again."""
    kept_values.save()
    kept_values._STORE.clear()
    kept_values.use(folder)


def test_every_kind_of_value_comes_back_exactly(store):
    f_order = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    value = {"weights": np.float32([[1.5, -0.0], [np.inf, np.nan]]), "order": f_order, "flags": np.array([True, False]),
             "scalar": np.float64(0.1), "zero_d": np.array(7, dtype=np.int16), "numbers": (-0.0, 1e-310, 2**70, True),
             "nested": [None, "naïve ∑", {3: np.int64(-4)}], "empty": np.zeros((0, 5))}
    kept_values.keep(kept_values.name_of(test_every_kind_of_value_comes_back_exactly, ("key",)), value)
    _next_run(store)
    back = kept_values.recall(kept_values.name_of(test_every_kind_of_value_comes_back_exactly, ("key",)))
    assert back is not kept_values.MISSING
    assert list(back) == list(value)
    for name in ("weights", "order", "flags", "zero_d", "empty"):
        assert back[name].dtype == value[name].dtype and back[name].shape == value[name].shape
        assert back[name].strides == value[name].strides and back[name].flags.writeable
        assert back[name].tobytes() == value[name].tobytes()
    assert type(back["scalar"]) is np.float64 and back["scalar"] == value["scalar"]
    assert [float(x).hex() if isinstance(x, float) else x for x in back["numbers"]] == \
        [float(x).hex() if isinstance(x, float) else x for x in value["numbers"]]
    assert type(back["numbers"]) is tuple and type(back["numbers"][3]) is bool
    assert back["nested"][:2] == [None, "naïve ∑"] and type(back["nested"][2][3]) is np.int64


CALLS: list[int] = []


def _own(x, n):
    CALLS.append(n)
    return {"twice": x * 2, "n": n}


def test_a_remembered_function_is_not_computed_again_in_the_next_run(store):
    CALLS.clear()
    first = remembered(_own)(np.arange(3.0), 4)
    _next_run(store)
    # A new process has an empty memory: only the disk can answer.
    again = remembered(_own)(np.arange(3.0), 4)
    assert CALLS == [4]
    assert np.array_equal(again["twice"], first["twice"]) and again["n"] == 4
    remembered(_own)(np.arange(3.0), 5)  # another input: computed
    assert CALLS == [4, 5]


def test_a_function_defined_inside_another_is_never_kept(store):
    """Two such functions may share a name and differ (their closures): neither is kept."""
    def made(offset):
        def inner(x):
            return x + offset
        return remembered(inner)

    assert made(1)(np.zeros(2))[0] == 1.0
    _next_run(store)
    assert made(2)(np.zeros(2))[0] == 2.0
    assert not kept_values._STORE[0].index


def test_a_damaged_or_hostile_file_is_never_trusted(store):
    tmp_path = store
    [path] = [kept_values._STORE[0].path]
    kept_values.keep(kept_values.name_of(test_a_damaged_or_hostile_file_is_never_trusted, (1,)), np.arange(4))
    kept_values.save()
    good = path.read_bytes()
    for damaged in (b"", b"\xff" * 40, good[:20], good.replace(b'"<i8"', b'"|O8"')):
        path.write_bytes(damaged)
        kept_values._STORE.clear()
        kept_values.use(tmp_path)
        assert kept_values.recall(kept_values.name_of(test_a_damaged_or_hostile_file_is_never_trusted, (1,))) \
            is kept_values.MISSING


def test_the_file_is_named_by_the_tests_so_a_changed_test_starts_afresh(tmp_path, monkeypatch):
    copy = tmp_path / "tests"
    copy.mkdir()
    (copy / "test_x.py").write_text("def test_x(): pass\n")
    monkeypatch.setattr(kept_values, "TESTS", copy)
    before = kept_values._tests_digest()
    (copy / "test_x.py").write_text("def test_x(): assert True\n")
    assert kept_values._tests_digest() != before


def _run(files: list[str], cache: Path, seed: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTENTION_KIT_CACHE": str(cache), "PYTHONHASHSEED": seed}
    return subprocess.run([sys.executable, "-m", "pytest", *files, "--impl", "solutions", "-q", "-p",
                           "no:cacheprovider", *extra], cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_second_run_reads_every_value_back_whatever_the_hash_seed(tmp_path):
    files = ["tests/test_11_decoding.py", "tests/test_15_tokenization.py"]
    first = _run(files, tmp_path, "1")
    assert first.returncode == 0, first.stdout[-2000:]
    [kept] = tmp_path.glob("tests-values-*")
    written = kept.stat().st_mtime_ns, kept.read_bytes()
    second = _run(files, tmp_path, "2")
    assert second.returncode == 0, second.stdout[-2000:]
    # Nothing new was computed (a key that depended on the process, an id or a hash, would be written again).
    assert (kept.stat().st_mtime_ns, kept.read_bytes()) == written


def test_grading_never_reads_nor_writes_them(tmp_path):
    """Values made wrong on disk fail the student's own run, and change nothing of a grade."""
    cache = tmp_path / "cache"
    files = ["tests/test_11_decoding.py"]
    assert _run(files, cache, "0").returncode == 0
    [kept] = cache.glob("tests-values-*")
    data = kept.read_bytes()
    size = 8 + int.from_bytes(data[:8], "little")
    kept.write_bytes(data[:size] + bytes(len(data) - size))  # every value kept now zeros: a valid, wrong file
    assert _run(files, cache, "0", "-x").returncode == 1  # the student's own run reads them
    poisoned = kept.read_bytes()  # (with what its first failure's observation computed, added)

    from grader.grading.samples import _copy_reference

    _copy_reference(tmp_path / "class" / "alice")
    env = {**os.environ, "ATTENTION_KIT_CACHE": str(cache), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "--out",
                           str(tmp_path / "out"), "--exercise", "decoding", "--jobs", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    row = (tmp_path / "out" / "grades.csv").read_text().splitlines()
    header, alice = row[0].split(","), row[1].split(",")
    assert alice[header.index("score")] == alice[header.index("max_score")], row
    assert kept.read_bytes() == poisoned and len(list(cache.iterdir())) == 1


def test_a_run_with_hidden_tests_keeps_nothing(tmp_path):
    """An instructor's run of the hidden tests writes none of their values to a cache folder."""
    done = _run(["tests/test_11_decoding.py", "grader/hidden_tests/test_hidden_11_decoding.py"], tmp_path, "0")
    assert done.returncode == 0, done.stdout[-2000:]
    assert not list(tmp_path.glob("tests-values-*"))
    assert _run(["tests/test_11_decoding.py"], tmp_path, "0").returncode == 0
    assert list(tmp_path.glob("tests-values-*"))  # the public file alone: kept
