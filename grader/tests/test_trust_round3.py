"""Round 3 of the hostile tests (issue 32): attacks written apart from the kit, each closed for its whole family.

Each test here failed against the kit before the fix it names (the report of the round says how).
"""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import host_memory
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.tests.test_trust import copy_reference, course_of_part


@pytest.fixture
def isolated():
    opened: list[IsolatedImplementation] = []

    def build(folder: Path, **options) -> IsolatedImplementation:
        impl = IsolatedImplementation(folder, **options)
        opened.append(impl)
        return impl

    yield build
    for impl in opened:
        impl.close()


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_tests_function_called_on_huge_arguments_stays_within_the_students_memory(isolated, tmp_path):
    # explain's predict runs in the grading process (the test's code); 64 MiB of int8 token ids made it index a
    # (9e6, 7, 5) float64 table there: 3 GB as root, outside the worker's limit. Now the student's limit bounds it.
    folder = copy_reference(tmp_path / "student", explain=(
        "def occlusion_importance(predict, tokens, target):\n"
        "    return predict(np.zeros((4_000_000, len(tokens)), dtype=np.int8))\n"))
    impl = isolated(folder, limits=Limits(memory_bytes=256 << 20, call_timeout=30.0))
    table = np.random.default_rng(0).normal(size=(11, 64))

    def predict(tokens):
        return table[np.asarray(tokens)].sum(axis=1)  # (b, seq, 64) float64: 2 GB for the student's batch

    before = _peak_rss_mib()
    with pytest.raises(MemoryError, match="256 MiB"):
        impl.function("explain", "occlusion_importance")(predict, np.arange(7), 0)
    assert _peak_rss_mib() - before < 700, "the grading process computed the student's request unbounded"
    assert not impl.internal
    # The bound is the call's only: the grading process allocates freely again afterwards.
    assert np.ones(60 << 20, dtype=np.uint8).sum() == 60 << 20


def test_the_bound_is_put_back_after_the_call():
    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(MemoryError), host_memory.bounded(32 << 20):
        np.ones(1 << 30, dtype=np.uint8)
    assert resource.getrlimit(resource.RLIMIT_AS) == before


STEAL_GIVEN_SOFTMAX = '''
def softmax(x, axis=-1):
    import os, sys
    for name, module in list(sys.modules.items()):  # loaded by another view of this worker
        if name.startswith("_given_") and name.endswith(".softmax") and hasattr(module, "softmax"):
            return module.softmax(x, axis=axis)
    main = sys.modules.get("__main__")
    folder = os.path.join(os.path.dirname(os.path.abspath(main.__file__)), "given")
    for path in [os.path.join(folder, "softmax.py")]:  # a file of the sandbox
        try:
            source = open(path, encoding="utf-8").read()
        except OSError:
            continue
        space = {"__name__": "stolen"}
        exec(source, space)
        return space["softmax"](x, axis=axis)
    raise NotImplementedError("nothing to steal")
'''


def test_a_worker_never_grades_an_exercise_whose_given_code_it_holds(isolated, tmp_path):
    # The given softmax (fair grading's for attention) sat readable in the sandbox and stayed in the worker's
    # memory: a stub softmax that took it scored 11.4 of 12. Now it travels with attention's request only, and a
    # worker that holds it is replaced before softmax is graded again.
    folder = copy_reference(tmp_path / "student", softmax=STEAL_GIVEN_SOFTMAX)
    impl = isolated(folder)
    softmax = impl.function("softmax", "softmax")
    with pytest.raises(NotImplementedError, match="nothing to steal"):
        softmax(np.zeros((2, 3)))  # the file
    q = np.random.default_rng(1).normal(size=(2, 3, 4))
    output, weights = impl.function("attention", "scaled_dot_product_attention")(q, q, q)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)  # attention still gets the given softmax
    # The memory of the worker that graded attention: under a selection that assigns softmax it never held the
    # given softmax (given.servable), and the stand-in it has (which asks the reference) refuses a softmax view.
    with pytest.raises((NotImplementedError, PermissionError), match="nothing to steal|refused"):
        softmax(np.zeros((2, 3)))
    assert not impl.internal


@pytest.mark.parametrize("invisible", ["\u200b", "\u200d", "\u2060", "\ufeff", "\u202e"])
def test_an_id_with_an_invisible_character_is_flagged_as_alike(invisible):
    # "alice" + U+200B shows as "alice" in a file manager and a spreadsheet: it was neither matched nor flagged.
    from grader.grading.roster import alike_ids, match_roster

    twin = f"ali{invisible}ce"
    assert len(alike_ids(["alice", twin, "bob"])) == 1
    roster = match_roster([twin], {"alice": {"lms_id": "1"}})
    assert not roster.rows and len(roster.flagged) == 1 and "alice" in roster.flagged[0]


