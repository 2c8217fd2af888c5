"""Exercise 7: the Transformer layer. Layer norm, feed-forward, dropout, then the whole layer."""

from __future__ import annotations

import functools

import numpy as np

from tests import kinds, unseen
from tests.conventions import CLASSIC_DROPOUT, CONVENTION, GELU_ERF, layer_norm_form, with_convention
from tests.crash import raising_through
from tests.effort import expect_varies, message, require
from tests.failures import recorded_so_far
from tests.feedback import (
    expect,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_no_nan,
    expect_raises_value_error,
    expect_shape,
)
from tests.probes import PROBES, expect_probe, probe
from tests.relations import draws_left_open
from tests.steps import names

# Every size differs, so a swapped axis changes a shape or a value instead of hiding.
BATCH, N, N_HEADS, D_MODEL, D_FF = 2, 5, 3, 12, 9
LN_EPS = 1e-5  # transformer_layer's layer norms use the default eps, as PyTorch does

LN = ("layer norm: mean and biased variance over the last axis (each token on its own), "
      "(x - mean) / sqrt(var + eps), then * gamma + beta")
FFN = "feed-forward: act(x @ w_1 + b_1) @ w_2 + b_2, the activation only between the two linear layers"
GELU = "gelu here is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), not the erf form"
DROPOUT = "inverted dropout: drop each entry with probability rate, divide the kept ones by (1 - rate)"
INIT = ("init_transformer_layer: 'attention' from init_multi_head, ln gammas ones and betas zeros, "
        "w_1 (d_model, d_ff), w_2 (d_ff, d_model), zero biases")
POST = ("post-LN: h = LN1(x + MHA(x)), out = LN2(h + FFN(h)): the norm comes after each residual sum; LN1 and LN2 "
        "are two norms, each with its own gamma and beta (ln1_*, ln2_*)")
PRE = ("pre-LN: h = x + MHA(LN1(x)), out = h + FFN(LN2(h)): the residual path carries x itself, unnormalised; LN1 "
       "and LN2 are two norms, each with its own gamma and beta (ln1_*, ln2_*)")
ACTIVATION = ("the layer's feed-forward network uses the `activation` it is given: pass it on to feed_forward "
              "in both branches")
RESIDUAL = "each sub-layer's input is added to its output (the residual), before (post-LN) or without (pre-LN) a norm"


def _normalised_variance(x: np.ndarray, eps: float) -> np.ndarray:
    """What layer norm (gamma=1, beta=0) leaves of each token's variance: var / (var + eps), var biased."""
    var = np.var(x, axis=-1)
    return var / (var + eps)


def _gelu_by_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def _feed_forward(x: np.ndarray, params: dict, activation) -> np.ndarray:
    return activation(x @ params["w_1"] + params["b_1"]) @ params["w_2"] + params["b_2"]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _ffn_params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w_1": rng.normal(scale=1.5 / np.sqrt(D_MODEL), size=(D_MODEL, D_FF)),
        "b_1": rng.normal(scale=0.5, size=D_FF),
        "w_2": rng.normal(scale=1.0 / np.sqrt(D_FF), size=(D_FF, D_MODEL)),
        "b_2": rng.normal(scale=0.5, size=D_MODEL),
    }


def _layer_params(seed: int) -> dict:
    """Random attention weights, biases, gammas and betas (never the student's init)."""
    rng = np.random.default_rng(seed)
    attention = {name: rng.normal(scale=1.5 / np.sqrt(D_MODEL), size=(D_MODEL, D_MODEL))
                 for name in ("w_q", "w_k", "w_v", "w_o")}
    attention.update({name: rng.normal(scale=0.5, size=D_MODEL) for name in ("b_q", "b_k", "b_v", "b_o")})
    params = {"attention": attention}
    for norm in ("ln1", "ln2"):
        params[f"{norm}_gamma"] = rng.uniform(0.5, 1.5, size=D_MODEL)
        params[f"{norm}_beta"] = rng.normal(scale=0.5, size=D_MODEL)
    return params | _ffn_params(seed + 1000)


def _silenced(params: dict, attention: bool, ffn: bool) -> dict:
    """A copy of params whose attention and/or feed-forward output is exactly zero."""
    params = dict(params)
    if attention:
        params["attention"] = {name: np.zeros_like(value) for name, value in params["attention"].items()}
    if ffn:
        params.update({name: np.zeros_like(params[name]) for name in ("w_1", "b_1", "w_2", "b_2")})
    return params


