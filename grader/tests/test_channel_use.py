"""The channel's limits follow the reference: what a test may send is a multiple of what the reference sends in it.

Issue 33: two students identical to the reference lost tests to a fixed total ("your code has sent the grader
536850544 bytes"). Each test's allowance is now ``Limits.channel_factor`` times the reference's own use in that
test (measured by the kit's check), never below a floor; a submission's, that factor times the reference's total.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from grader.grading import reference_use
from grader.grading.records import Job, Result, TestRecord
from grader.sandbox import channel_use
from grader.sandbox.channel_use import Use, for_submission, for_test
from grader.sandbox.proxy import Limits, WorkerCrashed
from grader.tests.test_isolation import isolated  # noqa: F401 - the fixture

# The old fixed total, scaled down (2 MB instead of 512 MiB) so that a test passes it in a few calls; a test floor
# of 1 MB, so that the reference's use (not the floor) decides the allowance.
SMALL = Limits(call_timeout=2.0, student_reply_bytes=2_000_000, test_bytes=1_000_000, test_messages=50)
# 400 kB per call: the student's softmax returns 50,000 float64 values.
LARGE = "import numpy as np\ndef softmax(x, axis=-1):\n    return np.ones(50_000)\n"


def allow(impl, limits: Limits, reference: Use) -> None:
    """What the recorder does at a test's start: the test's allowance from the reference's use in it."""
    impl.allow(for_test(limits, reference), for_submission(limits, reference.sent), reference.sent)


def test_honest_code_past_the_old_fixed_total_but_within_factor_x_the_reference_passes(isolated):  # noqa: F811
    impl = isolated({"softmax": LARGE}, limits=SMALL)
    softmax = impl.function("softmax", "softmax")
    allow(impl, SMALL, Use(sent=1_000_000, messages=40))  # the reference sends 1 MB here: 100 MB allowed
    for _ in range(20):  # 8 MB in all: four times the old fixed total of 2 MB
        assert softmax(np.zeros(2)).shape == (50_000,)
    assert impl.received > SMALL.student_reply_bytes


def test_a_flood_fails_saying_what_it_sent_what_the_reference_sends_and_the_limit(isolated):  # noqa: F811
    impl = isolated({"softmax": LARGE}, limits=SMALL)
    softmax = impl.function("softmax", "softmax")
    allow(impl, SMALL, Use(sent=5_000, messages=2))  # 100 x 5 kB is below the floor: 1 MB allowed
    with pytest.raises(WorkerCrashed) as raised:
        for _ in range(5):  # 2 MB
            softmax(np.zeros(2))
    message = str(raised.value)
    assert "in this test; the reference sends 5.0 kB; the limit is 100x that (at least 1.0 MB)" in message, message
    assert "more than the grader accepts" not in message, message
    # The next test has an allowance of its own: a flood costs its own test only.
    allow(impl, SMALL, Use(sent=5_000, messages=2))
    assert softmax(np.zeros(2)).shape == (50_000,)


def test_a_test_past_factor_x_the_references_messages_is_stopped_and_told_so(isolated):  # noqa: F811
    impl = isolated(limits=SMALL)
    softmax = impl.function("softmax", "softmax")
    allow(impl, SMALL, Use(sent=100, messages=1))  # one message: 100 allowed (the floor, 50, is lower)
    with pytest.raises(WorkerCrashed) as raised:
        for _ in range(150):
            softmax(np.zeros(2))
    message = str(raised.value)
    assert "messages in this test" in message and "the reference sends 1;" in message, message
    assert "the limit is 100x that" in message, message


