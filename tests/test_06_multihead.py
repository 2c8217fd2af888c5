"""Exercise 6: multi-head attention. From splitting the heads to masks, cross-attention and golden values."""

from __future__ import annotations

import warnings

import numpy as np

from tests import kinds, unseen
from tests.conventions import HEADS_AFTER_POSITIONS, uniform_rows, with_convention
from tests.crash import raising_through
from tests.feedback import (
    call_expecting_no_warning,
    dtype_words,
    expect,
    expect_close,
    expect_differs,
    expect_no_nan,
    expect_shape,
    nan_idea,
)
from tests.probes import expect_probe, probe
from tests.steps import names

# Every size differs, so a swapped axis changes a shape or a value instead of hiding.
BATCH, N_HEADS, D_HEAD, N_Q, N_K = 2, 3, 4, 5, 7
D_MODEL = N_HEADS * D_HEAD  # 12

SPLIT = ("split_heads: reshape (..., n, d_model) to (..., n, n_heads, d_head) first, "
         "then swap the head axis in front of the positions")
MERGE = ("merge_heads undoes split_heads: swap the head axis back behind the positions, "
         "then reshape to (..., n, n_heads * d_head)")
INIT = "init_multi_head: w_q, w_k, w_v, w_o from init_weight(rng, d_model, d_model), in that order; zero biases"
SHAPES = ("multi-head attention returns (output, weights): output (..., n_q, d_model) and every head's "
          "weights (..., n_heads, n_q, n_k), not their average")
HEADS = "each head attends with its own columns h*d_head:(h+1)*d_head of Q, K and V and nothing else"
SCALE = "each head divides its scores by sqrt(d_head), the size of its own keys, not by sqrt(d_model)"
OUTPUT = "after merging the heads, mix them with the output projection: merged @ w_o + b_o"
CROSS = "cross-attention: queries come from x; keys and values come from kv (both through their projections)"
MASK = ("the mask is shared by all heads: give it a head axis (mask[..., None, :, :]) so (batch, n_q, n_k) "
        "lines up with the scores (batch, n_heads, n_q, n_k)")
ORDER = "attention has no notion of order: without positional information, permuting tokens permutes outputs"


def _params(seed: int, d_model: int = D_MODEL) -> dict[str, np.ndarray]:
    """Random weights and random non-zero biases (never the student's init)."""
    rng = np.random.default_rng(seed)
    params = {name: rng.normal(scale=1.5 / np.sqrt(d_model), size=(d_model, d_model))
              for name in ("w_q", "w_k", "w_v", "w_o")}
    params.update({name: rng.normal(scale=0.5, size=d_model) for name in ("b_q", "b_k", "b_v", "b_o")})
    return params


def _tokens(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def _columns(h: int) -> slice:
    return slice(h * D_HEAD, (h + 1) * D_HEAD)


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _head_weights(x: np.ndarray, kv: np.ndarray, params: dict, h: int, scale_by: int = D_HEAD) -> np.ndarray:
    """Head h's weights written from the formula: softmax(q_h k_h^T / sqrt(d_head))."""
    cols = _columns(h)
    q = x @ params["w_q"][:, cols] + params["b_q"][cols]
    k = kv @ params["w_k"][:, cols] + params["b_k"][cols]
    return _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(scale_by))


BIASES = "queries and keys are full projections, biases included: q = x @ w_q + b_q, k = kv @ w_k + b_k"


def _check_head_weights(weights: np.ndarray, x: np.ndarray, kv: np.ndarray, params: dict, what: str) -> None:
    no_bias = params | {"b_q": np.zeros(D_MODEL), "b_k": np.zeros(D_MODEL)}
    for h in range(N_HEADS):
        expected = _head_weights(x, kv, params, h)
        got = weights[..., h, :, :]
        if np.shape(got) == expected.shape and np.allclose(got, _head_weights(x, kv, params, h, scale_by=D_MODEL)):
            idea = f"yours divides by sqrt(d_model) = sqrt({D_MODEL}), not sqrt(d_head) = sqrt({D_HEAD}); {SCALE}"
        elif np.shape(got) == expected.shape and np.allclose(got, _head_weights(x, kv, params, h, scale_by=D_HEAD**2)):
            # (a blind round: q divided by sqrt(d_head) before scaled_dot_product_attention, which divides again,
            # was told only the rule, and that it was not sqrt(d_model))
            idea = (f"yours divides by d_head = {D_HEAD} itself, sqrt(d_head) twice: scaled_dot_product_attention "
                    f"already divides the scores by sqrt(d_head), so q and k need no scaling of their own; {SCALE}")
        elif np.shape(got) == expected.shape and np.allclose(got, _head_weights(x, kv, params, h, scale_by=1)):
            idea = f"yours does not divide the scores at all; {SCALE}"
        elif np.shape(got) == expected.shape and np.allclose(got, _head_weights(x, kv, no_bias, h)):
            # b_k adds q . b_k to every score of a query alike, which softmax cancels: the weights show b_q only
            # (a blind round's b_q left out was told "b_q and b_k", its b_k there all along).
            idea = (f"yours leaves out the bias b_q (whether b_k is there the weights cannot tell: q . b_k is the "
                    f"same for every key of a query, and softmax cancels it); {BIASES}")
        else:
            idea = f"{HEADS}; {BIASES}; {SCALE}"
        if not expect_close(got, expected, what=f"{what}: weights of head {h}", idea=idea):
            return



