"""Exercise 13: distance. ALiBi's penalty, the weights it gives, the margin, the critical distance, then recall.

Expected values come from this file: the penalty and the weights written out
here, the margin counted here, the critical distance solved here, and tasks
drawn here (orthogonal keys built by this file, with margins, slopes and sizes
it picks), so a curve that was stored, or that ignores the slope, cannot pass.
"""

from __future__ import annotations

import math

import numpy as np

from tests.feedback import (
    call_or_explain,
    expect,
    expect_close,
    expect_dtype,
    expect_equal,
    expect_raises_value_error,
    expect_shape,
)
from tests.probes import expect_probe, probe

READ = "docs/reading.md#context-use"
PENALTY = ("ALiBi's penalty: the query stands right after the n_keys keys, so key j is n_keys - j steps away "
           "(the last key 1, the first n_keys); its penalty is -slope times that distance")
WEIGHTS = ("the weights are softmax(q . k_j / sqrt(d_k) - slope * (n_keys - j)) over the keys of each query's own "
           "context: exercise 3's attention with the penalty as an additive mask")
MARGIN = ("the margin is measured on the scaled scores q . k / sqrt(d_k), the ones softmax sees: the answer's score "
          "minus the largest score among the other keys")
CRITICAL = ("the critical distance: the answer at distance t scores margin - slope * t, the nearest distractor "
            "(one step away) 0 - slope; the answer leads while t < 1 + margin / slope, and with slope 0 always "
            f"({READ})")
CURVE = ("recall at distance t: among the queries whose answer is t steps away, the fraction whose largest weight "
         "(over the keys) falls on the answer's key")
USE = ("an available context is not a used context: with ALiBi's penalty recall falls past the critical distance "
       f"although the answer is in the context; without it, recall does not depend on distance ({READ})")
CHECKS = "bad input raises ValueError, and the message names the offending argument"


# ---------------------------------------------------------------- the tests' own task and computations

def _task(seed: int, n_pairs: int, d_k: int, margin: float, noise: float = 0.0, repeats: int = 1) -> dict:
    """Contexts of orthogonal keys whose answer scores `margin` (scaled), the others 0; every distance asked."""
    rng = np.random.default_rng(seed)
    b = n_pairs * repeats
    basis, _ = np.linalg.qr(rng.normal(size=(b, d_k, n_pairs)))
    keys = np.sqrt(margin * np.sqrt(d_k)) * np.swapaxes(basis, 1, 2)  # (b, n_pairs, d_k)
    distance = 1 + rng.permutation(b) % n_pairs  # every distance `repeats` times, in a drawn order
    answer = n_pairs - distance
    queries = keys[np.arange(b), answer] + rng.normal(scale=noise * d_k ** 0.25 / math.sqrt(margin),
                                                      size=(b, d_k))
    return {"keys": keys, "queries": queries, "answer": answer, "distance": distance, "margin": float(margin),
            "noise": float(noise), "n_pairs": n_pairs}


def _weights(queries: np.ndarray, keys: np.ndarray, slope: float) -> np.ndarray:
    n = keys.shape[1]
    scores = np.einsum("bd,bjd->bj", queries, keys) / np.sqrt(keys.shape[-1]) - slope * (n - np.arange(n))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _curve_from(weights: np.ndarray, task: dict) -> np.ndarray:
    """Recall at each distance 1..n_pairs, counted here from the given weights."""
    hit = np.argmax(np.asarray(weights), axis=-1) == task["answer"]
    asked = [task["distance"] == t for t in range(1, task["n_pairs"] + 1)]
    return np.array([hit[rows].mean() if rows.any() else np.nan for rows in asked])


def _curve(impl, task: dict, slope: float, what: str, idea: str) -> np.ndarray | None:
    out = call_or_explain(impl.recall_curve, task, slope, what=what, idea=idea)
    n = task["n_pairs"]
    if not expect(isinstance(out, tuple) and len(out) == 2, what=what, expected="a tuple (distances, recall)",
                  observed=f"{type(out).__name__}", idea=idea):
        return None
    if not expect_shape(out[1], (n,), what=f"{what}: recall", idea=CURVE):
        return None
    return np.asarray(out[1], dtype=float)


# ---------------------------------------------------------------- probes (diagnosis)

@probe("distance_penalty")
def seven_keys():
    return (7, 0.35), {}


@probe("distance_penalty", rejects="slope")
def a_negative_slope():
    return (5, -0.5), {}


