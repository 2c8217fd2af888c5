"""Exercise 13: distance. ALiBi's penalty, the weights it gives, the margin, the critical distance, then recall.

Expected values come from this file: the penalty and the weights written out
here, the margin counted here, the critical distance solved here, and tasks
drawn here (orthogonal keys built by this file, with margins, slopes and sizes
it picks), so a curve that was stored, or that ignores the slope, cannot pass.
"""

from __future__ import annotations

import math

import numpy as np

from tests import moves, unseen
from tests.effort import (
    EFFORT,
    EFFORT_FLOOR,
    cpu_call,
    cpu_seconds_per_call,
    expect_varies,
    message,
    require,
    submission_salt,
    too_costly,
    within_budget,
)
from tests.failures import Failure
from tests.feedback import (
    call_or_explain,
    differing_numbers,
    expect,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_equal,
    expect_raises_value_error,
    expect_shape,
)
from tests.kinds import remembered
from tests.own_models import _adam
from tests.probes import PROBES, expect_probe, golden, probe
from tests.steps import Stage, pipeline

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
UNASKED = ("a distance no query asks for has no recall: 0 answered of 0 asked is NaN, not 0 (which "
           "would say that every query at that distance was missed)")
USE = ("an available context is not a used context: with ALiBi's penalty recall falls past the critical distance "
       f"although the answer is in the context; without it, recall does not depend on distance ({READ})")
INPUTS = ("the head's inputs: embedding rows of the symbols (keys) and of the query, plus, when positions, rows "
          "0..n-1 of sinusoidal_encoding(n + 1, d) for the keys and row n for the query (it stands after them)")
SCORES = "the head's scores: xq @ weight @ xk[j] / sqrt(d), plus distance_penalty(n, slope)"
TRAIN = ("training: the weight starts at zeros; each step draws a batch of the task's contexts, "
         "rng.integers(0, n_examples, size=batch_size) as exercise 9's train does, takes cross_entropy(scores, "
         "answer) (exercise 9) and its gradient, the weight's gradient xq^T (grad_scores @ xk) / sqrt(d) summed over "
         "the batch, and one adam_step (exercise 9)")
# Adam divides each step by the gradient's own running size: a gradient off by a constant factor changes the
# weights it makes only slightly (through eps), and the losses hardly at all.
ADAM_SCALE = ("Adam divides each step by the gradient's own size, so a gradient off by a constant factor (a missing "
              "/ sqrt(d), an extra / batch_size) moves the weight only this little: check the gradient's scale, and "
              "that each step passes lr to adam_step")
ACCURACY = "accuracy: the fraction of the queries whose highest score is on the answer's position"
LENGTH = ("beyond the training length: sinusoidal encodings give the query at a new length a position vector the "
          "head was never trained on; ALiBi's penalty depends on the distance only and means the same at every "
          f"length (Press et al. 2022) ({READ})")
CHECKS = "bad input raises ValueError, and the message names the offending argument"
D_HEAD, N_SYMBOLS, TRAIN_LENGTH, ALIBI_SLOPE = 16, 6, 16, 0.5


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


def _twin(task: dict, seed: int) -> dict:
    """The same contexts with queries jittered hard (score noise about 1): a curve no formula of the margin gives."""
    d_k = task["keys"].shape[-1]
    jitter = np.random.default_rng(seed).normal(scale=d_k ** 0.25 / math.sqrt(task["margin"]),
                                                size=task["queries"].shape)
    return {**task, "queries": task["queries"] + jitter, "noise": 1.0}


def _curve(impl, task: dict, slope: float, what: str, idea: str) -> np.ndarray | None:
    """Your recall_curve on the task, checked first against this file's count from your recall_weights.

    The count is checked on the task and on a hard-jittered twin of it, so that only a curve counted from the
    weights passes: a curve written down from the margin and the slope (a step at the critical distance) differs
    from the count on the twin.
    """
    n = task["n_pairs"]
    curves = []
    for which, case in (("the task", task), ("its twin with noisy queries", _twin(task, n))):
        out = call_or_explain(impl.recall_curve, case, slope, what=f"{what}, on {which}", idea=idea)
        if not expect(isinstance(out, tuple) and len(out) == 2, what=what, expected="a tuple (distances, recall)",
                      observed=f"{type(out).__name__}", idea=idea):
            return None
        if not expect_shape(out[1], (n,), what=f"{what}: recall", idea=CURVE):
            return None
        weights = call_or_explain(impl.recall_weights, case["queries"], case["keys"], slope,
                                  what=f"recall_weights on {which}", idea=WEIGHTS)
        if not expect_shape(weights, case["keys"].shape[:2], what=f"recall_weights on {which}", idea=WEIGHTS):
            return None
        if not expect_close(np.asarray(out[1], dtype=float), _curve_from(weights, case), atol=1e-12,
                            what=f"{what}, on {which}, against the fraction at each distance of the queries whose "
                                 "largest weight of your recall_weights is on the answer", idea=CURVE):
            return None
        curves.append(np.asarray(out[1], dtype=float))
    return curves[0]


def _sinusoidal(n: int, d: int) -> np.ndarray:
    pair = 2 * (np.arange(d) // 2)
    angle = np.arange(n)[:, None] / 10000.0 ** (pair / d)
    return np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))


