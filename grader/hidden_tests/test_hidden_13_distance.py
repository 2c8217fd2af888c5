"""Hidden tests of exercise 13, distance: long contexts, one key, integers, float32, missing distances, long tasks."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.feedback import expect, expect_close, expect_raises_value_error, expect_shape
from tests.test_13_distance import (
    ACCURACY,
    CHECKS,
    CRITICAL,
    CURVE,
    INPUTS,
    MARGIN,
    PENALTY,
    USE,
    WEIGHTS,
    _accuracy,
    _curve,
    _match_inputs,
    _match_task,
    _task,
    _weights,
)

EXERCISE = "distance"
NO_QUERY = ("recall at distance t counts the queries whose answer is t steps away; where no query is, there is "
            "nothing to count: NaN, not a recall of 0 (a mean over no queries)")


def test_a_single_key_is_one_step_away(impl):
    out = impl.distance_penalty(1, 0.7)
    if expect_shape(out, (1,), what="distance_penalty(1, 0.7)", idea=PENALTY):
        expect_close(out, np.array([-0.7]), what="distance_penalty(1, 0.7): the only key is 1 step away",
                     idea=PENALTY)


def test_weights_of_a_long_context_with_large_scores(impl):
    rng = np.random.default_rng(1360)
    q, k = 30.0 * rng.normal(size=(3, 5)), 30.0 * rng.normal(size=(3, 211, 5))
    out = impl.recall_weights(q, k, 0.05)
    what = "recall_weights over 211 keys with scores of up to about 2,300"
    if expect_shape(out, (3, 211), what=what, idea=WEIGHTS):
        expect_close(out, _weights(q, k, 0.05), rtol=1e-9, atol=1e-12, what=f"{what} (no overflow)",
                     idea=WEIGHTS + "; exp overflows past about 709: subtract each row's largest score before exp, "
                                    "as exercise 1's softmax does")


def test_integer_and_float32_inputs(impl):
    rng = np.random.default_rng(1361)
    q, k = rng.integers(-3, 4, size=(2, 3)), rng.integers(-3, 4, size=(2, 4, 3))
    expect_close(impl.recall_weights(q, k, 1), _weights(q.astype(float), k.astype(float), 1.0), rtol=1e-9,
                 what="recall_weights of integer queries and keys, integer slope 1", idea=WEIGHTS)
    q32, k32 = rng.normal(size=(3, 7)).astype(np.float32), rng.normal(size=(3, 5, 7)).astype(np.float32)
    answer = np.array([4, 0, 2])
    scores = np.einsum("bd,bjd->bj", q32.astype(float), k32.astype(float)) / np.sqrt(7)
    expected = np.array([scores[i, answer[i]] - np.delete(scores[i], answer[i]).max() for i in range(3)])
    expect_close(impl.score_margin(q32, k32, answer), expected, rtol=1e-5, atol=1e-5,
                 what="score_margin of float32 queries and keys", idea=MARGIN)
    expect_close(np.asarray(float(impl.critical_distance(3, 1))), 4.0,
                 what="critical_distance(3, 1) with integer arguments", idea=CRITICAL)


def test_a_distance_nobody_asks_for_has_no_recall(impl):
    task = _task(1362, 8, 10, 2.0)
    asked = task["distance"] != 3
    part = {key: (value[asked] if isinstance(value, np.ndarray) else value) for key, value in task.items()}
    # Counted from your recall_weights, on the task and on a noisy twin (a curve written from a formula fails there).
    recall = _curve(impl, part, 0.4, what="recall_curve of a task that never asks for distance 3", idea=CURVE)
    if recall is not None:
        expect(bool(np.isnan(recall[2])) and not np.isnan(np.delete(recall, 2)).any(),
               what="recall at the distance no query asks for (3), and at the others",
               expected="NaN at distance 3 only (no query to count, not a recall of 0)", observed=str(recall),
               idea=NO_QUERY)


def test_a_longer_context_changes_nothing_for_the_same_distances(impl):
    """ALiBi's penalty depends on the distance only: far keys added in front take no recall from near answers."""
    margin, slope = 2.6, 0.3
    short, long = _task(1363, 12, 48, margin), _task(1363, 12, 48, margin)
    rng = np.random.default_rng(1364)
    # Prepend 36 keys orthogonal to the context's own (the long context's extra, far keys).
    extra = []
    for i in range(12):
        basis, _ = np.linalg.qr(np.concatenate([long["keys"][i].T, rng.normal(size=(48, 36))], axis=1))
        extra.append(np.sqrt(margin * np.sqrt(48)) * basis[:, 12:].T)
    long = {**long, "keys": np.concatenate([np.stack(extra), long["keys"]], axis=1), "answer": long["answer"] + 36,
            "n_pairs": 48}
    # Each counted from your recall_weights, on the context and on a noisy twin (as the public tests count them).
    recall_short = _curve(impl, short, slope, what="recall_curve of a context of 12 keys", idea=USE)
    recall_long = _curve(impl, long, slope, what="recall_curve of the context lengthened to 48 keys", idea=USE)
    if recall_short is not None and recall_long is not None:
        expect_close(recall_long[:12], recall_short, what="recall at distances 1 to 12, in a context of 12 keys "
                     "and in the same context with 36 far keys added in front", idea=USE)


def test_inputs_of_a_context_of_one_symbol(impl):
    embedding = np.arange(12.0).reshape(3, 4)
    task = {"symbols": np.array([[2], [0]]), "query": np.array([2, 0]), "answer": np.array([0, 0])}
    xq, xk = impl.match_inputs(embedding, task, True)
    want_q, want_k = _match_inputs(embedding, task, True)
    if expect_shape(xk, (2, 1, 4), what="xk of a context of one symbol", idea=INPUTS):
        expect_close(xk, want_k, what="xk of a context of one symbol (position 0)", idea=INPUTS)
        expect_close(xq, want_q, what="xq of a context of one symbol (the query at position 1)", idea=INPUTS)


def test_accuracy_at_a_length_of_300(impl):
    rng = np.random.default_rng(1365)
    embedding, weight = rng.normal(size=(6, 10)), 20.0 * np.eye(10)
    task = _match_task(1366, 40, 300)
    for positions, slope in ((False, 0.5), (True, 0.0)):
        expect_close(np.asarray(float(impl.length_accuracy(weight, embedding, task, positions, slope))),
                     _accuracy(weight, embedding, task, positions, slope),
                     what=f"length_accuracy on contexts of 300 symbols (positions={positions}), large scores",
                     idea=ACCURACY)


def test_training_rejects_a_task_without_answers(impl):
    embedding = np.random.default_rng(1367).normal(size=(4, 6))
    task = {"symbols": np.zeros((3, 5), dtype=int), "query": np.zeros(3, dtype=int)}
    expect_raises_value_error(lambda: impl.train_match_head(np.random.default_rng(0), embedding, task, True, 0.0),
                              argument="task", what="train_match_head with a task that has no answer", idea=CHECKS)
    expect_raises_value_error(lambda: impl.match_scores(np.eye(5), np.ones((2, 6)), np.ones((2, 3, 6)), 0.1),
                              argument="weight", what="match_scores with a (5, 5) weight for d = 6", idea=CHECKS)