# The names of the result arrays, for a diagnosis that points at the ones that differ (tests/steps.py).
names("multi_head_attention", "output", "weights")
names("init_multi_head", "b_k", "b_o", "b_q", "b_v", "w_k", "w_o", "w_q", "w_v")

@probe("multi_head_attention")
def batch_with_biases():
    rng = np.random.default_rng(601)
    return (rng.normal(size=(BATCH, N_Q, D_MODEL)), _params(602), N_HEADS), {}


@probe("multi_head_attention")
def cross_attention_with_padding():
    rng = np.random.default_rng(603)
    mask = (np.arange(N_K) < np.array([N_K, 4])[:, None])[:, None, :]  # (batch, 1, n_k)
    kwargs = {"kv": rng.normal(size=(BATCH, N_K, D_MODEL)), "mask": mask}
    return (rng.normal(size=(BATCH, N_Q, D_MODEL)), _params(604), N_HEADS), kwargs


@probe("split_heads")
def two_batch_axes():
    return (_tokens(605, BATCH, 6, N_Q, D_MODEL), N_HEADS), {}


@probe("init_multi_head")
def seeded_twelve_by_three():
    return (np.random.default_rng(606), D_MODEL, N_HEADS), {}


@probe("multi_head_attention")
def cross_attention_same_length():
    # kv as long as x but holding other tokens: taking keys or values from x runs without error here.
    rng = np.random.default_rng(607)
    x, kv = rng.normal(size=(BATCH, N_Q, D_MODEL)), rng.normal(size=(BATCH, N_Q, D_MODEL))
    return (x, _params(608), N_HEADS), {"kv": kv}


@probe("multi_head_attention")
def per_sequence_mask_batch_equals_heads():
    rng = np.random.default_rng(609)
    mask = rng.random((N_HEADS, N_Q, N_K)) < 0.5
    mask[:, :, 0] = True
    mask[1, 3] = False  # a query of sequence 1 that may see no key
    kwargs = {"kv": rng.normal(size=(N_HEADS, N_K, D_MODEL)), "mask": mask}
    return (rng.normal(size=(N_HEADS, N_Q, D_MODEL)), _params(610), N_HEADS), kwargs


@probe("multi_head_attention")
def one_head():
    # One head, whose weights keep their head axis (exercise 9's model has one head).
    return (np.random.default_rng(633).normal(size=(BATCH, N_Q, D_MODEL)), _params(634), 1), {}


@probe("multi_head_attention")
def self_attention_with_a_causal_mask():
    # One (n, n) mask for every sequence and head, no kv: a mask that is broadcast the wrong way, or checked
    # against the keys of x where kv gives them, shows only here (a blind round's were told of other inputs).
    rng = np.random.default_rng(631)
    mask = np.tril(np.ones((N_Q, N_Q), dtype=bool))
    return (rng.normal(size=(BATCH, N_Q, D_MODEL)), _params(632), N_HEADS), {"mask": mask}


# ---------------------------------------------------------------- split_heads / merge_heads

def _expect_parts_differ(first: tuple, second: tuple, *, what: str, expected: str, passed: str, idea: str) -> bool:
    """``feedback.expect_differs`` on the outputs and on the weights of two results, apart (a part None: not asked).

    A result of the right output beside constant weights, or of constant outputs beside the right weights, differs
    as a whole ("no points without the idea"); ``what`` and ``expected`` name the part as ``{part}``.
    """
    return all(expect_differs(one, other, what=what.format(part=name), expected=expected.format(part=name),
                              passed=passed, idea=idea)
               for name, one, other in zip(("output", "weights"), first, second, strict=True) if other is not None)


def _expect_reads_x(impl, x, params, result: tuple, *, passed: str, idea: str, **kwargs) -> bool:
    """After a test's own check: the output and weights of 2 x are not x's (``result``: those of x, or None).

    The answer for another x of the same shape (x ignored, the parameters and kv used) keeps a mask, rows that sum to
    1, heads apart and b_o's shift ("no points without the idea"); doubling the tokens changes every honest
    query, so its scores, weights and output.
    """
    doubled = impl.multi_head_attention(2.0 * x, params, N_HEADS, **kwargs)
    doubled = doubled if isinstance(doubled, tuple) and len(doubled) == 2 else (doubled, doubled)
    return _expect_parts_differ(doubled, result, what="the {part} for 2 x vs. for x (the same parameters)",
                                expected="other {part}: the queries are x's projections, so twice the tokens score "
                                         "the keys otherwise", passed=passed, idea=idea)


def test_split_heads_shape(impl):
    for shape in [(N_Q, D_MODEL), (BATCH, N_Q, D_MODEL)]:  # more leading axes: their own test below
        x = _tokens(1, *shape)
        out = impl.split_heads(x, N_HEADS)
        after = x.reshape(*shape[:-1], N_HEADS, D_HEAD)  # the heads after the positions: another library's layout
        layout = isinstance(out, np.ndarray) and out.shape == after.shape and np.array_equal(out, after)
        expect_shape(out, (*shape[:-2], N_HEADS, N_Q, D_HEAD),
                     what=f"split_heads of a {shape} array with n_heads={N_HEADS}",
                     idea=with_convention(SPLIT, HEADS_AFTER_POSITIONS if layout else ""))


def test_split_heads_gives_each_head_its_column_block(impl):
    x = _tokens(2, BATCH, N_Q, D_MODEL)
    out = impl.split_heads(x, N_HEADS)
    if expect_shape(out, (BATCH, N_HEADS, N_Q, D_HEAD), what="split_heads of a (2, 5, 12) array", idea=SPLIT):
        for h in range(N_HEADS):
            expect_close(out[:, h], x[..., _columns(h)], atol=0.0, rtol=0.0,
                         what=f"split_heads(x)[:, {h}] (head {h}) equals x[..., {h * D_HEAD}:{(h + 1) * D_HEAD}]",
                         idea="head h owns the feature columns h*d_head:(h+1)*d_head of every position")