def _match_task(seed: int | list[int], n_examples: int, length: int, n_symbols: int = N_SYMBOLS) -> dict:
    """The test's own latest-match contexts: the answer is the last occurrence of the query's symbol."""
    rng = np.random.default_rng(seed)
    symbols = rng.integers(0, n_symbols, size=(n_examples, length))
    query = symbols[np.arange(n_examples), rng.integers(0, length, size=n_examples)]
    answer = length - 1 - np.argmax((symbols == query[:, None])[:, ::-1], axis=1)  # the last match in each row
    return {"symbols": symbols, "query": query, "answer": answer, "length": length, "n_symbols": n_symbols}


def _match_inputs(embedding: np.ndarray, task: dict, positions: bool) -> tuple[np.ndarray, np.ndarray]:
    n = task["symbols"].shape[1]
    table = _sinusoidal(n + 1, embedding.shape[1]) if positions else np.zeros((n + 1, embedding.shape[1]))
    return embedding[task["query"]] + table[n], embedding[task["symbols"]] + table[:n]


def _match_scores(weight: np.ndarray, xq: np.ndarray, xk: np.ndarray, slope: float) -> np.ndarray:
    n, d = xk.shape[1], xk.shape[2]
    return np.einsum("be,bje->bj", xq @ weight, xk) / np.sqrt(d) - slope * (n - np.arange(n))


def _accuracy(weight, embedding, task, positions, slope) -> float:
    scores = _match_scores(np.asarray(weight, dtype=float), *_match_inputs(embedding, task, positions), slope)
    return float(np.mean(np.argmax(scores, axis=-1) == task["answer"]))


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


@probe("critical_distance")
def without_a_slope():
    return (2.5, 0.0), {}


@probe("critical_distance", rejects="margin")
def a_margin_of_zero():
    return (0.0, 0.4), {}


@probe("recall_curve")
def a_noisy_task():
    return (_task(1313, 12, 16, 2.5, noise=0.4, repeats=3), 0.3), {}


@probe("match_inputs")
def five_contexts_with_positions():
    return (np.random.default_rng(1314).normal(size=(4, 6)), _match_task(1314, 5, 7, 4), True), {}


@probe("match_scores")
def three_contexts_of_eight():
    rng = np.random.default_rng(1315)
    return (rng.normal(size=(5, 5)), rng.normal(size=(3, 5)), rng.normal(size=(3, 8, 5)), 0.4), {}


@probe("length_accuracy")
def a_fixed_weight_on_eleven_contexts():
    rng = np.random.default_rng(1318)
    return (rng.normal(size=(6, 6)) + 2.0 * np.eye(6), rng.normal(size=(N_SYMBOLS, 6)), _match_task(1318, 11, 11),
            False, 0.3), {}


@probe("length_accuracy")
def a_steep_penalty_on_seven_contexts_of_twelve():
    # Unlike the probe above, the penalty decides here, and there are fewer contexts than keys: an accuracy
    # scored without the penalty and one counted along the batch axis give different outcomes.
    rng = np.random.default_rng(1319)
    return (rng.normal(size=(5, 5)) + 1.5 * np.eye(5), rng.normal(size=(N_SYMBOLS, 5)), _match_task(1319, 7, 12),
            False, 0.8), {}


@probe("length_accuracy")
def every_score_tied():
    # A zero weight and no penalty: every key ties, and the head's answer is the first key (np.argmax). Three of
    # these twelve answers are at position 0 and two at the last one: the first and the last of the ties differ.
    return (np.zeros((5, 5)), np.random.default_rng(1320).normal(size=(N_SYMBOLS, 5)), _match_task(1320, 12, 6),
            False, 0.0), {}


@probe("train_match_head")
def three_steps():
    return (np.random.default_rng(1316), np.random.default_rng(1317).normal(size=(5, 8)), _match_task(1316, 40, 9, 5),
            True, 0.0), {"steps": 3, "batch_size": 16}


# The steps of the pipelines above, for the diagnosis of a mistake no catalogue entry explains (tests/steps.py).
pipeline("match_inputs", ("xq", "xk"),
         Stage("xk", "the keys' inputs", "the keys: embedding[symbols], plus, when positions, rows 0..n-1 of "
               "sinusoidal_encoding(n + 1, d), row j to key j"),
         Stage("xq", "the query's input", "the query: embedding[query], plus, when positions, row n of "
               "sinusoidal_encoding(n + 1, d): it stands after the n keys"))
pipeline("recall_curve", ("distances", "recall"),
         Stage("distances", "the distances", "the distances are 1, 2, ..., n_pairs (int64), one per recall"),
         Stage("recall", "the recall per distance", "recall at distance t: among the queries whose answer is t "
               "steps away, the fraction whose largest weight (recall_weights with the slope given, argmax over "
               "the keys) is on the answer; divide by that group's count, NaN where none asks for it"))
