"""The negation task of exercise 12, ready made (given: you do not write this module).

Every sentence reports two events, eleven tokens in fixed slots::

    the payment was not    approved and the refund was indeed rejected
    0   1       2   3      4        5   6   7      8   9      10

Slot 3 belongs to the first event's verb (slot 4), slot 9 to the second's
(slot 10). Exactly one of the two slots holds "not"; the other holds a
harmless adverb ("indeed", "really", "fully"). The question is asked at one
verb (``query_position``): was that event negated? The answer is a word of
the vocabulary, "no" when its own slot holds "not", "yes" when the "not"
belongs to the other event. Every sentence starts after 0 to ``max_shift``
padding tokens "." and is padded at the end to ``11 + max_shift`` tokens,
so the slots have no fixed positions (add the shift to the numbers above).

Sentences come in pairs. The two members of a pair use the same nouns,
verbs and adverb, and ask about the same event at the same position; only
the "not" and the adverb trade places::

    the payment was not    approved and the refund was indeed rejected   (payment? no)
    the payment was indeed approved and the refund was not    rejected   (payment? yes)

So the two members are made of the same words (the same bag of tokens),
have the same query word at the same query position, and opposite answers.
Any model that sees only the bag and the query word gives them the same
answer: on a set made of whole pairs it gets exactly one of each pair right
(or none), so its accuracy is at most one half. Only the order, which word
stands next to which, tells them apart.

``n_controls`` adds control sentences, which belong to no pair: "not" in
both slots (the answer is "no") or in neither ("yes").

This module needs numpy only, and draws every random number from the
generator it is given, so the same seed always gives the same sentences.
"""

from __future__ import annotations

import numpy as np

NOUNS = ("payment", "refund", "order", "transfer", "claim", "invoice", "loan", "request")
VERBS = ("approved", "rejected", "shipped", "signed", "cancelled", "processed", "delayed", "refused")
ADVERBS = ("indeed", "really", "fully")
FILLERS = (".", "the", "was", "and", "not")
ANSWERS = ("yes", "no")
VOCAB = (*FILLERS, *ANSWERS, *NOUNS, *VERBS, *ADVERBS)

SENTENCE = 11  # words in a sentence, before the padding
VERB_POSITIONS = (4, 10)  # the two events' verbs in the sentence: where a question is asked
NOT_SLOTS = (3, 9)  # the slot right before each verb: "not" or an adverb
READING_PAIR = (
    ("the", "payment", "was", "not", "approved", "and", "the", "refund", "was", "indeed", "rejected"),
    ("the", "payment", "was", "indeed", "approved", "and", "the", "refund", "was", "not", "rejected"),
)


def encode(words: tuple[str, ...] | list[str]) -> np.ndarray:
    """Token ids of ``words`` (each must be in the vocabulary)."""
    index = {word: i for i, word in enumerate(VOCAB)}
    unknown = [word for word in words if word not in index]
    if unknown:
        raise ValueError(f"words {unknown} are not in the vocabulary {list(VOCAB)}")
    return np.array([index[word] for word in words], dtype=np.int64)


def _place(sentences: np.ndarray, shift: np.ndarray, max_shift: int) -> np.ndarray:
    """Sentences of 11 tokens placed after ``shift`` padding tokens, padded to ``11 + max_shift``."""
    n = len(sentences)
    tokens = np.full((n, SENTENCE + max_shift), VOCAB.index("."), dtype=np.int64)
    columns = shift[:, None] + np.arange(SENTENCE)  # (n, 11): where each word goes
    tokens[np.arange(n)[:, None], columns] = sentences
    return tokens


def _assemble(sentences: np.ndarray, event: np.ndarray, pair: np.ndarray, shift: np.ndarray,
              max_shift: int) -> dict:
    """The task dict of ``sentences`` (11 words each) shifted by ``shift``, asked about ``event`` (0 or 1)."""
    base = {word: i for i, word in enumerate(VOCAB)}
    n = len(sentences)
    own_word = sentences[np.arange(n), np.array(NOT_SLOTS)[event]]
    return {
        "tokens": _place(sentences, shift, max_shift),
        "query_position": (np.array(VERB_POSITIONS)[event] + shift).astype(np.int64),
        "target": np.where(own_word == base["not"], base["no"], base["yes"]).astype(np.int64),
        "pair": pair.astype(np.int64),
        "event": event.astype(np.int64),
        "own_slot": (np.array(NOT_SLOTS)[event] + shift).astype(np.int64),
        "other_slot": (np.array(NOT_SLOTS)[1 - event] + shift).astype(np.int64),
        "vocab": list(VOCAB),
    }