def _tokens(seed: int, *shape: int, loc: float = 0.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(loc=loc, size=shape)


@probe("transformer_layer")
def post_ln_relu():
    return (_tokens(701, BATCH, N, D_MODEL, loc=0.5), _layer_params(702), N_HEADS), {}


@probe("transformer_layer")
def pre_ln_relu_causal():
    mask = np.tril(np.ones((N, N), dtype=bool))
    return (_tokens(703, BATCH, N, D_MODEL, loc=0.5), _layer_params(704), N_HEADS), {"norm_first": True,
                                                                                    "mask": mask}


@probe("transformer_layer")
def post_ln_gelu_causal():
    mask = np.tril(np.ones((N, N), dtype=bool))
    return (_tokens(705, BATCH, N, D_MODEL), _layer_params(706), N_HEADS), {"mask": mask, "activation": "gelu"}


@probe("transformer_layer")
def pre_ln_gelu():
    return (_tokens(707, BATCH, N, D_MODEL), _layer_params(708), N_HEADS), {"norm_first": True,
                                                                           "activation": "gelu"}


@probe("transformer_layer")
def post_ln_padding():
    mask = (np.arange(N) < np.array([N, 3])[:, None])[:, None, :]  # (batch, 1, n): sequence 1 has 3 tokens
    return (_tokens(709, BATCH, N, D_MODEL), _layer_params(710), N_HEADS), {"mask": mask}


@probe("init_transformer_layer")
def seeded():
    return (np.random.default_rng(29), D_MODEL, N_HEADS, D_FF), {}


# The names of the result arrays, for a diagnosis that points at the ones that differ (tests/steps.py).
# (a dict result gives its arrays, not its nested dicts: the attention's weights are init_multi_head's probes')
names("init_transformer_layer", *(f"params[{key!r}]" for key in ("b_1", "b_2", "ln1_beta", "ln1_gamma", "ln2_beta",
                                                                 "ln2_gamma", "w_1", "w_2")))


@probe("layer_norm")
def quiet_tokens_large_eps():
    rng = np.random.default_rng(711)
    x = rng.normal(loc=1.0, scale=0.3, size=(BATCH, N, D_MODEL))
    return (x, rng.uniform(0.5, 2.0, size=D_MODEL), rng.normal(size=D_MODEL)), {"eps": 0.5}


@probe("feed_forward")
def gelu_random_biases():
    return (_tokens(712, BATCH, N, D_MODEL) * 2.0, _ffn_params(713)), {"activation": "gelu"}


@probe("feed_forward")
def relu_random_biases():
    return (_tokens(714, BATCH, N, D_MODEL), _ffn_params(715)), {"activation": "relu"}


@probe("feed_forward")
def relu_of_gelus_input():
    # gelu_random_biases' input with relu: a feed_forward that ignores its activation gives this for gelu.
    return (_tokens(712, BATCH, N, D_MODEL) * 2.0, _ffn_params(713)), {"activation": "relu"}


draws_left_open("dropout")  # the API leaves open how the mask is drawn from rng


@probe("dropout")
def seeded_training():
    # For the diagnosis only: the API leaves open how the mask is drawn from rng, so no graded test
    # asks for these exact values (the dropout tests check the properties). A fresh generator for
    # every call; the global state is seeded too, so a mask drawn from np.random instead of rng is
    # repeatable, and recognisable.
    np.random.seed(716)
    return (np.random.default_rng(717).uniform(0.5, 2.0, size=(3, 8)), 0.25, np.random.default_rng(718)), {}


@probe("dropout")
def seeded_evaluation():
    np.random.seed(719)
    x = np.random.default_rng(720).uniform(0.5, 2.0, size=(3, 8))
    return (x, 0.25, np.random.default_rng(721)), {"training": False}


@probe("dropout")
def seeded_training_float32():
    # As seeded_training, in float32 (the result keeps it): a float64 factor shows as a dtype alone.
    np.random.seed(722)
    x = np.random.default_rng(723).uniform(0.5, 2.0, size=(4, 6)).astype(np.float32)
    return (x, 0.5, np.random.default_rng(724)), {}


# ---------------------------------------------------------------- layer_norm

def test_layer_norm_shape_and_dtype(impl):
    for dtype in (np.float64, np.float32):
        x = _tokens(1, BATCH, N, D_MODEL).astype(dtype)
        gamma, beta = np.full(D_MODEL, 1.5, dtype=dtype), np.full(D_MODEL, 0.25, dtype=dtype)
        out = impl.layer_norm(x, gamma, beta)
        if expect_shape(out, x.shape, what=f"layer_norm of a {x.shape} {dtype.__name__} array", idea=LN):
            expect_dtype(out, dtype, what=f"layer_norm of {dtype.__name__} x, gamma and beta",
                         idea="dtype in = dtype out: do not upcast with float64 arrays or np.float64 constants")


def test_layer_norm_statistics_with_a_large_eps(impl):
    # Exact values are checked against the reference at the end (test_reference_values); here the
    # properties that define layer norm: with gamma=1, beta=0 every token comes out with mean 0 and
    # variance var / (var + eps), and gamma and beta then act feature by feature, affinely.
    rng = np.random.default_rng(2)
    x = rng.normal(loc=1.0, scale=0.8, size=(BATCH, N, D_MODEL))
    gamma, beta = rng.uniform(0.5, 2.0, size=D_MODEL), rng.normal(size=D_MODEL)
    plain = impl.layer_norm(x, np.ones(D_MODEL), np.zeros(D_MODEL), eps=0.5)
    if not expect_shape(plain, x.shape, what="layer_norm of a (2, 5, 12) array with eps=0.5", idea=LN):
        return
    expect_close(plain.mean(axis=-1), np.zeros((BATCH, N)), atol=1e-9,
                 what="with gamma=1, beta=0, eps=0.5: the mean of every token's output features", idea=LN)
    expect_close(plain.var(axis=-1), _normalised_variance(x, 0.5), rtol=1e-9,
                 what="with gamma=1, beta=0, eps=0.5: the variance of every output token, var / (var + eps) "
                      "with var the biased variance of the token's features",
                 idea=with_convention(LN, layer_norm_form(plain, x, np.ones(D_MODEL), np.zeros(D_MODEL), 0.5)))
    expect_close(impl.layer_norm(x, gamma, beta, eps=0.5), plain * gamma + beta,
                 what="layer_norm with random gamma and beta and eps=0.5 vs. the plain normalisation * gamma + beta",
                 idea=LN)


def test_layer_norm_normalises_each_token_over_its_features(impl):
    # Features spread about 3 around 2: a result that is only centred (a hostile round's layer_norm that never divided
    # by the standard deviation passed on features of spread 1) keeps a spread of 3.
    x = 3.0 * _tokens(3, BATCH, N, D_MODEL, loc=2.0 / 3.0)
    out = impl.layer_norm(x, np.ones(D_MODEL), np.zeros(D_MODEL), eps=0.0)
    idea = "normalise each token over its features (the last axis), never across the sequence or the batch"
    if expect_shape(out, x.shape, what="layer_norm of a (2, 5, 12) array", idea=idea):
        expect_close(out.mean(axis=-1), np.zeros((BATCH, N)), atol=1e-9,
                     what="with gamma=1, beta=0: the mean of every token's output features", idea=idea)
        spread = np.asarray(out, dtype=float).std(axis=-1)
        expect(bool(np.all((spread > 0.9) & (spread < 1.1))), idea=idea + "; then divide by the standard deviation",
               what="with gamma=1, beta=0, eps=0: the spread (std) of every token's output features",
               expected="about 1 for every token (between 0.9 and 1.1: the biased variance's or the unbiased)",
               observed=f"{np.round(spread.ravel(), 3)}")
        moved = x.copy()
        moved[:, 0] *= 5.0
        expect_close(impl.layer_norm(moved, np.ones(D_MODEL), np.zeros(D_MODEL), eps=0.0)[:, 1:], out[:, 1:],
                     what="changing token 0 leaves the other tokens' layer norm alone", idea=idea)
        # The contrast: other tokens normalised (a fixed x's) have these statistics too.
        _expect_reads_x(impl.layer_norm(x[:, ::-1], np.ones(D_MODEL), np.zeros(D_MODEL), eps=0.0), out,
                        passed="every token's features have mean 0 and spread 1", idea=idea)


def _expect_reads_x(reversed_out, out, *, passed: str, idea: str, function: str = "layer_norm") -> bool:
    """After a test's own check of a statistic or a relation: the result of x with its tokens reversed is not x's.

    The function's answer for another x (a fixed input) has the statistics too ("no points without the idea"); the
    tokens differ, so their results do (``feedback.expect_differs``).
    """
    return expect_differs(reversed_out, out, what=f"{function} of x with its tokens reversed against {function}(x)",
                          expected="a different result: each token's result comes from its own features",
                          passed=passed, idea=idea)


def test_layer_norm_uses_the_biased_variance(impl):
    x = _tokens(4, BATCH, N, D_MODEL)
    out = impl.layer_norm(x, np.ones(D_MODEL), np.zeros(D_MODEL), eps=0.0)
    if expect_shape(out, x.shape, what="layer_norm of a (2, 5, 12) array", idea=LN):
        observed = out.var(axis=-1)
        expect_close(observed, np.ones((BATCH, N)), rtol=1e-6,
                     what="with gamma=1, beta=0, eps=0: the variance (divide by d) of every output token",
                     idea="the biased variance divides by d, not d - 1 (np.var's default ddof=0, "
                          f"not ddof=1); with d - 1 the outputs' variance is {(D_MODEL - 1) / D_MODEL:.4f}")
        _expect_reads_x(impl.layer_norm(x[:, ::-1], np.ones(D_MODEL), np.zeros(D_MODEL), eps=0.0), out, idea=LN,
                        passed="every output token has variance 1")


def test_layer_norm_of_tokens_far_from_zero(impl):
    # Features near 1e6 with a spread of about 1: E[x^2] - E[x]^2 subtracts two numbers near 1e12, and float64
    # keeps only about 1e-4 of their difference; the centred form mean((x - mean)^2) keeps it to ~1e-10.
    x = 1e6 + _tokens(12, BATCH, N, D_MODEL)
    centred = x - x.mean(axis=-1, keepdims=True)
    expected = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5)
    out = impl.layer_norm(x, np.ones(D_MODEL), np.zeros(D_MODEL))
    mu = np.mean(x, axis=-1, keepdims=True)  # flax's fast variance: mean(x^2) - mean^2, clipped at 0
    fast = (x - mu) / np.sqrt(np.maximum(np.mean(x * x, axis=-1, keepdims=True) - mu * mu, 0.0) + 1e-5)
    told = isinstance(out, np.ndarray) and out.shape == x.shape and bool(np.allclose(out, fast, rtol=1e-9, atol=0))
    # The centred variance with an eps of another default (T5's 1e-6, Keras's 1e-3, BERT's 1e-12, none) differs here
    # by about the eps: said as what it is (a blind round's default eps of 1e-6 was sent to the centred variance).
    variance = (centred**2).mean(axis=-1, keepdims=True)
    other = next((eps for eps in (1e-6, 1e-3, 1e-12, 1e-8, 1e-4, 0.0) if isinstance(out, np.ndarray)
                  and out.shape == x.shape and np.allclose(out, centred / np.sqrt(variance + eps), rtol=1e-9,
                                                           atol=0)), None)
    if other is not None:
        expect_close(out, expected, rtol=1e-6, atol=1e-7,
                     what="layer_norm of tokens whose features are near 1e6, spread about 1 (gamma=1, beta=0)",
                     idea=f"the values are those with eps={other:g}, not the default 1e-5: the default eps is 1e-5 "
                          "(as in nn.LayerNorm), inside the square root")
        return
    expect_close(out, expected, rtol=1e-6, atol=1e-7,
                 what="layer_norm of tokens whose features are near 1e6, spread about 1 (gamma=1, beta=0)",
                 idea=with_convention(
                     "take the variance of the centred values, mean((x - mean)**2) (np.var does), not mean(x**2) - "
                     "mean**2: far from zero those two large numbers cancel and the variance loses its digits (it "
                     "can even come out negative)",
                     "yours is mean(x**2) - mean**2, as flax's LayerNorm computes it by default (use_fast_variance="
                     f"True, speed over precision): {CONVENTION}; this kit's contract is the variance of the "
                     "centred values" if told else ""))


