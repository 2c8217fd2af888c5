"""Exercise 3: scaled dot-product attention. Scores, weights, context, scaling, then masks."""

from __future__ import annotations

import warnings

import numpy as np

from tests import unseen
from tests.conventions import ADDED_FILL, FINITE_FILL, VALUE_SCALE
from tests.failures import recorded_so_far
from tests.feedback import (
    call_expecting_no_warning,
    call_or_explain,
    expect,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_equal,
    expect_no_nan,
    expect_raises_value_error,
    expect_shape,
    fail_now,
    nan_idea,
)
from tests.kinds import remembered
from tests.probes import expect_probe, probe
from tests.steps import names

SCORES = ("scores[..., i, j] = q[..., i, :] . k[..., j, :] / sqrt(d_k): q @ k^T, transposing only the last "
          "two axes of k")
BATCHED = ("swap only the last two axes of k: np.swapaxes(k, -1, -2). k.T (or np.transpose(k)) reverses "
           "every axis of a batched array, and q @ k without a transpose fits only when n_k == d_k")
NP_DOT = ("np.dot of arrays with batch axes pairs every batch of the first with every batch of the second "
          "(shape (..., n, ..., m)), where @ (np.matmul) pairs them one to one: use @")
WEIGHTS = "weights = softmax(scores) over the key axis (the last one): each query's weights sum to 1"
SHAPES = ("follow the shapes: q (..., n_q, d_k) @ k^T (..., d_k, n_k) gives the weights (..., n_q, n_k), "
          "and weights @ v (..., n_k, d_v) gives the context (..., n_q, d_v); k^T is np.swapaxes(k, -1, -2), "
          "not k.T, which reverses every axis of a batched array")
CONTEXT = "context = weights @ v: each output row is the weighted average of the value rows"
SCALE = ("divide by sqrt(d_k): a dot product of d_k unit-variance terms has variance d_k, and the square "
         "root brings it back to about 1")
MASK = ("a boolean mask is True where the query may attend; blocked scores become -inf BEFORE the softmax, "
        "so they get weight 0 and the other weights still sum to 1")
ADDITIVE = ("a float mask is added to the scaled scores before the softmax, softmax(q k^T / sqrt(d_k) + M): M itself "
            "is not scaled (0 keeps a key, -inf blocks it)")
FULLY_MASKED = ("a query with every key blocked has an all -inf row of scores: softmax gives zeros (not "
                "NaN), and -inf, unlike a large finite fill such as -1e9, leaves no uniform weights behind")
NO_WARNING = (FULLY_MASKED + "; and nothing warns on the way: a blocked key's score is set to -inf where the mask is "
              "False (np.where), not computed from the mask (np.log of a boolean mask divides by zero), and softmax "
              "shifts an all -inf row by 0, not by its maximum -inf")

# Sizes that all differ, so a swapped axis cannot hide: batch, heads, n_q, n_k, d_k, d_v.
B, H, NQ, NK, DK, DV = 2, 3, 5, 7, 4, 6


def _qkv(seed: int, batch: tuple[int, ...] = (B, H), n_q: int = NQ, n_k: int = NK, d_k: int = DK,
         d_v: int = DV) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=batch + (n_q, d_k)), rng.normal(size=batch + (n_k, d_k)),
            rng.normal(size=batch + (n_k, d_v)))


def _raw_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Every query dotted with every key, written index by index (no transpose to get wrong)."""
    return np.einsum("...id,...jd->...ij", q, k)


def _softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def _dot_shape(a: np.ndarray, b_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``np.dot(a, b)`` gives where it differs from ``a @ b`` (batch axes), else None."""
    if a.ndim <= 2 and len(b_shape) <= 2:
        return None
    return (*a.shape[:-1], *b_shape[:-2], b_shape[-1])


def _dot_idea(observed: object, a: np.ndarray, b_shape: tuple[int, ...], idea: str) -> str:
    """``idea``, led by :data:`NP_DOT` when ``observed`` has the shape np.dot gives for ``a`` and ``b``."""
    return _idea(NP_DOT if np.shape(observed) == _dot_shape(a, b_shape) else None, idea)


