"""``attention-kit demo --explain`` on a stand-in for exercise 9's trained model.

The demo trains the model of exercise 9 (``training.py``, with the given ``_tasks.py``). To test the demo's
own part (the measures, their signs, the picture, the caption) apart from training, the stand-in below
follows the API of ``training.py`` with a model whose weights are fixed by hand: the pronoun attends by
position, mostly to position 1. Where the reference ``solutions/training.py`` exists it is used as well.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.curriculum import ROOT
from grader.student import demo, demo_explain

SOLUTIONS = ROOT / "solutions"

STAND_IN_TASKS = '''
import numpy as np

VOCAB = ("the", "it", "vessel", "obstacle", "changed", "course", "because", "detected", "drone")
READING_SENTENCE = ("the", "vessel", "changed", "course", "because", "it", "detected", "obstacle")


def antecedent_task(rng, n_examples):
    tokens = np.tile([VOCAB.index(w) for w in READING_SENTENCE], (n_examples, 1))
    return {"tokens": tokens, "query_position": np.full(n_examples, 5), "target": tokens[:, 1].copy(),
            "antecedent_position": np.full(n_examples, 1), "vocab": list(VOCAB)}
'''

STAND_IN_TRAINING = '''
import numpy as np

from .positional import sinusoidal_encoding

SCORES = np.array([0.0, 4.0, 0.5, 0.0, -1.0, 1.0, 0.2, 2.0])  # where the pronoun looks, by position


def train(rng, task, d_model=16, n_heads=1, steps=300, batch_size=32, lr=1e-2, positions=True):
    vocab = len(task["vocab"])
    embedding = rng.normal(scale=0.1, size=(vocab, d_model))
    embedding[:, :vocab] += 2.0 * np.eye(vocab)
    return {"embedding": embedding, "w_out": np.eye(d_model, vocab), "b_out": np.zeros(vocab)}, [2.0, 1.0, 0.5]


def _weights(seq):
    w = np.exp(SCORES[:seq] - SCORES[:seq].max())
    return np.broadcast_to(w / w.sum(), (seq, seq))


def model_forward(params, tokens, query_position, n_heads, positions=True):
    x = params["embedding"][tokens] + sinusoidal_encoding(tokens.shape[1], params["embedding"].shape[1])
    weights = _weights(tokens.shape[1])
    h = x + weights @ x
    read = h[np.arange(len(tokens)), query_position]
    return read @ params["w_out"] + params["b_out"], np.broadcast_to(weights, (len(tokens), 1) + weights.shape)


def model_gradients(params, tokens, query_position, target, n_heads, positions=True):
    logits, _ = model_forward(params, tokens, query_position, n_heads)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    n = len(tokens)
    loss = float(-np.mean(np.log(p[np.arange(n), target])))
    grad_logits = p.copy()
    grad_logits[np.arange(n), target] -= 1.0
    grad_logits /= n
    grad_read = grad_logits @ params["w_out"].T  # (n, d)
    weights = _weights(tokens.shape[1])
    grad_embedding = np.zeros_like(params["embedding"])
    for i in range(n):
        q = query_position[i]
        grad_x = weights[q][:, None] * grad_read[i][None, :]
        grad_x[q] += grad_read[i]  # the residual
        np.add.at(grad_embedding, tokens[i], grad_x)
    return loss, {"embedding": grad_embedding, "w_out": np.zeros_like(params["w_out"]),
                  "b_out": np.zeros_like(params["b_out"])}
'''


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stand-in")
    for path in SOLUTIONS.glob("*.py"):
        shutil.copy(path, folder)
    (folder / "_tasks.py").write_text(STAND_IN_TASKS, encoding="utf-8")
    (folder / "training.py").write_text(STAND_IN_TRAINING, encoding="utf-8")
    return folder


def test_explain_demo_measures_the_stand_in_model(stand_in, tmp_path):
    result = demo_explain.compute(stand_in, source="stand-in")
    assert result.words[5] == "it" and result.predicted == "vessel"
    assert int(np.argmax(result.attention)) == 1 and np.isclose(result.attention.sum(), 1.0)
    assert int(np.argmax(result.occlusion)) == 1 and result.occlusion[1] > 0.1
    # Gradient x input of log p(predicted), against central differences on the embedding rows.
    from tests.kit import LocalImplementation

    implementation = LocalImplementation(stand_in)
    training, tasks = implementation.module("training"), implementation.module("_tasks")
    params, _ = training.train(np.random.default_rng(demo_explain.SEED), tasks.antecedent_task(
        np.random.default_rng(demo_explain.SEED), demo_explain.N_EXAMPLES))
    tokens = np.array([list(tasks.VOCAB).index(w) for w in tasks.READING_SENTENCE])
    target = list(tasks.VOCAB).index("vessel")

    def log_p(embedding):
        logits, _ = training.model_forward({**params, "embedding": embedding}, tokens[None], np.array([5]), 1)
        return float(logits[0, target] - np.log(np.exp(logits[0]).sum()))

    gradient = np.zeros((len(tokens), params["embedding"].shape[1]))
    for j, token in enumerate(tokens):
        for f in range(gradient.shape[1]):
            step = np.zeros_like(params["embedding"])
            step[token, f] = 1e-6
            gradient[j, f] = (log_p(params["embedding"] + step) - log_p(params["embedding"] - step)) / 2e-6
    inputs = params["embedding"][tokens] + implementation.module("positional").sinusoidal_encoding(8, 16)
    np.testing.assert_allclose(result.gradient_x_input, np.sum(gradient * inputs, axis=-1), rtol=1e-5, atol=1e-8)
    assert set(result.correlations) == {"attention vs occlusion", "attention vs gradient x input",
                                        "occlusion vs gradient x input"}
    lines = demo_explain.summary_lines(result)
    assert lines[1] == f'at "it" the model predicts "vessel" (p = {result.probability:.3f})'
    assert next(line for line in lines if line.startswith("top token:")).startswith(
        "top token: attention 'vessel', occlusion 'vessel'")
    out = tmp_path / "explain.png"
    demo_explain.plot(result, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_hand_built_head_shows_attention_and_the_interventions_disagreeing(tmp_path):
    """Case B: most of the weight on "the", whose value is zero; the answer comes from "vessel"."""
    from tests.kit import LocalImplementation

    words = ("the", "vessel", "changed", "course", "because", "it", "detected", "obstacle")
    case = demo_explain.sink_case(LocalImplementation(SOLUTIONS).module("explain"), words)
    assert case.predicted == "vessel" and case.probability > 0.5
    assert words[int(np.argmax(case.attention))] == "the" and case.attention[0] > 0.5
    assert words[int(np.argmax(case.occlusion))] == "vessel" and case.occlusion[0] == 0.0  # "the" by "the"
    assert words[int(np.argmax(case.gradient_x_input))] == "vessel" and case.gradient_x_input[0] == 0.0
    # Gradient x input against central differences of log p(vessel) in the inputs (the value vectors), here.
    n = len(words)
    weights = np.exp(np.array(demo_explain.SINK_SCORES) - max(demo_explain.SINK_SCORES))
    weights /= weights.sum()
    values = np.eye(n) + 0.5 * np.random.default_rng(demo_explain.SINK_SEED).normal(size=(n, n))
    values[0], values[1] = 0.0, 0.0
    values[1, 1] = 40.0

    def log_p(x):
        logits = weights @ x
        return logits[1] - np.log(np.exp(logits).sum())

    gradient = np.zeros_like(values)
    for index in np.ndindex(values.shape):
        step = np.zeros_like(values)
        step[index] = 1e-6
        gradient[index] = (log_p(values + step) - log_p(values - step)) / 2e-6
    np.testing.assert_allclose(case.gradient_x_input, np.sum(gradient * values, axis=-1), rtol=1e-5, atol=1e-9)
    small = np.abs(case.gradient_x_input[2:])
    assert np.all(small > 1e-5) and np.all(small < 1e-2)  # the small credits the table must show
    assert case.correlations["attention vs occlusion"] < 0.5 < case.correlations["occlusion vs gradient x input"]
    result = demo_explain.ExplainResult(words, "vessel", 1.0, [2.0, 0.1], case.attention, case.occlusion,
                                        case.gradient_x_input, case.correlations, "test", case)
    lines = demo_explain.summary_lines(result)
    tops = [line for line in lines if line.startswith("top token:")]
    assert tops[-1] == "top token: attention 'the', occlusion 'vessel', gradient x input 'vessel'"
    changed = next(line for line in lines[lines.index(""):] if line.split()[:1] == ["changed"])
    assert f"{case.gradient_x_input[2]:.2e}" in changed  # 3 significant digits, not 0.000
    out = tmp_path / "explain.png"
    demo_explain.plot(result, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_explain_caption_cites_both_papers_and_says_what_agreement_means():
    caption = demo_explain.CAPTION
    assert "Jain and Wallace (2019)" in caption and "Wiegreffe and Pinter (2019)" in caption
    assert "agree" in caption and "change nothing when removed" in caption


def test_explain_demo_waits_for_the_exercises_it_needs(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    out = tmp_path / "explain.png"
    args = parser.parse_args(["--explain", "--impl", str(ROOT / "exercises"), "--out", str(out)])
    assert demo.run(args) == 1
    text = capsys.readouterr().out
    assert "Finish these first" in text and ("explain: 0/" in text or "has no exercise training" in text)
    assert not out.exists()


@pytest.mark.skipif(not (SOLUTIONS / "training.py").is_file(), reason="exercise 9 (training.py) not in this copy")
def test_explain_demo_on_the_reference(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    out = tmp_path / "explain.png"
    assert demo.run(parser.parse_args(["--explain", "--reference", "--out", str(out)])) == 0
    assert "rank correlation, attention vs occlusion" in capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