def test_layer_norm_puts_eps_inside_the_square_root(impl):
    # Small-variance tokens and a big eps: sqrt(var + eps) and sqrt(var) + eps differ a lot.
    x = _tokens(5, BATCH, N, D_MODEL, loc=1.0) * 0.2
    ones, zeros = np.ones(D_MODEL), np.zeros(D_MODEL)
    out = impl.layer_norm(x, ones, zeros, eps=0.5)
    if not expect_shape(out, x.shape, what="layer_norm of a (2, 5, 12) array", idea=LN):
        return
    if not expect_close(out.var(axis=-1), _normalised_variance(x, 0.5), rtol=1e-9,
                        what="layer_norm of small-variance tokens with eps=0.5 (gamma=1, beta=0): the variance "
                             "of every output token, var / (var + eps)",
                        idea="eps goes inside the square root: (x - mean) / sqrt(var + eps)"):
        centred = x - x.mean(axis=-1, keepdims=True)
        if np.allclose(out, centred / (centred.std(axis=-1, keepdims=True) + 0.5)):
            expect(False, what="where eps goes", expected="(x - mean) / sqrt(var + eps)",
                   observed="(x - mean) / (std + eps): eps was added to the standard deviation",
                   idea="eps belongs inside the square root, as in nn.LayerNorm")


def test_layer_norm_applies_gamma_and_beta(impl):
    # Compared with the function's own plain normalisation, so only the affine step is judged here.
    x = _tokens(6, BATCH, N, D_MODEL)
    rng = np.random.default_rng(7)
    gamma, beta = rng.uniform(0.5, 2.0, size=D_MODEL), rng.normal(size=D_MODEL)
    ones, zeros = np.ones(D_MODEL), np.zeros(D_MODEL)
    normalised = impl.layer_norm(x, ones, zeros)
    expect_close(impl.layer_norm(x, gamma, zeros), normalised * gamma,
                 what="layer_norm(x, gamma, 0) vs. layer_norm(x, 1, 0) * gamma",
                 idea="after normalising, scale each feature by gamma (gamma multiplies, beta adds)")
    expect_close(impl.layer_norm(x, ones, beta), normalised + beta,
                 what="layer_norm(x, 1, beta) vs. layer_norm(x, 1, 0) + beta",
                 idea="shift each feature by beta last (gamma multiplies, beta adds)")
    _expect_reads_x(impl.layer_norm(x[:, ::-1], ones, zeros), normalised, idea=LN,
                    passed="gamma multiplies and beta adds to the plain normalisation")


def test_layer_norm_default_eps(impl):
    x, gamma, beta = quiet_tokens_default_eps()[0]
    expect_probe(impl, "layer_norm/quiet_tokens_default_eps",
                 what="layer_norm(x, gamma, beta) of tokens whose variance is about 1e-5, with the default eps",
                 idea="the default eps is 1e-5 (as in nn.LayerNorm); transformer_layer uses that default")
    rng = np.random.default_rng(255)  # and quiet tokens that are no probe's (no golden value holds the answer)
    fresh = 3.0 + rng.normal(scale=np.sqrt(1e-5), size=(3, D_MODEL))
    gamma, beta = rng.uniform(0.5, 2.0, size=D_MODEL), rng.normal(size=D_MODEL)
    centred = fresh - fresh.mean(axis=-1, keepdims=True)
    expected = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5) * gamma + beta
    expect_close(impl.layer_norm(fresh, gamma, beta), expected, rtol=1e-6, atol=1e-8,
                 what="layer_norm(x, gamma, beta) of other quiet tokens (variance about 1e-5), default eps",
                 idea="the default eps is 1e-5 (as in nn.LayerNorm), inside the square root")


# ---------------------------------------------------------------- feed_forward

def test_feed_forward_shape(impl):
    out = impl.feed_forward(_tokens(8, BATCH, N, D_MODEL), _ffn_params(9))
    if expect_shape(out, (BATCH, N, D_MODEL), what="feed_forward of a (2, 5, 12) array with d_ff=9", idea=FFN):
        expect_varies(out, axis=-2, what="feed_forward of a (2, 5, 12) array: the outputs of the 5 tokens", idea=FFN)


def test_feed_forward_relu_matches_hand_computation(impl):
    x, params = _tokens(10, BATCH, N, D_MODEL), _ffn_params(11)
    out = impl.feed_forward(x, params, activation="relu")
    if not expect_close(out, _feed_forward(x, params, _relu), what="feed_forward with relu", idea=FFN):
        if np.allclose(out, _relu(_feed_forward(x, params, _relu))):
            expect(False, what="where the activation goes", expected="relu between the two linear layers only",
                   observed="relu also applied to the output of the second linear layer",
                   idea="the feed-forward output can be negative: no activation after w_2 + b_2")


def test_feed_forward_gelu_uses_the_tanh_approximation(impl):
    x, params = _tokens(12, BATCH, N, D_MODEL) * 2.0, _ffn_params(13)
    out = impl.feed_forward(x, params, activation="gelu")
    erf = (isinstance(out, np.ndarray) and out.shape == x.shape
           and np.allclose(out, _feed_forward(x, params, _gelu_erf), rtol=1e-9, atol=1e-12))
    idea = f"{GELU}; {GELU_ERF}" if erf else GELU
    if not expect_close(out, _feed_forward(x, params, _gelu_by_tanh), what="feed_forward with gelu", idea=idea):
        if erf:
            expect(False, what="which gelu", expected="the tanh approximation (as GPT-2 and this kit's API)",
                   observed="the exact erf form", idea=idea)


def test_feed_forward_is_position_wise(impl):
    x, params = _tokens(14, BATCH, N, D_MODEL), _ffn_params(15)
    perm = np.array([2, 4, 0, 1, 3])
    out = impl.feed_forward(x, params)
    idea = "the feed-forward network acts on every position separately; rows never mix"
    if expect_varies(out, axis=-2, what="feed_forward: the outputs of the 5 (different) tokens", idea=idea):
        expect_close(impl.feed_forward(x[:, perm], params), out[:, perm],
                     what="feed_forward of shuffled tokens vs. the shuffled output", idea=idea)
    # The contrast: x given back unchanged (or any result made of x alone, -x) acts on every position separately too.
    if expect_differs(out, x, what="feed_forward(x) against x", idea=FFN,
                      expected="a different result: each token goes through two linear layers and the activation",
                      passed="the tokens' outputs differ and move with the tokens"):
        expect_differs(impl.feed_forward(x, _other_bias(params)), out, idea=FFN,
                       what="feed_forward(x) with another output bias b_2 against the params given",
                       expected="a different result: b_2 is added to every token's output",
                       passed="the tokens' outputs differ and move with the tokens")