pipeline("train_match_head", ("weight", "losses"),
         Stage("losses", "the losses of the steps", "the steps after the first (the first, from a zero weight, "
               "scores every key alike, so its loss cannot show which contexts its batch holds): each step its own "
               "batch, rng.integers(0, n_examples, size=batch_size) and nothing else drawn from rng, its inputs "
               "match_inputs(embedding, batch, positions), the weight's gradient xq^T (grad_scores @ xk) / sqrt(d) "
               "summed over the batch, and adam_step with the step's lr and the state the step before returned",
               first="the first step: the weight starts at zeros, the batch is rng.integers(0, n_examples, "
               "size=batch_size), the inputs match_inputs(embedding, batch, positions), the loss cross_entropy of "
               "match_scores at the answer's position", stop="one loss per step, steps of them"),
         Stage("weight", "the weight returned", "the weight returned is the one after the last Adam step; if the "
               "losses agree and the weight differs only a little, " + ADAM_SCALE))


# ---------------------------------------------------------------- distance_penalty

def _penalty_idea(out: object, slope: float) -> str:
    """PENALTY, or the convention message for a penalty equal to the kit's up to a constant (ALiBi's original code).

    The original ALiBi code adds ``slope * j`` (the key's position): it differs from ``-slope * (n_keys - j)`` by
    ``slope * n_keys``, the same for every key, which softmax ignores (exercise 5 names the same convention).
    """
    if not isinstance(out, np.ndarray) or out.ndim != 1 or out.dtype.kind not in "fiu" or len(out) < 2:
        return PENALTY
    n = len(out)
    difference = out - (-slope * (n - np.arange(n)))
    if not np.all(np.isfinite(difference)) or np.allclose(difference, 0.0) \
            or not np.allclose(difference, difference[0], rtol=0, atol=1e-9 + 1e-9 * abs(float(difference[0]))):
        return PENALTY
    original = " (the original ALiBi code adds slope * j, the key's position)" if np.allclose(
        out, slope * np.arange(n)) else ""
    return (f"{PENALTY}; a convention, not a misconception: yours equals the kit's penalty up to a constant{original}, "
            "the same for every key, which softmax ignores; this kit's contract is -slope * (n_keys - j), -slope for "
            "the last key, so that the penalty is row n_keys of exercise 5's alibi_bias and reads as a distance")


def test_distance_penalty_shape_and_values(impl):
    for n, slope in ((9, 0.3), (1, 2.0), (6, 0.0)):
        out = call_or_explain(impl.distance_penalty, n, slope, what=f"distance_penalty({n}, {slope})", idea=PENALTY)
        if expect_shape(out, (n,), what=f"distance_penalty({n}, {slope})", idea=PENALTY):
            expect_dtype(out, np.float64, what=f"distance_penalty({n}, {slope})", idea=PENALTY)
            expect_close(out, -slope * (n - np.arange(n)), what=f"distance_penalty({n}, {slope})",
                         idea=_penalty_idea(out, slope))


def test_distance_penalty_is_a_row_of_alibi(impl):
    n, n_heads = 11, 4
    positions = np.arange(n + 1)
    for h in range(n_heads):
        slope = 2.0 ** (-8.0 * (h + 1) / n_heads)  # ALiBi's slope of head h (exercise 5)
        alibi_row = -slope * np.abs(positions[n] - positions[:n])  # the query at position n, over keys 0..n-1
        out = impl.distance_penalty(n, slope)
        expect_close(out, alibi_row, what=f"distance_penalty({n}, slope of ALiBi's head {h} of {n_heads}) against row "
                                          f"{n} of ALiBi's bias for that head", idea=_penalty_idea(out, slope))


def test_distance_penalty_rejects_bad_input(impl):
    expect_probe(impl, "distance_penalty/a_negative_slope", what="distance_penalty(5, slope=-0.5)", idea=CHECKS)
    expect_raises_value_error(lambda: impl.distance_penalty(0, 0.5), argument="n_keys",
                              what="distance_penalty(n_keys=0, 0.5)", idea=CHECKS)
    # A slope checked only with `slope < 0` lets NaN through: every penalty, then every weight, is NaN.
    expect_raises_value_error(lambda: impl.distance_penalty(5, float("nan")), argument="slope",
                              what="distance_penalty(5, slope=nan)", idea=CHECKS)
    expect_probe(impl, "distance_penalty/seven_keys", what="distance_penalty(7, 0.35)",
                 idea=_penalty_idea(impl.distance_penalty(7, 0.35), 0.35))


# ---------------------------------------------------------------- recall_weights

