"""Blame follows the call that failed (issue 34.2), each case planted in a copy of the reference.

A failing test's first message names the function whose own output was wrong first among those the test's
calls went through (``tests/reach.py`` traces them), in whatever exercise it lies; not a function whose name
the caller's source merely mentions, and not a correct function that only passes another's mistake on.
"""

from __future__ import annotations

import pytest

from grader.tests.test_messages import failures_of, plant
from tests.diagnosis import blame, observe_everything
from tests.kit import Kit, LocalImplementation


def blocks(text: str) -> dict[str, str]:
    """Each failed test's block of the FAILURES section, by the test's name."""
    found = {}
    for block in text.split("short test summary info")[0].split("\n____")[1:]:
        header, _, body = block.partition("\n")
        found[header.strip("_ ")] = body
    return found


# cross_entropy (exercise 9) returns the gradient of the summed loss, not of the mean: not divided by n.
CROSS_ENTROPY_NOT_DIVIDED = ("training.py", ("    return loss, grad / n", "    return loss, grad"))


@pytest.mark.parametrize("exercise", ["negation", "distance"])
def test_a_cross_entropy_gradient_not_divided_by_n_is_blamed_in_every_failing_test(exercise, tmp_path):
    # pooled_gradients and train_match_head call cross_entropy; most of exercise 12's tests get their gradients
    # from a check made once per session (tests/effort.once): the tests only given its result went through the
    # same calls.
    target = plant(tmp_path, CROSS_ENTROPY_NOT_DIVIDED[0], CROSS_ENTROPY_NOT_DIVIDED[1])
    found = blocks(failures_of(target, exercise))
    assert len(found) >= 4, list(found)
    for name, body in found.items():
        assert body.lstrip().startswith("First fix cross_entropy() in training.py (exercise 9, training)"), \
            (name, body[:1500])
        revisits = [line for line in body.splitlines() if line.strip().startswith("revisit:")]
        assert all("fix cross_entropy() first" in line for line in revisits), (name, revisits)


def test_a_correct_pooled_gradients_is_not_blamed_for_a_broken_pooled_features(tmp_path):
    # An uncatalogued mistake in pooled_features (the asked word's row taken from the wrong sentence); the
    # student's pooled_gradients is the reference's, correct, and calls it.
    target = plant(tmp_path, "negation.py", (
        "    asked = embedding[tokens[np.arange(len(tokens)), query_position]]  # (n, d_model): the asked word",
        "    asked = embedding[tokens[np.arange(len(tokens))[::-1], query_position]]"))
    found = blocks(failures_of(target, "negation"))
    gradients = {name: body for name, body in found.items() if "pooled_gradients" in name or "train_pooled" in name}
    assert gradients, list(found)
    for name, body in gradients.items():
        assert body.lstrip().startswith("First fix pooled_features() in negation.py (exercise 12, negation)"), \
            (name, body[:1500])
        assert "First fix pooled_gradients()" not in body, (name, body[:1500])


def _called_through_kit(target, exercise: str, name: str, *args):
    implementation = LocalImplementation(target)
    kit = Kit(implementation, exercise)
    getattr(kit, name)(*args)
    return implementation, kit


TEXTBOOK_SOFTMAX = ('''def softmax(x, axis=-1):
    x = as_float_array("x", x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
''')


def _broken_softmax(target) -> None:
    """softmax.py of ``target`` without the guard for a fully masked row (wrong: NaN there)."""
    path = target / "softmax.py"
    source = path.read_text(encoding="utf-8")
    path.write_text(source[:source.index("def softmax(")] + TEXTBOOK_SOFTMAX, encoding="utf-8")


def test_a_function_named_but_never_called_is_not_blamed(tmp_path):
    # attention.py imports softmax and names it, but normalises the scores itself (correctly, guard included):
    # its call never reaches the broken softmax, so softmax is not what to fix first for attention's tests.
    import numpy as np

    target = plant(tmp_path, "attention.py", (
        "    weights = softmax(scores, axis=-1)",
        "    assert callable(softmax)  # named, never called\n"
        "    top = np.max(scores, axis=-1, keepdims=True)\n"
        "    top = np.where(np.isfinite(top), top, 0.0)\n"
        "    e = np.exp(scores - top)\n"
        "    total = np.sum(e, axis=-1, keepdims=True)\n"
        "    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)"))
    _broken_softmax(target)
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    implementation, kit = _called_through_kit(target, "attention", "scaled_dot_product_attention", q, k, v)
    observation = observe_everything(implementation)
    assert "softmax" in observation.deviating_functions(behaviour_only=True)
    assert "scaled_dot_product_attention" in kit._reached.functions, kit._reached
    assert "softmax" not in kit._reached.functions, kit._reached
    assert blame(implementation, kit._called, observation, kit._reached) is None