def test_split_heads_keeps_positions_apart(impl):
    # Every feature of position p holds the number p: a head's row p must hold only p.
    x = np.repeat(np.arange(N_Q, dtype=float)[:, None], D_MODEL, axis=1)
    out = impl.split_heads(x, N_HEADS)
    if expect_shape(out, (N_HEADS, N_Q, D_HEAD), what="split_heads of a (5, 12) array", idea=SPLIT):
        expected = np.broadcast_to(np.arange(N_Q, dtype=float)[:, None], (N_HEADS, N_Q, D_HEAD))
        expect_close(out, expected, atol=0.0, rtol=0.0,
                     what="split_heads of tokens whose features all equal their position: row p of every head",
                     idea="reshaping straight to (n_heads, n, d_head) mixes positions into heads; "
                          "reshape to (n, n_heads, d_head) and then swap axes")


def test_merge_heads_shape(impl):
    for shape in [(N_HEADS, N_Q, D_HEAD), (BATCH, N_HEADS, N_Q, D_HEAD)]:
        out = impl.merge_heads(_tokens(3, *shape))
        expect_shape(out, (*shape[:-3], N_Q, D_MODEL), what=f"merge_heads of a {shape} array", idea=MERGE)


def test_merge_heads_inverts_split_heads(impl):
    x = _tokens(4, BATCH, N_Q, D_MODEL)
    expect_close(impl.merge_heads(impl.split_heads(x, N_HEADS)), x, atol=0.0, rtol=0.0,
                 what="merge_heads(split_heads(x)) gives back x exactly", idea=MERGE)
    heads = _tokens(5, BATCH, N_HEADS, N_Q, D_HEAD)
    expect_close(impl.split_heads(impl.merge_heads(heads), N_HEADS), heads, atol=0.0, rtol=0.0,
                 what="split_heads(merge_heads(heads)) gives back the heads exactly", idea=MERGE)
    # The contrast: split_heads and merge_heads that both give x back (or both negate it) invert each other too.
    expect_shape(impl.split_heads(x, N_HEADS), (BATCH, N_HEADS, N_Q, D_HEAD),
                 what=f"split_heads(x, {N_HEADS}) of x of shape {x.shape}, after merge_heads undid it", idea=MERGE)


# ---------------------------------------------------------------- init_multi_head

def test_init_multi_head_keys_and_shapes(impl):
    params = impl.init_multi_head(np.random.default_rng(6), D_MODEL, N_HEADS)
    names = {"w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"}
    if expect(isinstance(params, dict) and set(params) == names, what="the keys of init_multi_head's dict",
              expected=str(sorted(names)), observed=str(sorted(params) if isinstance(params, dict) else params),
              idea=INIT):
        for name in sorted(names):
            shape = (D_MODEL, D_MODEL) if name.startswith("w") else (D_MODEL,)
            expect_shape(params[name], shape, what=f"init_multi_head(...)[{name!r}] for d_model={D_MODEL}",
                         idea=INIT)


def test_init_multi_head_biases_are_zero(impl):
    params = impl.init_multi_head(np.random.default_rng(7), D_MODEL, N_HEADS)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        expect_close(params[name], np.zeros(D_MODEL), atol=0.0, rtol=0.0,
                     what=f"init_multi_head(...)[{name!r}]", idea="biases start at zero")
    # dict.fromkeys(names, np.zeros(d)) gives the four names one array: a step in place (p -= lr * g) then
    # moves every bias by every gradient.
    arrays = [(name, value) for name, value in params.items() if isinstance(value, np.ndarray)]
    shared = [(a, b) for i, (a, x) in enumerate(arrays) for b, y in arrays[i + 1:] if np.shares_memory(x, y)]
    expect(not shared, what="the arrays of init_multi_head(...)", expected="eight arrays of their own",
           observed=f"{', '.join(f'{a} and {b}' for a, b in shared)} are one array (the same memory)",
           idea="every parameter is its own array: np.zeros(d_model) once per bias, not one array for all four")
    # The contrast: the weights are drawn (zeros everywhere have zero biases, eight arrays of their own, too).
    expect_differs(params.get("w_q"), np.zeros((D_MODEL, D_MODEL)), what="init_multi_head(...)['w_q'] against zeros",
                   expected="random weights: only the biases start at zero", passed="the biases are zero",
                   idea="init_weight(rng, d_model, d_model) draws each weight matrix")


def test_init_multi_head_weight_scale_and_draw_order(impl):
    d_model = 48
    params = impl.init_multi_head(np.random.default_rng(8), d_model, 4)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        std = float(np.std(params[name]))
        expect(abs(std * np.sqrt(d_model) - 1.0) < 0.1, what=f"standard deviation of {name} for d_model=48",
               expected=f"about 1/sqrt(d_model) = {1 / np.sqrt(d_model):.4f}", observed=f"{std:.4f}",
               idea="init_weight(rng, d_model, d_model) draws with std 1/sqrt(d_in)")
    rng = np.random.default_rng(8)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        expected = rng.normal(0.0, 1.0 / np.sqrt(d_model), size=(d_model, d_model))
        expect_close(params[name], expected, rtol=1e-12, atol=0.0,
                     what=f"{name} drawn from rng(8) after the matrices before it",
                     idea="draw w_q, w_k, w_v, w_o in that order, each with one init_weight call on the same rng")


