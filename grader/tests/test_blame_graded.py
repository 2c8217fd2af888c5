"""Blame by call in grading (issue 34.2): a graded failure leads with the function a student's own pytest names.

Graded, the student's code runs in the isolated worker; the worker notes which of the student's API functions a
call reached and sends the names with its reply (``grader.sandbox.worker``), and the grading side checks them
(``grader.sandbox.reached``) before the blame uses them. Each case is planted in a copy of the reference, graded,
and run by a local ``pytest`` (``grader.tests.test_messages.failures_of``): every failing test's first line is
the same in both. A worker that forges the names changes neither a row nor a grade.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from grader.curriculum import load
from grader.grading.grade import grade_batch
from grader.sandbox import protocol
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.sandbox.reached import accepted
from grader.tests.test_blame import blocks
from grader.tests.test_grade import QUIET, copy_reference, read_grades
from grader.tests.test_messages import failures_of, plant
from tests.kit import Kit

# An uncatalogued mistake in pooled_features (the asked word's row taken from the wrong sentence); the student's
# pooled_gradients, pooled_forward and train_pooled are the reference's: correct, and they call it.
POOLED_FEATURES = ("negation.py", (
    "    asked = embedding[tokens[np.arange(len(tokens)), query_position]]  # (n, d_model): the asked word",
    "    asked = embedding[tokens[np.arange(len(tokens))[::-1], query_position]]"))
# attention_scores divides by d_k, not its square root; the student's scaled_dot_product_attention calls it.
SCORES = ("attention.py", ("    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
                           "    return (q @ np.swapaxes(k, -1, -2)) / d_k"))
# The same attention_scores, and a scaled_dot_product_attention that computes its scores itself (never calling
# attention_scores) and blocks the keys a boolean mask permits: its own mistake, which the reference's call
# graph (sdpa calls attention_scores) would blame on attention_scores.
SCORES_NOT_CALLED = ("attention.py", SCORES[1], (
    "    scores = attention_scores(q, k)  # (..., n_q, n_k)",
    "    q, k = as_float_array('q', q), as_float_array('k', k)\n"
    "    scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])"),
    ("            scores = np.where(mask, scores, -np.inf)", "            scores = np.where(mask, -np.inf, scores)"))


def lead(text: str) -> str:
    """The first line of a failure's text that is not pytest-check's ``path::test:N: what`` header.

    Whether that header comes first depends on the runner (a local pytest under pytest-xdist prints none), not
    on the feedback; what follows it is the feedback's own first line.
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return next((line.strip() for line in lines if not re.match(r"\S+::\S+:\d+: ", line.strip())), "")


def graded_leads(folder, out, exercise: str, **options) -> dict[str, str]:
    """Grade ``folder`` (one student) for ``exercise``: the first line of each failing test's output."""
    assert grade_batch(folder, out, **(QUIET | {"exercises": [exercise], "jobs": 1} | options)) == 0
    results = json.loads((out / "student" / "results.json").read_text(encoding="utf-8"))
    return {test["name"].split(": ", 1)[1]: lead(test["output"])
            for test in results["tests"] if test["status"] != "passed" and test["output"].strip()}


def local_leads(target, exercise: str) -> dict[str, str]:
    return {name: lead(body) for name, body in blocks(failures_of(target, exercise)).items()}


@pytest.mark.parametrize("exercise, planted", [("negation", POOLED_FEATURES), ("attention", SCORES),
                                               ("attention", SCORES_NOT_CALLED)],
                         ids=["pooled_features", "attention_scores", "attention_scores_not_called"])
def test_a_graded_failure_leads_with_the_function_a_local_pytest_names(exercise, planted, tmp_path):
    target = plant(tmp_path / "submissions", planted[0], *planted[1:])
    local = local_leads(target, exercise)
    graded = graded_leads(tmp_path / "submissions", tmp_path / "out", exercise)
    assert set(local) == set(graded), (sorted(local), sorted(graded))
    differ = {name: (local[name], graded[name]) for name in local if local[name] != graded[name]}
    assert not differ, differ
    broken = "pooled_features" if exercise == "negation" else "attention_scores"
    blamed = [name for name, lead in graded.items() if lead.startswith(f"First fix {broken}()")]
    feedback = (tmp_path / "out" / "student" / "feedback.md").read_text(encoding="utf-8")
    if planted is SCORES_NOT_CALLED:  # never reached: the mask tests fail for the caller's own mistake
        assert not blamed and any("mask" in name for name in graded), graded
        assert "First fix" not in feedback and "is the first function this test reached (your" not in feedback
    else:
        assert len(blamed) >= 4, graded
        # (Where the function's own tests fail first, each led by its diagnosis, they may fill what the feedback
        # shows of the exercise: it then names the function there.)
        assert f"First fix {broken}()" in feedback or \
            f"Diagnosis (the step whose output first differs): your {broken}()" in feedback, feedback[:3000]
        assert not any(lead.startswith("First fix") and not lead.startswith(f"First fix {broken}()")
                       for lead in graded.values()), graded


