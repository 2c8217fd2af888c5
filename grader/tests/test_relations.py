"""A family read off the outputs (tests/relations.py): named for a directly called function that no catalogue
entry explains, only when exactly one relation to the right outputs holds on every input where it differs."""

from __future__ import annotations

import numpy as np
import pytest

from grader.tests.test_families import plant
from tests.diagnosis import diagnose, diagnose_family, observe_everything
from tests.kit import LocalImplementation
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
