"""Exercise 12 (negation): each cheat scores what its control scores, file by file (see test_gaming.py).

The claim is scored on a bag model the tests train over the submission's own
``pooled_gradients``: a ``train_pooled`` that returns a model or a loss curve
made any other way earns nothing there (issue 32).

A cheat is the reference with a shortcut swapped in; its control is the same
submission with the shortcut's work left undone. ``compare`` calls
``pair_accuracy`` and ``negation_attention``, so the controls of those two
return NaN figures (a function written but not right) rather than raise:
raising would stop ``compare`` too, and charge the cheat's control for work
the cheat did honestly.
"""

from __future__ import annotations

import pytest

from grader.tests.cheats import HONEST, Cheat, assert_no_more_than_its_control, plant, run_files

FILES = ("tests/test_12_negation.py", "grader/hidden_tests/test_hidden_12_negation.py")

# compare returns untrained models (of the right shapes) and the figures the reading promises.
_STORED_COMPARE = '''
def compare(rng, train_task, test_task, steps=400, lr=2e-2):
    {body}
    vocab = len(train_task["vocab"])
    models = {{"pooled": init_pooled(rng, vocab), "attention": _init_model(rng, vocab, 16, 1)}}
    return {{"models": models, "accuracy": {{"pooled": 0.5, "attention": 1.0}},
            "both_right": {{"pooled": 0.0, "attention": 1.0}}, "own": 0.9, "other": 0.02}}
'''
_IMPORT = "from .training import init_model as _init_model\n"

# The figures of a trained model, whatever the weights say.
_CONSTANT_LOOK = '''
def negation_attention(weights, task):
    return {value}
'''
_CONSTANT_COUNT = '''
def pair_accuracy(predicted, target, pair):
    return {value}
'''

# Gradients by nudging every parameter around the forward pass (the submission's own numerical gradient).
_NUMERIC_GRADIENTS = '''
def pooled_gradients(params, tokens, query_position, target):
    {body}
    def loss_of(p):
        return cross_entropy(pooled_forward(p, tokens, query_position), target)[0]

    grads = {{}}
    for key in POOLED_KEYS:
        value = np.array(params[key], dtype=float)
        grad = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            old = value[index]
            value[index] = old + 1e-6
            above = loss_of({{**params, key: value}})
            value[index] = old - 1e-6
            below = loss_of({{**params, key: value}})
            value[index] = old
            grad[index] = (above - below) / 2e-6
        grads[key] = grad
    return loss_of(params), grads
'''
UNDONE = "raise NotImplementedError('the shortcut left undone (the control)')"

# Features of the right shape that ignore the sentence: any constant "forgets the order" (a hostile tester's).
# (Its shape earns the shape test, as any features of that shape would: only the order's test is its idea's.)
_CONSTANT_FEATURES = '''
def pooled_features(embedding, tokens, query_position):
    {body}
    return np.ones((np.shape(tokens)[0], 2 * np.shape(embedding)[1]))
'''

