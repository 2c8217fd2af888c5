"""The fact collection of exercise 14, ready made (given: you do not write this module).

A small store of synthetic facts, each one sentence of three words::

    the code of entity-17 is v3        entity "entity-17", attribute "code", value "v3"

Every entity has one fact per attribute, and every value is drawn at random,
independently of everything else. The facts are shuffled and cut into chunks
of a few facts each, as a document store cuts its documents. A question asks
for one fact ("what is the code of entity-17?"); its evidence is the one
chunk that holds that fact.

Retrieval needs vectors. Every word has a fixed random vector (the rows of
``word_vectors``, unit length). A chunk's vector is the mean of the vectors
of the entity and attribute words of its facts; a question's vector is the
mean of its two words' vectors plus Gaussian noise of size ``noise`` (the
question is worded differently from the chunk). The vectors know words, not
facts: a chunk that holds "the code of entity-3" and "the port of entity-17"
shares both words of the question "the code of entity-17" and still does not
hold the answer. So retrieval sometimes misses, and more often with more
noise or fewer retrieved chunks.

All words, entities, attributes and values, are ids in one vocabulary
(``vocab``): entities first, then attributes, then values.

This module needs numpy only, and draws every random number from the
generator it is given, so the same seed always gives the same collection.
"""

from __future__ import annotations

import numpy as np

ATTRIBUTES = ("code", "port", "colour", "crew", "cargo", "flag")


def fact_collection(
    rng: np.random.Generator,
    n_entities: int = 60,
    n_attributes: int = 4,
    n_values: int = 8,
    facts_per_chunk: int = 4,
    d: int = 64,
    noise: float = 0.1,
    questions_per_fact: int = 2,
) -> dict:
    """Draw a collection of facts in chunks, and the questions about them.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    n_entities, n_attributes, n_values : int, optional
        How many entities, attributes (at most 6) and possible values.
        ``n_entities * n_attributes`` must be a multiple of ``facts_per_chunk``.
    facts_per_chunk : int, optional
        Facts in each chunk.
    d : int, optional
        Length of the word vectors.
    noise : float, optional
        Standard deviation of each entry of the noise added to a question's
        vector (0: the question's vector is the mean of its words' vectors).
    questions_per_fact : int, optional
        Every fact is asked about this many times, each time with new noise.

    Returns
    -------
    dict
        ``vocab``: the words (``n_words = n_entities + n_attributes +
        n_values``); ``values``: the value words' ids ``(n_values,)``;
        ``facts``: ``(n_facts, 3)`` int64 word ids (entity, attribute,
        value); ``chunks``: ``(n_chunks, facts_per_chunk)`` the row of
        ``facts`` of each fact of each chunk; ``word_vectors``: ``(n_words,
        d)`` unit rows; ``chunk_vectors``: ``(n_chunks, d)``;
        ``questions``: ``(n_questions, 2)`` word ids (entity, attribute);
        ``question_vectors``: ``(n_questions, d)``; ``answers``:
        ``(n_questions,)`` the value word id; ``evidence``:
        ``(n_questions,)`` the chunk that holds the fact asked about.
    """
    for name, value in (("n_entities", n_entities), ("n_attributes", n_attributes), ("n_values", n_values),
                        ("facts_per_chunk", facts_per_chunk), ("d", d), ("questions_per_fact", questions_per_fact)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if n_attributes > len(ATTRIBUTES):
        raise ValueError(f"n_attributes must be at most {len(ATTRIBUTES)}, got {n_attributes}")
    if (n_entities * n_attributes) % facts_per_chunk:
        raise ValueError(f"n_entities * n_attributes = {n_entities * n_attributes} facts do not fill chunks of "
                         f"facts_per_chunk = {facts_per_chunk}")
    if not noise >= 0:
        raise ValueError(f"noise must be a number >= 0, got {noise!r}")
    vocab = ([f"entity-{i}" for i in range(n_entities)] + list(ATTRIBUTES[:n_attributes])
             + [f"v{i}" for i in range(n_values)])
    values = np.arange(n_entities + n_attributes, len(vocab))
    entity = np.repeat(np.arange(n_entities), n_attributes)  # every entity has one fact per attribute
    attribute = n_entities + np.tile(np.arange(n_attributes), n_entities)
    value = values[rng.integers(0, n_values, size=n_entities * n_attributes)]
    facts = np.stack([entity, attribute, value], axis=1).astype(np.int64)  # (n_facts, 3)
    chunks = rng.permutation(len(facts)).reshape(-1, facts_per_chunk)  # (n_chunks, facts_per_chunk)

    word_vectors = rng.normal(size=(len(vocab), d))
    word_vectors /= np.linalg.norm(word_vectors, axis=1, keepdims=True)  # (n_words, d), unit rows
    named = facts[chunks][..., :2].reshape(len(chunks), -1)  # (n_chunks, 2 * facts_per_chunk): the words
    chunk_vectors = word_vectors[named].mean(axis=1)  # (n_chunks, d)

    asked = np.tile(np.arange(len(facts)), questions_per_fact)  # (n_questions,): which fact
    questions = facts[asked, :2].copy()  # (n_questions, 2)
    question_vectors = word_vectors[questions].mean(axis=1) + noise * rng.normal(size=(len(asked), d))
    chunk_of_fact = np.empty(len(facts), dtype=np.int64)
    chunk_of_fact[chunks.ravel()] = np.repeat(np.arange(len(chunks)), facts_per_chunk)
    return {
        "vocab": vocab,
        "values": values.astype(np.int64),
        "facts": facts,
        "chunks": chunks.astype(np.int64),
        "word_vectors": word_vectors,
        "chunk_vectors": chunk_vectors,
        "questions": questions,
        "question_vectors": question_vectors,
        "answers": facts[asked, 2].copy(),
        "evidence": chunk_of_fact[asked],
    }
