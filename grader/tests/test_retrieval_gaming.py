"""No score without the idea, exercise 14 (retrieval): each cheat scores what its control scores.

A cheat is the reference with a shortcut swapped in (``grader/tests/cheats.py`` has the pattern): a reader
given every chunk of the collection, answers peeked from the collection where the evidence was retrieved,
a retrieval that ignores ``k``, a reader that looks the fact up instead of attending, and a lookup of the
probes' golden values. Its control is the same submission with the shortcut's work left undone (the input
checks kept). Both run the exercise's public and hidden files; the cheat must pass no more tests than its
control, file by file, and the reference must pass them all.
"""

from __future__ import annotations

import pytest

from grader.curriculum import ROOT
from grader.tests.cheats import STUB_BODY, Cheat, assert_no_more_than_its_control, golden_lookup, plant, run_files

FILES = ("tests/test_14_retrieval.py", "grader/hidden_tests/test_hidden_14_retrieval.py")
UNDONE = "raise NotImplementedError('left out (the control)')"

# evaluate written out, with the line that builds the reader's facts ({context}), the one that answers
# ({answer}) and the retrieval ({retrieve}) swapped per cheat. The input check the tests look for is kept.
_EVALUATE = '''
def evaluate(collection, k, sharpness=10.0):
    needed = {{"vocab", "values", "facts", "chunks", "chunk_vectors", "questions", "question_vectors", "answers",
              "evidence"}}
    if not isinstance(collection, dict) or not needed <= set(collection):
        raise ValueError("collection must be a dict made like fact_collection's")
    similarity = cosine_similarity(collection["question_vectors"], collection["chunk_vectors"])
    {retrieve}
    evidence = np.asarray(collection["evidence"])
    hit = np.any(retrieved == evidence[:, None], axis=1)
    facts, chunks = np.asarray(collection["facts"]), np.asarray(collection["chunks"])
    {context}
    {answer}
    correct = answer == np.asarray(collection["answers"])
    return {{"retrieved": retrieved, "hit": hit, "answer": answer, "correct": correct,
            "recall": recall_at_k(retrieved, evidence), "accuracy": float(np.mean(correct)),
            "accuracy_retrieved": float(np.mean(correct[hit])) if hit.any() else float("nan"),
            "accuracy_missed": float(np.mean(correct[~hit])) if not hit.all() else float("nan"),
            "chance": 1.0 / len(collection["values"])}}
'''
RETRIEVE = "retrieved = top_k(similarity, k)"
CONTEXT = "context = facts[chunks[retrieved]].reshape(len(retrieved), -1, 3)"
ANSWER = "answer, _ = answer_with_attention(collection['questions'], context, len(collection['vocab']), sharpness)"


def _evaluate(retrieve: str = RETRIEVE, context: str = CONTEXT, answer: str = ANSWER) -> dict[str, str]:
    return {"retrieval": _EVALUATE.format(retrieve=retrieve, context=context, answer=answer)}


# The reader as a lookup: the value of the fact that names both words of the question (else of the first fact),
# all the weight on it. The reference's own checks run first, so the control keeps them.
_LOOKUP_READER = '''
_checked_reader = answer_with_attention


def answer_with_attention(question, facts, n_words, sharpness=10.0):
    _checked_reader(question, facts, n_words, sharpness)  # the input checks
    question, facts = np.asarray(question), np.asarray(facts)
    {body}
'''
LOOKUP = '''match = (facts[..., 0] == question[:, None, 0]) & (facts[..., 1] == question[:, None, 1])
    chosen = np.argmax(match, axis=1)
    weights = np.eye(facts.shape[1])[chosen]
    return facts[np.arange(len(facts)), chosen, 2].astype(np.int64), weights'''

FUNCTIONS = ("cosine_similarity", "top_k", "recall_at_k", "answer_with_attention", "evaluate")

CHEATS = {
    cheat.name: cheat for cheat in (
        Cheat("retrieval-reader-given-every-chunk", "retrieval",
              _evaluate(context="context = np.broadcast_to(facts, (len(retrieved), *facts.shape))"),
              _evaluate(context=UNDONE), FILES),
        Cheat("retrieval-answers-peeked-where-retrieved", "retrieval",
              _evaluate(answer="answer = np.where(hit, collection['answers'], collection['values'][0])"),
              _evaluate(answer=UNDONE), FILES),
        Cheat("retrieval-k-ignored", "retrieval",
              _evaluate(retrieve="retrieved = top_k(similarity, min(3, similarity.shape[1]))"),
              _evaluate(retrieve=UNDONE), FILES),
        Cheat("retrieval-reader-looks-the-fact-up", "retrieval",
              {"retrieval": _LOOKUP_READER.format(body=LOOKUP)},
              {"retrieval": _LOOKUP_READER.format(body=UNDONE)}, FILES),
        Cheat("retrieval-golden-lookup", "retrieval", golden_lookup("retrieval", FUNCTIONS),
              {"retrieval": "\n".join(f"def {name}(*args, **kwargs):\n{STUB_BODY}\n" for name in FUNCTIONS)},
              FILES),
    )
}


