"""Exercise 12: whose "not" is it? The bag-of-words model, its gradients and training, the measures, then the claim.

Expected values come from this file: its own bag-of-words model, its own
central differences, Adam's formula (exercise 9's tests), hand counts, and,
for ``compare``, the figures recomputed here from the models it returns, with
this file's own forward passes (never yours), on a task drawn here (its own
vocabulary, ids shuffled, and longer sentences). The claim is scored on a bag
model that this file trains with your ``pooled_gradients``: its own first
model, batches and Adam, your gradient at every step (checked as it comes), so
only your gradients can earn it, never a model or a loss curve made another
way. That attention with positions reads the pairs is exercise 9's ``train``
at work, not this exercise's: ``compare`` shows it, and no test here scores it.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

from tests import moves, unseen
from tests.effort import (
    EFFORT,
    EFFORT_FLOOR,
    cpu_call,
    cpu_seconds_per_call,
    message,
    once,
    require,
    seed_of,
    submission_salt,
    too_costly,
    within_budget,
)
from tests.failures import Failure, fail_check
from tests.feedback import (
    call_or_explain,
    expect,
    expect_close,
    expect_differs,
    expect_equal,
    expect_raises_value_error,
    expect_shape,
    few_numbers,
)
from tests.own_models import (
    _adam,
    _central,
    _forward,
    _loss,
    _show_losses,
    checked_gradients,
    expect_gradient,
    read_losses,
)
from tests.probes import expect_probe, probe
from tests.steps import Stage, pipeline

ROOT = Path(__file__).resolve().parent.parent
READ = "docs/reading.md#meaning"
# Small inputs for the function tests; sizes all differ (sentences, seq, vocab, d_model, hidden).
N_EX, SEQ, VOCAB, D_SMALL, HIDDEN = 5, 7, 13, 6, 9
COMPARE_SEED, TASK_SEED = 1212, 1213
CLAIM_LR = 2e-2  # compare's default

FEATURES = ("the bag: the mean over the positions of embedding[tokens[i]] (first d_model columns), then the "
            "asked word's own row embedding[tokens[i, query_position[i]]] (last d_model columns)")
POOLED = ("the bag-of-words model: f = pooled_features(...), hidden = relu(f @ w_hidden + b_hidden), "
          "logits = hidden @ w_out + b_out")
GRADS = ("backwards through the bag model: cross_entropy, linear_backward for the read-out, the ReLU (gradient "
         "only where its input was positive), linear_backward for the hidden layer, then the features: the first "
         "half shared by the seq tokens (1/seq each), the second half to the asked word; a token that occurs "
         "several times, or the asked word (also in the mean), adds every contribution (np.add.at)")
TRAIN = ("train_pooled: init_pooled(rng, len(vocab), d_model, d_hidden), then every step a batch drawn from rng, "
         f"pooled_gradients and adam_step with the state of the step before ({READ})")
COUNT = ("pair_accuracy counts only the examples of a pair (pair >= 0): the fraction right, and the fraction of "
         "pairs whose two members are both right")
LOOK = ("negation_attention: from the row query_position of each paired example, the weight on the column "
        "own_slot and on the column other_slot, averaged over the paired examples and the heads")
COMPARE = ("compare: train_pooled, then exercise 9's train (positions on), both on train_task from rng; each "
           "model's figures come from its predictions (the highest logit) on test_task")
BOUND = ("a bag of words gives the two members of a pair the same input, so the same answer: one right at most. "
         "Trained, it answers yes or no, exactly one of each pair right (0.5), and still gets the control "
         f"sentences right (two 'not's or none: the bag does differ there) ({READ})")
CHECKS = "bad input raises ValueError, and the message names the offending argument"


@functools.cache
def negation_tasks():
    """The given task module (_negation_task.py), loaded from the kit (the reference's copy when there is one)."""
    for folder in ("solutions", "exercises"):
        path = ROOT / folder / "_negation_task.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(f"_attention_kit_negation_task_{folder}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError("_negation_task.py is missing from the kit (solutions/ and exercises/)")


# ---------------------------------------------------------------- the tests' own bag model

def _features(embedding, tokens, query_position):
    # The bag as word counts (another route to the same mean): share of each word in the sentence, times the table.
    embedding = np.asarray(embedding, dtype=np.float64)
    words = np.arange(embedding.shape[0])
    shares = (np.asarray(tokens)[..., None] == words).mean(axis=1)  # (n, vocab)
    asked = np.take_along_axis(np.asarray(tokens), np.asarray(query_position)[:, None], axis=1)[:, 0]
    return np.hstack([shares @ embedding, (asked[:, None] == words) @ embedding])


def _pooled(params, tokens, query_position):
    hidden = np.clip(np.einsum("nf,fh->nh", _features(params["embedding"], tokens, query_position),
                               params["w_hidden"]) + params["b_hidden"], 0.0, None)
    return np.einsum("nh,hv->nv", hidden, params["w_out"]) + params["b_out"]


def _pooled_params(seed: int | list[int], vocab: int = VOCAB, d: int = D_SMALL, hidden: int = HIDDEN) -> dict:
    rng = np.random.default_rng(seed)
    return {"embedding": rng.normal(size=(vocab, d)),
            "w_hidden": rng.normal(scale=1 / np.sqrt(d), size=(2 * d, hidden)),
            "b_hidden": rng.normal(scale=0.5, size=hidden), "w_out": rng.normal(scale=1 / np.sqrt(hidden),
                                                                                size=(hidden, vocab)),
            "b_out": rng.normal(scale=0.3, size=vocab)}


def _batch(seed: int):
    """Sentences with repeated tokens, the asked word also elsewhere in the sentence, queries at different places."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, size=(N_EX, SEQ))
    tokens[:, 1] = tokens[:, 5]  # every sentence repeats a token
    query = np.array([5, 0, 3, 6, 1])
    tokens[0, 2] = tokens[0, 5]  # the first asked word occurs three times
    return tokens, query, rng.integers(0, VOCAB, size=N_EX)


# ---------------------------------------------------------------- the test's task: one the code cannot have seen

EXTRA_WORDS = ("alpha", "bravo", "charlie", "delta", "echo")
VARIANT = ("a task drawn by the test: its own seed, sentences of 15 tokens (up to 4 padding tokens before them), "
           "five more words and every token id shuffled; compare must train on the task it is given")


def variant_tasks(seed: int, n_train: int = 192, n_test: int = 64, max_shift: int = 4) -> tuple[dict, dict]:
    """A training set (pairs and as many controls) and a held-out set (pairs and a few controls), ids shuffled."""
    rng = np.random.default_rng(seed)
    make = negation_tasks().negation_task
    train_set = make(rng, n_train, n_controls=n_train, max_shift=max_shift)
    test_set = make(rng, n_test, n_controls=n_test // 2, max_shift=max_shift)
    words = [*train_set["vocab"], *EXTRA_WORDS]
    new_id = np.empty(len(words), dtype=np.int64)
    new_id[rng.permutation(len(words))] = np.arange(len(words))
    vocab = [""] * len(words)
    for old, word in enumerate(words):
        vocab[new_id[old]] = word
    out = []
    for task in (train_set, test_set):
        moved = dict(task)
        moved["tokens"], moved["target"], moved["vocab"] = new_id[task["tokens"]], new_id[task["target"]], list(vocab)
        out.append(moved)
    return out[0], out[1]


# ---------------------------------------------------------------- probes (reference values, for the diagnosis)

@probe("pooled_features")
def repeated_words():
    tokens, query, _ = _batch(1201)
    return (_pooled_params(1202)["embedding"], tokens, query), {}


@probe("pooled_features", rejects="query_position")
def a_query_past_the_end():
    tokens, _, _ = _batch(1203)
    return (_pooled_params(1204)["embedding"], tokens, np.array([0, 1, 2, 3, SEQ])), {}


@probe("init_pooled")
def seeded():
    return (np.random.default_rng(1205), VOCAB, D_SMALL, HIDDEN), {}


@probe("pooled_forward")
def half_the_hidden_units_cut():
    tokens, query, _ = _batch(1206)
    return (_pooled_params(1207), tokens, query), {}


@probe("pooled_gradients")
def repeated_tokens():
    tokens, query, target = _batch(1208)
    return (_pooled_params(1209), tokens, query, target), {}


@probe("train_pooled")
def three_small_steps():
    task = negation_tasks().negation_task(np.random.default_rng(1210), 10, n_controls=4)
    return (np.random.default_rng(1211), task), {"d_model": D_SMALL, "d_hidden": HIDDEN, "steps": 3, "batch_size": 8}


@probe("pair_accuracy")
def pairs_and_controls():
    return (np.array([3, 3, 4, 2, 4, 4, 1, 3]), np.array([3, 4, 4, 2, 3, 4, 2, 3]),
            np.array([0, 0, -1, 1, 2, 2, -1, 1])), {}


@probe("negation_attention")
def two_heads():
    task = negation_tasks().negation_task(np.random.default_rng(1212), 3, n_controls=2)
    n, seq = task["tokens"].shape
    scores = np.random.default_rng(1213).normal(scale=2.0, size=(n, 2, seq, seq))
    return (np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True), task), {}



@probe("compare")
def three_steps_each():
    # Both models trained 3 steps from one generator: the order of the two trainings decides the attention model,
    # so its weights on the own and the other slot show it.
    tasks = negation_tasks()
    train_task = tasks.negation_task(np.random.default_rng(1214), 8, n_controls=4)
    test_task = tasks.negation_task(np.random.default_rng(1215), 4, n_controls=2)
    return (np.random.default_rng(1216), train_task, test_task), {"steps": 3}

# The steps of the pipelines above, for the diagnosis of a mistake no catalogue entry explains (tests/steps.py):
# the first output that differs, in the order the function computes them, names the step to revisit.
def _halves(result: tuple) -> tuple:
    features = result[0]
    if features.ndim != 2 or features.shape[1] % 2:
        raise ValueError("not two halves")
    return features[:, :features.shape[1] // 2], features[:, features.shape[1] // 2:]


pipeline("init_pooled", ("b_hidden", "b_out", "embedding", "w_hidden", "w_out"),
         Stage("embedding", "the embedding (drawn first)", "the embedding is drawn first: 0.3 times "
               "rng.normal(size=(vocab_size, d_model))"),
         Stage("w_hidden", "w_hidden (drawn second)", "w_hidden is drawn second: init_weight(rng, 2 d_model, "
               "d_hidden)"),
         Stage("w_out", "w_out (drawn third)", "w_out is drawn third: init_weight(rng, d_hidden, vocab_size)"),
         Stage("b_hidden", "the biases", "the biases are zeros, b_hidden (d_hidden,) and b_out (vocab_size,)"),
         Stage("b_out", "the biases", "the biases are zeros, b_hidden (d_hidden,) and b_out (vocab_size,)"))
# Only own and other are figures of the probe's record: a difference there may come from the training or from
# the reading, so the step is named by what it computes, and the revisit gives both.
_COMPARE_STEP = ("the attention the trained model gives the asked verb's slots on test_task (own and other: "
                 "training, then reading)")
_COMPARE_IDEA = ("two things make own and other: the training (train_pooled first, then exercise 9's train with "
                 "positions on, both on train_task, from rng in this order, with compare's steps and lr) and the "
                 "reading (negation_attention of the trained attention model's weights on test_task, not on "
                 "train_task)")
pipeline("compare", ("other", "own"),
         Stage("own", _COMPARE_STEP, _COMPARE_IDEA),
         Stage("other", _COMPARE_STEP, _COMPARE_IDEA))
pipeline("pooled_features", ("bag", "asked"),
         Stage("bag", "the bag (the first d_model columns)", "the bag: the first d_model columns are the mean over "
               "the seq positions of embedding[tokens[i]] (a mean, not a sum; a repeated token counted each time)"),
         Stage("asked", "the asked word (the last d_model columns)", "the asked word: the last d_model columns are "
               "its own row, embedding[tokens[i, query_position[i]]], with each sentence's own query_position"),
         derive=_halves)
pipeline("pooled_gradients", ("loss", "b_hidden", "b_out", "embedding", "w_hidden", "w_out"),
         Stage("loss", "the loss (the forward pass)", "the loss: cross_entropy (exercise 9) of the logits "
               "pooled_forward computes: features, relu(f @ w_hidden + b_hidden), @ w_out + b_out"),
         Stage("w_out", "the read-out's gradient", "the read-out: linear_backward(grad_logits, hidden, w_out), "
               "hidden being the ReLU's output"),
         Stage("b_out", "the read-out's gradient", "the read-out: linear_backward(grad_logits, hidden, w_out)"),
         Stage("w_hidden", "the gradient through the ReLU to the hidden layer", "the ReLU passes the gradient "
               "only where its input (before the ReLU) was positive, and blocks it elsewhere; then "
               "linear_backward(grad_before, features, w_hidden)"),
         Stage("b_hidden", "the gradient through the ReLU to the hidden layer", "the ReLU passes the gradient "
               "only where its input was positive; then linear_backward(grad_before, features, w_hidden)"),
         Stage("embedding", "the gradient back to the embedding rows", "the features' gradient back to the "
               "embedding: its first d_model columns shared by the seq tokens (1/seq each, the mean's share), its "
               "last d_model to the asked word alone; a repeated token, and the asked word (also in the mean), "
               "add every contribution (np.add.at)"))
pipeline("train_pooled", ("b_hidden", "b_out", "embedding", "w_hidden", "w_out", "losses"),
         Stage("losses", "the losses of the steps", "the steps after the first: each draws its own batch from "
               "rng, adam_step gets the step's lr and the state the step before returned, and each loss is "
               "pooled_gradients' on its batch, before its step's update",
               first="the first step: init_pooled(rng, len(vocab), d_model, d_hidden) draws first, then the batch "
               "rng.integers(0, n, size=batch_size), and the loss is pooled_gradients' on that batch, before the "
               "update", stop="one loss per step, steps of them"),
         *(Stage(key, "the model returned", "the model returned is the one after the last Adam step")
           for key in ("embedding", "w_hidden", "b_hidden", "w_out", "b_out")))
pipeline("pair_accuracy", ("accuracy", "both_right"),
         Stage("accuracy", "the accuracy per sentence", "accuracy: the fraction right among the examples of a "
               "pair (pair >= 0), the controls left out"),
         # (a blind round: np.unique(pair) with the controls' -1 counted as one more pair was told this line
         # without the controls)
         Stage("both_right", "the pairs with both right", "both_right: the fraction of pairs whose two members "
               "are both right; the pairs are the ids pair >= 0, and the controls (pair = -1) are in no pair, not "
               "one more"))
pipeline("negation_attention", ("own", "other"),
         Stage("own", "the weight on the own slot", "own: the mean over the paired examples and the heads of the "
               "weight from the row query_position to the column own_slot"),
         Stage("other", "the weight on the other slot", "other: the same mean to the column other_slot"))


# ---------------------------------------------------------------- pooled_features

def test_pooled_features_shape(impl):
    tokens, query, _ = _batch(10)
    out = call_or_explain(impl.pooled_features, _pooled_params(11)["embedding"], tokens, query,
                          what=f"pooled_features(embedding ({VOCAB}, {D_SMALL}), tokens ({N_EX}, {SEQ}), "
                               f"query_position ({N_EX},))", idea=FEATURES)
    expect_shape(out, (N_EX, 2 * D_SMALL), what="pooled_features' result",
                 idea="one row per sentence: the mean (d_model) next to the asked word's embedding (d_model)")


def test_pooled_features_values(impl):
    tokens, query, _ = _batch(12)
    embedding = _pooled_params(13)["embedding"]
    out = impl.pooled_features(embedding, tokens, query)
    if expect_shape(out, (N_EX, 2 * D_SMALL), what="pooled_features' result", idea=FEATURES):
        expect_close(np.asarray(out)[:, :D_SMALL], _features(embedding, tokens, query)[:, :D_SMALL], rtol=1e-10,
                     what="the first d_model columns (sentences that repeat a token)",
                     idea=FEATURES + ": the mean over all seq positions, a repeated token counted each time")
        expect_close(np.asarray(out)[:, D_SMALL:], _features(embedding, tokens, query)[:, D_SMALL:], rtol=1e-10,
                     what="the last d_model columns (the questions asked at positions 5, 0, 3, 6, 1)",
                     idea=FEATURES + ": each sentence's own query_position")


def test_pooled_features_forget_the_order(impl):
    # Shuffle the positions of every sentence (the question follows its word): a bag cannot tell.
    tokens, query, _ = _batch(14)
    embedding = _pooled_params(15)["embedding"]
    order = np.random.default_rng(16).permutation(SEQ)
    moved_query = np.argsort(order)[query]
    first = impl.pooled_features(embedding, tokens, query)
    if not expect_shape(first, (N_EX, 2 * D_SMALL), what="pooled_features' result", idea=FEATURES):
        return
    second = impl.pooled_features(embedding, tokens[:, order], moved_query)
    expect_close(second, first, rtol=1e-10, atol=1e-12,
                 what="pooled_features of the same sentences, words shuffled (the question kept on its word)",
                 idea="a mean ignores the order: " + FEATURES)
    # The order forgotten, not the words: features that ignore the sentence (zeros, a constant) are no bag.
    other = tokens.copy()
    other[:, 2] = (other[:, 2] + 1) % VOCAB  # (no question is asked at position 2)
    third = np.asarray(impl.pooled_features(embedding, other, query), dtype=float)
    changed = np.any(np.abs(third[:, :D_SMALL] - np.asarray(first, dtype=float)[:, :D_SMALL]) > 1e-9, axis=1)
    expect(bool(np.all(changed)), what="pooled_features of the same sentences with one word changed in each",
           expected="a different mean in every sentence (the bag holds other words)",
           observed=f"the same mean in {int(np.sum(~changed))} of {N_EX} sentences", idea=FEATURES)
    # And the bag is one of the embedding's rows (features of another table change with the words and forget the
    # order too).
    expect_differs(impl.pooled_features(2.0 * embedding, tokens, query), first,
                   what="pooled_features with every embedding doubled against the same sentences' features",
                   expected="different features (twice the first): each word is its row of the embedding given",
                   passed="the features forget the order and change with the words", idea=FEATURES)


def test_pooled_features_rejects_a_bad_query_position(impl):
    tokens, _, _ = _batch(17)
    expect_raises_value_error(lambda: impl.pooled_features(_pooled_params(18)["embedding"], tokens,
                                                           np.array([0, 1, 2, 3, SEQ])), argument="query_position",
                              what=f"pooled_features with a query_position of {SEQ} for sentences of {SEQ} tokens",
                              idea=CHECKS)


# ---------------------------------------------------------------- init_pooled

def test_init_pooled_keys_and_shapes(impl):
    params = call_or_explain(impl.init_pooled, np.random.default_rng(0), VOCAB, D_SMALL, HIDDEN,
                             what=f"init_pooled(rng, {VOCAB}, {D_SMALL}, {HIDDEN})", idea=POOLED)
    shapes = {"embedding": (VOCAB, D_SMALL), "w_hidden": (2 * D_SMALL, HIDDEN), "b_hidden": (HIDDEN,),
              "w_out": (HIDDEN, VOCAB), "b_out": (VOCAB,)}
    observed = {key: np.shape(params.get(key)) for key in shapes} if isinstance(params, dict) else None
    if expect(observed == shapes, what=f"init_pooled(rng, {VOCAB}, {D_SMALL}, {HIDDEN})'s shapes",
              expected=str(shapes), observed=str(observed),
              idea=POOLED + "; w_hidden reads both halves: 2 d_model rows"):
        expect_equal(params["b_hidden"], np.zeros(HIDDEN), what="b_hidden", idea="the biases start at zeros")
        expect_equal(params["b_out"], np.zeros(VOCAB), what="b_out", idea="the biases start at zeros")


def test_init_pooled_uses_only_its_rng(impl):
    first = impl.init_pooled(np.random.default_rng(5), VOCAB, D_SMALL, HIDDEN)
    again = impl.init_pooled(np.random.default_rng(5), VOCAB, D_SMALL, HIDDEN)
    other = impl.init_pooled(np.random.default_rng(6), VOCAB, D_SMALL, HIDDEN)
    expect_equal(again["w_hidden"], first["w_hidden"], what="w_hidden from two generators with seed 5",
                 idea="all randomness comes from rng: the same seed gives the same model")
    expect(not np.allclose(other["embedding"], first["embedding"]), what="embedding from seeds 5 and 6",
           expected="different values", observed="the same values", idea="draw the embedding from rng")
    expect_probe(impl, "init_pooled/seeded", what=f"init_pooled(default_rng(1205), {VOCAB}, {D_SMALL}, {HIDDEN})",
                 idea="init_pooled draws in this order: the embedding (0.3 * rng.normal), then init_weight for "
                      "w_hidden, then init_weight for w_out; the biases are zeros", rtol=1e-12, atol=0.0)


# ---------------------------------------------------------------- pooled_forward

def test_pooled_forward_values(impl):
    tokens, query, _ = _batch(20)
    params = _pooled_params(21)
    logits = call_or_explain(impl.pooled_forward, params, tokens, query,
                             what=f"pooled_forward on {N_EX} sentences of {SEQ} tokens", idea=POOLED)
    before = _features(params["embedding"], tokens, query) @ params["w_hidden"] + params["b_hidden"]
    cut = float(np.mean(before < 0))
    if expect_shape(logits, (N_EX, VOCAB), what="pooled_forward's logits", idea="one score per word of the vocabulary"):
        expect_close(logits, _pooled(params, tokens, query), rtol=1e-9,
                     what=f"pooled_forward's logits ({cut:.0%} of the hidden units below 0 before the ReLU)",
                     idea=POOLED + "; relu(z) = max(z, 0), applied after the bias")


def test_pooled_forward_rejects_bad_params(impl):
    tokens, query, _ = _batch(22)
    params = _pooled_params(23)
    params["w_hidden"] = params["w_hidden"][:D_SMALL]  # only d_model rows: the asked word's half forgotten
    expect_raises_value_error(lambda: impl.pooled_forward(params, tokens, query), argument="params",
                              what=f"pooled_forward with a w_hidden of shape ({D_SMALL}, {HIDDEN}) for d_model "
                                   f"{D_SMALL}", idea=CHECKS + "; w_hidden must have 2 d_model rows")


# ---------------------------------------------------------------- pooled_gradients

# The gradients by hand, not by nudging: at a larger size (about 3000 parameters) the chain rule costs a few
# forward passes, central differences two per parameter. Checked once per session, on inputs of its own.
ANALYTIC = ("write pooled_gradients by the chain rule, reusing cross_entropy and linear_backward; nudging every "
            "parameter and rerunning the model (central differences) is for checking gradients, not for computing "
            "them")


def _gate(impl) -> list[Failure]:
    vocab, d, hidden, n, seq = 40, 16, 32, 64, 15

    salt = submission_salt("negation")  # inputs no file can hold the answers to (tests/effort.py)

    def draw(attempt: int) -> tuple:
        rng = np.random.default_rng([8112 + 10 * attempt, salt])
        params = _pooled_params([8113 + 10 * attempt, salt], vocab, d, hidden)
        tokens, query = rng.integers(0, vocab, size=(n, seq)), rng.integers(0, seq, size=n)
        return params, tokens, query, rng.integers(0, vocab, size=n)

    params, tokens, query, target = draw(0)
    forward_seconds = cpu_seconds_per_call(lambda: _pooled(params, tokens, query), minimum=1e-3)
    bound = EFFORT * forward_seconds + EFFORT_FLOOR
    (params, tokens, query, target), result, seconds = within_budget(
        draw, lambda inputs: cpu_call(impl, "pooled_gradients", *inputs, budget=bound), bound)
    size = sum(np.size(value) for value in params.values())
    if seconds is None or seconds <= bound:
        return _timed_values(result, params, tokens, query, target, size)
    return [too_costly(f"pooled_gradients on {n} sentences of {seq} tokens ({size} parameters)", seconds, bound,
                       forward_seconds, size, ANALYTIC)]


def _timed_values(result, params, tokens, query, target, size: int) -> list[Failure]:
    """The timed call's gradients at a few seeded entries, against central differences.

    A fast wrong answer at this size only (zeros, say, where a slow estimate would cost too much) is no chain rule.
    """
    grads = result[1] if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict) else None
    for key in ("w_out", "w_hidden", "embedding"):
        got = grads.get(key) if grads is not None else None
        what = (f"pooled_gradients on the larger input ({size} parameters): grads[{key!r}] at 3 entries drawn "
                "from your result")
        if not isinstance(got, np.ndarray) or got.shape != np.shape(params[key]):
            return [message(what, f"an array of shape {np.shape(params[key])}",
                            f"{type(got).__name__} of shape {np.shape(got)}", GRADS)]

        def loss(value, key=key):
            return _loss(_pooled({**params, key: value}, tokens, query), target)

        where, expected = _central(loss, params[key], sample=3, seed=seed_of(got))  # entries only known after
        observed = np.asarray(got, dtype=np.float64)[where]
        if not np.allclose(observed, expected, rtol=1e-5, atol=1e-7):
            return [message(what + ", against central differences", few_numbers(expected),
                            few_numbers(observed), GRADS)]
    return []


def require_analytic(impl) -> bool:
    """Fail the test (with the reason) unless pooled_gradients is computed by the chain rule; True when it is."""
    return require(impl, "pooled_gradients", lambda: _gate(impl))


def test_pooled_gradients_loss(impl):
    if not require_analytic(impl):
        return
    tokens, query, target = _batch(30)
    params = _pooled_params(31)
    result = call_or_explain(impl.pooled_gradients, params, tokens, query, target,
                             what=f"pooled_gradients on {N_EX} sentences", idea=GRADS)
    if expect(isinstance(result, tuple) and len(result) == 2, what="pooled_gradients' result",
              expected="a tuple (loss, grads)", observed=type(result).__name__, idea=GRADS):
        expect_close(result[0], _loss(_pooled(params, tokens, query), target), rtol=1e-9, what="the loss",
                     idea="the loss is cross_entropy(pooled_forward(...), target)")


def test_pooled_gradients_match_central_differences(impl):
    if not require_analytic(impl):
        return
    tokens, query, target = _batch(32)
    params = _pooled_params(33)
    _, grads = impl.pooled_gradients(params, tokens, query, target)
    if not expect(isinstance(grads, dict), what="pooled_gradients' grads", expected="a dict shaped like params",
                  observed=type(grads).__name__, idea=GRADS):
        return

    def loss_of(key):
        def loss(value):
            return _loss(_pooled({**params, key: value}, tokens, query), target)
        return loss

    for key, sample in (("b_out", None), ("w_out", 12), ("b_hidden", None), ("w_hidden", 16)):
        expect_gradient(grads.get(key), loss_of(key), params[key], sample=sample, what=f"grads[{key!r}]", idea=GRADS)
    used = np.unique(tokens)
    asked = np.unique(tokens[np.arange(N_EX), query])

    def loss_rows(value):
        full = params["embedding"].copy()
        full[used] = value
        return loss_of("embedding")(full)

    emb = grads.get("embedding")
    if expect_shape(emb, params["embedding"].shape, what="grads['embedding']", idea=GRADS):
        expect_gradient(np.asarray(emb)[used], loss_rows, params["embedding"][used],
                        what=f"grads['embedding'], the rows of the tokens that occur (repeated tokens; the asked "
                             f"words {asked.tolist()} also in the mean)", idea=GRADS)
        unused = np.setdiff1d(np.arange(VOCAB), used)
        expect_close(np.asarray(emb)[unused], np.zeros((len(unused), D_SMALL)), atol=0,
                     what="grads['embedding'], rows of words that do not occur",
                     idea="a word that is not in the batch gets no gradient")


# ---------------------------------------------------------------- train_pooled

# One sentence repeated: every batch train_pooled draws is the same, however it draws them, so its losses follow
# from init_pooled(rng, ...) and the Adam steps alone; the expected ones come from exercise 9's tests' Adam.
FOLLOW = {"d_model": D_SMALL, "d_hidden": HIDDEN, "steps": 6, "batch_size": 4, "lr": 0.05}


def _one_sentence_task(seed: int) -> dict:
    sentence = negation_tasks().negation_task(np.random.default_rng(seed), 1)
    return {key: np.repeat(value[:1], 5, axis=0) if isinstance(value, np.ndarray) else value
            for key, value in sentence.items()}


def _followed(impl, seed: int, task: dict, keep_state: bool) -> tuple[list[float], dict]:
    """The losses of init_pooled then Adam steps over your pooled_gradients, and the model after the last step."""
    params = impl.init_pooled(np.random.default_rng(seed), len(task["vocab"]), FOLLOW["d_model"], FOLLOW["d_hidden"])
    rows = np.arange(FOLLOW["batch_size"]) % len(task["tokens"])
    state, losses = None, []
    for _ in range(FOLLOW["steps"]):
        loss, grads = impl.pooled_gradients(params, task["tokens"][rows], task["query_position"][rows],
                                            task["target"][rows])
        params, state = _adam(params, grads, state if keep_state else None, FOLLOW["lr"], 0.9, 0.999, 1e-8)
        losses.append(float(loss))
    return losses, params


def _loss_on(params, task: dict) -> float:
    """The loss of a bag model on ``task``, by this file's forward pass (NaN when it is no bag model)."""
    try:
        return _loss(_pooled(params, task["tokens"], task["query_position"]), task["target"])
    except (KeyError, TypeError, ValueError, IndexError):
        return float("nan")


def test_train_pooled_is_init_pooled_then_adam_steps_with_their_state(impl):
    if not require_analytic(impl):  # the expected losses come from your pooled_gradients
        return
    task = _one_sentence_task(40)
    result = call_or_explain(impl.train_pooled, np.random.default_rng(41), task, **FOLLOW,
                             what=f"train_pooled(rng, task, {FOLLOW}) on one sentence repeated", idea=TRAIN)
    losses = np.asarray(result[1] if isinstance(result, tuple) and len(result) == 2 else [], dtype=float).ravel()
    expected, model = _followed(impl, 41, task, keep_state=True)
    expected = np.array(expected)
    if losses.shape == expected.shape and np.allclose(losses, expected, rtol=1e-6, atol=1e-9):
        # The model it returns is the one its losses describe: after the last step (its loss, by this file's forward
        # pass: a model built another way, or the first one, has another).
        expect_close(_loss_on(result[0], task), _loss_on(model, task), rtol=1e-6, atol=1e-9, idea=TRAIN + "; return "
                     "the parameters the last step gave", what="the loss of the model train_pooled returns, on the "
                     f"sentence it trained on, against the model after the {FOLLOW['steps']} steps")
        return
    found, idea = read_losses(losses, expected, {"the losses of Adam steps that each start from state None": (
        lambda: _followed(impl, 41, task, keep_state=False)[0],
        "train_pooled: pass the state adam_step returns into the next call")}, "train_pooled")
    idea = f"{TRAIN}; {idea}" if idea else TRAIN
    expect(False, what=f"the losses of train_pooled on one sentence repeated, {FOLLOW['steps']} steps",
           expected=f"those of init_pooled(rng, ...) then Adam steps with their state: {_show_losses(expected)}",
           observed=f"{_show_losses(losses)}: {found}", idea=idea)


# Sentences that all differ: now the batches decide the losses. Each step draws batch_size rows with replacement,
# rng.integers(0, n, size=batch_size), from the rng init_pooled drew from, right before its gradient.
DRAWN = {"d_model": D_SMALL, "d_hidden": HIDDEN, "steps": 5, "batch_size": 6, "lr": 0.03}
DRAWING = ("each step's batch: rows = rng.integers(0, n, size=batch_size) (with replacement), drawn from the same rng "
           "after init_pooled, one draw per step, right before its pooled_gradients")


def _drawn_losses(impl, seed: int, task: dict, draw, trained: list | None = None) -> list[float]:
    """The losses of init_pooled then Adam steps over your pooled_gradients, each batch's rows ``draw(rng, n)``.

    The model after the last step is appended to ``trained`` when it is given.
    """
    rng = np.random.default_rng(seed)
    params = impl.init_pooled(rng, len(task["vocab"]), DRAWN["d_model"], DRAWN["d_hidden"])
    state, losses = None, []
    for _ in range(DRAWN["steps"]):
        rows = draw(rng, len(task["tokens"]))
        loss, grads = impl.pooled_gradients(params, task["tokens"][rows], task["query_position"][rows],
                                            task["target"][rows])
        params, state = _adam(params, grads, state, DRAWN["lr"], 0.9, 0.999, 1e-8)
        losses.append(float(loss))
    if trained is not None:
        trained.append(params)
    return losses


def test_train_pooled_draws_each_batch_from_rng(impl):
    if not require_analytic(impl):  # the expected losses come from your pooled_gradients
        return
    task = variant_tasks(TASK_SEED + 2, n_train=9, n_test=4)[0]  # 27 sentences, all different
    result = call_or_explain(impl.train_pooled, np.random.default_rng(43), task, **DRAWN,
                             what=f"train_pooled(rng, task, {DRAWN}) on {len(task['tokens'])} different sentences",
                             idea=TRAIN)
    losses = np.asarray(result[1] if isinstance(result, tuple) and len(result) == 2 else [], dtype=float).ravel()
    size = DRAWN["batch_size"]
    trained: list = []
    expected = np.array(_drawn_losses(impl, 43, task, lambda rng, n: rng.integers(0, n, size=size), trained))
    if losses.shape == expected.shape and np.allclose(losses, expected, rtol=1e-6, atol=1e-9):
        # The model too: right losses beside another model (seeded numbers, zeros) say nothing of it ("no points
        # without the idea"); the one returned is the model after the last step, by its loss on the task.
        expect_close(_loss_on(result[0], task), _loss_on(trained[0], task), rtol=1e-6, atol=1e-9,
                     idea=TRAIN + "; return the parameters the last step gave",
                     what=f"the loss of the model train_pooled returns, on the {len(task['tokens'])} sentences, "
                          f"against the model after the {DRAWN['steps']} steps")
        return
    others = {"rows drawn without replacement (rng.choice(n, batch_size, replace=False))":
              lambda rng, n: rng.choice(n, size=size, replace=False),
              "rows drawn as rng.permutation(n)[:batch_size]": lambda rng, n: rng.permutation(n)[:size],
              "the same first rows every step": lambda rng, n: np.arange(size) % n}
    # (a batch drawn otherwise is said only where its losses show it: the losses also follow the steps between the
    # draws, and a blind round's loss recorded after the update, lr not passed on or state dropped were each told
    # "batches drawn some other way")
    found, idea = read_losses(losses, expected, {
        label: (lambda draw=draw: _drawn_losses(impl, 43, task, draw), DRAWING) for label, draw in others.items()},
        "train_pooled")
    expect(False, what=f"the losses of train_pooled on {len(task['tokens'])} different sentences, "
                       f"{DRAWN['steps']} steps of {size}",
           expected=f"those of init_pooled(rng, ...) then, every step, {size} rows from rng.integers(0, n, "
                    f"size=batch_size) and an Adam step: {_show_losses(expected)}",
           observed=f"{_show_losses(losses)}: {found}",
           idea=TRAIN + "; " + (idea if idea and idea != DRAWING else DRAWING))


# ---------------------------------------------------------------- pair_accuracy, negation_attention

def test_pair_accuracy_counts_sentences_and_pairs(impl):
    # Pairs 0, 1, 2 and two controls (-1): right are 0a, 1a, 1b, 2b (and one control, which must not count).
    predicted = np.array([7, 2, 5, 4, 4, 9, 1, 3])
    target = np.array([7, 3, 5, 4, 4, 8, 1, 9])
    pair = np.array([0, 0, -1, 1, 1, 2, -1, 2])
    result = call_or_explain(impl.pair_accuracy, predicted, target, pair, what="pair_accuracy on three pairs and "
                             "two controls", idea=COUNT)
    if expect(isinstance(result, tuple) and len(result) == 2, what="pair_accuracy's result",
              expected="a tuple (accuracy, both_right)", observed=type(result).__name__, idea=COUNT):
        expect_close(result[0], 3 / 6, what="accuracy: 3 of the 6 paired examples right (the controls left out)",
                     idea=COUNT)
        expect_close(result[1], 1 / 3, what="both_right: pair 1 only, of 3 pairs", idea=COUNT)
    # The contract names pairs by their ids, nothing more: ids that are not 0, 1, 2 ..., members apart, a control
    # first (code that pairs neighbouring rows, or counts ids with np.bincount, passed the case above; a blind round).
    predicted = np.array([4, 6, 1, 0, 9, 2, 5, 8])  # right: the first control, rows 2, 3, 4 and 7
    target = np.array([4, 5, 1, 0, 9, 3, 1, 8])
    pair = np.array([-1, 7, 3, 3, 12, 7, -1, 12])
    result = call_or_explain(impl.pair_accuracy, predicted, target, pair, what="pair_accuracy on pairs 7, 3 and 12 "
                             "(pair 7 on rows 1 and 5) and two controls, one first", idea=COUNT)
    if expect(isinstance(result, tuple) and len(result) == 2, what="pair_accuracy's result",
              expected="a tuple (accuracy, both_right)", observed=type(result).__name__, idea=COUNT):
        expect_close(result[0], 4 / 6, what="accuracy on pairs 7, 3 and 12: 4 of the 6 paired examples right",
                     idea=COUNT + "; a pair is the two rows with the same id, wherever they stand")
        expect_close(result[1], 2 / 3, what="both_right on pairs 7, 3 and 12: pairs 3 and 12, of 3 pairs",
                     idea=COUNT + "; a pair is the two rows with the same id, wherever they stand")


def test_pair_accuracy_rejects_a_pair_of_three(impl):
    expect_raises_value_error(lambda: impl.pair_accuracy(np.zeros(3, dtype=int), np.zeros(3, dtype=int),
                                                         np.array([0, 0, 0])), argument="pair",
                              what="pair_accuracy with three examples in pair 0", idea=CHECKS)


def test_negation_attention_reads_the_right_cells(impl):
    task = negation_tasks().negation_task(np.random.default_rng(50), 4, n_controls=3)
    n, seq = task["tokens"].shape
    weights = np.random.default_rng(51).dirichlet(np.ones(seq), size=(n, 3, seq))  # (n, 3 heads, seq, seq)
    paired = np.flatnonzero(task["pair"] >= 0)
    own = np.mean([weights[i, h, task["query_position"][i], task["own_slot"][i]] for i in paired for h in range(3)])
    other = np.mean([weights[i, h, task["query_position"][i], task["other_slot"][i]] for i in paired
                     for h in range(3)])
    result = call_or_explain(impl.negation_attention, weights, task,
                             what=f"negation_attention on random weights ({n} sentences, 3 heads)", idea=LOOK)
    if expect(isinstance(result, tuple) and len(result) == 2, what="negation_attention's result",
              expected="a tuple (own, other)", observed=type(result).__name__, idea=LOOK):
        expect_close(result[0], own, rtol=1e-10, what="own: the asked verb's weight on its own slot", idea=LOOK)
        expect_close(result[1], other, rtol=1e-10, what="other: its weight on the other event's slot", idea=LOOK)
    # The same sentences, the controls first: which rows are paired is the task's pair, not their place (code that
    # took the first rows as the paired ones passed the order above; a blind round).
    order = np.argsort(task["pair"] >= 0, kind="stable")
    moved = {key: value[order] if isinstance(value, np.ndarray) and value.shape[:1] == (n,) else value
             for key, value in task.items()}
    result = call_or_explain(impl.negation_attention, weights[order], moved,
                             what=f"negation_attention on the same {n} sentences, the controls first", idea=LOOK)
    if expect(isinstance(result, tuple) and len(result) == 2, what="negation_attention's result",
              expected="a tuple (own, other)", observed=type(result).__name__, idea=LOOK):
        expect_close(result[0], own, rtol=1e-10, what="own, the controls first", idea=LOOK + "; the paired "
                     "examples are those with pair >= 0, wherever they stand")
        expect_close(result[1], other, rtol=1e-10, what="other, the controls first", idea=LOOK + "; the paired "
                     "examples are those with pair >= 0, wherever they stand")


# ---------------------------------------------------------------- the claim: the bag model your gradients train

# The claim is scored on a bag model that your pooled_gradients trained, in a loop run here: this file's own first
# model (init_pooled's scales, drawn from the test's seed), its own batches and Adam's formula; your loss and
# gradient at every step. Each answer is checked as it comes (a loss and a gradient for every parameter), and at a
# few steps drawn here, against this file's forward pass: the loss, and the gradient along a random direction
# (central differences). So no model or loss curve made another way is scored: only your gradients train it.
# BAG: the model's sizes and train_pooled's batch (its defaults). HERE: the loop of this test, 75 steps on batches of
# 64: the claim holds on 300 of 300 seeds of benchmarks/claim_negation.py's tasks, each control at 1.0 (150 steps of
# 32 did as well; 60 of 64 at lr 4e-2 left one seed at 0.94; 75 of 32 failed 3). Every step is one call of your
# code, which costs a round trip to its sandbox when graded: half as many steps, half as many.
BAG = {"d_model": 16, "d_hidden": 32, "batch_size": 32}
HERE = {"steps": 75, "batch_size": 64, "lr": 3e-2}
SPOT_CHECKS = 6
TRAINED_HERE = (f"the bag model the test trains with your pooled_gradients: {HERE['steps']} Adam steps (lr "
                f"{HERE['lr']}) on batches of {HERE['batch_size']} of train_task, from a first model drawn here")


def _first_bag_model(seed: int, vocab: int) -> dict:
    """A first bag model drawn as init_pooled draws one (embedding 0.3 N(0, 1), w ~ N(0, 1/fan_in), zero biases)."""
    rng = np.random.default_rng(seed)
    d, hidden = BAG["d_model"], BAG["d_hidden"]
    return {"embedding": 0.3 * rng.normal(size=(vocab, d)),
            "w_hidden": rng.normal(0.0, 1 / np.sqrt(2 * d), size=(2 * d, hidden)), "b_hidden": np.zeros(hidden),
            "w_out": rng.normal(0.0, 1 / np.sqrt(hidden), size=(hidden, vocab)), "b_out": np.zeros(vocab)}


def _answer(result, params: dict, batch: tuple, step: str, direction: np.random.Generator | None):
    """``(grads, None)`` when pooled_gradients' ``result`` holds at ``params`` and ``batch``; else ``(None, failure)``.

    As ``tests/own_models.checked_gradients`` checks an answer, against this file's forward pass of the bag model.
    """
    tokens, query, target = batch
    return checked_gradients(result, params, lambda at: _loss(_pooled(at, tokens, query), target),
                             what=f"pooled_gradients at {step}", idea=GRADS, direction=direction)


def train_bag_here(impl, task_seed: int, seed: int, **variant) -> tuple[dict | None, dict, Failure | None]:
    """``(params, test_set, None)``: the bag model trained here over your pooled_gradients; once per session.

    ``params`` is None, with the failure that stopped the training, when an answer of pooled_gradients did not hold.
    """
    def run():
        train_set, test_set = variant_tasks(task_seed, **variant)
        tokens, query, target = (np.asarray(train_set[key]) for key in ("tokens", "query_position", "target"))
        params = _first_bag_model(seed, len(train_set["vocab"]))
        rng = np.random.default_rng(seed + 1)
        spots = {0, HERE["steps"] - 1, *rng.choice(np.arange(1, HERE["steps"] - 1), SPOT_CHECKS - 2, replace=False)}
        state = None
        for step in range(HERE["steps"]):
            rows = rng.integers(0, len(tokens), size=HERE["batch_size"])
            batch = tokens[rows], query[rows], target[rows]
            grads, failure = _answer(impl.pooled_gradients(params, *batch), params, batch,
                                     f"step {step + 1} of " + TRAINED_HERE, rng if step in spots else None)
            if failure is not None:
                return None, test_set, failure
            params, state = _adam(params, grads, state, HERE["lr"], 0.9, 0.999, 1e-8)
        return params, test_set, None

    return once(impl, "pooled_gradients", f"bag trained here {task_seed} {seed} {variant}", run)


def bag_figures(params: dict, test_set: dict) -> dict:
    """The bag model's answers on ``test_set``, by this file's forward pass: pairs, pairs both right, controls."""
    return _answers(_pooled(params, test_set["tokens"], test_set["query_position"]).argmax(axis=-1), test_set)


def _answers(guess: np.ndarray, test_set: dict) -> dict:
    right = guess == test_set["target"]
    paired, control = test_set["pair"] >= 0, test_set["pair"] < 0
    both = right[paired].reshape(-1, 2).all(axis=1)  # pairs are rows 2i, 2i + 1
    return {"accuracy": float(right[paired].mean()), "both_right": float(both.mean()),
            "controls": float(right[control].mean()),
            "same_answer": float(np.mean(guess[paired][0::2] == guess[paired][1::2]))}


def _models_of(result, train_set) -> dict | None:
    """The two trained models of compare's record, when they have the shapes of the task's vocabulary."""
    models = result.get("models") if isinstance(result, dict) else None
    vocab = len(train_set["vocab"])
    shapes = {"pooled": (vocab, 16), "attention": (vocab, 16)}
    observed = {name: np.shape(models[name].get("embedding")) if isinstance(models, dict) and isinstance(
        models.get(name), dict) else None for name in shapes}
    ok = expect(observed == shapes, what="compare's record['models']: the embedding of each model",
                expected=str(shapes), observed=str(observed), idea=COMPARE + "; " + VARIANT)
    return models if ok else None


def _figures(models, test_set) -> dict:
    """Every figure, recomputed here from the trained models with this file's own forward passes."""
    tokens, query = test_set["tokens"], test_set["query_position"]
    logits, weights = _forward(models["attention"], tokens, query, 1, True)
    out = {"pooled": bag_figures(models["pooled"], test_set), "attention": _answers(logits.argmax(axis=-1), test_set)}
    rows = np.flatnonzero(test_set["pair"] >= 0)
    out["own"] = float(weights[rows, 0, query[rows], test_set["own_slot"][rows]].mean())
    out["other"] = float(weights[rows, 0, query[rows], test_set["other_slot"][rows]].mean())
    return out


def _as_train_pooled(impl, seed: int, task: dict, steps: int):
    """``(params, rng, None)``: train_pooled's loop run here over your functions, and the generator after it.

    init_pooled from ``rng``, then each step a batch drawn from ``rng``, your pooled_gradients (its answer checked
    along a random direction) and adam_step with the state of the step before: what train_pooled(rng, task,
    steps=steps) must return. ``params`` None, with the failure, when an answer did not hold.
    """
    rng, direction = np.random.default_rng(seed), np.random.default_rng(seed + 7)
    tokens, query, target = (np.asarray(task[key]) for key in ("tokens", "query_position", "target"))
    params = impl.init_pooled(rng, len(task["vocab"]), BAG["d_model"], BAG["d_hidden"])
    if not isinstance(params, (dict,)):
        return None, rng, message("init_pooled's result, for train_pooled's loop run here", "a dict of parameters",
                                  type(params).__name__, POOLED)
    state = None
    for step in range(steps):
        rows = rng.integers(0, len(tokens), size=BAG["batch_size"])
        batch = tokens[rows], query[rows], target[rows]
        result = impl.pooled_gradients(params, *batch)
        _, failure = _answer(result, params, batch,
                             f"step {step + 1} of train_pooled's loop, run here", direction)
        if failure is not None:
            return None, rng, failure
        params, state = impl.adam_step(params, result[1], state, lr=CLAIM_LR)
    return params, rng, None


def _same_model(observed, expected: dict) -> bool:
    return isinstance(observed, dict) and set(observed) >= set(expected) and all(
        np.shape(observed[key]) == np.shape(value) and np.allclose(observed[key], value, rtol=1e-9, atol=1e-12)
        for key, value in expected.items())


def test_compare_reports_the_figures_of_its_models(impl):
    # Two steps each on a small variant: compare's models must be those of train_pooled(rng, ...) and then
    # train(rng, ...) from the same generator, in that order, on train_task alone (another order, or a model
    # trained on anything else or built by hand, gives other models); then its figures must be theirs.
    # compare's record is made of the other functions' answers: each must be right on its own first (else
    # made-up counts, or a slow estimate of the gradients, could pass here where the small variant cannot tell).
    if not require_analytic(impl):
        return
    predicted, target, pair = np.array([7, 2, 5, 4, 4, 9, 1, 3]), np.array([7, 3, 5, 4, 4, 8, 1, 9]), \
        np.array([0, 0, -1, 1, 1, 2, -1, 2])
    counted = impl.pair_accuracy(predicted, target, pair)
    if not expect(isinstance(counted, tuple) and len(counted) == 2 and np.allclose(counted, (0.5, 1 / 3)),
                  what="first, pair_accuracy on the hand case of test_pair_accuracy_counts_sentences_and_pairs "
                       "(compare reports its counts)", expected="(0.5, 0.333)", observed=str(counted),
                  idea=COUNT + "; fix pair_accuracy first"):
        return
    train_set, test_set = variant_tasks(TASK_SEED + 1, n_train=8, n_test=6)
    # The bag model compare must report is the one train_pooled's loop gives, run here over your functions (a
    # train_pooled that returns a model made another way is caught here, before compare is blamed).
    looped, after, failure = _as_train_pooled(impl, COMPARE_SEED + 1, train_set, steps=2)
    if failure is not None:
        fail_check(failure)
        return
    trained = impl.train_pooled(np.random.default_rng(COMPARE_SEED + 1), train_set, steps=2, lr=CLAIM_LR)
    if not expect(_same_model(trained[0] if isinstance(trained, tuple) and len(trained) == 2 else None, looped),
                  what="first, the model of train_pooled(rng, train_task, steps=2) on a small variant, against "
                       "init_pooled then 2 steps of your pooled_gradients and adam_step run here from the same seed",
                  expected="the same parameters", observed="other parameters (or no model)",
                  idea=TRAIN + "; return the parameters the last step gave; fix train_pooled first"):
        return
    result = call_or_explain(impl.compare, np.random.default_rng(COMPARE_SEED + 1), train_set, test_set, steps=2,
                             what="compare(rng, train_task, test_task, steps=2) on a small variant", idea=COMPARE)
    models = _models_of(result, train_set)
    if models is None:
        return
    expected = {"pooled": looped, "attention": impl.train(after, train_set, steps=2, lr=CLAIM_LR)[0]}
    for name in ("pooled", "attention"):
        if not expect_close(models[name]["embedding"], expected[name]["embedding"], rtol=1e-10, atol=1e-12,
                            what=f"record['models'][{name!r}]['embedding'] against your "
                                 + ("train_pooled(rng, train_task, ...)" if name == "pooled" else
                                    "train(rng, train_task, ...) after it") + ", from the same seed",
                            idea=COMPARE + "; in this order: train_pooled first, then train, both from rng, both "
                                           "on train_task alone"):
            return
    figures = _figures(models, test_set)
    for figure in ("accuracy", "both_right"):
        reported = result.get(figure) if isinstance(result.get(figure), dict) else {}
        for name in ("pooled", "attention"):
            expect_close(reported.get(name, np.nan), figures[name][figure], atol=1e-12,
                         what=f"record[{figure!r}][{name!r}] against the figure recomputed here from "
                              f"record['models'][{name!r}] on test_task",
                         idea=COMPARE + "; the figures must be measured on the models compare returns")
    for figure in ("own", "other"):
        expect_close(result.get(figure, np.nan), figures[figure], atol=1e-12,
                     what=f"record[{figure!r}] against negation_attention recomputed here from the attention model",
                     idea=COMPARE + "; " + LOOK)


def test_the_bag_of_words_model_stays_at_chance_on_pairs(impl):
    if not require_analytic(impl):  # the model is trained with your pooled_gradients, as the chain rule computes them
        return
    params, test_set, failure = train_bag_here(impl, TASK_SEED, COMPARE_SEED)
    if failure is not None:
        fail_check(failure)
        return
    pooled = bag_figures(params, test_set)
    expect(pooled["controls"] >= 0.9, what=f"{TRAINED_HERE}, on the control sentences of test_task (drawn here)",
           expected="at least 0.90 right (two 'not's or none: the bag differs)",
           observed=f"{pooled['controls']:.3f}", idea=BOUND + "; " + GRADS)
    expect(pooled["accuracy"] == 0.5 and pooled["both_right"] == 0.0,
           what=f"{TRAINED_HERE}, on the pairs of test_task (figures recomputed here)",
           expected="accuracy exactly 0.5 and no pair with both members right",
           observed=f"accuracy {pooled['accuracy']:.3f}, both right {pooled['both_right']:.3f}", idea=BOUND)


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_sentences(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n, seq = unseen.sizes(rng, (3, 7), (5, 10), avoid=(VOCAB, D_SMALL, 2 * D_SMALL, HIDDEN))
    return rng.integers(0, VOCAB, size=(n, seq)), rng.integers(0, seq, size=n)


def _unseen_features(rng: np.random.Generator) -> tuple[tuple, dict]:
    n, seq, d = unseen.sizes(rng, (3, 7), (5, 10), (3, 9), avoid=(VOCAB,))
    return (rng.normal(size=(VOCAB, d)), rng.integers(0, VOCAB, size=(n, seq)), rng.integers(0, seq, size=n)), {}


def _unseen_pairs(rng: np.random.Generator) -> tuple[tuple, dict]:
    n_pairs, n_controls = int(rng.integers(2, 6)), int(rng.integers(0, 3))
    pair = rng.permutation(np.concatenate([np.repeat(np.arange(n_pairs), 2), np.full(n_controls, -1)]))
    target = rng.integers(0, VOCAB, size=len(pair))
    predicted = np.where(rng.random(len(pair)) < 0.6, target, rng.integers(0, VOCAB, size=len(pair)))
    return (predicted, target, pair), {}


def _own_pair_accuracy(predicted: np.ndarray, target: np.ndarray, pair: np.ndarray) -> tuple[float, float]:
    right, paired = predicted == target, pair >= 0
    pairs = np.unique(pair[paired])
    return float(right[paired].mean()), float(np.mean([right[pair == p].all() for p in pairs]))


def _unseen_attention(rng: np.random.Generator) -> tuple[tuple, dict]:
    task = negation_tasks().negation_task(np.random.default_rng(int(rng.integers(2**31))), int(rng.integers(2, 5)),
                                          n_controls=int(rng.integers(1, 3)))
    n, seq = task["tokens"].shape
    return (rng.dirichlet(np.ones(seq), size=(n, int(rng.integers(1, 4)), seq)), task), {}


def _own_attention(weights: np.ndarray, task: dict) -> tuple[float, float]:
    paired = np.flatnonzero(task["pair"] >= 0)
    rows = weights[paired, :, task["query_position"][paired]]  # (paired, heads, seq)
    return (float(np.mean(rows[np.arange(len(paired)), :, task["own_slot"][paired]])),
            float(np.mean(rows[np.arange(len(paired)), :, task["other_slot"][paired]])))


def _own_init(rng: np.random.Generator, vocab: int, d_model: int, d_hidden: int) -> dict:
    """init_pooled's draws in the docstring's order: the embedding, then w_hidden, then w_out; zero biases."""
    drawn = {}
    for key, shape, scale in (("embedding", (vocab, d_model), 0.3), ("w_hidden", (2 * d_model, d_hidden), None),
                              ("w_out", (d_hidden, vocab), None)):
        drawn[key] = rng.normal(0.0, scale or 1.0 / np.sqrt(shape[0]), size=shape)
    return drawn | {"b_hidden": np.zeros(d_hidden), "b_out": np.zeros(vocab)}


unseen.register("negation", {
    "init_pooled": unseen.Twin(lambda rng: ((np.random.default_rng(int(rng.integers(2**31))), int(rng.integers(5, 15)),
                                             int(rng.integers(2, 7)), int(rng.integers(3, 9))), {}), _own_init,
                               "init_pooled draws in this order: the embedding (0.3 * rng.normal), then init_weight "
                               "for w_hidden, then init_weight for w_out; the biases are zeros", unseen.close),
    "pooled_features": unseen.Twin(_unseen_features, _features, FEATURES, unseen.close),
    "pooled_forward": unseen.Twin(lambda rng: ((_pooled_params([int(rng.integers(2**31))]), *_unseen_sentences(rng)),
                                               {}), _pooled, POOLED, unseen.close),
    "pair_accuracy": unseen.Twin(_unseen_pairs, _own_pair_accuracy, COUNT, unseen.close),
    "negation_attention": unseen.Twin(_unseen_attention, _own_attention, LOOK, unseen.close, moves.tempered),
})