def test_feed_forward_rejects_an_unknown_activation(impl):
    expect_raises_value_error(lambda: impl.feed_forward(_tokens(16, N, D_MODEL), _ffn_params(17), "swish"),
                              argument="activation", what="feed_forward(x, params, activation='swish')",
                              idea="bad input raises ValueError naming the argument: only 'relu' and 'gelu'")


# ---------------------------------------------------------------- dropout

INDEPENDENT = ("dropout draws each entry on its own: one random number per entry (rng.random(x.shape) >= rate), so "
               "that two entries are dropped together with probability rate**2; a pattern started from one random "
               "number (a stride, a sequence, a tiled block) drops the right fraction but ties the entries together")


def _independence_gate(impl) -> list:
    """Why ``dropout`` does not drop each entry independently (empty when it does, or when the tests say more).

    Over 240 000 entries, the pairs of entries at several distances must be dropped together about f**2 of the
    time, f the fraction dropped: within 0.01, some twelve standard deviations of independent draws (never off by
    that much in practice, for any honest way of drawing).
    """
    rate, x = 0.3, np.ones(240_000)
    try:
        with raising_through():  # a crash is the test's own finding
            dropped = np.asarray(impl.dropout(x, rate, np.random.default_rng(7_001))) == 0
    except Exception:  # noqa: BLE001 - what the function raises is the test's own check to report
        return []
    if dropped.shape != x.shape:
        return []  # the tests' own checks say what the shape is
    fraction = float(np.mean(dropped))  # (a wrong fraction is theirs to report: pairs are judged against this one)
    pairs = {lag: float(np.mean(dropped[:-lag] & dropped[lag:])) for lag in (1, 2, 3, 5, 8, 13, 64, 1000, 1009)}
    lag = max(pairs, key=lambda lag: abs(pairs[lag] - fraction**2))
    if abs(pairs[lag] - fraction**2) <= 0.01:
        return []
    return [message(f"pairs of entries {lag} apart in dropout(np.ones(240000), {rate}): both dropped",
                    f"about {fraction**2:.3f} of them (the fraction dropped, {fraction:.3f}, squared: each entry "
                    "drawn on its own)",
                    f"{pairs[lag]:.3f}: the entries are not drawn independently", INDEPENDENT)]


def require_independent_draws(impl) -> bool:
    """Fail the test unless ``dropout`` drops each entry on its own (:func:`_independence_gate`)."""
    return require(impl, "dropout", lambda: _independence_gate(impl), key="independent")


def test_dropout_is_the_identity_in_evaluation_and_at_rate_zero(impl):
    require_independent_draws(impl)
    x = _tokens(18, BATCH, N, D_MODEL)
    evaluated = impl.dropout(x, 0.5, np.random.default_rng(0), training=False)
    classic = False
    if isinstance(evaluated, np.ndarray) and evaluated.shape == x.shape and np.allclose(evaluated, 0.5 * x):
        # x * (1 - rate) or x * rate? At rate 0.25 they differ (only the first is a convention).
        quarter = impl.dropout(x, 0.25, np.random.default_rng(0), training=False)
        classic = isinstance(quarter, np.ndarray) and quarter.shape == x.shape and np.allclose(quarter, 0.75 * x)
    expect_close(evaluated, x, atol=0.0, rtol=0.0, what="dropout(x, rate=0.5, training=False)",
                 idea=with_convention("at evaluation dropout does nothing", CLASSIC_DROPOUT if classic else ""))
    expect_close(impl.dropout(x, 0.0, np.random.default_rng(0)), x, atol=0.0, rtol=0.0,
                 what="dropout(x, rate=0.0) while training", idea="rate 0 drops nothing and scales by 1/(1-0) = 1")
    # The way out that drops nothing keeps the dtype too (a blind round's returned x.astype(np.float64)).
    x32 = x.astype(np.float32)
    for rate, training in ((0.5, False), (0.0, True)):
        expect_dtype(impl.dropout(x32, rate, np.random.default_rng(0), training=training), np.float32,
                     what=f"dropout of a float32 array, rate={rate}, training={training}", idea="dtype in = dtype out")


def test_dropout_zeroes_or_rescales_every_entry(impl):
    require_independent_draws(impl)
    rate = 0.25
    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(19).uniform(0.5, 2.0, size=(BATCH, N, 40)).astype(dtype)
        out = impl.dropout(x, rate, np.random.default_rng(20))
        if not (expect_shape(out, x.shape, what=f"dropout of a {x.shape} array", idea=DROPOUT)
                and expect_dtype(out, dtype, what=f"dropout of a {dtype.__name__} array",
                                 idea="dtype in = dtype out")):
            continue
        kept = out != 0
        expect(0 < kept.sum() < x.size, what=f"dropout at rate {rate} keeps some entries and drops others",
               expected="a mix of zeros and scaled entries", observed=f"{int(kept.sum())} of {x.size} kept",
               idea=DROPOUT)
        expect_close(out[kept], (x / (1 - rate))[kept], rtol=1e-6 if dtype == np.float32 else 1e-12, atol=0.0,
                     what=f"kept entries of {dtype.__name__} dropout at rate {rate}",
                     idea=DROPOUT + ": x / (1 - rate) = x / 0.75, not x and not x / rate")


def test_dropout_preserves_the_mean(impl):
    require_independent_draws(impl)
    x = np.random.default_rng(21).uniform(0.5, 1.5, size=200_000)
    out = impl.dropout(x, 0.3, np.random.default_rng(22))
    idea = "dividing kept entries by (1 - rate) keeps the expected value, so evaluation needs no rescaling"
    dropped = float(np.mean(np.asarray(out) == 0))
    if abs(dropped - 0.3) >= 0.02:  # the mean is off for the fraction dropped, whatever the scaling (a blind round)
        idea = (f"first, the fraction dropped: yours zeroed {dropped:.3f} of the entries, not about 0.3; rate is the "
                "probability of dropping an entry (keep where rng.random(shape) >= rate)")
    expect(abs(out.mean() / x.mean() - 1.0) < 0.01, what="the mean of 200 000 entries after dropout at rate 0.3",
           expected=f"{x.mean():.4f} (within 1 %)", observed=f"{out.mean():.4f}", idea=idea)
    # The contrast: the kept entries are x's (ones of x's shape keep a mean of about 1 as well).
    shifted = impl.dropout(x + 1.0, 0.3, np.random.default_rng(22))
    expect_differs(shifted, out, what="dropout of x + 1 vs. dropout of x, at rate 0.3 with the same rng",
                   expected="a different result: each kept entry is x / (1 - rate), so it moves with x",
                   passed="the mean is kept", idea=idea)
    # ... and x given back unchanged (no entry dropped) keeps the mean and moves with x.
    expect_differs(out, x, what="dropout(x, 0.3, rng) in training, against x",
                   expected="some entries zeroed and the others divided by (1 - rate)",
                   passed="the mean is kept", idea=idea)


def test_dropout_drops_the_requested_fraction(impl):
    require_independent_draws(impl)
    x = np.random.default_rng(23).uniform(0.5, 1.5, size=20_000)
    for rate in (0.1, 0.6):
        dropped = float(np.mean(impl.dropout(x, rate, np.random.default_rng(24)) == 0))
        expect(abs(dropped - rate) < 0.02, what=f"the fraction of entries zeroed by dropout at rate {rate}",
               expected=f"about {rate}", observed=f"{dropped:.3f}",
               idea="rate is the probability of dropping an entry: keep where rng.random(shape) >= rate")


