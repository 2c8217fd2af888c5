"""Exercise 10: is attention an explanation? Gradient x input, occlusion, rollout, rank correlation, then the test.

The models here are built by hand, so the right answer is known: the query attends by position only
(its weights do not depend on the tokens), each token contributes its value vector, and a linear readout
gives class probabilities. Removing a token therefore changes only what that token brings.
"""

from __future__ import annotations

import numpy as np

from tests import moves, unseen
from tests.conventions import EPS_ZERO, eps_denominator, total_variation
from tests.feedback import (
    call_or_explain,
    expect,
    expect_close,
    expect_dtype,
    expect_raises_value_error,
    expect_shape,
)
from tests.probes import expect_probe, probe

READING = "docs/reading.md#explanation"
GXI = ("gradient x input: multiply the gradient and the input entry by entry and sum over the FEATURE axis "
       "(the last one), one signed number per token: (..., seq, d) -> (..., seq)")
OCCLUSION = ("occlusion: c = the class predicted for the ORIGINAL sentence; importance[j] = p(c | sentence) - "
             "p(c | sentence with token j replaced), positive when the probability falls")
REPLACE = ("occlude by replacing token j with `replacement` at the same position; deleting it shifts every later "
           "token one place to the left, so the model sees a different sentence at every later position")
# The same rule, stated without the shift: the revisit of an occlusion test whose failure is not known to be a shift
# (a blind round: a class taken after the occlusion was sent to "deleting shifts the tokens").
IN_PLACE = (OCCLUSION + "; token j is replaced by `replacement` where it stands, every other token keeping its "
            "position and its id")
ROLLOUT = ("rollout: per layer A = 0.5 * W + 0.5 * I (the residual path), rows renormalised, and the product "
           "A_L @ ... @ A_1, the first layer acting first")
SPEARMAN = ("Spearman's rank correlation is the correlation of the ranks; tied values share the average of the "
            "ranks they occupy (1, 2, 2, 4 is wrong: the two ties get 2.5 each)")
# Without ties, the ties' half of SPEARMAN would only send a student where their mistake is not.
RANKS = ("Spearman's rank correlation is the correlation of the ranks: each value's place in sorted order (1 for "
         "the smallest), which np.argsort alone does not give (it lists the positions in sorted order)")
DECISIVE = (f"an attention weight says where the query looked, not whether what it found was used ({READING}): "
            "a token with weight 0.9 and a zero value vector changes nothing when removed")

