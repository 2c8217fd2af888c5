"""Exercise 14: Retrieval is not attention: no answer without the evidence.

A retrieval-augmented system answers in two steps. First retrieval: compare
the question's vector with every chunk's vector of a document store and keep
the ``k`` most similar chunks, a hard choice (a chunk is in or out). Then the
model reads only those chunks, and its attention weighs their tokens softly.
The two steps look alike (both compare vectors) but do different jobs, and
the second can use only what the first let in.

You measure that on a store of synthetic facts (given, in ``_facts.py``:
``fact_collection(rng)``): "the code of entity-17 is v3", cut into chunks of
four facts, with questions such as "the code of entity-17?". The reader is
one attention head over the facts of the retrieved chunks. Its query names
the question's entity and attribute, each fact's key names the fact's entity
and attribute, and each value is the fact's value word, so the head's output
is a distribution over the value words, and its answer the most likely one.
With a sharp head a fact that matches both words takes nearly all the
weight: when the evidence was retrieved the answer is right. When it was
not, no fact in the context holds the answer, and since the values are drawn
independently, whatever the head picks is right one time in ``n_values``,
chance, however sharp the head. So answer accuracy follows retrieval
recall::

    accuracy = recall * accuracy_retrieved + (1 - recall) * accuracy_missed
             ~ recall * 1 + (1 - recall) * chance

A better reader cannot compensate for a missed chunk: improve the retrieval
(more chunks, better vectors) or the answer is a guess.

Read first: the reading (docs/reading.md#retrieval).

What the tests check
--------------------
* ``cosine_similarity``: the shape ``(n_queries, n_chunks)``; each entry the
  cosine of the angle between a query and a chunk (a hand computation); the
  length of a vector does not matter; a zero vector is rejected with a
  ``ValueError`` naming its argument;
* ``top_k``: ``k`` integer indices per row, best first, as a full sort's
  first ``k``, equal scores in the order of their index; a ``k`` outside
  ``1..n_chunks`` is rejected naming ``k``;
* ``recall_at_k``: the share of rows whose relevant chunk is among the
  retrieved ones, against a hand count;
* ``answer_with_attention``: shapes, and weights that are the softmax of
  ``sharpness`` times the number of words a fact shares with the question
  (for sharpness 0.7, 2 and 10); the answer is the word with the most
  weight in total, also when several half-matching facts outvote the one
  asked about; each question reads its own facts only, and facts listed in
  another order get the same weights; an id outside the vocabulary is
  rejected naming ``facts``;
* ``evaluate``: on collections the test draws, at two or more ``k``, its
  retrieved chunks, hits, answers, recall and accuracies equal the test's
  own pipeline (which reads the facts of the retrieved chunks only); where
  the evidence was retrieved the sharp reader is right (at least 97%),
  where it was not it is at chance (within 0.08 of 1 / n_values) for
  sharpness 1, 10 and 100; and over ``k`` the accuracy lies within 0.06 of
  the line ``chance + (1 - chance) * recall``.
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import math
import numpy as np
from .attention import scaled_dot_product_attention


def cosine_similarity(queries: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """The cosine of the angle between every query and every chunk.

    ``cos(q, c) = (q . c) / (|q| |c|)``: 1 for vectors pointing the same
    way, 0 for orthogonal ones, -1 for opposite ones. Dividing by the
    lengths makes the score ignore how long a vector is (a long chunk, a
    short question) and keep only its direction. Normalise the rows first,
    then one matrix product compares every pair.

    Parameters
    ----------
    queries : numpy.ndarray
        Shape ``(n_queries, d)``.
    chunks : numpy.ndarray
        Shape ``(n_chunks, d)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_queries, n_chunks)``, float, entries in ``[-1, 1]``.

    Raises
    ------
    ValueError
        If an argument is not 2-D, the lengths ``d`` differ, or a row is the
        zero vector (it has no direction: its cosine is undefined).
    """
    raise NotImplementedError('cosine_similarity: not implemented yet (exercise 14, retrieval.py; run `pytest -m retrieval`)')


def top_k(similarity: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` most similar chunks of every row, best first.

    This is the hard choice of retrieval: the first ``k`` chunks of each row
    are in, all others are out, however close their scores. Equal scores
    keep the order of their index (the lower index first), so the result
    never depends on how a sort happens to break ties.

    Parameters
    ----------
    similarity : numpy.ndarray
        Shape ``(n_queries, n_chunks)``.
    k : int
        How many chunks to keep, from 1 to ``n_chunks``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_queries, k)``, int64: row ``i`` lists chunk indices in
        decreasing order of ``similarity[i]``.

    Raises
    ------
    ValueError
        If ``similarity`` is not 2-D or ``k`` is not an integer in
        ``1..n_chunks``.
    """
    raise NotImplementedError('top_k: not implemented yet (exercise 14, retrieval.py; run `pytest -m retrieval`)')


