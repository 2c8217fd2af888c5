"""The diagnosis of known mistakes: generated files are current, and a student
whose code behaves like a catalogued mistake reads its description first."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from grader.authoring import fingerprints
from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import apply, docs, load_catalogue
from grader.mutants.report import run_tests
from grader.tests.test_families import plant
from grader.tests.waiting import HANG_SECONDS
from tests.diagnosis import (
    KnownMistake,
    describe,
    diagnose,
    load_fingerprints,
    matches,
    observe_everything,
    unexplained_input_checks,
)
from tests.kit import LocalImplementation

CATALOGUE = {mutant.id: mutant for mutant in load_catalogue()}


def test_fingerprint_file_is_current():
    assert fingerprints.is_current(), \
        "tests/data/fingerprints.npz is out of date: run `python -m grader.authoring.fingerprints`"


def _copy_of_the_fingerprints(folder, change=None):
    """The fingerprint file and its inputs' digest in ``folder``; ``change(name, array)`` edits the arrays."""
    import io
    import shutil

    target = folder / fingerprints.FINGERPRINT_FILE.name
    shutil.copy(fingerprints.INPUTS_FILE, folder / fingerprints.INPUTS_FILE.name)
    if change is None:
        shutil.copy(fingerprints.FINGERPRINT_FILE, target)
        return target
    with np.load(fingerprints.FINGERPRINT_FILE, allow_pickle=False) as stored:
        arrays = {key: change(key, stored[key]) for key in stored.files}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    target.write_bytes(buffer.getvalue())
    return target


def test_the_quick_fingerprint_check_fails_on_changed_values(tmp_path):
    assert fingerprints.is_current(_copy_of_the_fingerprints(tmp_path))  # a copy is current
    nudged = _copy_of_the_fingerprints(
        tmp_path, lambda key, array: array + 1e-6 if key != "meta" and array.dtype.kind == "f" else array)
    assert not fingerprints.changed_inputs(nudged)  # its inputs did not change: the recomputed sample finds it
    assert not fingerprints.is_current(nudged)


def test_the_probes_digest_ignores_the_last_bits_of_a_float_not_a_change():
    """Another machine's BLAS kernels change the last bits of the probes' inputs: no change of the probes."""
    import hashlib

    def digest(value):
        found = hashlib.sha256()
        fingerprints._value_digest(found, value)
        return found.hexdigest()

    values = np.random.default_rng(5).normal(size=(4, 6)) * 10.0 ** np.arange(-3, 3)
    values[0, 0], values[1, 1], values[2, 2] = np.nan, np.inf, 0.0
    ulps = np.nextafter(np.nextafter(values, np.inf), np.inf)  # two last bits up
    assert digest((values, 0.1)) == digest((ulps, float(np.nextafter(0.1, 1.0))))
    assert digest(values) != digest(values * (1 + 1e-5)) and digest(0.1) != digest(0.1001)
    assert digest(values) != digest(values.astype(np.float32)) and digest(values) != digest(values.T)
    assert digest(np.array([np.inf])) != digest(np.array([-np.inf])) != digest(np.array([np.nan]))


def test_the_quick_fingerprint_check_fails_on_a_changed_input(tmp_path, monkeypatch):
    from dataclasses import replace

    copy = _copy_of_the_fingerprints(tmp_path)
    catalogue = fingerprints.load_catalogue()
    edited = [replace(catalogue[1], description=catalogue[1].description + " (edited)"), *catalogue[2:]]
    monkeypatch.setattr(fingerprints, "load_catalogue", lambda: [catalogue[0], *edited])
    assert fingerprints.changed_inputs(copy) == ["catalogue"] and not fingerprints.is_current(copy)
    (tmp_path / fingerprints.INPUTS_FILE.name).unlink()  # no digest beside the file: never current
    monkeypatch.undo()
    assert not fingerprints.is_current(copy)


def test_the_quick_fingerprint_check_fails_on_a_mistake_missing_from_the_file(tmp_path, monkeypatch):
    copy = _copy_of_the_fingerprints(tmp_path)
    catalogue = fingerprints.load_catalogue()
    monkeypatch.setattr(fingerprints, "changed_inputs", lambda path=None: [])  # as if a digest missed the change
    monkeypatch.setattr(fingerprints, "load_catalogue", lambda: [*catalogue, replace_id(catalogue[-1])])
    assert not fingerprints.is_current(copy)


