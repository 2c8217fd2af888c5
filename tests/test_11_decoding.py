"""Exercise 11: attention at generation time. The KV cache, one step, causal decoding, then blockwise attention."""

from __future__ import annotations

import inspect

import numpy as np

from tests import unseen
from tests.decoded import MADE_BY
from tests.effort import message, once, submission_salt
from tests.failures import fail_check
from tests.feedback import (
    call_expecting_no_warning,
    call_or_explain,
    expect,
    expect_close,
    expect_dtype,
    expect_equal,
    expect_no_nan,
    expect_raises_value_error,
    expect_shape,
)
from tests.kinds import remembered
from tests.probes import expect_probe, probe
from tests.steps import names

READING = "docs/reading.md#generation"
CACHE = ("the cache grows along the position axis, the second-to-last one (axis=-2), whatever batch and head "
         "axes come first: (..., t, d) + (..., 1, d) -> (..., t + 1, d), the old positions first")
NEW_CACHE = ("return a new dict holding new arrays; the caller's cache must keep its t positions (a caller may "
             "keep it, e.g. to try two continuations)")
STEP = ("one step is one row of scaled dot-product attention: softmax(q_t K^T / sqrt(d_k)) V over every cached "
        "position (the cache holds only the past and the present, so nothing is masked)")
DECODE = (f"generating token by token gives exactly causal attention ({READING}): append position t's key and "
          "value to the cache, then let query t attend over the cache")
ONLINE = ("online softmax: per query keep a running maximum m (from -inf), a running sum l and a running weighted "
          "sum of values; when a block raises m, multiply l and the weighted sum by exp(m_old - m_new) before adding "
          "the block's own terms; at the end divide by l")
PARTIAL = "the last block holds whatever keys are left: range(0, n_k, block_size), with the end clipped at n_k"
OFFSET = ("under the causal mask query i sees the keys at positions 0..i, itself included (key <= query); key j of "
          "a block starting at `start` is at position start + j of the sequence: compare that with the query's "
          "position, not the index inside the block")
OVERFLOW = ("scores near 1e4 overflow np.exp unless each query's running maximum is subtracted first; a finite "
            "starting maximum (0, -5e4, -1e9: any finite number) makes every exp of a row whose scores all lie far "
            "below it underflow to 0, so start it at -inf")
FINITE_START = ("a running maximum that starts at a finite number (-1e9, -1e30 ...) lies above every score of a row "
                "whose scores are all below it: every exp underflows to 0 and the row is lost (zeros, or NaN from "
                "0 / 0); start it at -inf, the one start below every score")
HUGE_OFFSET = ("exponentiate only differences from the running maximum (score - m, of order 1): a number of order "
               "1e200 carried through a sum or a logarithm (m + log(l), sums kept in log space) loses every digit of "
               "the small terms")
STEP_OVERFLOW = ("scores near 1e4 overflow np.exp (inf / inf is NaN): the step's softmax subtracts each row's maximum "
                 "before exp, as softmax() of exercise 1 does (or call softmax)")

# Sizes that all differ: batch, heads, positions, d_k, d_v.
B, H, N, DK, DV = 2, 3, 10, 4, 5


def _qkv(seed: int, batch: tuple[int, ...] = (B, H), n_q: int = N, n_k: int = N, scale: float = 1.0,
         dtype=np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=batch + shape) for shape in ((n_q, DK), (n_k, DK), (n_k, DV)))
    return (scale * q).astype(dtype), k.astype(dtype), v.astype(dtype)