@probe("recall_weights")
def three_contexts_of_five():
    rng = np.random.default_rng(1311)
    return (rng.normal(size=(3, 4)), rng.normal(size=(3, 5, 4)), 0.6), {}


@probe("score_margin")
def four_contexts_of_six():
    rng = np.random.default_rng(1312)
    return (rng.normal(size=(4, 9)), rng.normal(size=(4, 6, 9)), np.array([0, 5, 2, 3])), {}


@probe("critical_distance")
def margin_three_slope_point_four():
    return (3.0, 0.4), {}


@probe("critical_distance", rejects="margin")
def a_margin_of_zero():
    return (0.0, 0.4), {}


@probe("recall_curve")
def a_noisy_task():
    return (_task(1313, 12, 16, 2.5, noise=0.4, repeats=3), 0.3), {}


# ---------------------------------------------------------------- distance_penalty

def test_distance_penalty_shape_and_values(impl):
    for n, slope in ((9, 0.3), (1, 2.0), (6, 0.0)):
        out = call_or_explain(impl.distance_penalty, n, slope, what=f"distance_penalty({n}, {slope})", idea=PENALTY)
        if expect_shape(out, (n,), what=f"distance_penalty({n}, {slope})", idea=PENALTY):
            expect_dtype(out, np.float64, what=f"distance_penalty({n}, {slope})", idea=PENALTY)
            expect_close(out, -slope * (n - np.arange(n)), what=f"distance_penalty({n}, {slope})", idea=PENALTY)


def test_distance_penalty_is_a_row_of_alibi(impl):
    n, n_heads = 11, 4
    positions = np.arange(n + 1)
    for h in range(n_heads):
        slope = 2.0 ** (-8.0 * (h + 1) / n_heads)  # ALiBi's slope of head h (exercise 5)
        alibi_row = -slope * np.abs(positions[n] - positions[:n])  # the query at position n, over keys 0..n-1
        expect_close(impl.distance_penalty(n, slope), alibi_row,
                     what=f"distance_penalty({n}, slope of ALiBi's head {h} of {n_heads}) against row {n} of "
                          "ALiBi's bias for that head", idea=PENALTY)


def test_distance_penalty_rejects_bad_input(impl):
    expect_probe(impl, "distance_penalty/a_negative_slope", what="distance_penalty(5, slope=-0.5)", idea=CHECKS)
    expect_raises_value_error(lambda: impl.distance_penalty(0, 0.5), argument="n_keys",
                              what="distance_penalty(n_keys=0, 0.5)", idea=CHECKS)
    expect_probe(impl, "distance_penalty/seven_keys", what="distance_penalty(7, 0.35)", idea=PENALTY)


# ---------------------------------------------------------------- recall_weights

def test_recall_weights_shape_and_rows(impl):
    rng = np.random.default_rng(1320)
    q, k = rng.normal(size=(5, 6)), rng.normal(size=(5, 7, 6))
    out = call_or_explain(impl.recall_weights, q, k, 0.4, what="recall_weights of 5 queries over 7 keys (d_k 6)",
                          idea=WEIGHTS)
    if expect_shape(out, (5, 7), what="recall_weights(queries (5, 6), keys (5, 7, 6), 0.4)", idea=WEIGHTS):
        expect_close(out.sum(axis=-1), np.ones(5), what="the sum of each row of recall_weights", idea=WEIGHTS)


def test_recall_weights_are_the_softmax_of_scaled_scores_plus_the_penalty(impl):
    rng = np.random.default_rng(1321)
    q, k = rng.normal(size=(4, 9)), 2.0 * rng.normal(size=(4, 8, 9))
    for slope in (0.0, 0.25, 1.5):
        out = impl.recall_weights(q, k, slope)
        if expect_shape(out, (4, 8), what=f"recall_weights(..., slope={slope})", idea=WEIGHTS):
            expect_close(out, _weights(q, k, slope), rtol=1e-9, atol=1e-12,
                         what=f"recall_weights of 4 queries over 8 keys (d_k 9), slope {slope}", idea=WEIGHTS)
    expect_probe(impl, "recall_weights/three_contexts_of_five", what="recall_weights on its fixed input",
                 idea=WEIGHTS)


def test_recall_weights_rejects_keys_that_do_not_fit(impl):
    rng = np.random.default_rng(1322)
    expect_raises_value_error(lambda: impl.recall_weights(rng.normal(size=(3, 4)), rng.normal(size=(3, 5, 6)), 0.1),
                              argument="keys", what="recall_weights with queries (3, 4) and keys (3, 5, 6)",
                              idea=CHECKS)