def replace_id(mutant):
    from dataclasses import replace

    return replace(mutant, id=mutant.id + "-again")


def test_common_mistakes_page_is_current():
    assert docs.main(["--check"]) == 0, "docs/common-mistakes.md is out of date: run `python -m grader.mutants.docs`"


def test_common_mistakes_page_gives_no_code_away():
    page = docs.render()
    for mutant in CATALOGUE.values():
        # `replace` is the reference's code: the answer. One-word replacements (an operator, a
        # name) may occur in prose; whole statements must not.
        if len(mutant.replace.strip()) > 12:
            assert mutant.replace.strip() not in page, f"{mutant.id}: the reference code appears on the page"


def test_fingerprints_hold_no_pickles_and_every_softmax_mistake_but_one_is_recognisable():
    with np.load(fingerprints.FINGERPRINT_FILE, allow_pickle=False) as data:
        assert all(data[key].dtype != object for key in data.files)
    softmax = [mistake for mistake in load_fingerprints() if mistake.exercise == "softmax"]
    hidden = [mistake.id for mistake in softmax if not mistake.recognisable]
    assert hidden == ["softmax-in-place-shift"]  # it returns the right values; the Kit reports the mutation


def test_reference_matches_no_known_mistake():
    reference = LocalImplementation(ROOT / "solutions")
    for exercise in load_curriculum().names:
        assert diagnose(reference, exercise) == [], exercise


def test_stubs_match_no_known_mistake():
    stubs = LocalImplementation(ROOT / "exercises")
    for exercise in load_curriculum().names:
        assert diagnose(stubs, exercise) == [], exercise


class Exploding:
    """An implementation whose every function call raises something odd."""

    def function(self, exercise, name):
        def explode(*args, **kwargs):
            raise MemoryError("student code gone wrong")

        return explode


def test_diagnosis_never_raises():
    for exercise in load_curriculum().names:
        assert diagnose(Exploding(), exercise) == []


def test_a_mistake_made_only_of_exceptions_never_matches():
    mistake = KnownMistake("softmax-x", "softmax", "d", "h", {"softmax/mixed_scores": None})
    assert not matches(mistake, {"softmax/mixed_scores": None})


def test_ties_name_every_matching_mistake():
    first = KnownMistake("softmax-a", "softmax", "first way", "hint a", {})
    second = KnownMistake("softmax-b", "softmax", "second way", "hint b", {})
    text = describe("softmax", [first, second])
    assert text.startswith("Diagnosis: your softmax.py")
    assert "first way" in text and "second way" in text and "hint a" in text and "hint b" in text


def first_failure(output: str) -> str:
    """The text of the first failure in pytest's output (after its ___ header line)."""
    assert "= FAILURES =" in output, output[-2000:]
    after = output.split("= FAILURES =", 1)[1].splitlines()
    start = next(i for i, line in enumerate(after) if line.startswith("_"))
    return "\n".join(after[start + 1:]).lstrip()


def recognisable_ids() -> list[str]:
    """Mistakes to try: the softmax ones, and the first recognisable one of every other exercise."""
    chosen, seen = [], set()
    for mistake in load_fingerprints():
        if not mistake.recognisable or mistake.id not in CATALOGUE:
            continue
        if mistake.exercise == "softmax" or mistake.exercise not in seen:
            chosen.append(mistake.id)
            seen.add(mistake.exercise)
    return chosen


@pytest.mark.parametrize("mutant_id", recognisable_ids())
def test_first_failure_starts_with_the_diagnosis(mutant_id, tmp_path):
    mutant = CATALOGUE[mutant_id]
    target = apply(mutant, tmp_path / mutant.id)
    run = run_tests(ROOT / load_curriculum().exercise(mutant.exercise).test_file, target, tb="short")
    text = first_failure(run.output)
    assert text.startswith("Diagnosis: your "), text[:1500]
    diagnosis = text.split("\n\n", 1)[0]
    assert mutant.description in diagnosis and mutant.hint in diagnosis, diagnosis
    # Every failing test of the exercise leads with it (each test's feedback stands alone in a report),
    # after "First fix <function>" when the test's function relies on the one the mistake is in.
    failures = run.output.count("\n____")
    diagnoses = sum(line.startswith("Diagnosis: ") for line in run.output.splitlines())
    assert diagnoses >= failures >= 1, (diagnoses, failures)