def recall_at_k(retrieved: np.ndarray, relevant: np.ndarray) -> float:
    """The share of questions whose relevant chunk was retrieved.

    Each question has one chunk that holds its answer (its evidence).
    Recall at ``k`` counts the questions whose evidence is among their ``k``
    retrieved chunks; it does not care where in the list.

    Parameters
    ----------
    retrieved : numpy.ndarray
        Shape ``(n_questions, k)``: the chunk indices retrieved for each
        question (as made by :func:`top_k`).
    relevant : numpy.ndarray
        Shape ``(n_questions,)``: the index of each question's evidence.

    Returns
    -------
    float
        In ``[0, 1]``.

    Raises
    ------
    ValueError
        If ``retrieved`` is not 2-D or ``relevant`` has not one entry per row.
    """
    raise NotImplementedError('recall_at_k: not implemented yet (exercise 14, retrieval.py; run `pytest -m retrieval`)')


def answer_with_attention(
    question: np.ndarray, facts: np.ndarray, n_words: int, sharpness: float = 10.0
) -> tuple[np.ndarray, np.ndarray]:
    """Answer each question with one attention head over the given facts only.

    Every word is its one-hot row of length ``n_words`` (the identity matrix
    of the vocabulary). The query of a question is ``onehot(entity) +
    onehot(attribute)``, the key of a fact is the same for the fact's
    entity and attribute, so ``query . key`` counts the words they share:
    2 for the fact asked about, 1 for a fact about the same entity or the
    same attribute, 0 otherwise. The value of a fact is ``onehot(value)``.
    Exercise 3's ``scaled_dot_product_attention`` divides the scores by
    ``sqrt(d_k)`` (here ``d_k = n_words``), so multiply the query by
    ``sharpness * sqrt(n_words)``: the scores are then ``sharpness`` times
    the shared words. The context is the weighted sum of the values, a
    distribution over the words, and the answer is the word with the most
    weight (on equal weights the lower id). A sharp head (``sharpness`` 10)
    puts nearly all its weight on a fact that matches both words; a soft one
    spreads it over partial matches.

    Parameters
    ----------
    question : numpy.ndarray
        Shape ``(n_questions, 2)``, int: entity and attribute word ids.
    facts : numpy.ndarray
        Shape ``(n_questions, n_facts, 3)``, int: the facts each question's
        head may read (those of its retrieved chunks): entity, attribute
        and value word ids.
    n_words : int
        The size of the vocabulary: every id is below it.
    sharpness : float, optional
        The score of each shared word.

    Returns
    -------
    answer : numpy.ndarray
        Shape ``(n_questions,)``, int64: the word id with the most weight.
    weights : numpy.ndarray
        Shape ``(n_questions, n_facts)``: the attention weights over the
        facts, each row summing to 1.

    Raises
    ------
    ValueError
        If the shapes do not fit, an id is not in ``[0, n_words)``, or
        ``sharpness`` is negative.
    """
    raise NotImplementedError('answer_with_attention: not implemented yet (exercise 14, retrieval.py; run `pytest -m retrieval`)')


def evaluate(collection: dict, k: int, sharpness: float = 10.0) -> dict:
    """Retrieve ``k`` chunks for every question, answer from them, and score both steps.

    The pipeline: ``cosine_similarity`` of the question vectors with the
    chunk vectors, ``top_k``, then the facts of the retrieved chunks only
    (``facts[chunks[retrieved]]``, ``k * facts_per_chunk`` facts per
    question), read by ``answer_with_attention``. Splitting the questions by
    whether their evidence was retrieved shows where the answers come from:
    nearly all right where it was, chance where it was not.

    Parameters
    ----------
    collection : dict
        As made by ``fact_collection``: ``vocab``, ``values``, ``facts``,
        ``chunks``, ``chunk_vectors``, ``questions``, ``question_vectors``,
        ``answers``, ``evidence``.
    k : int
        Chunks retrieved per question.
    sharpness : float, optional
        The reader's sharpness (see :func:`answer_with_attention`).

    Returns
    -------
    dict
        ``retrieved`` ``(n_questions, k)``; ``hit`` ``(n_questions,)`` bool,
        the evidence was retrieved; ``answer`` ``(n_questions,)`` the word
        ids answered; ``correct`` ``(n_questions,)`` bool; ``recall``
        (``recall_at_k``) and ``accuracy``, floats; ``accuracy_retrieved``
        and ``accuracy_missed``, the accuracy over the questions with and
        without their evidence (NaN where there are none); ``chance``, ``1 /
        n_values``.

    Raises
    ------
    ValueError
        If ``collection`` lacks a key, or as the functions it calls.
    """
    raise NotImplementedError('evaluate: not implemented yet (exercise 14, retrieval.py; run `pytest -m retrieval`)')