def test_dropout_draws_only_from_rng(impl):
    require_independent_draws(impl)
    x = _tokens(25, BATCH, N, D_MODEL)
    first = impl.dropout(x, 0.5, np.random.default_rng(26))
    again = impl.dropout(x, 0.5, np.random.default_rng(26))
    other = impl.dropout(x, 0.5, np.random.default_rng(27))
    idea = "all randomness comes from the rng argument (rng.random), never np.random's global state"
    expect_close(again, first, atol=0.0, rtol=0.0, what="dropout twice with generators of the same seed", idea=idea)
    # (equal_nan: NaN is unequal to itself, so NaN of two seeds were "different masks", a hostile round's)
    expect(not np.array_equal(other, first, equal_nan=True), what="dropout with generators of different seeds",
           expected="different masks", observed="the same mask", idea=idea)
    # ... and masks they are: numbers drawn from rng are the same for one seed too (a hostile round's). Each entry
    # dropped (0) or kept, x times one factor for all (whatever the factor: the scale is another test's).
    if not recorded_so_far() and isinstance(first, np.ndarray) and first.shape == x.shape:
        kept = first != 0
        with np.errstate(all="ignore"):
            factors = first[kept] / x[kept]
        masked = bool(kept.any() and (~kept).any() and np.allclose(factors, factors[0], rtol=1e-6, atol=0.0))
        expect(masked, what="dropout(x, 0.5, rng) of a (2, 5, 12) array of nonzero numbers, entry by entry",
               expected="a mask: some entries 0 (dropped), the others x times one factor (kept)",
               observed=f"{int((~kept).sum())} zeros; the others x times factors from {np.min(factors, initial=0):.4g} "
                        f"to {np.max(factors, initial=0):.4g}", idea=DROPOUT)


def test_dropout_rejects_a_bad_rate(impl):
    # NaN too: `if rate < 0 or rate >= 1: raise` lets it through, and dropout(x, nan) then zeroes every entry.
    for rate in (1.0, -0.1, 1.5, float("nan")):
        expect_raises_value_error(lambda rate=rate: impl.dropout(np.ones(4), rate, np.random.default_rng(0)),
                                  argument="rate", what=f"dropout(x, rate={rate})",
                                  idea="bad input raises ValueError naming the argument: rate lies in [0, 1)")


# ---------------------------------------------------------------- init_transformer_layer

def test_init_transformer_layer_keys_shapes_and_values(impl):
    params = impl.init_transformer_layer(np.random.default_rng(28), D_MODEL, N_HEADS, D_FF)
    shapes = {"ln1_gamma": (D_MODEL,), "ln1_beta": (D_MODEL,), "ln2_gamma": (D_MODEL,), "ln2_beta": (D_MODEL,),
              "w_1": (D_MODEL, D_FF), "b_1": (D_FF,), "w_2": (D_FF, D_MODEL), "b_2": (D_MODEL,)}
    names = {"attention", *shapes}
    if not expect(isinstance(params, dict) and set(params) == names, what="the keys of init_transformer_layer",
                  expected=str(sorted(names)),
                  observed=str(sorted(params) if isinstance(params, dict) else params), idea=INIT):
        return
    for name, shape in shapes.items():
        expect_shape(params[name], shape, what=f"init_transformer_layer(rng, 12, 3, 9)[{name!r}]", idea=INIT)
    attention = params["attention"]
    expect(isinstance(attention, dict) and {"w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"} <= set(attention),
           what="params['attention']", expected="an init_multi_head dict (w_q ... b_o)",
           observed=str(sorted(attention) if isinstance(attention, dict) else attention), idea=INIT)
    for name in ("ln1_gamma", "ln2_gamma"):
        expect_close(params[name], np.ones(D_MODEL), atol=0.0, rtol=0.0, what=f"params[{name!r}]",
                     idea="layer norm starts as a pure normalisation: gamma ones")
    for name in ("ln1_beta", "ln2_beta", "b_1", "b_2"):
        expect_close(params[name], np.zeros(np.shape(params[name])), atol=0.0, rtol=0.0, what=f"params[{name!r}]",
                     idea="betas and biases start at zero")
    rng = np.random.default_rng(28)
    rng.normal(size=(4, D_MODEL, D_MODEL))  # the attention weights come first
    expect_close(params["w_1"], rng.normal(0.0, 1 / np.sqrt(D_MODEL), size=(D_MODEL, D_FF)), rtol=1e-12, atol=0.0,
                 what="w_1 drawn from rng(28) after the attention's four matrices",
                 idea="init_weight(rng, d_model, d_ff) after init_multi_head, std 1/sqrt(d_model)")
    expect_close(params["w_2"], rng.normal(0.0, 1 / np.sqrt(D_FF), size=(D_FF, D_MODEL)), rtol=1e-12, atol=0.0,
                 what="w_2 drawn right after w_1", idea="init_weight(rng, d_ff, d_model): std 1/sqrt(d_ff)")
    # A blind round: ones = np.ones(d_model) given to ln1_gamma and ln2_gamma passed every test; a step in place
    # (p -= lr * g) then moves both norms by both gradients (as init_multi_head's biases, exercise 6).
    arrays = [(name, value) for name, value in params.items() if isinstance(value, np.ndarray)]
    if isinstance(attention, dict):
        arrays += [(f"attention[{name!r}]", value) for name, value in attention.items()
                   if isinstance(value, np.ndarray)]
    shared = [(a, b) for i, (a, x) in enumerate(arrays) for b, y in arrays[i + 1:] if np.shares_memory(x, y)]
    expect(not shared, what="the arrays of init_transformer_layer(...)",
           expected="every parameter an array of its own",
           observed=f"{', '.join(f'{a} and {b}' for a, b in shared)} are one array (the same memory)",
           idea="every parameter is its own array: np.ones(d_model) once per gamma and np.zeros once per beta and "
                "bias, not one array given to two names (LN1 and LN2 are two norms, each with its own gamma and beta)")


# ---------------------------------------------------------------- transformer_layer

def test_transformer_layer_shape(impl):
    params = _layer_params(29)
    for shape in [(N, D_MODEL), (BATCH, N, D_MODEL)]:
        for norm_first in (False, True):
            out = impl.transformer_layer(_tokens(30, *shape), params, N_HEADS, norm_first=norm_first)
            if expect_shape(out, shape, what=f"transformer_layer of a {shape} array (norm_first={norm_first})",
                            idea="a layer maps (..., n, d_model) to the same shape"):
                expect_varies(out, axis=-2, what=f"transformer_layer of a {shape} array: the outputs of its tokens",
                              idea="a layer maps each (different) token to its own output")


def _norms(impl, params: dict, eps: float = LN_EPS) -> tuple:
    """LN1 and LN2 made from your layer_norm (tested above), so these tests judge only the wiring (``eps``: LN_EPS)."""
    return tuple(functools.partial(impl.layer_norm, gamma=params[f"{norm}_gamma"], beta=params[f"{norm}_beta"],
                                   eps=eps) for norm in ("ln1", "ln2"))


def _judged_by(expected: np.ndarray, what: str) -> bool:
    """Whether ``expected``, built from your layer_norm, can judge the wiring: it holds no NaN (else the failure).

    NaN is close to NaN: a layer_norm and a transformer_layer that both returned NaN matched here without any
    wiring (a hostile round's).
    """
    return expect_no_nan(expected, what=f"{what}, built from your layer_norm",
                         idea=LN + "; these tests judge the layer's wiring with your own layer_norm, which must give "
                                   "numbers first (its own tests say how)")