def test_command_line_prints_the_diagnosis_first(tmp_path):
    # The real command a student runs, in a fresh process.
    mutant = CATALOGUE["softmax-query-axis"]
    target = apply(mutant, tmp_path / mutant.id)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_01_softmax.py", f"--impl={target}", "-q",
         "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    text = first_failure(result.stdout)
    assert text.startswith("Diagnosis: your softmax.py gives exactly the outputs of a known mistake:\n"
                           f"  \"{mutant.description}\"\nHint: {mutant.hint}\n"), text[:1500]


# ---------------------------------------------------------------------------- only what explains everything


def planted(tmp_path, *mutant_ids: str):
    """A copy of solutions/ with every named catalogue mistake planted at once."""
    first, *rest = (CATALOGUE[m] for m in mutant_ids)
    target = apply(first, tmp_path / "student")
    for mutant in rest:
        path = target / mutant.file
        path.write_text(path.read_text(encoding="utf-8").replace(mutant.replace, mutant.with_), encoding="utf-8")
    return target


def test_a_mistake_that_explains_part_of_it_is_no_diagnosis(tmp_path):
    # The activation is not passed on (a known mistake of transformer_layer), and feed_forward itself
    # has an unknown bug too: the known mistake explains only some of the deviations, so nothing is said.
    target = planted(tmp_path, "layer-activation-not-passed")
    path = target / "layer.py"
    path.write_text(path.read_text().replace("return linear(hidden, params[\"w_2\"], params[\"b_2\"])",
                                             "return linear(hidden, params[\"w_2\"], params[\"b_2\"]) * 1.01"))
    assert diagnose(LocalImplementation(target), "layer") == []
    assert [m.id for m in diagnose(LocalImplementation(planted(tmp_path / "b", "layer-activation-not-passed")),
                                   "layer")] == ["layer-activation-not-passed"]


def test_an_input_check_mistake_is_never_named_alone_while_behaviour_is_wrong(tmp_path):
    target = planted(tmp_path, "attention-mask-not-checked")
    path = target / "attention.py"
    path.write_text(path.read_text().replace("scores = np.where(mask, scores, -np.inf)",
                                             "scores = np.where(mask, scores, 0.0)"))
    assert diagnose(LocalImplementation(target), "attention") == []


def test_two_known_mistakes_at_once_are_both_named(tmp_path):
    target = planted(tmp_path, "attention-no-scaling", "attention-mask-inverted")
    found = sorted(m.id for m in diagnose(LocalImplementation(target), "attention"))
    assert found == ["attention-mask-inverted", "attention-no-scaling"]


def test_an_input_check_item_is_named_beside_behaviour_only_when_the_code_accepts_the_bad_input(tmp_path):
    # Without its check, scaled_dot_product_attention still rejects a bad mask (numpy's broadcasting error,
    # as for a student who checks it with np.broadcast_shapes): "I did not check the mask's shape" cannot be
    # told from the outputs, so beside the scaling it is not named; the "Also:" line says what is true.
    target = planted(tmp_path, "attention-no-scaling", "attention-mask-not-checked")
    implementation = LocalImplementation(target)
    found = diagnose(implementation, "attention")
    assert [m.id for m in found] == ["attention-no-scaling"]
    observation = observe_everything(implementation)
    unchecked = unexplained_input_checks("attention", observation, found)
    assert unchecked == ["scaled_dot_product_attention"]
    assert describe("attention", found, unchecked).endswith(
        "Also: scaled_dot_product_attention() does not reject some bad input with a ValueError naming the "
        "argument (the test about that input says which, and what it did instead).")


TEXTBOOK_SOFTMAX = '''
def softmax(x, axis=-1):
    x = as_float_array("x", x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
'''


def broken_softmax(folder):
    """solutions/ with a softmax that has no guard for an all -inf slice; attention.py stays correct."""
    import shutil

    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "softmax.py").read_text(encoding="utf-8")
    start = source.index("def softmax(")
    (folder / "softmax.py").write_text(source[:start] + TEXTBOOK_SOFTMAX, encoding="utf-8")
    return folder


