"""The antecedent task of exercise 9, ready made (given: you do not write this module).

Every sentence is shaped like the reading's, eight tokens::

    the vessel changed course because it detected obstacle
    0   1      2       3      4       5  6        7

A noun before the pronoun "it" (position 1) is its antecedent; another noun
after it (position 7) is not. Both nouns come from the same list, and the
two are always different, so the content of a token cannot say which one is
the antecedent: only its position can. The model's job is to predict, at the
pronoun, the token id of the antecedent.

This module needs numpy only, and draws every random number from the
generator it is given, so the same seed always gives the same sentences.
"""

from __future__ import annotations

import numpy as np

NOUNS = ("vessel", "obstacle", "drone", "rover", "tanker", "buoy", "robot", "glacier", "satellite", "tugboat")
FIRST_VERBS = ("changed", "slowed", "turned", "reversed")
OBJECTS = ("course", "speed", "heading")
LINKS = ("because", "when", "after")
SECOND_VERBS = ("detected", "sensed", "spotted", "avoided")
FILLERS = ("the", "it")
VOCAB = (*FILLERS, *NOUNS, *FIRST_VERBS, *OBJECTS, *LINKS, *SECOND_VERBS)

SEQ = 8
QUERY_POSITION = 5  # where "it" is
ANTECEDENT_POSITION = 1
OTHER_NOUN_POSITION = 7
READING_SENTENCE = ("the", "vessel", "changed", "course", "because", "it", "detected", "obstacle")


def encode(words: tuple[str, ...] | list[str]) -> np.ndarray:
    """Token ids of ``words`` (each must be in the vocabulary)."""
    index = {word: i for i, word in enumerate(VOCAB)}
    unknown = [word for word in words if word not in index]
    if unknown:
        raise ValueError(f"words {unknown} are not in the vocabulary {list(VOCAB)}")
    return np.array([index[word] for word in words], dtype=np.int64)


def antecedent_task(rng: np.random.Generator, n_examples: int) -> dict:
    """Draw ``n_examples`` sentences of the antecedent task.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    n_examples : int
        How many sentences, positive.

    Returns
    -------
    dict
        ``tokens`` ``(n, 8)`` int64 token ids; ``query_position`` ``(n,)``
        (always 5, the pronoun); ``target`` ``(n,)`` the token id of the
        antecedent; ``antecedent_position`` ``(n,)`` (always 1);
        ``other_noun_position`` ``(n,)`` (always 7, the noun that is not the
        antecedent); ``vocab`` the list of words, indexed by token id.
    """
    if isinstance(n_examples, bool) or not isinstance(n_examples, (int, np.integer)) or n_examples <= 0:
        raise ValueError(f"n_examples must be a positive integer, got {n_examples!r}")
    n = int(n_examples)
    base = {word: i for i, word in enumerate(VOCAB)}
    noun_ids = np.array([base[w] for w in NOUNS])
    first = rng.integers(0, len(NOUNS), size=n)
    # the other noun: any noun but the first one
    second = (first + rng.integers(1, len(NOUNS), size=n)) % len(NOUNS)

    def pick(words: tuple[str, ...]) -> np.ndarray:
        return np.array([base[w] for w in words])[rng.integers(0, len(words), size=n)]

    tokens = np.stack([
        np.full(n, base["the"]), noun_ids[first], pick(FIRST_VERBS), pick(OBJECTS), pick(LINKS),
        np.full(n, base["it"]), pick(SECOND_VERBS), noun_ids[second],
    ], axis=1).astype(np.int64)  # (n, 8)
    return {
        "tokens": tokens,
        "query_position": np.full(n, QUERY_POSITION, dtype=np.int64),
        "target": tokens[:, ANTECEDENT_POSITION].copy(),
        "antecedent_position": np.full(n, ANTECEDENT_POSITION, dtype=np.int64),
        "other_noun_position": np.full(n, OTHER_NOUN_POSITION, dtype=np.int64),
        "vocab": list(VOCAB),
    }


def reading_example() -> dict:
    """The reading's sentence as a one-example task (the demo draws it)."""
    tokens = encode(READING_SENTENCE)[None, :]
    return {
        "tokens": tokens,
        "query_position": np.array([QUERY_POSITION]),
        "target": tokens[:, ANTECEDENT_POSITION].copy(),
        "antecedent_position": np.array([ANTECEDENT_POSITION]),
        "other_noun_position": np.array([OTHER_NOUN_POSITION]),
        "vocab": list(VOCAB),
    }
