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
in a context of its own.

The second task, ``latest_match_task``, is for a head that is trained: a
context of ``length`` symbols drawn from ``n_symbols`` (so every symbol
occurs several times), and a query symbol taken from the context; the
answer is the position of its most recent occurrence, the one nearest to
the query. The content of a key says whether it matches; only its position
says which match is the latest.

This module needs numpy only, and draws every random number from the
generator it is given.
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


def latest_match_task(rng: np.random.Generator, n_examples: int, length: int, n_symbols: int = 6) -> dict:
    """Draw contexts of symbols and, for each, a query whose answer is its latest occurrence.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    n_examples : int
        How many contexts, positive.
    length : int
        Symbols per context, positive. The query stands after them, at
        position ``length``.
    n_symbols : int, optional
        How many different symbols (default 6).

    Returns
    -------
    dict
        ``symbols`` ``(n_examples, length)`` int64 in ``[0, n_symbols)``;
        ``query`` ``(n_examples,)`` the query's symbol, one that occurs in
        its context; ``answer`` ``(n_examples,)`` the position of that
        symbol's last occurrence; ``length`` and ``n_symbols`` as given.
    """
    for name, value in (("n_examples", n_examples), ("length", length), ("n_symbols", n_symbols)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    symbols = rng.integers(0, n_symbols, size=(n_examples, length))  # (n_examples, length)
    rows = np.arange(n_examples)
    query = symbols[rows, rng.integers(0, length, size=n_examples)]  # a symbol of the context
    matches = symbols == query[:, None]  # (n_examples, length)
    answer = length - 1 - np.argmax(matches[:, ::-1], axis=1)  # the last True of each row
    return {"symbols": symbols.astype(np.int64), "query": query.astype(np.int64),
            "answer": answer.astype(np.int64), "length": int(length), "n_symbols": int(n_symbols)}