def test_a_broken_softmax_is_blamed_not_a_correct_attention(tmp_path):
    target = broken_softmax(tmp_path / "student")
    assert diagnose(LocalImplementation(target), "attention") == []
    run = run_tests(ROOT / load_curriculum().exercise("attention").test_file, target, tb="short")
    text = first_failure(run.output)
    assert text.startswith("First fix softmax() in softmax.py (exercise 1, softmax)"), text[:800]
    assert "Diagnosis: your attention.py" not in run.output
    # Its revisit lines point at softmax, not at ideas of attention.
    revisits = [line for line in text.splitlines() if line.strip().startswith("revisit:")]
    assert revisits and all("fix softmax() first" in line for line in revisits), revisits


def test_status_blames_the_broken_softmax_too(tmp_path):
    from grader.student import status

    target = broken_softmax(tmp_path / "student")
    message = status.run_suite(target, ["attention"])["attention"].first_failure.message
    assert message.startswith("First fix softmax() in softmax.py (exercise 1, softmax)"), message[:800]


# ---------------------------------------------------------------------------- the Kit's own checks


class Functions:
    """An implementation made of plain functions, for the Kit."""

    def __init__(self, **functions):
        self.functions = functions

    def function(self, exercise, name):
        return self.functions[name]


def test_the_kit_notices_keys_added_to_a_dict_argument(monkeypatch):
    from pytest_check import check

    from tests.kit import Kit

    def multi_head_attention(x, params, n_heads):
        params.setdefault("d_head", 4)  # mutation a per-array comparison cannot see
        return x

    failures = []
    monkeypatch.setattr(check, "fail", failures.append)
    Kit(Functions(multi_head_attention=multi_head_attention), "multihead").multi_head_attention(
        np.ones((2, 3)), {"w_q": np.ones(2)}, 1)
    assert failures and "params (keys added: 'd_head')" in failures[0] and "revisit:" in failures[0]


