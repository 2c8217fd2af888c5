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


SHARED_BIASES = '''
_checked_init_multi_head = init_multi_head


def init_multi_head(rng, d_model, n_heads):
    params = _checked_init_multi_head(rng, d_model, n_heads)
    shared = np.zeros(d_model)
    return params | dict.fromkeys(("b_q", "b_k", "b_v", "b_o"), shared)  # one array for the four biases
'''


def _graded(tmp_path, exercise: str, **appended: str) -> dict[str, float]:
    """The test scores of the reference with ``appended`` code, graded by ``attention-kit grade`` (one exercise)."""
    submissions = tmp_path / "submissions"
    copy_reference(submissions / "mallory", **appended)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out), "--jobs", "1",
               "--part", "all", "--exercise", exercise]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tests = json.loads((out / "mallory" / "results.json").read_text(encoding="utf-8"))["tests"]
    return {test["name"].split(": ", 1)[-1]: test["score"] for test in tests}


def test_arrays_shared_within_a_result_are_shared_when_graded(tmp_path):
    # init_multi_head giving its four biases one array (dict.fromkeys) failed test_init_multi_head_biases_are_zero in
    # the student's pytest (np.shares_memory) and passed it graded: each place of the array in the reply was sent,
    # and decoded, as an array of its own. One array in a result now crosses once, and arrives as one array.
    outcome = _graded(tmp_path, "multihead", multihead=SHARED_BIASES)
    assert outcome["test_init_multi_head_biases_are_zero"] == 0, outcome


def test_a_results_array_met_twice_crosses_once_and_arrives_as_one():
    import numpy as np

    from grader.sandbox import codec, frames

    shared, other = np.zeros(3), np.zeros(3)
    result = {"b_q": shared, "b_k": shared, "both": (shared, other), "w": [other]}
    arrays: list = []
    received = frames.Received(b"")
    payload = codec.result_payload(result, [[], {}], [[], {"$": "dict", "k": [], "v": []}], received, arrays)
    assert len(arrays) == 2  # each array once
    (header, decoded_arrays), _ = frames.unpack(frames.pack({"payload": payload}, arrays))
    back = codec.receive_result(header["payload"], decoded_arrays, (), {})
    assert back["b_q"] is back["b_k"] is back["both"][0] and back["both"][1] is back["w"][0]
    assert not np.shares_memory(back["b_q"], back["w"][0])
