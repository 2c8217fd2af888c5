"""Exercise 10: is an attention weight an explanation? Measure, then compare.

A heatmap of attention weights shows where each query looked. It does not,
by itself, say which tokens the model's prediction depends on: a token can
take most of the weight while its value vector carries nothing (then
removing it changes nothing), and two quite different weight patterns can
give the same output. To find out what matters, intervene on the input and
watch the prediction (see the reading, docs/reading.md#explanation):

* **occlusion** (leave one out): replace token ``j`` by a neutral token and
  measure how much the probability of the class the model predicted for the
  *original* sentence drops. A large drop: the model needed that token.
  Replace, do not delete: deleting shifts every later token one position to
  the left, which changes what the model sees at every position after ``j``.
* **gradient x input**: for each token, the dot product of the gradient of
  the output with respect to that token's input vector and the vector
  itself; a first-order estimate of what setting the token's vector to zero
  would change (its sign says in which direction).
* **attention rollout** (Abnar and Zuidema, 2020): in a stack of layers each
  with a residual connection, a token's representation is half its own
  previous one and half the attention's mix; rollout follows this through
  the layers with ``0.5 * W + 0.5 * I`` per layer, rows renormalised,
  multiplied from the first layer to the last.
* **rank correlation** (Spearman): do two importance measures order the
  tokens the same way? It is the correlation of the ranks, with tied values
  given the average of the ranks they share. 1: the same order, -1: the
  reverse, near 0: unrelated.

Jain and Wallace (2019) found that attention weights often disagree with
gradient and leave-one-out importance; Wiegreffe and Pinter (2019) answered
that whether attention explains depends on what you test. This exercise
gives you the instruments to test it yourself.

What the tests check
--------------------
* ``occlusion_importance``: on hand-built models whose answer is known: the
  token that decides the prediction has the largest importance, tokens that
  do not matter have 0, the drop is measured on the class predicted for the
  original sentence (also when occluding a token flips the prediction),
  with the sign "positive = the probability fell", and positions never
  shift (the token is replaced, not deleted);
* ``gradient_x_input``: the sum over the feature axis, shape ``(..., seq)``,
  with batch axes, float32 kept;
* ``attention_rollout``: against a hand computation for one, two and three
  layers (the residual, the renormalisation, the order of the product);
* ``rank_correlation``: 1 for the same order, -1 for the reverse, ties
  given their average rank, against the formula written out in the test;
* the decisive pair: a model whose attention puts most of its weight on a
  token whose value vector is zero (attention and occlusion disagree), and
  one where the attended token carries the answer (they agree);
* bad input: ValueError naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._checks import as_float_array, require_ndim


def occlusion_importance(
    predict: Callable[[np.ndarray], np.ndarray],
    tokens: np.ndarray,
    replacement: int,
) -> np.ndarray:
    """How much the prediction falls when each token in turn is replaced.

    Parameters
    ----------
    predict : callable
        Maps an integer array of token ids ``(b, seq)`` to class
        probabilities ``(b, n_classes)``. Call it as few times as you like;
        one call with every occluded sentence stacked is enough.
    tokens : numpy.ndarray
        Integers, shape ``(seq,)``: one sentence.
    replacement : int
        The token id put in place of the occluded token (e.g. a padding or
        "unknown" token). Every other position keeps its token.

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(seq,)``. Entry ``j`` is ``p(c | tokens) - p(c |
        tokens with token j replaced)``, where ``c`` is the class predicted
        (the largest probability) for the original sentence. Positive: the
        model needed token ``j`` for ``c``.

    Raises
    ------
    ValueError
        If ``predict`` is not callable, ``tokens`` is not a 1-D integer
        array, ``replacement`` is not an integer, or ``predict`` returns
        something that is not ``(b, n_classes)``.
    """
    if not callable(predict):
        raise ValueError(f"predict must be a function of token arrays, got {type(predict).__name__}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer) or tokens.size == 0:
        raise ValueError(f"tokens must be a non-empty 1-D array of token ids (seq,), got shape {tokens.shape} "
                         f"and dtype {tokens.dtype}")
    if isinstance(replacement, bool) or not isinstance(replacement, (int, np.integer)):
        raise ValueError(f"replacement must be a token id (an int), got {replacement!r}")
    seq = tokens.shape[0]
    batch = np.repeat(tokens[None, :], seq, axis=0)  # (seq, seq): row j will lose token j
    batch[np.arange(seq), np.arange(seq)] = replacement  # replaced in place: no position shifts
    probabilities = np.asarray(predict(np.concatenate([tokens[None, :], batch])), dtype=np.float64)
    if probabilities.ndim != 2 or probabilities.shape[0] != seq + 1:
        raise ValueError(f"predict must return probabilities (b, n_classes) for b = {seq + 1} sentences, "
                         f"got shape {probabilities.shape}")
    original, occluded = probabilities[0], probabilities[1:]  # (n_classes,), (seq, n_classes)
    predicted = int(np.argmax(original))  # the class of the ORIGINAL sentence, for every occlusion
    return original[predicted] - occluded[:, predicted]


def gradient_x_input(grad_inputs: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Per-token importance: the gradient times the input, summed over features.

    Parameters
    ----------
    grad_inputs : numpy.ndarray
        Shape ``(..., seq, d)``: the gradient of the output (e.g. the
        logit of the predicted class) with respect to each input vector.
    inputs : numpy.ndarray
        Shape ``(..., seq, d)``: the input vectors (e.g. embeddings plus
        positions), the same shape.

    Returns
    -------
    numpy.ndarray
        Shape ``(..., seq)``, the dtype of the inputs: entry ``[..., j]``
        is ``sum_f grad_inputs[..., j, f] * inputs[..., j, f]``, signed.

    Raises
    ------
    ValueError
        If either has fewer than 2 axes or their shapes differ.
    """
    grad_inputs = as_float_array("grad_inputs", grad_inputs)
    inputs = as_float_array("inputs", inputs)
    require_ndim("grad_inputs", grad_inputs, 2, "(..., seq, d)")
    require_ndim("inputs", inputs, 2, "(..., seq, d)")
    if grad_inputs.shape != inputs.shape:
        raise ValueError(f"grad_inputs of shape {grad_inputs.shape} and inputs of shape {inputs.shape} "
                         "must have the same shape (..., seq, d)")
    return np.sum(grad_inputs * inputs, axis=-1)  # (..., seq, d) -> (..., seq)


