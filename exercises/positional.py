"""Exercise 5: positions, because attention on its own cannot see order.

Attention compares contents. Shuffle the input tokens and the outputs are
shuffled the same way, nothing else changes: "the dog chased the cat" and
"the cat chased the dog" hold the same tokens, so without help a layer of
attention treats them as the same set. Position information breaks that
symmetry. Three common ways to add it:

* Sinusoidal encodings (Vaswani et al.) are added to the token vectors. Pair
  ``i`` of columns holds ``sin`` and ``cos`` of the position times a
  frequency ``1 / 10000**(2i/d_model)``: the first pairs turn quickly, the
  last ones slowly, like the hands of a clock. The values stay in
  ``[-1, 1]``.
* Rotary embeddings (RoPE) rotate each pair of query and key features by an
  angle proportional to the position. Rotations keep lengths, and the dot
  product of a query rotated by ``m`` and a key rotated by ``n`` depends only
  on the offset ``m - n``: attention sees relative positions.
* ALiBi adds a bias to the scores: ``-slope * |i - j|``, one slope per head,
  so far-away keys are penalised, some heads more than others.

Read first: the reading (docs/reading.md#order).

What the tests check
--------------------
* ``sinusoidal_encoding``: shape and dtype, row 0 is ``0, 1, 0, 1, ...``,
  values in ``[-1, 1]``, sines and cosines interleaved, each pair sharing
  its frequency ``1 / 10000**(2i/d_model)``, closed-form values, odd
  ``d_model``, and that adding it breaks permutation equivariance;
* ``rotary_embedding``: shape and dtype, position 0 is the identity,
  closed-form values (neighbouring pairs), norms preserved, ``q.k``
  depends only on ``m - n``, custom positions and base, batch axes;
* ``alibi_bias``: shape ``(n_heads, n, n)``, zero diagonal, a penalty
  (never positive), symmetric, values depend only on ``|i - j|``, one
  slope per head with the geometric sequence, closed-form values;
* bad input (odd ``d`` for rotary, positions of the wrong shape, a
  non-positive base or size) raises ``ValueError`` naming the argument;
  fixed inputs match reference values.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import numpy as np


def sinusoidal_encoding(n_positions: int, d_model: int) -> np.ndarray:
    """Build the fixed sine/cosine position table of Vaswani et al.

    Parameters
    ----------
    n_positions : int
        Number of positions ``p = 0 .. n_positions - 1``.
    d_model : int
        Number of features; may be odd (the last column is then a sine).

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(n_positions, d_model)``, with
        ``PE[p, 2i] = sin(p / 10000**(2i/d_model))`` and
        ``PE[p, 2i+1] = cos(p / 10000**(2i/d_model))``.

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    raise NotImplementedError('sinusoidal_encoding: not implemented yet (exercise 5, positional.py; run `pytest -m positional`)')


def rotary_embedding(
    x: np.ndarray, positions: np.ndarray | None = None, base: float = 10000.0
) -> np.ndarray:
    """Rotate each feature pair of ``x`` by an angle set by its position.

    Parameters
    ----------
    x : numpy.ndarray
        Queries or keys, shape ``(..., n, d)`` with ``d`` even.
    positions : numpy.ndarray, optional
        Positions of the ``n`` rows, shape ``(n,)``; default ``0 .. n-1``.
    base : float, optional
        Base of the frequencies, positive; default 10000.

    Returns
    -------
    numpy.ndarray
        Same shape and dtype as ``x``. The pair
        ``(a, b) = (x[..., p, 2i], x[..., p, 2i+1])`` becomes
        ``(a cos t - b sin t, a sin t + b cos t)`` with
        ``t = positions[p] * base**(-2i/d)``.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 axes or an odd last axis, ``positions`` has
        the wrong shape, or ``base`` is not positive.
    """
    raise NotImplementedError('rotary_embedding: not implemented yet (exercise 5, positional.py; run `pytest -m positional`)')


def alibi_bias(n: int, n_heads: int) -> np.ndarray:
    """Build ALiBi's distance penalty, one slope per head.

    Parameters
    ----------
    n : int
        Sequence length, positive.
    n_heads : int
        Number of heads, positive.

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(n_heads, n, n)``, entry ``[h, i, j]`` equal to
        ``-slope_h * |i - j|`` with ``slope_h = 2**(-8 (h+1) / n_heads)``.
        Added to the scores of head ``h``.

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    raise NotImplementedError('alibi_bias: not implemented yet (exercise 5, positional.py; run `pytest -m positional`)')