# Sizes that all differ: batch, sequence, features, classes, vocabulary.
B, SEQ, D, C, VOCAB = 2, 7, 5, 3, 11
PAD = 0  # the replacement token: its value vector is zero


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class PositionalModel:
    """A one-query attention model whose answer can be worked out by hand.

    The query attends by position: weights = softmax(position_scores), whatever the tokens. Token t brings
    its value vector values[t]; the context is sum_j weights[j] * values[tokens[j]]; logits = context @ w_out.
    """

    def __init__(self, position_scores: np.ndarray, values: np.ndarray, w_out: np.ndarray) -> None:
        self.weights = _softmax(np.asarray(position_scores, dtype=np.float64))  # (seq,)
        self.values, self.w_out = values, w_out  # (vocab, d), (d, n_classes)

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """(b, seq) token ids -> (b, n_classes) logits."""
        context = np.einsum("j,bjd->bd", self.weights, self.values[np.asarray(tokens)])
        return context @ self.w_out

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        """(b, seq) token ids -> (b, n_classes) probabilities."""
        batch = np.asarray(tokens)
        if batch.ndim != 2 or batch.shape[1] != len(self.weights):
            raise ValueError(f"predict takes token ids of shape (b, {len(self.weights)}), got {batch.shape}")
        return _softmax(self.logits(batch))

    def gradient_and_input(self, tokens: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The gradient d logit_c / d x_j = weights[j] * w_out[:, c], and the inputs x_j = values[tokens[j]]."""
        return self.weights[:, None] * self.w_out[:, c][None, :], self.values[tokens]


def _occlusion_by_hand(model: PositionalModel, tokens: np.ndarray, replacement: int = PAD,
                       how: str = "replace", wrong_class: str | None = None) -> np.ndarray:
    """Leave-one-out, one sentence at a time; `how` and `wrong_class` reproduce known mistakes."""
    original = model(tokens[None])[0]
    c = int(np.argmax(original))  # the original sentence's class; a mistake's class of its own below
    if wrong_class == "zero":
        c = 0
    elif wrong_class in ("mean", "largest"):  # the class of the whole batch, original and occluded together
        every = model(np.concatenate([tokens[None], _occluded(tokens, replacement)]))
        c = int(np.argmax(every.mean(axis=0)) if wrong_class == "mean" else np.argmax(every) % every.shape[1])
    drops = []
    for j in range(len(tokens)):
        if how == "replace":
            occluded = tokens.copy()
            occluded[j] = replacement
        else:  # delete and shift the rest left, padding at the end
            occluded = np.append(np.delete(tokens, j), replacement)
        p = model(occluded[None])[0]
        if wrong_class == "new":
            drops.append(original.max() - p.max())
        elif wrong_class == "each":
            drops.append(original[int(np.argmax(p))] - p.max())
        else:
            drops.append(original[c] - p[c])
    return np.array(drops)


def _occluded(tokens: np.ndarray, replacement: int) -> np.ndarray:
    """(seq, seq): row j is the sentence with token j replaced in place."""
    occluded = np.repeat(tokens[None], len(tokens), axis=0)
    occluded[np.arange(len(tokens)), np.arange(len(tokens))] = replacement
    return occluded


SHIFTED = "the token was deleted and the rest shifted left, instead of replaced in place"
BATCH_CLASS = ("yours takes the class from the whole batch (the mean of every row's probabilities, or the largest "
               "probability in any row), not from the original sentence's own row: c = argmax of row 0")
AFTER = ("yours measures the drop on whatever class the model predicts after occlusion; measure it on the class "
         "predicted for the original sentence, the same class before and after")


def _occlusion_mistake(observed: np.ndarray, model: PositionalModel, tokens: np.ndarray,
                       replacement: int = PAD) -> str | None:
    expected = _occlusion_by_hand(model, tokens, replacement)
    candidates = [
        ("the sign is reversed: yours is the probability after the occlusion minus the one before; the importance "
         "is the drop, before minus after", -expected),
        # The class after the occlusion, taken two ways: max before minus max after, or each occluded sentence's
        # own class before and after (which can coincide with class 0 below: then neither is named).
        (AFTER, _occlusion_by_hand(model, tokens, replacement, wrong_class="new")),
        (AFTER, _occlusion_by_hand(model, tokens, replacement, wrong_class="each")),
        ("the drop is measured on class 0, not on the class predicted for the sentence",
         _occlusion_by_hand(model, tokens, replacement, wrong_class="zero")),
        (BATCH_CLASS, _occlusion_by_hand(model, tokens, replacement, wrong_class="mean")),
        (BATCH_CLASS, _occlusion_by_hand(model, tokens, replacement, wrong_class="largest")),
        (SHIFTED, _occlusion_by_hand(model, tokens, replacement, how="delete")),
        (f"yours replaced token j with token {PAD}, not with `replacement` (token {replacement} here); the "
         "argument names the token that stands in", _occlusion_by_hand(model, tokens, PAD)),
    ]
    # Only a mistake that differs from the right answer on this input, and the only one that matches.
    found = list(dict.fromkeys(mistake for mistake, values in candidates
                               if np.shape(observed) == values.shape and not np.allclose(values, expected)
                               and np.allclose(observed, values)))
    if len(found) == 1:
        return found[0]
    if found:
        return None
    return total_variation(observed, model(tokens[None])[0], model(_occluded(tokens, replacement))) or None


def _replacement_idea(mistake: str | None) -> str:
    """The revisit of a test of replacing in place: the shift only where the shift explains the result."""
    if mistake == SHIFTED:
        return _idea(mistake, REPLACE)
    return _idea(mistake, OCCLUSION) if mistake else IN_PLACE


def _idea(mistake: str | None, idea: str) -> str:
    return f"{mistake}; {idea}" if mistake else idea


def _flip_model(seed: int) -> tuple[PositionalModel, np.ndarray]:
    """A sentence predicted as class 2 because of one cue token; without it a weaker cue makes class 1 win."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=0.7, size=SEQ)
    values = rng.normal(scale=0.3, size=(VOCAB, D))
    values[PAD] = 0.0
    w_out = np.zeros((D, C))
    w_out[:C, :C] = 3.0 * np.eye(C)
    w_out[C:] = rng.normal(scale=0.5, size=(D - C, C))
    values[7] = 0.0
    values[7, 2] = 6.0  # the cue for class 2
    values[8] = 0.0
    values[8, 1] = 3.0  # a weaker cue for class 1
    tokens = rng.permutation(np.arange(1, VOCAB))[:SEQ]
    tokens[[1, 4]] = (7, 8)  # cue for class 2 at position 1, for class 1 at position 4
    scores[[1, 4]] = (1.5, 1.5)
    return PositionalModel(scores, values, w_out), tokens


def _cancelling_model(seed: int) -> tuple[PositionalModel, np.ndarray]:
    """A narrow win for class 2 over class 0, and three pairs of tokens that cancel each other on class 1.

    Occluding one token of a pair makes class 1 near certain (its partner alone) or impossible: the mean of the
    batch's rows, and its largest probability, both point at class 1, never the original sentence's class.
    """
    rng = np.random.default_rng(seed)
    tokens = rng.permutation(np.arange(1, VOCAB))[:SEQ]  # 3 pairs (+, - on class 1) and a cue for class 2
    values = rng.normal(scale=0.01, size=(VOCAB, D))
    values[PAD] = 0.0
    # Equal weights 1 / SEQ and w_out = 3 I: a value v on a class adds 3 v / SEQ to its logit.
    values[tokens, 0] += 2.0 / 3.0  # class 0: logit 2 from the whole sentence
    values[tokens[[0, 2, 4]], 1] += 2.0 * SEQ  # class 1: logit +6 from one of a pair alone, -6 from the other
    values[tokens[[1, 3, 5]], 1] -= 2.0 * SEQ
    values[tokens[6], 2] += 2.2 * SEQ / 3.0  # class 2: logit 2.2 from its cue
    w_out = np.zeros((D, C))
    w_out[:C, :C] = 3.0 * np.eye(C)
    return PositionalModel(np.zeros(SEQ), values, w_out), tokens


def _sink_model(seed: int) -> tuple[PositionalModel, np.ndarray, int, int]:
    """Most of the weight on a token whose value vector is zero; the answer carried by the least attended one."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=0.5, size=SEQ)
    sink, cue = 2, 5
    scores[sink], scores[cue] = 4.0, scores.min() - 0.5
    values = rng.normal(scale=0.3, size=(VOCAB, D))
    values[PAD] = 0.0
    values[9] = 0.0  # the attended token brings nothing (as attention to punctuation often does)
    values[10] = 0.0
    values[10, 1] = 400.0  # the cue: little weight, a large value
    w_out = np.zeros((D, C))
    w_out[:C, :C] = 3.0 * np.eye(C)
    tokens = rng.permutation(np.arange(1, 9))[:SEQ]
    tokens[sink], tokens[cue] = 9, 10
    return PositionalModel(scores, values, w_out), tokens, sink, cue


def _agreeing_model(seed: int) -> tuple[PositionalModel, np.ndarray]:
    """Every token pushes the predicted class by the same amount, so what counts is how much weight it gets."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=SEQ)
    values = np.zeros((VOCAB, D))
    values[1:, 0] = 2.0  # every real token argues for class 0, equally
    values[1:, C:] = rng.normal(scale=1.0, size=(VOCAB - 1, D - C))  # and carries features the readout ignores
    w_out = np.zeros((D, C))
    w_out[:C, :C] = 3.0 * np.eye(C)
    return PositionalModel(scores, values, w_out), rng.permutation(np.arange(1, VOCAB))[:SEQ]


def _ranks_ties_averaged(x: np.ndarray) -> np.ndarray:
    """Rank i = how many values are smaller, plus half of how many others are equal (0-based, ties averaged)."""
    x = np.asarray(x, dtype=np.float64)
    return np.array([np.sum(x < value) + (np.sum(x == value) - 1) / 2 for value in x])


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(_ranks_ties_averaged(a), _ranks_ties_averaged(b))[0, 1])