def test_recall_weights_shape_and_rows(impl):
    rng = np.random.default_rng(1320)
    q, k = rng.normal(size=(5, 6)), rng.normal(size=(5, 7, 6))
    out = call_or_explain(impl.recall_weights, q, k, 0.4, what="recall_weights of 5 queries over 7 keys (d_k 6)",
                          idea=WEIGHTS)
    if expect_shape(out, (5, 7), what="recall_weights(queries (5, 6), keys (5, 7, 6), 0.4)", idea=WEIGHTS):
        expect_close(out.sum(axis=-1), np.ones(5), what="the sum of each row of recall_weights", idea=WEIGHTS)
        # (rows of 1/7 sum to one too: the weights of random keys differ from one another)
        expect_varies(out, axis=-1, what="the weights of each row of recall_weights over 7 random keys",
                      idea=WEIGHTS)
        # (and the weights of other queries and keys of these shapes sum to one and vary too)
        expect_differs(impl.recall_weights(2.0 * q, k, 0.4), out, idea=WEIGHTS,
                       what="recall_weights of the queries doubled (q -> 2 q) against those of q",
                       expected="different weights: doubling the queries doubles the scores, and the softmax sharpens",
                       passed="each row sums to one and its weights vary")
    # One query keeps its axis: (1, n_keys), not (n_keys,) (a blind round's .squeeze() passed every test).
    out = call_or_explain(impl.recall_weights, q[:1], k[:1], 0.4, what="recall_weights of 1 query over 7 keys",
                          idea=WEIGHTS)
    expect_shape(out, (1, 7), what="recall_weights(queries (1, 6), keys (1, 7, 6), 0.4)",
                 idea=WEIGHTS + "; one query keeps its axis: (b, n_keys) for b = 1 too (no squeeze)")


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
    # A distractor that equals the answer's key: the answer leads by nothing (a blind round's code that left out every
    # key tied with the answer, not the answer's position, passed here).
    k_tied = k.copy()
    k_tied[np.arange(b), (answer + 1) % n] = k[np.arange(b), answer]
    tied = np.einsum("bd,bjd->bj", q, k_tied) / np.sqrt(d)
    expected = np.array([tied[i, answer[i]] - np.delete(tied[i], answer[i]).max() for i in range(b)])  # at most 0
    out = impl.score_margin(q, k_tied, answer)
    if expect_shape(out, (b,), what="score_margin with a distractor equal to the answer's key", idea=MARGIN):
        expect_close(out, expected, atol=1e-12, idea=MARGIN + "; the other keys are the other positions, a key "
                     "equal to the answer's among them", what="score_margin where a distractor's key equals the "
                     "answer's: a margin of 0, or below where another leads")


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
    expect_probe(impl, "critical_distance/without_a_slope", what="critical_distance(2.5, 0.0)", idea=CRITICAL)
    out = impl.critical_distance(2.0, 0.5)  # (an answer of inf for every slope says nothing of the idea)
    expect(np.isfinite(float(out)), what="critical_distance(2.0, slope=0.5)", idea=CRITICAL,
           expected="a finite distance (with a penalty, far enough is too far)", observed=repr(out))


def test_critical_distance_rejects_bad_input(impl):
    expect_probe(impl, "critical_distance/a_margin_of_zero", what="critical_distance(margin=0.0, 0.4)", idea=CHECKS)
    expect_raises_value_error(lambda: impl.critical_distance(2.0, -0.1), argument="slope",
                              what="critical_distance(2.0, slope=-0.1)", idea=CHECKS)
    expect_raises_value_error(lambda: impl.critical_distance(2.0, float("nan")), argument="slope",
                              what="critical_distance(2.0, slope=nan)", idea=CHECKS)


# ---------------------------------------------------------------- recall_curve

def test_recall_curve_returns_the_distances_and_one_recall_each(impl):
    task = _task(1350, 10, 12, 3.0, noise=0.6, repeats=3)
    out = call_or_explain(impl.recall_curve, task, 0.5, what="recall_curve of a task of 10 pairs", idea=CURVE)
    if expect(isinstance(out, tuple) and len(out) == 2, what="recall_curve(task, 0.5)",
              expected="a tuple (distances, recall)", observed=type(out).__name__, idea=CURVE):
        distances, recall = out
        if expect_shape(distances, (10,), what="the distances of recall_curve", idea=CURVE):
            expect_equal(np.asarray(distances), np.arange(1, 11), what="the distances of recall_curve", idea=CURVE)
        if expect_shape(recall, (10,), what="the recall of recall_curve", idea=CURVE):
            expect(bool(np.all((recall >= 0) & (recall <= 1))), what="the recall of recall_curve",
                   expected="fractions in [0, 1]", observed=str(recall), idea=CURVE)
            weights = impl.recall_weights(task["queries"], task["keys"], 0.5)
            if expect_shape(weights, (30, 10), what="recall_weights on the task", idea=WEIGHTS):
                expect_close(np.asarray(recall, dtype=float), _curve_from(weights, task), atol=1e-12,
                             what="the recall of recall_curve against the share, at each distance, of the queries "
                                  "whose largest weight of your recall_weights is on the answer", idea=CURVE)
    # Distances 3 and 7 asked by no query: their recall is unknown (0 of 0), not 0, which would say every query
    # there was missed.
    kept = ~np.isin(task["distance"], (3, 7))
    sparse = {**task, **{field: task[field][kept] for field in ("keys", "queries", "answer", "distance")}}
    out = call_or_explain(impl.recall_curve, sparse, 0.5, idea=CURVE,
                          what="recall_curve of a task of 10 pairs where no query asks for distance 3 or 7")
    if isinstance(out, tuple) and len(out) == 2 and expect_shape(out[1], (10,), idea=CURVE,
                                                                  what="the recall of recall_curve"):
        expect_equal(np.isnan(np.asarray(out[1], dtype=float)), np.isin(np.arange(1, 11), (3, 7)), idea=UNASKED,
                     what="which recalls of recall_curve are NaN, on a task where no query asks for distance 3 or 7")


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
        distances = 1 + np.arange(n_pairs)
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


# ---------------------------------------------------------------- beyond the training length