def test_a_crash_of_student_code_is_a_failure_with_its_line_and_an_idea(tmp_path):
    import importlib.util

    from tests.kit import Kit

    (tmp_path / "projections.py").write_text(
        "def linear(x, weight, bias=None):\n    if bias:\n        return x @ weight + bias\n    return x @ weight\n")
    spec = importlib.util.spec_from_file_location("student_projections", tmp_path / "projections.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    linear = module.linear
    with pytest.raises(pytest.fail.Exception) as failed:
        Kit(Functions(linear=linear), "projections").linear(np.ones((2, 3)), np.ones((3, 4)), np.ones(4))
    message = str(failed.value)
    assert message.startswith("linear(x: float64 (2, 3), weight: float64 (3, 4), bias: float64 (4,)) crashed")
    assert "observed: ValueError: The truth value" in message
    assert "at projections.py line 2: if bias:" in message
    assert "\n  revisit:  linear() must work for every input its docstring allows" in message


def test_a_test_that_expects_an_error_still_sees_it():
    from tests.feedback import expect_raises_value_error
    from tests.kit import Kit

    def causal_mask(n):
        raise ValueError("n must be positive")

    kit = Kit(Functions(causal_mask=causal_mask), "masks")
    assert expect_raises_value_error(lambda: kit.causal_mask(0), argument="n", what="causal_mask(0)", idea="-")


def test_a_list_instead_of_an_array_matches_no_mistake(tmp_path):
    # Converted with np.asarray, a list of floats looks like a float64 array and matched "I converted
    # the input to float64" on the float32 probe. The type is an observation of its own.
    import shutil

    target = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / "softmax.py"
    source = path.read_text(encoding="utf-8")
    path.write_text(source.replace("where=totals > 0\n    )", "where=totals > 0\n    ).tolist()"), encoding="utf-8")
    assert "tolist" in path.read_text(encoding="utf-8")
    assert diagnose(LocalImplementation(target), "softmax") == []


def test_a_dtype_mistake_and_a_value_mistake_together_are_both_named(tmp_path):
    # On the float32 probe both show at once (other values in another dtype): neither alone reproduces it.
    target = planted(tmp_path, "attention-float64-scale", "attention-mask-inverted")
    found = sorted(m.id for m in diagnose(LocalImplementation(target), "attention"))
    assert found == ["attention-float64-scale", "attention-mask-inverted"]


def test_two_mistakes_that_change_the_same_outputs_are_named_together(tmp_path):
    # Keys and values both from x: no single fingerprint reproduces the cross-attention outputs, the
    # stored pair (planted together by grader.authoring.fingerprints) does.
    target = planted(tmp_path, "multihead-keys-from-x", "multihead-values-from-x")
    found = sorted(m.id for m in diagnose(LocalImplementation(target), "multihead"))
    assert found == ["multihead-keys-from-x", "multihead-values-from-x"]


def test_a_notebook_check_blames_the_broken_softmax_too():
    import math

    from grader.student.notebook import check

    namespace = {"__name__": "__main__", "np": np, "math": math}
    exec(compile((ROOT / "solutions" / "_checks.py").read_text(), "<given cell>", "exec"), namespace)  # noqa: S102
    exec(compile(TEXTBOOK_SOFTMAX, "<softmax cell>", "exec"), namespace)  # noqa: S102
    attention = (ROOT / "solutions" / "attention.py").read_text()
    exec(compile(attention[attention.index("def attention_scores"):], "<attention cell>", "exec"), namespace)  # noqa: S102
    with pytest.raises(AssertionError) as failed:
        check("attention", "test_fully_blocked_query_gives_zeros", namespace)
    assert "\n\nFirst fix softmax() in softmax.py (exercise 1, softmax)" in str(failed.value)
    assert "Diagnosis" not in str(failed.value)


def test_the_blame_follows_an_imported_alias(tmp_path):
    from tests.diagnosis import callees

    target = broken_softmax(tmp_path / "student")
    path = target / "attention.py"
    source = path.read_text(encoding="utf-8")
    path.write_text(source.replace("from .softmax import softmax\n", "from .softmax import softmax as normalise\n")
                    .replace("weights = softmax(scores, axis=-1)", "weights = normalise(scores, axis=-1)"),
                    encoding="utf-8")
    assert "normalise(scores" in path.read_text(encoding="utf-8")
    assert "softmax" in callees(LocalImplementation(target), "scaled_dot_product_attention")


def test_the_reference_deviates_on_no_probe():
    # A probe on which the reference itself "deviates" (a result structure the comparison does not know,
    # a probe that is not deterministic) would make every student's diagnosis on it impossible.
    from tests.diagnosis import observe_everything
    from tests.kit import LocalImplementation

    observation = observe_everything(LocalImplementation(ROOT / "solutions"))
    deviating = sorted(name for name, deviates in observation.deviates.items() if deviates)
    assert not deviating, f"the reference deviates from its own golden values on {deviating}"


def test_an_input_check_item_the_code_really_lacks_is_named_after_the_behaviour_it_explains_less_of(tmp_path):
    # padding_mask accepts a length beyond max_len (no exception): that item is consistent with the code,
    # and comes after the behaviour mistake, which explains more of the failing outputs.
    target = planted(tmp_path, "masks-causal-triu", "masks-padding-no-range-check")
    found = [m.id for m in diagnose(LocalImplementation(target), "masks")]
    assert found == ["masks-causal-triu", "masks-padding-no-range-check"]


# ---------------------------------------------------------------------------- never a wrong diagnosis (issue 34)


def test_mistakes_that_touch_one_output_are_named_together_only_where_together_they_give_it(tmp_path):
    # A penalty counted from the start, from 1: -slope * (j + 1). "Counted from the start" and "the penalty as a
    # reward" both change distance_penalty's output, but together they give +slope * j, not what is printed
    # under the diagnosis (every value negative): neither the pair nor the sign flip may be offered.
    target = planted(tmp_path, "distance-counted-from-the-start")
    path = target / "distance.py"
    path.write_text(path.read_text().replace("distance = np.arange(n_keys)", "distance = np.arange(1, n_keys + 1)"))
    assert diagnose(LocalImplementation(target), "distance") == []
    # Both mistakes made (the pair the fingerprints store: +slope * j) are still explained.
    both = planted(tmp_path / "both", "distance-counted-from-the-start", "distance-penalty-as-a-reward")
    assert diagnose(LocalImplementation(both), "distance") != []


def test_an_accuracy_scored_without_the_penalty_is_not_told_the_batch_axis(tmp_path):
    # length_accuracy returns one number: on the old probe the accuracy without ALiBi's penalty equalled the
    # batch-axis mistake's. A probe where the penalty decides tells them apart.
    target = plant(tmp_path, "distance.py", "scores = match_scores(weight, xq, xk, slope)  # (b, n)",
                   "scores = match_scores(weight, xq, xk, 0.0)  # (b, n)")
    text = describe("distance", diagnose(LocalImplementation(target), "distance"))
    assert "argmax over the batch axis" not in text, text
    assert "without ALiBi's penalty" in text, text
    batch_axis = diagnose(LocalImplementation(planted(tmp_path / "b", "distance-accuracy-over-the-batch-axis")),
                          "distance")
    assert [m.id for m in batch_axis] == ["distance-accuracy-over-the-batch-axis"]


def test_a_count_that_one_number_cannot_tell_apart_lists_its_look_alikes(tmp_path):
    # A multiply-add counted as one operation gives 2 n^2 d, as does Q K^T counted alone: for every n and d.
    target = plant(tmp_path, "tokenization.py", "flops = 2 * n * n * d + 2 * n * n * d",
                   "flops = n * n * d + n * n * d")
    text = describe("tokenization", diagnose(LocalImplementation(target), "tokenization"))
    assert "exactly the outputs of a known mistake:" not in text, text
    # told as look-alikes: from one number, or (two probes of one size) as the same outputs on every input
    assert ("one number cannot tell mistakes apart" in text and "one of these" in text) or (
        "one of 2 known mistakes, which give the same outputs on every input" in text), text
    assert "a multiply-add as one operation" in text and "Q K^T only" in text, text


def test_a_mistake_seen_in_one_number_only_is_never_told_as_exact():
    # The wording: one number that differs from the reference's is given by any number of mistakes.
    # (length_accuracy's fixed probe: 1/11 against the reference's 6/11.)
    probe = "length_accuracy/a_fixed_weight_on_eleven_contexts"
    mistake = KnownMistake("distance-x", "distance", "I did X.", "Think.", {probe: (np.array(1 / 11),)})
    text = describe("distance", [mistake])
    assert text.startswith("Diagnosis: your distance.py gives the same single number as a known mistake; one "
                           "number cannot tell mistakes apart, so it may be this one, or another mistake in "
                           "length_accuracy():")
    assert "\"I did X.\"" in text and "Hint: Think." in text


@pytest.mark.parametrize("module, edits, exercise_id", [
    # both running sums left unrescaled, line by line (as a student writes it, not as the catalogue plants it)
    ("decoding", (("running_sum = running_sum * rescale +", "running_sum = running_sum +"),
                  ("accumulated = accumulated * rescale +", "accumulated = accumulated +")),
     "decoding-blockwise-never-rescaled"),
    # the signed offset key minus query, the minus sign of the penalty kept
    ("positional", (("distance = np.abs(positions[:, None] - positions[None, :])",
                     "distance = -(positions[:, None] - positions[None, :])"),), "positional-alibi-key-minus-query"),
])
def test_one_mistake_is_not_told_as_two_that_only_look_alike(module, edits, exercise_id, tmp_path):
    # A blind mistake writer's round: each of these was told as two catalogued mistakes made together whose words
    # contradict the code ("I rescaled the running sum but not the weighted sum" and the converse, for code that
    # rescaled neither; "without the minus sign" for code that has it). Each is a mistake of its own now.
    target = shutil.copytree(ROOT / "solutions", tmp_path / "student", ignore=shutil.ignore_patterns("__pycache__"))
    path = target / f"{module}.py"
    text = path.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    run = run_tests(ROOT / load_curriculum().exercise(module).test_file, target, tb="short")
    diagnosis = first_failure(run.output).split("\n\n", 1)[0]
    assert diagnosis.startswith(f"Diagnosis: your {module}.py gives exactly the outputs of a known mistake:"), diagnosis
    assert CATALOGUE[exercise_id].description in diagnosis, diagnosis
