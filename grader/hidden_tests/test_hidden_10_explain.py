"""Hidden tests of exercise 10, explain: one token, many classes, float32 views, long stacks, ties everywhere."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.conventions import eps_denominator, total_variation
from tests.feedback import expect_close, expect_dtype, expect_shape
from tests.test_10_explain import _rollout_by_hand

EXERCISE = "explain"

OCCLUSION = ("importance[j] = p(c | sentence) - p(c | token j replaced), c the class predicted for the original "
             "sentence, the token replaced at its own position")
GXI = "gradient x input: the product summed over the last (feature) axis, one signed number per token"
ROLLOUT = "rollout: per layer 0.5 * W + 0.5 * I, rows renormalised, multiplied A_L @ ... @ A_1"
SPEARMAN = "Spearman: the correlation of the ranks, tied values sharing their average rank"


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class _BagModel:
    """Attends by position; token t brings values[t]; a linear readout over many classes."""

    def __init__(self, seed, seq, vocab, d, n_classes):
        rng = np.random.default_rng(seed)
        self.weights = _softmax(rng.normal(scale=2.0, size=seq))
        self.values = rng.normal(size=(vocab, d))
        self.values[0] = 0.0
        self.w_out = rng.normal(size=(d, n_classes))

    def __call__(self, tokens):
        tokens = np.asarray(tokens)
        return _softmax(np.einsum("j,bjd->bd", self.weights, self.values[tokens]) @ self.w_out)


def _occlusion(model, tokens, replacement):
    original = model(tokens[None])[0]
    c = int(original.argmax())
    rows = np.repeat(tokens[None], len(tokens), axis=0)
    rows[np.arange(len(tokens)), np.arange(len(tokens))] = replacement
    return original[c] - model(rows)[:, c]


def _occlusion_idea(out, model, tokens, replacement):
    """OCCLUSION, after the convention ``out`` follows when it is another library's (tests/conventions.py)."""
    rows = np.repeat(tokens[None], len(tokens), axis=0)
    rows[np.arange(len(tokens)), np.arange(len(tokens))] = replacement
    convention = total_variation(out, model(tokens[None])[0], model(rows))
    return f"{convention}; {OCCLUSION}" if convention else OCCLUSION


def _expect_rank(observed, a, b, expected, *, what):
    convention = eps_denominator(observed, _ranks(a), _ranks(b))
    return expect_close(observed, expected, what=what, idea=f"{convention}; {SPEARMAN}" if convention else SPEARMAN,
                        tiny_term=convention)


def _ranks(x):
    return np.array([np.sum(x < value) + (np.sum(x == value) - 1) / 2 for value in x])


def test_occlusion_with_many_classes_and_a_long_sentence(impl):
    model = _BagModel(300, seq=23, vocab=40, d=6, n_classes=17)
    tokens = np.random.default_rng(300).integers(1, 40, size=23)
    out = impl.occlusion_importance(model, tokens, 0)
    if expect_shape(out, (23,), what="occlusion_importance of a 23-token sentence, 17 classes", idea=OCCLUSION):
        expect_close(out, _occlusion(model, tokens, 0), what="occlusion over 17 classes",
                     idea=_occlusion_idea(out, model, tokens, 0))


def test_occlusion_of_one_token(impl):
    model = _BagModel(301, seq=1, vocab=5, d=3, n_classes=4)
    tokens = np.array([3], dtype=np.int32)
    out = impl.occlusion_importance(model, tokens, 0)
    if expect_shape(out, (1,), what="occlusion_importance of a one-token sentence (int32 ids)", idea=OCCLUSION):
        expect_close(out, _occlusion(model, tokens, 0), what="occlusion of the only token", idea=OCCLUSION)


def test_gradient_x_input_float32_views_with_four_batch_axes(impl):
    rng = np.random.default_rng(302)
    grad = rng.normal(size=(2, 1, 3, 2, 9, 7)).astype(np.float32)[..., ::2, :]  # (2, 1, 3, 2, 5, 7) strided
    inputs = np.swapaxes(rng.normal(size=(2, 1, 3, 2, 7, 5)).astype(np.float32), -1, -2)
    out = impl.gradient_x_input(grad, inputs)
    if expect_shape(out, (2, 1, 3, 2, 5), what="gradient_x_input of float32 views (2, 1, 3, 2, 5, 7)", idea=GXI):
        expect_dtype(out, np.float32, what="gradient_x_input of float32 inputs", idea="dtype in = dtype out")
        expect_close(out, np.einsum("...jf,...jf->...j", grad.astype(np.float64), inputs.astype(np.float64)),
                     rtol=1e-5, atol=1e-5, what="gradient_x_input of strided and transposed float32 views", idea=GXI)


def test_rollout_of_one_token_and_of_a_deep_stack(impl):
    expect_close(impl.attention_rollout(np.ones((5, 1, 1))), np.ones((1, 1)), idea=ROLLOUT,
                 what="attention_rollout of 5 layers over a single token")
    weights = _softmax(np.random.default_rng(303).normal(scale=3.0, size=(9, 4, 4)))
    expected = np.eye(4)
    for layer in weights:
        expected = (0.5 * layer + 0.5 * np.eye(4)) @ expected
    expect_close(impl.attention_rollout(weights), expected, what="attention_rollout of 9 layers over 4 tokens",
                 idea=ROLLOUT)


def test_rollout_keeps_float32(impl):
    weights = _softmax(np.random.default_rng(304).normal(size=(3, 5, 5))).astype(np.float32)
    out = impl.attention_rollout(weights)
    if expect_dtype(out, np.float32, what="attention_rollout of float32 weights", idea="dtype in = dtype out"):
        # The values too: an identity (or any other array) of the right dtype is not the rollout.
        expect_close(out, _rollout_by_hand(weights.astype(np.float64)), rtol=1e-4, atol=1e-6, idea=ROLLOUT,
                     what="attention_rollout of three float32 layers (5, 5) against the rollout in float64")


def test_rank_correlation_of_two_values_ints_and_heavy_ties(impl):
    pair = np.array([1, 5]), np.array([7, 2])
    _expect_rank(impl.rank_correlation(*pair), *pair, -1.0,
                 what="rank_correlation of two integer pairs in opposite order")
    a = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0])
    b = np.array([3.0, 0.0, 3.0, 1.0, 5.0, 3.0, 0.0])
    expected = float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])
    _expect_rank(impl.rank_correlation(a, b), a, b, expected,
                 what="rank_correlation with six of seven values of a tied")


def test_a_token_that_takes_the_weight_and_brings_nothing(impl):
    model = _BagModel(305, seq=12, vocab=20, d=4, n_classes=6)
    model.weights = _softmax(np.where(np.arange(12) == 7, 5.0, 0.0))  # 0.93 of the weight on position 7
    tokens = np.random.default_rng(305).integers(1, 20, size=12)
    tokens[7] = 0  # ... which holds a token with a zero value vector
    out = impl.occlusion_importance(model, tokens, 0)
    expect_close(out[7], 0.0, atol=1e-12, rtol=0.0, idea="removing a token that brings nothing changes nothing, "
                 "whatever its attention weight", what="occlusion of the most attended token, whose value is zero")
    expect_close(out, _occlusion(model, tokens, 0), idea=OCCLUSION,
                 what="occlusion of every token: the drop in the predicted class's probability when it is replaced")
