"""Exercise 14: retrieval is not attention. Cosine similarity, top-k, recall, the reader, then the measurement.

Expected values come from this file: hand computations, its own cosine, sort
and attention head, and its own run of the whole pipeline on collections it
draws (never your evaluate's numbers). The measurement is checked on your
evaluate only after its retrieved chunks and answers equal that pipeline's.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

from tests import moves, unseen
from tests.conventions import CONVENTION
from tests.crash import raising_through
from tests.effort import once
from tests.feedback import (
    call_or_explain,
    expect,
    expect_close,
    expect_differs,
    expect_dtype,
    expect_equal,
    expect_raises_value_error,
    expect_shape,
)
from tests.kinds import remembered
from tests.probes import expect_probe, probe
from tests.relations import meaning
from tests.steps import Stage, pipeline

ROOT = Path(__file__).resolve().parent.parent
READ = "docs/reading.md#retrieval"

COSINE = ("cosine similarity: divide every query and every chunk by its own length (the norm of its row), then one "
          "matrix product compares every pair: (q / |q|) @ (c / |c|)^T, shape (n_queries, n_chunks)")
LENGTH = "the cosine keeps only a vector's direction: a row multiplied by a positive number gives the same scores"
TOPK = ("top-k: order each row by decreasing similarity and keep the first k indices, best first; equal scores "
        "keep the order of their index (a stable sort of the negated scores)")
RECALL = "recall at k: the share of questions whose evidence chunk is anywhere among their k retrieved chunks"
HEAD = ("the reader: query = onehot(entity) + onehot(attribute) times sharpness * sqrt(n_words), each fact's key "
        "the same for its entity and attribute, its value onehot(value), through scaled_dot_product_attention: the "
        "weights are softmax(sharpness * shared words)")
ANSWER = ("the answer is the word with the most weight in the context (the weighted sum of the values): several "
          "facts with one value add up, so it is not always the value of the single most weighted fact")
PIPELINE = ("evaluate: cosine_similarity(question_vectors, chunk_vectors), top_k, then the facts of the retrieved "
            "chunks only, facts[chunks[retrieved]] (k * facts_per_chunk per question), read by "
            f"answer_with_attention, and every figure from those answers ({READ})")
MISSING = ("attention can weigh only what is in its context: where the evidence chunk was not retrieved no fact "
           "there holds the answer, and the values are drawn independently, so any reader is right one time in "
           f"n_values ({READ})")
CHECKS = "bad input raises ValueError, and the message names the offending argument"

# A collection no public file of the kit draws: sizes that all differ from the given defaults and each other.
SIZES = {"n_entities": 80, "n_attributes": 3, "n_values": 6, "facts_per_chunk": 3, "d": 48, "noise": 0.08,
         "questions_per_fact": 2}
COLLECTION_SEED = 14014


@functools.cache
def facts_module():
    """The given fact module (_facts.py), loaded from the kit (the reference's copy when there is one)."""
    for folder in ("solutions", "exercises"):
        path = ROOT / folder / "_facts.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(f"_attention_kit_facts_{folder}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError("_facts.py is missing from the kit (solutions/ and exercises/)")


def collection(seed: int = COLLECTION_SEED, **sizes) -> dict:
    """A fresh collection (new arrays every call: a function that changes its input cannot spoil the next test)."""
    return facts_module().fact_collection(np.random.default_rng(seed), **(SIZES | sizes))


# ---------------------------------------------------------------- the tests' own pipeline

def own_cosine(queries, chunks) -> np.ndarray:
    queries, chunks = np.asarray(queries, dtype=np.float64), np.asarray(chunks, dtype=np.float64)
    dots = np.einsum("id,jd->ij", queries, chunks)
    return dots / np.sqrt((queries**2).sum(1))[:, None] / np.sqrt((chunks**2).sum(1))[None, :]


def own_top_k(similarity, k: int) -> np.ndarray:
    """The k most similar chunks of each row, most similar first, ties to the lower index (a stable sort)."""
    return np.argsort(-np.asarray(similarity), axis=1, kind="stable")[:, :k]


def own_weights(question, facts, sharpness: float) -> np.ndarray:
    """softmax(sharpness * the number of words each fact shares with its question), (n_q, n_facts)."""
    shared = (facts[..., 0] == question[:, None, 0]).astype(float) + (facts[..., 1] == question[:, None, 1])
    scores = sharpness * shared
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def own_context(question, facts, n_words: int, sharpness: float) -> np.ndarray:
    """The weight of every word in the context, (n_q, n_words)."""
    weights = own_weights(question, facts, sharpness)
    context = np.zeros((len(question), n_words))
    for i in range(len(question)):
        np.add.at(context[i], facts[i, :, 2], weights[i])
    return context


def acceptable(answer, context, atol: float = 1e-9) -> np.ndarray:
    """Per question, whether the answer is a word with the largest weight (on equal weights any of them)."""
    answer = np.asanyarray(answer)
    if answer.shape != context.shape[:1] or not np.issubdtype(answer.dtype, np.integer) or (
            answer.size and (answer.min() < 0 or answer.max() >= context.shape[1])):
        return np.zeros(len(context), dtype=bool)
    return context[np.arange(len(context)), answer] >= context.max(axis=1) - atol


@remembered  # the test's own computation on seeded inputs: once per process, kept between a student's runs
def own_pipeline(data: dict, k: int) -> dict:
    retrieved = own_top_k(own_cosine(data["question_vectors"], data["chunk_vectors"]), k)
    hit = (retrieved == data["evidence"][:, None]).any(axis=1)
    facts = data["facts"][data["chunks"][retrieved]].reshape(len(retrieved), -1, 3)
    return {"retrieved": retrieved, "hit": hit, "facts": facts, "recall": float(hit.mean())}


def _head_case(seed: int, n_q: int = 5, n_facts: int = 7, n_entities: int = 4, n_attributes: int = 3,
               n_values: int = 4):
    """Questions and facts in one vocabulary (entities, attributes, values), many partial matches."""
    rng = np.random.default_rng(seed)
    n_words = n_entities + n_attributes + n_values
    question = np.stack([rng.integers(0, n_entities, n_q), n_entities + rng.integers(0, n_attributes, n_q)], 1)
    facts = np.stack([rng.integers(0, n_entities, (n_q, n_facts)),
                      n_entities + rng.integers(0, n_attributes, (n_q, n_facts)),
                      n_entities + n_attributes + rng.integers(0, n_values, (n_q, n_facts))], axis=-1)
    facts[:, 0, :2] = question  # every question's fact is there, first
    return question.astype(np.int64), facts.astype(np.int64), n_words


# ---------------------------------------------------------------- probes (reference values, for the diagnosis)

@probe("cosine_similarity")
def mixed_lengths():
    rng = np.random.default_rng(1401)
    return (rng.normal(size=(4, 6)) * np.array([[0.1], [1.0], [7.0], [30.0]]), rng.normal(size=(5, 6)) * 3.0), {}


@probe("cosine_similarity", rejects="chunks")
def a_zero_chunk():
    return (np.ones((2, 3)), np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])), {}


