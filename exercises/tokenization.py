"""Exercise 15: Tokenization changes the sequence: byte-pair encoding.

A model never sees text: it sees a sequence of token ids, and everything
attention costs is counted in that sequence's length ``n``. The scores are an
``(n, n)`` array, so a text cut into twice as many tokens costs four times
the multiply-adds and four times the memory. The tokenizer decides ``n``.

**Byte-pair encoding** (BPE, Sennrich et al. 2016) learns the tokenizer from a
corpus. Start from the 256 possible bytes of UTF-8, so every string can be
written, whatever its alphabet. Then repeat: count every pair of neighbouring
tokens in the corpus, take the most frequent one, give it a new id (256 for
the first merge, 257 for the second, ...) and replace each occurrence of the
pair by that id, left to right. The list of merges, in the order they were
learned, *is* the tokenizer: the vocabulary has ``256 + len(merges)`` tokens.

* ``train_bpe`` learns the merges. Counting: every neighbouring position
  counts, so ``"aaa"`` holds the pair ``(a, a)`` twice. Ties go to the
  smallest pair (compare the left ids, then the right ones). Training stops
  early when no pair occurs twice: a merge that saves one token only
  memorises the corpus.
* ``bpe_encode`` turns a new text into ids by applying the merges **in their
  learned order**, each to the whole sequence, left to right without
  overlap (``"aaa"`` with the merge ``(a, a)`` becomes ``[aa, a]``). Not
  the longest piece of the vocabulary at each place, not the pairs most
  frequent in the text being encoded: the order is part of the tokenizer.
* ``bpe_decode`` is the exact inverse: each id stands for a string of bytes
  (a byte for ids below 256, the bytes of its pair's two tokens joined for
  a merged id); join the bytes of the whole sequence, *then* read them as
  UTF-8 (one character may be split across two tokens).
* ``token_pieces`` shows the pieces a text is cut into, as bytes;
  ``sequence_lengths`` measures how long texts are under growing
  vocabularies; ``attention_cost`` counts what attention pays for a sequence
  of ``n`` tokens.

Common words of the corpus become one or two tokens; a product identifier
such as ``"XK-9931-B"`` or a measured value such as ``"12.5 mg/L"``, rare
and varied, stays in many small pieces, and each piece is a position that
attention pays for. The kit ships a small corpus written for it,
``_tokenization_corpus.py`` (``CORPUS``, 50 sentences about vessels,
sensors and payments; ``SENTENCES``, its lines): train on it and look at
the pieces yourself, or run ``attention-kit demo --measure tokenization``.

Read first: the reading (docs/reading.md#tokenization).

What the tests check
--------------------
* ``train_bpe``: an integer array of shape ``(n_merges, 2)`` whose merges
  stand for pieces of the text it was given, equal to the tests' own BPE
  on corpora they draw (small alphabets with planted frequent pairs),
  including overlapping runs (``"aaaa"``), ties broken by the smallest
  pair, and the early stop; fewer merges are a prefix of more;
* ``bpe_encode``: ids equal to the tests' own encoder for merges the tests
  give, applied in order (a greedy longest match fails), never longer with
  more merges, the empty string gives no ids;
* ``bpe_decode``: ``bpe_decode(bpe_encode(x)) == x`` for text with
  accents, Greek and emoji, for encodings joined end to end, and for ids
  the tests build themselves (``bpe_decode`` must not remember what
  ``bpe_encode`` saw);
* ``token_pieces``: the bytes of each token, joined they are the text;
  ``"XK-9931-B"`` splits into more pieces than a common word of the corpus;
* ``sequence_lengths``: equal to the lengths of your own ``bpe_encode`` with
  the first ``V - 256`` merges, never growing with ``V``;
* ``attention_cost``: ``4 n^2 d`` floating-point operations and
  ``n^2 * itemsize`` bytes of scores, so doubling ``n`` multiplies both by 4;
* bad input: ValueError naming the argument.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
import numpy as np


def train_bpe(text: str, n_merges: int) -> np.ndarray:
    """Learn up to ``n_merges`` byte-pair merges from ``text``, most frequent pair first.

    The text is read as its UTF-8 bytes, one token per byte (ids 0..255).
    Each step counts every pair of neighbouring tokens, overlapping ones
    included, picks the pair with the highest count (a tie goes to the
    smallest pair: the smaller left id, then the smaller right id), gives it
    the next id (``256 + step``) and replaces it in the sequence, left to
    right without overlap. The next step counts again on the new sequence,
    so a later merge can join tokens made by earlier ones.

    Parameters
    ----------
    text : str
        The training corpus (any characters: they are bytes first).
    n_merges : int
        How many merges to learn, non-negative.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(k, 2)`` with ``k <= n_merges``: row ``i`` is the pair
        of ids that token ``256 + i`` stands for. ``k < n_merges`` only when
        no pair occurs twice any more (then merging would save a single token).
        The first ``m`` rows are what ``train_bpe(text, m)`` returns.

    Raises
    ------
    ValueError
        If ``text`` is not a str or ``n_merges`` not a non-negative integer.
    """
    raise NotImplementedError('train_bpe: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')


def bpe_encode(text: str, merges: np.ndarray) -> np.ndarray:
    """The token ids of ``text``: its UTF-8 bytes, then every merge applied in its learned order.

    Merge ``i`` (the pair ``merges[i]``, new id ``256 + i``) is applied to the
    whole sequence, left to right without overlap, before merge ``i + 1``:
    that is how the corpus was cut when the merges were learned, so a new
    text is cut the same way. Neither the longest piece of the vocabulary
    nor the pairs frequent in ``text`` itself decide.

    Parameters
    ----------
    text : str
        The text to encode (any characters).
    merges : numpy.ndarray
        Integer pairs, shape ``(k, 2)``, as ``train_bpe`` returns (``k`` may be 0).

    Returns
    -------
    numpy.ndarray
        int64, shape ``(n,)``: ids in ``0 .. 255 + k``; ``n`` is at most the
        number of bytes of ``text`` (0 for the empty string).

    Raises
    ------
    ValueError
        If ``text`` is not a str, or ``merges`` is not of shape ``(k, 2)``
        with merge ``i`` joining only ids below ``256 + i``.
    """
    raise NotImplementedError('bpe_encode: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')


def bpe_decode(ids: Sequence[int] | np.ndarray, merges: np.ndarray) -> str:
    """The text that the token ids stand for: the inverse of ``bpe_encode``.

    Every id is a string of bytes: id ``b < 256`` the byte ``b``, id
    ``256 + i`` the bytes of ``merges[i][0]`` followed by those of
    ``merges[i][1]``. Join the bytes of all the ids, then read them as
    UTF-8: a character of two or more bytes may be split between two tokens,
    so reading each token on its own would garble it. Bytes that are not
    valid UTF-8 (ids a model made up) become the replacement character.

    Parameters
    ----------
    ids : sequence of int or numpy.ndarray
        Token ids, shape ``(n,)``, each in ``0 .. 255 + len(merges)``.
    merges : numpy.ndarray
        Integer pairs, shape ``(k, 2)``, the ones the ids were made with.

    Returns
    -------
    str
        The text; ``bpe_decode(bpe_encode(text, merges), merges) == text``.

    Raises
    ------
    ValueError
        If ``ids`` is not one axis of integers in range, or ``merges`` is bad
        (as for ``bpe_encode``).
    """
    raise NotImplementedError('bpe_decode: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')


def token_pieces(text: str, merges: np.ndarray) -> list[bytes]:
    """The pieces ``bpe_encode`` cuts ``text`` into: the bytes of each of its tokens, in order.

    Joined, they are the text's UTF-8 bytes. A piece is bytes, not str: a
    token may hold half of a character (``"é"`` is two bytes). This is the
    view that shows where a text is cut, and why an identifier the corpus
    never saw costs so many positions.

    Parameters
    ----------
    text : str
        The text to cut.
    merges : numpy.ndarray
        Integer pairs, shape ``(k, 2)``.

    Returns
    -------
    list of bytes
        One entry per token of ``bpe_encode(text, merges)``.

    Raises
    ------
    ValueError
        As ``bpe_encode``.
    """
    raise NotImplementedError('token_pieces: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')


def sequence_lengths(texts: Sequence[str], merges: np.ndarray, vocab_sizes: Sequence[int]) -> np.ndarray:
    """How many tokens each text becomes, for each vocabulary size.

    A vocabulary of ``V`` tokens is the 256 bytes and the first ``V - 256``
    merges (the merges learned first, as ``train_bpe(corpus, V - 256)``
    would return). ``V = 256`` counts bytes. The bigger the vocabulary, the
    shorter the sequences, never longer: a merge only joins tokens.

    Parameters
    ----------
    texts : sequence of str
        The texts to measure, ``T`` of them.
    merges : numpy.ndarray
        Integer pairs, shape ``(k, 2)``.
    vocab_sizes : sequence of int
        Vocabulary sizes, each in ``256 .. 256 + k``.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(len(vocab_sizes), T)``: entry ``[j, t]`` is
        ``len(bpe_encode(texts[t], merges[:vocab_sizes[j] - 256]))``.

    Raises
    ------
    ValueError
        If a text is not a str, ``merges`` is bad, or a vocabulary size is
        not an integer in ``256 .. 256 + k``.
    """
    raise NotImplementedError('sequence_lengths: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')


def attention_cost(n: int, d: int, itemsize: int = 8) -> tuple[int, int]:
    """What one head of attention over ``n`` tokens of width ``d`` costs: operations and score memory.

    The scores ``Q K^T`` are ``n * n`` dot products of length ``d``: a
    multiply and an add each, ``2 n^2 d`` operations; the weights times the
    values, ``(n, n) @ (n, d)``, as many again. The scores (and the weights
    after them) are an ``(n, n)`` array of ``itemsize`` bytes each. Both grow
    with the square of ``n``: the tokenizer's sequence length, squared.
    (Softmax's ``n^2`` exponentials and the projections' ``n d^2`` are left
    out: for long sequences the two products dominate.)

    Parameters
    ----------
    n : int
        Sequence length, positive.
    d : int
        Width of queries, keys and values, positive.
    itemsize : int, optional
        Bytes per number (8 for float64, the default; 4 for float32).

    Returns
    -------
    tuple of (int, int)
        ``(4 * n**2 * d, n**2 * itemsize)``: floating-point operations and
        bytes of one ``(n, n)`` score array, as Python ints.

    Raises
    ------
    ValueError
        If ``n``, ``d`` or ``itemsize`` is not a positive integer.
    """
    raise NotImplementedError('attention_cost: not implemented yet (exercise 15, tokenization.py; run `pytest -m tokenization`)')
