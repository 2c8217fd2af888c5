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

from __future__ import annotations

import math

import numpy as np

from ._checks import as_float_array
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
    queries = as_float_array("queries", queries)
    chunks = as_float_array("chunks", chunks)
    for name, array in (("queries", queries), ("chunks", chunks)):
        if array.ndim != 2:
            raise ValueError(f"{name} must have shape (n, d), got {array.shape}")
    if queries.shape[1] != chunks.shape[1]:
        raise ValueError(f"queries of shape {queries.shape} and chunks of shape {chunks.shape} must have the "
                         "same vector length d (their last axis)")
    lengths = {}
    for name, array in (("queries", queries), ("chunks", chunks)):
        lengths[name] = np.linalg.norm(array, axis=1, keepdims=True)  # (n, 1)
        if np.any(lengths[name] == 0):
            raise ValueError(f"{name} has a zero row (row {int(np.argmin(lengths[name]))}): its cosine is undefined")
    unit_queries = queries / lengths["queries"]  # (n_queries, d), unit rows
    unit_chunks = chunks / lengths["chunks"]  # (n_chunks, d), unit rows
    return unit_queries @ unit_chunks.T  # (n_queries, n_chunks)


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
    similarity = as_float_array("similarity", similarity)
    if similarity.ndim != 2:
        raise ValueError(f"similarity must have shape (n_queries, n_chunks), got {similarity.shape}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= similarity.shape[1]:
        raise ValueError(f"k must be an integer from 1 to n_chunks = {similarity.shape[1]}, got {k!r}")
    order = np.argsort(-similarity, axis=1, kind="stable")  # best first; a stable sort keeps ties in index order
    return order[:, :k].astype(np.int64)  # (n_queries, k)


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
    retrieved, relevant = np.asarray(retrieved), np.asarray(relevant)
    if retrieved.ndim != 2:
        raise ValueError(f"retrieved must have shape (n_questions, k), got {retrieved.shape}")
    if relevant.shape != retrieved.shape[:1]:
        raise ValueError(f"relevant must have shape ({retrieved.shape[0]},), one chunk per row of retrieved, "
                         f"got {relevant.shape}")
    hit = np.any(retrieved == relevant[:, None], axis=1)  # (n_questions,)
    return float(np.mean(hit))


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
    question, facts = np.asarray(question), np.asarray(facts)
    if question.ndim != 2 or question.shape[1] != 2 or not np.issubdtype(question.dtype, np.integer):
        raise ValueError(f"question must be integer word ids of shape (n_questions, 2), got {question.dtype} "
                         f"of shape {question.shape}")
    if facts.shape[:1] != question.shape[:1] or facts.ndim != 3 or facts.shape[2] != 3 or facts.shape[1] == 0 \
            or not np.issubdtype(facts.dtype, np.integer):
        raise ValueError(f"facts must be integer word ids of shape ({len(question)}, n_facts, 3), n_facts >= 1, "
                         f"got {facts.dtype} of shape {facts.shape}")
    if isinstance(n_words, bool) or not isinstance(n_words, (int, np.integer)) or n_words <= 0:
        raise ValueError(f"n_words must be a positive integer, got {n_words!r}")
    for name, ids in (("question", question), ("facts", facts)):
        if ids.min() < 0 or ids.max() >= n_words:
            raise ValueError(f"{name} has word ids from {ids.min()} to {ids.max()}, outside [0, n_words = {n_words})")
    if not sharpness >= 0:
        raise ValueError(f"sharpness must be a number >= 0, got {sharpness!r}")
    words = np.eye(n_words)  # (n_words, n_words): every word its one-hot row
    query = words[question[:, 0]] + words[question[:, 1]]  # (n_questions, n_words)
    keys = words[facts[..., 0]] + words[facts[..., 1]]  # (n_questions, n_facts, n_words)
    values = words[facts[..., 2]]  # (n_questions, n_facts, n_words)
    q = (sharpness * math.sqrt(n_words)) * query[:, None, :]  # (n_questions, 1, n_words): one query each
    context, weights = scaled_dot_product_attention(q, keys, values)  # (n_q, 1, n_words), (n_q, 1, n_facts)
    answer = np.argmax(context[:, 0, :], axis=-1)  # (n_questions,): the first of equal maxima
    return answer.astype(np.int64), weights[:, 0, :]


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
    needed = {"vocab", "values", "facts", "chunks", "chunk_vectors", "questions", "question_vectors", "answers",
              "evidence"}
    if not isinstance(collection, dict) or not needed <= set(collection):
        raise ValueError(f"collection must be a dict made like fact_collection's, with the keys {sorted(needed)}")
    similarity = cosine_similarity(collection["question_vectors"], collection["chunk_vectors"])  # (n_q, n_chunks)
    retrieved = top_k(similarity, k)  # (n_q, k)
    evidence = np.asarray(collection["evidence"])
    hit = np.any(retrieved == evidence[:, None], axis=1)  # (n_q,)
    facts, chunks = np.asarray(collection["facts"]), np.asarray(collection["chunks"])
    context = facts[chunks[retrieved]].reshape(len(retrieved), -1, 3)  # (n_q, k * facts_per_chunk, 3): all it reads
    answer, _ = answer_with_attention(collection["questions"], context, len(collection["vocab"]), sharpness)
    correct = answer == np.asarray(collection["answers"])  # (n_q,)
    return {
        "retrieved": retrieved,
        "hit": hit,
        "answer": answer,
        "correct": correct,
        "recall": recall_at_k(retrieved, evidence),
        "accuracy": float(np.mean(correct)),
        "accuracy_retrieved": float(np.mean(correct[hit])) if hit.any() else float("nan"),
        "accuracy_missed": float(np.mean(correct[~hit])) if not hit.all() else float("nan"),
        "chance": 1.0 / len(collection["values"]),
    }
