"""Exercise 7: a full Transformer encoder layer around the attention.

Attention only moves information between positions. A Transformer layer
wraps it with three more pieces, and the representation a model produces is
the work of the whole path, not of attention alone:

* Residual connections add each sub-layer's input to its output
  (``x + sublayer(x)``): information can bypass a sub-layer, and deep stacks
  stay trainable. They are also why an attention heatmap cannot tell the
  whole story: much of a token's vector never went through the weights.
* Layer normalisation rescales each token vector on its own to mean 0 and
  variance 1 over its features, then applies a learned scale ``gamma`` and
  shift ``beta``. ``eps`` sits inside the square root and keeps it away
  from 0. The variance is the biased one (divide by ``d``, not ``d - 1``).
* The position-wise feed-forward network transforms every token separately
  with the same two-layer perceptron: attention mixes across positions, the
  feed-forward network processes within one.

Post-LN (the original Transformer) normalises after each residual sum:
``h = LN1(x + MHA(x))``, ``out = LN2(h + FFN(h))``. Pre-LN (most modern
models) normalises the sub-layer's input and leaves the residual path clean:
``h = x + MHA(LN1(x))``, ``out = h + FFN(LN2(h))``.

Dropout zeroes random entries during training. Inverted dropout divides the
kept entries by ``1 - rate`` so the expected value is unchanged and nothing
needs rescaling at evaluation, where dropout does nothing.

Read first: the reading (docs/reading.md#layer).

What the tests check
--------------------
* ``layer_norm``: shape and dtype (float32 x, gamma and beta stay float32),
  a hand computation with non-trivial gamma, beta and eps=0.5,
  normalisation over the last axis only, biased variance, eps inside the
  square root, gamma scaling and beta shifting;
* ``feed_forward``: shape, relu and gelu (tanh form, not erf) against hand
  computations, position-wise (shuffling rows shuffles the output), an
  unknown activation rejected;
* ``dropout``: identity at evaluation and for rate 0, dropped entries are 0
  and kept ones ``x/(1-rate)`` (dtype kept), the mean is preserved, the rate
  is respected, randomness only from ``rng``, a bad rate rejected;
* ``init_transformer_layer``: keys, shapes, ones and zeros, ``w_1`` and
  ``w_2`` drawn after the attention weights with their own scales;
* ``transformer_layer``: shape, the residual paths (silent sub-layers give
  ``LN2(LN1(x))`` post-LN and ``x`` pre-LN; the feed-forward residual by
  hand), post-LN output normalised by LN2, pre-LN passing a per-token shift
  straight through, masks (causal prefix invariance), permutation
  equivariance without positions, the activation passed on, and reference
  values for both ``norm_first`` settings.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import math
import numpy as np
from .multihead import init_multi_head, multi_head_attention
from .projections import init_weight, linear


def layer_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5
) -> np.ndarray:
    """Normalise each vector along the last axis, then scale and shift it.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(..., d)``.
    gamma, beta : numpy.ndarray
        Shape ``(d,)``: learned scale and shift.
    eps : float, optional
        Added to the variance inside the square root; non-negative.

    Returns
    -------
    numpy.ndarray
        ``(x - mean) / sqrt(var + eps) * gamma + beta`` with mean and biased
        variance over the last axis; same shape as ``x``.

    Raises
    ------
    ValueError
        If ``gamma`` or ``beta`` does not have shape ``(d,)`` or ``eps`` is
        negative.
    """
    raise NotImplementedError('layer_norm: not implemented yet (exercise 7, layer.py; run `pytest -m layer`)')


def feed_forward(
    x: np.ndarray, params: dict[str, np.ndarray], activation: str = "relu"
) -> np.ndarray:
    """Apply the same two-layer network to every position.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(..., n, d_model)``.
    params : dict
        ``w_1 (d_model, d_ff)``, ``b_1 (d_ff,)``, ``w_2 (d_ff, d_model)``,
        ``b_2 (d_model,)``; other keys are ignored.
    activation : {"relu", "gelu"}, optional
        ``"gelu"`` is the tanh approximation
        ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    Returns
    -------
    numpy.ndarray
        ``act(x @ w_1 + b_1) @ w_2 + b_2``, shape ``(..., n, d_model)``.

    Raises
    ------
    ValueError
        If ``activation`` is unknown or a parameter has the wrong shape.
    """
    raise NotImplementedError('feed_forward: not implemented yet (exercise 7, layer.py; run `pytest -m layer`)')


def dropout(
    x: np.ndarray, rate: float, rng: np.random.Generator, training: bool = True
) -> np.ndarray:
    """Zero each entry with probability ``rate`` and rescale the rest.

    Parameters
    ----------
    x : numpy.ndarray
        Any shape.
    rate : float
        Probability of dropping an entry, ``0 <= rate < 1``.
    rng : numpy.random.Generator
        The only source of randomness.
    training : bool, optional
        When False, dropout is the identity.

    Returns
    -------
    numpy.ndarray
        Same shape and dtype as ``x``: kept entries divided by
        ``1 - rate``, dropped entries 0. ``x`` itself is returned unchanged
        when ``training`` is False or ``rate`` is 0.

    Raises
    ------
    ValueError
        If ``rate`` is outside ``[0, 1)``.
    """
    raise NotImplementedError('dropout: not implemented yet (exercise 7, layer.py; run `pytest -m layer`)')


def init_transformer_layer(
    rng: np.random.Generator, d_model: int, n_heads: int, d_ff: int
) -> dict:
    """Create random parameters for :func:`transformer_layer`.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    d_model, n_heads, d_ff : int
        Model width, number of heads (dividing ``d_model``) and hidden width
        of the feed-forward network.

    Returns
    -------
    dict
        ``attention``: ``init_multi_head(rng, d_model, n_heads)`` (drawn
        first); ``ln1_gamma, ln2_gamma``: ones ``(d_model,)``;
        ``ln1_beta, ln2_beta``: zeros; ``w_1``: ``init_weight(rng, d_model,
        d_ff)``, then ``w_2``: ``init_weight(rng, d_ff, d_model)``;
        ``b_1 (d_ff,)`` and ``b_2 (d_model,)``: zeros.

    Raises
    ------
    ValueError
        If a size is not positive or ``n_heads`` does not divide ``d_model``.
    """
    raise NotImplementedError('init_transformer_layer: not implemented yet (exercise 7, layer.py; run `pytest -m layer`)')


def transformer_layer(
    x: np.ndarray,
    params: dict,
    n_heads: int,
    mask: np.ndarray | None = None,
    norm_first: bool = False,
    activation: str = "relu",
) -> np.ndarray:
    """One encoder layer: attention and feed-forward, each with a residual.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(..., n, d_model)``.
    params : dict
        As made by :func:`init_transformer_layer`.
    n_heads : int
        Number of attention heads.
    mask : numpy.ndarray, optional
        Passed to :func:`multi_head_attention`.
    norm_first : bool, optional
        False (default): post-LN, ``h = LN1(x + MHA(x))``,
        ``out = LN2(h + FFN(h))``. True: pre-LN, ``h = x + MHA(LN1(x))``,
        ``out = h + FFN(LN2(h))``.
    activation : {"relu", "gelu"}, optional
        The feed-forward activation.

    Returns
    -------
    numpy.ndarray
        Shape ``(..., n, d_model)``. Inference mode: no dropout.

    Raises
    ------
    ValueError
        If a parameter is missing or the shapes do not fit.
    """
    raise NotImplementedError('transformer_layer: not implemented yet (exercise 7, layer.py; run `pytest -m layer`)')