def test_residual_paths_with_silent_sublayers(impl):
    # Zero weights and biases: both sub-layers output exactly 0, only residuals and norms remain.
    x, params = _tokens(31, BATCH, N, D_MODEL, loc=0.5), _silenced(_layer_params(32), attention=True, ffn=True)
    ln1, ln2 = _norms(impl, params)
    expected = ln2(ln1(x))
    out = impl.transformer_layer(x, params, N_HEADS)
    # Norms with an eps of their own differ by a few parts in a million: said as that, not as the residuals' order
    # (a blind round's eps=1e-6 was told the residual path and the activation, both right).
    other = next((eps for eps in (1e-6, 1e-8, 1e-12, 0.0, 1e-3, 1e-4) if np.shape(out) == x.shape and np.allclose(
        out, _norms(impl, params, eps)[1](_norms(impl, params, eps)[0](x)), rtol=1e-10, atol=1e-12)), None)
    ignored = (f"its values are those of layer norms with eps={other:g}, not {LN_EPS:g}: give layer_norm the eps "
               "of the contract" if other is not None else "")
    expect_close(out, expected, what="post-LN layer whose attention and feed-forward output 0: LN2(LN1(x))",
                 idea=ignored or POST + "; " + RESIDUAL, tiny_term=ignored)
    expect_close(impl.transformer_layer(x, params, N_HEADS, norm_first=True), x, rtol=1e-12, atol=1e-12,
                 what="pre-LN layer whose attention and feed-forward output 0: x itself", idea=PRE)


def test_feed_forward_residual(impl):
    # Only the attention is silenced, so the expected output is computable by hand.
    x, params = _tokens(33, BATCH, N, D_MODEL, loc=0.5), _silenced(_layer_params(34), attention=True, ffn=False)
    ln1, ln2 = _norms(impl, params)
    h = ln1(x)
    post = ln2(h + _feed_forward(h, params, _relu))
    if not _judged_by(post, "LN2(h + FFN(h)) with h = LN1(x)"):
        return
    expect_close(impl.transformer_layer(x, params, N_HEADS), post,
                 what="post-LN layer with silent attention: LN2(h + FFN(h)) with h = LN1(x)", idea=POST)
    pre = x + _feed_forward(ln2(x), params, _relu)
    expect_close(impl.transformer_layer(x, params, N_HEADS, norm_first=True), pre,
                 what="pre-LN layer with silent attention: x + FFN(LN2(x))", idea=PRE)


def test_post_ln_output_is_normalised(impl):
    x, params = _tokens(35, BATCH, N, D_MODEL, loc=1.0), _layer_params(36)
    out = impl.transformer_layer(x, params, N_HEADS)
    if expect_shape(out, x.shape, what="post-LN transformer_layer of a (2, 5, 12) array", idea=POST):
        z = (out - params["ln2_beta"]) / params["ln2_gamma"]
        expect_close(z.mean(axis=-1), np.zeros((BATCH, N)), atol=1e-9,
                     what="post-LN: mean of (out - ln2_beta) / ln2_gamma over each token's features",
                     idea=POST + ": its last step is LN2")
        expect_close(z.var(axis=-1), np.ones((BATCH, N)), rtol=1e-3, atol=0.0,
                     what="post-LN: variance of (out - ln2_beta) / ln2_gamma over each token's features",
                     idea=POST + ": its last step is LN2")
        _expect_reads_x(impl.transformer_layer(x[:, ::-1], params, N_HEADS), out, idea=POST,
                        passed="the output is normalised by LN2", function="transformer_layer")


def test_pre_ln_keeps_the_residual_stream_unnormalised(impl):
    # LN1 and LN2 ignore a per-token constant shift, so in pre-LN the shift goes straight
    # through the residual path: layer(x + c) = layer(x) + c. Post-LN would remove it.
    x, params = _tokens(37, BATCH, N, D_MODEL), _layer_params(38)
    shift = np.random.default_rng(39).normal(scale=3.0, size=(BATCH, N, 1))
    out = impl.transformer_layer(x, params, N_HEADS, norm_first=True)
    expect_close(impl.transformer_layer(x + shift, params, N_HEADS, norm_first=True), out + shift,
                 rtol=1e-9, atol=1e-9, what="pre-LN: adding a constant c to each token's features adds c to the output",
                 idea=PRE + " (only sub-layer inputs are normalised)")
    _expect_not_x(out, x, passed="layer(x + c) = layer(x) + c", idea=PRE,
                  other=lambda: impl.transformer_layer(x, _other_bias(params), N_HEADS, norm_first=True))


def test_mask_is_passed_to_the_attention(impl):
    # With a causal mask, the first m outputs may depend only on the first m tokens.
    x, params, m = _tokens(40, BATCH, N, D_MODEL), _layer_params(41), 3
    for norm_first in (False, True):
        full = impl.transformer_layer(x, params, N_HEADS, mask=np.tril(np.ones((N, N), dtype=bool)),
                                      norm_first=norm_first)
        prefix = impl.transformer_layer(x[:, :m], params, N_HEADS, mask=np.tril(np.ones((m, m), dtype=bool)),
                                        norm_first=norm_first)
        expect_varies(full, axis=-2, what=f"causal layer (norm_first={norm_first}): the outputs of the 5 tokens",
                      idea="a layer maps each (different) token to its own output")
        expect_close(full[:, :m], prefix,
                     what=f"causal layer (norm_first={norm_first}): the first 3 outputs of 5 tokens vs. of 3 tokens",
                     idea="pass the mask on to multi_head_attention; layer norm and the feed-forward network "
                          "work per token, so the causal mask keeps later tokens out of earlier outputs")
        _expect_not_x(full, x, passed="the first outputs depend only on the first tokens",
                      idea="pass the mask on to multi_head_attention",
                      other=lambda first=norm_first: impl.transformer_layer(
                          x, _other_bias(params), N_HEADS, mask=np.tril(np.ones((N, N), dtype=bool)), norm_first=first))


def _expect_not_x(out, x, *, passed: str, idea: str, other) -> bool:
    """After a test's own check of a relation that x itself satisfies: the layer's output is not x, and reads params.

    Shuffled with the tokens, a causal prefix, a shift passed through: x given back has them all, and so has any
    result made of x alone (-x, x doubled) ("no points without the idea"). ``other``: the same call with another
    output bias of the feed-forward network (:func:`_other_bias`), which every layer adds to every token.
    """
    return expect_differs(out, x, what="transformer_layer(x) against x", idea=idea, passed=passed,
                          expected="a different result: attention and the feed-forward network add to every token") \
        and expect_differs(other(), out, what="transformer_layer(x) with another b_2 (the feed-forward network's "
                                              "output bias) against the params given", idea=idea, passed=passed,
                           expected="a different result: the feed-forward network's output reaches every token")


def _other_bias(params: dict) -> dict:
    """``params`` with another ``b_2``, the feed-forward network's output bias (a result made of x alone ignores it)."""
    return params | {"b_2": params["b_2"] + np.random.default_rng(7).normal(size=params["b_2"].shape)}


def test_layer_is_permutation_equivariant(impl):
    x, params = _tokens(42, BATCH, N, D_MODEL), _layer_params(43)
    perm = np.array([4, 2, 0, 3, 1])
    for norm_first in (False, True):
        out = impl.transformer_layer(x, params, N_HEADS, norm_first=norm_first)
        if not expect_varies(out, axis=-2, what=f"layer (norm_first={norm_first}): the outputs of the 5 tokens",
                             idea="a layer maps each (different) token to its own output"):
            continue
        expect_close(impl.transformer_layer(x[:, perm], params, N_HEADS, norm_first=norm_first), out[:, perm],
                     what=f"layer (norm_first={norm_first}) of shuffled tokens vs. its shuffled output",
                     idea="without positional information a whole layer is blind to order: "
                          "attention mixes positions symmetrically and everything else is per token")
        _expect_not_x(out, x, passed="shuffling the tokens shuffles the outputs",
                      idea="a layer maps each token to its own output through attention and the feed-forward network",
                      other=lambda first=norm_first: impl.transformer_layer(x, _other_bias(params), N_HEADS,
                                                                            norm_first=first))