def test_match_inputs_add_the_position_rows(impl):
    embedding = np.random.default_rng(1360).normal(size=(5, 8))
    task = _match_task(1360, 4, 9, 5)
    for positions in (False, True):
        out = call_or_explain(impl.match_inputs, embedding, task, positions,
                              what=f"match_inputs(embedding (5, 8), task of 4 contexts of 9, positions={positions})",
                              idea=INPUTS)
        if not expect(isinstance(out, tuple) and len(out) == 2, what="match_inputs", expected="a tuple (xq, xk)",
                      observed=type(out).__name__, idea=INPUTS):
            return
        want_q, want_k = _match_inputs(embedding, task, positions)
        if expect_shape(out[0], (4, 8), what="xq of match_inputs", idea=INPUTS):
            expect_close(out[0], want_q, what=f"xq of match_inputs (positions={positions}): the query stands at "
                         "position 9, after the 9 keys", idea=INPUTS)
        if expect_shape(out[1], (4, 9, 8), what="xk of match_inputs", idea=INPUTS):
            expect_close(out[1], want_k, what=f"xk of match_inputs (positions={positions})", idea=INPUTS)
    expect_probe(impl, "match_inputs/five_contexts_with_positions", what="match_inputs on its fixed input",
                 idea=INPUTS)


def test_match_scores_are_the_bilinear_form_plus_the_penalty(impl):
    rng = np.random.default_rng(1361)
    weight, xq, xk = rng.normal(size=(6, 6)), rng.normal(size=(4, 6)), rng.normal(size=(4, 11, 6))
    for slope in (0.0, 0.7):
        out = call_or_explain(impl.match_scores, weight, xq, xk, slope, what=f"match_scores(..., slope={slope})",
                              idea=SCORES)
        if expect_shape(out, (4, 11), what=f"match_scores of 4 queries over 11 keys, slope {slope}", idea=SCORES):
            expect_close(out, _match_scores(weight, xq, xk, slope), what=f"match_scores, slope {slope} (a weight "
                         "that is not symmetric: xq @ weight @ xk, not xk @ weight @ xq)", idea=SCORES)
    expect_probe(impl, "match_scores/three_contexts_of_eight", what="match_scores on its fixed input", idea=SCORES)


# The chain rule, not a numerical estimate (issue 32): a weight's gradient by nudging each of its d*d entries
# (central differences, or the complex step, all entries at once) costs d*d forward passes a step, the formula
# one. On a head of its own (d = 64, seeded), train_match_head's CPU time must stay within 50 forward passes of
# the test's own scoring per step (plus 50 ms for any overheads), and its weight must be the training replayed
# here: a fast answer made up for this input is no way past it. Checked once per session, at every test of it.
ANALYTIC = ("compute the weight's gradient by the chain rule: cross_entropy's gradient of the scores, then "
            "xq^T (grad_scores @ xk) / sqrt(d) summed over the batch; nudging each entry of the weight (central "
            "differences, the complex step) estimates it at d*d times the cost")


def _gate(impl) -> list[Failure]:
    """Why train_match_head does not train by a backward pass (empty when it does)."""
    d, steps, batch_size = 64, 3, 64

    salt = submission_salt("distance")  # inputs no file can hold the answers to (tests/effort.py)

    def draw(attempt: int) -> tuple:
        seed = 1390 + 10 * attempt
        return (np.random.default_rng([seed, salt]).normal(size=(N_SYMBOLS, d)), _match_task([seed + 1, salt], 300, 24),
                [seed + 3, salt])

    embedding, task, seed = draw(0)
    xq, xk = _match_inputs(embedding, {key: task[key][:batch_size] for key in ("symbols", "query")}, True)
    weight = np.random.default_rng(1392).normal(size=(d, d))
    forward_seconds = cpu_seconds_per_call(lambda: _match_scores(weight, xq, xk, 0.0), minimum=1e-3)
    bound = steps * EFFORT * forward_seconds + EFFORT_FLOOR
    (embedding, task, seed), result, seconds = within_budget(
        draw, lambda inputs: cpu_call(impl, "train_match_head", np.random.default_rng(inputs[2]), *inputs[:2], True,
                                      0.0, steps=steps, batch_size=batch_size, budget=bound), bound)
    what = f"train_match_head on a head of d = {d} ({steps} steps of {batch_size} contexts of 24)"
    if seconds is not None and seconds > bound:
        return [too_costly(what, seconds, bound, forward_seconds, d * d, ANALYTIC, steps=steps)]
    got = result[0] if isinstance(result, tuple) and len(result) == 2 else None
    want = _trained_here(embedding, task, True, 0.0, seed, steps=steps, batch_size=batch_size)
    idea = TRAIN
    if not isinstance(got, np.ndarray) or got.shape != want.shape or got.dtype.kind not in "fiu":
        observed = f"{type(got).__name__}" + (f" of shape {got.shape}, dtype {got.dtype}"
                                              if isinstance(got, np.ndarray) else "")
    else:
        close = np.isclose(np.asarray(got, dtype=np.float64), want, rtol=1e-6, atol=1e-8)
        if close.all():
            return []
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        observed = (f"{len(bad)} of {close.size} entries differ; the first, at index {first}, is "
                    f"{differing_numbers(got[first], want[first], got.dtype, want.dtype)}")
        with np.errstate(all="ignore"):
            relative = float(np.linalg.norm(got - want) / max(float(np.linalg.norm(want)), 1e-12))
        if relative < 1e-3:  # three Adam steps from zero: only a gradient's scale moves the weight so little
            idea = f"{TRAIN}; the weight differs only a little: {ADAM_SCALE}"
    return [message(f"{what}: the weight, against the same training replayed here from the same seed",
                    "the replayed weight (to a relative 1e-6)", observed, idea)]