def test_each_allowance_is_derived_from_the_references_recorded_use():
    limits = Limits()
    recorded = (("tests/test_a.py::test_big", 3_400_000, 120), ("tests/test_a.py::test_tiny", 200, 1))
    job = Job("ada", "/nowhere", ("/kit/tests/test_a.py",), (), reference_use=recorded)
    tests, files = reference_use.allowances(job, limits)
    assert tests["tests/test_a.py::test_big"] == channel_use.Allowance(
        round(limits.channel_factor * 3_400_000), round(limits.channel_factor * 120), Use(3_400_000, 120))
    assert tests["tests/test_a.py::test_tiny"].sent == limits.test_bytes  # the floor keeps a tiny test workable
    assert files == {"test_a.py": (max(limits.student_reply_bytes, round(limits.channel_factor * 3_400_200)),
                                   3_400_200)}
    # Not known yet (a kit's first check runs beside the student): only the grader's own bound, judged later.
    tests, files = reference_use.allowances(dataclasses.replace(job, reference_use=None), limits)
    assert tests == {} and files == {}
    assert reference_use.file_allowance(files, "tests/test_a.py::test_big", limits) == (limits.unknown_bytes, None)


def test_a_flood_in_one_files_tests_never_stops_another_files():
    # A numerical gradient past its tests' allowances (16 MB each, 512 MiB in all) once left every later exercise
    # "stopped" at its import: each test file's tests now share an allowance of their own.
    limits = Limits(student_reply_bytes=2_000_000, test_bytes=1_000_000)
    recorded = (("t.py::a", 1_000, 2), ("t.py::b", 1_000, 2), ("t.py::c", 1_000, 2), ("u.py::d", 1_000, 2))
    records = (TestRecord("t.py::a", "t.py", "e", "failed", sent=999_000, calls=2),  # each one just below its own
               TestRecord("t.py::b", "t.py", "e", "failed", sent=999_000, calls=2),
               TestRecord("t.py::c", "t.py", "e", "passed", sent=999_000, calls=2),  # past the file's 2 MB
               TestRecord("u.py::d", "u.py", "f", "passed", sent=1_000, calls=2))  # another exercise's: its own
    judged = reference_use.judged(Result(records=records), recorded, limits).records
    assert judged[2].outcome == "failed" and "in this file's tests" in judged[2].message, judged[2]
    assert judged[3] == records[3]


def test_a_workers_file_allowance_counts_the_files_tests_only(isolated):  # noqa: F811
    impl = isolated({"softmax": LARGE}, limits=SMALL)  # 400 kB a call; a file of tests may send 2 MB
    softmax = impl.function("softmax", "softmax")
    reference = Use(sent=10_000, messages=40)  # each test 1 MB (the floor)
    for _ in range(2):  # two tests of one file, 800 kB each
        impl.allow(for_test(SMALL, reference), SMALL.student_reply_bytes, reference.sent, impl.received)
        softmax(np.zeros(2))
        softmax(np.zeros(2))
    impl.allow(for_test(SMALL, reference), SMALL.student_reply_bytes, reference.sent, impl.received)
    with pytest.raises(WorkerCrashed) as raised:  # the third: the file's 2 MB spent
        softmax(np.zeros(2))
    assert "in this file's tests" in str(raised.value), raised.value
    impl.allow(for_test(SMALL, reference), SMALL.student_reply_bytes, reference.sent, 0)  # another file's test
    assert softmax(np.zeros(2)).shape == (50_000,)


def test_a_student_graded_beside_the_first_check_is_judged_by_its_figures_afterwards():
    recorded = (("t.py::big", 3_400_000, 10), ("t.py::small", 1_000, 2), ("t.py::other", 1_000, 2))
    records = (TestRecord("t.py::big", "t.py", "e", "passed", sent=3_500_000, calls=12),  # as the reference: fine
               TestRecord("t.py::small", "t.py", "e", "passed", sent=2_100_000_000, calls=2),  # a flood
               TestRecord("t.py::other", "t.py", "e", "failed", message="boom", internal="the grader's", sent=10**10))
    judged = reference_use.judged(Result(records=records), recorded).records
    assert judged[0] == records[0]
    assert judged[1].outcome == "failed" and judged[1].message.startswith(
        "your code sent 2.1 GB to the grader in this test; the reference sends 1.0 kB; the limit is 100x that")
    assert judged[2] == records[2]  # the grader's own failure stays the grader's: no score, no blame