def _rank_mistake(observed: float, a: np.ndarray, b: np.ndarray) -> str | None:
    def ordinal(x):
        return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(float)

    def dense(x):
        return np.unique(np.asarray(x), return_inverse=True)[1].astype(float)

    def lowest(x):
        return np.array([np.sum(np.asarray(x) < value) for value in x], dtype=float)

    n = len(a)
    candidates = {
        "ties were ranked in order of appearance (argsort of argsort), not given their average rank":
            np.corrcoef(ordinal(a), ordinal(b))[0, 1],
        "the correlation is of the values themselves (Pearson), not of their ranks": np.corrcoef(a, b)[0, 1],
        # (a blind round's np.argsort(a), once: where each rank sits, not each value's rank, was sent to ties)
        "the correlation is of np.argsort (the positions in sorted order), not of the ranks: a value's rank is "
        "where it lands in that order, np.argsort(np.argsort(x)) (ties then need their average)":
            np.corrcoef(np.argsort(a, kind="stable"), np.argsort(b, kind="stable"))[0, 1],
        "the formula 1 - 6 sum d^2 / (n (n^2 - 1)) was used, which is exact only without ties":
            1 - 6 * np.sum((_ranks_ties_averaged(a) - _ranks_ties_averaged(b)) ** 2) / (n * (n**2 - 1)),
        # (not said alone where another one gives the same number: dense ranks of a few tied values can be a
        # linear map of them, and then Pearson's of the values is theirs; a blind round was told "Pearson")
        "ties were given dense ranks (0, 1, 2, ... for the distinct values: np.unique's inverse), not their "
        "average rank": np.corrcoef(dense(a), dense(b))[0, 1],
        "ties were given their lowest rank, not their average rank": np.corrcoef(lowest(a), lowest(b))[0, 1],
    }
    spearman = _spearman(a, b)  # (a candidate equal to the right value on this input says nothing)
    if np.ndim(observed) == 0 and np.isfinite(observed) and abs(float(observed)) > 1 + 1e-9:
        # (a blind round's covariance over x.std() * y.std() of centred ranks, n times too large, was sent to ties)
        return (f"a correlation lies between -1 and 1, and {float(observed):.4g} does not: the covariance of the "
                "ranks over the product of their spreads, each measured alike (all sums or all means: "
                "sum(x * y) / sqrt(sum(x**2) * sum(y**2)) for centred ranks x and y)")
    found = [mistake for mistake, value in candidates.items()
             if np.isclose(observed, value) and not np.isclose(observed, spearman)]
    if len(found) == 1:
        return found[0]
    if found:  # one number cannot tell them apart: each is said as one possibility
        return "one number cannot tell these apart: " + "; or ".join(found)
    return eps_denominator(observed, _ranks_ties_averaged(a), _ranks_ties_averaged(b)) or None  # a convention


