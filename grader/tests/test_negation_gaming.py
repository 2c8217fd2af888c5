"""Exercise 12 (negation): each cheat scores what its control scores, file by file (see test_gaming.py).

A cheat is the reference with a shortcut swapped in; its control is the same
submission with the shortcut's work left undone. ``compare`` calls
``pair_accuracy`` and ``negation_attention``, so the controls of those two
return NaN figures (a function written but not right) rather than raise:
raising would stop ``compare`` too, and charge the cheat's control for work
the cheat did honestly.
"""

from __future__ import annotations

import pytest

from grader.tests.cheats import Cheat, assert_no_more_than_its_control

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
    )
}


@pytest.mark.parametrize("cheat", list(CHEATS.values()), ids=lambda c: c.name)
def test_a_negation_cheat_scores_what_its_control_scores(cheat: Cheat, tmp_path):
    assert_no_more_than_its_control(cheat, tmp_path)
