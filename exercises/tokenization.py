"""Exercise 15: Tokenization changes the sequence: byte-pair encoding.

Adding the same number to every score of one slice leaves its softmax
unchanged: the number multiplies every exponential and their sum by the same
factor, which cancels in the division. So the scores of a slice can be
centred, shifted until their mean is zero, without changing a single
attention weight; what carries information is how the scores of a slice
differ, not where they sit.

Read first: the reading (docs/reading.md#tokenization).

What the tests check
--------------------
* ``train_bpe``: the shape of ``x`` is kept; every slice along ``axis``
  has mean 0 (for the last axis and for another one); each slice is only
  shifted (the differences between its entries are unchanged); and the
  softmax of the result equals the softmax of ``x``;
* an input without axes is rejected with a ``ValueError`` naming ``x``;
  fixed inputs match reference values.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import numpy as np


def train_bpe(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Subtract from every slice of ``x`` along ``axis`` that slice's own mean.

    Each slice is shifted by its own number, so its entries keep their
    differences and its softmax stays the same; only the slice's mean moves
    to zero. The mean of the whole array would shift every slice by the same
    number and leave most slices off centre.

    Parameters
    ----------
    x : numpy.ndarray
        Scores, with at least one axis (any leading batch axes).
    axis : int, optional
        The axis whose slices are centred (default: the last).

    Returns
    -------
    numpy.ndarray
        Float, the shape of ``x``; every slice along ``axis`` has mean 0.

    Raises
    ------
    ValueError
        If ``x`` has no axis (a single number has no slice to centre).
    """
    raise NotImplementedError('train_bpe: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')
