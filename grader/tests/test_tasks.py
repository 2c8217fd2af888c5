"""The given task of exercise 9 (solutions/_tasks.py): seeded, shaped like the reading's sentence, symmetric."""

from __future__ import annotations

import numpy as np
import pytest

from solutions import _tasks


def test_same_seed_same_sentences_and_the_fields_fit():
    first = _tasks.antecedent_task(np.random.default_rng(3), 200)
    again = _tasks.antecedent_task(np.random.default_rng(3), 200)
    for key in ("tokens", "query_position", "target", "antecedent_position", "other_noun_position"):
        np.testing.assert_array_equal(first[key], again[key])
    tokens, rows = first["tokens"], np.arange(200)
    assert tokens.shape == (200, _tasks.SEQ) and tokens.dtype == np.int64
    vocab = first["vocab"]
    assert all(vocab[t] == "it" for t in tokens[rows, first["query_position"]])
    np.testing.assert_array_equal(first["target"], tokens[rows, first["antecedent_position"]])
    assert np.all(first["antecedent_position"] < first["query_position"])
    assert np.all(first["other_noun_position"] > first["query_position"])


def test_the_two_nouns_differ_and_play_either_role_equally_often():
    # Content cannot tell the antecedent from the other noun: both come from the same list, in both roles.
    task = _tasks.antecedent_task(np.random.default_rng(4), 4000)
    rows = np.arange(4000)
    first, other = task["target"], task["tokens"][rows, task["other_noun_position"]]
    nouns = {task["vocab"].index(noun) for noun in _tasks.NOUNS}
    assert set(first) == nouns and set(other) == nouns and np.all(first != other)
    as_first = np.bincount(first, minlength=len(task["vocab"]))[sorted(nouns)] / 4000
    as_other = np.bincount(other, minlength=len(task["vocab"]))[sorted(nouns)] / 4000
    np.testing.assert_allclose(as_first, 1 / len(nouns), atol=0.02)
    np.testing.assert_allclose(as_other, 1 / len(nouns), atol=0.02)


def test_the_reading_sentence_and_bad_input():
    example = _tasks.reading_example()
    words = [example["vocab"][t] for t in example["tokens"][0]]
    assert tuple(words) == _tasks.READING_SENTENCE == ("the", "vessel", "changed", "course", "because", "it",
                                                        "detected", "obstacle")
    with pytest.raises(ValueError, match="n_examples"):
        _tasks.antecedent_task(np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match="vocabulary"):
        _tasks.encode(["the", "submarine"])
