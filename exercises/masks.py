"""Exercise 4: masks decide which query may attend to which key.

Attention compares every query with every key, but a model does not always
allow every pair. A mask is the model's wiring diagram: it fixes which paths
information can take, and a wrong mask gives the right shapes with the wrong
model. In this kit a boolean mask says ``True`` where a query **may** attend
to a key.

* Bidirectional (an encoder such as BERT): no mask, every token sees both
  sides.
* Causal (a model that generates text left to right): position ``i`` sees
  keys ``0..i``, itself included, never the future. The mask is the lower
  triangle with its diagonal.
* Padding: sequences in a batch have different lengths and are padded to a
  common one; the padded key positions must receive no attention. The mask
  has shape ``(batch, 1, max_len)`` so that it broadcasts over the queries.

Masks combine with a logical AND. The formula adds the mask to the scores:
an additive mask is ``0.0`` where attention is allowed and ``-inf`` where it
is not, so that the softmax gives blocked keys weight 0. A large negative
number such as -1e9 is a common stand-in for ``-inf``, but a row with every
key blocked then gets uniform weights instead of none.

Read first: the reading (docs/reading.md#masks).

What the tests check
--------------------
* ``causal_mask``: dtype bool, shape ``(n, n)``, the diagonal allowed, the
  future blocked, row ``i`` allows exactly ``i + 1`` keys, the lower
  triangle exactly, and attention with it ignores later tokens;
* ``padding_mask``: dtype bool, shape ``(batch, 1, max_len)``, key ``j``
  allowed exactly when ``j < lengths[b]``, a length of 0 blocks everything
  and a length of ``max_len`` nothing, and attention with it ignores what
  the padded positions hold;
* ``combine_masks``: logical AND with broadcasting (causal with padding),
  for one, two or three masks;
* ``to_additive``: 0.0 and ``-inf`` (not a large negative number), float64
  by default or the requested dtype, so a fully blocked row gets no weight,
  without a RuntimeWarning;
* bad sizes, lengths and non-boolean masks are rejected with a
  ``ValueError`` naming the argument; fixed inputs match reference values.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import functools
import numpy as np
from numpy.typing import DTypeLike


def causal_mask(n: int) -> np.ndarray:
    """Allow each position to attend to itself and to earlier positions.

    Parameters
    ----------
    n : int
        Sequence length, positive.

    Returns
    -------
    numpy.ndarray
        Bool, shape ``(n, n)``; entry ``[i, j]`` is True when ``j <= i``.

    Raises
    ------
    ValueError
        If ``n`` is not a positive integer.
    """
    raise NotImplementedError('causal_mask: not implemented yet (exercise 4, masks.py; run `pytest -m masks`)')


def padding_mask(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Block the padded key positions of each sequence in a batch.

    Parameters
    ----------
    lengths : numpy.ndarray
        Integers, shape ``(batch,)``: the number of real tokens of each
        sequence, each between 0 and ``max_len``.
    max_len : int
        The padded length, positive.

    Returns
    -------
    numpy.ndarray
        Bool, shape ``(batch, 1, max_len)``; entry ``[b, 0, j]`` is True when
        ``j < lengths[b]``. The length-1 axis broadcasts over queries.

    Raises
    ------
    ValueError
        If ``lengths`` is not a 1-D array of integers in ``[0, max_len]`` or
        ``max_len`` is not a positive integer.
    """
    raise NotImplementedError('padding_mask: not implemented yet (exercise 4, masks.py; run `pytest -m masks`)')


def combine_masks(*masks: np.ndarray) -> np.ndarray:
    """Allow a pair only where every mask allows it (logical AND).

    Parameters
    ----------
    *masks : numpy.ndarray
        One or more boolean masks whose shapes broadcast together, e.g. a
        causal ``(n, n)`` and a padding ``(batch, 1, n)`` mask.

    Returns
    -------
    numpy.ndarray
        Bool, of the broadcast shape (``(batch, n, n)`` in the example).

    Raises
    ------
    ValueError
        If no mask is given, a mask is not boolean, or the shapes do not
        broadcast.
    """
    raise NotImplementedError('combine_masks: not implemented yet (exercise 4, masks.py; run `pytest -m masks`)')


def to_additive(mask: np.ndarray, dtype: DTypeLike = np.float64) -> np.ndarray:
    """Turn a boolean mask into the additive ``M`` of the attention formula.

    Parameters
    ----------
    mask : numpy.ndarray
        Boolean, any shape; True where attention is allowed.
    dtype : numpy dtype, optional
        Floating dtype of the result, float64 by default.

    Returns
    -------
    numpy.ndarray
        Same shape as ``mask``: ``0.0`` where True, ``-inf`` where False.

    Raises
    ------
    ValueError
        If ``mask`` is not boolean or ``dtype`` is not a floating dtype.
    """
    raise NotImplementedError('to_additive: not implemented yet (exercise 4, masks.py; run `pytest -m masks`)')