# ---------------------------------------------------------------- score_margin

def test_score_margin_is_the_lead_of_the_answer_in_scaled_score(impl):
    rng = np.random.default_rng(1330)
    b, n, d = 6, 5, 16
    q, k = rng.normal(size=(b, d)), rng.normal(size=(b, n, d))
    answer = rng.integers(0, n, size=b)
    scores = np.einsum("bd,bjd->bj", q, k) / np.sqrt(d)
    expected = np.array([scores[i, answer[i]] - np.delete(scores[i], answer[i]).max() for i in range(b)])
    out = call_or_explain(impl.score_margin, q, k, answer, what="score_margin of 6 random contexts", idea=MARGIN)
    if expect_shape(out, (b,), what="score_margin(queries (6, 16), keys (6, 5, 16), answer (6,))", idea=MARGIN):
        expect_close(out, expected, what="score_margin of random contexts (some margins negative: a distractor "
                                          f"leads), d_k {d}", idea=MARGIN)
    expect_probe(impl, "score_margin/four_contexts_of_six", what="score_margin on its fixed input", idea=MARGIN)


def test_score_margin_of_a_drawn_task_is_its_margin(impl):
    margin = float(np.random.default_rng(1331).uniform(1.5, 5.0))
    task = _task(1331, 9, 25, margin)
    out = impl.score_margin(task["queries"], task["keys"], task["answer"])
    if expect_shape(out, (9,), what="score_margin on a task of 9 queries", idea=MARGIN):
        expect_close(out, np.full(9, margin), rtol=1e-9,
                     what=f"score_margin of orthogonal keys whose answer scores {margin:.4f} (scaled by "
                          "1/sqrt(25)) and the others 0", idea=MARGIN)


# ---------------------------------------------------------------- critical_distance

def test_critical_distance_solves_margin_minus_slope_t_equals_minus_slope(impl):
    rng = np.random.default_rng(1340)
    for margin, slope in zip(rng.uniform(0.5, 6.0, size=4), rng.uniform(0.05, 1.0, size=4), strict=True):
        out = call_or_explain(impl.critical_distance, float(margin), float(slope),
                              what=f"critical_distance({margin:.4f}, {slope:.4f})", idea=CRITICAL)
        expect_close(np.asarray(out, dtype=float), 1.0 + margin / slope, rtol=1e-12,
                     what=f"critical_distance(margin={margin:.4f}, slope={slope:.4f})", idea=CRITICAL)
    expect_probe(impl, "critical_distance/margin_three_slope_point_four", what="critical_distance(3.0, 0.4)",
                 idea=CRITICAL)


def test_critical_distance_without_a_penalty_is_infinite(impl):
    out = call_or_explain(impl.critical_distance, 2.0, 0.0, what="critical_distance(2.0, slope=0.0)", idea=CRITICAL)
    expect(np.isposinf(float(out)), what="critical_distance(2.0, slope=0.0)", expected="inf (no distance is too far)",
           observed=repr(out), idea=CRITICAL)


def test_critical_distance_rejects_bad_input(impl):
    expect_probe(impl, "critical_distance/a_margin_of_zero", what="critical_distance(margin=0.0, 0.4)", idea=CHECKS)
    expect_raises_value_error(lambda: impl.critical_distance(2.0, -0.1), argument="slope",
                              what="critical_distance(2.0, slope=-0.1)", idea=CHECKS)


# ---------------------------------------------------------------- recall_curve

def test_recall_curve_returns_the_distances_and_one_recall_each(impl):
    task = _task(1350, 10, 12, 3.0, noise=0.3, repeats=2)
    out = call_or_explain(impl.recall_curve, task, 0.2, what="recall_curve of a task of 10 pairs", idea=CURVE)
    if expect(isinstance(out, tuple) and len(out) == 2, what="recall_curve(task, 0.2)",
              expected="a tuple (distances, recall)", observed=type(out).__name__, idea=CURVE):
        distances, recall = out
        if expect_shape(distances, (10,), what="the distances of recall_curve", idea=CURVE):
            expect_equal(np.asarray(distances), np.arange(1, 11), what="the distances of recall_curve", idea=CURVE)
        if expect_shape(recall, (10,), what="the recall of recall_curve", idea=CURVE):
            expect(bool(np.all((recall >= 0) & (recall <= 1))), what="the recall of recall_curve",
                   expected="fractions in [0, 1]", observed=str(recall), idea=CURVE)