def _expect_rank(observed, expected, a: np.ndarray, b: np.ndarray, *, what: str, idea: str = "") -> bool:
    """expect_close for a rank correlation of ``a`` and ``b``, a known mistake or convention named.

    Named even where the difference is as small as float32's precision (an eps in a denominator).
    """
    mistake = _rank_mistake(observed, a, b)
    return expect_close(observed, expected, what=what, idea=_idea(mistake, idea or SPEARMAN),
                        tiny_term=mistake or "")


def _rollout_by_hand(weights: np.ndarray) -> np.ndarray:
    result = np.eye(weights.shape[-1])
    for layer in weights:
        result = (0.5 * layer + 0.5 * np.eye(len(layer))) @ result
    return result


def _rollout_mistake(observed: np.ndarray, weights: np.ndarray) -> str | None:
    eye = np.eye(weights.shape[-1])
    no_residual, unnormalised, reversed_order, column = eye, eye, eye, eye
    for layer in weights:
        no_residual = layer @ no_residual
        unnormalised = (layer + eye) @ unnormalised
        reversed_order = reversed_order @ (0.5 * layer + 0.5 * eye)
        mixed = layer + eye
        column = (mixed / mixed.sum(axis=-2, keepdims=True)) @ column
    candidates = {
        "the residual path is missing: the layers' weights were multiplied as they are": no_residual,
        "the identity was added but the rows were not renormalised (they sum to 2 per layer)": unnormalised,
        "the layers were multiplied in the wrong order (the last layer acting first)": reversed_order,
        "the renormalisation divided by the column sums, not the row sums": column,
    }
    for mistake, value in candidates.items():
        if np.shape(observed) == value.shape and np.allclose(observed, value):
            return mistake
    return None