def test_activation_is_passed_to_the_feed_forward(impl):
    x, params = _tokens(44, BATCH, N, D_MODEL), _silenced(_layer_params(45), attention=True, ffn=False)
    ln1, ln2 = _norms(impl, params)
    pre = x + _feed_forward(ln2(x), params, _gelu_by_tanh)
    if not _judged_by(pre, "x + FFN_gelu(LN2(x))"):
        return
    out = impl.transformer_layer(x, params, N_HEADS, norm_first=True, activation="gelu")
    expect_close(out, pre, what="pre-LN layer with silent attention and activation='gelu': x + FFN_gelu(LN2(x))",
                 idea=_activation_idea(out, x + _feed_forward(ln2(x), params, _relu), PRE))
    h = ln1(x)
    post = ln2(h + _feed_forward(h, params, _gelu_by_tanh))
    out = impl.transformer_layer(x, params, N_HEADS, activation="gelu")
    expect_close(out, post, what="post-LN layer with silent attention and activation='gelu'",
                 idea=_activation_idea(out, ln2(h + _feed_forward(h, params, _relu)), POST))


def _activation_idea(observed, with_relu: np.ndarray, order: str) -> str:
    """The activation not passed on, where the layer's output is its relu one; else the order of its steps.

    (A blind round: a pre-LN layer that normalised with LN1 twice, the activation passed, was told to pass it.)
    """
    if np.shape(observed) == with_relu.shape and np.allclose(observed, with_relu, rtol=1e-7, atol=1e-9):
        return ACTIVATION + " (yours is the layer with relu)"
    return order


def test_reference_values(impl):
    require_independent_draws(impl)
    cases = {
        "transformer_layer/post_ln_relu": ("post-LN layer, relu, random weights, biases, gammas and betas", POST),
        "transformer_layer/pre_ln_relu_causal": ("pre-LN layer, relu, causal mask", PRE),
        "transformer_layer/post_ln_gelu_causal": ("post-LN layer, gelu, causal mask", POST),
        "transformer_layer/pre_ln_gelu": ("pre-LN layer, gelu", PRE),
        "transformer_layer/post_ln_padding": ("post-LN layer, relu, a (2, 1, 5) padding mask", POST),
        "layer_norm/quiet_tokens_large_eps": ("layer_norm of small-variance tokens, random gamma and beta, eps=0.5",
                                              LN),
        "feed_forward/gelu_random_biases": ("feed_forward with gelu and random biases", f"{FFN}; {GELU}"),
        "feed_forward/relu_random_biases": ("feed_forward with relu and random biases", FFN),
        "dropout/seeded_evaluation": ("dropout(x, 0.25, rng, training=False)", "at evaluation dropout does nothing"),
    }
    for name, (what, idea) in cases.items():
        expect_probe(impl, name, what=what, idea=idea,
                     convention=_mask_left_out(name) if name.startswith("transformer_layer/") else None)


def _mask_left_out(probe_name: str):
    """For a probe of a masked layer: a function naming a result that is the same layer without its mask, or "".

    Only where the mask changes the layer's output and the result is that unmasked layer's (a blind round: a mask
    not passed on was told only the pre-LN or post-LN order, which the layer had right).
    """
    def named(result, *args) -> str:
        _, kwargs = PROBES[probe_name].arguments()
        if kwargs.get("mask") is None:
            return ""
        masked, unmasked = _own_layer(*args, **kwargs), _own_layer(*args, **{**kwargs, "mask": None})
        if (np.shape(result) != unmasked.shape or np.allclose(masked, unmasked)
                or not np.allclose(result, unmasked, rtol=1e-7, atol=1e-9)):
            return ""
        return ("yours is this layer computed without its mask: pass the mask on to multi_head_attention (the "
                "layer's only step that mixes tokens)")
    return named


# ---------------------------------------------------------------- every kind of input


@probe("layer_norm")
def quiet_tokens_default_eps():
    # Variance about 1e-5: eps = 1e-5 (the default, as nn.LayerNorm) against 1e-6 changes every output.
    rng = np.random.default_rng(722)
    x = rng.normal(loc=0.5, scale=0.003, size=(BATCH, N, D_MODEL))
    return (x, rng.uniform(0.5, 2.0, size=D_MODEL), rng.normal(size=D_MODEL)), {}


# quiet_tokens_default_eps' input with the eps of other libraries (T5 1e-6, BERT 1e-12, Keras 1e-3): a default
# eps that is one of them gives one of these.
@probe("layer_norm")
def quiet_tokens_eps_1e_6():
    return quiet_tokens_default_eps()[0], {"eps": 1e-6}


@probe("layer_norm")
def quiet_tokens_eps_1e_12():
    return quiet_tokens_default_eps()[0], {"eps": 1e-12}


@probe("layer_norm")
def quiet_tokens_eps_1e_3():
    return quiet_tokens_default_eps()[0], {"eps": 1e-3}


def test_dropout_draws_independently_for_every_row_and_batch(impl):
    require_independent_draws(impl)
    x = np.ones((3, 4, 64))
    out = impl.dropout(x, 0.5, kinds.rng("dropout/rows"))
    if not expect_shape(out, x.shape, what="dropout of a (3, 4, 64) array", idea=DROPOUT):
        return
    kept = (np.asarray(out) != 0).reshape(-1, 64)
    distinct = len({row.tobytes() for row in kept})
    expect(distinct == kept.shape[0], what="the keep-patterns of the 12 rows of dropout(ones((3, 4, 64)), 0.5)",
           expected="12 different patterns (two rows of 64 independent draws agree with probability 2**-64)",
           observed=f"only {distinct} different patterns: rows or batches share one mask",
           idea="draw one random number per entry, rng.random(x.shape), not one mask for the last axis "
                "(or for one row) broadcast over the others")


def test_layer_functions_with_any_number_of_leading_axes(impl):
    idea = ("batch axes are just more leading axes: each token's result is what it is alone, for any number of "
            "leading axes (none included)")
    params = _layer_params(723)
    for lead in kinds.MORE_LEADING:
        x = kinds.normal(f"layer/lead{len(lead)}", (*lead, N, D_MODEL))
        flat = x.reshape(-1, N, D_MODEL)
        what = f"x of shape {x.shape} ({kinds.describe_axes(lead)})"
        expect_close(impl.layer_norm(x, params["ln1_gamma"], params["ln1_beta"]),
                     np.stack([impl.layer_norm(t, params["ln1_gamma"], params["ln1_beta"]) for t in flat]
                              ).reshape(x.shape), what=f"layer_norm of {what} vs. each sequence alone", idea=idea)
        expect_close(impl.feed_forward(x, params), _feed_forward(x, params, _relu),
                     what=f"feed_forward of {what}", idea=FFN + "; " + idea)
        expect_close(impl.transformer_layer(x, params, N_HEADS),
                     np.stack([impl.transformer_layer(t, params, N_HEADS) for t in flat]).reshape(x.shape),
                     what=f"transformer_layer of {what} vs. each sequence alone", idea=idea)
    # The contrast: each sequence gets its own result (one result for every sequence is each one's "alone" too).
    for name, call in (("layer_norm", lambda t: impl.layer_norm(t, params["ln1_gamma"], params["ln1_beta"])),
                       ("transformer_layer", lambda t: impl.transformer_layer(t, params, N_HEADS))):
        expect_differs(call(flat[1]), call(flat[0]), what=f"{name} of two different sequences of {N} tokens",
                       expected="different results: each token's result is computed from its own features",
                       passed="each sequence's result is what it is alone", idea=idea)
    # And layer_norm changes the tokens (x given back unchanged is also what each sequence gets alone).
    expect_differs(impl.layer_norm(flat[0], params["ln1_gamma"], params["ln1_beta"]), flat[0],
                   what=f"layer_norm of a sequence of {N} tokens against the sequence itself",
                   expected="normalised tokens (mean 0 and variance 1 before gamma and beta), not the tokens as given",
                   passed="each sequence's result is what it is alone", idea=idea)
    _expect_not_x(impl.transformer_layer(flat[0], params, N_HEADS), flat[0], idea=idea,
                  passed="each sequence's result is what it is alone",
                  other=lambda: impl.transformer_layer(flat[0], _other_bias(params), N_HEADS))
    x32 = kinds.normal("layer/float32", (N, D_MODEL), dtype=np.float32)
    params32 = {name: value.astype(np.float32) if isinstance(value, np.ndarray) else
                {k: v.astype(np.float32) for k, v in value.items()} for name, value in params.items()}
    for activation in ("relu", "gelu"):  # (a blind round's gelu constant np.float64(0.044715) made it float64)
        expect_dtype(impl.transformer_layer(x32, params32, N_HEADS, activation=activation), np.float32,
                     idea="dtype in = dtype out, through every sub-layer: no float64 constants or arrays",
                     what=f"transformer_layer of float32 x and params, activation={activation!r}")


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_norm(rng: np.random.Generator) -> tuple[tuple, dict]:
    batch, n, d = unseen.sizes(rng, (1, 4), (2, 6), (3, 9))
    x = rng.normal(loc=2.0, scale=3.0, size=(batch, n, d))
    return (x, rng.normal(size=d), rng.normal(size=d)), {"eps": float(rng.uniform(1e-6, 1e-2))}


