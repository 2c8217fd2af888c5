"""A student's worker holds the given code only of exercises the graded selection does not assign (issue 32).

Fair grading answers a student's call of an earlier exercise with working code. Where that code ran in the
student's own worker, a submission could find it there (frames, ``sys.modules``, the garbage collector's
functions: bytecode is as good as source), encode it past the scrubbing of feedback, and resubmit it as its own
answer of an exercise the course assigns. Now an assigned dependency is answered by the reference's worker; the
given code of an exercise the course does not assign (a Part III course's softmax), which its release hands out
anyway, still runs in the worker (``grader.sandbox.given.servable``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from grader import course
from grader.curriculum import PART_ENV, ROOT, load
from grader.sandbox import given
from grader.sandbox.proxy import IsolatedImplementation
from grader.tests.test_trust import copy_reference, course_of_part

# Looks for the given code in its own worker everywhere it could be (the worker's record of the sources, the
# given modules, every function the garbage collector knows whose code came from given/), then shows it
# encoded, printed and raised, with a count of what it found.
ENCODE_GIVEN = '''
def {function}:
    import base64, gc, marshal, sys, types
    sources, codes, frame = [], [], sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            held = getattr(value, "given_sources", None)
            if isinstance(held, dict):
                sources += [text for text in held.values() if isinstance(text, str)]
        frame = frame.f_back
    for name, module in list(sys.modules.items()):
        if name.startswith("_given_") and getattr(module, "__file__", "").startswith("given/"):
            codes += [item.__code__ for item in list(vars(module).values()) if isinstance(item, types.FunctionType)]
    for item in gc.get_objects():
        if isinstance(item, types.FunctionType) and item.__code__.co_filename.startswith("given/"):
            codes.append(item.__code__)
    encoded = [base64.b64encode(line.strip().encode()).decode()
               for text in sources for line in text.splitlines() if line.strip()]
    encoded += [base64.b64encode(marshal.dumps(code)).decode()[:60] for code in codes[:5]]
    print("ATTACK-RAN", len(sources), len(codes))
    print(" ".join(encoded))
    raise ValueError(f"ATTACK-RAN {{len(sources)}} {{len(codes)}} " + " ".join(encoded))
'''


def _given_lines(exercise: str) -> list[str]:
    """The given code's lines of ``exercise`` that no stub or public test holds (what an attack would gain)."""
    where = given.folder()
    assert where is not None, "the checkout's given code is needed here (grader/release_files/given)"
    public = "\n".join(path.read_text(encoding="utf-8") for path in [*(ROOT / "exercises").glob("*.py"),
                                                                      *(ROOT / "tests").rglob("*.py")])
    lines = [line.strip() for line in (where / f"{exercise}.py").read_text(encoding="utf-8").splitlines()
             if len(line.strip()) >= 24 and not line.strip().startswith(("#", '"""'))]
    return [line for line in lines if line not in public]


def _graded(tmp_path: Path, exercises: list[str], **modules: str) -> tuple[str, dict]:
    """Grade one submission (the reference with ``modules``' code appended): everything written, its results."""
    from grader.grading.grade import grade_batch

    copy_reference(tmp_path / "subs" / "ada", **modules)
    grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=exercises, echo=lambda _: None)
    written = "\n".join(path.read_text(encoding="utf-8", errors="replace")
                        for path in (tmp_path / "out").rglob("*") if path.is_file())
    return written, json.loads((tmp_path / "out" / "ada" / "results.json").read_text(encoding="utf-8"))


def test_an_assigned_exercises_given_code_never_reaches_feedback_encoded(tmp_path, monkeypatch):
    # The whole kit assigns softmax: the given softmax ran in the worker that graded attention, and an attention
    # that printed it in base64 sent every line of it back in its feedback, a working softmax to resubmit.
    monkeypatch.delenv(PART_ENV, raising=False)
    assert "softmax" in load().selected_names()
    own = _given_lines("softmax")
    assert own, "no line of the given softmax is its own"
    attack = ENCODE_GIVEN.format(function="scaled_dot_product_attention(q, k, v, mask=None)")
    written, results = _graded(tmp_path, ["softmax", "attention"], attention=attack)
    assert "ATTACK-RAN" in written, "the attack's output is not in the feedback: this tests nothing"
    leaked = [line for line in own if base64.b64encode(line.encode()).decode() in written]
    assert not leaked, f"lines of the given softmax reached the student in base64: {leaked[:3]}"
    assert "ATTACK-RAN 0 0" in written, "the worker held given code of an exercise the course assigns"
    assert not results["extra_data"]["status"].startswith("not graded"), results["extra_data"]["status"]
    softmax = [test["score"] == test["max_score"] for test in results["tests"] if test["name"].startswith("softmax:")]
    assert softmax and all(softmax), "the reference's own softmax lost points"


def test_a_part_iii_course_still_runs_the_given_softmax_in_the_worker(tmp_path, monkeypatch):
    # Part III gives softmax and attention (its release hands them out): the cheap path stays, the given code runs
    # in the student's worker, charged as the student's code, and its raw lines are still scrubbed.
    course_of_part(tmp_path / "course", monkeypatch, "3")
    assert "softmax" not in load().selected_names() and "retrieval" in load().selected_names()
    attack = ENCODE_GIVEN.format(function="cosine_similarity(queries, chunks)")
    written, results = _graded(tmp_path, ["retrieval"], retrieval=attack)
    assert "ATTACK-RAN" in written, "the attack's output is not in the feedback: this tests nothing"
    assert "ATTACK-RAN 0 0" not in written, "a Part III worker no longer runs the given softmax"
    assert not results["extra_data"]["status"].startswith("not graded"), results["extra_data"]["status"]


@pytest.mark.parametrize("part", ["3", "2"])
def test_a_batch_of_one_part_in_a_course_of_every_part_gives_the_worker_no_given_code(monkeypatch, part):
    # The course assigns softmax (every part): `grade --part 3` grades Part III only, but a student who read the
    # given softmax in its worker could still hand it in as the course's exercise 1.
    monkeypatch.delenv(course.COURSE_ENV, raising=False)
    monkeypatch.setenv(PART_ENV, part)
    assert load().part == "all" and "softmax" not in load().selected_names()
    servable = given.servable(ROOT / "solutions", load())
    assert given.usable(ROOT / "solutions", load()) >= {"softmax", "attention"} and not servable


@pytest.mark.parametrize(("part", "in_worker", "outside"), [
    ("all", set(), {"softmax", "attention", "training"}),
    ("2", {"softmax", "attention", "multihead"}, {"backward", "training"}),
    ("3", {"softmax", "attention", "training"}, set()),
])
def test_the_worker_gets_given_code_of_the_unassigned_dependencies_only(tmp_path, monkeypatch, part, in_worker,
                                                                          outside):
    course_of_part(tmp_path / "course", monkeypatch, part)
    reference = ROOT / "solutions"
    servable = given.servable(reference, load())
    assert in_worker <= servable and not outside & servable
    assert not servable & set(load().selected_names())
    impl = IsolatedImplementation(copy_reference(tmp_path / "student"))
    try:
        assert impl._given.usable == servable  # what the student's worker is sent
        q = np.random.default_rng(3).normal(size=(2, 3, 4))
        _, weights = impl.function("attention", "scaled_dot_product_attention")(q, q, q)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0)  # softmax answered, from inside or outside
        assert impl.reference_spent > 0 if "softmax" in outside else impl.reference_spent == 0
        assert not impl.internal
    finally:
        impl.close()
