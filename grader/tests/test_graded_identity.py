"""What crosses the sandbox is a copy: a test must never judge a result by its identity (a hostile round).

A result that *is* one of the call's arguments (the cache passed in, given back) arrives on the grading side as a
new object decoded from plain data, so ``new is not cache`` holds there while it fails in the student's own run. A
test that asks for a new object also asks what the new object holds, which crosses the boundary intact.
"""

from __future__ import annotations

import json
import subprocess
import sys

from grader.curriculum import ROOT
from grader.tests.test_trust import copy_reference

CACHE_GIVEN_BACK = '''
_checked_kv_cache_append = kv_cache_append


def kv_cache_append(cache, k_t, v_t):
    new = _checked_kv_cache_append(cache, k_t, v_t)
    return new if cache is None else cache  # the cache passed in, unchanged: nothing appended
'''


def test_a_cache_given_back_is_not_a_new_cache_when_graded(tmp_path):
    # kv_cache_append returning the cache it was given failed test_cache_is_never_changed in the student's pytest
    # (new is cache) and passed it graded (1.5 points): the grading side's `new` was a dict decoded from the reply.
    submissions = tmp_path / "submissions"
    copy_reference(submissions / "mallory", decoding=CACHE_GIVEN_BACK)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out), "--jobs", "1",
               "--part", "all", "--exercise", "decoding"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tests = json.loads((out / "mallory" / "results.json").read_text(encoding="utf-8"))["tests"]
    outcome = {test["name"].split(": ", 1)[-1]: test["score"] for test in tests}
    assert outcome["test_cache_is_never_changed"] == 0, outcome