def _unseen_ffn(rng: np.random.Generator) -> tuple[tuple, dict]:
    batch, n, d_model, d_ff = unseen.sizes(rng, (1, 4), (2, 6), (2, 7), (3, 10))
    x = rng.normal(size=(batch, n, d_model))
    params = {"w_1": rng.normal(size=(d_model, d_ff)), "b_1": rng.normal(size=d_ff),
              "w_2": rng.normal(size=(d_ff, d_model)), "b_2": rng.normal(size=d_model)}
    return (x, params), {"activation": ("relu", "gelu")[int(rng.integers(2))]}


def _own_ffn(x: np.ndarray, params: dict, activation: str = "relu") -> np.ndarray:
    return _feed_forward(x, params, _relu if activation == "relu" else _gelu_by_tanh)


def _unseen_dropout(rng: np.random.Generator) -> tuple[tuple, dict]:
    # The API leaves the draws open (draws_left_open): what it fixes is checked (:func:`_dropped_so`), on entries
    # that all differ from 0, enough of them to count the share dropped.
    x = rng.uniform(0.5, 2.0, size=unseen.sizes(rng, (20, 40), (30, 60)))
    x *= rng.choice([-1.0, 1.0], size=x.shape)
    chosen = rng.random()
    if chosen < 0.2:
        return (x, float(rng.uniform(0.1, 0.9)), unseen.generator(rng)), {"training": False}
    return (x, 0.0 if chosen < 0.3 else float(rng.uniform(0.2, 0.6)), unseen.generator(rng)), {}


def _own_dropout(x: np.ndarray, rate: float, rng: np.random.Generator, training: bool = True) -> dict:
    """Not an answer (the draws are the student's to choose): what any right answer must be, for :func:`_dropped_so`."""
    return {"x": x, "rate": rate, "training": training}


def _dropped_so(observed, expected: dict) -> bool:
    """Whether ``observed`` is an inverted dropout of ``expected``'s x at its rate (x itself when it must be).

    Every entry 0 or x / (1 - rate), and the share of zeros within five standard deviations of the rate.
    """
    x, rate = expected["x"], expected["rate"]
    try:
        got = np.asarray(observed, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    if got.shape != x.shape:
        return False
    if not expected["training"] or rate == 0:
        return bool(np.array_equal(got, x))
    dropped = got == 0
    kept_right = np.isclose(got, x / (1.0 - rate), rtol=1e-12, atol=0.0)
    spread = 5 * np.sqrt(rate * (1 - rate) / x.size)
    return bool(np.all(dropped | kept_right)) and abs(float(dropped.mean()) - rate) <= spread


def _own_init_layer(rng: np.random.Generator, d_model: int, n_heads: int, d_ff: int) -> dict:
    attention = {name: rng.normal(0.0, 1.0 / np.sqrt(d_model), size=(d_model, d_model))
                 for name in ("w_q", "w_k", "w_v", "w_o")}
    attention.update({name: np.zeros(d_model) for name in ("b_q", "b_k", "b_v", "b_o")})
    w_1 = rng.normal(0.0, 1.0 / np.sqrt(d_model), size=(d_model, d_ff))
    w_2 = rng.normal(0.0, 1.0 / np.sqrt(d_ff), size=(d_ff, d_model))
    return {"attention": attention, "ln1_gamma": np.ones(d_model), "ln1_beta": np.zeros(d_model),
            "ln2_gamma": np.ones(d_model), "ln2_beta": np.zeros(d_model), "w_1": w_1, "b_1": np.zeros(d_ff),
            "w_2": w_2, "b_2": np.zeros(d_model)}


def _unseen_init_layer(rng: np.random.Generator) -> tuple[tuple, dict]:
    n_heads, d_head = unseen.sizes(rng, (1, 4), (1, 4))
    d_ff, = unseen.sizes(rng, (2, 9), avoid=(n_heads, d_head, n_heads * d_head))
    return (unseen.generator(rng), n_heads * d_head, n_heads, d_ff), {}


def _unseen_layer(rng: np.random.Generator) -> tuple[tuple, dict]:
    n_heads, d_head = unseen.sizes(rng, (1, 4), (1, 4))
    d_model = n_heads * d_head
    batch, n, d_ff = unseen.sizes(rng, (1, 5), (2, 7), (3, 10), avoid=(n_heads, d_model))
    attention = {name: rng.normal(scale=1 / np.sqrt(d_model), size=(d_model, d_model))
                 for name in ("w_q", "w_k", "w_v", "w_o")}
    attention.update({name: rng.normal(scale=0.5, size=d_model) for name in ("b_q", "b_k", "b_v", "b_o")})
    params = {"attention": attention, "w_1": rng.normal(size=(d_model, d_ff)), "b_1": rng.normal(size=d_ff),
              "w_2": rng.normal(size=(d_ff, d_model)), "b_2": rng.normal(size=d_model)}
    for norm in ("ln1", "ln2"):
        params[f"{norm}_gamma"], params[f"{norm}_beta"] = rng.uniform(0.5, 1.5, size=d_model), rng.normal(size=d_model)
    x = rng.normal(size=(batch, n, d_model))
    mask = np.tril(np.ones((n, n), dtype=bool)) if rng.random() < 0.5 else None
    return (x, params, n_heads), {"mask": mask, "norm_first": bool(rng.random() < 0.5),
                                  "activation": ("relu", "gelu")[int(rng.integers(2))]}


def _own_layer(x: np.ndarray, params: dict, n_heads: int, mask: np.ndarray | None = None, norm_first: bool = False,
               activation: str = "relu") -> np.ndarray:
    from tests.own_models import _layer_norm, _mha

    def norm(h: np.ndarray, which: str) -> np.ndarray:
        return _layer_norm(h, params[f"{which}_gamma"], params[f"{which}_beta"], LN_EPS)

    if norm_first:
        h = x + _mha(norm(x, "ln1"), params["attention"], n_heads, mask)
        return h + _own_ffn(norm(h, "ln2"), params, activation)
    h = norm(x + _mha(x, params["attention"], n_heads, mask), "ln1")
    return norm(h + _own_ffn(h, params, activation), "ln2")


unseen.register("layer", {
    "layer_norm": unseen.Twin(_unseen_norm, lambda x, gamma, beta, eps: (
        (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma + beta),
        LN, unseen.close),
    "feed_forward": unseen.Twin(_unseen_ffn, _own_ffn, FFN, unseen.close),
    "dropout": unseen.Twin(_unseen_dropout, _own_dropout, DROPOUT, _dropped_so),
    "init_transformer_layer": unseen.Twin(_unseen_init_layer, _own_init_layer, INIT, unseen.close),
    "transformer_layer": unseen.Twin(_unseen_layer, _own_layer, POST + "; " + PRE, unseen.close),
})