# ---------------------------------------------------------------- multi_head_attention

def test_output_and_weight_shapes(impl):
    params = _params(10)
    # Then one head (exercise 9's model has one; a blind round's dropped the head axis of its weights there).
    for shape, heads in [((N_Q, D_MODEL), N_HEADS), ((BATCH, N_Q, D_MODEL), N_HEADS), ((BATCH, N_Q, D_MODEL), 1)]:
        result = impl.multi_head_attention(_tokens(11, *shape), params, heads)
        if expect(isinstance(result, tuple) and len(result) == 2, what="multi_head_attention returns",
                  expected="a tuple (output, weights)", observed=type(result).__name__, idea=SHAPES):
            output, weights = result
            batch = shape[:-2]
            expect_shape(output, (*batch, N_Q, D_MODEL), what=f"the output for x of shape {shape}", idea=SHAPES)
            expect_shape(weights, (*batch, heads, N_Q, N_Q),
                         what=f"the weights for x of shape {shape} and {heads} head{'s' * (heads > 1)}",
                         idea=SHAPES)


def test_every_head_has_rows_summing_to_one(impl):
    _, weights = impl.multi_head_attention(_tokens(12, BATCH, N_Q, D_MODEL), _params(13), N_HEADS)
    if expect_shape(weights, (BATCH, N_HEADS, N_Q, N_Q), what="the weights of self-attention", idea=SHAPES):
        expect_close(weights.sum(axis=-1), np.ones((BATCH, N_HEADS, N_Q)),
                     what="every head's weight rows sum to 1",
                     idea="each head runs its own softmax over the keys (the last axis)")
        expect(bool(np.all(weights >= 0)), what="attention weights are never negative",
               expected="all entries >= 0", observed=f"minimum {weights.min():.4g}", idea=SHAPES)
        _expect_reads_x(impl, _tokens(12, BATCH, N_Q, D_MODEL), _params(13), (None, weights),
                        passed="every head's rows sum to 1", idea="each head softmaxes its own scores of x")


def test_output_projection_is_used(impl):
    x, params = _tokens(14, BATCH, N_Q, D_MODEL), _params(15)
    output, weights = impl.multi_head_attention(x, params, N_HEADS)
    other_w_o = params | {"w_o": _params(16)["w_o"]}
    output_2, weights_2 = impl.multi_head_attention(x, other_w_o, N_HEADS)
    expect(not np.allclose(output_2, output), what="changing w_o changes the output",
           expected="a different output", observed="the same output", idea=OUTPUT)
    expect_close(weights_2, weights, what="changing w_o leaves the attention weights alone",
                 idea="w_o acts after attention, on the merged heads")
    shift = np.random.default_rng(17).normal(size=D_MODEL)
    shifted, _ = impl.multi_head_attention(x, params | {"b_o": params["b_o"] + shift}, N_HEADS)
    expect_close(shifted - output, np.broadcast_to(shift, output.shape), rtol=1e-9, atol=1e-12,
                 what="adding a vector to b_o shifts every output row by that vector", idea=OUTPUT)
    _expect_reads_x(impl, x, params, (output, weights), passed="w_o and b_o act on the merged heads", idea=OUTPUT)


def test_head_weights_depend_only_on_their_own_columns(impl):
    x, params = _tokens(18, BATCH, N_Q, D_MODEL), _params(19)
    _, weights = impl.multi_head_attention(x, params, N_HEADS)
    if not expect_shape(weights, (BATCH, N_HEADS, N_Q, N_Q), what="the weights of self-attention", idea=SHAPES):
        return
    noise = _params(20)
    for h in range(N_HEADS):
        others = np.ones(D_MODEL, dtype=bool)
        others[_columns(h)] = False
        changed = {name: np.where(others, params[name] + noise[name], params[name])
                   for name in ("w_q", "w_k", "b_q", "b_k")}
        _, weights_2 = impl.multi_head_attention(x, params | changed, N_HEADS)
        expect_close(weights_2[:, h], weights[:, h],
                     what=f"head {h}'s weights after changing only the other heads' columns of W_Q, W_K, b_Q, b_K",
                     idea=HEADS + "; reshaping without the transpose mixes positions and columns")
        expect(not np.allclose(np.delete(weights_2, h, axis=1), np.delete(weights, h, axis=1)),
               what=f"the other heads' weights after changing their columns of W_Q and W_K (head {h} kept)",
               expected="different weights", observed="the same weights", idea=HEADS)
    _expect_reads_x(impl, x, params, (None, weights), idea=HEADS,
                    passed="each head's weights follow its own columns of W_Q and W_K")