def test_the_reference_passes_both_files():
    for file, run in run_files(ROOT / "solutions", FILES).items():
        assert run.failed == [], f"the reference fails {file}: {run.failed}\n{run.output[-3000:]}"


@pytest.mark.parametrize("cheat", list(CHEATS.values()), ids=lambda c: c.name)
def test_a_cheat_scores_what_its_control_scores(cheat: Cheat, tmp_path):
    assert_no_more_than_its_control(cheat, tmp_path)


# An honest submission written another way than the reference: loops over the questions, its own softmax
# instead of exercise 3's function, a dict of weights per value, the facts gathered chunk by chunk. It must pass
# every test (the tolerances and the handling of equal weights hold for it, not only for the reference).
_HONEST = '''
def cosine_similarity(queries, chunks):
    queries, chunks = np.asarray(queries, dtype=float), np.asarray(chunks, dtype=float)
    if queries.ndim != 2 or chunks.ndim != 2 or queries.shape[1] != chunks.shape[1]:
        raise ValueError("queries and chunks must be (n, d) with the same d")
    for name, array in (("queries", queries), ("chunks", chunks)):
        if not np.all(np.any(array != 0, axis=1)):
            raise ValueError(f"{name} has a zero vector")
    out = np.empty((len(queries), len(chunks)))
    for i, q in enumerate(queries):
        for j, c in enumerate(chunks):
            out[i, j] = np.dot(q, c) / (np.sqrt(np.dot(q, q)) * np.sqrt(np.dot(c, c)))
    return out


def top_k(similarity, k):
    similarity = np.asarray(similarity, dtype=float)
    if not (isinstance(k, int) and 1 <= k <= similarity.shape[1]):
        raise ValueError(f"k must be from 1 to {similarity.shape[1]}")
    return np.array([sorted(range(len(row)), key=lambda j: (-row[j], j))[:k] for row in similarity])


def recall_at_k(retrieved, relevant):
    return sum(int(r in row) for row, r in zip(np.asarray(retrieved).tolist(), np.asarray(relevant).tolist())) \\
        / len(relevant)


def answer_with_attention(question, facts, n_words, sharpness=10.0):
    question, facts = np.asarray(question), np.asarray(facts)
    if facts.size and (facts.min() < 0 or facts.max() >= n_words):
        raise ValueError("facts has a word id outside the vocabulary")
    answers, all_weights = [], []
    for (entity, attribute), rows in zip(question.tolist(), facts.tolist()):
        scores = np.array([sharpness * ((e == entity) + (a == attribute)) for e, a, _ in rows], dtype=float)
        weights = np.exp(scores - scores.max())
        weights = weights / weights.sum()
        total = {}
        for (_, _, value), w in zip(rows, weights):
            total[value] = total.get(value, 0.0) + w
        best = max(total.values())
        answers.append(min(v for v, w in total.items() if w == best))
        all_weights.append(weights)
    return np.array(answers, dtype=np.int64), np.array(all_weights)


def evaluate(collection, k, sharpness=10.0):
    if not isinstance(collection, dict) or "question_vectors" not in collection:
        raise ValueError("collection must be made by fact_collection")
    retrieved = top_k(cosine_similarity(collection["question_vectors"], collection["chunk_vectors"]), k)
    hit = np.array([e in row for e, row in zip(collection["evidence"].tolist(), retrieved.tolist())])
    context = np.array([[collection["facts"][f] for c in row for f in collection["chunks"][c]] for row in retrieved])
    answer, _ = answer_with_attention(collection["questions"], context, len(collection["vocab"]), sharpness)
    correct = answer == collection["answers"]
    return {"retrieved": retrieved, "hit": hit, "answer": answer, "correct": correct,
            "recall": recall_at_k(retrieved, collection["evidence"]), "accuracy": correct.mean(),
            "accuracy_retrieved": correct[hit].mean() if hit.any() else np.nan,
            "accuracy_missed": correct[~hit].mean() if not hit.all() else np.nan,
            "chance": 1 / len(collection["values"])}
'''


def test_an_honest_submission_written_otherwise_passes_every_test(tmp_path):
    runs = run_files(plant(tmp_path / "honest", {"retrieval": _HONEST}), FILES)
    assert all(run.failed == [] for run in runs.values()), {file: run.failed for file, run in runs.items()}
