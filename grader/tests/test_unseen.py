"""A function that answers the tests' inputs from a table fails every test of it; known mistakes do not change.

A hostile round recorded the answers to every input of exercises 12 to 15's tests into private helper modules
and looked them up: 24/24 against 0 for the same submission without the tables. ``tests/unseen.py`` asks each
registered function once more, on an input of the same kind drawn from the submission's salt, when a test of
it passed and it is right on its probes (the kit's fixed inputs with known answers): a lookup misses there.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

from grader.curriculum import ROOT
from tests import effort, unseen
from tests.kit import LocalImplementation

REFERENCE = ROOT / "solutions"


class Asking:
    """What the gate asks a Kit for: ``kit.<name>(...)`` and the implementation behind it (for its probes)."""

    def __init__(self, answer) -> None:
        self._implementation = LocalImplementation(REFERENCE)
        self.answer = answer

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.answer


@pytest.fixture(autouse=True)
def salted(monkeypatch, tmp_path):
    import tests.test_14_retrieval  # noqa: F401 - registers retrieval's twins

    (tmp_path / "retrieval.py").write_text("# a submission\n")
    monkeypatch.setattr(effort, "CONFIG", SimpleNamespace(option=SimpleNamespace(impl=str(tmp_path))))


def test_a_lookup_that_misses_fails():
    def table(queries, chunks):
        raise NotImplementedError("not in the table")

    (failure,) = unseen.gate(Asking(table), "retrieval", "cosine_similarity")
    assert "drawn for your submission" in failure.message and "not in the table" in failure.message


def test_a_wrong_answer_on_the_drawn_input_fails():
    (failure,) = unseen.gate(Asking(lambda queries, chunks: np.zeros((len(queries), len(chunks)))), "retrieval",
                             "cosine_similarity")
    assert "expected" in failure.message and "observed" in failure.message


def test_a_function_that_computes_passes():
    from tests.test_14_retrieval import own_cosine

    assert unseen.gate(Asking(own_cosine), "retrieval", "cosine_similarity") == []


def test_a_function_wrong_on_its_probes_is_left_to_the_tests(monkeypatch):
    # A known mistake differs on a probe: the gate says nothing, the tests' own messages come first.
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    assert unseen.gate(Asking(lambda queries, chunks: None), "retrieval", "cosine_similarity") == []


def test_a_function_wrong_only_on_probes_no_test_asks_is_asked(monkeypatch):
    # Answers recorded from the public tests are right on every probe a test asks and wrong on those only the
    # diagnosis asks: the gate once stood aside for them as for a mistake (a helper's table passed exercise 15).
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes",
                        lambda implementation, exercise, name, asked_only=False: asked_only)
    (failure,) = unseen.gate(Asking(lambda queries, chunks: None), "retrieval", "cosine_similarity")
    assert "drawn for your submission" in failure.message and "this test's own checks" in failure.message
    assert "answers the tests' own inputs" not in failure.message  # (it may be a mistake those checks miss)


def test_the_probes_a_test_asks_are_found_in_the_test_files():
    from tests.diagnosis import asked_by_a_test

    assert asked_by_a_test("softmax/mixed_scores")  # named whole in a test
    assert asked_by_a_test("scaled_dot_product_attention/padding_mask_per_sequence")  # a key of a table of cases
    assert not asked_by_a_test("bpe_decode/characters_split_across_tokens")  # the diagnosis's only


def test_every_twin_draws_inputs_the_reference_answers_as_the_test_file_does():
    """Each registered twin's own answer is the reference's, on the draws of three salts (the twins are right)."""
    import importlib

    from grader.curriculum import load

    implementation = LocalImplementation(REFERENCE)
    for exercise in load().exercises:
        importlib.import_module(f"tests.{exercise.test_file.removeprefix('tests/').removesuffix('.py')}")
        for name in exercise.functions:
            spec = unseen.twin(exercise.name, name)
            if spec is None:
                continue
            for salt in (1, 2, 3):
                args, kwargs = spec.draw(np.random.default_rng([unseen.SEED, salt]))
                expected = spec.own(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                got = implementation.function(exercise.name, name)(*args, **kwargs)
                assert (spec.same or unseen.equal)(got, expected), (exercise.name, name, salt)