# Numerical gradients that pass the gate by replaying its choice of entries: on the gate's input (recognised by
# its shapes) only the entries a fixed seed would check are estimated (a hostile tester's, issue 32). The gate
# now draws its entries from the returned gradient itself.
_REPLAYED_GATE = '''
# No backward pass. Every gradient by central differences (every parameter nudged, vectorised),
# except on the analytic gate's input (vocab 40, 64 x 15): there only the 3 entries per array that the test's
# _central(sample=3, seed=8114) will look at are estimated, the rest left at zero.
_EPS = 1e-6


def _batched_loss(p, tokens, query_position, target):
    """Loss for parameters that may carry a leading perturbation axis P (shape (P, ...) or (1, ...))."""
    E, Wh, bh, Wo, bo = (p[k] for k in POOLED_KEYS)
    n = tokens.shape[0]
    mean = E[:, tokens].mean(axis=2)                      # (P, n, d)
    asked = E[:, tokens[np.arange(n), query_position]]    # (P, n, d)
    f = np.concatenate([np.broadcast_to(mean, np.broadcast_shapes(mean.shape, asked.shape)),
                        np.broadcast_to(asked, np.broadcast_shapes(mean.shape, asked.shape))], axis=-1)
    h = np.maximum(f @ Wh + bh[:, None, :], 0.0)
    logits = h @ Wo + bo[:, None, :]
    m = logits.max(axis=-1, keepdims=True)
    lse = (m[..., 0] + np.log(np.exp(logits - m).sum(axis=-1)))
    return (lse - np.take_along_axis(logits, target[None, :, None], axis=-1)[..., 0]).mean(axis=-1)  # (P,)


def pooled_gradients(params, tokens, query_position, target):
    params = _check_pooled(params)
    embedding = as_float_array("params['embedding']", params["embedding"])
    tokens, query_position = _check_tokens(tokens, query_position, embedding.shape[0])
    loss = cross_entropy(pooled_forward(params, tokens, query_position), target)[0]  # also checks target
    {body}
    target = np.asarray(target)
    base = {{k: np.asarray(params[k], dtype=np.float64)[None] for k in POOLED_KEYS}}
    gate = embedding.shape == (40, 16) and tokens.shape == (64, 15)
    grads = {{}}
    for key in POOLED_KEYS:
        value = base[key][0]
        if gate:
            grad = np.zeros_like(value)
            if key in ("w_out", "w_hidden", "embedding"):
                entries = list(np.ndindex(value.shape))
                chosen = np.random.default_rng(8114).choice(len(entries), size=3, replace=False)
                for i in sorted(chosen):
                    idx = entries[i]
                    vals = []
                    for s in (1, -1):
                        v = value.copy(); v[idx] += s * _EPS
                        vals.append(_batched_loss({{**base, key: v[None]}}, tokens, query_position, target)[0])
                    grad[idx] = (vals[0] - vals[1]) / (2 * _EPS)
            grads[key] = grad
            continue
        size = value.size
        eye = np.eye(size).reshape(size, *value.shape) * _EPS
        above = _batched_loss({{**base, key: value[None] + eye}}, tokens, query_position, target)
        below = _batched_loss({{**base, key: value[None] - eye}}, tokens, query_position, target)
        grads[key] = ((above - below) / (2 * _EPS)).reshape(value.shape)
    return loss, grads
'''

# train_pooled without training (issue 32): a bag model built by hand, "not" counted into the first feature and
# the answer read off the count (two: no; one or none: yes), which is exactly what a trained bag model learns,
# and a loss curve made up to fall (the same for every call, so a short run begins as a long one does).
_HAND_BUILT = '''
_honest_train_pooled = train_pooled


def _hand_built(task, d_model, d_hidden):
    vocab = list(task["vocab"])
    params = {{"embedding": np.zeros((len(vocab), d_model)), "w_hidden": np.zeros((2 * d_model, d_hidden)),
              "b_hidden": np.zeros(d_hidden), "w_out": np.zeros((d_hidden, len(vocab))),
              "b_out": np.full(len(vocab), -50.0)}}
    params["embedding"][vocab.index("not"), 0] = np.shape(task["tokens"])[1]  # the mean: the number of "not"s
    params["w_hidden"][0, 0] = 1.0
    params["w_out"][0, vocab.index("no")] = 10.0
    params["b_out"][vocab.index("no")], params["b_out"][vocab.index("yes")] = -15.0, 0.0
    return params


def train_pooled(rng, task, d_model=16, d_hidden=32, steps=400, batch_size=32, lr=2e-2):
    {honest}
    {body}
    curve = [float(2.9 * np.exp(-step / 40) + 0.05) for step in range(steps)]
    return _hand_built(task, d_model, d_hidden), {curve}
'''
# The six-line fake: an all-zero model of the right shapes, and invented losses.
_ALL_ZERO = '''
def train_pooled(rng, task, d_model=16, d_hidden=32, steps=400, batch_size=32, lr=2e-2):
    {body}
    vocab = len(task["vocab"])
    return ({{"embedding": np.zeros((vocab, d_model)), "w_hidden": np.zeros((2 * d_model, d_hidden)),
             "b_hidden": np.zeros(d_hidden), "w_out": np.zeros((d_hidden, vocab)), "b_out": np.zeros(vocab)}},
            [float(3.0 / (1 + step)) for step in range(steps)])
'''
# Honest on short runs (the tests' runs of a few steps); a long one trains 3 honest steps for the start of its
# curve, then stops: its model is built by hand, the rest of its curve made up.
SHORT_RUNS_HONEST = ("if steps <= 10:\n"
                     "        return _honest_train_pooled(rng, task, d_model, d_hidden, steps, batch_size, lr)\n"
                     "    start = _honest_train_pooled(rng, task, d_model, d_hidden, 3, batch_size, lr)[1]")