def _layers(seed: int, n_layers: int, seq: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return _softmax(rng.normal(scale=1.5, size=(n_layers, seq, seq)))


# ----------------------------------------------------------------------------- gradient x input


def test_gradient_x_input_shape_and_values(impl):
    rng = np.random.default_rng(100)
    grad, inputs = rng.normal(size=(SEQ, D)), rng.normal(size=(SEQ, D))
    what = f"gradient_x_input(grad_inputs, inputs) for one sentence, both ({SEQ}, {D}) (seq, d)"
    out = call_or_explain(impl.gradient_x_input, grad, inputs, what=what, idea=GXI)
    if expect_shape(out, (SEQ,), what=f"the shape of {what}", idea=GXI):
        by_hand = np.array([sum(grad[j, f] * inputs[j, f] for f in range(D)) for j in range(SEQ)])
        mistake = "the absolute value was taken: the sign says in which direction a token pushes" if np.allclose(
            out, np.abs(by_hand)) else None
        expect_close(out, by_hand, what=what, idea=_idea(mistake, GXI))


def test_gradient_x_input_with_batch_axes_and_float32(impl):
    rng = np.random.default_rng(101)
    grad, inputs = rng.normal(size=(B, 3, SEQ, D)), rng.normal(size=(B, 3, SEQ, D))
    out = impl.gradient_x_input(grad, inputs)
    wrong_axis = np.shape(out) == (B, 3, D)
    idea = _idea("the sum ran over the token axis (-2), leaving one number per feature" if wrong_axis else None, GXI)
    if expect_shape(out, (B, 3, SEQ), what=f"gradient_x_input of two ({B}, 3, {SEQ}, {D}) arrays", idea=idea):
        expect_close(out, np.einsum("...jf,...jf->...j", grad, inputs), idea=GXI,
                     what=f"gradient_x_input with batch axes ({B}, 3)")
    out32 = impl.gradient_x_input(grad.astype(np.float32), inputs.astype(np.float32))
    expect_dtype(out32, np.float32, what="gradient_x_input of float32 arrays", idea="dtype in = dtype out")
    # One token (a blind round's summed the token axis too when it had length 1): still one number per token.
    one = impl.gradient_x_input(grad[..., :1, :], inputs[..., :1, :])
    expect_shape(one, (B, 3, 1), what=f"gradient_x_input of two ({B}, 3, 1, {D}) arrays (one token)",
                 idea=GXI + "; the sum runs over the features only (axis -1), whatever the number of tokens")


# ----------------------------------------------------------------------------- occlusion


def test_occlusion_shape_and_tokens_that_do_not_matter(impl):
    # Only the cue token (position 1) has a value vector; every other token brings nothing.
    model, tokens = _flip_model(110)
    model.values[np.setdiff1d(np.arange(VOCAB), [7])] = 0.0
    what = f"occlusion_importance(predict, tokens, replacement={PAD}) for a sentence of {SEQ} tokens"
    out = call_or_explain(impl.occlusion_importance, model, tokens, PAD, what=what, idea=OCCLUSION)
    if not expect_shape(out, (SEQ,), what=f"the shape of {what}", idea="one importance per position: (seq,)"):
        return
    others = np.arange(SEQ) != 1
    expect_close(out[others], np.zeros(SEQ - 1), atol=1e-12, rtol=0.0, idea=_idea(_occlusion_mistake(
        out, model, tokens), OCCLUSION + "; a token whose value vector is zero changes nothing when replaced"),
        what="importance of the tokens that bring nothing to the model (every position but 1)")
    expect_close(out[1], _occlusion_by_hand(model, tokens)[1], idea=_idea(_occlusion_mistake(out, model, tokens),
                 OCCLUSION), what="importance of the one token that decides the prediction (position 1): the drop "
                 "in the probability of the predicted class when it is replaced")


def test_occlusion_measures_the_original_class(impl):
    # Class 2 wins because of the token at position 1; without it, class 1 wins.
    model, tokens = _flip_model(111)
    out = impl.occlusion_importance(model, tokens, PAD)
    expected = _occlusion_by_hand(model, tokens)
    before, after = model(tokens[None])[0], model(np.where(np.arange(SEQ) == 1, PAD, tokens)[None])[0]
    what = (f"occlusion_importance for a sentence predicted as class {int(before.argmax())} "
            f"(p = {before.max():.3f}); replacing token 1 makes class {int(after.argmax())} win")
    expect_close(out, expected, what=what, idea=_idea(_occlusion_mistake(out, model, tokens), OCCLUSION))
    # The original sentence's own class, not the batch's (a blind round: the class of the mean of every row, or of
    # the largest probability in the batch, passed every test where the original's class led the batch too).
    model, tokens = _cancelling_model(114)
    out = impl.occlusion_importance(model, tokens, PAD)
    every = model(np.concatenate([tokens[None], _occluded(tokens, PAD)]))
    expect_close(out, _occlusion_by_hand(model, tokens), idea=_idea(_occlusion_mistake(out, model, tokens), OCCLUSION),
                 what=f"occlusion_importance for a sentence predicted as class {int(every[0].argmax())} (p = "
                      f"{every[0].max():.3f}), whose occluded sentences lean to class {int(every.mean(0).argmax())}")


def test_occlusion_replaces_without_shifting(impl):
    # The query attends by position: shifting tokens moves them to positions with other weights.
    model, tokens = _sink_model(112)[:2]
    out = impl.occlusion_importance(model, tokens, PAD)
    expected = _occlusion_by_hand(model, tokens)
    expect_close(out, expected, what="occlusion_importance when the model attends by position",
                 idea=_replacement_idea(_occlusion_mistake(out, model, tokens)))


def test_occlusion_uses_the_replacement_token(impl):
    model, tokens = _flip_model(113)
    model.values[3] = 0.0
    model.values[3, 0] = 2.0  # the "replacement" now argues for class 0: the drops depend on it
    out = impl.occlusion_importance(model, tokens, 3)
    expect_close(out, _occlusion_by_hand(model, tokens, replacement=3),
                 idea=_replacement_idea(_occlusion_mistake(out, model, tokens, replacement=3)),
                 what="occlusion_importance(predict, tokens, replacement=3): token j becomes token 3")


# ----------------------------------------------------------------------------- rollout


def test_rollout_of_one_layer_mixes_in_the_residual(impl):
    weights = _layers(120, 1)
    what = "attention_rollout(weights) of one layer (1, 6, 6)"
    out = call_or_explain(impl.attention_rollout, weights, what=what, idea=ROLLOUT)
    if expect_shape(out, (6, 6), what=f"the shape of {what}", idea="(n_layers, seq, seq) -> (seq, seq)"):
        expect_close(out, 0.5 * weights[0] + 0.5 * np.eye(6), what=what + ": 0.5 * W + 0.5 * I",
                     idea=_idea(_rollout_mistake(out, weights), ROLLOUT))


def test_rollout_the_readings_example(impl):
    weights = np.array([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.0, 1.0]]])
    out = impl.attention_rollout(weights)
    expect_close(out, [[0.625, 0.375], [0.25, 0.75]], idea=_idea(_rollout_mistake(out, weights), ROLLOUT),
                 what=f"attention_rollout of the reading's two layers ({READING}): A_2 @ A_1")