def test_recall_curve_counts_your_own_weights(impl):
    """The curve, counted here from your recall_weights on a noisy task: the transition is partial."""
    task = _task(1351, 14, 18, 3.0, noise=0.5, repeats=4)
    for slope in (0.35, 0.0):
        recall = _curve(impl, task, slope, f"recall_curve(task, {slope})", CURVE)
        weights = impl.recall_weights(task["queries"], task["keys"], slope)
        if recall is not None and expect_shape(weights, (56, 14), what="recall_weights on the task", idea=WEIGHTS):
            expect_close(recall, _curve_from(weights, task), atol=1e-12,
                         what=f"recall_curve(task, {slope}) against the fraction, at each distance, of the queries "
                              "whose largest weight of your recall_weights is on the answer", idea=CURVE)
    expect_probe(impl, "recall_curve/a_noisy_task", what="recall_curve on its fixed noisy task", idea=CURVE)


def test_recall_falls_past_your_critical_distance(impl):
    """Noise-free tasks drawn here: recall is exactly 1 before the critical distance and 0 after it."""
    rng = np.random.default_rng(1352)
    for case in range(3):
        n_pairs, margin = int(rng.integers(24, 33)), float(rng.uniform(2.0, 5.0))
        slope = margin / float(rng.uniform(5.3, 18.7))  # the critical distance falls between 6 and 20
        task = _task(1352 + case, n_pairs, 36, margin)
        recall = _curve(impl, task, slope, f"recall_curve(task, {slope:.4f})", USE)
        if recall is None:
            continue
        t_star = 1.0 + margin / slope
        distances = np.arange(1, n_pairs + 1)
        expect_equal(recall, (distances < t_star).astype(float),
                     what=f"recall against distance, margin {margin:.3f}, slope {slope:.4f} (answer leads while "
                          f"t < {t_star:.2f})", idea=USE)
        mine = float(impl.critical_distance(margin, slope))
        last_kept = distances[recall == 1].max(initial=0)
        first_lost = distances[recall == 0].min(initial=n_pairs + 1)
        expect(last_kept < mine < first_lost, what=f"critical_distance({margin:.3f}, {slope:.4f}) against your "
               "own recall curve", expected=f"between {last_kept} (recall 1) and {first_lost} (recall 0)",
               observed=f"{mine:.4f}", idea=CRITICAL)


def test_recall_moves_with_the_slope_and_the_margin(impl):
    """The same contexts: a steeper slope or a smaller margin must bring the fall nearer."""
    n_pairs = 30
    falls = {}
    for margin, slope in ((3.0, 0.2), (3.0, 0.45), (1.7, 0.2)):
        task = _task(1353, n_pairs, 32, margin)
        recall = _curve(impl, task, slope, f"recall_curve(task of margin {margin}, slope {slope})", USE)
        if recall is None:
            return
        falls[(margin, slope)] = int(np.sum(recall == 1))
    expect(falls[(3.0, 0.45)] < falls[(3.0, 0.2)] and falls[(1.7, 0.2)] < falls[(3.0, 0.2)],
           what="how many distances keep recall 1, for (margin 3.0, slope 0.2), (3.0, 0.45), (1.7, 0.2)",
           expected="fewer for the steeper slope and for the smaller margin (here 15, 7 and 9)",
           observed=", ".join(str(falls[key]) for key in ((3.0, 0.2), (3.0, 0.45), (1.7, 0.2))), idea=USE)


def test_without_the_penalty_recall_is_flat(impl):
    task = _task(1354, 26, 30, 3.0, noise=0.4, repeats=3)
    recall = _curve(impl, task, 0.0, "recall_curve(task, slope 0)", USE)
    if recall is not None:
        expect(bool(np.all(recall == 1.0)), what="recall against distance without the penalty (slope 0), margin 3, "
               "score noise 0.4", expected="1 at every distance: nothing but the content decides",
               observed=str(recall), idea=USE)
        penalised = _curve(impl, task, 0.3, "recall_curve(task, slope 0.3)", USE)
        if penalised is not None:
            expect(penalised[:5].min() > 0.9 and penalised[-10:].max() < 0.1,
                   what="recall against distance on the same task with slope 0.3 (critical distance 11)",
                   expected="above 0.9 for the 5 nearest distances and below 0.1 for the 10 farthest",
                   observed=str(penalised), idea=USE)