def test_head_context_uses_its_own_value_columns(impl):
    # With w_o = identity and b_o = 0 the output is the merged context: its column block h
    # must be head h's weights times head h's values.
    x, params = _tokens(21, BATCH, N_Q, D_MODEL), _params(22)
    params |= {"w_o": np.eye(D_MODEL), "b_o": np.zeros(D_MODEL)}
    output, weights = impl.multi_head_attention(x, params, N_HEADS)
    if not expect_shape(weights, (BATCH, N_HEADS, N_Q, N_Q), what="the weights of self-attention", idea=SHAPES):
        return
    for h in range(N_HEADS):
        cols = _columns(h)
        values = x @ params["w_v"][:, cols] + params["b_v"][cols]
        unbiased = np.allclose(output[..., cols], weights[:, h] @ (x @ params["w_v"][:, cols]))
        expect_close(output[..., cols], weights[:, h] @ values,
                     what=f"with w_o = I, output columns {cols.start}:{cols.stop} (head {h}'s context)",
                     idea=("yours leaves out the bias b_v: " if unbiased else "")
                     + "head h's context is its weights times its own values (columns h*d_head:(h+1)*d_head "
                       "of x @ w_v + b_v); merge_heads must put it back in those columns")
    # The contrast: the values reach the output (zero weights and a zero output agree above, computing nothing).
    changed = params | {"w_v": params["w_v"] + np.random.default_rng(23).normal(size=params["w_v"].shape)}
    output2, _ = impl.multi_head_attention(x, changed, N_HEADS)
    expect_differs(output2, output, what="with w_o = I, the output after changing w_v (every head's values)",
                   expected="a different output: each head's context is a weighted average of its own values",
                   passed="each head's columns are its weights times its values", idea=HEADS)


def test_scores_are_scaled_by_sqrt_d_head(impl):
    x, params = _tokens(23, BATCH, N_Q, D_MODEL), _params(24)
    _, weights = impl.multi_head_attention(x, params, N_HEADS)
    if expect_shape(weights, (BATCH, N_HEADS, N_Q, N_Q), what="the weights of self-attention", idea=SHAPES):
        _check_head_weights(weights, x, x, params, "self-attention with biases")


def test_cross_attention_with_kv(impl):
    x, kv, params = _tokens(25, BATCH, N_Q, D_MODEL), _tokens(26, BATCH, N_K, D_MODEL), _params(27)
    output, weights = impl.multi_head_attention(x, params, N_HEADS, kv=kv)
    if not (expect_shape(weights, (BATCH, N_HEADS, N_Q, N_K), what="the weights with 5 queries and 7 keys",
                         idea=CROSS)
            and expect_shape(output, (BATCH, N_Q, D_MODEL), what="the output with 5 queries and 7 keys",
                             idea=CROSS)):
        return
    _check_head_weights(weights, x, kv, params, "cross-attention")
    output_2, _ = impl.multi_head_attention(x, params, N_HEADS, kv=kv + _tokens(28, BATCH, N_K, D_MODEL))
    expect(not np.allclose(output_2, output), what="changing kv changes the output",
           expected="a different output", observed="the same output", idea=CROSS)
    moved = x.copy()
    moved[:, 0] += 1.0
    output_3, _ = impl.multi_head_attention(moved, params, N_HEADS, kv=kv)
    expect_close(output_3[:, 1:], output[:, 1:], what="changing query 0 of x leaves the other output rows alone",
                 idea=CROSS)
    identity = params | {"w_o": np.eye(D_MODEL), "b_o": np.zeros(D_MODEL)}
    context, weights = impl.multi_head_attention(x, identity, N_HEADS, kv=kv)
    for h in range(N_HEADS):
        cols = _columns(h)
        values = kv @ params["w_v"][:, cols] + params["b_v"][cols]
        unbiased = np.allclose(context[..., cols], weights[:, h] @ (kv @ params["w_v"][:, cols]))
        expect_close(context[..., cols], weights[:, h] @ values,
                     what=f"with w_o = I, head {h}'s context in cross-attention",
                     idea=f"yours leaves out the bias b_v: v = kv @ w_v + b_v; {CROSS}" if unbiased else CROSS)


def test_shared_mask_blocks_keys_in_every_head(impl):
    x, kv, params = _tokens(29, BATCH, N_Q, D_MODEL), _tokens(30, BATCH, N_K, D_MODEL), _params(31)
    mask = np.random.default_rng(32).random((N_Q, N_K)) < 0.5
    mask[np.arange(N_Q), np.arange(N_Q)] = True  # every query keeps at least one key
    output, weights = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=kv)
    if expect_shape(weights, (BATCH, N_HEADS, N_Q, N_K), what="the weights with a (5, 7) mask", idea=MASK):
        expect_close(weights[..., ~mask], np.zeros((BATCH, N_HEADS, int((~mask).sum()))), atol=0.0, rtol=0.0,
                     what="weights of blocked keys, in every head and sequence", idea=MASK)
        expect_close(weights.sum(axis=-1), np.ones((BATCH, N_HEADS, N_Q)),
                     what="weight rows with a mask still sum to 1", idea=MASK)
    blocked_everywhere = N_K - 1  # key 6 is never on the diagonal; block it for every query
    mask[:, blocked_everywhere] = False
    output, _ = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=kv)
    changed_kv = kv.copy()
    changed_kv[:, blocked_everywhere] += 10.0
    output_2, _ = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=changed_kv)
    expect_close(output_2, output, what="changing a key/value that every query is blocked from",
                 idea="a blocked key contributes nothing: weight 0 before the values are mixed")
    _expect_reads_x(impl, x, params, (output, None), mask=mask, kv=kv, idea=MASK,
                    passed="blocked keys get weight 0 and change nothing")