def require_analytic(impl) -> bool:
    """Fail the test (with the reason) unless train_match_head trains by the chain rule; True when it does."""
    return require(impl, "train_match_head", lambda: _gate(impl))


def test_train_match_head_returns_a_weight_and_one_loss_per_step(impl):
    if not require_analytic(impl):
        return
    embedding = np.random.default_rng(1362).normal(size=(5, 7))
    out = call_or_explain(impl.train_match_head, np.random.default_rng(1363), embedding, _match_task(1363, 30, 8, 5),
                          True, 0.0, steps=4, batch_size=8,
                          what="train_match_head(rng, embedding (5, 7), 30 contexts of 8, True, 0.0, steps=4)",
                          idea=TRAIN)
    if expect(isinstance(out, tuple) and len(out) == 2, what="train_match_head", expected="a tuple (weight, losses)",
              observed=type(out).__name__, idea=TRAIN):
        expect_shape(out[0], (7, 7), what="the weight train_match_head returns (d = 7)", idea=TRAIN)
        expect(len(out[1]) == 4, what="the losses of train_match_head(steps=4)", expected="4 losses, one per step",
               observed=f"{len(out[1])}", idea=TRAIN)
    args, kwargs = PROBES["train_match_head/three_steps"].arguments()
    weight, losses = impl.train_match_head(*args, **kwargs)
    expected = golden("train_match_head/three_steps")
    expect_close(weight, expected[0], rtol=1e-6, atol=1e-9, tiny_term=ADAM_SCALE,
                 what="the weight of train_match_head, 3 steps of 16 examples, on its fixed input", idea=TRAIN)
    expect_close(np.asarray(losses, dtype=float), expected[1], rtol=1e-6, atol=1e-9,
                 what="the losses of train_match_head, 3 steps of 16 examples, on its fixed input", idea=TRAIN)


def test_train_match_head_first_step_is_adam_on_the_cross_entropy(impl):
    if not require_analytic(impl):
        return
    embedding = np.random.default_rng(1364).normal(size=(N_SYMBOLS, 10))
    for positions, slope in ((True, 0.0), (False, 0.5)):
        task = _match_task(1365, 50, 12)
        weight, losses = impl.train_match_head(np.random.default_rng(1365), embedding, task, positions, slope,
                                               steps=1, batch_size=20, lr=0.05)
        rows = np.random.default_rng(1365).integers(0, 50, size=20)  # the first batch, as exercise 9 draws it
        batch = {key: task[key][rows] for key in ("symbols", "query", "answer")}
        xq, xk = _match_inputs(embedding, batch, positions)
        scores = _match_scores(np.zeros((10, 10)), xq, xk, slope)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        loss = float(-np.mean(np.log(p[np.arange(20), batch["answer"]])))
        p[np.arange(20), batch["answer"]] -= 1.0
        grad = np.einsum("bd,bj,bje->de", xq, p / 20, xk) / np.sqrt(10)
        expect_close(np.asarray(losses[0]), loss, rtol=1e-9,
                     what=f"the first loss of train_match_head (positions={positions}, slope={slope}), the "
                          "cross-entropy of the scores of a zero weight at the answers", idea=TRAIN)
        expect_close(weight, -0.05 * grad / (np.abs(grad) + 1e-8), rtol=1e-6, atol=1e-9,
                     what=f"the weight after one Adam step from zeros (positions={positions}, slope={slope}): "
                          "-lr * g / (|g| + eps) for the gradient g of the first batch", idea=TRAIN)


def _loss(weight, embedding, task, positions, slope) -> float:
    scores = _match_scores(np.asarray(weight, dtype=float), *_match_inputs(embedding, task, positions), slope)
    shifted = scores - scores.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_p[np.arange(len(scores)), task["answer"]]))


def test_train_match_head_lowers_the_loss(impl):
    """Your first loss is that of the first batch drawn from rng; your weight, the training's, has a lower loss."""
    if not require_analytic(impl):
        return
    embedding = np.random.default_rng(1366).normal(size=(N_SYMBOLS, D_HEAD))
    task = _match_task(1367, 500, 10)
    weight, losses = impl.train_match_head(np.random.default_rng(1367), embedding, task, False, ALIBI_SLOPE, steps=60)
    rows = np.random.default_rng(1367).integers(0, 500, size=64)
    first_batch = {key: task[key][rows] for key in ("symbols", "query", "answer")}
    expect_close(np.asarray(float(losses[0])), _loss(np.zeros((D_HEAD, D_HEAD)), embedding, first_batch, False,
                                                      ALIBI_SLOPE), rtol=1e-9,
                 what="the first loss of train_match_head: the cross-entropy of a zero weight's scores on the first "
                      "batch drawn from rng", idea=TRAIN)
    # The weight must be the one its 60 steps give, replayed here (a weight built by hand also has a low loss).
    if not expect_close(weight, _trained_here(embedding, task, False, ALIBI_SLOPE, 1367, steps=60), rtol=1e-6,
                        atol=1e-8, what="the weight train_match_head returns after 60 steps, against the same "
                        "training replayed here from the same seed", idea=TRAIN):
        return
    fresh = _match_task(1368, 200, 10)
    before = _loss(np.zeros((D_HEAD, D_HEAD)), embedding, fresh, False, ALIBI_SLOPE)
    after = _loss(weight, embedding, fresh, False, ALIBI_SLOPE)
    expect(after < 0.5 * before, what="the loss on 200 new contexts of a zero weight and of the weight trained 60 "
           "steps (ALiBi head)", expected="the trained one at most half", observed=f"{before:.3f} -> {after:.3f}",
           idea=TRAIN)


