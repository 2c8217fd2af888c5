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

from __future__ import annotations

import numpy as np

from ._checks import as_float_array, require_ndim, require_positive_int


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
    n_positions = require_positive_int("n_positions", n_positions)
    d_model = require_positive_int("d_model", d_model)
    positions = np.arange(n_positions)[:, None]  # (n_positions, 1)
    columns = np.arange(d_model)  # (d_model,)
    pair_start = 2 * (columns // 2)  # 2i for both columns of pair i
    angles = positions / 10000.0 ** (pair_start / d_model)  # (n_positions, d_model)
    return np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))


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
    x = as_float_array("x", x)
    require_ndim("x", x, 2, "(..., n, d)")
    n, d = x.shape[-2], x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"x must have an even last axis d to form pairs, got shape {x.shape}")
    if not base > 0:
        raise ValueError(f"base must be positive, got {base}")
    if positions is None:
        positions = np.arange(n)
    positions = np.asarray(positions, dtype=np.float64)
    if positions.shape != (n,):
        raise ValueError(
            f"positions must have shape ({n},) to match x of shape {x.shape}, "
            f"got {positions.shape}"
        )
    frequencies = base ** (-np.arange(0, d, 2) / d)  # (d/2,)
    angles = positions[:, None] * frequencies  # (n, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., n, d/2) each
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


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
    n = require_positive_int("n", n)
    n_heads = require_positive_int("n_heads", n_heads)
    slopes = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)  # (n_heads,)
    positions = np.arange(n)
    distance = np.abs(positions[:, None] - positions[None, :])  # (n, n)
    return -slopes[:, None, None] * distance