def test_additive_float_masks_are_added_to_every_head_s_scores(impl):
    # The docstring allows a bool or an additive float mask. Float masks of finite biases (ALiBi's) and of 0 and
    # -inf (a causal one): each is added to every head's scaled scores as it is, never read as a bool nor
    # compared with 0 (a blind round: a mask cast to bool, one dropped and one read as mask == 0 all passed).
    x, kv, params = _tokens(37, BATCH, N_Q, D_MODEL), _tokens(38, BATCH, N_K, D_MODEL), _params(39)
    biases = -0.7 * np.abs(np.arange(N_Q)[:, None] - np.arange(N_K)[None, :])  # finite, 0 on the diagonal
    causal = np.where(np.arange(N_K)[None, :] <= np.arange(N_Q)[:, None] + 1, 0.0, -np.inf)  # (5, 7)
    for mask, what in ((biases, "an additive mask of finite biases (5, 7), 0 on the diagonal"),
                       (causal, "an additive mask of 0 and -inf (5, 7)")):
        output, weights = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=kv)
        if not expect_shape(weights, (BATCH, N_HEADS, N_Q, N_K), what=f"the weights with {what}", idea=MASK):
            return
        for h in range(N_HEADS):
            cols = _columns(h)
            q = x @ params["w_q"][:, cols] + params["b_q"][cols]
            k = kv @ params["w_k"][:, cols] + params["b_k"][cols]
            expected = _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(D_HEAD) + mask)
            if not expect_close(weights[:, h], expected, what=f"head {h}'s weights with {what}",
                                idea="an additive float mask is added to the scaled scores as it is, in every "
                                     "head (softmax(q k^T / sqrt(d_head) + mask)): it is no bool, and a finite "
                                     "bias is not 'blocked'; " + MASK):
                return


def test_per_sequence_mask_when_batch_equals_heads(impl):
    # batch == n_heads on purpose: a mask missing its head axis broadcasts without error here,
    # and sequence b's mask silently lands on head b of every sequence.
    batch = N_HEADS
    x, kv, params = _tokens(33, batch, N_Q, D_MODEL), _tokens(34, batch, N_K, D_MODEL), _params(35)
    mask = np.random.default_rng(36).random((batch, N_Q, N_K)) < 0.4
    for b in range(batch):
        mask[b, np.arange(N_Q), (np.arange(N_Q) + 2 * b) % N_K] = True
    output, weights = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=kv)
    if not expect_shape(weights, (batch, N_HEADS, N_Q, N_K), what="the weights with a (3, 5, 7) mask", idea=MASK):
        return
    blocked = np.concatenate([weights[b][:, ~mask[b]] for b in range(batch)], axis=-1)
    expect_close(blocked, np.zeros_like(blocked), atol=0.0, rtol=0.0,
                 what=f"every sequence's weights for the keys its own mask blocks, in all {N_HEADS} heads", idea=MASK)
    alone = [impl.multi_head_attention(x[b], params, N_HEADS, mask=mask[b], kv=kv[b]) for b in range(batch)]
    expect_close(output, np.stack([out for out, _ in alone]),
                 what="the output of the batch vs. each sequence run on its own with its own (5, 7) mask", idea=MASK)
    expect_close(weights, np.stack([w for _, w in alone]),
                 what="the weights of the batch vs. each sequence run on its own with its own (5, 7) mask", idea=MASK)
    # The contrast: each sequence gets its own result (one result for every sequence is each one's "alone" too).
    _expect_parts_differ(alone[1], alone[0],
                         what="the {part} of sequence 1 vs. sequence 0 (other tokens, another mask)",
                         expected="different {part}: each sequence attends over its own keys with its own mask",
                         passed="the batch gives each sequence what it gets alone", idea=MASK)


def test_padding_mask_hides_padded_keys(impl):
    lengths = np.array([N_K, 4])
    mask = (np.arange(N_K) < lengths[:, None])[:, None, :]  # (batch, 1, n_k)
    x, kv, params = _tokens(37, BATCH, N_Q, D_MODEL), _tokens(38, BATCH, N_K, D_MODEL), _params(39)
    output, weights = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=kv)
    if not expect_shape(weights, (BATCH, N_HEADS, N_Q, N_K), what="the weights with a (2, 1, 7) padding mask",
                        idea=MASK):
        return
    expect_close(weights[1, ..., 4:], np.zeros((N_HEADS, N_Q, N_K - 4)), atol=0.0, rtol=0.0,
                 what="sequence 1 (length 4): weights of its padded keys 4..6", idea=MASK)
    short, _ = impl.multi_head_attention(x[1], params, N_HEADS, kv=kv[1, :4])
    expect_close(output[1], short, what="sequence 1 with padded keys masked vs. with the padding cut off",
                 idea="padding invariance: masked padding must change nothing, " + MASK)
    # The contrast: the real keys reach the result (zeros hide the padding too).
    kv2 = kv.copy()
    kv2[1, :4] += np.random.default_rng(40).normal(size=kv2[1, :4].shape)
    output2, weights2 = impl.multi_head_attention(x, params, N_HEADS, mask=mask, kv=kv2)
    _expect_parts_differ((output2[1], weights2[1]), (output[1], weights[1]),
                         what="sequence 1's {part} after changing its real keys 0..3",
                         expected="other {part}: the real keys are allowed, so they reach the weights and the output",
                         passed="the padding changes nothing", idea=MASK)


