"""Identity across the sandbox: graded, a test sees the objects it would see in the student's own run.

A hostile round found a result that *is* one of the call's arguments (the cache passed in, given back) arriving as
a new object decoded from plain data, so ``new is not cache`` held graded while it failed in the student's run: a
test that asks for a new object also asks what the new object holds, which crosses the boundary intact. One array
in two places of a result crosses as one (``codec._array_index``); an array a worker's results gave before comes
back as the same object, and an argument given back as the caller's own (``grader.sandbox.kept``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

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
    outcome = _graded(tmp_path, "decoding", decoding=CACHE_GIVEN_BACK)
    assert outcome["test_cache_is_never_changed"] == 0, outcome


SHARED_BIASES = '''
_checked_init_multi_head = init_multi_head


def init_multi_head(rng, d_model, n_heads):
    params = _checked_init_multi_head(rng, d_model, n_heads)
    shared = np.zeros(d_model)
    return params | dict.fromkeys(("b_q", "b_k", "b_v", "b_o"), shared)  # one array for the four biases
'''


def _graded_tests(tmp_path, exercise: str, **appended: str) -> list[dict]:
    """The test records (results.json) of the reference with ``appended`` code, graded (one exercise): mallory's."""
    submissions = tmp_path / "submissions"
    copy_reference(submissions / "mallory", **appended)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out), "--jobs", "1",
               "--part", "all", "--exercise", exercise]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "mallory" / "results.json").read_text(encoding="utf-8"))["tests"]


def _graded(tmp_path, exercise: str, **appended: str) -> dict[str, float]:
    """The test scores of the reference with ``appended`` code, graded by ``attention-kit grade`` (one exercise)."""
    return {test["name"].split(": ", 1)[-1]: test["score"] for test in _graded_tests(tmp_path, exercise, **appended)}


def test_arrays_shared_within_a_result_are_shared_when_graded(tmp_path):
    # init_multi_head giving its four biases one array (dict.fromkeys) failed test_init_multi_head_biases_are_zero in
    # the student's pytest (np.shares_memory) and passed it graded: each place of the array in the reply was sent,
    # and decoded, as an array of its own. One array in a result now crosses once, and arrives as one array.
    outcome = _graded(tmp_path, "multihead", multihead=SHARED_BIASES)
    assert outcome["test_init_multi_head_biases_are_zero"] == 0, outcome


def test_a_results_array_met_twice_crosses_once_and_arrives_as_one():
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


# --------------------------------------------------------------------------- one array across calls

CACHED_CAUSAL_MASK = '''
import functools

causal_mask = functools.lru_cache(maxsize=None)(causal_mask)  # one array handed to every caller of causal_mask(n)
'''