def test_rollout_of_three_layers_by_hand(impl):
    for n_layers in (2, 3):
        weights = _layers(121 + n_layers, n_layers)
        out = impl.attention_rollout(weights)
        what = f"attention_rollout of {n_layers} layers, written out: A_{n_layers} @ ... @ A_1"
        if expect_shape(out, (6, 6), what=f"the shape of {what}", idea=ROLLOUT):
            expect_close(out, _rollout_by_hand(weights), what=what, idea=_idea(_rollout_mistake(out, weights), ROLLOUT))
            expect_close(out.sum(axis=-1), np.ones(6), what=f"each row of the rollout of {n_layers} layers sums to 1",
                         idea="a product of matrices whose rows sum to 1 has rows summing to 1: renormalise each "
                              "layer's rows after adding the identity")


def test_rollout_of_causal_layers_stays_causal(impl):
    weights = _layers(124, 3, seq=5) * np.tril(np.ones((5, 5)))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    out = impl.attention_rollout(weights)
    expect_close(np.triu(out, 1), np.zeros((5, 5)), atol=1e-15, rtol=0.0, idea=ROLLOUT,
                 what="rollout of three causal layers: no position receives anything from a later one")
    expect_close(out, _rollout_by_hand(weights), what="rollout of three causal layers",
                 idea=_idea(_rollout_mistake(out, weights), ROLLOUT))


def test_rollout_keeps_float32(impl):
    weights = _layers(125, 3).astype(np.float32)
    out = impl.attention_rollout(weights)
    expect_dtype(out, np.float32, what="attention_rollout of float32 weights (3, 6, 6)",
                 idea="dtype in = dtype out: build the identity in the weights' dtype (np.eye(seq, dtype=...))")
    eps = float(np.finfo(np.float32).eps)  # the contract's dtype: values to float32 precision
    expect_close(out, _rollout_by_hand(weights.astype(np.float64)), rtol=50 * eps, atol=10 * eps,
                 what="attention_rollout of float32 weights (3, 6, 6)", idea=ROLLOUT)


# ----------------------------------------------------------------------------- rank correlation


def test_rank_correlation_of_orders_without_ties(impl):
    a = np.random.default_rng(130).normal(size=9)
    what = "rank_correlation(a, a ** 3): the same order"
    same = call_or_explain(impl.rank_correlation, a, a**3, what=what, idea=RANKS)
    _expect_rank(same, 1.0, a, a**3, what=what, idea=RANKS + "; a monotone change keeps the order")
    _expect_rank(impl.rank_correlation(a, -np.exp(a)), -1.0, a, -np.exp(a), idea=RANKS,
                 what="rank_correlation(a, -exp(a)): the reverse order")
    b = np.random.default_rng(131).normal(size=9)
    _expect_rank(impl.rank_correlation(a, b), _spearman(a, b), a, b, idea=RANKS,
                 what="rank_correlation of two unrelated vectors of 9 numbers")


def test_rank_correlation_with_ties(impl):
    attention, occlusion = np.array([0.9, 0.1, 0.1, 0.5]), np.array([0.2, 0.0, 0.3, 0.1])
    _expect_rank(impl.rank_correlation(attention, occlusion), np.corrcoef([4, 1.5, 1.5, 3], [3, 1, 4, 2])[0, 1],
                 attention, occlusion,
                 what=f"rank_correlation of the reading's example ({READING}): ranks [4, 1.5, 1.5, 3] and [3, 1, 4, 2]")
    a = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    b = np.array([2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0])  # ties of two and of three
    _expect_rank(impl.rank_correlation(a, b), _spearman(a, b), a, b,
                 what=f"rank_correlation(a, b) with ties: a = {a}, b = {b}")
    zeros = np.array([0.0, 0.3, 0.0, 0.0, 0.7])  # occlusion often gives exact zeros
    other = np.array([0.1, 0.5, 0.2, 0.0, 0.9])
    _expect_rank(impl.rank_correlation(zeros, other), _spearman(zeros, other), zeros, other,
                 what="rank_correlation of importances with three exact zeros")