def test_fully_masked_query_gives_zero_weights(impl):
    x, kv, params = _tokens(40, BATCH, N_Q, D_MODEL), _tokens(41, BATCH, N_K, D_MODEL), _params(42)
    mask = np.ones((N_Q, N_K), dtype=bool)
    mask[2] = False
    output, weights = call_expecting_no_warning(
        impl.multi_head_attention, x, params, N_HEADS, mask=mask, kv=kv,
        what="multi-head attention with a query that may see no key raises no RuntimeWarning",
        idea="a query with every key blocked gets all-zero weights (softmax of an all -inf row)")
    blocked = np.zeros(np.shape(output), dtype=bool)
    if blocked.ndim == 3 and blocked.shape[1] > 2:
        blocked[:, 2] = True  # (query 2's output row)
    if expect_no_nan(output, what="the output when query 2 may see no key",
                     idea=nan_idea(output, blocked, "a fully blocked row must give zeros, not NaN")):
        rows = np.zeros((BATCH, N_HEADS, N_Q), dtype=bool)
        rows[:, :, 2] = True
        expect_close(weights[:, :, 2], np.zeros((BATCH, N_HEADS, N_K)), atol=0.0, rtol=0.0,
                     what="the weights of query 2, whose keys are all blocked",
                     idea=with_convention("all-zero weights, not NaN", uniform_rows(weights, rows)))
        expect_close(output[:, 2], np.broadcast_to(params["b_o"], (BATCH, D_MODEL)),
                     what="the output row of query 2: a zero context, projected, is just b_o", idea=OUTPUT)
        _expect_reads_x(impl, x, params, (output, weights), mask=mask, kv=kv, idea=OUTPUT,
                        passed="the blocked query gets zero weights and outputs b_o")


def test_self_attention_is_permutation_equivariant(impl):
    x, params = _tokens(43, BATCH, N_Q, D_MODEL), _params(44)
    perm = np.array([3, 0, 4, 1, 2])
    output, weights = impl.multi_head_attention(x, params, N_HEADS)
    output_p, weights_p = impl.multi_head_attention(x[:, perm], params, N_HEADS)
    expect_close(output_p, output[:, perm], what="the output for shuffled tokens vs. the shuffled output",
                 idea=ORDER)
    if expect_shape(weights_p, (BATCH, N_HEADS, N_Q, N_Q), what="the weights of self-attention", idea=SHAPES):
        expect_close(weights_p, weights[:, :, perm][:, :, :, perm],
                     what="the weights for shuffled tokens vs. the weights with rows and columns shuffled",
                     idea=ORDER)
    # The contrast: shuffled, the result moved with the tokens (it is not the result for the tokens in order).
    _expect_parts_differ((output_p, weights_p), (output, weights),
                         what="the {part} for shuffled tokens vs. for the tokens in order",
                         expected="other {part}: each row follows its own token, so the rows move with them",
                         passed="permuting the tokens permutes the outputs", idea=ORDER)


