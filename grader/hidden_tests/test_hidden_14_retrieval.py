"""Hidden tests of exercise 14, retrieval: float32 and integer vectors, k = n_chunks, a flat reader, more."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.feedback import expect, expect_close, expect_equal, expect_shape
from tests.test_14_retrieval import (
    HEAD,
    MISSING,
    PIPELINE,
    RECALL,
    TOPK,
    checked_evaluation,
    collection,
    own_cosine,
    own_top_k,
)

EXERCISE = "retrieval"

COSINE = "cosine similarity: (q / |q|) @ (c / |c|)^T; integer and float32 vectors are vectors too"


def test_cosine_of_integer_and_float32_vectors(impl):
    queries = np.array([[1, 2, 2], [0, 3, 4]])
    chunks = np.array([[2, 1, 2], [0, 0, 7], [-1, -2, -2]])
    out = impl.cosine_similarity(queries, chunks)
    if expect_shape(out, (2, 3), what="cosine_similarity of integer vectors", idea=COSINE):
        expect_close(out, own_cosine(queries, chunks), rtol=1e-12, what="cosine_similarity of integer vectors "
                     "(e.g. [1, 2, 2] with [2, 1, 2]: 8 / 9)", idea=COSINE)
    rng = np.random.default_rng(1450)
    q32, c32 = rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)
    expect_close(impl.cosine_similarity(q32, c32), own_cosine(q32, c32), rtol=1e-5, atol=1e-6,
                 what="cosine_similarity of float32 vectors", idea=COSINE)


def test_top_k_with_k_equal_to_every_chunk(impl):
    similarity = np.round(np.random.default_rng(1451).normal(size=(3, 8)), 1)  # rounded: several ties per row
    expect_equal(np.asarray(impl.top_k(similarity, 8)), own_top_k(similarity, 8),
                 what="top_k with k = n_chunks = 8 on scores rounded to one decimal (ties)", idea=TOPK)


def test_recall_with_every_and_no_hit(impl):
    retrieved = np.array([[3, 1, 2], [0, 2, 4]])
    expect_close(impl.recall_at_k(retrieved, np.array([2, 4])), 1.0, what="recall_at_k when every evidence is "
                 "retrieved (last in its row)", idea=RECALL)
    expect_close(impl.recall_at_k(retrieved, np.array([0, 1])), 0.0, what="recall_at_k when no evidence is retrieved",
                 idea=RECALL)


def test_a_flat_reader_answers_with_the_most_common_value(impl):
    # sharpness 0: every fact weighs the same, so the answer is the value most facts have (ties: the lower id).
    question = np.array([[0, 3], [1, 4]])
    facts = np.array([[[0, 3, 8], [1, 3, 6], [2, 4, 6], [0, 4, 7], [1, 4, 8]],
                      [[1, 4, 7], [0, 3, 7], [2, 3, 6], [0, 4, 8], [2, 4, 7]]])
    answer, weights = impl.answer_with_attention(question, facts, 9, sharpness=0.0)
    expect_close(weights, np.full((2, 5), 0.2), what="the weights of a reader of sharpness 0", idea=HEAD)
    expect_equal(np.asarray(answer), np.array([6, 7]), what="the answers of a reader of sharpness 0 (values "
                 "[8, 6, 6, 7, 8] and [7, 7, 6, 8, 7])", idea=HEAD + "; on equal weight the lower word id")


def test_another_collection_more_values_more_noise(impl):
    data = collection(1452, n_entities=36, n_attributes=5, n_values=10, facts_per_chunk=5, d=40, noise=0.15,
                      questions_per_fact=2)
    chance = 1 / len(data["values"])
    first = checked_evaluation(impl, data, 1)
    last = checked_evaluation(impl, data, 6) if first is not None else None
    if last is None:
        return
    expect(first["recall"] < last["recall"] and last["accuracy_retrieved"] >= 0.97,
           what="recall at k = 1 and 6, and accuracy where retrieved at k = 6 (10 values, noise 0.15)",
           expected="recall increasing with k, accuracy where retrieved at least 0.97",
           observed=f"recall {first['recall']:.3f} -> {last['recall']:.3f}, accuracy where retrieved "
                    f"{last['accuracy_retrieved']:.3f}", idea=PIPELINE)
    expect(abs(first["accuracy_missed"] - chance) <= 0.07, what="accuracy where the evidence was missed (k = 1, 10 "
           "values)", expected=f"chance {chance:.2f} within 0.07", observed=f"{first['accuracy_missed']:.3f}",
           idea=MISSING)


def test_evaluate_does_not_change_the_collection(impl):
    data = collection(1453, n_entities=12)
    before = {key: np.array(value, copy=True) for key, value in data.items() if isinstance(value, np.ndarray)}
    checked_evaluation(impl, data, 2)
    changed = [key for key, value in before.items() if not np.array_equal(value, data[key])]
    expect(not changed, what="the collection after evaluate", expected="unchanged", observed=f"changed: {changed}",
           idea="evaluate reads the collection; normalise copies, not the caller's vectors")