def test_calls_within_their_budget_never_die_of_the_workers_lifetime_cpu_limit(isolated, tmp_path):
    # Each call used 0.4 s of its 5 s (here 0.3 s of 1 s); the worker's own RLIMIT_CPU (10 s over its life) killed
    # it in whichever call crossed it: a test lost at random (11.3 of 12 for a correct softmax), counted as a crash.
    folder = copy_reference(tmp_path / "student", softmax=(
        "_softmax = softmax\n\n\ndef softmax(x, axis=-1):\n    import time\n    started = time.process_time()\n"
        "    while time.process_time() - started < 0.3:\n        pass\n    return _softmax(x, axis=axis)\n"))
    impl = isolated(folder, limits=Limits(cpu_seconds=2, call_timeout=1.0))
    softmax = impl.function("softmax", "softmax")
    for _ in range(8):  # 2.4 s of CPU in all: past the worker's limit of 2 s, each call within its own 1 s
        np.testing.assert_allclose(softmax(np.zeros((2, 4))), np.full((2, 4), 0.25))
    assert impl.stats["crashed"] == 0 and not impl.internal


# Digs the given softmax's source (fair grading's, for attention) out of the worker's frames and shows it twice:
# printed, and as the message of the exception its attention raises.
SHOW_GIVEN_SOURCE = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    import sys
    text, frame = "NOTHING-FOUND", sys._getframe()
    while frame is not None:  # up to the worker's own frames, and its record of the given sources
        for value in list(frame.f_locals.values()):
            sources = getattr(value, "given_sources", None)
            if isinstance(sources, dict) and "softmax" in sources:
                text = sources["softmax"]
        frame = frame.f_back
    print(text)
    raise ValueError(text)
'''


def test_the_given_code_a_worker_runs_never_reaches_the_students_feedback(tmp_path, monkeypatch):
    # The given implementations are working answers; under fair grading they run in the student's own worker, so
    # the student's attention could read the given softmax there and show it, printed or raised: its lines came
    # back in feedback. Now they are secret lines like the reference's. Only a course that does not assign softmax
    # (Part III) runs it in the worker any more (test_given_assigned.py): its retrieval shows it here.
    import json

    from grader.grading.grade import grade_batch
    from grader.sandbox import given

    course_of_part(tmp_path / "course", monkeypatch, "3")

    where = given.folder()
    assert where is not None, "the checkout's given code is needed here (grader/release_files/given)"
    source = (where / "softmax.py").read_text(encoding="utf-8")
    kit = Path(__file__).parents[2]
    public = "\n".join(p.read_text(encoding="utf-8") for p in [*(kit / "exercises").glob("*.py"),
                                                                *(kit / "tests").rglob("*.py")])
    own = [line.strip() for line in source.splitlines()
           if len(line.strip()) >= 24 and not line.strip().startswith(("#", '"""')) and line.strip() not in public]
    assert own, "no line of the given softmax is its own"
    attack = SHOW_GIVEN_SOURCE.replace("scaled_dot_product_attention(q, k, v, mask=None)",
                                       "cosine_similarity(queries, chunks)")
    copy_reference(tmp_path / "subs" / "ada", retrieval=attack)
    grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["retrieval"], echo=lambda _: None)
    written = "\n".join(path.read_text(encoding="utf-8") for path in (tmp_path / "out" / "ada").iterdir()
                        if path.is_file())
    results = json.loads((tmp_path / "out" / "ada" / "results.json").read_text(encoding="utf-8"))
    assert "NOTHING-FOUND" not in written, "the attack found no given source: it tests nothing"
    assert "hidden code" in written
    leaked = [line for line in own if line in written]
    assert not leaked, f"lines of the given softmax reached the student: {leaked[:3]}"
    assert not results["extra_data"]["status"].startswith("not graded"), results["extra_data"]["status"]


def test_workers_ended_by_one_exercise_cost_no_call_of_another(isolated, tmp_path):
    # A flood in attention ended 12 workers; every later call of the submission, layer's and tokenization's too,
    # then failed at once ("importing layer.py was not run: importing layer.py ended the worker process 12 times").
    from grader.sandbox.errors import WorkerCrashed

    folder = copy_reference(tmp_path / "student", softmax="def softmax(x, axis=-1):\n    import os\n    os._exit(3)\n")
    impl = isolated(folder, limits=Limits(total_crashes=2))
    softmax = impl.function("softmax", "softmax")
    for _ in range(2):
        with pytest.raises(WorkerCrashed, match="ended the worker process"):
            softmax(np.zeros((2, 3)))
    with pytest.raises(WorkerCrashed, match="2 times already while softmax was graded"):
        softmax(np.zeros((2, 3)))
    mask = impl.function("masks", "causal_mask")(4)  # another exercise: runs
    np.testing.assert_array_equal(np.asarray(mask, dtype=bool), np.tril(np.ones((4, 4), dtype=bool)))