def test_rank_correlation_of_a_constant_is_nan(impl):
    # NaN is the answer for a pair without spread only: the same call with one value of a moved off the constant
    # has a correlation, and a function that answers NaN to everything has not ranked anything.
    moved = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    if not _expect_rank(impl.rank_correlation(moved, np.arange(6.0)), _spearman(moved, np.arange(6.0)), moved,
                        np.arange(6.0), what="first, rank_correlation([0, 0, 0, 0, 0, 1], np.arange(6.0)): five "
                        "ranks of a tied, the sixth apart", idea=SPEARMAN + "; NaN only where a or b has no spread"):
        return
    observed = impl.rank_correlation(np.zeros(6), np.arange(6.0))
    expect(bool(np.isnan(observed)), what="rank_correlation(np.zeros(6), np.arange(6.0)): every rank of a is tied",
           expected="nan (the order of a constant is undefined)", observed=repr(observed),
           idea="with every value tied, the ranks have no spread and the correlation is 0 / 0: return nan "
                "(no warning)" + (f"; {EPS_ZERO}" if observed == 0 else ""))


# ----------------------------------------------------------------------------- the decisive test


def test_attention_on_an_empty_token_disagrees_with_occlusion(impl):
    model, tokens, sink, cue = _sink_model(140)
    weights = model.weights
    importance = impl.occlusion_importance(model, tokens, PAD)
    expected = _occlusion_by_hand(model, tokens)
    c = int(model(tokens[None])[0].argmax())
    grad, inputs = model.gradient_and_input(tokens, c)
    gxi = impl.gradient_x_input(grad, inputs)
    what = (f"a model that puts {weights[sink]:.2f} of its weight on token {sink}, whose value vector is zero, "
            f"and {weights[cue]:.3f} on token {cue}, which decides the class")
    if not expect_close(importance, expected, what=f"occlusion importance: {what}",
                        idea=_idea(_occlusion_mistake(importance, model, tokens), OCCLUSION)):
        return
    expect_close(importance[sink], 0.0, atol=1e-12, rtol=0.0, what=f"occlusion importance of the most attended "
                 f"token ({sink}), whose value vector is zero", idea=DECISIVE)
    expect_close(gxi, np.einsum("jd,jd->j", grad, inputs), what=f"gradient x input: {what}", idea=GXI)
    expect(int(np.argmax(importance)) == cue and int(np.argmax(weights)) == sink, idea=DECISIVE,
           what="attention and occlusion disagree on the most important token",
           expected=f"attention's top token {sink}, occlusion's top token {cue}",
           observed=f"attention's top token {int(np.argmax(weights))}, occlusion's {int(np.argmax(importance))}")
    _expect_rank(impl.rank_correlation(weights, importance), _spearman(weights, importance), weights, importance,
                 what="rank correlation of the attention weights and the occlusion importance")


def test_attention_on_the_token_that_matters_agrees_with_occlusion(impl):
    model, tokens = _agreeing_model(141)
    importance = impl.occlusion_importance(model, tokens, PAD)
    expected = _occlusion_by_hand(model, tokens)
    if not expect_close(importance, expected, idea=_idea(_occlusion_mistake(importance, model, tokens), OCCLUSION),
                        what="occlusion importance for a model where every token pushes the class equally"):
        return
    grad, inputs = model.gradient_and_input(tokens, 0)
    gxi = impl.gradient_x_input(grad, inputs)
    for name, measure in (("occlusion", importance), ("gradient x input", gxi)):
        _expect_rank(impl.rank_correlation(model.weights, measure), 1.0, model.weights, measure,
                     what=f"rank correlation of the attention weights and {name}, when each token matters in "
                          "proportion to its weight", idea=SPEARMAN + "; here the orders are the same")
        # (and its reverse: a rank correlation that answers 1.0 whatever it is given does not measure agreement)
        _expect_rank(impl.rank_correlation(model.weights, -measure), -1.0, model.weights, -measure,
                     what=f"rank correlation of the attention weights and minus {name}, the same tokens in the "
                          "reverse order", idea=SPEARMAN + "; here the orders are reversed")


# ----------------------------------------------------------------------------- reference values


@probe("occlusion_importance")
def flipping_prediction():
    model, tokens = _flip_model(150)
    return (model, tokens, PAD), {}


@probe("occlusion_importance")
def positional_sink():
    model, tokens = _sink_model(151)[:2]
    return (model, tokens, PAD), {}


@probe("gradient_x_input")
def batched_signed():
    rng = np.random.default_rng(152)
    return (rng.normal(size=(B, SEQ, D)), rng.normal(size=(B, SEQ, D))), {}


@probe("gradient_x_input")
def float32_one_sequence():
    # For the diagnosis: float32 in, float32 out (a product accumulated in float64 shows as a dtype alone).
    rng = np.random.default_rng(154)
    return (rng.normal(size=(SEQ, D)).astype(np.float32), rng.normal(size=(SEQ, D)).astype(np.float32)), {}


@probe("attention_rollout")
def four_layers():
    return (_layers(153, 4, seq=7),), {}


@probe("attention_rollout")
def float32_three_layers():
    return (_layers(155, 3, seq=5).astype(np.float32),), {}


