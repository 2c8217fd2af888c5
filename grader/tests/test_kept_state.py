"""A test that fails because the code keeps something between calls says so first (``tests/kept_state.py``).

A blind round: an attention_scores caching its scores by shape and first entry passed exercise 3, then failed
exercise 6's test of the heads' columns, whose message blamed the heads (each must use its own columns), which
multi_head_attention did. Principle 1: blame the function that is actually wrong, and say nothing untrue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.curriculum import ROOT
from grader.tests.cheats import plant
from grader.tests.waiting import HANG_SECONDS

LEAD = "First: your code keeps something between calls."

# Scores kept by shape and first entry: a later call whose queries start alike is answered from an earlier one.
STALE_SCORES = '''
_scores = attention_scores
_KEPT = {}


def attention_scores(q, k):
    key = (q.shape, k.shape, float(q.flat[0]))
    if key not in _KEPT:
        _KEPT[key] = _scores(q, k)
    return _KEPT[key]
'''

# The same in exercise 6's own module (graded, a call of an earlier exercise's function is the reference's).
STALE_SPLIT = '''
_split_heads = split_heads
_KEPT = {}


def split_heads(x, n_heads):
    key = (x.shape, n_heads, float(x.flat[0]))
    if key not in _KEPT:
        _KEPT[key] = _split_heads(x, n_heads)
    return _KEPT[key]
'''

# A mistake without state (the heads' columns taken in the wrong order): no claim of state may appear.
REVERSED_HEADS = '''
_split_heads = split_heads


def split_heads(x, n_heads):
    return _split_heads(x, n_heads)[..., ::-1, :, :]
'''


def _run(folder: Path, test_file: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", test_file, "--impl", str(folder), "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    return done.stdout


def test_state_in_an_earlier_exercise_is_told_in_its_own_exercise_and_in_the_callers(tmp_path: Path) -> None:
    folder = plant(tmp_path / "stale", {"attention": STALE_SCORES})
    # Its own exercise: the unseen-input gate asks a drawn input, then the same with one entry changed (a key that
    # misses that entry answers it stale), then that one again first thing.
    own = _run(folder, "tests/test_03_attention.py")
    assert "failed" in own and "your attention_scores() answers the same input differently after other calls" \
        in own, own[-3000:]
    # The caller's tests: told as state of the caller or a function it went through, that one named.
    out = _run(folder, "tests/test_06_multihead.py")
    assert "failed" in out, out[-3000:]
    told = [line for line in out.splitlines() if "keeps something between calls" in line]
    assert told and all("multi_head_attention()" in line and "attention_scores()" in line for line in told), told
    assert "each head attends with its own columns" not in out.split("keeps something between calls")[0], out[:3000]


def test_a_failure_that_state_explains_leads_with_it(tmp_path: Path) -> None:
    # Exercise 6's state in its own split_heads: its first failing test leads with a call of that test answered
    # otherwise when asked first.
    folder = plant(tmp_path / "stale", {"multihead": STALE_SPLIT})
    out = _run(folder, "tests/test_06_multihead.py")
    assert "failed" in out, out[-3000:]
    lead = next(line for line in out.splitlines() if line.startswith(LEAD))
    assert "split_heads(" in lead and "asked first (your modules imported afresh)" in lead, lead


def test_a_mistake_without_state_is_never_told_it_keeps_state(tmp_path: Path) -> None:
    folder = plant(tmp_path / "reversed", {"multihead": REVERSED_HEADS})
    out = _run(folder, "tests/test_06_multihead.py")
    assert "failed" in out, out[-3000:]  # the mistake is seen ...
    assert LEAD not in out and "keeps something" not in out, out[-3000:]  # ... and not as state


GRADE = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[1])
from grader.grading import session
from grader.grading.records import Job, suite_files
from grader.suite import graded_suite

suite, _ = graded_suite(None, ["multihead"])
result = session.grade_in_process(Job(student="a student", folder=sys.argv[2], files=tuple(f.path for f in suite),
                                      suite=suite_files(suite), part="1"))
assert result.error is None, result.error
print(json.dumps([[r.nodeid, r.outcome, r.message] for r in result.records]))
'''


@pytest.mark.parametrize(("module", "code", "told"), [("multihead", STALE_SPLIT, True),
                                                      ("multihead", REVERSED_HEADS, False)])
def test_graded_the_check_asks_a_fresh_worker(module: str, code: str, told: bool, tmp_path: Path) -> None:
    folder = plant(tmp_path / "student", {module: code})
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", GRADE, str(ROOT), str(folder)], capture_output=True, text=True,
                          env=env, timeout=HANG_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    records = json.loads(done.stdout.strip().splitlines()[-1])
    failed = [message for _, outcome, message in records if outcome == "failed"]
    assert failed, records
    said = [message for message in failed if LEAD in message]
    assert bool(said) is told, failed[:3]
    if told:
        assert "split_heads()" in said[0] and "worker" not in said[0], said[0]