def test_a_function_reached_under_another_name_is_blamed(tmp_path):
    # attention.py calls softmax through a name its source never spells: the call reaches it all the same.
    import numpy as np

    target = plant(tmp_path, "attention.py", (
        "    weights = softmax(scores, axis=-1)",
        "    weights = globals()['soft' + 'max'](scores, axis=-1)"))
    _broken_softmax(target)
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    implementation, kit = _called_through_kit(target, "attention", "scaled_dot_product_attention", q, k, v)
    observation = observe_everything(implementation)
    assert ("scaled_dot_product_attention", "softmax") in kit._reached.calls, kit._reached
    assert blame(implementation, kit._called, observation, kit._reached) == ("softmax",
                                                                            "scaled_dot_product_attention", ())


def test_a_dependency_wrong_only_on_the_diagnosis_s_own_inputs_does_not_read_as_untested():
    """A blind round read "which the tests of exercise 9 do not ask themselves" as exercise 9 missing the mistake,
    which its tests catch on inputs of their own: the line says whose inputs the wrong outputs were."""
    from tests.diagnosis import Observation, asked_by_a_test, describe_blame
    from tests.probes import load_all_probes

    registry = load_all_probes()
    probe = next(name for name, entry in registry.items() if entry.function == "cross_entropy"
                 and not asked_by_a_test(name))
    line = describe_blame("cross_entropy", "pooled_gradients", Observation({}, {probe: True}, set(), {}))
    assert f"on the kit's fixed input {probe.split('/', 1)[-1]}, the diagnosis's own; the tests of exercise 9 " \
           "ask inputs of theirs: pytest -m training shows what they find" in line, line
    assert "do not ask" not in line, line


def test_a_caller_s_own_idea_stays_after_fixing_the_blamed_dependency(tmp_path):
    """A two-mistake round: a softmax that never subtracts the maximum (wrong only where scores overflow) and an
    attention that ignores a float mask. The mask's tests were told only "fix softmax() first", which changes
    nothing there: the attention's own idea was hidden until softmax was fixed. It now follows, as what to revisit
    should the test still fail."""
    target = plant(tmp_path, "softmax.py", ("    largest = np.where(np.isfinite(largest), largest, 0)\n",
                                            "    largest = np.where(np.isfinite(largest), largest, 0)\n"
                                            "    largest = 0\n"))
    attention = target / "attention.py"
    source = attention.read_text(encoding="utf-8")
    ignored = 'scores = scores + as_float_array("mask", mask).astype(scores.dtype)'
    assert ignored in source
    attention.write_text(source.replace(ignored, "scores = scores"), encoding="utf-8")
    text = failures_of(target, "attention", "masks_agree")
    revisits = [line for line in text.splitlines() if line.strip().startswith("revisit:")]
    assert revisits and all("fix softmax() first" in line for line in revisits), revisits
    assert any("should it still fail then, this test's own idea: a float mask is added to the scaled scores" in line
               for line in revisits), revisits


def test_the_trace_follows_the_manifest_in_force(monkeypatch, tmp_path):
    # A process that met a course's manifest first (an own exercise's commands, then the kit's tests in one xdist
    # worker) traced none of the kit's functions outside the course's: a broken softmax's attention test found no
    # callee of scaled_dot_product_attention, and the diagnosis named "an inline softmax" in a correct attention.
    from grader.curriculum import load
    from grader.tests.test_diagnosis import broken_softmax
    from tests import reach
    from tests.diagnosis import diagnose

    kit = load()

    class Course:  # a course of softmax alone, as `course init` with exercises = ["softmax"] makes
        exercises = [kit.exercise("softmax")]

        @staticmethod
        def exercise_of_function(name):
            return kit.exercise_of_function(name)

    course = Course()
    monkeypatch.setattr(reach, "load_curriculum", lambda: course)
    assert "scaled_dot_product_attention" not in reach.api_names()
    assert reach._module_names("pkg") == ("pkg.softmax",)
    monkeypatch.setattr(reach, "load_curriculum", lambda: kit)
    assert {"softmax", "scaled_dot_product_attention"} <= reach.api_names()
    assert "pkg.attention" in reach._module_names("pkg")
    target = broken_softmax(tmp_path / "student")  # no guard for an all -inf slice; attention.py correct
    assert diagnose(LocalImplementation(target), "attention") == []