def _check_count(name: str, value: object, smallest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < smallest:
        raise ValueError(f"{name} must be an integer of at least {smallest}, got {value!r}")
    return int(value)


def negation_task(rng: np.random.Generator, n_pairs: int, n_controls: int = 0, max_shift: int = 3) -> dict:
    """Draw ``n_pairs`` pairs of sentences of the negation task, then ``n_controls`` control sentences.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    n_pairs : int
        How many pairs, positive: examples ``2 i`` and ``2 i + 1`` form pair ``i``.
    n_controls : int, optional
        How many control sentences to add after the pairs (default none): in
        each, both slots hold "not" (the answer is "no") or neither does
        ("yes"). They belong to no pair (``pair`` is -1). Training on them
        too rules out the shortcut "the 'not' is on the other event, so the
        answer is yes", which pairs alone cannot tell from reading one's own
        slot.
    max_shift : int, optional
        Each pair (and each control) starts after 0 to ``max_shift`` padding
        tokens "." (the same for both members of a pair) and is padded at the
        end to ``11 + max_shift`` tokens, so no word has a fixed position:
        "the slot before my verb" is a relative place, not an absolute one.

    Returns
    -------
    dict
        ``tokens`` ``(2 n_pairs + n_controls, 11 + max_shift)`` int64 token
        ids; ``query_position`` the asked verb's position; ``target`` the token
        id of the answer ("no": the asked event is negated, "yes": it is
        not); ``pair`` the pair each example belongs to (-1 for a control);
        ``event`` which event is asked (0 or 1); ``own_slot`` and
        ``other_slot`` the position of the slot right before the asked verb
        and of the one before the other verb (where a "not" can stand);
        ``vocab`` the list of words, indexed by token id.
    """
    n_pairs = _check_count("n_pairs", n_pairs, 1)
    n_controls = _check_count("n_controls", n_controls, 0)
    max_shift = _check_count("max_shift", max_shift, 0)
    base = {word: i for i, word in enumerate(VOCAB)}
    n = n_pairs + n_controls
    noun_ids = np.array([base[w] for w in NOUNS])
    verb_ids = np.array([base[w] for w in VERBS])
    adverb_ids = np.array([base[w] for w in ADVERBS])
    first = rng.integers(0, len(NOUNS), size=n)
    second = (first + rng.integers(1, len(NOUNS), size=n)) % len(NOUNS)  # another noun than the first
    verbs = verb_ids[rng.integers(0, len(VERBS), size=(n, 2))]
    adverb = adverb_ids[rng.integers(0, len(ADVERBS), size=n)]
    event = rng.integers(0, 2, size=n)  # the event asked about (by both members of a pair)
    shift = rng.integers(0, max_shift + 1, size=n)
    first_member_negates = rng.integers(0, 2, size=n).astype(bool)  # pairs: whose "not" the first member has
    not_id = np.full(n, base["not"])

    def sentences(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
        return np.stack([
            np.full(n, base["the"]), noun_ids[first], np.full(n, base["was"]), x1, verbs[:, 0],
            np.full(n, base["and"]), np.full(n, base["the"]), noun_ids[second], np.full(n, base["was"]), x2,
            verbs[:, 1],
        ], axis=1)  # (n, 11)

    on_first, on_second = sentences(not_id, adverb), sentences(adverb, not_id)
    a = np.where(first_member_negates[:, None], on_first, on_second)[:n_pairs]
    b = np.where(first_member_negates[:, None], on_second, on_first)[:n_pairs]
    both = np.where(first_member_negates[:, None], sentences(not_id, not_id), sentences(adverb, adverb))[n_pairs:]
    words = np.concatenate([np.stack([a, b], axis=1).reshape(2 * n_pairs, SENTENCE), both])
    twice = np.concatenate([np.repeat(np.arange(n_pairs), 2), np.arange(n_pairs, n)])  # each draw's rows
    pair = np.concatenate([np.repeat(np.arange(n_pairs), 2), np.full(n_controls, -1)])
    return _assemble(words, event[twice], pair, shift[twice], max_shift)


def reading_pair(shift: int = 0, max_shift: int = 3) -> dict:
    """The reading's pair (the payment asked about) as a two-example task (the demo draws it)."""
    sentences = np.stack([encode(words) for words in READING_PAIR])
    return _assemble(sentences, np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64),
                     np.full(2, shift), max_shift)
