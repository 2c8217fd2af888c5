"""Hidden tests of exercise 11, decoding: one position, long sequences, four batch axes, float32 extremes, views."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.feedback import call_expecting_no_warning, expect_close, expect_dtype, expect_no_nan, expect_shape
from tests.test_11_decoding import require_blockwise, require_the_cache

EXERCISE = "decoding"

CACHE = "the cache grows along axis -2 (positions), the old positions first, dtype kept"
DECODE = "append position t's key and value, then attend with query t over the cache: equal to causal attention"
ONLINE = ("online softmax over key blocks: running maximum from -inf, running sum and weighted sum rescaled by "
          "exp(m_old - m_new), the last shorter block kept, causal positions start + j")


def _attention(q, k, v, causal=False):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


def _qkv(seed, batch, n_q, n_k, d_k, d_v, scale=1.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(*batch, n, d)) for n, d in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    return (scale * q).astype(dtype), k.astype(dtype), v.astype(dtype)


def test_cache_with_four_batch_axes_in_float32(impl):
    _, k, v = _qkv(400, (2, 1, 3, 2), 1, 6, 3, 5, dtype=np.float32)
    cache = None
    for t in range(6):
        cache = impl.kv_cache_append(cache, k[..., t : t + 1, :], v[..., t : t + 1, :])
    if expect_shape(cache.get("k"), (2, 1, 3, 2, 6, 3), what="cache['k'] after 6 appends, batch (2, 1, 3, 2)",
                    idea=CACHE):
        expect_dtype(cache["k"], np.float32, what="cache['k'] built from float32 keys", idea=CACHE)
        expect_close(cache["k"], k, what="cache['k'] after 6 appends", idea=CACHE)
        expect_close(cache["v"], v, what="cache['v'] after 6 appends", idea=CACHE)


def test_causal_decode_of_one_position_and_of_a_long_sequence(impl):
    require_the_cache(impl)
    q, k, v = _qkv(401, (3,), 1, 1, 2, 3)
    expect_close(impl.causal_decode(q, k, v), v, what="causal_decode of one position: its own value", idea=DECODE)
    q, k, v = _qkv(402, (), 41, 41, 1, 2, scale=3.0)
    expect_close(impl.causal_decode(q, k, v), _attention(q, k, v, causal=True), idea=DECODE,
                 what="causal_decode of 41 positions with d_k = 1")


def test_causal_decode_of_a_batch_of_one_sequence(impl):
    # A batch axis of size one is kept, as every other axis is: (1, 5, 3) in, (1, 5, 3) out (no squeeze).
    require_the_cache(impl)
    q, k, v = _qkv(403, (1,), 5, 5, 2, 3)
    out = impl.causal_decode(q, k, v)
    if expect_shape(out, (1, 5, 3), what="causal_decode of a batch of one sequence, q, k (1, 5, 2) and v (1, 5, 3)",
                    idea=DECODE):
        expect_close(out, _attention(q, k, v, causal=True), idea=DECODE,
                     what="causal_decode of a batch of one sequence of 5 positions")


def test_blockwise_of_one_query_one_key_and_a_huge_block(impl):
    q, k, v = _qkv(403, (2,), 1, 1, 3, 4)
    for block_size in (1, 1000):
        expect_close(impl.blockwise_attention(q, k, v, block_size), v, idea=ONLINE,
                     what=f"blockwise_attention of one query and one key, block_size={block_size}")
    require_blockwise(impl, "plain")  # the values above from full attention earn nothing


def test_blockwise_float32_scores_beyond_exp_range(impl):
    # float32 exp overflows above about 88; these scores reach about 1e3.
    q, k, v = _qkv(404, (2, 3), 9, 14, 6, 2, scale=4e2, dtype=np.float32)
    out = call_expecting_no_warning(impl.blockwise_attention, q, k, v, 4, idea=ONLINE,
                                    what="float32 blockwise_attention with scores near 1e3 raises no RuntimeWarning")
    if expect_no_nan(out, what="float32 blockwise_attention with scores near 1e3", idea=ONLINE):
        expect_dtype(out, np.float32, what="blockwise_attention of float32 inputs", idea="dtype in = dtype out")
        expect_close(out, _attention(q, k, v), rtol=1e-4, atol=1e-4, idea=ONLINE,
                     what="float32 blockwise_attention, block_size=4, scores near 1e3")
    require_blockwise(impl, "plain-huge")  # the values above from full attention earn nothing


def test_blockwise_causal_long_sequence_with_odd_blocks(impl):
    q, k, v = _qkv(405, (2,), 50, 50, 3, 4, scale=30.0)
    for block_size in (7, 49):
        expect_close(impl.blockwise_attention(q, k, v, block_size, causal=True), _attention(q, k, v, causal=True),
                     what=f"causal blockwise_attention, n = 50, block_size={block_size}", idea=ONLINE)
    require_blockwise(impl, "causal")  # the values above from full attention earn nothing


def test_blockwise_of_views(impl):
    rng = np.random.default_rng(406)
    q = rng.normal(size=(3, 12, 4))[:, ::2, :]  # (3, 6, 4) strided
    k = np.swapaxes(rng.normal(size=(3, 4, 8)), -1, -2)  # (3, 8, 4)
    v = rng.normal(size=(3, 8, 10))[..., 1::3]  # (3, 8, 3)
    expect_close(impl.blockwise_attention(q, k, v, 3), _attention(q, k, v), idea=ONLINE,
                 what="blockwise_attention of strided and transposed views, block_size=3")
    require_blockwise(impl, "plain")  # the values above from full attention earn nothing
