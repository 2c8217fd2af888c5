"""A family read off the outputs (tests/relations.py): named for a directly called function that no catalogue
entry explains, only when exactly one relation to the right outputs holds on every input where it differs."""

from __future__ import annotations

import numpy as np
import pytest

from grader.tests.test_families import plant
from tests.diagnosis import diagnose, diagnose_family, observe_everything
from tests.kit import LocalImplementation
from tests.probes import load_all_probes
from tests.relations import relation

RIGHT = np.array([[-2.0, 0.5, 3.0, 1.25], [4.0, -1.5, 0.75, 2.0]])


def one(mine, want=RIGHT, **kwargs):
    return relation("f", ["f/p"], {"f/p": (np.asarray(mine),)}, {"f/p": (np.asarray(want),)}, **kwargs)


@pytest.mark.parametrize("mine, family", [
    (-RIGHT, "sign flip"),
    (np.abs(RIGHT), "sign dropped"),
    (RIGHT[:, ::-1], "reversed order"),
    (RIGHT[:, :3], "off by one"),
    (RIGHT[:, [1, 0, 3, 2]], "another order"),
    (2.5 * RIGHT, "a scale"),
    (RIGHT * np.array([[2.0], [0.5]]) * np.array([1.0, 3.0, 0.25, 1.0]), "a normalisation"),
    (RIGHT + 0.3, "an offset"),
    (np.maximum(RIGHT, 0.0), "clipped at zero"),
    (0.5 / RIGHT, "a reciprocal"),
    (np.trunc(RIGHT).astype(np.int64), "an integer result"),
    (np.roll(RIGHT, 1, axis=1), "another order"),
    (np.stack([RIGHT / 4 + 0.1, RIGHT / 4 - 0.1, RIGHT / 4, RIGHT / 4]), "not summed over the broadcast axes"),
])
def test_each_family_is_told_by_its_relation(mine, family):
    found = one(mine)
    assert found is not None and found.family == family, found


def test_ids_off_by_one_where_they_differ():
    found = one(np.array([97, 257, 99, 258]), np.array([97, 256, 99, 257]))
    assert found is not None and found.family == "off by one" and "the 2 others agree" in found.words, found


@pytest.mark.parametrize("mine, want", [
    (np.array(0.6), np.array(0.4)),  # one number: a multiple, an offset ... of any other
    (np.array([1.0, -1.0]), np.array([-1.0, 1.0])),  # reversed and sign flipped alike: the values cannot tell
    (np.array([3.0, 1.0, 7.0]), np.array([1.0, 2.0, 4.0])),  # no relation
])
def test_nothing_is_named_when_the_values_cannot_tell(mine, want):
    assert one(mine, want) is None


def _scalars(mine, want):
    probes = [f"f/{index}" for index in range(len(want))]
    return relation("f", probes, {p: (np.array(v),) for p, v in zip(probes, mine, strict=True)},
                    {p: (np.array(v),) for p, v in zip(probes, want, strict=True)})


def test_a_function_of_one_number_is_told_a_relation_that_holds_across_three_inputs_at_least():
    found = _scalars([17.05, 7.2, 2.35], [19.05, 9.2, 4.35])
    assert found is not None and found.family == "an offset" and "minus 2" in found.words, found
    assert "every entry" not in found.words
    assert _scalars([17.05, 7.2], [19.05, 9.2]) is None  # two numbers: too few to rule out a coincidence
    assert _scalars([3.0, 3.0, 3.0], [1.0, 1.0, 1.0]) is None  # an offset of 2 and a factor of 3 alike
    assert _scalars([17.05, 7.2, 2.0], [19.05, 9.2, 4.35]) is None  # not one constant for all inputs


def test_a_relation_must_hold_on_every_probe():
    outputs = {"f/a": (-RIGHT,), "f/b": (RIGHT[:, ::-1],)}
    assert relation("f", ["f/a", "f/b"], outputs, {"f/a": (RIGHT,), "f/b": (RIGHT,)}) is None


