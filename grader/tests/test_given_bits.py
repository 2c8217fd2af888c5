"""Fair grading runs the kit's given implementations in the student's worker: they must compute what the reference does.

Bit for bit, not to a tolerance: a training of a few hundred Adam steps turns a last-digit difference into another
model (Adam divides each gradient by its own running size, so a gradient of 1e-18 and one of 2e-18 move a weight by
the same step), and the diagnosis of a known mistake compares a student's outputs with the reference's. The inputs
are seeded, with sizes that all differ (batch 2, heads 3, positions 5 and 7, d_head 4).
"""

from __future__ import annotations

import importlib
import sys
import types

import numpy as np
import pytest

from grader.curriculum import ROOT
from grader.sandbox.given import KIT_GIVEN as GIVEN_CODE
from tests.kit import LocalImplementation

PACKAGE = "_given_under_test"


@pytest.fixture(scope="module")
def given():
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(GIVEN_CODE)]
    sys.modules[PACKAGE] = package
    yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def reference():
    implementation = LocalImplementation(ROOT / "solutions")
    return lambda exercise, name: implementation.function(exercise, name)


def identical(got, want, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for key in want:
            identical(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), where
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            identical(a, b, f"{where}[{index}]")
    else:
        a, b = np.asarray(got), np.asarray(want)
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        assert np.array_equal(a, b, equal_nan=True), f"{where}: differs by {np.max(np.abs(a - b)):.3g} at most"


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_the_given_training_trains_the_reference_s_model_bit_for_bit(given, reference):
    from solutions._tasks import antecedent_task

    task = antecedent_task(rng(0), 48)
    for options in ({"steps": 40, "batch_size": 8}, {"steps": 25, "batch_size": 5, "n_heads": 2, "positions": False}):
        identical(given("training").train(rng(1), task, **options),
                  reference("training", "train")(rng(1), task, **options), f"train({options})")


def test_the_given_building_blocks_compute_the_reference_s_values_bit_for_bit(given, reference):
    x = rng(2).normal(size=(2, 5, 12))
    params = reference("multihead", "init_multi_head")(rng(3), 12, 3)
    identical(given("multihead").init_multi_head(rng(3), 12, 3), params, "init_multi_head")
    identical(given("projections").init_weight(rng(4), 7, 5), reference("projections", "init_weight")(rng(4), 7, 5))
    identical(given("softmax").softmax(x, axis=1), reference("softmax", "softmax")(x, axis=1), "softmax")
    q, k, v = rng(5).normal(size=(2, 5, 4)), rng(6).normal(size=(2, 7, 4)), rng(7).normal(size=(2, 7, 3))
    mask = np.where(rng(8).random((5, 7)) < 0.3, -np.inf, 0.0)
    mask[:, 0] = 0.0
    identical(given("attention").scaled_dot_product_attention(q, k, v, mask),
              reference("attention", "scaled_dot_product_attention")(q, k, v, mask), "scaled_dot_product_attention")
    identical(given("positional").sinusoidal_encoding(7, 12),
              reference("positional", "sinusoidal_encoding")(7, 12), "sinusoidal_encoding")
    identical(given("multihead").multi_head_attention(x, params, 3),
              reference("multihead", "multi_head_attention")(x, params, 3), "multi_head_attention")
    grad = rng(9).normal(size=x.shape)
    identical(given("backward").multi_head_attention_backward(grad, x, params, 3),
              reference("backward", "multi_head_attention_backward")(grad, x, params, 3),
              "multi_head_attention_backward")
    weight = rng(10).normal(size=(12, 6))
    grad_out = rng(11).normal(size=(2, 5, 6))
    identical(given("backward").linear_backward(grad_out, x, weight),
              reference("backward", "linear_backward")(grad_out, x, weight), "linear_backward")


def test_the_given_optimiser_and_loss_are_the_reference_s_bit_for_bit(given, reference):
    logits, targets = 4 * rng(12).normal(size=(6, 5)), np.array([0, 4, 2, 2, 1, 3])
    identical(given("training").cross_entropy(logits, targets),
              reference("training", "cross_entropy")(logits, targets), "cross_entropy")
    params = {"w": rng(13).normal(size=(3, 4)), "inner": {"b": rng(14).normal(size=4)}}
    grads = {"w": 1e-3 * rng(15).normal(size=(3, 4)), "inner": {"b": rng(16).normal(size=4)}}
    mine, theirs = given("training").adam_step, reference("training", "adam_step")
    state_mine = state_theirs = None
    for _ in range(3):
        (p_mine, state_mine), (p_theirs, state_theirs) = mine(params, grads, state_mine), theirs(params, grads,
                                                                                                  state_theirs)
        identical((p_mine, state_mine), (p_theirs, state_theirs), "adam_step")


def test_the_record_of_the_verified_reference_is_current():
    # Written by `python -m grader.sandbox.given --write` once the tests above pass: a change of the reference
    # without it makes fair grading ask the reference again (slower, never wrong), and fails here.
    from grader.curriculum import load
    from grader.sandbox import given

    assert given.verified(given.KIT_GIVEN) == given.current(ROOT / "solutions", load()), (
        "run grader/tests/test_given_bits.py, then python -m grader.sandbox.given --write")


def test_a_reference_that_differs_from_the_verified_one_is_asked_itself(tmp_path):
    # An instructor's reference of softmax that differs: softmax and everything built on it are answered by that
    # reference, the rest by the given code; a changed helper of the kit leaves no given code in use.
    import shutil

    from grader.curriculum import load
    from grader.sandbox import given

    curriculum = load()
    reference = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions", reference, ignore=shutil.ignore_patterns("__pycache__"))
    everything = given.usable(reference, curriculum)
    assert {"softmax", "attention", "training"} <= everything
    (reference / "softmax.py").write_text((reference / "softmax.py").read_text() + "\n# the course's own\n")
    (reference / "_mine.py").write_text("X = 1\n")  # a helper of the course's own changes nothing
    changed = given.usable(reference, curriculum)
    assert "softmax" not in changed and "attention" not in changed and "training" not in changed
    assert {"projections", "positional", "masks"} <= changed
    (reference / "_checks.py").write_text((reference / "_checks.py").read_text() + "\n")
    assert given.usable(reference, curriculum) == frozenset()
