"""Hidden tests of exercise 12, negation: odd sentences, pair ids in any order, and the claim on another variant.

One-token sentences in float32, every token the asked word, a hidden layer cut
entirely, controls that must not count, and the bag model trained with the
student's gradients on sentences of 13 tokens (as the public claim test trains
it, from seeds the student has not seen).
"""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np
from pytest_check import check

from tests.failures import record
from tests.feedback import call_or_explain, expect, expect_close, expect_shape
from tests.test_08_backward import expect_gradient
from tests.test_09_training import _loss
from tests.test_12_negation import (
    BOUND,
    COUNT,
    FEATURES,
    GRADS,
    LOOK,
    POOLED,
    TRAINED_HERE,
    _pooled,
    _pooled_params,
    bag_figures,
    negation_tasks,
    require_analytic,
    train_bag_here,
)

EXERCISE = "negation"


def test_a_sentence_of_one_token_gives_two_equal_halves(impl):
    embedding = np.random.default_rng(1250).normal(size=(6, 5)).astype(np.float32)
    tokens = np.array([[4], [1], [4]])
    out = impl.pooled_features(embedding, tokens, np.zeros(3, dtype=np.int64))
    if expect_shape(out, (3, 10), what="pooled_features of three one-token sentences, d_model 5", idea=FEATURES):
        want = embedding.astype(np.float64)[tokens[:, 0]]
        expect_close(np.asarray(out, dtype=np.float64), np.concatenate([want, want], axis=1), rtol=1e-6,
                     what="pooled_features of one-token sentences (float32 embedding): the mean is the token itself",
                     idea=FEATURES)


def test_gradients_when_every_token_is_the_asked_word(impl):
    if not require_analytic(impl):
        return
    rng = np.random.default_rng(1251)
    params = _pooled_params(1252, vocab=8, d=4, hidden=7)
    tokens = np.full((4, 9), 3)
    tokens[1] = rng.integers(0, 8, size=9)
    query = np.array([0, 4, 8, 2])
    target = rng.integers(0, 8, size=4)
    _, grads = impl.pooled_gradients(params, tokens, query, target)
    emb = grads.get("embedding") if isinstance(grads, dict) else None

    def loss(value):
        return _loss(_pooled({**params, "embedding": value}, tokens, query), target)

    expect_gradient(emb, loss, params["embedding"], what="grads['embedding'] when sentences are one word nine times "
                    "(that word asked too)", idea=GRADS)


def test_pooled_forward_with_every_hidden_unit_cut(impl):
    params = _pooled_params(1253)
    params["b_hidden"] = np.full_like(params["b_hidden"], -1e3)
    tokens = np.random.default_rng(1254).integers(0, len(params["b_out"]), size=(3, 5))
    logits = call_or_explain(impl.pooled_forward, params, tokens, np.array([0, 2, 4]),
                             what="pooled_forward with b_hidden = -1000 (every unit below 0)", idea=POOLED)
    expect_close(logits, np.tile(params["b_out"], (3, 1)), rtol=1e-12,
                 what="the logits when the ReLU cuts every hidden unit", idea=POOLED + ": they are b_out alone")


def test_pair_ids_in_any_order(impl):
    pair = np.array([7, 2, -1, 7, 4, 2, 4])
    target = np.array([1, 2, 3, 4, 5, 6, 7])
    predicted = np.array([1, 0, 3, 4, 5, 0, 0])  # pair 7 both right, pair 2 none, pair 4 one; the control right
    result = impl.pair_accuracy(predicted, target, pair)
    if expect(isinstance(result, tuple) and len(result) == 2, what="pair_accuracy's result",
              expected="(accuracy, both_right)", observed=type(result).__name__, idea=COUNT):
        expect_close(result[0], 3 / 6, what="accuracy with pair ids 7, 2, 4 in no order and one control", idea=COUNT)
        expect_close(result[1], 1 / 3, what="both_right with pair ids 7, 2, 4 in no order", idea=COUNT)


def test_a_single_pair_numbered_zero(impl):
    # One pair only, its id 0, its members apart with controls between: a count per pair sized by the largest id
    # (zeros(pair.max())) or a check that wants two pairs fails here, not on the tasks' many pairs.
    pair = np.array([0, -1, -1, 0])
    target = np.array([3, 1, 2, 4])
    for predicted, expected, told in ((np.array([3, 0, 0, 4]), (1.0, 1.0), "both members right"),
                                      (np.array([3, 1, 2, 0]), (0.5, 0.0), "one member right, the controls too")):
        result = impl.pair_accuracy(predicted, target, pair)
        if expect(isinstance(result, tuple) and len(result) == 2, what="pair_accuracy's result for a single pair",
                  expected="(accuracy, both_right)", observed=type(result).__name__, idea=COUNT):
            expect_close(result[0], expected[0], what=f"accuracy of a single pair (id 0), {told}", idea=COUNT)
            expect_close(result[1], expected[1], what=f"both_right of a single pair (id 0), {told}", idea=COUNT)


def test_controls_do_not_count_in_negation_attention(impl):
    task = negation_tasks().negation_task(np.random.default_rng(1255), 2, n_controls=4)
    n, seq = task["tokens"].shape
    weights = np.full((n, 1, seq, seq), 1.0 / seq)
    rows = np.arange(n)
    weights[rows, 0, task["query_position"]] = 0.0
    weights[rows, 0, task["query_position"], task["own_slot"]] = np.where(task["pair"] >= 0, 0.25, 1.0)
    weights[rows, 0, task["query_position"], task["other_slot"]] = np.where(task["pair"] >= 0, 0.75, 0.0)
    result = impl.negation_attention(weights, task)
    if expect(isinstance(result, tuple) and len(result) == 2, what="negation_attention's result",
              expected="(own, other)", observed=type(result).__name__, idea=LOOK):
        expect_close(np.array(result, dtype=float), np.array([0.25, 0.75]), rtol=1e-12,
                     what="negation_attention where the 4 controls put all weight on their own slot",
                     idea=LOOK + "; the controls (pair -1) are left out")


def test_the_bag_claim_on_another_task_variant(impl):
    # The bag model trained by the public test's loop over the student's pooled_gradients (nothing the student's
    # train_pooled or compare returns), on a variant and from a seed of this file.
    if not require_analytic(impl):
        return
    params, test_set, failure = train_bag_here(impl, 1256, 1257, max_shift=2)
    if failure is not None:
        check.fail(record(failure).message)
        return
    pooled = bag_figures(params, test_set)
    expect(pooled["accuracy"] == 0.5 and pooled["controls"] >= 0.9,
           what=f"{TRAINED_HERE}, on another variant (sentences of 13 tokens)",
           expected="0.5 on pairs, at least 0.9 on controls",
           observed=f"{pooled['accuracy']:.3f} on pairs, {pooled['controls']:.3f} on controls", idea=BOUND)