@remembered  # always of the tests' own seeded q, k, v: computed once per process
def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """Full attention written out with einsum, stable, in float64 (the expected values)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


def _blockwise_mistake(observed: np.ndarray, q, k, v, block_size: int, causal: bool) -> str | None:
    """Name the blockwise mistake that reproduces ``observed``, by simulating it (the only one that does)."""
    return _one_mistake([(observed, q, k, v, block_size, causal)])


def _one_mistake(calls: list[tuple]) -> str | None:
    """The one blockwise mistake that reproduces every call of ``calls`` that differs, by simulating it, or None.

    ``calls``: ``(observed, q, k, v, block_size, causal)`` of a test's calls. Named only when it explains all that is
    wrong in the test, and no other candidate does: a blind round's scores scaled by 1/sqrt(block length) were told
    "divided by sqrt(d_v)" on the one call whose blocks were as long as d_v, beside calls that mistake did not explain.
    """
    found: set[str] | None = None
    for observed, q, k, v, block_size, causal in calls:
        if np.shape(observed) == np.shape(_attention(q, k, v, causal)) and np.allclose(
                np.asarray(observed, dtype=np.float64), _attention(q, k, v, causal)):
            continue  # a right call: nothing to explain
        here = set()
        for mistake, kind in _CANDIDATES.items():
            if kind == "drop_last" and k.shape[-2] % block_size == 0:
                continue
            simulated = _simulate(q, k, v, block_size, causal, kind)
            if simulated is not None and np.shape(observed) == simulated.shape and np.allclose(
                    observed, simulated, equal_nan=True):
                here.add(mistake)
        found = here if found is None else found & here
        if not found:
            return None
    return next(iter(found)) if found is not None and len(found) == 1 else None


_CANDIDATES = {  # the mistake's words -> its kind in _simulate
    "the last, shorter block was dropped": "drop_last",
    "the causal mask of each block compared the query with the key's index inside the block, not with start + j":
        "local_offset",
    "the running sum l was not rescaled by exp(m_old - m_new) when the maximum changed": "no_rescale_sum",
    "the running weighted sum of values was not rescaled by exp(m_old - m_new) when the maximum changed":
        "no_rescale_acc",
    "neither the running sum l nor the running weighted sum of values was rescaled by exp(m_old - m_new) when the "
    "maximum changed": "no_rescale_both",
    "the full (n_q, n_k) score matrix was used in place of each block (every block saw every key)": "whole",
    "the scores were divided by sqrt(d_v), the values' width, not by sqrt(d_k), the keys' (q @ k^T / sqrt(d_k))":
        "scale_dv",
    "the scores of each block were divided by the square root of the block's length, not by sqrt(d_k), the keys' "
    "width (q @ k^T / sqrt(d_k))": "scale_block",
    "the scores were not divided by sqrt(d_k) (q @ k^T / sqrt(d_k), in every block)": "no_scale",
}


@remembered  # of the tests' own q, k, v (never of the student's output): computed once per process
def _simulate(q, k, v, block_size: int, causal: bool, kind: str) -> np.ndarray | None:
    """Blockwise attention with one known mistake (float64, warnings silenced)."""
    with np.errstate(all="ignore"):
        n_k, n_q = k.shape[-2], q.shape[-2]
        m = np.full(q.shape[:-1] + (1,), -np.inf)
        total, acc = np.zeros(q.shape[:-1] + (1,)), np.zeros(q.shape[:-1] + (v.shape[-1],))
        stop_at = n_k - n_k % block_size if kind == "drop_last" else n_k
        for start in range(0, stop_at, block_size):
            stop = min(n_k, start + block_size)
            width = {"scale_dv": v.shape[-1], "scale_block": stop - start, "no_scale": 1}.get(kind, q.shape[-1])
            scores = np.einsum("...id,...jd->...ij", q, k[..., start:stop, :]) / np.sqrt(width)
            if causal:
                keys = np.arange(stop - start) if kind == "local_offset" else np.arange(start, stop)
                scores = np.where(keys[None, :] <= np.arange(n_q)[:, None], scores, -np.inf)
            new = np.maximum(m, scores.max(axis=-1, keepdims=True))
            shift = np.where(np.isfinite(new), new, 0.0)
            e = np.exp(scores - shift)
            rescale = np.exp(m - shift)
            total = (total if kind in ("no_rescale_sum", "no_rescale_both") else total * rescale) + e.sum(
                axis=-1, keepdims=True)
            acc = (acc if kind in ("no_rescale_acc", "no_rescale_both") else acc * rescale) + e @ v[..., start:stop, :]
            m = new
        if kind == "whole":
            return None
        return np.divide(acc, total, out=np.zeros_like(acc), where=total > 0)


def _idea(mistake: str | None, idea: str) -> str:
    return f"{mistake}; {idea}" if mistake else idea


# ----------------------------------------------------------------------------- the cache


def test_cache_starts_with_one_position(impl):
    _, k, v = _qkv(200)
    k_t, v_t = k[..., :1, :], v[..., :1, :]
    what = f"kv_cache_append(None, k_t, v_t) with k_t {k_t.shape} and v_t {v_t.shape}"
    cache = call_or_explain(impl.kv_cache_append, None, k_t, v_t, what=what, idea=CACHE)
    if not expect(isinstance(cache, dict) and {"k", "v"} <= set(cache), what=what, idea=CACHE,
                  expected="a dict with keys 'k' and 'v'", observed=repr(cache)[:200]):
        return
    expect_close(cache["k"], k_t, what=f"cache['k'] of {what}", idea=CACHE)
    expect_close(cache["v"], v_t, what=f"cache['v'] of {what}", idea=CACHE)


def test_cache_grows_along_the_position_axis(impl):
    _, k, v = _qkv(201)
    cache = {"k": k[..., :4, :], "v": v[..., :4, :]}
    what = f"kv_cache_append(cache, k_t, v_t) with cache['k'] {cache['k'].shape} and k_t {k[..., 4:5, :].shape}"
    new = call_or_explain(impl.kv_cache_append, cache, k[..., 4:5, :], v[..., 4:5, :], what=what, idea=CACHE)
    if not expect(isinstance(new, dict) and {"k", "v"} <= set(new), what=what, idea=CACHE,
                  expected="a dict with keys 'k' and 'v'", observed=repr(new)[:200]):
        return
    for name, full in (("k", k), ("v", v)):
        if expect_shape(new[name], (B, H, 5, full.shape[-1]), what=f"new cache['{name}'] after 4 + 1 positions",
                        idea=CACHE):
            expect_close(new[name], full[..., :5, :], what=f"new cache['{name}']: the 4 cached positions, then "
                         "the new one", idea=CACHE)


def test_cache_with_one_sequence_of_one_position(impl):
    # (2, 1, d) + (2, 1, d): concatenating along axis 0 runs here and stacks two batches instead.
    _, k, v = _qkv(202, batch=(B,))
    new = impl.kv_cache_append({"k": k[:, :1], "v": v[:, :1]}, k[:, 1:2], v[:, 1:2])
    idea = _idea("the positions were appended along axis 0 (the batch axis)" if np.shape(new.get("k")) == (
        2 * B, 1, DK) else None, CACHE)
    expect_shape(new.get("k"), (B, 2, DK), what=f"cache['k'] after appending to a ({B}, 1, {DK}) cache", idea=idea)


def test_cache_is_never_changed(impl):
    _, k, v = _qkv(203)
    cache = {"k": k[..., :3, :].copy(), "v": v[..., :3, :].copy()}
    new = impl.kv_cache_append(cache, k[..., 3:4, :], v[..., 3:4, :])
    expect(new is not cache, what="kv_cache_append returns a new dict", idea=NEW_CACHE,
           expected="a new dict", observed="the cache that was passed in, changed")
    expect_equal(np.shape(cache["k"]), (B, H, 3, DK), what="the old cache['k'] after kv_cache_append", idea=NEW_CACHE)
    if expect(isinstance(new, dict) and "k" in new, what="kv_cache_append's result", expected="a dict with k and v",
              observed=type(new).__name__, idea=NEW_CACHE):
        expect_close(np.asarray(new["k"])[..., :3, :], cache["k"], what="the new cache's first 3 keys",
                     idea=NEW_CACHE + "; the new cache holds the old positions, then the new one")
        # Graded, `new` is a copy decoded from the worker's reply whatever it was (identity does not cross the
        # sandbox): the old cache given back is told by what it holds, 3 positions, not 4.
        expect_equal(np.shape(new["k"]), (B, H, 4, DK), what="the new cache['k'] after appending one key to 3",
                     idea=NEW_CACHE + "; the new cache holds the old positions, then the new one")
    # Two caches begun one after the other are two caches: starting the second leaves the first as it was (a blind
    # round's first cache was one dict of the module's, which the second start overwrote).
    first = impl.kv_cache_append(None, k[..., :1, :], v[..., :1, :])
    held = np.array(first["k"], copy=True) if isinstance(first, dict) and "k" in first else None
    impl.kv_cache_append(None, k[..., 1:2, :], v[..., 1:2, :])
    if held is not None:
        expect_close(np.asarray(first["k"]), held, what="a first cache's keys after a second cache was begun",
                     idea=NEW_CACHE + "; every call with cache None begins a new dict (no dict kept in the module "
                     "and given out again)")
    # A cache begun from k_t holds a copy of it: a caller that writes the next token's key into the same buffer
    # keeps the first cache as it was (a blind round's cache None returned k_t itself, passing every test).
    k_buffer, v_buffer = k[..., 5:6, :].copy(), v[..., 5:6, :].copy()
    begun = impl.kv_cache_append(None, k_buffer, v_buffer)
    if isinstance(begun, dict) and "k" in begun and "v" in begun:
        held_k, held_v = np.array(begun["k"], copy=True), np.array(begun["v"], copy=True)
        k_buffer[...], v_buffer[...] = k[..., 6:7, :], v[..., 6:7, :]  # the caller reuses its buffers
        for name, value, held_value in (("k", begun["k"], held_k), ("v", begun["v"], held_v)):
            expect_close(np.asarray(value), held_value,
                         what=f"cache['{name}'] begun by kv_cache_append(None, k_t, v_t), after the caller wrote "
                              f"the next token into its {name}_t array",
                         idea=NEW_CACHE + "; with cache None too: copy k_t and v_t, so the cache does not share "
                         "memory with the caller's arrays")


# ----------------------------------------------------------------------------- one step


def test_attend_step_is_one_row_of_attention(impl):
    q, k, v = _qkv(210, n_k=6)
    cache = {"k": k, "v": v}
    q_t = q[..., 2:3, :]
    what = f"attend_step(q_t, cache) with q_t {q_t.shape} and cache['k'] {k.shape}"
    result = call_or_explain(impl.attend_step, q_t, cache, what=what, idea=STEP)
    if not expect(isinstance(result, tuple) and len(result) == 2, what=what, idea=STEP,
                  expected="a tuple (context_t, weights_t)", observed=type(result).__name__):
        return
    context, weights = result
    scores = np.einsum("...id,...jd->...ij", q_t, k)
    expected_weights = np.exp(scores / 2.0) / np.exp(scores / 2.0).sum(axis=-1, keepdims=True)
    # Another divisor is named (a blind round: sqrt of the cache's length, or of the values' width, was told only the
    # formula): d_k = 4, t = 6, d_v = 5 here, so each divisor gives weights of its own.
    mistake = None
    for divisor, words in ((1.0, "the scores were not divided by sqrt(d_k)"),
                           (np.sqrt(6), "the scores were divided by sqrt(t), the number of cached positions "
                                        "(cache['k'].shape[-2]), not by sqrt(d_k), the keys' width (shape[-1])"),
                           (np.sqrt(DV), "the scores were divided by sqrt(d_v), the values' width, not by sqrt(d_k), "
                                         "the width of the queries and keys"),
                           (float(DK), "the scores were divided by d_k itself, not by its square root")):
        divided = np.exp(scores / divisor) / np.exp(scores / divisor).sum(axis=-1, keepdims=True)
        if np.shape(weights) == divided.shape and np.allclose(np.asarray(weights, dtype=float), divided):
            mistake = words
            break
    right = True
    if expect_shape(weights, (B, H, 1, 6), what=f"weights_t of {what}", idea=STEP):
        right &= expect_close(weights, expected_weights, what=f"weights_t of {what}", idea=_idea(mistake, STEP))
    if expect_shape(context, (B, H, 1, DV), what=f"context_t of {what}", idea=STEP):
        right &= expect_close(context, expected_weights @ v, what=f"context_t of {what}", idea=_idea(mistake, STEP))
    if not right:
        return  # (the step itself is wrong: what follows would only repeat it)
    # float32 in, float32 out: a scale computed as np.sqrt(np.float64(d_k)) makes the context float64 (a blind round:
    # causal_decode's float32 test then sent the student to attend_step, whose tests all passed).
    result = call_or_explain(impl.attend_step, q_t.astype(np.float32), {"k": k.astype(np.float32),
                             "v": v.astype(np.float32)}, what=f"{what}, all float32", idea=STEP)
    if isinstance(result, tuple) and len(result) == 2:
        for name, value in zip(("context_t", "weights_t"), result, strict=True):
            expect_dtype(value, np.float32, what=f"{name} of {what}, all float32",
                         idea="dtype in = dtype out: float32 inputs give float32 results (a float64 scalar such as "
                              "np.sqrt(np.float64(d)) makes them float64; math.sqrt gives a Python float, which keeps "
                              "float32)")
    # Scores near 1e4 (a sharp query): exp of the raw scores overflows.
    q_t = 5e3 * q_t
    what = f"attend_step(q_t, cache) with q_t {q_t.shape} whose scores reach about 1e4"
    result = call_expecting_no_warning(impl.attend_step, q_t, cache, what=f"{what} raises no RuntimeWarning",
                                       idea=STEP_OVERFLOW)
    if isinstance(result, tuple) and len(result) == 2 and np.shape(result[1]) == (B, H, 1, 6):
        scores = np.einsum("...id,...jd->...ij", q_t, k) / 2.0
        expected_weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        expected_weights /= expected_weights.sum(axis=-1, keepdims=True)
        if expect_no_nan(result[1], what=f"weights_t of {what}", idea=STEP_OVERFLOW):
            expect_close(result[1], expected_weights, what=f"weights_t of {what}", idea=STEP_OVERFLOW)


# ----------------------------------------------------------------------------- causal decoding


def _through_the_cache(args: tuple, kwargs: dict, result: object, reached) -> object:
    """Why one call of ``causal_decode`` did not decode through the cache (None unless the calls it made say so).

    The API: it runs ``kv_cache_append`` and ``attend_step`` position by position. Full attention under the causal
    mask gives the same values with neither, so the calls are looked at: every call this one made of the
    student's functions, by their code, through any name, partial, closure or thread (``tests/reach.py``'s
    ``every_call``), how often, and what the result is made of (``tests/decoded.py``: each vector a context that
    ``attend_step`` returned for a query of the inputs over a cache ``kv_cache_append`` returned, holding the
    inputs' keys and values up to that query). It fails only on certain evidence: the call was traced, its values
    are right, and either one of the two was called fewer times than there are positions (one call on made-up
    data is no decoding), or a vector of the result is none of those contexts (calls on made-up data, or on caches
    made by hand, then values computed another way). Otherwise (a crash, wrong values) the test's own checks say
    what they can.
    """
    try:
        bound = inspect.signature(lambda q, k, v: None).bind(*args, **kwargs).arguments
        q, k, v = (np.asarray(bound[name], dtype=np.float64) for name in ("q", "k", "v"))
        out, expected = np.asarray(result, dtype=np.float64), _attention(q, k, v, causal=True)
    except (TypeError, ValueError):
        return None
    if not reached.watched or out.shape != expected.shape or not np.allclose(out, expected, rtol=1e-4, atol=1e-5):
        return None
    n = q.shape[-2]
    calls = {name: reached.count(name) if name in reached.callees("causal_decode") else 0
             for name in ("kv_cache_append", "attend_step")}
    if not all(count >= n for count in calls.values()):
        told = " and ".join(f"{name} {count} time{'' if count == 1 else 's'}" for name, count in calls.items())
        return message(f"the functions causal_decode called, decoding {n} positions",
                       f"kv_cache_append and attend_step, position by position: at least {n} calls of each (the "
                       "API: the cache grows as the tokens come, and each new query attends over it)",
                       f"{told}, under any name or in any thread (calls in another process are not seen): right "
                       "values, computed another way", DECODE)
    vectors, first, again = reached.made_of.get("attend_step", (0, -1, 0))
    if again:
        # Each position appended once, to the cache the position before left: a cache begun anew at every position
        # (t + 1 appends from none for position t) gives the same caches and values, and keeps nothing from step to
        # step (a hostile round: 30 points of decoding against 24.75).
        return message(f"the caches causal_decode's appends built, decoding {n} positions",
                       "each position appended once, to the cache the position before left (the API: the cache is "
                       "kept from step to step, not built again)",
                       f"a sequence's cache of a prefix built again by kv_cache_append after it had been built once, "
                       f"{again} time{'s' if again > 1 else ''} (a cache begun anew for later positions), though the "
                       "values are right",
                       DECODE)
    if first < 0 or vectors != out.size // out.shape[-1]:
        return None
    entry, position = divmod(first, n)
    return message(f"where causal_decode's result comes from, decoding {n} positions",
                   "each row of the result is the context_t that attend_step returned for query t over the cache "
                   "kv_cache_append built of positions 0..t (the API: decoding is attend_step's answers, position "
                   "by position)",
                   f"row {position} (of batch entry {entry}, counting the leading axes flat) is none of them, though "
                   f"attend_step was called {calls['attend_step']} times: its caches were not kv_cache_append's of "
                   "the inputs, or the row was computed another way", DECODE)


def require_the_cache(impl) -> bool:
    """Check, at every call of ``causal_decode`` in this test, that it decodes through the cache.

    Each call is traced (``tests.kit.Kit.watch``) and judged by :func:`_through_the_cache`: the calls the test
    checks are the ones traced, so code cannot decode one way when it is watched and another when it is graded.
    True (the verdict comes with the calls).
    """
    watch = getattr(impl, "watch", None)
    if watch is not None:
        watch("causal_decode", _through_the_cache, made_of=MADE_BY)
    return True


def test_causal_decode_equals_causal_attention(impl):
    require_the_cache(impl)
    q, k, v = _qkv(220)
    what = f"causal_decode(q, k, v) with q, k {q.shape} and v {v.shape}"
    out = call_or_explain(impl.causal_decode, q, k, v, what=what, idea=DECODE)
    if expect_shape(out, (B, H, N, DV), what=f"the shape of {what}", idea=DECODE):
        expect_close(out[..., 0, :], v[..., 0, :], what="the first position of causal_decode sees only itself: v[0]",
                     idea=DECODE)
        expect_close(out, _attention(q, k, v, causal=True), idea=DECODE,
                     what=f"{what} against full attention with the causal mask")


def test_causal_decode_of_one_sequence_in_float32(impl):
    require_the_cache(impl)
    q, k, v = _qkv(221, batch=(), n_q=7, n_k=7, dtype=np.float32)
    out = impl.causal_decode(q, k, v)
    if expect_dtype(out, np.float32, what="causal_decode of float32 q, k, v", idea="dtype in = dtype out"):
        expect_close(out, _attention(q, k, v, causal=True), rtol=1e-5, atol=1e-6, idea=DECODE,
                     what="causal_decode of one float32 sequence of 7 positions (no batch axes)")


# ----------------------------------------------------------------------------- blockwise attention


def test_blockwise_the_readings_worked_case(impl):
    # One query, d_k = 1: the scores are the keys, [1, 3 | 2, 5] in two blocks; values [10, 20 | 30, 40].
    q, k, v = np.array([[1.0]]), np.array([[1.0], [3.0], [2.0], [5.0]]), np.array([[10.0], [20.0], [30.0], [40.0]])
    what = f"blockwise_attention of the reading's worked case ({READING}), block_size=2"
    out = call_or_explain(impl.blockwise_attention, q, k, v, 2, what=what, idea=ONLINE)
    e = np.exp(k[:, 0] - 5.0)
    expect_close(out, [[float(e @ v[:, 0] / e.sum())]], what=what + ": 36.88 as with a full softmax",
                 idea=_idea(_blockwise_mistake(out, q, k, v, 2, False), ONLINE))
    require_blockwise(impl, "plain")  # the values above from full attention earn nothing


def test_blockwise_equals_attention_for_every_block_size(impl):
    q, k, v = _qkv(230, n_q=6, n_k=11)
    expected, outs = _attention(q, k, v), {}
    for block_size in (4, 1, 3, 11, 16):  # 11 keys: 3 and 4 leave a shorter last block
        what = f"blockwise_attention(q, k, v, block_size={block_size}) with q {q.shape}, k {k.shape}"
        outs[block_size] = call_or_explain(impl.blockwise_attention, q, k, v, block_size, what=what, idea=ONLINE)
    # The last, shorter block is named only where the blocks that divide the keys are right (a blind round's scale
    # by sqrt(d_v) was sent to the last block, every block size wrong alike).
    whole = all(np.shape(outs[size]) == expected.shape and np.allclose(outs[size], expected) for size in (1, 11))
    mistake = _one_mistake([(out, q, k, v, size, False) for size, out in outs.items()])  # one for every call
    for block_size, out in outs.items():
        what = f"blockwise_attention(q, k, v, block_size={block_size}) with q {q.shape}, k {k.shape}"
        if expect_shape(out, (B, H, 6, DV), what=f"the shape of {what}", idea=ONLINE):
            idea = PARTIAL if 11 % block_size and whole else ONLINE
            expect_close(out, expected, what=what, idea=_idea(mistake, idea))
    require_blockwise(impl, "plain")  # the values above from full attention earn nothing


def test_blockwise_causal_equals_causal_attention(impl):
    q, k, v = _qkv(231)
    outs = {block_size: impl.blockwise_attention(q, k, v, block_size, causal=True) for block_size in (3, 5, 1, 10)}
    mistake = _one_mistake([(out, q, k, v, size, True) for size, out in outs.items()])  # one for every call
    for block_size, out in outs.items():
        expect_close(out, _attention(q, k, v, causal=True), idea=_idea(mistake, OFFSET),
                     what=f"blockwise_attention(q, k, v, block_size={block_size}, causal=True), n = {N}")
    require_blockwise(impl, "causal")  # the values above from full attention earn nothing


def test_blockwise_with_values_as_wide_as_keys(impl):
    # Every other blockwise test has d_v = 5 != d_k = 4: here d_v == d_k, so code that sizes its buffers
    # with d_k runs, and its values are checked.
    rng = np.random.default_rng(235)
    q, k, v = (rng.normal(size=(B, H, N, DK)) for _ in range(3))
    calls = ((3, False), (4, True))
    outs = [call_or_explain(impl.blockwise_attention, q, k, v, block_size, causal=causal, idea=ONLINE,
                            what=f"blockwise_attention(q, k, v, block_size={block_size}, causal={causal}) with d_v = "
                                 f"d_k = {DK}") for block_size, causal in calls]
    mistake = _one_mistake([(out, q, k, v, *call) for out, call in zip(outs, calls, strict=True)])
    for (block_size, causal), out in zip(calls, outs, strict=True):
        what = f"blockwise_attention(q, k, v, block_size={block_size}, causal={causal}) with d_v = d_k = {DK}"
        if expect_shape(out, (B, H, N, DK), what=f"the shape of {what}", idea=ONLINE):
            expect_close(out, _attention(q, k, v, causal=causal), what=what, idea=_idea(mistake, ONLINE))
    require_blockwise(impl, "plain", "causal")  # the values above from full attention earn nothing


def test_blockwise_keeps_float32(impl):
    q, k, v = _qkv(232, dtype=np.float32)
    out = impl.blockwise_attention(q, k, v, 4, causal=True)
    if expect_dtype(out, np.float32, what="blockwise_attention of float32 q, k, v", idea="dtype in = dtype out"):
        expect_close(out, _attention(q, k, v, causal=True), rtol=1e-4, atol=1e-5, idea=ONLINE,
                     what="blockwise_attention of float32 inputs, causal, block_size=4")
    require_blockwise(impl, "causal")  # the values above from full attention earn nothing


def test_blockwise_with_huge_scores(impl):
    # Scores of about 1e4: np.exp overflows without the running maximum.
    q, k, v = _qkv(233, n_q=7, n_k=13, scale=5e3)
    for causal in (False,):
        out = call_expecting_no_warning(impl.blockwise_attention, q, k, v, 5, causal=causal, idea=OVERFLOW,
                                        what="blockwise_attention with scores near 1e4 raises no RuntimeWarning")
        if expect_no_nan(out, what="blockwise_attention with scores near 1e4", idea=OVERFLOW):
            expect_close(out, _attention(q, k, v), what="blockwise_attention, block_size=5, scores near 1e4",
                         idea=_idea(_blockwise_mistake(out, q, k, v, 5, False), OVERFLOW))
    q, k, v = _qkv(234, n_q=9, n_k=9, scale=5e3)
    out = impl.blockwise_attention(q, k, v, 4, causal=True)
    expect_close(out, _attention(q, k, v, causal=True), idea=_idea(_blockwise_mistake(out, q, k, v, 4, True), OVERFLOW),
                 what="blockwise_attention, causal, block_size=4, scores near 1e4")
    require_blockwise(impl, "plain-huge", "causal-huge")  # the values above from full attention earn nothing


def test_blockwise_with_scores_far_below_zero(impl):
    # Every score of a row near -1e5, with differences of order 1: the softmax is still well defined.
    rng = np.random.default_rng(235)
    k = np.concatenate([np.ones((B, 8, 1)), rng.normal(size=(B, 8, DK - 1))], axis=-1)
    q = np.concatenate([np.full((B, 6, 1), -2e5), rng.normal(size=(B, 6, DK - 1))], axis=-1)
    v = rng.normal(size=(B, 8, DV))
    out = call_expecting_no_warning(impl.blockwise_attention, q, k, v, 3, idea=OVERFLOW,
                                    what="blockwise_attention with every score near -1e5 raises no RuntimeWarning")
    zeros = np.allclose(out, 0.0)
    if not expect_close(out, _attention(q, k, v), idea=_idea(
            "the output is all zeros: the running maximum started at a finite value above every score, not -inf"
            if zeros else _blockwise_mistake(out, q, k, v, 3, False), OVERFLOW),
            what="blockwise_attention, block_size=3, every score near -1e5"):
        return
    # Near -1e200: below any finite start a student might pick (-1e9, -1e30 ...); only -inf lies below every score.
    q[..., 0] = -2e200
    what = "blockwise_attention, block_size=3, every score near -1e200"
    out = call_expecting_no_warning(impl.blockwise_attention, q, k, v, 3, idea=FINITE_START,
                                    what=f"{what}: no RuntimeWarning")
    if expect_no_nan(out, what=what, idea=FINITE_START):
        lost = np.allclose(np.asarray(out, dtype=np.float64), 0.0)  # what a finite start gives; else another cause
        expect_close(out, _attention(q, k, v), idea=FINITE_START if lost else HUGE_OFFSET, what=what)
    require_blockwise(impl, "plain-far", "plain-extreme")  # the values above from full attention earn nothing


# The gate's two measured calls (once per session, each in a fresh worker graded). Sizes drawn for the submission
# (``submission_salt``; graded, the grader's key is mixed in), batched, d_v != d_k, a shorter last block, and rows of
# every kind the blockwise tests ask about, so that no call of the tests is unlike them: a hostile round's
# blockwise_attention worked block by block on the one 2-D, d = 2, non-causal call the gate measured (the first call
# of a fresh worker) and used full attention everywhere else (30 points of 30). Each test asks only the rows of its
# own idea to be right (a student's one mistake fails the tests of that idea, not every test again).
# group -> (call, the rows' kind, what the rows are, the idea to revisit)
_GROUPS = {
    "plain": ("plain", 0, "queries with ordinary scores", ONLINE),
    "plain-huge": ("plain", 1, "queries whose scores reach 1e4", OVERFLOW),
    "plain-far": ("plain", 2, "queries whose scores are all near -1e5", OVERFLOW),
    "plain-extreme": ("plain", 3, "queries whose scores are all near -1e200", f"{FINITE_START}; or else {HUGE_OFFSET}"),
    "causal": ("causal", 0, "queries with ordinary scores, causal", OFFSET),
    "causal-huge": ("causal", 1, "queries whose float32 scores reach a few hundred (exp overflows float32 above 88), "
                    "causal", OVERFLOW),
}
_KINDS = {"plain": 4, "causal": 2}  # how many kinds of rows each call has (row i is of kind i % this)


def _blockwise_memory(impl) -> dict:
    """The gate's measured calls: ``{call: (sizes, (q, k, v), out, peak)}``.

    ``sizes``: ``(b, n_q, n_k, block, d, d_v, causal, elsewhere)``.
    """
    # Graded, the peak is read from outside the student's process (the worker's memory control group: malloc,
    # mmap, shared memory and child processes all count); in a student's own run, with tracemalloc, which sees
    # the call's allocations only, so smaller sizes tell the two apart as clearly (and cost less).
    elsewhere = impl.measures_elsewhere
    rng = np.random.default_rng([236, submission_salt("decoding")])  # (tests/effort.py)
    calls = {}
    # Sizes that keep an honest loop over queries and blocks in Python (about 150,000 steps a call) within a call's
    # CPU budget, and the full score matrix 1.4 to 3 times the whole allowance (float32 to float64).
    for call, causal in (("plain", False), ("causal", True)):
        b, d, d_v = (1 if causal else 2), 2, 3
        block = int(rng.choice([28, 32]))
        if causal:
            n_q = n_k = int(rng.integers(2048, 2561) if elsewhere else rng.integers(1024, 1281))
        else:
            n_q = int(rng.integers(192, 225) if elsewhere else rng.integers(56, 73))
            n_k = int(rng.integers(7680, 9217) if elsewhere else rng.integers(3840, 4609))
        if n_k % block == 0:
            n_k, n_q = n_k + 1, n_q + causal  # a shorter last block, as a student's loop must handle
        dtype = np.float32 if causal else np.float64
        k = rng.normal(size=(b, n_k, d))
        k[..., 0] = 1.0  # a constant feature: a query's first entry shifts all of its scores alike
        q = rng.normal(size=(b, n_q, d))
        kind = np.arange(n_q) % _KINDS[call]
        q[:, kind == 1, 0] = 0.0  # scores of both signs in every row: only the overflow is asked about here
        q[:, kind == 1, 1] *= 5e3 if not causal else 200.0
        q[:, kind == 2, 0] = -2e5
        q[:, kind == 3, 0] = -2e200
        v = rng.normal(size=(b, n_k, d_v))
        q, k, v = q.astype(dtype), k.astype(dtype), v.astype(dtype)
        out, peak = impl.measure("blockwise_attention", q, k, v, block, causal=causal)
        calls[call] = ((b, n_q, n_k, block, d, d_v, causal, elsewhere), (q, k, v), out, peak)
    return calls


def _memory_failure(sizes: tuple, peak: int | None):
    """Why the measured call held more than one block at a time takes (a failure to record), or None."""
    b, n_q, n_k, block_size, d, d_v, causal, elsewhere = sizes
    # Room for 8 arrays of (b, n_q, block_size) float64 at once and a float64 copy of the inputs; graded, also 6 MiB
    # of the process's own pages (the call runs in a fresh worker that imports the module during it, the libraries
    # it imports before: the reference's whole peak is 2 to 3.5 MiB). The (n_q, n_k) scores of full attention alone
    # are 3 times the whole allowance graded (1.4 times in float32).
    own = (6 << 20) if elsewhere else 0
    allowed = 8 * b * n_q * block_size * 8 + b * (n_q * d + n_k * (d + d_v)) * 8 + own
    full = b * n_q * n_k * 8
    what = (f"peak memory used during blockwise_attention(q {(b, n_q, d)}, k {(b, n_k, d)}, v {(b, n_k, d_v)}, "
            f"block_size={block_size}{', causal=True' if causal else ''})")
    if peak is None:
        return message(what, "a measurement", "none: the tracing was stopped during the call", ONLINE)
    if peak <= allowed:
        return None
    room = " and 6 MiB of the process's own" if own else ""
    return message(
        what, f"at most {allowed / 2**20:.2f} MiB (8 arrays of n_q x block_size float64, a copy of the inputs"
              f"{room}); the (n_q, n_k) scores of full attention alone take {full / 2**20:.0f} MiB",
        f"{peak / 2**20:.2f} MiB", "more memory than one block at a time takes: keep one block of scores "
        "and, per query, one running summary (the maximum so far, the sum of exponentials, the weighted sum of "
        "values), updated block by block; never the (n_q, n_k) scores, nor a summary per block kept until the end "
        "(Rabe and Staats' chunked attention: each block's maximum, sum and weighted values, combined once at the "
        "end: right values, with memory that grows with the number of blocks); " + ONLINE)


def require_blockwise(impl, *groups: str) -> bool:
    """Fail the test unless ``blockwise_attention`` works block by block, and right on the measured rows of ``groups``.

    Called at the end of every blockwise test, after its own checks (their failures come first): right values
    from full attention (the (n_q, n_k) scores, or a call of ``scaled_dot_product_attention``) are not the
    exercise, and earned 11 of its 12 blockwise tests, hidden ones included, while only the memory test failed.
    The calls are measured once per session (the memory test's own); their memory must grow with the block only,
    and their rows of the test's own ideas (``groups``, keys of ``_GROUPS``) be right, or reproduce the one known
    mistake that every row shows (the last, shorter block dropped: its own tests fail it). True when it passed.
    """
    calls = once(impl, "blockwise_attention", "memory", lambda: _blockwise_memory(impl))
    failures = [failure for sizes, _, _, peak in calls.values() if (failure := _memory_failure(sizes, peak))]
    if not failures:
        failures = [failure for group in groups  # (each group's verdict once per session: its rows cost)
                    if (failure := once(impl, "blockwise_attention", f"memory:{group}",
                                        lambda group=group: _group_failure(calls, group))) is not None]
    for failure in failures[:1]:
        fail_check(failure)  # recorded as data, as every failure (tests/failures.py)
    return not failures


def _group_failure(calls: dict, group: str):
    """Why the measured rows of ``group`` are not attention's, or None."""
    call, kind, rows_are, idea = _GROUPS[group]
    (b, n_q, n_k, block_size, d, d_v, causal, _), (q, k, v), out, _ = calls[call]
    what = (f"the context of the measured call blockwise_attention(q {(b, n_q, d)}, k {(b, n_k, d)}, v "
            f"{(b, n_k, d_v)}, block_size={block_size}{', causal=True' if causal else ''}) in {q.dtype}, at its "
            f"{rows_are}")
    try:
        observed = np.asarray(out)
    except (TypeError, ValueError):
        return message(what, f"an array of shape {(b, n_q, d_v)}", f"{type(out).__name__}", idea)
    if observed.shape != (b, n_q, d_v):
        return message(what, f"shape {(b, n_q, d_v)}", f"shape {observed.shape}", idea)
    if causal and observed.dtype != q.dtype:
        return message(what, f"{q.dtype} (dtype in = dtype out)", f"{observed.dtype}", "dtype in = dtype out")
    # (the causal call: every other such row, from the 64th query on, which sees 64 keys: a row's few scores could
    # all lie on one side of 0)
    rows = np.arange(kind + (64 * _KINDS[call] if causal else 0), n_q, _KINDS[call] * (2 if causal else 1))
    expected = _rows_of_attention(q, k, v, rows, causal)
    mine = observed[:, rows].astype(np.float64)
    rtol, atol = (1e-3, 1e-4) if q.dtype == np.float32 else (1e-6, 1e-8)
    if np.allclose(mine, expected, rtol=rtol, atol=atol):
        return None
    if block_size < n_k and np.allclose(mine, _rows_of_attention(q, k[:, :n_k - n_k % block_size],
                                                                   v[:, :n_k - n_k % block_size], rows, causal),
                          rtol=rtol, atol=atol):
        return None  # the last, shorter block dropped: every row shows it, and the tests of that idea fail it
    gap = np.where(np.isnan(mine), np.inf, np.abs(mine - expected))
    entry, row, _ = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return message(what, f"softmax(q K^T / sqrt(d_k)) V, as full attention gives: query {rows[row]} of batch entry "
                         f"{entry} -> {np.round(expected[entry, row], 6).tolist()}",
                   f"{np.round(mine[entry, row], 6).tolist()}", idea)


def _rows_of_attention(q, k, v, rows: np.ndarray, causal: bool) -> np.ndarray:
    """Attention's context at query ``rows`` (float64, a few rows at a time: the test's memory stays small).

    Matrix products and in-place steps, not einsum: about a third of the CPU time, per submission graded.
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    keys, out = np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), np.empty(q.shape[:-2] + (len(rows), v.shape[-1]))
    for start in range(0, len(rows), 64):
        chosen = rows[start:start + 64]
        scores = q[..., chosen, :] @ keys
        if causal:
            scores[..., np.arange(k.shape[-2])[None, :] > chosen[:, None]] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        out[..., start:start + 64, :] = (scores @ v) / scores.sum(axis=-1, keepdims=True)
    return out


def test_blockwise_memory_grows_with_the_block_not_the_keys(impl):
    calls = once(impl, "blockwise_attention", "memory", lambda: _blockwise_memory(impl))
    for sizes, _, _, peak in calls.values():
        failure = _memory_failure(sizes, peak)
        if failure is not None:
            fail_check(failure)
    for group in ("plain",):  # the plain call's ordinary rows (the tests above check the rest)
        failure = once(impl, "blockwise_attention", f"memory:{group}", lambda group=group: _group_failure(calls, group))
        if failure is not None:
            fail_check(failure)


# ----------------------------------------------------------------------------- reference values



# The names of the result arrays, for a diagnosis that points at the ones that differ (tests/steps.py).
names("kv_cache_append", "k", "v")

@probe("kv_cache_append")
def second_position_with_a_batch_axis():
    _, k, v = _qkv(240, batch=(B,))
    return ({"k": k[:, :1], "v": v[:, :1]}, k[:, 1:2], v[:, 1:2]), {}


@probe("kv_cache_append")
def fifth_position():
    # Four cached positions: an entry put at the wrong end shows as an order of five.
    _, k, v = _qkv(244, batch=(2, 3))
    return ({"k": k[..., :4, :], "v": v[..., :4, :]}, k[..., 4:5, :], v[..., 4:5, :]), {}


@probe("attend_step")
def query_over_seven_cached():
    q, k, v = _qkv(241, n_k=7)
    return (q[..., :1, :], {"k": k, "v": v}), {}


@probe("attend_step")
def float32_query_over_five_cached():
    # For the diagnosis: float32 in, float32 out (a float64 constant shows as a dtype alone).
    q, k, v = _qkv(243, batch=(3,), n_k=5, dtype=np.float32)
    return (q[..., :1, :], {"k": k, "v": v}), {}


@probe("causal_decode")
def batch_and_heads():
    return _qkv(242, n_q=6, n_k=6), {}


@probe("blockwise_attention")
def causal_partial_last_block():
    return _qkv(243), {"block_size": 4, "causal": True}


@probe("blockwise_attention")
def huge_scores():
    return _qkv(244, n_q=5, n_k=9, scale=5e3), {"block_size": 2}


@probe("blockwise_attention")
def scores_far_below_zero():
    rng = np.random.default_rng(245)
    k = np.concatenate([np.ones((7, 1)), rng.normal(size=(7, DK - 1))], axis=-1)
    q = np.concatenate([np.full((3, 1), -2e5), rng.normal(size=(3, DK - 1))], axis=-1)
    return (q, k, rng.normal(size=(7, DV))), {"block_size": 3}


@probe("blockwise_attention")
def rows_near_minus_1e3_and_minus_1e5():
    # Query 0's scores lie near -1e3, query 1's near -1e5: a start at 0 loses both, a start at -5e4 only query 1.
    rng = np.random.default_rng(247)
    k = np.concatenate([np.ones((9, 1)), rng.normal(size=(9, DK - 1))], axis=-1)
    q = np.concatenate([np.array([[-2e3], [-2e5]]), rng.normal(size=(2, DK - 1))], axis=-1)
    return (q, k, rng.normal(size=(9, DV))), {"block_size": 4}


@probe("blockwise_attention")
def rows_near_minus_1e200():
    # Every score near -1e200: below any finite start a student might pick (-1e9, -1e30 ...), only -inf lies lower.
    rng = np.random.default_rng(248)
    k = np.concatenate([np.ones((8, 1)), rng.normal(size=(8, DK - 1))], axis=-1)
    q = np.concatenate([np.full((3, 1), -2e200), rng.normal(size=(3, DK - 1))], axis=-1)
    return (q, k, rng.normal(size=(8, DV))), {"block_size": 3}


def test_reference_values(impl):
    require_the_cache(impl)
    expect_probe(impl, "kv_cache_append/second_position_with_a_batch_axis", idea=CACHE,
                 what=f"kv_cache_append to a ({B}, 1, {DK}) cache")
    expect_probe(impl, "attend_step/query_over_seven_cached", idea=STEP, what="attend_step over 7 cached positions")
    expect_probe(impl, "causal_decode/batch_and_heads", idea=DECODE, what=f"causal_decode of ({B}, {H}, 6, {DK})")
    expect_probe(impl, "blockwise_attention/causal_partial_last_block", idea=f"{ONLINE}; {OFFSET}; {PARTIAL}",
                 what=f"blockwise_attention, causal, n = {N}, block_size=4")
    expect_probe(impl, "blockwise_attention/huge_scores", idea=OVERFLOW, what="blockwise_attention, scores near 1e4")
    expect_probe(impl, "blockwise_attention/scores_far_below_zero", idea=OVERFLOW,
                 what="blockwise_attention, scores near -1e5")
    expect_probe(impl, "blockwise_attention/rows_near_minus_1e3_and_minus_1e5", idea=OVERFLOW,
                 what="blockwise_attention, one query's scores near -1e3, another's near -1e5")
    expect_probe(impl, "blockwise_attention/rows_near_minus_1e200", idea=f"{FINITE_START}; or else {HUGE_OFFSET}",
                 what="blockwise_attention, every score near -1e200")
    # The blockwise values above from full attention earn nothing (a hostile round: 1.5).
    require_blockwise(impl, "plain", "causal", "plain-huge", "plain-far", "plain-extreme")


# ----------------------------------------------------------------------------- bad input


def test_rejects_bad_input(impl):
    q, k, v = _qkv(250, batch=())
    idea = "bad input raises ValueError naming the argument"
    expect_raises_value_error(lambda: impl.kv_cache_append(None, k[:2], v[:2]), argument="k_t",
                              what="kv_cache_append with k_t of two positions", idea=idea + ": k_t is (..., 1, d_k)")
    expect_raises_value_error(lambda: impl.kv_cache_append({"k": k[:3]}, k[3:4], v[3:4]), argument="cache",
                              what="kv_cache_append with a cache without 'v'", idea=idea)
    expect_raises_value_error(lambda: impl.blockwise_attention(q, k, v, 0), argument="block_size",
                              what="blockwise_attention with block_size=0", idea=idea + ": a positive block size")
    expect_raises_value_error(lambda: impl.blockwise_attention(q[:4], k, v, 3, causal=True), argument="causal",
                              what=f"blockwise_attention(causal=True) with {4} queries and {N} keys",
                              idea=idea + ": causal_mask(n) needs as many queries as keys")


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_blocks(rng: np.random.Generator) -> tuple[tuple, dict]:
    batch, n_k, d_k, d_v = unseen.sizes(rng, *[(2, 11)] * 4)
    causal = bool(rng.integers(2))
    n_q = n_k if causal else unseen.sizes(rng, (2, 9), avoid=(batch, n_k, d_k, d_v))[0]  # causal: n_q is n_k
    q, k, v = (rng.normal(size=(batch, n, d)) for n, d in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    return (q, k, v, int(rng.integers(1, n_k + 1))), {"causal": causal}


def _unseen_cache(rng: np.random.Generator) -> tuple[dict, np.ndarray, np.ndarray]:
    batch, t, d_k, d_v = unseen.sizes(rng, (2, 8), (2, 7), (2, 8), (2, 8))  # t > 1: never the new position's axis
    cache = {"k": rng.normal(size=(batch, t, d_k)), "v": rng.normal(size=(batch, t, d_v))}
    return cache, rng.normal(size=(batch, 1, d_k)), rng.normal(size=(batch, 1, d_v))


def _own_step(q_t: np.ndarray, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    scores = np.einsum("...id,...jd->...ij", q_t, cache["k"]) / np.sqrt(q_t.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ cache["v"], weights


unseen.register("decoding", {
    "kv_cache_append": unseen.Twin(lambda rng: (_unseen_cache(rng), {}), lambda cache, k_t, v_t: {
        "k": k_t.copy(), "v": v_t.copy()} if cache is None else {
        "k": np.concatenate([cache["k"], k_t], axis=-2), "v": np.concatenate([cache["v"], v_t], axis=-2)},
        CACHE, unseen.close),
    "attend_step": unseen.Twin(lambda rng: ((lambda cache, q_t, _: (q_t, cache))(*_unseen_cache(rng)), {}),
                               _own_step, STEP, unseen.close),
    "blockwise_attention": unseen.Twin(_unseen_blocks, lambda q, k, v, block_size, causal: _attention.__wrapped__(
        q, k, v, causal), ONLINE, unseen.close),
})