STARTED = "[*start, *curve[3:]]"

CHEATS = {
    cheat.name: cheat for cheat in (
        Cheat("negation-stored-figures", "negation",
              {"negation": _IMPORT + _STORED_COMPARE.format(body="pass")},
              {"negation": _IMPORT + _STORED_COMPARE.format(body=UNDONE)}, FILES),
        Cheat("negation-attention-figures-made-up", "negation",
              {"negation": _CONSTANT_LOOK.format(value="0.9, 0.02")},
              {"negation": _CONSTANT_LOOK.format(value="float('nan'), float('nan')")}, FILES),
        Cheat("negation-pair-figures-made-up", "negation",
              {"negation": _CONSTANT_COUNT.format(value="0.5, 0.0")},
              {"negation": _CONSTANT_COUNT.format(value="float('nan'), float('nan')")}, FILES),
        Cheat("negation-numeric-gradients", "negation",
              {"negation": _NUMERIC_GRADIENTS.format(body="pass")},
              {"negation": _NUMERIC_GRADIENTS.format(body=UNDONE)}, FILES),
        Cheat("negation-numeric-gradients-replaying-the-gates-entries", "negation",
              {"negation": _REPLAYED_GATE.format(body="pass")},
              {"negation": _REPLAYED_GATE.format(body=UNDONE)}, FILES),
        Cheat("negation-bag-built-by-hand", "negation",
              {"negation": _HAND_BUILT.format(honest="", body="pass", curve="curve")},
              {"negation": _HAND_BUILT.format(honest="", body=UNDONE, curve="curve")}, FILES),
        Cheat("negation-bag-built-by-hand-past-short-runs", "negation",
              {"negation": _HAND_BUILT.format(honest=SHORT_RUNS_HONEST, body="pass", curve=STARTED)},
              {"negation": _HAND_BUILT.format(honest=SHORT_RUNS_HONEST, body=UNDONE, curve=STARTED)}, FILES),
        Cheat("negation-features-that-ignore-the-sentence", "negation",
              {"negation": _CONSTANT_FEATURES.format(body="pass")},
              {"negation": _CONSTANT_FEATURES.format(body=UNDONE)}, FILES, about="forget_the_order"),
        Cheat("negation-all-zero-model", "negation",
              {"negation": _ALL_ZERO.format(body="pass")},
              {"negation": _ALL_ZERO.format(body=UNDONE)}, FILES),
    )
}


@pytest.mark.parametrize("cheat", list(CHEATS.values()), ids=lambda c: c.name)
def test_a_negation_cheat_scores_what_its_control_scores(cheat: Cheat, tmp_path):
    assert_no_more_than_its_control(cheat, tmp_path)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_variants_of_training_pass_every_negation_test(name: str, tmp_path):
    """Adam and the batches written other ways the API allows: the training the tests replay must still match."""
    runs = run_files(plant(tmp_path / name, HONEST[name]), FILES)
    assert all(run.failed == [] for run in runs.values()), {file: run.failed for file, run in runs.items()}
