"""Exercise 8: gradients by hand, the backward pass of every piece of attention.

Training needs, for every parameter, how much the loss would change if that
parameter moved a little: the gradient. Automatic differentiation (PyTorch's
``backward()``) computes it with the chain rule, one operation at a time,
from the output back to the inputs. Here you write those steps yourself.
Reading: docs/reading.md#gradients.

The rule for every function: a ``*_backward`` receives ``grad_out``, the
gradient of a scalar loss with respect to the forward function's output,
and returns the gradients with respect to the forward function's inputs,
each with the shape of that input. Two consequences:

* a parameter shared across leading axes (a weight used by every token of
  every sequence, a bias, ``gamma``, ``beta``) collects the gradient of
  every place it was used: sum over the batch and position axes;
* an input used twice (``x`` feeds queries, keys and values in
  self-attention) gets the sum of the gradients of each use.

The pieces, for one slice along the softmax axis (``p = softmax(s)``):

* softmax: its Jacobian is ``diag(p) - p p^T``, so
  ``grad_s = p * (g - sum(g * p))``. The ``- p p^T`` term is what couples
  the entries: raising one score lowers every other weight. Where ``p`` is 0
  (a blocked key), the gradient is 0: no gradient flows into blocked keys.
* linear, ``out = x @ W + b``: ``grad_x = grad_out @ W^T``, ``grad_W =
  x^T @ grad_out`` and ``grad_b = grad_out`` summed over every leading axis.
* attention, ``context = softmax(q k^T / sqrt(d_k)) v``: ``grad_v = P^T
  grad_context``, ``grad_P = grad_context v^T``, then the softmax step gives
  ``grad_scores``, and the scores ``q k^T / sqrt(d_k)`` give ``grad_q =
  grad_scores k / sqrt(d_k)`` and ``grad_k = grad_scores^T q / sqrt(d_k)``:
  the scale appears in both.
* layer norm, ``y = xhat * gamma + beta`` with ``xhat = (x - mean) /
  sqrt(var + eps)``: the mean and the variance depend on every feature of
  the token, so ``grad_x`` has three terms: ``(gxhat - mean(gxhat) - xhat *
  mean(gxhat * xhat)) / sqrt(var + eps)`` with ``gxhat = grad_out * gamma``.

How do you know a gradient is right? Compare it with central differences:
nudge one entry by ``+eps`` and by ``-eps``, and ``(f(x + eps) - f(x -
eps)) / (2 eps)`` approximates the derivative with an error that shrinks as
``eps**2`` (a one-sided difference only shrinks as ``eps``). That is
:func:`numerical_gradient`, the tool to check every other function with.

What the tests check
--------------------
* ``numerical_gradient``: the central-difference formula on a cubic, with
  ``eps`` as given, float64 out for float32 in, ``x`` unchanged at return;
* every ``*_backward``: shapes, then the gradient against central
  differences that the tests compute themselves (never with your
  ``numerical_gradient``), on inputs with batch axes, sizes that all differ
  (batch 2, heads 3, 5 queries, 7 keys, d_head 4), float32 and float64;
* every ``*_backward`` is the chain rule, not an estimate: exact to
  rounding on inputs of its own, and a few forward passes of CPU time at a
  larger size; ``softmax_backward`` and ``layer_norm_backward`` also on
  slices of 2048 and 8192 entries, where an n x n Jacobian per slice
  (written out, or built one direction at a time) costs n times the
  memory or the time;
* ``softmax_backward``: the coupling term, the ``axis`` argument, zero
  gradient where a weight is 0;
* ``linear_backward``: weight and bias gradients summed over every leading
  axis, ``grad_bias`` of shape ``(d_out,)``;
* ``attention_backward``: the ``1/sqrt(d_k)`` in both ``grad_q`` and
  ``grad_k``, ``grad_k`` with keys as rows, masks (no gradient into blocked
  keys or their values), the given ``weights`` used as they are;
* ``layer_norm_backward``: the paths through the mean and the variance,
  ``eps``, summed ``grad_gamma`` and ``grad_beta``;
* ``multi_head_attention_backward``: every parameter's gradient and
  ``grad_x`` (through queries, keys and values) with and without a mask.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import math
from collections.abc import Callable
import numpy as np
from .attention import scaled_dot_product_attention
from .multihead import merge_heads, split_heads
from .projections import linear


def numerical_gradient(
    f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6
) -> np.ndarray:
    """Estimate the gradient of a scalar function by central differences.

    Parameters
    ----------
    f : callable
        Takes an array shaped like ``x`` and returns a scalar.
    x : numpy.ndarray
        Where to take the gradient; any shape. Not changed.
    eps : float, optional
        The step, positive.

    Returns
    -------
    numpy.ndarray
        float64, shaped like ``x``: entry ``i`` is ``(f(x + eps e_i) - f(x -
        eps e_i)) / (2 eps)``, with ``e_i`` the array that is 1 at ``i`` and
        0 elsewhere. The steps are taken on a float64 copy of ``x`` (a
        float32 array cannot even represent ``x + 1e-6`` for most ``x``).

    Raises
    ------
    ValueError
        If ``eps`` is not positive.
    """
    raise NotImplementedError('numerical_gradient: not implemented yet (exercise 8, backward.py; run `pytest -m backward`)')


def softmax_backward(
    grad_weights: np.ndarray, weights: np.ndarray, axis: int = -1
) -> np.ndarray:
    """Backward pass of ``weights = softmax(scores, axis)``.

    Parameters
    ----------
    grad_weights : numpy.ndarray
        Gradient of the loss with respect to ``weights``; same shape.
    weights : numpy.ndarray
        The softmax output (each slice along ``axis`` sums to 1, or is all
        zeros for a fully masked slice).
    axis : int, optional
        The axis the softmax normalised over.

    Returns
    -------
    numpy.ndarray
        ``grad_scores = weights * (grad_weights - sum(grad_weights *
        weights, axis))``, the shape of ``weights``; 0 wherever the weight
        is 0.

    Raises
    ------
    ValueError
        If the two arrays have different shapes.
    """
    raise NotImplementedError('softmax_backward: not implemented yet (exercise 8, backward.py; run `pytest -m backward`)')


def linear_backward(
    grad_out: np.ndarray, x: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward pass of ``out = linear(x, weight, bias) = x @ weight + bias``.

    Parameters
    ----------
    grad_out : numpy.ndarray
        Shape ``(..., d_out)``.
    x : numpy.ndarray
        The forward input, shape ``(..., d_in)``.
    weight : numpy.ndarray
        Shape ``(d_in, d_out)``.

    Returns
    -------
    grad_x : numpy.ndarray
        ``grad_out @ weight^T``, shape ``(..., d_in)``.
    grad_weight : numpy.ndarray
        ``x^T @ grad_out`` summed over every leading axis, ``(d_in, d_out)``.
    grad_bias : numpy.ndarray
        ``grad_out`` summed over every leading axis, ``(d_out,)`` (also when
        the forward pass had no bias).

    Raises
    ------
    ValueError
        If the shapes do not fit.
    """
    raise NotImplementedError('linear_backward: not implemented yet (exercise 8, backward.py; run `pytest -m backward`)')