# A softmax that floods on float32 scores (17.6 MB a call: past the 16 MiB floor of a test, far past 100 times what
# the reference sends in any softmax test, far below one reply's 64 MiB) and is the reference's otherwise.
FLOOD = ("import numpy as np\n_reference = softmax\n"
         "def softmax(x, axis=-1):\n"
         "    return np.ones(2_200_000) if np.asarray(x).dtype == np.float32 else _reference(x, axis)\n")


def test_the_batch_derives_each_tests_limit_from_the_references_recorded_use(tmp_path, monkeypatch):
    """A kit checked first (the students judged by its figures afterwards), then known (stopped as they run)."""
    import json
    import shutil

    from grader.curriculum import ROOT
    from grader.grading import grade, kit_check
    from grader.tests.test_trust import read_grades

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shutil.copytree(ROOT / "solutions", tmp_path / "subs" / "honest", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "solutions", tmp_path / "subs" / "flood", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "subs" / "flood" / "softmax.py", "a", encoding="utf-8") as module:
        module.write("\n\n" + FLOOD)
    for out in ("first", "second"):  # a kit never checked, then the same kit again (a new batch process)
        kit_check._KIT_CHECKS.clear()
        kit_check._USES.clear()
        planned = len(list((tmp_path / "cache").rglob("*.json")))
        assert grade.grade_batch(tmp_path / "subs", tmp_path / out, jobs=1, exercises=["softmax"],
                                 echo=lambda line: None) == 0
        grades = read_grades(tmp_path / out)
        assert grades["honest"]["score"] == grades["honest"]["max_score"], grades["honest"]
        recorded = {nodeid: sent for nodeid, sent, _ in next(iter(kit_check._USES.values()))}
        tests = json.loads((tmp_path / out / "flood" / "results.json").read_text(encoding="utf-8"))["tests"]
        flooded = [test for test in tests if "to the grader in this test" in test["output"]]
        assert flooded and all(test["status"] == "failed" for test in flooded), out
        for test in flooded:  # the limit said is the one derived from the reference's own use in that very test
            said = f"the reference sends {channel_use.size(recorded[test['extra_data']['nodeid']])}; the limit is 100x"
            assert said in test["output"], (out, test["output"][:500])
        assert float(grades["flood"]["score"]) > 0  # the tests it did not flood keep their points
        assert planned == (0 if out == "first" else len(list((tmp_path / "cache").rglob("*.json"))))


def test_a_kit_checked_for_one_selection_grades_the_reference_only_on_the_files_it_has_not_seen(tmp_path, monkeypatch):
    """Issue 33.1: the kit's check of a test file holds for any selection of the same kit (its own key)."""
    import shutil

    from grader.curriculum import ROOT
    from grader.grading import grade, kit_check
    from grader.tests.test_trust_more import planned_kit_checks

    planned = planned_kit_checks(tmp_path, monkeypatch)
    shutil.copytree(ROOT / "solutions", tmp_path / "subs" / "ada", ignore=shutil.ignore_patterns("__pycache__"))
    for out, exercises in (("one", ["softmax"]), ("two", ["softmax", "masks"]), ("again", ["masks", "softmax"])):
        kit_check._KIT_CHECKS.clear()  # a new batch process
        assert grade.grade_batch(tmp_path / "subs", tmp_path / out, jobs=1, exercises=exercises,
                                 echo=lambda line: None) == 0
    first, second, third = planned
    assert first is not None and any("01_softmax" in path for path in first.files)
    assert second is not None and second.files and all("04_masks" in path for path in second.files), second.files
    assert third is None  # every file known: no check at all
    # The allowances of the softmax tests come from the first batch's check, the masks tests' from the second's.
    recorded = {nodeid for nodeid, _, _ in kit_check._USES[next(iter(kit_check._KIT_CHECKS))]}
    assert any("01_softmax" in nodeid for nodeid in recorded) and any("04_masks" in nodeid for nodeid in recorded)