# Planted as a student would write them, in no catalogue: the first message names the family.
MISTAKES = {
    "top_k-unstable": ("retrieval.py", 'order = np.argsort(-similarity, axis=1, kind="stable")',
                       "order = np.argsort(-similarity, axis=1)", "retrieval", "top_k", "ties broken otherwise"),
    "top_k-one-more": ("retrieval.py", "return order[:, :k].astype(np.int64)",
                       "return order[:, : k + 1].astype(np.int64)", "retrieval", "top_k", "off by one"),
    "penalty-from-the-first-key": ("distance.py", "distance = n_keys - np.arange(n_keys)",
                                   "distance = 1 + np.arange(n_keys)", "distance", "distance_penalty",
                                   "reversed order"),
    "margin-sign-dropped": ("distance.py", "return best - others.max(axis=-1)",
                            "return abs(best - others.max(axis=-1))", "distance", "score_margin", "sign dropped"),
    "penalty-divided": ("distance.py", "return -slope * distance.astype(np.float64)",
                        "return -slope / distance.astype(np.float64)", "distance", "distance_penalty",
                        "a reciprocal"),
    "cosine-clipped": ("retrieval.py", "return unit_queries @ unit_chunks.T",
                       "return np.clip(unit_queries @ unit_chunks.T, 0.0, 1.0)", "retrieval", "cosine_similarity",
                       "clipped at zero"),
    "cosine-squared-lengths": ("retrieval.py", "lengths[name] = np.linalg.norm(array, axis=1, keepdims=True)",
                               "lengths[name] = (array ** 2).sum(axis=1, keepdims=True)", "retrieval",
                               "cosine_similarity", "a normalisation"),
    # Read off the outputs and the probes' arguments, not a relation of two arrays:
    "norm-in-float32": ("layer.py", "    return (x - mean) / np.sqrt(variance + eps) * gamma + beta",
                        "    return ((x - mean) / np.sqrt(variance + eps) * gamma + beta).astype(np.float32)",
                        "layer", "layer_norm", "another dtype"),
    "norm-default-eps-of-bert": ("layer.py", "beta: np.ndarray, eps: float = 1e-5",
                                 "beta: np.ndarray, eps: float = 1e-12", "layer", "layer_norm", "another default"),
    "softmax-last-axis-always": ("softmax.py", "    largest = np.max(x, axis=axis, keepdims=True)",
                                 "    axis = -1\n    largest = np.max(x, axis=axis, keepdims=True)", "softmax",
                                 "softmax", "an argument not used"),
    "linear-three-axes-only": ("projections.py", "    out = x @ weight  # (..., d_in) @ (d_in, d_out) -> (..., d_out)",
                               '    out = np.einsum("bnd,de->bne", x, weight) if x.ndim > 2 else x @ weight',
                               "projections", "linear", "a fixed number of axes"),
    "heads-drawn-output-first": ("multihead.py",
                                 'params = {name: init_weight(rng, d_model, d_model) for name in ("w_q", "w_k", "w_v", '
                                 '"w_o")}',
                                 'params = {name: init_weight(rng, d_model, d_model) for name in ("w_v", "w_k", "w_q", '
                                 '"w_o")}', "multihead", "init_multi_head", "other draws"),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_directly_called_function_is_told_its_family(name, tmp_path):
    from tests.steps import first_step

    file, replace, with_, exercise, function, family = MISTAKES[name]
    implementation = LocalImplementation(plant(tmp_path, file, replace, with_))
    assert diagnose(implementation, exercise) == [] and diagnose_family(implementation, exercise) is None
    step = first_step(implementation, [function], observe_everything(implementation))
    assert step is not None and step.text.startswith(f"Diagnosis (a family of mistakes: {family}): "), step
    assert f"your {function}() in {file}" in step.text


def test_a_function_right_on_some_inputs_and_in_no_relation_gets_no_step_lead(tmp_path):
    from tests.steps import first_step

    # Naming "the inputs that tell" misled adapters of correct code elsewhere (the annotated transformer's
    # attention failing on float masks was told a bool-mask probe): without a relation, the test's message leads.
    implementation = LocalImplementation(plant(tmp_path, "retrieval.py", "return float(np.mean(hit))",
                                               "return float(np.mean((retrieved == relevant[:, None]).sum(axis=1)))"))
    assert diagnose(implementation, "retrieval") == []
    assert first_step(implementation, ["recall_at_k"], observe_everything(implementation)) is None


def test_a_missing_bad_input_check_is_led_by_no_step(monkeypatch):
    from tests import failures, plugin, steps

    told = steps.FirstStep("numerical_gradient", "numerical_gradient/cubic_float32", "Diagnosis: a step", "")
    monkeypatch.setattr(steps, "first_step", lambda *args, **kwargs: told)
    finding = failures.Failure("numerical_gradient(f, x, eps=0.0)", "ValueError naming 'eps'",
                               "ZeroDivisionError: float division by zero", "eps must be positive")
    assert plugin._led_by_first_step([finding], None, ["numerical_gradient"], None) == [finding]
    value = failures.Failure("numerical_gradient(f, x)", "the central differences", "other values", "revisit")
    assert plugin._led_by_first_step([value], None, ["numerical_gradient"], None)[0].diagnosis == "Diagnosis: a step"


def test_inputs_that_give_different_numbers_are_told_the_relation_without_them():
    outputs = {"f/a": (RIGHT[:, :3],), "f/b": (RIGHT[:1, :2],)}
    found = relation("f", ["f/a", "f/b"], outputs, {"f/a": (RIGHT,), "f/b": (RIGHT[:1, :3],)})
    assert found is not None and found.family == "off by one" and "instead of" not in found.words, found
    assert one(RIGHT[:, :3]).words.endswith("(3 instead of 4), and its first 3 agree")


def test_weights_that_differ_by_a_factor_per_key_are_told_a_term_per_key_not_a_normalisation():
    rng = np.random.default_rng(5)
    scores, penalty = rng.normal(size=(3, 5)), -0.4 * np.arange(5, 0, -1)

    def softmax(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    found = one(softmax(scores + penalty[::-1]), softmax(scores + penalty))
    assert found is not None and found.family == "a term per key" and "normalisation" not in found.words, found


def test_a_result_of_several_arrays_says_which_one_the_relation_is_about():
    found = relation("f", ["f/p"], {"f/p": (RIGHT, 3.0 * RIGHT)}, {"f/p": (RIGHT, RIGHT)})
    assert found is not None and found.words.startswith("item 1 of its result (the others are right) is 3 times"), found


def test_ties_broken_otherwise_names_the_libraries_convention(tmp_path):
    from tests.steps import first_step

    # torch.topk (a correct adapter) was told "a family of mistakes" without a word of its tie convention.
    file, replace, with_, exercise, function, _ = MISTAKES["top_k-unstable"]
    implementation = LocalImplementation(plant(tmp_path, file, replace, with_))
    step = first_step(implementation, [function], observe_everything(implementation))
    assert step is not None and "torch.topk" in step.text and "a convention" in step.text
    assert "lower index first" in step.text


def test_the_output_that_differs_is_named_when_the_others_are_right(tmp_path):
    from tests.steps import first_step

    right = "    grad_v = np.swapaxes(weights, -1, -2) @ grad_context  # (..., n_k, d_v)"
    wrong = "    grad_v = 0.5 * np.swapaxes(weights, -1, -2) @ grad_context + 0.1"
    implementation = LocalImplementation(plant(tmp_path, "backward.py", right, wrong))
    assert diagnose(implementation, "backward") == []
    step = first_step(implementation, ["attention_backward"], observe_everything(implementation))
    assert step is not None and step.text.startswith("Diagnosis (the output that differs)"), step
    assert "of the arrays it returns grad_q and grad_k are right and grad_v differs" in step.text


def test_dtype_alone_is_another_dtype_and_values_that_also_differ_are_not():
    want = RIGHT.astype(np.float32)
    found = one(RIGHT, want)
    assert found is not None and found.family == "another dtype" and "float64 where the contract gives float32" in (
        found.words), found
    assert one(np.array([[1, 0], [0, 1]]), np.array([[True, False], [False, True]])).family == "another dtype"
    found = one(2.0 * RIGHT, want)
    assert found is None or found.family != "another dtype"


def _arguments(table):
    return lambda probe: table[probe]


def test_a_fixed_number_of_axes_needs_raises_or_shapes_and_an_input_that_passes():
    from tests.relations import fixed_axes

    args = {"f/2d": ((np.zeros((3, 4)),), {}), "f/3d": ((np.zeros((2, 3, 4)),), {}),
            "f/4d": ((np.zeros((2, 2, 3, 4)),), {})}
    want = {"f/4d": (np.zeros((2, 2, 3, 4)),)}
    found = fixed_axes(["f/4d"], ["f/2d", "f/3d"], {"f/4d": None}, want, _arguments(args), ("x",))
    assert found is not None and "whose x has 4 axes" in found.words and "right on every one whose x has 2 or 3" in \
        found.words and "exactly" not in found.words  # of the inputs seen: another number of axes may fail too
    # right shapes with wrong values are not a matter of axes; nothing right, nothing to compare with
    assert fixed_axes(["f/4d"], ["f/2d"], {"f/4d": (np.ones((2, 2, 3, 4)),)}, want, _arguments(args)) is None
    assert fixed_axes(["f/4d"], [], {"f/4d": None}, want, _arguments(args)) is None
    # a number of axes right among wrong ones on both sides (written for exactly 3)
    found = fixed_axes(["f/2d", "f/4d"], ["f/3d"], {"f/2d": None, "f/4d": None}, {"f/2d": (np.zeros((3, 4)),), **want},
                       _arguments(args), ("x",))
    assert found is not None and "x has 2 or 4 axes" in found.words
    # never when a number of axes is among both the wrong inputs and the right ones
    args["f/3d-wrong"] = ((np.zeros((2, 3, 4)),), {})
    deviating = {"f/2d": None, "f/4d": None, "f/3d-wrong": None}
    assert fixed_axes(list(deviating), ["f/3d"], deviating, {**want, "f/2d": (np.zeros((3, 4)),),
                                                             "f/3d-wrong": (np.zeros((2, 3, 4)),)},
                      _arguments(args), ("x",)) is None


def test_a_family_of_inputs_is_not_said_above_a_crash_on_an_input_it_calls_right():
    from tests.relations import contradicted

    claim = ("axes", "grad_weights", frozenset({2, 3}))
    crash = "softmax_backward(grad_weights: float64 (2, 5, 7), weights: float64 (2, 5, 7)) crashed"
    assert contradicted(claim, crash)
    assert not contradicted(claim, crash.replace("(2, 5, 7)", "(2, 3, 5, 7)"))
    assert not contradicted(claim, "softmax_backward(weights: float64 (2, 5)) crashed")  # not shown: not belied
    assert contradicted(("odd", "n"), "f(x: float64 (3, 4), n: 8) crashed")
    assert not contradicted(("odd", "n"), "f(x: float64 (3, 4), n: 7) crashed")
    assert contradicted(("given", "mask"), "f(x: float64 (3, 4), mask: None) crashed")
    assert contradicted(("given", "mask"), "f(x: float64 (3, 4)) crashed")
    assert not contradicted(("given", "mask"), "f(x: float64 (3, 4), mask: bool (3, 4)) crashed")
    assert not contradicted((), crash)


def test_an_argument_not_used_needs_one_argument_on_every_deviating_probe():
    from tests.relations import argument_not_used

    x = np.arange(6.0).reshape(2, 3)
    args = {"f/a0": ((x,), {"axis": 0}), "f/last": ((x,), {}), "f/other": ((x + 1,), {"axis": 0})}
    golden = {"f/a0": (np.full((2, 3), 0.5),), "f/last": (np.full((2, 3), 1 / 3),), "f/other": (np.ones((2, 3)),)}
    found = argument_not_used(["f/a0"], list(args), {"f/a0": golden["f/last"]}, golden, _arguments(args),
                              ("x", "axis"))
    assert found is not None and found.family == "an argument not used" and "for axis=0" in found.words, found
    # its output is no other probe's right one: nothing
    assert argument_not_used(["f/a0"], list(args), {"f/a0": (np.zeros((2, 3)),)}, golden,
                             _arguments(args)) is None
    # another probe's right one, but that probe differs in two arguments: nothing
    args["f/last"] = ((x + 2,), {})
    assert argument_not_used(["f/a0"], list(args), {"f/a0": golden["f/last"]}, golden,
                             _arguments(args)) is None


def test_other_draws_only_where_the_contract_fixes_them():
    from tests import relations

    rng = np.random.default_rng(3)
    right, mine = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    args = {"f/p": ((np.random.default_rng(0), 6, 4), {})}
    found = relations.other_draws("f", ["f/p"], {"f/p": (mine,)}, {"f/p": (right,)}, _arguments(args))
    assert found is not None and found.family == "other draws", found
    assert relations.other_draws("f", ["f/p"], {"f/p": (3 * mine,)}, {"f/p": (right,)},
                                 _arguments(args)) is None  # another spread
    no_rng = {"f/p": ((6, 4), {})}
    assert relations.other_draws("f", ["f/p"], {"f/p": (mine,)}, {"f/p": (right,)},
                                 _arguments(no_rng)) is None
    load_all_probes()  # the test files declare what they declare next to their probes
    assert "dropout" in relations.DRAWS_OPEN  # declared by its probes: the API leaves its mask's draws open
    assert relations.other_draws("dropout", ["f/p"], {"f/p": (mine,)}, {"f/p": (right,)},
                                 _arguments(args)) is None


def test_an_entry_put_at_the_wrong_end_is_a_rotation():
    right = np.arange(24.0).reshape(2, 4, 3) ** 1.5
    found = one(np.roll(right, 1, axis=1), right)
    assert found is not None and "rotated by one along axis -2" in found.words and "last entry comes first" in (
        found.words), found
    # along an axis of two, a rotation is a reversal too: only with another input that tells them apart
    pair = np.arange(12.0).reshape(2, 2, 3) ** 1.5
    assert one(np.roll(pair, 1, axis=1), pair) is None
    outputs = {"f/two": (np.roll(pair, 1, axis=1),), "f/four": (np.roll(right, 1, axis=1),)}
    found = relation("f", ["f/two", "f/four"], outputs, {"f/two": (pair,), "f/four": (right,)})
    assert found is not None and found.family == "another order", found
    outputs = {"f/two": (np.flip(pair, axis=1),), "f/four": (np.flip(right, axis=1),)}
    found = relation("f", ["f/two", "f/four"], outputs, {"f/two": (pair,), "f/four": (right,)})
    assert found is not None and found.family == "reversed order", found


def test_a_step_never_contradicts_the_line_a_crash_names(monkeypatch):
    import inspect
    from pathlib import Path

    from tests import failures, plugin, steps

    root = Path(__file__).resolve().parents[2]
    implementation = LocalImplementation(root / "solutions")
    code = inspect.unwrap(implementation.function("attention", "attention_scores")).__code__
    line = max(number for _, _, number in code.co_lines() if number is not None)
    crash = failures.Failure("multi_head_attention(x, params, 3) crashed", "a result",
                             f"ValueError: matmul mismatch\n            at attention.py line {line}: return ...",
                             "revisit", kind=failures.CRASHED)
    told = steps.FirstStep("scaled_dot_product_attention", "p", "Diagnosis (the step whose output first differs): x")
    monkeypatch.setattr(steps, "first_step", lambda *args, **kwargs: told)
    assert plugin._led_by_first_step([crash], implementation, ["multi_head_attention"], None) == [crash]
    # the same step, when the crash lies in the function it names, leads
    told = steps.FirstStep("attention_scores", "p", "Diagnosis (the step whose output first differs): y")
    led = plugin._led_by_first_step([crash], implementation, ["multi_head_attention"], None)
    assert led[0].diagnosis.endswith(": y"), led


def test_an_odd_size_needs_odd_exactly_where_it_fails():
    from tests.relations import odd_sizes

    args = {"f/6": ((5, 6), {}), "f/7": ((5, 7), {}), "f/8": ((4, 8), {})}
    want = {"f/7": (np.zeros((5, 7)),)}
    found = odd_sizes(["f/7"], ["f/6", "f/8"], {"f/7": None}, want, _arguments(args), ("n", "d_model"))
    assert found is not None and found.family == "an odd size" and "d_model is odd (7" in found.words, found
    # wrong values of the right shape are no matter of parity; an odd size that also passes proves nothing
    assert odd_sizes(["f/7"], ["f/6"], {"f/7": (np.ones((5, 7)),)}, want, _arguments(args)) is None
    args["f/9"] = ((4, 9), {})
    assert odd_sizes(["f/7"], ["f/6", "f/9"], {"f/7": None}, want, _arguments(args), ("n", "d_model")) is None


def test_an_optional_argument_given_needs_it_given_exactly_where_it_fails():
    from tests.relations import argument_given

    x, w, b = np.zeros((2, 3)), np.zeros((3, 4)), np.zeros(4)
    args = {"f/bias": ((x, w, b), {}), "f/none": ((x, w), {}), "f/explicit-none": ((x, w), {"bias": None})}
    want = {"f/bias": (np.zeros((2, 4)),)}
    found = argument_given(["f/bias"], ["f/none", "f/explicit-none"], {"f/bias": None}, want, _arguments(args),
                           ("x", "weight", "bias"))
    assert found is not None and "pass bias" in found.words and "bias is not None" in found.words, found
    args["f/bias-too"] = ((x, w, b), {})
    assert argument_given(["f/bias"], ["f/bias-too"], {"f/bias": None}, want, _arguments(args),
                          ("x", "weight", "bias")) is None  # given where it is right too: not the argument


def test_a_factor_is_said_only_above_failures_that_show_it():
    # A blind round: "3 times the right one" (dropout at rate 0.25) above a test at rate 0.3 whose mean was 2.33.
    from tests.relations import shown_alike

    words = "it is 3 times the right one, every entry"
    assert shown_alike(words, ["291 of 291 entries differ; the first, at index (0,), is 4.52227 instead of 1.50742"])
    assert not shown_alike(words, ["2.3300"])  # another kind of failure: no factor to check, none said
    assert not shown_alike(words, ["the first, at index (0,), is 2.33 instead of 1.0"])  # another factor
    assert not shown_alike("it is the right one times a constant factor, every entry", ["is 3 instead of 1"])


def test_inputs_that_differ_in_two_ways_name_no_family(tmp_path):
    from tests.relations import by_inputs
    from tests.steps import first_step

    # A blind round: rotary_embedding's positions defaulting to an array of 512 failed on the probes that leave
    # positions out, which were also those whose x has 3 axes: it was told "a fixed number of axes".
    implementation = LocalImplementation(plant(
        tmp_path, "positional.py", "    if positions is None:\n        positions = np.arange(n)\n", ""))
    step = first_step(implementation, ["rotary_embedding"], observe_everything(implementation))
    assert step is None or "a fixed number of axes" not in step.text, step
    # The family stands where the number of axes alone tells the failing inputs apart.
    arguments = {"f/2d": ((np.ones((4, 3)),), {"k": 2}), "f/3d": ((np.ones((2, 4, 3)),), {"k": 2}),
                 "f/3d-given": ((np.ones((2, 4, 3)),), {"k": 2, "mask": np.ones(3)})}
    outputs = {"f/2d": (np.ones((4, 3)),), "f/3d": (np.ones(3),), "f/3d-given": (np.ones(3),)}
    expected = {"f/2d": (np.ones((4, 3)),), "f/3d": (np.ones((2, 4, 3)),), "f/3d-given": (np.ones((2, 4, 3)),)}
    found = by_inputs(["f/3d", "f/3d-given"], ["f/2d"], outputs, expected, arguments.get, ("x", "k", "mask"))
    assert found is not None and found.family == "a fixed number of axes", found
    # ... and is not named where an argument left out separates them as well.
    del arguments["f/3d-given"], outputs["f/3d-given"], expected["f/3d-given"]
    arguments["f/2d"] = ((np.ones((4, 3)),), {"k": 2, "mask": np.ones(3)})
    assert by_inputs(["f/3d"], ["f/2d"], outputs, expected, arguments.get, ("x", "k", "mask")) is None


def test_other_draws_is_not_named_for_the_right_numbers_times_a_factor():
    from tests.relations import other_draws

    # A blind round's w_2 drawn (d_model, d_ff) and transposed: the same numbers in another order, 0.866 times
    # the contract's spread, was told "about the right spread, other numbers".
    rng = np.random.default_rng(7)
    want = rng.normal(size=(48, 12)) / np.sqrt(48)
    scaled = (np.random.default_rng(8).permutation(want.ravel()) * np.sqrt(0.75)).reshape(want.shape)
    fresh = np.random.default_rng(9).normal(size=(48, 12)) / np.sqrt(48)

    def arguments(probe):
        return (np.random.default_rng(1), 12, 48), {}

    assert other_draws("f", ["f/p"], {"f/p": (scaled,)}, {"f/p": (want,)}, arguments) is None
    found = other_draws("f", ["f/p"], {"f/p": (fresh,)}, {"f/p": (want,)}, arguments)
    assert found is not None and found.family == "other draws", found
