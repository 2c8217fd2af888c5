"""Exercise 3: scaled dot-product attention, softmax(Q K^T / sqrt(d_k) + M) V.

Attention happens in three steps:

1. compare: every query is compared with every key by a dot product, giving
   a score matrix with one row per query and one column per key;
2. normalise: softmax over each row turns the scores into weights that are
   non-negative and sum to 1, and the mask ``M`` decides which keys a query
   may use at all (a blocked key gets ``-inf`` before the softmax, so weight
   0 after it);
3. combine: each query's output (its context vector) is the weighted average
   of the value vectors.

Why divide by ``sqrt(d_k)``? If the entries of ``q`` and ``k`` are
independent with mean 0 and variance 1, their dot product is a sum of
``d_k`` such products and has variance ``d_k``. Without scaling, the scores
spread out as the dimension grows, softmax puts nearly all the weight on one
key, and its gradients vanish. Dividing by ``sqrt(d_k)`` brings the variance
back to about 1 whatever ``d_k`` is. It does not make attention uniform;
it keeps the softmax in a range where it can still learn.

Entry ``[i, j]`` of the weights says how much of value ``j`` goes into output
``i``. It is not, by itself, the importance of token ``j`` for the model's
prediction: a heatmap of weights shows a computation, not an explanation.

Read first: the reading (docs/reading.md#attention and
docs/reading.md#scaling).

What the tests check
--------------------
* shapes ``(..., n_q, n_k)`` and ``(..., n_q, d_v)`` with batch axes and
  ``n_q != n_k`` and ``d_v != d_k``, dtype kept for float32 and float64;
* the scores are ``q @ k^T / sqrt(d_k)`` (transpose of the last two axes),
  also when ``n_k == d_k`` and ``q @ k`` would run without error;
* weights: rows sum to 1, all in ``[0, 1]``, softmax over the key axis;
  context: ``weights @ v``;
* scaling: for unit-variance q and k the scores keep variance near 1 for
  d_k from 4 to 1024, and the attention entropy neither collapses onto one
  key nor flattens to uniform as d_k grows;
* the worked example of the reading (docs/reading.md#worked-example):
  8 tokens, rng(42), d_model 16, d_k = d_v = 8;
* masking: a blocked key gets weight exactly 0, changing its key or value
  changes nothing, bool and additive masks agree, any float mask is added,
  a fully blocked row gives zeros (no NaN, no warning), masks broadcast
  (one ``(n_q, n_k)`` mask for every batch and head, a ``(batch, 1, n_k)``
  padding mask);
* invariances: with a causal mask, changing token t leaves the outputs
  before t unchanged; changing padded keys and values changes nothing;
  shuffling the tokens shuffles the outputs the same way (attention alone
  does not see order);
* bad input: ValueError naming ``q``/``k``, ``v`` or ``mask``.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import math
import numpy as np
from .softmax import softmax


def attention_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Compare every query with every key: ``q @ k^T / sqrt(d_k)``.

    Parameters
    ----------
    q : numpy.ndarray
        Queries, shape ``(..., n_q, d_k)``.
    k : numpy.ndarray
        Keys, shape ``(..., n_k, d_k)``.

    Returns
    -------
    numpy.ndarray
        Scores, shape ``(..., n_q, n_k)``; entry ``[..., i, j]`` is
        ``q[..., i, :] . k[..., j, :] / sqrt(d_k)``.

    Raises
    ------
    ValueError
        If q or k has fewer than 2 axes or their last axes differ.

    Notes
    -----
    Transpose only the last two axes of ``k``; ``k.T`` reverses all of them.
    """
    raise NotImplementedError('attention_scores: not implemented yet (exercise 3, attention.py; run `pytest -m attention`)')


def scaled_dot_product_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Attend from every query to the permitted keys and mix their values.

    Parameters
    ----------
    q : numpy.ndarray
        Queries, shape ``(..., n_q, d_k)``.
    k : numpy.ndarray
        Keys, shape ``(..., n_k, d_k)``.
    v : numpy.ndarray
        Values, shape ``(..., n_k, d_v)``; ``d_v`` may differ from ``d_k``.
    mask : numpy.ndarray, optional
        Broadcastable to ``(..., n_q, n_k)``. Boolean: ``True`` where the
        query may attend to the key. Float: added to the scores (the ``M`` of
        the formula; 0 keeps a key, ``-inf`` blocks it).

    Returns
    -------
    context : numpy.ndarray
        Shape ``(..., n_q, d_v)``: each row a weighted average of values.
    weights : numpy.ndarray
        Shape ``(..., n_q, n_k)``: each row sums to 1, or is all zeros when
        every key of that row is blocked (then the context row is zero too).

    Raises
    ------
    ValueError
        If the shapes do not fit each other or the mask does not broadcast.
    """
    raise NotImplementedError('scaled_dot_product_attention: not implemented yet (exercise 3, attention.py; run `pytest -m attention`)')