@probe("rank_correlation")
def ties_and_a_curve():
    a = np.array([0.0, 0.2, 0.0, 0.5, 0.1, 0.0, 3.0, 0.5, 0.9])
    return (a, np.exp(np.array([1.0, 2.0, 0.5, 2.5, 1.5, 0.2, 2.4, 4.0, 0.1]))), {}


def test_reference_values(impl):
    expect_probe(impl, "occlusion_importance/flipping_prediction", idea=OCCLUSION,
                 what="occlusion_importance of a sentence whose prediction flips when its cue is replaced")
    expect_probe(impl, "occlusion_importance/positional_sink", idea=IN_PLACE,
                 what="occlusion_importance of a model attending by position")
    expect_probe(impl, "gradient_x_input/batched_signed", idea=GXI, what=f"gradient_x_input of ({B}, {SEQ}, {D})")
    expect_probe(impl, "attention_rollout/four_layers", idea=ROLLOUT, what="attention_rollout of 4 layers (4, 7, 7)")
    expect_probe(impl, "rank_correlation/ties_and_a_curve", idea=SPEARMAN,
                 what="rank_correlation with three tied zeros and a non-linear b",
                 convention=lambda rho, a, b: eps_denominator(rho, _ranks_ties_averaged(a), _ranks_ties_averaged(b)))


# ----------------------------------------------------------------------------- bad input


def test_rejects_bad_input(impl):
    model, tokens = _flip_model(160)
    idea = "bad input raises ValueError naming the argument"
    expect_raises_value_error(lambda: impl.occlusion_importance(model, tokens[None], PAD), argument="tokens",
                              what=f"occlusion_importance with tokens of shape {tokens[None].shape}",
                              idea=idea + ": tokens is one sentence, (seq,)")
    expect_raises_value_error(lambda: impl.occlusion_importance(model, tokens.astype(float), PAD), argument="tokens",
                              what="occlusion_importance with float tokens", idea=idea + ": tokens are token ids")
    rng = np.random.default_rng(161)
    expect_raises_value_error(lambda: impl.gradient_x_input(rng.normal(size=(4, 3)), rng.normal(size=(4, 2))),
                              argument="inputs", what="gradient_x_input with shapes (4, 3) and (4, 2)",
                              idea=idea + ": the gradient and the input have the same shape")
    expect_raises_value_error(lambda: impl.attention_rollout(np.eye(4)), argument="weights",
                              what="attention_rollout of one (4, 4) matrix without the layer axis",
                              idea=idea + ": weights is (n_layers, seq, seq)")
    expect_raises_value_error(lambda: impl.rank_correlation(np.arange(4.0), np.arange(5.0)), argument="b",
                              what="rank_correlation of 4 and 5 numbers", idea=idea + ": a and b have one value each "
                              "per token")


# ----------------------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_pair(rng: np.random.Generator) -> tuple[tuple, dict]:
    shape = unseen.sizes(rng, (1, 4), (3, 8), (2, 6))
    return (rng.normal(size=shape), rng.normal(size=shape)), {}


def _unseen_layers(rng: np.random.Generator) -> tuple[tuple, dict]:
    n, layers = unseen.sizes(rng, (3, 8), (1, 5))
    return (rng.dirichlet(np.ones(n), size=(layers, n)),), {}


def _unseen_ranks(rng: np.random.Generator) -> tuple[tuple, dict]:
    n = int(rng.integers(5, 12))
    return (rng.normal(size=n), np.round(rng.normal(size=n), 1)), {}  # rounded: ties in b


def _unseen_occlusion(rng: np.random.Generator) -> tuple[tuple, dict]:
    """A model attending by position, of sizes of its own, a sentence and a replacement token, all drawn."""
    seq, d, classes = int(rng.integers(4, 9)), int(rng.integers(3, 7)), int(rng.integers(2, 5))
    vocab = int(rng.integers(seq + 2, 15))
    model = PositionalModel(rng.normal(size=seq), rng.normal(scale=0.8, size=(vocab, d)),
                            rng.normal(size=(d, classes)))
    return (model, rng.integers(0, vocab, size=seq), int(rng.integers(0, vocab))), {}


unseen.register("explain", {
    "occlusion_importance": unseen.Twin(_unseen_occlusion, _occlusion_by_hand, OCCLUSION, unseen.close),
    "gradient_x_input": unseen.Twin(_unseen_pair, lambda grad, inputs: np.einsum("...jf,...jf->...j", grad, inputs),
                                    GXI, unseen.close),
    "attention_rollout": unseen.Twin(_unseen_layers, _rollout_by_hand, ROLLOUT, unseen.close, moves.tempered),
    "rank_correlation": unseen.Twin(_unseen_ranks, _spearman, SPEARMAN, unseen.close),
})
