"""Exercise 13: An available context is not a used context: recall against distance.

Adding the same number to every score of one slice leaves its softmax
unchanged: the number multiplies every exponential and their sum by the same
factor, which cancels in the division. So the scores of a slice can be
centred, shifted until their mean is zero, without changing a single
attention weight; what carries information is how the scores of a slice
differ, not where they sit.

Read first: the reading (docs/reading.md#context-use).

What the tests check
--------------------
* ``alibi_scores``: the shape of ``x`` is kept; every slice along ``axis``
  has mean 0 (for the last axis and for another one); each slice is only
  shifted (the differences between its entries are unchanged); and the
  softmax of the result equals the softmax of ``x``;
* an input without axes is rejected with a ``ValueError`` naming ``x``;
  fixed inputs match reference values.
"""

# The example of `python -m grader.authoring.new_exercise`: a complete, working exercise to replace by your own,
# keeping its shape (the module docstring above, one teaching docstring per function, bad input rejected with a
# ValueError naming the argument). Comments between the definitions, like this one, never reach the students:
# `python -m grader.authoring.sync` copies the docstrings, imports and signatures only. See CONTRIBUTING.md.

from __future__ import annotations

import numpy as np


def alibi_scores(x: np.ndarray, axis: int = -1) -> np.ndarray:
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
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        raise ValueError(f"x must have at least one axis to centre along, got the number {float(x)!r}")
    return x - np.mean(x, axis=axis, keepdims=True)