@probe("top_k")
def with_ties():
    scores = np.array([[0.5, 0.9, 0.5, 0.9, 0.1, 0.3], [0.2, 0.2, 0.2, 0.8, -1.0, 0.2], [1, 2, 3, 4, 5, 6.0]])
    return (scores, 4), {}


@probe("recall_at_k")
def three_hits_of_five():
    return (np.array([[0, 4, 2], [1, 3, 5], [2, 0, 1], [5, 4, 3], [3, 1, 0]]), np.array([2, 0, 1, 3, 2])), {}


@probe("answer_with_attention")
def a_soft_reader():
    question, facts, n_words = _head_case(1402)
    return (question, facts, n_words), {"sharpness": 0.8}


@probe("evaluate")
def small_collection():
    return (collection(1403, n_entities=6, questions_per_fact=1), 2), {}


@probe("evaluate")
def every_chunk_read_softly():
    # k = n_chunks: no evidence is missed (accuracy_missed is NaN), and a soft reader answers otherwise than a sharp
    # one: the steps after the ranking show here.
    data = collection(1405, n_entities=5, questions_per_fact=1)
    return (data, len(data["chunks"])), {"sharpness": 0.5}


@probe("top_k")
def long_rows_of_ties():
    # Rows longer than 16 with many equal scores: numpy's default (unstable) sort no longer keeps them in order.
    scores = np.round(np.random.default_rng(1406).uniform(size=(3, 40)) * 3) / 3
    return (scores, 12), {}


@probe("top_k")
def long_rows_without_ties():
    # No ties, long rows: the k best in order, best first. np.argpartition alone finds the k best but leaves them
    # unordered at this length (at 6 or 29 chunks numpy happens to sort them).
    return (np.random.default_rng(1408).normal(size=(2, 400)), 200), {}


@probe("recall_at_k")
def a_chunk_retrieved_twice():
    return (np.array([[2, 2, 0], [1, 3, 1], [4, 0, 1]]), np.array([2, 1, 3])), {}


# What top_k's indices mean: the scores they pick, in order. Indices that pick the right scores in the right order
# but are not the right indices differ only in how ties were broken (tests/relations.py).
meaning("top_k", lambda args, kwargs, indices: np.take_along_axis(np.asarray(args[0], dtype=float),
                                                                  np.asarray(indices, dtype=np.int64), axis=1))

# The steps of evaluate, for the diagnosis of a mistake no catalogue entry explains (tests/steps.py): the first
# output that differs, in the order evaluate computes them, names the step to revisit.
pipeline("answer_with_attention", ("answer", "weights"),
         Stage("weights", "the weights", "the weights: query onehot(entity) + onehot(attribute) times sharpness * "
               "sqrt(n_words) (attention divides by sqrt(d_k) once), keys the same for each fact, so the weights are "
               "softmax(sharpness * shared words) over the question's own facts"),
         Stage("answer", "the answer", "the answer is the word with the most weight in the context (the weighted sum "
               "of the values: facts with one value add up), the lower id on equal weights"))
pipeline("evaluate", ("accuracy", "accuracy_missed", "accuracy_retrieved", "answer", "chance", "correct", "hit",
                      "recall", "retrieved"),
         Stage("retrieved", "the ranking", "the ranking: cosine_similarity(question_vectors, chunk_vectors) (the "
               "cosine, not the raw dot product), then top_k with the k evaluate is given, best first"),
         Stage("hit", "the hits", "hit: whether each question's evidence chunk is among its k retrieved chunks"),
         Stage("recall", "the recall", "recall: recall_at_k(retrieved, evidence), the share of questions whose "
               "evidence was retrieved"),
         Stage("answer", "the reading", "the reading: answer_with_attention over the facts of the retrieved chunks "
               "only, facts[chunks[retrieved]] (k * facts_per_chunk per question), with the sharpness evaluate is "
               "given"),
         Stage("correct", "the grading of the answers", "correct: answer == collection['answers'], per question"),
         Stage("accuracy", "the accuracy", "accuracy: the mean of correct over every question"),
         Stage("accuracy_retrieved", "the accuracy where the evidence was retrieved", "accuracy_retrieved: the "
               "mean of correct over the questions whose evidence was retrieved, NaN when there are none"),
         Stage("accuracy_missed", "the accuracy where the evidence was missed", "accuracy_missed: the mean of "
               "correct over the questions whose evidence was not retrieved, NaN when there are none (a mean of "
               "nothing, not 0)"),
         Stage("chance", "chance", "chance: 1 / n_values, the number of value words a guess picks among"))


# ---------------------------------------------------------------- cosine_similarity

def test_cosine_similarity_shape(impl):
    rng = np.random.default_rng(1410)
    out = call_or_explain(impl.cosine_similarity, rng.normal(size=(5, 7)), rng.normal(size=(3, 7)),
                          what="cosine_similarity of 5 queries and 3 chunks of length 7", idea=COSINE)
    if expect_shape(out, (5, 3), what="cosine_similarity(queries (5, 7), chunks (3, 7))", idea=COSINE):
        expect_dtype(out, np.float64, what="cosine_similarity of float64 vectors", idea=COSINE)