def attention_rollout(weights: np.ndarray) -> np.ndarray:
    """Follow attention through a stack of layers with residual connections.

    Parameters
    ----------
    weights : numpy.ndarray
        Shape ``(n_layers, seq, seq)``: each layer's attention weights
        (heads already averaged), rows summing to 1, first layer first.

    Returns
    -------
    numpy.ndarray
        Shape ``(seq, seq)``: entry ``[i, j]`` is how much of input token
        ``j`` reaches position ``i`` after the last layer. Rows sum to 1.

    Raises
    ------
    ValueError
        If ``weights`` is not ``(n_layers, seq, seq)`` with at least one
        layer.

    Notes
    -----
    Per layer, ``A = 0.5 * W + 0.5 * I`` (half the token's own residual
    path), rows renormalised; the rollout is ``A_L @ ... @ A_2 @ A_1``:
    layer 1 acts on the input first.
    """
    weights = as_float_array("weights", weights)
    if weights.ndim != 3 or weights.shape[-1] != weights.shape[-2] or weights.shape[0] == 0:
        raise ValueError(f"weights must have shape (n_layers, seq, seq) with n_layers >= 1, got {weights.shape}")
    eye = np.eye(weights.shape[-1], dtype=weights.dtype)
    rollout = eye
    for layer in weights:  # first layer first
        mixed = layer + eye  # the residual path: the token keeps its own representation too
        mixed = mixed / mixed.sum(axis=-1, keepdims=True)  # rows sum to 1 again: 0.5 * W + 0.5 * I
        rollout = mixed @ rollout  # this layer acts on what the earlier layers produced
    return rollout


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 of ``x``, tied values given the average of the ranks they share."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # the rank of the first copy of each distinct value
    return (first + (counts - 1) / 2)[inverse]


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two importance vectors.

    Parameters
    ----------
    a, b : numpy.ndarray
        1-D, the same length n >= 2, finite numbers.

    Returns
    -------
    float
        The Pearson correlation of the ranks of ``a`` and ``b``, tied
        values given their average rank: 1.0 for the same order, -1.0 for
        the reverse. NaN when ``a`` or ``b`` is constant (every rank tied:
        the order is undefined).

    Raises
    ------
    ValueError
        If ``a`` or ``b`` is not 1-D, has fewer than 2 entries, holds NaN or
        infinity, or their lengths differ.

    Notes
    -----
    ``1 - 6 sum d^2 / (n (n^2 - 1))`` is the same number only without ties.
    """
    a = as_float_array("a", a)
    b = as_float_array("b", b)
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 1 or x.shape[0] < 2:
            raise ValueError(f"{name} must be a 1-D array of at least 2 numbers, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must hold finite numbers, got {x}")
    if a.shape != b.shape:
        raise ValueError(f"a of shape {a.shape} and b of shape {b.shape} must have the same length")
    rank_a, rank_b = _average_ranks(a), _average_ranks(b)
    return _pearson(rank_a, rank_b)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """The correlation of two 1-D arrays; NaN when either is constant (no spread)."""
    x, y = x - x.mean(), y - y.mean()
    spread = np.sqrt(np.sum(x**2) * np.sum(y**2))
    if spread == 0:
        return float("nan")
    return float(np.sum(x * y) / spread)