def test_the_grading_side_keeps_only_well_formed_names_of_the_view():
    good = [["", "scaled_dot_product_attention"], ["scaled_dot_product_attention", "attention_scores"]]
    assert accepted(good, "attention") == [("", "scaled_dot_product_attention"),
                                           ("scaled_dot_product_attention", "attention_scores")]
    forged = [["", "softmax"],  # another exercise's: fair grading serves it as given code, never the student's
              ["", "no_such_function"], ["attention_scores", "train"], [1, 2], None, "x", {"a": 1},
              ["", "attention_scores", "extra"], ["attention_scores"], [["", "x"], "y"], ["x" * 10**6, "softmax"]]
    assert accepted(forged + good, "attention") == accepted(good, "attention")
    assert accepted([["", "softmax"]], protocol.VIEW_ALL) == [("", "softmax")]  # --no-fair: every module is theirs
    assert accepted(good * (protocol.MAX_REACHED // 2 + 1), "attention") == []  # longer than the bound: nothing
    for raw in (None, "attention_scores", {"": "attention_scores"}, 7, (("", "attention_scores"),)):
        assert accepted(raw, "attention") == []
    assert accepted(good, "no_such_exercise") == []


# A student's attention.py (the reference's) that rewrites every reply of its worker: a "reached" of each kind
# the grading side must survive (too long, malformed, other exercises' names, a plausible lie).
FORGING = '''
import sys as _sys

_M = _sys.modules["__main__"]
_send, _count = _M.Channel.send, [0]
_FORGED = [
    [["", "attention_scores"]] * 20000,
    [["", "softmax"], ["softmax", "train"], [1, 2], None, "x", ["", "attention_scores", "z"], {"a": 1}],
    "reached",
    {"attention_scores": "scaled_dot_product_attention"},
    [["scaled_dot_product_attention", "attention_scores"], ["attention_scores", "scaled_dot_product_attention"]],
]


def _forging(self, header, arrays):
    if "status" in header:
        _count[0] += 1
        header = dict(header, reached=_FORGED[_count[0] % len(_FORGED)])
    return _send(self, header, arrays)


_M.Channel.send = _forging
'''


def test_a_worker_forging_what_its_calls_reached_changes_no_row_and_no_grade(tmp_path):
    folder = tmp_path / "submissions"
    student = copy_reference(folder / "student")
    (student / "attention.py").write_text((student / "attention.py").read_text(encoding="utf-8") + FORGING,
                                          encoding="utf-8")
    assert grade_batch(folder, tmp_path / "out", **(QUIET | {"exercises": ["attention"], "jobs": 1})) == 0
    row = read_grades(tmp_path / "out")["student"]
    assert float(row["attention"]) == load().exercise("attention").points, row
    assert (tmp_path / "out" / "student" / "feedback.md").is_file()
    # What the forged replies put in a test's records: only the exercise's own names, within the bound.
    with IsolatedImplementation(student, limits=Limits(call_timeout=10.0)) as implementation:
        kit = Kit(implementation, "attention")
        rng = np.random.default_rng(0)
        for _ in range(6):  # every kind of forged reply
            kit.scaled_dot_product_attention(rng.normal(size=(3, 4)), rng.normal(size=(5, 4)),
                                             rng.normal(size=(5, 2)))
        assert kit._reached.functions <= set(load().exercise("attention").functions), kit._reached
        assert len(kit._reached.calls) <= 2, kit._reached


def test_a_graded_call_notes_what_it_reached_of_the_student_s_own_functions(tmp_path):
    target = plant(tmp_path / "submissions", *SCORES)
    with IsolatedImplementation(target, limits=Limits(call_timeout=10.0)) as implementation:
        kit = Kit(implementation, "attention")
        rng = np.random.default_rng(0)
        kit.scaled_dot_product_attention(rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)))
    # softmax is the kit's given code under fair grading: not the student's, not noted.
    assert kit._reached.calls == {("", "scaled_dot_product_attention"),
                                  ("scaled_dot_product_attention", "attention_scores")}, kit._reached
    # Under --no-fair every module is the student's: softmax too.
    with IsolatedImplementation(target, fair=False, limits=Limits(call_timeout=10.0)) as implementation:
        kit = Kit(implementation, "attention")
        kit.scaled_dot_product_attention(rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)))
    assert kit._reached.calls == {("", "scaled_dot_product_attention"), ("scaled_dot_product_attention", "softmax"),
                                  ("scaled_dot_product_attention", "attention_scores")}, kit._reached


def test_a_module_that_does_not_import_is_named_at_its_own_line_in_both_runs(tmp_path):
    # A relative import of a module the folder does not have (a student who read the reference's `from ._checks
    # import ...` somewhere): the line named was the kit's own import hook's ("kit.py line 231", status said
    # "ModuleNotFoundError at line 231 of kit.py"), and the module's name the kit's package name, never written by
    # the student ("No module named '_attention_kit_impl_f44bd663a4._checks'").
    from tests.kit import ImplementationError, LocalImplementation

    target = plant(tmp_path, "softmax.py", ("from ._checks import as_float_array",
                                            "from ._helpers import as_float_array"))
    line = 1 + (target / "softmax.py").read_text(encoding="utf-8").splitlines().index(
        "from ._helpers import as_float_array")
    said = ("importing softmax.py raised ModuleNotFoundError: No module named '_helpers' in your folder (a relative "
            "import, from ._helpers import ..., reads the files beside your module, and _helpers.py is not one of "
            f"them) (softmax.py line {line})")
    with pytest.raises(ImplementationError) as local:
        LocalImplementation(target).function("softmax", "softmax")
    assert str(local.value) == said
    with IsolatedImplementation(target, limits=Limits(call_timeout=10.0)) as implementation, \
            pytest.raises(Exception) as graded:
        implementation.function("softmax", "softmax")(np.ones((2, 3)))
    assert said in str(graded.value), str(graded.value)