def test_length_accuracy_counts_the_top_scores(impl):
    rng = np.random.default_rng(1368)
    embedding, weight = rng.normal(size=(N_SYMBOLS, 8)), rng.normal(size=(8, 8)) + 3.0 * np.eye(8)
    for positions, slope, length in ((False, 0.3, 14), (True, 0.0, 9)):
        task = _match_task(1368 + length, 60, length)
        out = call_or_explain(impl.length_accuracy, weight, embedding, task, positions, slope,
                              what=f"length_accuracy on 60 contexts of {length}", idea=ACCURACY)
        expect_close(np.asarray(float(out)), _accuracy(weight, embedding, task, positions, slope),
                     what=f"length_accuracy of a fixed weight on 60 contexts of {length} (positions={positions}, "
                          f"slope={slope})", idea=ACCURACY)
    # Exact ties (small integers, no positions, no penalty): symbol 2's vector is the sum of 0's and 1's, so a key of
    # symbol 2 scores as high as one of the query's own symbol. The head answers with one key, the first of the
    # highest (np.argmax's rule): the answer counts only where it is that first one. Rows 1 and 2 are right (the
    # answer comes before its tie, or has none); rows 0, 3 and 4 are not (an earlier key ties it): 2 of 5. Counting
    # every tied answer as right gives 5 of 5, taking the last of the highest 3 of 5.
    tied = {"symbols": np.array([[0, 3, 4, 0, 3, 1], [3, 0, 4, 2, 3, 4], [1, 3, 4, 3, 4, 4], [2, 3, 1, 4, 2, 3],
                                 [4, 0, 3, 0, 4, 4]]),
            "query": np.array([0, 0, 1, 1, 0]), "answer": np.array([3, 1, 0, 2, 3])}
    vectors = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=float)
    out = call_or_explain(impl.length_accuracy, np.eye(4), vectors, tied, False, 0.0,
                          what="length_accuracy on 5 contexts of 6 with exact ties", idea=ACCURACY)
    expect_close(np.asarray(float(out)), 2 / 5, rtol=1e-12,
                 what="length_accuracy of the identity weight on 5 contexts of 6 where keys tie exactly (no positions, "
                      "slope 0): the answers of rows 0, 3 and 4 tie an earlier key",
                 idea=ACCURACY + "; the head answers with the first of the highest scores (np.argmax): an answer "
                                 "that only ties an earlier key is not the head's answer (2 of 5 here; 5 of 5 counts "
                                 "every tie as right, 3 of 5 takes the last of the highest)")
    expect_probe(impl, "length_accuracy/a_fixed_weight_on_eleven_contexts", what="length_accuracy on its fixed input",
                 idea=ACCURACY)
    expect_probe(impl, "length_accuracy/a_steep_penalty_on_seven_contexts_of_twelve",
                 what="length_accuracy on 7 contexts of 12 with slope 0.8", idea=ACCURACY)


@remembered  # the test's own computation on seeded inputs: once per process, kept between a student's runs
def _trained_here(embedding, task: dict, positions: bool, slope: float, seed: int, steps: int = 100,
                  batch_size: int = 64, lr: float = 0.1) -> np.ndarray:
    """The weight train_match_head must return, trained here: this file's inputs, scores, gradient and Adam."""
    rng, d = np.random.default_rng(seed), embedding.shape[1]
    xq_all, xk_all = _match_inputs(embedding, task, positions)  # every context's inputs, once
    penalty = -slope * (xk_all.shape[1] - np.arange(xk_all.shape[1]))
    params, state = {"weight": np.zeros((d, d))}, None
    for _ in range(steps):
        rows = rng.integers(0, len(task["answer"]), size=batch_size)
        xq, xk = xq_all[rows], xk_all[rows]
        scores = np.einsum("be,bje->bj", xq @ params["weight"], xk) / np.sqrt(d) + penalty
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        p[np.arange(batch_size), task["answer"][rows]] -= 1.0
        grad = xq.T @ np.einsum("bj,bje->be", p / batch_size, xk) / np.sqrt(d)
        params, state = _adam(params, {"weight": grad}, state, lr, 0.9, 0.999, 1e-8)
    return params["weight"]


