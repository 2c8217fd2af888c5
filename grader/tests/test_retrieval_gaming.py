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
from grader.tests.cheats import STUB_BODY, Cheat, golden_lookup, plant
from grader.tests.test_gaming import _passed, _run

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
    for file, run in _run(ROOT / "solutions", FILES).items():
        assert run.failed == [], f"the reference fails {file}: {run.failed}\n{run.output[-3000:]}"


@pytest.mark.parametrize("cheat", list(CHEATS.values()), ids=lambda c: c.name)
def test_a_cheat_scores_what_its_control_scores(cheat: Cheat, tmp_path):
    cheating = _run(plant(tmp_path / "cheat", cheat.code), cheat.test_files)
    control = _run(plant(tmp_path / "control", cheat.control), cheat.test_files)
    for file in cheat.test_files:
        gained = sorted(set(control[file].failed) - set(cheating[file].failed))
        assert _passed(cheating[file]) <= _passed(control[file]), (
            f"{cheat.name} passes {_passed(cheating[file])} tests of {file}, its control {_passed(control[file])}; "
            f"passed by the cheat only: {gained}")
