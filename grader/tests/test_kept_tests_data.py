"""A test's own array that a student's function gave back is never written into by a later call.

A grading process keeps the tests' data for its next students (``tests/test_15_tokenization.py``'s
``corpus_merges`` is a ``functools.cache``: one merges array for every student the process grades), and the Kit
undoes what a call changes in its arguments, so that no submission changes a classmate's test data
(``test_isolation.test_a_change_in_place_is_reported_then_undone_so_no_later_test_or_student_sees_it``). But an
argument that the student's code returns (``GIVEN``, ``grader.sandbox.kept``) is then held under a token, and a
later call whose result is the worker's copy of it, written into meanwhile (``CHANGED``), has its bytes copied into
the test's own object (``Kept._same``): outside that later call's arguments, so nothing undoes it. A submission
whose ``token_pieces`` keeps the merges it was given, and zeroes them at its next call, zeroes the process's cached
``corpus_merges``: the next student graded by that process gets a wrong test (its "XK-9931-B" check fails for a
correct tokenizer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.tests.test_trust import copy_reference

KEEPS = '''
_KEPT = []


def token_pieces(text, merges):
    if not _KEPT:  # the first call: keep the test's merges, and give them back
        _KEPT.append(merges)
        return merges
    _KEPT[0][...] = 0  # a later call: write into what it kept, and give that back
    return _KEPT[0]
'''


def test_a_later_call_never_writes_into_a_tests_array_given_back_before(tmp_path: Path, monkeypatch) -> None:
    import tests.failures as failures_module
    from tests.kit import Kit

    monkeypatch.setattr(failures_module, "check", type("Recorder", (), {"fail": lambda self, message: None})())
    impl = IsolatedImplementation(copy_reference(tmp_path / "student", tokenization=KEEPS),
                                  limits=Limits(call_timeout=5))
    try:
        merges = np.arange(24, dtype=np.int64).reshape(12, 2) + 256  # the test's cached merges (corpus_merges)
        before = merges.copy()
        kit = Kit(impl, "tokenization")
        kit.token_pieces("vessel", merges)
        np.testing.assert_array_equal(merges, before)  # the call's own changes: undone, as always
        kit.token_pieces("sensor", np.array([[101, 102]], dtype=np.int64))  # another call, other merges
        np.testing.assert_array_equal(merges, before, err_msg="a later call wrote into the test's cached merges")
    finally:
        impl.close()