def attention_backward(
    grad_context: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward pass of ``context, weights = scaled_dot_product_attention(q, k, v, mask)``.

    Parameters
    ----------
    grad_context : numpy.ndarray
        Shape ``(..., n_q, d_v)``.
    q, k, v : numpy.ndarray
        The forward inputs, ``(..., n_q, d_k)``, ``(..., n_k, d_k)``,
        ``(..., n_k, d_v)``.
    weights : numpy.ndarray
        The forward pass's weights ``(..., n_q, n_k)``. The mask is already
        in them (blocked keys have weight 0), so it is not an argument.

    Returns
    -------
    grad_q, grad_k, grad_v : numpy.ndarray
        Shaped like ``q``, ``k`` and ``v``.

    Raises
    ------
    ValueError
        If the shapes do not fit each other.
    """
    raise NotImplementedError('attention_backward: not implemented yet (exercise 8, backward.py; run `pytest -m backward`)')


def layer_norm_backward(
    grad_out: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float = 1e-5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward pass of ``out = layer_norm(x, gamma, beta, eps)``.

    Parameters
    ----------
    grad_out : numpy.ndarray
        Shape ``(..., d)``.
    x : numpy.ndarray
        The forward input, ``(..., d)``.
    gamma : numpy.ndarray
        The scale, ``(d,)`` (``beta`` does not enter the gradients).
    eps : float, optional
        The forward pass's ``eps``, non-negative.

    Returns
    -------
    grad_x : numpy.ndarray
        Shape ``(..., d)``, through the normalised values, the mean and the
        variance.
    grad_gamma, grad_beta : numpy.ndarray
        Shape ``(d,)``, summed over every leading axis.

    Raises
    ------
    ValueError
        If the shapes do not fit or ``eps`` is negative.
    """
    raise NotImplementedError('layer_norm_backward: not implemented yet (exercise 8, backward.py; run `pytest -m backward`)')


def multi_head_attention_backward(
    grad_output: np.ndarray,
    x: np.ndarray,
    params: dict[str, np.ndarray],
    n_heads: int,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Backward pass of self-attention ``output, _ = multi_head_attention(x, params, n_heads, mask)``.

    The forward pass is run again to get the intermediate values (the
    projections, the weights); then each step is undone in reverse order.

    Parameters
    ----------
    grad_output : numpy.ndarray
        Shape ``(..., n, d_model)``.
    x : numpy.ndarray
        The forward input, ``(..., n, d_model)``.
    params : dict
        As made by ``init_multi_head``.
    n_heads : int
        Number of heads.
    mask : numpy.ndarray, optional
        The forward pass's mask.

    Returns
    -------
    grad_x : numpy.ndarray
        Shape ``(..., n, d_model)``: the sum of the gradients through the
        queries, the keys and the values.
    grads : dict
        The keys of ``params``, each gradient shaped like its parameter.

    Raises
    ------
    ValueError
        If the shapes or parameters do not fit.
    """
    raise NotImplementedError('multi_head_attention_backward: not implemented yet (exercise 8, backward.py; run `pytest -m backward`)')