def test_reference_values(impl):
    expect_probe(impl, "multi_head_attention/batch_with_biases",
                 what="multi-head attention with random weights and biases, 2 x 5 tokens, 3 heads",
                 idea="project, split into heads, attend per head (scaled by sqrt(d_head)), merge, apply w_o, b_o")
    expect_probe(impl, "multi_head_attention/cross_attention_with_padding",
                 what="cross-attention (5 queries, 7 keys) with a (2, 1, 7) padding mask",
                 idea=CROSS + "; " + MASK)
    expect_probe(impl, "multi_head_attention/cross_attention_same_length",
                 what="cross-attention with kv as long as x (5 tokens each) but holding other tokens", idea=CROSS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fully masked query test reports them
        expect_probe(impl, "multi_head_attention/per_sequence_mask_batch_equals_heads",
                     what="3 sequences, 3 heads, one (5, 7) mask per sequence (sequence 1's query 3 sees no key)",
                     idea=MASK)
    expect_probe(impl, "init_multi_head/seeded_twelve_by_three", what="init_multi_head(default_rng(606), 12, 3)",
                 idea=INIT, rtol=1e-12, atol=0.0)


def test_rejects_heads_that_do_not_divide_d_model(impl):
    x, params = _tokens(45, N_Q, D_MODEL), _params(46)
    calls = {
        "multi_head_attention(x, params, n_heads=5) with d_model=12":
            lambda: impl.multi_head_attention(x, params, 5),
        "split_heads(x, n_heads=5) with d_model=12": lambda: impl.split_heads(x, 5),
        "init_multi_head(rng, d_model=12, n_heads=5)":
            lambda: impl.init_multi_head(np.random.default_rng(0), D_MODEL, 5),
    }
    idea = "bad input raises ValueError naming the argument: n_heads must divide d_model (every head gets d_head)"
    for what, call in calls.items():
        try:
            with raising_through():
                call()
        except ValueError as error:
            expect("n_heads" in str(error) or "d_model" in str(error), what=what,
                   expected="a ValueError whose message names n_heads or d_model",
                   observed=f"ValueError({str(error)!r})", idea=idea)
        except Exception as error:  # the student raised something else
            expect(False, what=what, expected="ValueError naming n_heads or d_model",
                   observed=f"{type(error).__name__}: {error}", idea=idea)
        else:
            expect(False, what=what, expected="ValueError naming n_heads or d_model",
                   observed="no exception: the bad input was accepted", idea=idea)


# ---------------------------------------------------------------- every kind of input


@probe("merge_heads")
def heads_with_two_batch_axes():
    return (_tokens(611, BATCH, 6, N_HEADS, N_Q, D_HEAD),), {}


@probe("merge_heads")
def heads_without_batch_axes():
    # For the diagnosis and the blame (a wrong merge_heads fails its own probes first).
    return (_tokens(612, N_HEADS, N_Q, D_HEAD),), {}


@probe("merge_heads")
def heads_with_one_batch_axis():
    # The common case (batch, heads, n, d_head): a merge written for exactly four axes is right here only.
    return (_tokens(613, BATCH, N_HEADS, N_Q, D_HEAD),), {}


def test_split_and_merge_with_more_leading_axes(impl):
    idea = ("count the axes from the end: (..., n, d_model) <-> (..., n_heads, n, d_head) for any number of "
            "leading axes (none included), so swap axes -3 and -2, never fixed numbers")
    for lead in kinds.MORE_LEADING:
        x = kinds.normal(f"split/lead{len(lead)}", (*lead, N_Q, D_MODEL))
        expected = np.stack([x[..., _columns(h)] for h in range(N_HEADS)], axis=-3)
        expect_close(impl.split_heads(x, N_HEADS), expected, atol=0.0, rtol=0.0, idea=SPLIT + "; " + idea,
                     what=f"split_heads of a {x.shape} array ({kinds.describe_axes(lead)})")
        expect_close(impl.merge_heads(expected), x, atol=0.0, rtol=0.0, idea=MERGE + "; " + idea,
                     what=f"merge_heads of a {expected.shape} array ({kinds.describe_axes(lead)})")
    expect_probe(impl, "split_heads/two_batch_axes", what="split_heads of a fixed (2, 6, 5, 12) array, 3 heads",
                 idea=SPLIT + "; " + idea)
    expect_probe(impl, "merge_heads/heads_with_two_batch_axes", idea=MERGE + "; " + idea,
                 what="merge_heads of a fixed (2, 6, 3, 5, 4) array")


def test_two_leading_batch_axes_and_float32(impl):
    idea = ("batch axes are just more leading axes: the function must give each sequence what it gives it "
            "alone, for any number of leading axes; and dtype in = dtype out")
    x, params = _tokens(613, 3, BATCH, N_Q, D_MODEL), _params(614)
    mask = np.tril(np.ones((N_Q, N_Q), dtype=bool))
    output, weights = impl.multi_head_attention(x, params, N_HEADS, mask=mask)
    alone = [[impl.multi_head_attention(x[i, j], params, N_HEADS, mask=mask) for j in range(BATCH)] for i in range(3)]
    expect_close(output, np.array([[out for out, _ in row] for row in alone]), idea=idea,
                 what=f"the output for x of shape {x.shape} (2 leading batch axes) vs. each sequence alone")
    expect_close(weights, np.array([[w for _, w in row] for row in alone]), idea=idea,
                 what=f"the weights for x of shape {x.shape} (2 leading batch axes) vs. each sequence alone")
    # The contrast: each sequence gets its own result (one result for every sequence is each one's "alone" too).
    _expect_parts_differ(alone[0][1], alone[0][0], idea=idea,
                         what="the {part} of sequence x[0, 1] vs. x[0, 0] (other tokens)",
                         expected="different {part}: each sequence attends over its own tokens",
                         passed="each sequence gets what it gets alone")
    x32 = x[0].astype(np.float32)
    params32 = {name: value.astype(np.float32) for name, value in params.items()}
    output32, weights32 = impl.multi_head_attention(x32, params32, N_HEADS, mask=mask.astype(np.float32) - 1.0)
    for name, value in (("output", output32), ("weights", weights32)):
        expect(getattr(value, "dtype", None) == np.float32, what=f"the {name} of float32 x, params and mask",
               expected=dtype_words(np.float32), observed=f"dtype {getattr(value, 'dtype', type(value).__name__)}",
               idea=idea + ": cast an additive mask to the scores' dtype, no float64 constants")


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_heads(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    batch, n, n_heads, d_head = unseen.sizes(rng, (1, 4), (2, 6), (2, 7), (2, 7))  # d_model = n_heads * d_head >= 6
    return rng.normal(size=(batch, n, n_heads * d_head)), n_heads


def _own_split(x: np.ndarray, n_heads: int) -> np.ndarray:
    return np.stack(np.split(x, n_heads, axis=-1), axis=-3)  # head h: the h-th block of d_head columns


def _unseen_mha(rng: np.random.Generator) -> tuple[tuple, dict]:
    x, n_heads = _unseen_heads(rng)
    return (x, _params(int(rng.integers(2**31)), x.shape[-1]), n_heads), {}


def _own_mha(x: np.ndarray, params: dict, n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    q, k, v = (_own_split(x @ params[f"w_{c}"] + params[f"b_{c}"], n_heads) for c in "qkv")
    weights = _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    merged = np.concatenate(list(np.moveaxis(weights @ v, -3, 0)), axis=-1)
    return merged @ params["w_o"] + params["b_o"], weights


def _own_init_heads(rng: np.random.Generator, d_model: int, n_heads: int) -> dict[str, np.ndarray]:
    params = {name: rng.normal(0.0, 1.0 / np.sqrt(d_model), size=(d_model, d_model))
              for name in ("w_q", "w_k", "w_v", "w_o")}
    return params | {name: np.zeros(d_model) for name in ("b_q", "b_k", "b_v", "b_o")}


def _unseen_init_heads(rng: np.random.Generator) -> tuple[tuple, dict]:
    n_heads, d_head = unseen.sizes(rng, (1, 5), (1, 4))
    return (unseen.generator(rng), n_heads * d_head, n_heads), {}


unseen.register("multihead", {
    "init_multi_head": unseen.Twin(_unseen_init_heads, _own_init_heads, INIT, unseen.close),
    "split_heads": unseen.Twin(lambda rng: (_unseen_heads(rng), {}), _own_split, SPLIT),
    "merge_heads": unseen.Twin(lambda rng: ((_own_split(*_unseen_heads(rng)),), {}),
                               lambda x: np.concatenate(list(np.moveaxis(x, -3, 0)), axis=-1), MERGE),
    "multi_head_attention": unseen.Twin(_unseen_mha, _own_mha, SHAPES, unseen.close),
})