def _score_candidates(q: np.ndarray, k: np.ndarray, v: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The classic scoring mistakes and the scores each gives (np.dot's last: without batch axes it is @)."""
    raw, (n_q, d_k), n_k = _raw_scores(q, k), q.shape[-2:], k.shape[-2]
    candidates = {
        "the scores are not divided by sqrt(d_k)": raw,
        "the scores are divided by d_k instead of sqrt(d_k)": raw / d_k,
        "the scores are divided by sqrt(n_k), the number of keys, not sqrt(d_k)": raw / np.sqrt(n_k),
        "the scores are divided by sqrt(n_q), the number of queries, not sqrt(d_k)": raw / np.sqrt(n_q),
    }
    if v is not None:
        candidates[f"the scores are divided by sqrt(d_v), the size of a value, not sqrt(d_k); {VALUE_SCALE}"] = (
            raw / np.sqrt(v.shape[-1]))
    if n_k == d_k:
        candidates["k is not transposed: q @ k instead of q @ k^T"] = q @ k / np.sqrt(d_k)
    candidates[NP_DOT] = np.dot(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    return candidates


def _score_mistakes(observed: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray | None = None,
                    then=lambda scores: scores) -> set[str]:
    """Every classic scoring mistake whose scores reproduce ``observed`` (a right result among them: np.dot's)."""
    return {mistake for mistake, scores in _score_candidates(q, k, v).items()
            if np.shape(observed) == then(scores).shape and np.allclose(observed, then(scores))}


def _score_mistake(observed: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray | None = None,
                   then=lambda scores: scores) -> str | None:
    """Name the classic scoring mistake that reproduces ``observed``, if one does (np.dot only with batch axes)."""
    for mistake, scores in _score_candidates(q, k, v).items():
        if mistake == NP_DOT and _dot_shape(q, (*k.shape[:-2], k.shape[-1], k.shape[-2])) is None:
            continue  # np.dot is @ here: it explains nothing a correct result does not
        expected = then(scores)
        if np.shape(observed) == expected.shape and np.allclose(observed, expected):
            return mistake
    return None


def _row_of(value: object, row: int) -> np.ndarray:
    """Bool, ``value``'s shape: True on row ``row`` (axis -2), the entries of a query whose keys are all blocked."""
    blocked = np.zeros(np.shape(value), dtype=bool)
    if blocked.ndim >= 2 and blocked.shape[-2] > row:
        blocked[..., row, :] = True
    return blocked


def _idea(mistake: str | None, idea: str) -> str:
    return f"{mistake}; {idea}" if mistake else idea


def _attention(impl, *args, what: str, idea: str, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """scaled_dot_product_attention, checked to return a (context, weights) pair."""
    __tracebackhide__ = True
    result = call_or_explain(impl.scaled_dot_product_attention, *args, what=what, idea=idea, **kwargs)
    if not (isinstance(result, tuple) and len(result) == 2):
        fail_now(what=what, expected="a tuple (context, weights)", observed=type(result).__name__,
                 idea=f"{CONTEXT}; return both, context first")
    return result


# ----------------------------------------------------------------------------- scores


def test_scores_shape_with_batch_axes(impl):
    q, k, _ = _qkv(30)
    what = f"attention_scores(q, k) with q {q.shape} and k {k.shape} (batch, heads, n_q or n_k, d_k)"
    scores = call_or_explain(impl.attention_scores, q, k, what=what, idea=BATCHED)
    expect_dtype(scores, np.float64, what=what, idea=SCORES)
    expect_equal(np.shape(scores), (B, H, NQ, NK), what=f"the shape of {what}",
                 idea=_dot_idea(scores, q, (*k.shape[:-2], k.shape[-1], k.shape[-2]),
                                "one score per (query, key) pair: (..., n_q, d_k), (..., n_k, d_k) -> (..., n_q, n_k)"))


def test_scores_match_the_formula(impl):
    cases = []
    # d_k 8 unbatched (a d_k whose square root is not a whole number: math.isqrt(d_k) passed on 4 alone, a blind
    # round), 4 batched.
    for q, k, _ in (_qkv(31, batch=(), d_k=8), _qkv(32)):
        what = f"attention_scores(q, k) with q {q.shape} and k {k.shape}"
        cases.append((what, q, k, call_or_explain(impl.attention_scores, q, k, what=what, idea=BATCHED)))
    # A mistake is named only where it explains both inputs: a d_k read off k.shape[0] is the number of keys on the
    # one without batch axes alone (a blind round was told "sqrt(n_k)" there, and the batched scores are off too).
    named = set.intersection(*(_score_mistakes(scores, q, k) for _, q, k, scores in cases))
    mistake = named.pop() if len(named) == 1 else None
    for what, q, k, scores in cases:
        expect_close(scores, _raw_scores(q, k) / np.sqrt(q.shape[-1]), what=what, idea=_idea(mistake, SCORES))


def test_scores_transpose_k_even_when_shapes_fit(impl):
    # With n_k == d_k, q @ k runs without error and gives an array of the right shape.
    q, k, _ = _qkv(33, batch=(), n_q=3, n_k=4, d_k=4)
    scores = call_or_explain(impl.attention_scores, q, k, what="attention_scores(q, k) with q (3, 4) and k (4, 4)",
                   idea=SCORES)
    mistake = _score_mistake(scores, q, k)
    expect_close(scores, _raw_scores(q, k) / 2.0, what="attention_scores(q, k), q (3, 4), square k (4, 4)",
                 idea=_idea(mistake, "query i meets key j, the j-th ROW of k: " + SCORES))


def test_scores_keep_float32(impl):
    q, k, _ = (a.astype(np.float32) for a in _qkv(34))
    expect_dtype(impl.attention_scores(q, k), np.float32, what="attention_scores of float32 q and k",
                 idea="dtype in = dtype out: in numpy 2 a numpy float64 scalar such as np.sqrt(d_k) turns "
                      "float32 into float64; divide by math.sqrt(d_k) (a Python float) instead")


# ----------------------------------------------------------------------------- attention


def test_attention_shapes(impl):
    q, k, v = _qkv(35)
    what = f"scaled_dot_product_attention(q, k, v) with q {q.shape}, k {k.shape}, v {v.shape}"
    context, weights = _attention(impl, q, k, v, what=what, idea=SHAPES)
    swapped = np.shape(context) == (B, H, NQ, NK) and np.shape(weights) == (B, H, NQ, DV)
    idea = "the result is (context, weights), in that order" if swapped else CONTEXT
    expect_equal(np.shape(context), (B, H, NQ, DV), what=f"the shape of the context of {what}",
                 idea=_dot_idea(context, np.empty((B, H, NQ, NK)), v.shape,
                                "one output row per query, as wide as a value: (..., n_q, d_v); " + idea))
    expect_equal(np.shape(weights), (B, H, NQ, NK), what=f"the shape of the weights of {what}",
                 idea="one weight per (query, key) pair: (..., n_q, n_k); " + idea)


def test_weights_rows_sum_to_one(impl):
    q, k, v = _qkv(36)
    _, weights = impl.scaled_dot_product_attention(q, k, v)
    if not expect_equal(np.shape(weights), (B, H, NQ, NK), what="the shape of the weights", idea=WEIGHTS):
        return
    columns = np.allclose(weights.sum(axis=-2), 1.0)
    expect_close(weights.sum(axis=-1), np.ones((B, H, NQ)), what="each row of weights (one query) sums to 1",
                 idea=_idea("the columns sum to 1: the softmax ran over the query axis" if columns else None,
                            WEIGHTS))
    expect(bool(np.all((weights >= 0) & (weights <= 1))), what="attention weights lie in [0, 1]",
           expected="every weight between 0 and 1", idea=WEIGHTS,
           observed=f"from {weights.min():.4g} to {weights.max():.4g}")
    # The contrast: the weights of other queries (a fixed answer of the right shape) sum to 1 and lie in [0, 1] too.
    expect_differs(impl.scaled_dot_product_attention(2 * q, k, v)[1], weights,
                   what="the weights of the queries doubled (q -> 2 q) against those of q",
                   expected="different weights: doubling the queries doubles the scores, and the softmax sharpens",
                   passed="rows of weights sum to 1 and lie in [0, 1]", idea=WEIGHTS)


def test_softmax_over_the_key_axis(impl):
    # Then one query alone (generation asks one at a time; a blind round's code special-cased it and no test saw).
    for q, k, v in (_qkv(37), _qkv(71, n_q=1)):
        _, weights = impl.scaled_dot_product_attention(q, k, v)
        scores = _raw_scores(q, k) / np.sqrt(DK)
        mistake = _score_mistake(weights, q, k, v, then=_softmax)
        if mistake is None and q.shape[-2] > 1 and np.allclose(weights, _softmax(scores, axis=-2)):
            mistake = "the softmax ran over the query axis (axis=-2): each key's column sums to 1"
        expect_close(weights, _softmax(scores, axis=-1), idea=_idea(mistake, WEIGHTS),
                     what=f"attention weights = softmax(q k^T / sqrt(d_k), axis=-1), q {q.shape}, k {k.shape}")


def test_context_is_weights_times_values(impl):
    # Batched with n_q != n_k, then one square self-attention case where weights^T @ v would not crash.
    for q, k, v in (_qkv(38), _qkv(39, batch=(), n_q=6, n_k=6)):
        context, weights = _attention(impl, q, k, v, what=f"scaled_dot_product_attention with q {q.shape}",
                                      idea=CONTEXT)
        if np.shape(weights) != q.shape[:-1] + (k.shape[-2],):
            continue  # the shape test reports this
        expected = np.einsum("...ij,...jd->...id", weights, v)
        square = q.shape[-2] == k.shape[-2]
        transposed = square and np.allclose(context, np.einsum("...ji,...jd->...id", weights, v))
        mistake = "the weights are transposed: row i mixed values with key i's column" if transposed else None
        expect_close(context, expected, what=f"context of q {q.shape}: row i is sum_j weights[i, j] * v[j]",
                     idea=_idea(mistake, CONTEXT))
    # The contrast: the values reach the context (zero weights and a zero context agree above, computing nothing).
    q, k, v = _qkv(38)
    doubled = _attention(impl, q, k, 2 * v, what=f"scaled_dot_product_attention with q {q.shape}, v doubled",
                         idea=CONTEXT)
    expect_differs(doubled, _attention(impl, q, k, v, what=f"scaled_dot_product_attention with q {q.shape}",
                                       idea=CONTEXT),
                   what=f"(context, weights) of q {q.shape} with every value doubled (v -> 2 v)",
                   expected="a different context (twice the first): each row is a weighted average of the values",
                   passed="the context is the weights times the values", idea=CONTEXT)


def test_attention_keeps_float32(impl):
    q, k, v = (a.astype(np.float32) for a in _qkv(40))
    mask = np.random.default_rng(40).random((NQ, NK)) < 0.7
    for kwargs in ({}, {"mask": mask}):
        context, weights = impl.scaled_dot_product_attention(q, k, v, **kwargs)
        label = "with a boolean mask" if kwargs else "without a mask"
        for name, value in (("context", context), ("weights", weights)):
            expect_dtype(value, np.float32, what=f"the {name} of float32 q, k, v {label}",
                         idea="dtype in = dtype out: no numpy float64 scalars (np.sqrt(d_k)) or arrays")


# ----------------------------------------------------------------------------- scaling


@remembered  # seeded: drawn once per process
def _unit_qk(d_k: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 + d_k)
    return rng.standard_normal((64, d_k)), rng.standard_normal((64, d_k))


def test_scaled_scores_keep_unit_variance(impl):
    dims = (4, 16, 64, 256, 1024)
    variances = [float(np.var(impl.attention_scores(*_unit_qk(d_k)))) for d_k in dims]
    grows = variances[-1] > 10 * variances[0]
    shrinks = variances[-1] < variances[0] / 10
    mistake = ("the variance grows with d_k: the scores are not divided by sqrt(d_k)" if grows else
               "the variance shrinks as d_k grows: the scores are divided by d_k, not sqrt(d_k)" if shrinks
               else None)
    expect(all(0.6 < var < 1.6 for var in variances),
           what="variance of attention_scores(q, k) for 64 queries and 64 keys with unit-variance entries",
           expected=f"about 1 (between 0.6 and 1.6) for every d_k in {dims}",
           observed=", ".join(f"d_k={d}: {var:.3g}" for d, var in zip(dims, variances, strict=True)),
           idea=_idea(mistake, SCALE))
    # The contrast: seeded unit-variance numbers, or the scores of other q and k, have that variance too.
    q, k = _unit_qk(dims[0])
    expect_differs(impl.attention_scores(2 * q, k), impl.attention_scores(q, k),
                   what=f"attention_scores of the queries doubled (q -> 2 q) against those of q, d_k={dims[0]}",
                   expected="different scores (twice the first): each score is a dot product of a query and a key",
                   passed="the scores' variance stays about 1", idea=SCALE)
    # ... and on the keys (the queries given back, the first argument, have that variance as well).
    expect_differs(impl.attention_scores(q, 2 * k), impl.attention_scores(q, k),
                   what=f"attention_scores of the keys doubled (k -> 2 k) against those of k, d_k={dims[0]}",
                   expected="different scores (twice the first): each score is a dot product of a query and a key",
                   passed="the scores' variance stays about 1", idea=SCALE)
    # Different is not enough: unit-variance numbers seeded by the inputs differ too (a hostile round's). Twice
    # the queries or the keys, twice every score, whatever the scale (a scale's mistake is the check above's).
    for doubled, argument in ((impl.attention_scores(2 * q, k), "queries"), (impl.attention_scores(q, 2 * k), "keys")):
        if recorded_so_far():
            break
        expect_close(doubled, 2 * np.asarray(impl.attention_scores(q, k), dtype=float), idea=SCALE,
                     what=f"attention_scores with the {argument} doubled against twice those of q and k, d_k={dims[0]}")


def _entropy(weights: np.ndarray) -> float:
    logs = np.log(np.where(weights > 0, weights, 1.0))
    return float(-(weights * logs).sum(axis=-1).mean())


def test_attention_entropy_does_not_collapse(impl):
    # Unit-variance scores over 64 keys give a mean row entropy near log(64) - 0.5 = 3.66;
    # unscaled ones collapse to one key (entropy near 0), over-scaled ones flatten to log(64) = 4.16.
    dims, n_k = (16, 64, 256, 1024), 64
    low, high = np.log(n_k) - 1.2, np.log(n_k) - 0.2
    entropies = []
    for d_k in dims:
        q, k = _unit_qk(d_k)
        v = np.random.default_rng(d_k).normal(size=(n_k, 8))
        _, weights = impl.scaled_dot_product_attention(q, k, v)
        entropies.append(_entropy(weights))
    mistake = ("attention collapses onto single keys as d_k grows: are the scores divided by sqrt(d_k)?"
               if entropies[-1] < low else
               "attention is nearly uniform: the scores are divided by too much (d_k instead of sqrt(d_k)?)"
               if entropies[-1] > high else None)
    expect(all(low < h < high for h in entropies),
           what="mean entropy of each query's attention weights, 64 keys, unit-variance q and k",
           expected=f"between {low:.2f} and {high:.2f} (uniform: {np.log(n_k):.2f}) for every d_k in {dims}",
           observed=", ".join(f"d_k={d}: {h:.3g}" for d, h in zip(dims, entropies, strict=True)),
           idea=_idea(mistake, SCALE))
    q, k = _unit_qk(dims[0])
    v = np.random.default_rng(dims[0]).normal(size=(n_k, 8))
    sharper, weights = (impl.scaled_dot_product_attention(scale * q, k, v)[1] for scale in (2, 1))
    expect_differs(sharper, weights,
                   what=f"the weights of the queries doubled (q -> 2 q) against those of q, d_k={dims[0]}",
                   expected="different weights: doubling the queries doubles the scores, and the softmax sharpens",
                   passed="the weights' entropy stays in its range", idea=SCALE)
    # ... by exactly as much: softmax(2 s) is w**2 renormalised, for w = softmax(s) (scores seeded by the inputs
    # differ too, and have that entropy: a hostile round's).
    if not recorded_so_far() and np.shape(weights) == np.shape(sharper) == (64, n_k):
        squared = np.asarray(weights, dtype=float) ** 2
        expect_close(sharper, squared / squared.sum(axis=-1, keepdims=True), idea=SCALE,
                     what=f"the weights of the queries doubled against those of q squared and renormalised "
                          f"(softmax(2 s) = w**2 / sum(w**2)), d_k={dims[0]}")


# ------------------------------------------------ the reading's example (docs/reading.md#worked-example)



# The names of the result arrays, for a diagnosis that points at the ones that differ (tests/steps.py).
names("scaled_dot_product_attention", "context", "weights")

@probe("scaled_dot_product_attention")
def reading_example():
    rng = np.random.default_rng(42)
    x = rng.normal(size=(8, 16))  # tokens: the vessel changed course because it detected obstacle
    w_q, w_k, w_v = (rng.normal(scale=1 / np.sqrt(16), size=(16, 8)) for _ in range(3))
    return (x @ w_q, x @ w_k, x @ w_v), {}


def test_the_reading_example(impl):
    args, kwargs = reading_example()
    context, weights = impl.scaled_dot_product_attention(*args, **kwargs)
    idea = "the reading's worked example (docs/reading.md#worked-example): 8 tokens, rng(42), d_model 16, d_k = d_v = 8"
    expect_equal(np.shape(weights), (8, 8), what="weights.shape of the worked example", idea=idea)
    expect_equal(np.shape(context), (8, 8), what="context.shape of the worked example", idea=idea)
    expect_equal(np.round(np.sum(weights, axis=1), 6), np.ones(8), what="row sums of the example's weights",
                 idea=WEIGHTS)
    mistake = _score_mistake(weights, *args, then=_softmax)
    expect_probe(impl, "scaled_dot_product_attention/reading_example", what="(context, weights), the example",
                 idea=_idea(mistake, SCORES + "; " + WEIGHTS))
    rng = np.random.default_rng(264)  # and inputs as large that are no probe's (no golden value holds the answer)
    q, k, v = (rng.normal(size=(8, 8)) for _ in range(3))
    want = _softmax(_raw_scores(q, k) / np.sqrt(8))
    fresh = impl.scaled_dot_product_attention(q, k, v)
    if expect(isinstance(fresh, tuple) and len(fresh) == 2, what="attention of (8, 8) seeded q, k, v (no probe)",
              expected="a tuple (context, weights)", observed=type(fresh).__name__, idea=SCORES):
        expect_close(fresh[1], want, what="the weights of attention on (8, 8) seeded q, k, v (no probe)",
                     idea=SCORES + "; " + WEIGHTS)
        expect_close(fresh[0], want @ v, what="the context of attention on (8, 8) seeded q, k, v (no probe)",
                     idea=WEIGHTS)


# ----------------------------------------------------------------------------- masks


def _blocked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return _softmax(np.where(mask, scores, -np.inf))


def test_masked_keys_get_zero_weight(impl):
    q, k, v = _qkv(50, batch=())
    mask = np.random.default_rng(50).random((NQ, NK)) < 0.6
    mask[np.arange(NQ), np.arange(NQ)] = True  # every query keeps at least one key
    _, weights = impl.scaled_dot_product_attention(q, k, v, mask=mask)
    if not expect_no_nan(weights, what="attention weights with a boolean mask", idea=MASK):
        return
    scores = _raw_scores(q, k) / np.sqrt(DK)
    inverted = np.allclose(weights[mask], 0.0) and not np.allclose(weights[~mask], 0.0)
    mistake = "allowed keys got weight 0, blocked ones kept theirs: inverted polarity" if inverted else None
    expect_close(weights[~mask], np.zeros(int((~mask).sum())), atol=0.0, rtol=0.0,
                 what="blocked keys (mask False) get weight exactly 0", idea=_idea(mistake, MASK))
    after = np.allclose(weights, _softmax(scores) * mask)
    mistake = "the mask was applied after the softmax, so rows do not sum to 1" if after else None
    expect_close(weights, _blocked_softmax(scores, mask), what="attention weights with a boolean mask",
                 idea=_idea(mistake, MASK))


def test_changing_a_blocked_key_changes_nothing(impl):
    q, k, v = _qkv(51, batch=())
    keep = np.array([True, False, True, True, False, True, False])  # one flag per key, shape (n_k,)
    context, weights = impl.scaled_dot_product_attention(q, k, v, mask=keep)
    k2, v2 = k.copy(), v.copy()
    noise = np.random.default_rng(51)
    k2[~keep] += noise.normal(scale=5.0, size=k2[~keep].shape)
    v2[~keep] += noise.normal(scale=100.0, size=v2[~keep].shape)
    context2, weights2 = impl.scaled_dot_product_attention(q, k2, v2, mask=keep)
    expect_close(weights2, weights, what="weights after changing the keys of blocked positions",
                 idea="a blocked key takes no part in the softmax: " + MASK)
    expect_close(context2, context, what="context after changing the keys and values of blocked positions",
                 idea="a blocked key's value gets weight 0, so nothing of it reaches the output: " + MASK)
    # A blocked key whose score is 1000 above every allowed one (a padding key aligned with the queries): a softmax
    # taken first and masked (and renormalised) after divides by the blocked key's share, and the allowed weights
    # underflow to 0 (a blind round: masking after the softmax, then renormalising, passed every test).
    q3, k3 = q.copy(), k.copy()
    q3[:, 0] = np.abs(q3[:, 0]) + 1.0  # every query leans along the first axis...
    k3[np.flatnonzero(~keep)[0]] = np.eye(DK)[0] * 1000.0 * np.sqrt(DK)  # ...and so scores this key 1000 or more
    _, weights = impl.scaled_dot_product_attention(q3, k, v, mask=keep)
    _, weights3 = impl.scaled_dot_product_attention(q3, k3, v, mask=keep)
    after = np.shape(weights3) == np.shape(weights) and np.allclose(weights3, 0.0)
    expect_close(weights3, weights, what="weights when a blocked key scores about 1000 or more above every allowed key",
                 idea=_idea("the allowed weights underflowed to 0: the softmax was taken before the blocked key was "
                            "taken out (masked after it, then renormalised)" if after else None, MASK))
    # The contrast: an allowed key does reach the output.
    v4 = v.copy()
    v4[keep] += noise.normal(scale=1.0, size=v4[keep].shape)
    expect_differs(impl.scaled_dot_product_attention(q, k, v4, mask=keep),
                   impl.scaled_dot_product_attention(q, k, v, mask=keep),
                   what="(context, weights) after changing the values of allowed positions",
                   expected="a different context: an allowed key's value has a positive weight, so it reaches the "
                            "output", passed="changing a blocked key changes nothing", idea=MASK)


def test_bool_and_additive_masks_agree(impl):
    q, k, v = _qkv(52)
    mask = np.random.default_rng(52).random((NQ, NK)) < 0.6
    mask[:, 0] = True
    additive = np.where(mask, 0.0, -np.inf)
    with_bool = impl.scaled_dot_product_attention(q, k, v, mask=mask)
    with_float = impl.scaled_dot_product_attention(q, k, v, mask=additive)
    for index, name in enumerate(("context", "weights")):
        expect_close(with_float[index], with_bool[index],
                     what=f"{name} with the additive mask np.where(mask, 0.0, -inf) against the boolean mask",
                     idea=ADDITIVE + ", so it blocks the same keys as the boolean mask")
    bias = np.random.default_rng(53).normal(scale=2.0, size=(NQ, NK))  # any float mask, e.g. a position bias
    _, weights = impl.scaled_dot_product_attention(q, k, v, mask=bias)
    expect_close(weights, _softmax(_raw_scores(q, k) / np.sqrt(DK) + bias), idea=ADDITIVE,
                 what="weights with a float mask M of arbitrary values: softmax(q k^T / sqrt(d_k) + M)")
    # A float mask of zeros and ones is added too, never read as allowed or blocked (a blind round's code that took
    # such a mask for a boolean one passed every test above, and blocked every key for to_additive of an all-True
    # mask: all zeros).
    # And a mask of one row, (n_k,), broadcast to every query as the docstring allows (a blind round's attention that
    # left out masks of fewer than two axes passed here, and exercise 13's penalty was blamed for it).
    for label, float_mask in (("np.zeros((n_q, n_k)): it adds nothing", np.zeros((NQ, NK))),
                              ("of zeros and ones", (np.random.default_rng(54).random((NQ, NK)) < 0.5) * 1.0),
                              ("of one row, (n_k,), for every query", np.random.default_rng(55).normal(size=NK))):
        _, weights = impl.scaled_dot_product_attention(q, k, v, mask=float_mask)
        expect_close(weights, _softmax(_raw_scores(q, k) / np.sqrt(DK) + float_mask),
                     what=f"weights with the float mask {label}: softmax(q k^T / sqrt(d_k) + M)",
                     idea=ADDITIVE + "; a float mask is added whatever its values, 0 and 1 too: only a boolean "
                                     "mask says which keys are allowed")


def test_fully_blocked_query_gives_zeros(impl):
    q, k, v = _qkv(54, batch=())
    mask = np.ones((NQ, NK), dtype=bool)
    mask[2] = False  # query 2 may attend to nothing
    mask[4, 3:] = False
    for label, m in (("boolean", mask), ("additive", np.where(mask, 0.0, -np.inf))):
        context, weights = call_expecting_no_warning(
            impl.scaled_dot_product_attention, q, k, v, mask=m, idea=NO_WARNING,
            what=f"attention with a fully blocked query ({label} mask) warns nothing")
        finite = [expect_no_nan(value, idea=nan_idea(value, _row_of(value, 2), FULLY_MASKED),
                                what=f"{name}, fully blocked query ({label} mask)")
                  for name, value in (("weights", weights), ("context", context))]
        if not all(finite):
            continue
        uniform = np.allclose(weights[2], 1 / NK)
        unmasked = np.allclose(weights[2], _softmax(q[2] @ k.T / np.sqrt(DK)))  # a finite fill added, not put
        said = f"the row is uniform: {FINITE_FILL}" if uniform else \
            f"the row is the query's unmasked weights: {ADDED_FILL}" if unmasked else None
        expect_close(weights[2], np.zeros(NK), atol=0.0, rtol=0.0,
                     what=f"weights of a query whose keys are all blocked ({label} mask)",
                     idea=_idea(said, FULLY_MASKED))
        expect_close(context[2], np.zeros(DV), atol=0.0, rtol=0.0, idea=FULLY_MASKED,
                     what=f"context of a query whose keys are all blocked ({label} mask)")
        expect_close(weights[[0, 1, 3, 4]].sum(axis=-1), np.ones(4), idea=MASK,
                     what=f"the other queries' weights still sum to 1 ({label} mask)")


def test_masks_broadcast(impl):
    q, k, v = _qkv(55)
    mask = np.random.default_rng(55).random((NQ, NK)) < 0.6
    mask[:, 1] = True
    idea = ("a mask broadcasts against the scores (..., n_q, n_k), as numpy arrays do: "
            "np.where(mask, scores, -inf) broadcasts, boolean indexing (scores[~mask]) needs the full shape")
    shared = _attention(impl, q, k, v, mask=mask, idea=idea,
                        what=f"attention, q {q.shape}, with one ({NQ}, {NK}) mask for every batch and head")
    weights = _blocked_softmax(_raw_scores(q, k) / np.sqrt(DK), mask)
    for index, (name, expected) in enumerate((("context", weights @ v), ("weights", weights))):
        expect_close(shared[index], expected, idea=idea,
                     what=f"{name} of q {q.shape} with a ({NQ}, {NK}) mask shared by every batch and head")
    # Padding style: one row of flags per sequence, shape (batch, 1, n_k), shared by every query.
    q, k, v = _qkv(56, batch=(B,))
    padding = (np.arange(NK) < np.array([NK, 3])[:, None])[:, None, :]
    _, weights = _attention(impl, q, k, v, mask=padding, idea=idea,
                            what=f"attention over q {q.shape} with a padding mask of shape {padding.shape}")
    expect_close(weights, _blocked_softmax(_raw_scores(q, k) / np.sqrt(DK), padding), idea=idea,
                 what=f"weights with a ({B}, 1, {NK}) padding mask: sequence 1 has only 3 real tokens")


def test_causal_prefix_invariance(impl):
    n, t = 6, 3
    q, k, v = _qkv(57, batch=(B,), n_q=n, n_k=n)
    causal = np.tril(np.ones((n, n), dtype=bool))
    context, weights = impl.scaled_dot_product_attention(q, k, v, mask=causal)
    rng = np.random.default_rng(57)
    changed = [a.copy() for a in (q, k, v)]
    for a in changed:
        a[:, t] += rng.normal(scale=3.0, size=a[:, t].shape)
    context2, weights2 = impl.scaled_dot_product_attention(*changed, mask=causal)
    idea = ("with a causal mask (np.tril) position i sees keys 0..i only, so changing token t cannot change "
            "any position before t; " + MASK)
    expect_close(weights2[:, :t], weights[:, :t], idea=idea,
                 what=f"causal attention: weights of positions 0..{t - 1} after changing token {t}")
    expect_close(context2[:, :t], context[:, :t], idea=idea,
                 what=f"causal attention: context of positions 0..{t - 1} after changing token {t}")
    if expect_differs(context[:, t:], context2[:, t:], idea=idea + "; position t and every later one sees token t",
                      what=f"causal attention: context of positions {t}..{n - 1} after changing token {t}",
                      expected="a different context (token t is allowed for position t and every later one)",
                      passed="positions before t change nothing"):
        # The contrast: any two arrays whose first columns are q's (q transposed, unpacked along its batch axis)
        # keep the first positions too.
        expect_shape(weights, (B, n, n), what="the weights of causal self-attention of 6 tokens, batch of 2",
                     idea=idea)
        expect_shape(context, v.shape, what="the context of causal self-attention of 6 tokens, batch of 2",
                     idea=idea)


def test_padding_invariance(impl):
    n, lengths = 6, np.array([6, 4, 2])
    q, k, v = _qkv(58, batch=(3,), n_q=n, n_k=n)
    padding = (np.arange(n) < lengths[:, None])[:, None, :]  # (batch, 1, n_k)
    context, weights = impl.scaled_dot_product_attention(q, k, v, mask=padding)
    rng = np.random.default_rng(58)
    pad = ~padding[:, 0, :]
    k2, v2 = k.copy(), v.copy()
    k2[pad] = rng.normal(scale=10.0, size=k2[pad].shape)
    v2[pad] = rng.normal(scale=10.0, size=v2[pad].shape)
    context2, weights2 = impl.scaled_dot_product_attention(q, k2, v2, mask=padding)
    idea = "padding positions are blocked keys: what they hold must not reach any output; " + MASK
    expect_close(weights2, weights, idea=idea,
                 what="weights after refilling the padded keys of sequences of lengths 6, 4, 2")
    expect_close(context2, context, idea=idea,
                 what="context after refilling the padded keys and values of sequences of lengths 6, 4, 2")
    # The contrast: a real token's value does reach the output (position 0 is real in every sequence).
    v3 = v.copy()
    v3[:, 0] += rng.normal(size=v3[:, 0].shape)
    expect_differs(impl.scaled_dot_product_attention(q, k, v3, mask=padding), (context, weights),
                   what="(context, weights) after changing the value of token 0, a real one in every sequence",
                   expected="a different context: a real key is allowed, so its value reaches the outputs",
                   passed="refilling the padding changes nothing", idea=MASK)


def test_permutation_equivariance(impl):
    n = 6
    q, k, v = _qkv(59, batch=(B,), n_q=n, n_k=n)
    order = np.random.default_rng(59).permutation(n)
    context, weights = impl.scaled_dot_product_attention(q, k, v)
    context2, weights2 = impl.scaled_dot_product_attention(q[:, order], k[:, order], v[:, order])
    idea = ("attention compares contents, not positions: shuffling the tokens shuffles the outputs the same "
            "way (no position may enter the computation)")
    expect_close(context2, context[:, order], idea=idea,
                 what=f"context of the tokens shuffled by {order.tolist()}")
    expect_close(weights2, weights[:, order][:, :, order], idea=idea,
                 what=f"weights of the tokens shuffled by {order.tolist()} (rows and columns)")
    # The contrast: shuffled, each output row moved with its token (it is not the unshuffled output).
    expect_differs((context2, weights2), (context, weights),
                   what=f"(context, weights) of the tokens shuffled by {order.tolist()} vs. in order",
                   expected="a different context: each row follows its own token, so the rows move with the tokens",
                   passed="shuffling the tokens shuffles the outputs", idea=idea)


# ----------------------------------------------------------------------------- reference values


@probe("attention_scores")
def one_sequence_square_keys():
    # One sequence behind a batch axis, n_k == d_k: a transpose of every axis of k runs here too.
    q, k, _ = _qkv(61, batch=(1,), n_q=3, n_k=4, d_k=4)
    return (q, k), {}


@probe("attention_scores")
def batch_and_heads():
    # Two batch axes (batch, heads), as multi-head attention calls it: a transpose written for 2-D or 3-D shows.
    q, k, _ = _qkv(62)
    return (q, k), {}


@probe("scaled_dot_product_attention")
def one_query():
    return _qkv(72, n_q=1), {}


@probe("scaled_dot_product_attention")
def float32_no_mask():
    return tuple(a.astype(np.float32) for a in _qkv(62)), {}


@probe("scaled_dot_product_attention")
def bool_mask_with_a_blocked_query():
    q, k, v = _qkv(63)
    mask = np.random.default_rng(63).random((NQ, NK)) < 0.6
    mask[:, 0] = True
    mask[2] = False  # query 2 may attend to nothing
    return (q, k, v), {"mask": mask}


@probe("scaled_dot_product_attention")
def float_mask_with_minus_infinity():
    q, k, v = _qkv(64, batch=(B,))
    bias = np.random.default_rng(64).normal(scale=2.0, size=(B, NQ, NK))
    bias[:, :, [1, 4]] = -np.inf
    bias[1, 3] = -np.inf  # a fully blocked query in sequence 1
    bias[0, 0, 2] = 0.0
    return (q, k, v), {"mask": bias}


@probe("scaled_dot_product_attention")
def float_mask_of_one_row():
    q, k, v = _qkv(67)
    return (q, k, v), {"mask": np.random.default_rng(67).normal(size=NK)}  # (n_k,): the same bias for every query


@probe("scaled_dot_product_attention")
def float_mask_of_zeros_and_ones():
    q, k, v = _qkv(66)
    return (q, k, v), {"mask": (np.random.default_rng(66).random((NQ, NK)) < 0.5) * 1.0}  # added, not a gate


@probe("scaled_dot_product_attention")
def padding_mask_per_sequence():
    q, k, v = _qkv(65, batch=(B,))
    return (q, k, v), {"mask": (np.arange(NK) < np.array([NK, 3])[:, None])[:, None, :]}


@probe("scaled_dot_product_attention")
def mask_shaped_like_batch_and_heads():
    # batch (3, 7) == (n_q, n_k) on purpose: a mask indexed into the scores by hand lines up with
    # the batch axes here, where np.where broadcasts it over them.
    q, k, v = _qkv(66, batch=(3, NK), n_q=3)
    mask = np.random.default_rng(66).random((3, NK)) < 0.6
    mask[:, 0] = True
    return (q, k, v), {"mask": mask}


def test_reference_values_with_masks(impl):
    expect_probe(impl, "attention_scores/one_sequence_square_keys",
                 what="attention_scores(q, k) with q (1, 3, 4) and k (1, 4, 4)", idea=BATCHED)
    expect_probe(impl, "scaled_dot_product_attention/float32_no_mask",
                 what=f"(context, weights) of float32 q, k, v with batch ({B}, {H})", idea=SHAPES,
                 rtol=1e-5, atol=1e-6)
    cases = {
        "bool_mask_with_a_blocked_query": (f"a ({NQ}, {NK}) boolean mask in which query 2 sees no key",
                                           f"{MASK}; {FULLY_MASKED}"),
        "float_mask_with_minus_infinity": (f"a ({B}, {NQ}, {NK}) float mask of finite values and -inf",
                                           f"{ADDITIVE}; {FULLY_MASKED}"),
        "padding_mask_per_sequence": (f"a ({B}, 1, {NK}) padding mask, lengths {NK} and 3", MASK),
        "mask_shaped_like_batch_and_heads": (f"a (3, {NK}) mask and q of shape (3, {NK}, 3, {DK})",
                                             MASK + "; the mask lines up with the LAST two axes of the scores"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fully blocked query test reports them
        for name, (what, idea) in cases.items():
            expect_probe(impl, f"scaled_dot_product_attention/{name}", what=f"(context, weights) with {what}",
                         idea=idea)


# ----------------------------------------------------------------------------- bad input


@probe("attention_scores", rejects="q")
def keys_one_feature_wider():
    q, _, _ = _qkv(60, batch=())
    return (q, np.random.default_rng(60).normal(size=(NK, DK + 1))), {}


@probe("scaled_dot_product_attention", rejects="mask")
def mask_one_key_short():
    # One sequence, n_q == n_k == d_k: only the mask is wrong, so any other slip of the computation
    # still runs, and the ValueError (or its absence) is about the mask alone.
    return _qkv(67, batch=(1,), n_q=4, n_k=4, d_k=4), {"mask": np.ones((4, 3), dtype=bool)}


def test_rejects_bad_input(impl):
    q, k, v = _qkv(60, batch=())
    bad_k = np.random.default_rng(60).normal(size=(NK, DK + 1))
    idea = "bad input raises ValueError naming the argument and the shapes"
    expect_probe(impl, "attention_scores/keys_one_feature_wider",
                 what=f"attention_scores(q, k) with q {q.shape} and k {bad_k.shape}", idea=idea + ": q and k share d_k")
    expect_raises_value_error(lambda: impl.scaled_dot_product_attention(q, bad_k, v), argument="q",
                              what=f"scaled_dot_product_attention with q {q.shape} and k {bad_k.shape}",
                              idea=idea + ": q and k share d_k")
    expect_raises_value_error(lambda: impl.scaled_dot_product_attention(q, k, v[:-1]), argument="v",
                              what=f"scaled_dot_product_attention with k {k.shape} and v {v[:-1].shape}",
                              idea=idea + ": k and v have one row per key")
    expect_probe(impl, "scaled_dot_product_attention/mask_one_key_short",
                 what="scaled_dot_product_attention with q, k of shape (1, 4, 4): weights (1, 4, 4), mask (4, 3)",
                 idea=idea + ": the mask must broadcast to the weights' shape (..., n_q, n_k)")


# ----------------------------------------------------------------------------- every kind of input


@probe("scaled_dot_product_attention")
def float32_with_an_additive_float64_mask():
    q, k, v = (a.astype(np.float32) for a in _qkv(68, batch=(B,)))
    bias = np.random.default_rng(68).normal(size=(NQ, NK))
    bias[:, 3] = -np.inf
    return (q, k, v), {"mask": bias}


def test_float32_through_every_kind_of_mask(impl):
    q, k, v = (a.astype(np.float32) for a in _qkv(69, batch=(B,)))
    keep = np.random.default_rng(69).random((NQ, NK)) < 0.6
    keep[:, 0] = True
    bias = np.random.default_rng(70).normal(size=(NQ, NK))
    masks = {
        "a boolean mask": keep,
        "a float64 additive mask": np.where(keep, bias, -np.inf),
        "a float32 additive mask": np.where(keep, bias, -np.inf).astype(np.float32),
        f"a ({B}, 1, {NK}) boolean padding mask": (np.arange(NK) < np.array([NK, 3])[:, None])[:, None, :],
    }
    idea = ("dtype in = dtype out on every path: cast a float mask to the scores' dtype before adding it "
            "(a float64 mask turns float32 scores into float64), and use no float64 constants")
    for label, mask in masks.items():
        context, weights = _attention(impl, q, k, v, mask=mask, idea=idea,
                                      what=f"attention of float32 q, k, v with {label}")
        scores = _raw_scores(*(a.astype(np.float64) for a in (q, k))) / np.sqrt(DK)
        expected = (_blocked_softmax(scores, mask) if mask.dtype == np.bool_
                    else _softmax(scores + mask.astype(np.float64)))
        for name, value in (("context", context), ("weights", weights)):
            expect_dtype(value, np.float32, what=f"the {name} of float32 q, k, v with {label}", idea=idea)
        expect_close(weights, expected, rtol=1e-4, atol=1e-6, idea=MASK + "; " + ADDITIVE,
                     what=f"the weights of float32 q, k, v with {label}")
    expect_probe(impl, "scaled_dot_product_attention/float32_with_an_additive_float64_mask", idea=idea,
                 what="(context, weights) of float32 q, k, v with a float64 additive mask", rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_qkv(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    batch, n_q, n_k, d_k, d_v = unseen.sizes(rng, *[(2, 9)] * 5)
    return (rng.normal(size=(batch, n_q, d_k)), rng.normal(size=(batch, n_k, d_k)),
            rng.normal(size=(batch, n_k, d_v)))


def _unseen_attention(rng: np.random.Generator) -> tuple[tuple, dict]:
    q, k, v = _unseen_qkv(rng)
    mask = rng.random((q.shape[-2], k.shape[-2])) < 0.7
    mask[:, 0] = True  # no query without a key: every row's weights sum to 1
    return (q, k, v), {"mask": mask}


def _own_attention(q, k, v, mask=None):
    """The file's own attention, for any call the API allows: no mask, a boolean one or an additive one (0 / -inf).

    A row with every key blocked gets zero weights, as the docstring says (the gate takes a call's answer as
    evidence only where this file answers it).
    """
    scores = _raw_scores(q, k) / np.sqrt(q.shape[-1])
    keep = np.ones(scores.shape, dtype=bool)
    given = None if mask is None else np.array(mask)
    if given is not None:  # boolean: kept where True; additive: added to the scores, -inf blocking
        shape = np.broadcast_shapes(scores.shape, given.shape)
        additive = given.dtype != bool
        keep = np.broadcast_to(~np.isneginf(given) if additive else given, shape)
        scores = np.broadcast_to(scores + given if additive else scores, shape)
    blocked = np.where(keep, scores, -np.inf)
    top = blocked.max(axis=-1, keepdims=True)
    exp = np.where(keep, np.exp(blocked - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = exp.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, exp / np.where(total > 0, total, 1.0), 0.0)
    return weights @ v, weights


unseen.register("attention", {
    "attention_scores": unseen.Twin(lambda rng: (_unseen_qkv(rng)[:2], {}),
                                    lambda q, k: _raw_scores(q, k) / np.sqrt(q.shape[-1]), SCORES, unseen.close),
    "scaled_dot_product_attention": unseen.Twin(_unseen_attention, _own_attention, MASK, unseen.close),
})