def test_cosine_similarity_values(impl):
    queries = np.array([[3.0, 4.0, 0.0], [1.0, 0.0, 0.0], [-2.0, 1.0, 2.0]])
    chunks = np.array([[4.0, 3.0, 0.0], [0.0, 0.0, 5.0], [-1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    expected = np.array([[[q @ c / np.sqrt(q @ q) / np.sqrt(c @ c) for c in chunks] for q in queries]])[0]
    out = impl.cosine_similarity(queries, chunks)
    # Off by about 1e-12 only: a small term (an eps added to each length, a habit), not the formula (a blind round
    # was told the formula it had).
    tiny = np.shape(out) == expected.shape and np.allclose(out, expected, rtol=1e-9, atol=1e-9)
    expect_close(out, expected, rtol=1e-12, atol=1e-12,
                 what="cosine_similarity of [3, 4, 0], [1, 0, 0], [-2, 1, 2] with four chunks (e.g. [3, 4, 0] "
                      "with [4, 3, 0]: 24 / 25 = 0.96)",
                 idea=("your values are off by about 1e-12: a small term (an eps added to each length?); the lengths "
                       "are exact, and a zero vector is refused (ValueError), never softened; " if tiny else "")
                 + COSINE)


def test_cosine_similarity_ignores_length(impl):
    rng = np.random.default_rng(1411)
    queries, chunks = rng.normal(size=(4, 9)), rng.normal(size=(6, 9))
    base = impl.cosine_similarity(queries, chunks)
    longer = impl.cosine_similarity(queries * np.array([[0.01], [3.0], [50.0], [1.0]]),
                                    chunks * np.arange(1, 7)[:, None] ** 2)
    expect_close(longer, base, rtol=1e-10, atol=1e-12,
                 what="cosine_similarity with every row multiplied by a different positive number", idea=LENGTH)
    expect_close(impl.cosine_similarity(chunks, 7.0 * chunks).diagonal(), np.ones(6), rtol=1e-12,
                 what="the cosine of each chunk with itself made 7 times longer", idea=LENGTH)
    # Length ignored, direction kept: a constant (every cosine 1) ignores the length too.
    expect_close(impl.cosine_similarity(chunks, -7.0 * chunks).diagonal(), -np.ones(6), rtol=1e-12,
                 what="the cosine of each chunk with itself made 7 times longer and turned around (times -7)",
                 idea=LENGTH)


def test_cosine_similarity_rejects_a_zero_vector(impl):
    expect_probe(impl, "cosine_similarity/a_zero_chunk", what="cosine_similarity with a chunk that is all zeros",
                 idea=CHECKS + ": a zero vector has no direction, so its cosine is undefined (sentence-transformers' "
                                "cos_sim and torch's F.normalize clamp its norm to eps and give 0: a convention, not a "
                                "misconception; this kit's contract raises ValueError naming the argument)")
    expect_raises_value_error(lambda: impl.cosine_similarity(np.zeros((1, 3)), np.ones((2, 3))), argument="queries",
                              what="cosine_similarity with a query that is all zeros", idea=CHECKS)


def test_cosine_similarity_reference_values(impl):
    expect_probe(impl, "cosine_similarity/mixed_lengths", what="cosine_similarity on the fixed input "
                 "cosine_similarity/mixed_lengths", idea=COSINE, rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(1412)  # and on vectors that are no probe's
    queries, chunks = rng.normal(size=(3, 4)) * 5.0, rng.normal(size=(7, 4))
    expect_close(impl.cosine_similarity(queries, chunks), own_cosine(queries, chunks), rtol=1e-10, atol=1e-12,
                 what="cosine_similarity of 3 queries and 7 chunks of length 4", idea=COSINE)


# ---------------------------------------------------------------- top_k

def test_top_k_shape_and_dtype(impl):
    similarity = np.random.default_rng(1420).normal(size=(4, 9))
    for k in (3, 5):
        out = call_or_explain(impl.top_k, similarity, k, what=f"top_k of a (4, 9) similarity with k = {k}", idea=TOPK)
        if expect_shape(out, (4, k), what=f"top_k(similarity (4, 9), k={k})",
                        idea=TOPK + "; one row per query, k columns"):
            expect_dtype(out, np.int64, what="the dtype of top_k's result (chunk indices)",
                         idea=TOPK + (_scores_not_indices(similarity, k, out) or "; indices are int64 (what "
                                      "argsort gives on a 64-bit machine; .astype(np.int64))"))


def _scores_not_indices(similarity: np.ndarray, k: int, out) -> str:
    """What to say when ``out`` holds each row's k largest scores themselves (np.sort, not np.argsort); else ""."""
    out = np.asarray(out)
    largest = np.sort(similarity, axis=1)[:, ::-1][:, :k]
    if out.dtype.kind != "f" or out.shape != largest.shape or not np.allclose(np.sort(out, axis=1),
                                                                              np.sort(largest, axis=1)):
        return ""
    return ("; yours holds the k largest similarity scores themselves, not the indices of their chunks: "
            "np.argsort gives the indices (int64), np.sort the scores; casting the scores to int does not help")


def test_top_k_best_first(impl):
    similarity = np.random.default_rng(1421).normal(size=(6, 11))
    for k in (1, 4, 11):
        out = np.asarray(impl.top_k(similarity, k))
        expect_equal(out, own_top_k(similarity, k), what=f"top_k of a (6, 11) similarity with k = {k}",
                     idea=TOPK + _skipped_best(similarity, k, out))
    expect_probe(impl, "top_k/long_rows_without_ties", what="top_k(k=200) of 2 rows of 400 scores, no two equal",
                 idea=TOPK + "; the k best in order, best first (np.argpartition finds them but does not sort them)")


def _skipped_best(scores: np.ndarray, k: int, out: np.ndarray) -> str:
    """Said when ``out`` holds ranks 2..k+1 of each row, the best left out (a blind round: told TOPK alone)."""
    skipped = own_top_k(scores, scores.shape[1])[:, 1 : k + 1]
    if k < scores.shape[1] and out.shape == skipped.shape and np.array_equal(out, skipped):
        return ("; yours leaves out the best chunk of every row and keeps ranks 2..k+1 (order[:, 1:k + 1], as a "
                "nearest-neighbour search that drops the query itself); the question is not one of the chunks, so "
                "rank 1 is kept: order[:, :k]")
    return ""


def _reversed_ascending(scores: np.ndarray, k: int, out: np.ndarray) -> str:
    """The convention of an ascending sort reversed (argsort()[::-1]), when ``out`` is that; else ""."""
    for kind in ("stable", None):  # numpy's default sort too, as rank_bm25's get_top_n calls it
        reversed_order = np.argsort(scores, axis=1, kind=kind)[:, ::-1][:, :k]
        if out.shape == reversed_order.shape and np.array_equal(out, reversed_order):
            return ("; yours is an ascending sort reversed (argsort()[::-1], as rank_bm25's get_top_n), which puts "
                    "equal scores in the reverse of the sort's order, a higher index first: a convention, not a "
                    "misconception; this kit's contract is the lower index first, np.argsort(-scores, kind='stable')")
    return ""


def test_top_k_keeps_ties_in_index_order(impl):
    similarity = np.array([[0.5, 0.9, 0.5, 0.9, 0.1], [0.3, 0.3, 0.3, 0.3, 0.3]])
    out = np.asarray(impl.top_k(similarity, 3))
    expect_equal(out, np.array([[1, 3, 0], [0, 1, 2]]),
                 what="top_k(k=3) of [[0.5, 0.9, 0.5, 0.9, 0.1], [0.3, 0.3, 0.3, 0.3, 0.3]]",
                 idea=TOPK + (_reversed_ascending(similarity, 3, out) or "; the lower index first among equal scores"))
    # Many ties in long rows: numpy's default sort (quicksort, not stable) reorders equal scores at this size, so
    # only a sort that keeps ties in index order (kind="stable", or any other rule that orders them by index) passes.
    crowded = np.random.default_rng(1423).integers(0, 3, size=(4, 29)) / 4  # 3 distinct scores in 29 chunks
    for k in (10, 29):
        out = np.asarray(impl.top_k(crowded, k))
        expect_equal(out, own_top_k(crowded, k), idea=TOPK + (_reversed_ascending(crowded, k, out) or (
                         "; np.argsort(..., kind='stable') of the scores themselves keeps that order (numpy's "
                         "default argsort is not stable, and np.argpartition scrambles tied indices before any later "
                         "sort sees them)")),
                     what=f"top_k(k={k}) of 4 rows of 29 scores that take only the values 0, 0.25 and 0.5 (ties "
                          "everywhere)")


def test_top_k_rejects_a_bad_k(impl):
    similarity = np.zeros((2, 5))
    for k in (0, 6):
        idea = CHECKS + ": k is from 1 to n_chunks"
        if k == 6:
            try:  # (faiss pads with -1 where k is larger than the index: a convention, said where it is one)
                with raising_through():  # a raise is what the check below wants, not a crash
                    padded = np.asarray(impl.top_k(similarity, k))
            except Exception:  # noqa: BLE001
                padded = None
            if padded is not None and padded.shape == (2, 6) and np.all(padded[:, 5:] == -1):
                idea += ("; -1 for the missing neighbours is faiss' convention (its search pads with -1 where k is "
                         f"larger than the index): {CONVENTION}; this kit's contract raises ValueError, as "
                         "np.argpartition and torch.topk do")
        expect_raises_value_error(lambda k=k: impl.top_k(similarity, k), argument="k",
                                  what=f"top_k of 5 chunks with k = {k}", idea=idea)


def test_top_k_reference_values(impl):
    expect_probe(impl, "top_k/with_ties", what="top_k on the fixed input top_k/with_ties (ties)", idea=TOPK)
    similarity = np.round(np.random.default_rng(1422).normal(size=(5, 7)), 1)  # no probe's, with ties
    expect_equal(np.asarray(impl.top_k(similarity, 4)), own_top_k(similarity, 4),
                 what="top_k(k=4) of a (5, 7) similarity rounded to one decimal (ties)", idea=TOPK)


# ---------------------------------------------------------------- recall_at_k

def test_recall_at_k_counts_the_hits(impl):
    retrieved = np.array([[0, 1], [2, 3], [4, 0], [1, 2]])
    relevant = np.array([1, 0, 0, 3])
    expect_close(impl.recall_at_k(retrieved, relevant), 0.5, rtol=1e-12,
                 what="recall_at_k of [[0, 1], [2, 3], [4, 0], [1, 2]] for the evidence [1, 0, 0, 3] (hits in rows "
                      "0 and 2: 2 of 4)", idea=RECALL)
    # k = 1, a single column: a recall that squeezes it away (or asks np.isin of the whole array) compares each
    # evidence with every question's chunk, and only evaluate at k = 1 failed, its message on evaluate's pipeline.
    expect_close(impl.recall_at_k(np.array([[3], [0], [2]]), np.array([3, 2, 0])), 1 / 3, rtol=1e-12,
                 what="recall_at_k at k = 1 of [[3], [0], [2]] for the evidence [3, 2, 0] (a hit in row 0 only: 1 "
                      "of 3; the chunks 2 and 0 are retrieved, but for other questions)",
                 idea=RECALL + "; each question's evidence against its own row only, also when that row holds one "
                               "chunk (k = 1): retrieved == relevant[:, None], keeping the shape (n_questions, k) "
                               "(a squeeze, or np.isin over the whole array, compares it with every question's chunks)")
    rng = np.random.default_rng(1430)
    retrieved = np.argsort(rng.random((50, 12)), axis=1)[:, :5]
    relevant = rng.integers(0, 12, size=50)
    expected = np.mean([relevant[i] in retrieved[i] for i in range(50)])
    expect_close(impl.recall_at_k(retrieved, relevant), expected, rtol=1e-12,
                 what="recall_at_k of 50 random rows of 5 chunks out of 12", idea=RECALL)
    expect_probe(impl, "recall_at_k/three_hits_of_five", what="recall_at_k on the fixed input "
                 "recall_at_k/three_hits_of_five", idea=RECALL, rtol=1e-12)
    # One question of three hit: 1/3, to every digit (a figure rounded for a report is no longer the measure).
    got = impl.recall_at_k(np.array([[0, 1], [2, 3], [4, 5]]), np.array([1, 0, 0]))
    rounded = isinstance(got, (float, np.floating)) and any(float(got) == round(1 / 3, n) for n in range(2, 9))
    expect_close(got, 1 / 3, rtol=1e-12, what="recall_at_k of [[0, 1], [2, 3], [4, 5]] for the evidence [1, 0, 0] "
                 "(one question of three)", idea=RECALL + ("; yours is rounded, as BEIR rounds the figures it reports "
                                                           "(and trec_eval prints 4 decimals): a convention of a "
                                                           "report, not of the measure; this kit's recall is the "
                                                           "exact fraction"
                                                           if rounded else ""))
    # A chunk listed twice in a row is still one hit for that question: recall counts questions, never retrievals.
    retrieved = np.array([[2, 2, 5], [1, 3, 1], [4, 0, 4], [6, 6, 6], [0, 5, 3]])
    relevant = np.array([2, 1, 3, 6, 4])
    expect_close(impl.recall_at_k(retrieved, relevant), 3 / 5, rtol=1e-12,
                 what="recall_at_k of [[2, 2, 5], [1, 3, 1], [4, 0, 4], [6, 6, 6], [0, 5, 3]] for the evidence "
                      "[2, 1, 3, 6, 4] (the evidence listed twice or three times in rows 0, 1, 3: 3 of 5 questions)",
                 idea=RECALL + "; a question is hit or not (np.any over its row): an evidence retrieved twice counts "
                               "once, and recall never exceeds 1")


# ---------------------------------------------------------------- answer_with_attention

def test_answer_with_attention_shapes_and_default_sharpness(impl):
    question, facts, n_words = _head_case(1440)
    result = call_or_explain(impl.answer_with_attention, question, facts, n_words,
                             what="answer_with_attention of 5 questions over 7 facts each, 11 words", idea=HEAD)
    if expect(isinstance(result, tuple) and len(result) == 2, what="answer_with_attention's result",
              expected="a tuple (answer, weights)", observed=type(result).__name__, idea=HEAD):
        answer, weights = result
        if expect_shape(answer, (5,), what="answer", idea=HEAD + "; one word id per question"):
            expect(np.issubdtype(answer.dtype, np.integer), what="the dtype of answer",
                   expected="integers (word ids)", observed=str(answer.dtype), idea=HEAD)
        if expect_shape(weights, (5, 7), what="weights", idea=HEAD + "; one weight per fact for each question"):
            if expect_close(weights.sum(axis=1), np.ones(5), what="the sum of each question's weights", idea=HEAD):
                expect_close(weights, own_weights(question, facts, 10.0), rtol=1e-9, atol=1e-12,
                             what="the weights with the default sharpness 10 (every fact gets a weight, most of "
                                  "them tiny): e^(10 * shared words) over their sum", idea=HEAD)


def test_answer_with_attention_weights(impl):
    question, facts, n_words = _head_case(1441)
    for sharpness in (0.7, 10.0):
        _, weights = impl.answer_with_attention(question, facts, n_words, sharpness=sharpness)
        expect_close(weights, own_weights(question, facts, sharpness), rtol=1e-9, atol=1e-12,
                     what=f"the weights with sharpness={sharpness} (scores 2, 1 or 0 shared words times sharpness)",
                     idea=HEAD)
    # Sharpness 0 is allowed (only a negative one is refused): every score 0, the weights uniform.
    result = call_or_explain(impl.answer_with_attention, question, facts, n_words, sharpness=0.0, idea=HEAD,
                             what=f"answer_with_attention with sharpness=0.0 ({facts.shape[1]} facts per question)")
    if isinstance(result, tuple) and len(result) == 2:
        expect_close(result[1], np.full(facts.shape[:2], 1 / facts.shape[1]), rtol=1e-12, idea=HEAD,
                     what="the weights with sharpness=0.0: every score 0, so every fact the same weight")
    # One vocabulary: a fact's value may be a word that other facts are about (a capital that is itself an
    # entity). The key holds the fact's entity and attribute only: what a fact says is no word it matches on.
    question = np.array([[0, 4], [2, 5]])
    facts = np.array([[[0, 4, 9], [1, 5, 0], [3, 6, 4], [1, 6, 8]],
                      [[2, 5, 7], [0, 4, 2], [1, 6, 5], [3, 4, 2]]])
    _, weights = impl.answer_with_attention(question, facts, 10, sharpness=1.5)
    expect_close(weights, own_weights(question, facts, 1.5), rtol=1e-9, atol=1e-12,
                 what="the weights when some facts' values are the question's own entity or attribute (fact 1 of "
                      "question 0 says 0, fact 2 says 4)",
                 idea=HEAD + "; the key is onehot(entity) + onehot(attribute): the value word is what the fact "
                             "says, never what it is matched on")


def test_answer_with_attention_sums_the_weight_of_each_value(impl):
    # Question (entity 0, attribute 4): fact 0 is the one asked about (value 9); four facts share one word and
    # all have value 7. A soft reader gives value 7 the most weight (4 e^s > e^2s for s = 0.6), a sharp one 9.
    question = np.array([[0, 4]])
    facts = np.array([[[0, 4, 9], [0, 5, 7], [1, 4, 7], [2, 4, 7], [0, 6, 7], [3, 5, 8]]])
    for sharpness, expected in ((0.6, 7), (10.0, 9)):
        answer, _ = impl.answer_with_attention(question, facts, 10, sharpness=sharpness)
        expect_equal(np.asarray(answer), np.array([expected]),
                     what=f"the answer with sharpness={sharpness}: the asked fact says 9, four facts sharing one word "
                          "say 7", idea=ANSWER)
    # Exact ties: each question's two facts share one word with it (the entity, or the attribute), so the two
    # values get the very same weight; the answer is then the lower id, whichever fact comes first.
    question = np.array([[0, 1], [0, 1], [2, 3]])
    facts = np.array([[[0, 2, 5], [3, 1, 4]], [[0, 2, 4], [3, 1, 5]], [[2, 0, 9], [1, 3, 6]]])
    for sharpness in (0.6, 10.0):
        answer, _ = impl.answer_with_attention(question, facts, 10, sharpness=sharpness)
        expect_equal(np.asarray(answer), np.array([4, 4, 6]),
                     what=f"the answers with sharpness={sharpness} when both facts of a question share one word with "
                          "it (values 5 and 4, 4 and 5, 9 and 6: equal weights)",
                     idea=ANSWER + "; on equal weights the lower id (np.argmax gives the first of equal maxima)")
    question, facts, n_words = _head_case(1442, n_q=40, n_facts=9)
    answer, _ = impl.answer_with_attention(question, facts, n_words, sharpness=0.8)
    good = acceptable(answer, own_context(question, facts, n_words, 0.8))
    expect(good.all(), what="the answers of 40 questions with sharpness 0.8 (many partial matches)",
           expected="in every row a word with the largest total weight", observed=f"{np.sum(~good)} rows not",
           idea=ANSWER)


def test_answer_with_attention_reads_only_its_own_facts(impl):
    question, facts, n_words = _head_case(1443, n_q=6)
    answer, weights = impl.answer_with_attention(question, facts, n_words, sharpness=2.0)
    if not expect_close(weights, own_weights(question, facts, 2.0), rtol=1e-9, atol=1e-12,
                        what="the weights with sharpness 2", idea=HEAD):
        return
    other = facts.copy()
    other[1:] = facts[1:][::-1]  # the other questions' facts, shuffled between them
    other[1:, :, 2] = n_words - 1  # ... and every value changed
    answer_0, weights_0 = impl.answer_with_attention(question[:1], facts[:1], n_words, sharpness=2.0)
    expect_equal(np.asarray(answer_0), np.asarray(answer)[:1],
                 what="the first question's answer alone and within the batch", idea=HEAD + "; row i reads facts[i]")
    expect_close(weights_0, np.asarray(weights)[:1], what="the first question's weights alone and within the batch",
                 idea=HEAD)
    answer_1, weights_1 = impl.answer_with_attention(question, other, n_words, sharpness=2.0)
    expect(np.asarray(answer_1)[0] == np.asarray(answer)[0] and np.allclose(np.asarray(weights_1)[0], weights[0]),
           what="the first question's answer and weights when the other questions' facts are shuffled and their "
                "values changed", expected="unchanged", observed="changed", idea=HEAD + "; row i reads facts[i] only")
    order = np.random.default_rng(1444).permutation(facts.shape[1])
    _, shuffled = impl.answer_with_attention(question, facts[:, order], n_words, sharpness=2.0)
    expect_close(shuffled, np.asarray(weights)[:, order], what="the weights when the facts are listed in another "
                 "order", idea="attention has no notion of order: the same facts in another order get the same "
                 "weights, moved with them")
    # The contrast: the answers read the values (answers that ignore them are the same alone, within the batch and
    # beside other facts). Every value moved to the next value word (the last to the first) moves the answers.
    words = facts[..., 2].min(), n_words
    moved = facts.copy()
    moved[..., 2] = words[0] + (facts[..., 2] - words[0] + 1) % (words[1] - words[0])
    expect_differs(np.asarray(impl.answer_with_attention(question, moved, n_words, sharpness=2.0)[0]),
                   np.asarray(answer), what="the answers when every fact's value is the next value word",
                   expected="other answers: each answer is the value the weights favour, so it moves with the values",
                   passed="each question's answer reads its own facts only", idea=HEAD)


def test_answer_with_attention_rejects_bad_ids(impl):
    question, facts, n_words = _head_case(1445)
    expect_raises_value_error(lambda: impl.answer_with_attention(question, facts, n_words - 1), argument="facts",
                              what=f"answer_with_attention with a value id {n_words - 1} and n_words = {n_words - 1}",
                              idea=CHECKS)


def test_answer_with_attention_reference_values(impl):
    expect_probe(impl, "answer_with_attention/a_soft_reader", what="answer_with_attention on the fixed input "
                 "answer_with_attention/a_soft_reader", idea=HEAD, rtol=1e-9, atol=1e-12)
    question, facts, n_words = _head_case(1446, n_q=4, n_facts=6)  # and on facts that are no probe's
    answer, weights = impl.answer_with_attention(question, facts, n_words, sharpness=1.3)
    expect_close(weights, own_weights(question, facts, 1.3), rtol=1e-9, atol=1e-12, what="the weights of 4 "
                 "questions over 6 facts with sharpness 1.3", idea=HEAD)
    expect(acceptable(answer, own_context(question, facts, n_words, 1.3)).all(), what="their answers",
           expected="a word with the most weight in every row", observed=str(np.asarray(answer)), idea=ANSWER)


# ---------------------------------------------------------------- evaluate: the pipeline, then the measurement

KEYS = ("retrieved", "hit", "answer", "correct", "recall", "accuracy", "accuracy_retrieved", "accuracy_missed",
        "chance")


def _blame(impl, data: dict, k: int, sharpness: float) -> str:
    """Which of the student's own functions differs from this file's on the inputs evaluate used."""
    similarity = own_cosine(data["question_vectors"], data["chunk_vectors"])
    if not np.allclose(impl.cosine_similarity(data["question_vectors"], data["chunk_vectors"]), similarity):
        return "your cosine_similarity differs from the test's on these vectors: fix it first (its own tests)"
    if not np.array_equal(np.asarray(impl.top_k(similarity, k)), own_top_k(similarity, k)):
        return "your top_k differs from the test's on these scores: fix it first (its own tests)"
    mine = own_pipeline(data, k)
    n_words = len(data["vocab"])
    answer, _ = impl.answer_with_attention(data["questions"], mine["facts"], n_words, sharpness)
    if not acceptable(answer, own_context(data["questions"], mine["facts"], len(data["vocab"]), sharpness)).all():
        return "your answer_with_attention differs from the test's reader on these facts: fix it first (its own tests)"
    result = impl.evaluate(data, k, sharpness=sharpness)
    every = np.broadcast_to(data["facts"], (len(data["questions"]), *data["facts"].shape))
    if isinstance(result, dict) and acceptable(result.get("answer"), own_context(data["questions"], every, n_words,
                                                                                 sharpness)).mean() > 0.95:
        return ("your answers are those of a reader of every fact of the collection: give it the facts of the "
                "retrieved chunks only")
    return "your own functions agree with the test's: the mistake is in evaluate, between them"


def _reads_with_its_sharpness(impl) -> str:
    """'' when evaluate's answers follow its sharpness, else the step that first differs (asked once per session).

    On collection() at k = 5, a reader of sharpness 0.5 answers about a third of the questions otherwise than one
    of sharpness 10. Answers that differ because the retrieved chunks already do are blamed on the ranking, not
    on the sharpness.
    """
    def run() -> str:
        data = collection()
        try:
            soft = impl.evaluate(data, 5, sharpness=0.5)
        except Exception:  # noqa: BLE001 - the test's own call of evaluate says what went wrong
            return ""
        mine = own_pipeline(data, 5)
        own = own_context(data["questions"], mine["facts"], len(data["vocab"]), 0.5)
        if bool(acceptable(soft.get("answer") if isinstance(soft, dict) else None, own).all()):
            return ""
        retrieved = np.asarray(soft.get("retrieved") if isinstance(soft, dict) else None)
        if retrieved.shape != mine["retrieved"].shape or not np.array_equal(retrieved, mine["retrieved"]):
            return ("; the first step that differs is the ranking: your retrieved chunks are not the test's (top_k "
                    "of the cosine similarity, k given), so the reader reads other facts")
        return "; read with the sharpness evaluate is given"

    return once(impl, "evaluate", "sharpness", run)


def checked_evaluation(impl, data: dict, k: int, sharpness: float = 10.0) -> dict | None:
    """Run the student's evaluate and compare it with this file's pipeline; the result, or None if it differs."""
    soft = _reads_with_its_sharpness(impl)
    if not expect(not soft, what="first, evaluate(collection(), 5, sharpness=0.5): its answers against this file's "
                  "soft reader", expected="the same answers (a third of them differ from a sharp reader's)",
                  observed="other answers", idea=PIPELINE + soft):
        return None
    label = (f"evaluate(collection, k={k}, sharpness={sharpness}) on a collection drawn by the test (a seed and "
             "sizes of its own)")
    result = call_or_explain(impl.evaluate, data, k, sharpness=sharpness, what=label, idea=PIPELINE)
    if not expect(isinstance(result, dict) and set(KEYS) <= set(result), what=f"the keys of {label}",
                  expected=str(list(KEYS)), observed=str(sorted(result)) if isinstance(result, dict)
                  else type(result).__name__, idea=PIPELINE):
        return None
    mine = own_pipeline(data, k)
    n_q, n_words = len(data["questions"]), len(data["vocab"])
    context = own_context(data["questions"], mine["facts"], n_words, sharpness)
    answer = np.asarray(result["answer"])
    right = acceptable(answer, context)
    same_retrieved = np.array_equal(np.asarray(result["retrieved"]), mine["retrieved"])
    blame = "" if same_retrieved and right.all() else "; " + _blame(impl, data, k, sharpness)
    good = [expect_equal(np.asarray(result["retrieved"]), mine["retrieved"], what=f"retrieved, {label}",
                         idea=PIPELINE + blame),
            expect_equal(np.asarray(result["hit"]).astype(bool), mine["hit"],
                         what=f"hit (the evidence among the retrieved chunks), {label}", idea=RECALL),
            expect(answer.shape == (n_q,) and right.all(), what=f"the answers, {label}",
                   expected="for every question a word with the most weight when the reader reads the facts of "
                            "its retrieved chunks only", observed=f"{np.sum(~right)} of {n_q} answers not",
                   idea=PIPELINE + blame)]
    if not all(good):
        return None
    correct = answer == data["answers"]
    hit = mine["hit"]
    figures = {"recall": hit.mean(), "accuracy": correct.mean(),
               "accuracy_retrieved": correct[hit].mean() if hit.any() else np.nan,
               "accuracy_missed": correct[~hit].mean() if not hit.all() else np.nan,
               "chance": 1 / len(data["values"])}
    good = [expect_equal(np.asarray(result["correct"]).astype(bool), correct, what=f"correct, {label}",
                         idea=PIPELINE + "; correct is answer == collection['answers']")]
    for key, value in figures.items():
        good.append(expect_close(np.asarray(result[key], dtype=float), value, rtol=1e-12, what=f"{key}, {label}",
                                 idea=PIPELINE + ("; chance is 1 / n_values, the number of value words" if key ==
                                                  "chance" else "; the mean of correct over the questions with "
                                                  "(without) their evidence, NaN when there are none (a mean of no "
                                                  "question, not 0)" if key.startswith("accuracy_") else "")))
    return result if all(good) else None


def test_evaluate_is_the_pipeline(impl):
    data = collection()
    if checked_evaluation(impl, data, 2) is not None and checked_evaluation(impl, data, 5) is not None:
        # A soft reader (sharpness 0.5) answers about a third of these questions otherwise than a sharp one:
        # evaluate must read with the sharpness it is given.
        checked_evaluation(impl, data, 5, sharpness=0.5)


def test_evaluate_follows_k(impl):
    data = collection(COLLECTION_SEED + 1)
    recalls = []
    for k in (1, 3, 7):
        result = checked_evaluation(impl, data, k)
        if result is None:
            return
        recalls.append(float(result["recall"]))
    expect(recalls[0] < recalls[1] < recalls[2], what="recall at k = 1, 3, 7", expected="increasing with k",
           observed=str(np.round(recalls, 3)), idea=PIPELINE + "; retrieve k chunks, the k given")


def test_retrieved_evidence_is_answered(impl):
    data = collection(COLLECTION_SEED + 2)
    for k in (3, 6):
        result = checked_evaluation(impl, data, k)
        if result is None:
            return
        expect(result["accuracy_retrieved"] >= 0.97, what=f"accuracy where the evidence was retrieved (k = {k}, "
               "sharpness 10)", expected="at least 0.97", observed=f"{result['accuracy_retrieved']:.3f}",
               idea="a sharp reader puts nearly all its weight on the fact that shares both words with the question")
    # The evidence moved, by the test, to each question's least similar chunk: at k = 1 no question retrieves it,
    # so accuracy_retrieved averages nothing.
    moved = collection(COLLECTION_SEED + 6, n_entities=13, questions_per_fact=1)
    moved["evidence"] = own_cosine(moved["question_vectors"], moved["chunk_vectors"]).argmin(axis=1)
    result = checked_evaluation(impl, moved, 1)
    if result is not None:
        expect(bool(np.isnan(result["accuracy_retrieved"])), what="accuracy_retrieved at k = 1 on a collection "
               "whose evidence the test moved to each question's least similar chunk (no evidence retrieved)",
               expected="nan", observed=repr(result["accuracy_retrieved"]), idea="accuracy_retrieved is the mean "
               "of correct over the questions with their evidence: with none it is NaN, a mean of nothing, not 0")


def test_missing_evidence_is_answered_at_chance(impl):
    data = collection(COLLECTION_SEED + 3)
    chance = 1 / len(data["values"])
    for k, sharpness in ((1, 1.0), (1, 10.0), (1, 100.0), (2, 10.0)):
        result = checked_evaluation(impl, data, k, sharpness)
        if result is None:
            return
        missed = int(np.sum(~np.asarray(result["hit"], dtype=bool)))
        expect(abs(result["accuracy_missed"] - chance) <= 0.08,
               what=f"accuracy where the evidence was not retrieved ({missed} questions, k = {k}, sharpness "
                    f"{sharpness})", expected=f"chance, 1 / {len(data['values'])} = {chance:.3f} (within 0.08)",
               observed=f"{result['accuracy_missed']:.3f}", idea=MISSING + "; a sharper reader does not help")
    # k = n_chunks retrieves every chunk: no question misses its evidence, so accuracy_missed averages nothing.
    small = collection(COLLECTION_SEED + 5, n_entities=11, questions_per_fact=1)
    result = checked_evaluation(impl, small, len(small["chunks"]))
    if result is not None:
        expect(bool(np.isnan(result["accuracy_missed"])), what=f"accuracy_missed when k = n_chunks = "
               f"{len(small['chunks'])} retrieves every evidence (no question missed)", expected="nan",
               observed=repr(result["accuracy_missed"]), idea="accuracy_missed is the mean of correct over the "
               "questions without their evidence: with none it is NaN, a mean of nothing, not 0 (0 would say "
               "every such question was answered wrong)")


def test_accuracy_follows_recall(impl):
    data = collection(COLLECTION_SEED + 4)
    chance, points = 1 / len(data["values"]), []
    for k in (1, 2, 4, 8):
        result = checked_evaluation(impl, data, k)
        if result is None:
            return
        points.append((k, float(result["recall"]), float(result["accuracy"])))
    gaps = [abs(accuracy - (chance + (1 - chance) * recall)) for _, recall, accuracy in points]
    expect(max(gaps) <= 0.06, what="accuracy against chance + (1 - chance) * recall, at k = 1, 2, 4, 8",
           expected="within 0.06 at every k",
           observed="; ".join(f"k={k}: recall {r:.3f}, accuracy {a:.3f}" for k, r, a in points),
           idea="accuracy = recall * (about 1) + (1 - recall) * chance: " + MISSING)


def test_evaluate_reference_values(impl):
    expect_probe(impl, "evaluate/small_collection", what="evaluate on the fixed input evaluate/small_collection",
                 idea=PIPELINE, rtol=1e-12, atol=1e-12)
    checked_evaluation(impl, collection(1404, n_entities=9, questions_per_fact=1), 3)  # and on one no probe's


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_similarity(rng: np.random.Generator) -> np.ndarray:
    return rng.normal(size=unseen.sizes(rng, (3, 7), (5, 10)))  # continuous: no ties


def _unseen_recall(rng: np.random.Generator) -> tuple[tuple, dict]:
    similarity = _unseen_similarity(rng)
    retrieved = own_top_k(similarity, unseen.sizes(rng, (1, similarity.shape[1]), avoid=(len(similarity),))[0])
    return (retrieved, rng.integers(0, similarity.shape[1], size=len(similarity))), {}


def _unseen_head(rng: np.random.Generator) -> tuple[tuple, dict]:
    question, facts, n_words = _head_case(int(rng.integers(2**31)))
    return (question, facts, n_words), {"sharpness": float(rng.uniform(0.5, 12.0))}


def _moved_reading(call: tuple[tuple, dict], factor: float) -> tuple[tuple[tuple, dict], bool]:
    """answer_with_attention's call moved within its docstring: questions, facts and word ids in other orders.

    The words are one-hot, so renaming every id (one permutation of ``range(n_words)``), putting the questions (with
    their facts) and each question's facts in another order, answer the same reading, renamed and reordered; the
    sharpness is scaled too (:func:`tests.moves.scaled_numbers`).
    """
    args, kwargs = call
    if len(args) != 3:
        return call, False
    question, facts, n_words = args
    if not (isinstance(question, np.ndarray) and isinstance(facts, np.ndarray) and question.ndim == 2
            and facts.ndim == 3 and len(question) == len(facts) and isinstance(n_words, (int, np.integer))
            and n_words >= 2 and question.dtype.kind in "iu" and facts.dtype.kind in "iu"):
        return call, False
    words, rows, slots = (moves.order(factor, int(n_words), 4), moves.order(factor, len(question), 5),
                          moves.order(factor, facts.shape[1], 6))
    if question.size and (question.min() < 0 or question.max() >= n_words or facts.min() < 0
                          or facts.max() >= n_words):
        return call, False  # bad input: as it is
    moved = (words[question[rows]].astype(question.dtype), words[facts[rows][:, slots]].astype(facts.dtype),
             n_words)
    return (moved, moves.scaled_numbers(kwargs, factor)[0]), True


_moved_reading.how = "the word ids renamed, the questions and their facts in other orders, the sharpness times {:.4f}"


def _same_reading(observed, expected) -> bool:
    """answer_with_attention's (answer, weights): an answer of the most weight, and the weights to 1e-9."""
    context, weights = expected
    return (isinstance(observed, tuple) and len(observed) == 2 and bool(acceptable(observed[0], context).all())
            and unseen.close(observed[1], weights))


def _unseen_evaluation(rng: np.random.Generator) -> tuple[tuple, dict]:
    # (the vocabulary, n_entities + n_attributes + n_values words, never as long as a vector)
    n_entities, = unseen.sizes(rng, (20, 40), avoid=(SIZES["d"] - SIZES["n_attributes"] - SIZES["n_values"],))
    return (collection(int(rng.integers(2**31)), n_entities=n_entities), int(rng.integers(1, 6))), {}


def _own_evaluation(data: dict, k: int, sharpness: float = 10.0) -> tuple[dict, np.ndarray]:
    mine = own_pipeline.__wrapped__(data, k)  # not remembered: each submission's draw is its own
    return mine, own_context(data["questions"], mine["facts"], len(data["vocab"]), sharpness)


def _same_evaluation(observed, expected) -> bool:
    """Evaluate's retrieved and hit exactly, and an answer of the most weight for every question."""
    mine, context = expected
    return (isinstance(observed, dict) and {"retrieved", "hit", "answer"} <= set(observed)
            and unseen.equal(np.asarray(observed["retrieved"]), mine["retrieved"])
            and unseen.equal(np.asarray(observed["hit"]).astype(bool), mine["hit"])
            and bool(acceptable(np.asarray(observed["answer"]), context).all()))


def _unseen_cosine(rng: np.random.Generator) -> tuple[tuple, dict]:
    n_a, n_b = unseen.sizes(rng, (2, 6), (3, 8), avoid=(5,))
    return (rng.normal(size=(n_a, 5)), rng.normal(size=(n_b, 5))), {}


def _unseen_top_k(rng: np.random.Generator) -> tuple[tuple, dict]:
    similarity = _unseen_similarity(rng)
    return (similarity, int(rng.integers(1, similarity.shape[1] + 1))), {}


def _own_recall(retrieved: np.ndarray, relevant: np.ndarray) -> float:
    return float((retrieved == relevant[:, None]).any(axis=1).mean())


def _own_reading(question, facts, n_words, sharpness) -> tuple[np.ndarray, np.ndarray]:
    return own_context(question, facts, n_words, sharpness), own_weights(question, facts, sharpness)


unseen.register("retrieval", {
    "cosine_similarity": unseen.Twin(_unseen_cosine, own_cosine, COSINE, unseen.close),
    "top_k": unseen.Twin(_unseen_top_k, own_top_k, TOPK),
    "recall_at_k": unseen.Twin(_unseen_recall, _own_recall, RECALL, unseen.close),
    "answer_with_attention": unseen.Twin(_unseen_head, _own_reading, HEAD + "; " + ANSWER, _same_reading,
                                         _moved_reading),
    "evaluate": unseen.Twin(_unseen_evaluation, _own_evaluation, PIPELINE, _same_evaluation),
})