def _failed_locally(folder, test_file: str) -> dict[str, str]:
    """The tests of ``test_file`` that fail in the student's own run on ``folder``: name -> their FAILURE text."""
    done = subprocess.run([sys.executable, "-m", "pytest", test_file, "--impl", str(folder), "-q", "-rf",
                           "-p", "no:cacheprovider", "-p", "no:xdist"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    names = [line.split("::")[1].split(" ")[0] for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    return {name: done.stdout for name in names}


def test_a_cached_causal_mask_fails_graded_as_in_the_students_run(tmp_path):
    # causal_mask wrapped in functools.lru_cache failed test_causal_mask_is_a_square_boolean_array in the student's
    # pytest (np.shares_memory(first, second): a caller's mask &= padding changes every later mask) and passed it
    # graded, every reply decoded into new arrays. The worker's array given twice now arrives as one object.
    graded = {test["extra_data"]["nodeid"].split("::")[-1]: test
              for test in _graded_tests(tmp_path, "masks", masks=CACHED_CAUSAL_MASK)
              if test["extra_data"]["nodeid"].startswith("tests/test_04_masks.py::")}
    local = _failed_locally(tmp_path / "submissions" / "mallory", "tests/test_04_masks.py")
    assert set(local) == {"test_causal_mask_is_a_square_boolean_array"}, list(local)
    assert {name for name, test in graded.items() if test["status"] == "failed"} == set(local)
    said = graded["test_causal_mask_is_a_square_boolean_array"]["output"]
    failure = said[said.index("FAILURE: "):]
    assert "the same memory: a mask kept between calls" in failure
    assert failure in local["test_causal_mask_is_a_square_boolean_array"], (failure, local)


CACHES = '''
_SEEN = np.zeros(2, dtype=np.int64)
_checked_padding_mask = padding_mask
_KEPT = []


def to_additive(mask, dtype=np.float64):
    _SEEN[0] += 1  # the function's own array, written into at every call, given every time
    _SEEN[1] = mask.shape[-1]
    return _SEEN


def combine_masks(*masks):
    _KEPT.extend(masks)  # keeps what it was given, and gives back the first mask it ever had
    return _KEPT[0]


def padding_mask(lengths, max_len):
    if lengths is not _SEEN:
        return _checked_padding_mask(lengths, max_len)
    return np.array([True, bool(_SEEN[0] == 0)])  # given its own array back, with what the caller wrote into it
'''


def _identities(impl) -> dict[str, object]:
    """What a test can observe of identity across calls, the same steps on any implementation."""
    causal_mask, to_additive = impl.causal_mask, impl.to_additive
    seen: dict[str, object] = {}
    first = causal_mask(4)
    first[0, 3] = True  # a caller writing into the mask it got (mask |= ...)
    again = causal_mask(4)
    seen["causal_mask(4) twice is one array"] = again is first
    seen["the later mask shows the caller's write"] = bool(again[0, 3])
    seen["causal_mask(5) is another array"] = causal_mask(5) is not first
    earlier = to_additive(np.ones((2, 3), dtype=bool))
    earlier_copy = earlier.copy()
    later = to_additive(np.ones((2, 5), dtype=bool))
    seen["a cached array given twice is one"] = later is earlier
    seen["its earlier holder sees the function's new content"] = earlier.tolist()
    seen["as it was"] = earlier_copy.tolist()
    earlier[0] = 0  # the test writes into it, then passes it back: in one process the function gets that object
    seen["passed back, it is the function's own array, with the test's write"] = \
        impl.padding_mask(earlier, 3).ravel().tolist()
    x, y = np.ones((1, 3), dtype=bool), np.zeros((1, 3), dtype=bool)
    seen["an argument given back is the caller's"] = impl.combine_masks(x, y) is x
    seen["an argument kept and given back later is the caller's"] = impl.combine_masks(y) is x
    return seen


def test_arrays_given_again_across_calls_are_the_same_objects_when_graded(tmp_path):
    # A cached array the test writes into, then gets again; an array the function writes into between calls; an
    # argument kept and given back: what a test observes of them graded is what it observes in the student's run.
    from grader.sandbox.proxy import IsolatedImplementation
    from grader.tests.test_isolation import FAST
    from tests.kit import LocalImplementation

    folder = copy_reference(tmp_path / "mallory", masks=CACHED_CAUSAL_MASK + CACHES)
    local = _identities(_Functions(LocalImplementation(folder)))
    with IsolatedImplementation(folder, limits=FAST) as isolated:
        graded = _identities(_Functions(isolated))
    assert local["a cached array given twice is one"] and local["the later mask shows the caller's write"]
    assert local["its earlier holder sees the function's new content"] == [2, 5]
    assert graded == local


def test_honest_functions_give_new_arrays_when_graded(tmp_path):
    # The reference gives a new array at every call: graded, as in-process, no two calls' results are one object.
    from grader.sandbox.proxy import IsolatedImplementation
    from grader.tests.test_isolation import FAST, SOLUTIONS

    with IsolatedImplementation(SOLUTIONS, limits=FAST) as isolated:
        causal_mask, combine_masks = isolated.function("masks", "causal_mask"), isolated.function("masks",
                                                                                                  "combine_masks")
        first = causal_mask(4)
        first[0, 3] = True
        second = causal_mask(4)
        assert second is not first and not np.shares_memory(first, second) and not second[0, 3]
        x = np.ones((1, 3), dtype=bool)
        combined = combine_masks(x, x)
        assert combined is not x and np.array_equal(combined, x)
        assert combine_masks(x) is not combined


def test_a_new_worker_gives_new_objects(tmp_path):
    # Tokens are a worker's: after a restart, the cached array the new worker gives is a new object (never one that
    # the last worker's tokens named).
    from grader.sandbox.proxy import IsolatedImplementation
    from grader.tests.test_isolation import FAST

    folder = copy_reference(tmp_path / "mallory", masks=CACHED_CAUSAL_MASK)
    with IsolatedImplementation(folder, limits=FAST) as isolated:
        causal_mask = isolated.function("masks", "causal_mask")
        first = causal_mask(4)
        assert causal_mask(4) is first
        isolated._stop()  # as after a timeout or a crash
        second = causal_mask(4)
        assert second is not first and causal_mask(4) is second


def test_tokens_name_only_what_the_worker_was_given_or_gave():
    # A reply may name only tokens its worker was given (ValueError: a malformed reply, the student's crash).
    import pytest

    from grader.sandbox.kept import CHANGED, GIVEN, NEW, SAME, Kept

    kept = Kept()
    with pytest.raises(ValueError, match="unknown token"):
        kept.resolve([[0, 0, SAME]], [np.zeros(2)], [])
    first = [np.zeros(2)]
    kept.resolve([[0, 0, NEW]], first, [])
    with pytest.raises(ValueError, match="given twice"):
        kept.resolve([[0, 0, NEW]], [np.zeros(2)], [])
    again = [np.ones(2)]
    kept.resolve([[0, 0, CHANGED]], again, [])
    assert again[0] is first[0] and first[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="no such array"):
        kept.resolve([[0, 1, GIVEN, 3]], [np.zeros(2)], [np.zeros(2)])
    for malformed in ([[5, 2, NEW]], [[0, 2]], [[0, 2, 9]], [[0, "2", NEW]], {"k": 0}, [[0, -1, NEW]]):
        with pytest.raises(ValueError, match="malformed|unknown"):
            kept.resolve(malformed, [np.zeros(2)], [])
    kept.reset()  # a new worker
    with pytest.raises(ValueError, match="unknown token"):
        kept.resolve([[0, 0, SAME]], [np.zeros(2)], [])


class _Functions:
    """``impl.name`` for ``impl.function("masks", name)``."""

    def __init__(self, impl) -> None:
        self.impl = impl

    def __getattr__(self, name: str):
        return self.impl.function("masks", name)
