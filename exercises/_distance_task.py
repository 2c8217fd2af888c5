"""The key-value recall task of exercise 13, ready made (given: you do not write this module).

A context holds ``n_pairs`` keys, at positions ``0 .. n_pairs - 1``; the
query stands right after them, at position ``n_pairs``, so the key at
position ``j`` is ``n_pairs - j`` steps away from it (the last key 1 step,
the first ``n_pairs`` steps). The query is a copy of one of the keys, the
answer: recall succeeds when the query's largest attention weight falls on
that key. The answer is always in the context; what varies is how far away
it stands.

The keys of one context are orthogonal to each other and all of one length,
chosen so that the scaled score ``q . k / sqrt(d_k)`` of the answer is
``margin`` and that of every other key is 0: without noise, the answer
leads every distractor by exactly ``margin``. With ``noise`` the query is
moved a little, and every score of the context is jittered by about
``noise`` (its standard deviation, in the units of the scaled scores).

Every distance from 1 to ``n_pairs`` is asked ``repeats`` times, each time
in a context of its own. This module needs numpy only, and draws every
random number from the generator it is given.
"""

from __future__ import annotations

import numbers

import numpy as np


def recall_task(rng: np.random.Generator, n_pairs: int, d_k: int, margin: float, noise: float = 0.0,
                repeats: int = 1) -> dict:
    """Draw contexts of orthogonal keys and, for each, a query equal to one of them.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    n_pairs : int
        Keys per context, positive, at most ``d_k`` (orthogonal keys need
        that many dimensions).
    d_k : int
        The dimension of the keys and queries, positive.
    margin : float
        The scaled score of the answer, positive; every other key scores 0.
    noise : float, optional
        The standard deviation of each score's jitter, non-negative (default 0).
    repeats : int, optional
        How many queries ask for each distance (default 1).

    Returns
    -------
    dict
        ``keys`` ``(b, n_pairs, d_k)``; ``queries`` ``(b, d_k)``; ``answer``
        ``(b,)`` the position of the answer's key; ``distance`` ``(b,)``,
        ``n_pairs - answer``, from 1 to ``n_pairs``; ``margin``, ``noise``
        and ``n_pairs`` as given. ``b = n_pairs * repeats``: query ``i``
        asks for distance ``1 + i % n_pairs``.
    """
    for name, value in (("n_pairs", n_pairs), ("d_k", d_k), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if n_pairs > d_k:
        raise ValueError(f"n_pairs ({n_pairs}) must be at most d_k ({d_k}): orthogonal keys need the dimensions")
    if not np.isfinite(margin) or margin <= 0:
        raise ValueError(f"margin must be a positive number, got {margin!r}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a non-negative number, got {noise!r}")
    b = n_pairs * repeats
    basis, _ = np.linalg.qr(rng.normal(size=(b, d_k, n_pairs)))  # (b, d_k, n_pairs): orthonormal columns
    length = np.sqrt(margin * np.sqrt(d_k))  # |k|^2 / sqrt(d_k) = margin
    keys = length * np.swapaxes(basis, 1, 2)  # (b, n_pairs, d_k)
    distance = 1 + np.arange(b) % n_pairs  # (b,)
    answer = n_pairs - distance
    queries = keys[np.arange(b), answer]  # (b, d_k)
    # A jitter e of the query moves the score of key j by e . k_j / sqrt(d_k), of standard deviation
    # |e| per axis * length / sqrt(d_k): this per-axis size makes it `noise`.
    queries = queries + rng.normal(scale=noise * np.sqrt(d_k) / length, size=queries.shape)
    return {"keys": keys, "queries": queries, "answer": answer.astype(np.int64),
            "distance": distance.astype(np.int64), "margin": float(margin), "noise": float(noise),
            "n_pairs": int(n_pairs)}