def test_alibi_extrapolates_and_sinusoidal_does_not(impl):
    """Both heads trained by your train_match_head at length 16; accuracies from this file's own scoring.

    Each weight must be the one its training gives, replayed here from the same seed (issue 32): a weight built
    by hand, stored, or trained some other way earns no claim.
    """
    if not require_analytic(impl):
        return
    embedding = np.random.default_rng(1369).normal(size=(N_SYMBOLS, D_HEAD))
    train_set = _match_task(1369, 1024, TRAIN_LENGTH)
    heads = {"sinusoidal": (True, 0.0), "ALiBi": (False, ALIBI_SLOPE)}
    lengths = [_match_task(1371 + k, 300, k * TRAIN_LENGTH) for k in (1, 2, 4)]  # the same for both heads
    accuracy = {}
    for name, (positions, slope) in heads.items():
        weight, _ = impl.train_match_head(np.random.default_rng(1370), embedding, train_set, positions, slope)
        if not expect_shape(weight, (D_HEAD, D_HEAD), what=f"the weight of the {name} head", idea=TRAIN):
            return
        if not expect_close(weight, _trained_here(embedding, train_set, positions, slope, 1370), rtol=1e-6,
                            atol=1e-8, idea=TRAIN, what=f"the weight of the {name} head (100 steps, the defaults) "
                            "against the same training replayed here from the same seed"):
            return
        accuracy[name] = [_accuracy(weight, embedding, task, positions, slope) for task in lengths]
    shown = "; ".join(f"{name}: " + ", ".join(f"{a:.2f}" for a in acc) for name, acc in accuracy.items())
    expect(min(accuracy["sinusoidal"][0], accuracy["ALiBi"][0]) >= 0.9,
           what="accuracy at the training length 16, both heads", expected="at least 0.9 for both",
           observed=shown + " (at lengths 16, 32, 64)", idea=TRAIN)
    expect(accuracy["ALiBi"][2] >= 0.9 and accuracy["sinusoidal"][2] < 0.6,
           what="accuracy at four times the training length (64)",
           expected="ALiBi at least 0.9, sinusoidal below 0.6", observed=shown + " (at lengths 16, 32, 64)",
           idea=LENGTH)


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_context(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    b, n, d = unseen.sizes(rng, (3, 7), (4, 9), (5, 12))
    return rng.normal(size=(b, d)), rng.normal(size=(b, n, d))


def _unseen_margin(rng: np.random.Generator) -> tuple[tuple, dict]:
    q, k = _unseen_context(rng)
    return (q, k, rng.integers(0, k.shape[1], size=len(q))), {}


def _own_margin(q: np.ndarray, k: np.ndarray, answer: np.ndarray) -> np.ndarray:
    scores = np.einsum("bd,bjd->bj", q, k) / np.sqrt(k.shape[-1])
    return np.array([scores[i, answer[i]] - np.delete(scores[i], answer[i]).max() for i in range(len(q))])


def _unseen_task(rng: np.random.Generator) -> tuple[tuple, dict]:
    task = _task(int(rng.integers(2**31)), int(rng.integers(5, 10)), 16, float(rng.uniform(1.5, 4.0)), noise=0.5)
    return (task, float(rng.uniform(0.1, 0.8))), {}


def _own_curve(task: dict, slope: float) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(1, task["n_pairs"] + 1), _curve_from(_weights(task["queries"], task["keys"], slope), task)


def _unseen_match(rng: np.random.Generator, weight: bool = False) -> tuple[tuple, dict]:
    d, first, second = unseen.sizes(rng, (6, 12), (3, 7), (5, 11), avoid=(N_SYMBOLS,))
    embedding = rng.normal(size=(N_SYMBOLS, d))
    task = _match_task([int(rng.integers(2**31))], first, second)
    positions = bool(rng.integers(2))
    if not weight:
        return (embedding, task, positions), {}
    return (rng.normal(size=(d, d)), embedding, task, positions, float(rng.uniform(0.0, 0.6))), {}


def _unseen_scores(rng: np.random.Generator) -> tuple[tuple, dict]:
    embedding, task, positions = _unseen_match(rng)[0]
    return (rng.normal(size=(embedding.shape[1],) * 2), *_match_inputs(embedding, task, positions),
            float(rng.uniform(0.0, 0.6))), {}


unseen.register("distance", {
    "distance_penalty": unseen.Twin(lambda rng: ((int(rng.integers(2, 40)), float(rng.uniform(0.05, 1.0))), {}),
                                    lambda n, slope: -slope * (n - np.arange(n)), PENALTY, unseen.close,
                                    moves.scaled_numbers),
    "recall_weights": unseen.Twin(lambda rng: ((*_unseen_context(rng), float(rng.uniform(0.0, 1.0))), {}), _weights,
                                  WEIGHTS, unseen.close),
    "score_margin": unseen.Twin(_unseen_margin, _own_margin, MARGIN, unseen.close),
    "critical_distance": unseen.Twin(lambda rng: ((float(rng.uniform(0.5, 6.0)), float(rng.uniform(0.05, 1.0))), {}),
                                     lambda margin, slope: 1.0 + margin / slope if slope else float("inf"), CRITICAL,
                                     unseen.close,
                                     moves.scaled_numbers),
    "recall_curve": unseen.Twin(_unseen_task, _own_curve, CURVE, unseen.close),
    "match_inputs": unseen.Twin(_unseen_match, _match_inputs, INPUTS, unseen.close),
    "match_scores": unseen.Twin(_unseen_scores, _match_scores, SCORES, unseen.close),
    "length_accuracy": unseen.Twin(lambda rng: _unseen_match(rng, weight=True), _accuracy, LENGTH, unseen.close),
})
