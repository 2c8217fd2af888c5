"""``attention-kit demo --explain``: does a trained model's attention explain its answer at "it"? Measure it.

The model of exercise 9 is trained (your ``train``, on the given antecedent
task, seed 42) to predict, at the pronoun "it", the token of its antecedent.
For the reading's sentence "the vessel changed course because it detected
obstacle" the demo then shows, for "it", three answers to "which tokens
matter?", side by side:

* the attention weights of "it" (what a heatmap shows);
* occlusion importance (your ``occlusion_importance``): how much the
  probability of the predicted word falls when each token is replaced by
  "the";
* gradient x input (your ``gradient_x_input``): the gradient of the log
  probability of the predicted word with respect to each token's input
  vector (embedding plus position), times that vector;

with their rank correlations (your ``rank_correlation``). Beside it, the same
three measures (your code again) on a head built by hand for the same
sentence, where they disagree: "it" puts most of its weight on "the", whose
value vector is zero, so attention ranks first a token that changes nothing
when removed. The picture of both goes to ``attention-explain.png``.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.student.measured_demo import Measurement, run_measurement

SEED = 42
D_MODEL = 16
N_HEADS = 1
STEPS = 300
N_EXAMPLES = 512
REPLACEMENT = "the"
NOISE = 1e-3  # importances below this fraction of the largest one count as 0 (ties) in the rank correlations
DEFAULT_OUT = "attention-explain.png"
NEEDS = ("training", "explain")  # and what they build on
# The hand-built head of the second case: the score of each position of the reading's sentence for the
# query "it" (whatever the tokens), so "it" looks mostly at position 0, "the".
SINK_SCORES = (3.0, 1.0, -1.0, -1.5, -1.0, -0.5, -1.5, -1.0)
SINK_WORD, ANSWER_WORD = "the", "vessel"
SINK_SEED = 10  # the small components of the other tokens' value vectors
CAPTION = (
    "Attention weights say where \"it\" looked; occlusion and gradient x input say what the prediction "
    "depends on. Where they rank the tokens alike (rank correlation near 1), the weights happen to agree "
    "with what the model uses; where they do not, a heatmap of weights would mislead: a token can take "
    "much weight and change nothing when removed. Jain and Wallace (2019) found such disagreement common "
    "and argued that attention is not explanation; Wiegreffe and Pinter (2019) replied that it depends on "
    "the test. Importances below a thousandth of the largest count as 0 in the rank correlations (ties), so "
    "that tokens which do not matter are not ordered by rounding noise. Here you ran the test yourself, on one "
    "sentence and one trained model, and, below it, on a head built by hand whose most attended token carries "
    "nothing: there the weights point at \"the\" and the interventions at \"vessel\"."
)


@dataclass
class Case:
    """The three measures for the pronoun of one model, and their rank correlations."""

    title: str
    predicted: str
    probability: float
    attention: Any  # (seq,)
    occlusion: Any  # (seq,)
    gradient_x_input: Any  # (seq,)
    correlations: dict


@dataclass
class ExplainResult:
    """What the explain demo computed for the pronoun of the reading's sentence."""

    words: tuple[str, ...]
    predicted: str
    probability: float
    losses: list
    attention: Any  # (seq,): the pronoun's attention weights (averaged over heads)
    occlusion: Any  # (seq,)
    gradient_x_input: Any  # (seq,)
    correlations: dict  # "attention vs occlusion" -> rho, ...
    source: str
    sink: Case | None = None  # the hand-built head where the measures disagree

    def cases(self) -> list[Case]:
        """The trained model's case, then the hand-built one (if computed)."""
        trained = Case(f"your model of exercise 9, trained {len(self.losses)} steps"
                       if self.source == "your code" else f"the model of exercise 9, trained {len(self.losses)} "
                       f"steps ({self.source})", self.predicted, self.probability, self.attention, self.occlusion,
                       self.gradient_x_input, self.correlations)
        return [trained] + ([self.sink] if self.sink is not None else [])


PAIRS = (("attention", "occlusion"), ("attention", "gradient x input"), ("occlusion", "gradient x input"))


def rank_correlations(explain: Any, measures: dict) -> dict:
    """The student's rank correlation of each pair of measures, importances below the noise level tied at 0."""
    import numpy as np

    # Below a thousandth of a measure's largest magnitude an importance is rounding noise: count it as 0, so
    # the tokens that do not matter tie (and share their average rank) instead of being ordered by noise.
    ranked = {name: np.where(np.abs(x) < NOISE * np.abs(x).max(), 0.0, x) for name, x in measures.items()}
    return {f"{a} vs {b}": float(explain.rank_correlation(ranked[a], ranked[b])) for a, b in PAIRS}


def sink_case(explain: Any, words: tuple[str, ...]) -> Case:
    """The three measures, with the student's ``explain`` module, on a head whose most attended token is empty.

    The model, written out: "it" attends by position, ``weights = softmax(SINK_SCORES)`` (0.80 on
    "the"); each word has a value vector, zero for "the", a large component toward its own class for
    "vessel", small ones for the others; ``logits = sum_j weights[j] * value[token_j]``, one class per
    word. So "vessel" decides the answer with about a ninth of the weight, and "the", with most of it,
    changes nothing when it is replaced (by "the": occlusion exactly 0) and gets gradient x input 0.
    """
    import numpy as np

    n = len(words)
    scores = np.asarray(SINK_SCORES[:n], dtype=np.float64)
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    rng = np.random.default_rng(SINK_SEED)
    values = np.eye(n) + 0.5 * rng.normal(size=(n, n))  # row w: the value vector of word w (classes = words)
    values[words.index(SINK_WORD)] = 0.0
    values[words.index(ANSWER_WORD)] = 0.0
    values[words.index(ANSWER_WORD), words.index(ANSWER_WORD)] = 40.0
    tokens = np.arange(n)  # word j of the sentence is token j

    def probabilities(batch: np.ndarray) -> np.ndarray:
        logits = np.einsum("j,bjd->bd", weights, values[np.asarray(batch)])
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    p = probabilities(tokens[None])[0]
    c = int(np.argmax(p))
    # d log p_c / d x_j = weights[j] * (onehot(c) - p): the input x_j of token j is its value vector.
    gradient = weights[:, None] * (np.eye(n)[c] - p)[None, :]
    measures = {"attention": weights,
                "occlusion": np.asarray(explain.occlusion_importance(probabilities, tokens, words.index(SINK_WORD))),
                "gradient x input": np.asarray(explain.gradient_x_input(gradient, values[tokens]))}
    return Case(f"a head built by hand: \"{SINK_WORD}\" takes most of the weight and carries nothing (its value "
                "vector is zero)", words[c], float(p[c]), measures["attention"], measures["occlusion"],
                measures["gradient x input"], rank_correlations(explain, measures))

def compute(impl: Path, *, source: str = "your code", steps: int = STEPS) -> ExplainResult:
    """Train the model of exercise 9 with the code in ``impl`` and explain its answer for "it".

    Parameters
    ----------
    impl : pathlib.Path
        The folder holding the modules (``training.py``, ``explain.py``, the given ``_tasks.py`` and
        what they import).
    source : str, optional
        Whose code this is, for the title.
    steps : int, optional
        Training steps.

    Returns
    -------
    ExplainResult
        The three importance measures and their rank correlations.
    """
    import numpy as np

    from tests.kit import LocalImplementation

    implementation = LocalImplementation(impl)
    tasks, training = implementation.module("_tasks"), implementation.module("training")
    explain, positional = implementation.module("explain"), implementation.module("positional")
    rng = np.random.default_rng(SEED)
    task = tasks.antecedent_task(rng, N_EXAMPLES)
    params, losses = training.train(rng, task, d_model=D_MODEL, n_heads=N_HEADS, steps=steps)
    vocab = list(task["vocab"])
    words = tuple(tasks.READING_SENTENCE)
    tokens = np.array([vocab.index(word) for word in words])
    pronoun = words.index("it")

    def predict(batch: np.ndarray) -> np.ndarray:
        batch = np.asarray(batch)
        logits, _ = training.model_forward(params, batch, np.full(len(batch), pronoun), N_HEADS)
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return shifted / shifted.sum(axis=-1, keepdims=True)

    probabilities = predict(tokens[None])[0]
    predicted = int(np.argmax(probabilities))
    _, weights = training.model_forward(params, tokens[None], np.array([pronoun]), N_HEADS)
    attention = np.asarray(weights)[0, :, pronoun, :].mean(axis=0)  # (seq,): the pronoun's row, heads averaged
    occlusion = np.asarray(explain.occlusion_importance(predict, tokens, vocab.index(REPLACEMENT)))
    # The tokens of the sentence are all different, so the gradient with respect to a token's embedding row is
    # the gradient with respect to its input vector. Loss = -log p(predicted): the gradient of log p is minus it.
    _, grads = training.model_gradients(params, tokens[None], np.array([pronoun]), np.array([predicted]), N_HEADS)
    inputs = params["embedding"][tokens] + positional.sinusoidal_encoding(len(tokens), D_MODEL)
    gxi = np.asarray(explain.gradient_x_input(-grads["embedding"][tokens], inputs))
    measures = {"attention": attention, "occlusion": occlusion, "gradient x input": gxi}
    return ExplainResult(words, vocab[predicted], float(probabilities[predicted]), list(losses), attention,
                         occlusion, gxi, rank_correlations(explain, measures), source, sink_case(explain, words))


def _case_lines(case: Case, words: tuple[str, ...]) -> list[str]:
    """One case's table: attention and occlusion to 3 decimals, gradient x input in 3 significant digits."""
    lines = [f"{'token':>10} {'attention':>10} {'occlusion':>10} {'grad x input':>13}"]
    for j, word in enumerate(words):
        lines.append(f"{word:>10} {case.attention[j]:>10.3f} {case.occlusion[j]:>10.3f} "
                     f"{case.gradient_x_input[j]:>13.2e}")
    lines += [f"rank correlation, {pair}: {rho:+.2f}" for pair, rho in case.correlations.items()]
    lines.append("top token: " + ", ".join(
        f"{name} {words[int(values.argmax())]!r}" for name, values in
        (("attention", case.attention), ("occlusion", case.occlusion), ("gradient x input", case.gradient_x_input))))
    return lines


def summary_lines(result: ExplainResult) -> list[str]:
    """The numbers behind the picture, one token per line: the trained model, then the hand-built head."""
    lines = [f"trained {len(result.losses)} steps: loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}",
             f"at \"it\" the model predicts \"{result.predicted}\" (p = {result.probability:.3f})"]
    cases = result.cases()
    lines += _case_lines(cases[0], result.words)
    for case in cases[1:]:
        lines += ["", f"{case.title}:", f"at \"it\" it predicts \"{case.predicted}\" (p = {case.probability:.3f})"]
        lines += _case_lines(case, result.words)
    return lines


def plot(result: ExplainResult, out: Path) -> None:
    """Three bar panels, one per measure, the tokens along the x axis; save a PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cases = result.cases()
    figure = plt.figure(figsize=(14, 5.2 * len(cases) + 0.8), layout="constrained")
    rows = figure.subfigures(len(cases), 1, squeeze=False)[:, 0]
    positions = np.arange(len(result.words))
    for row, (case, sub) in enumerate(zip(cases, rows, strict=True)):
        axes = sub.subplots(1, 3)
        panels = (("attention weight of \"it\"", case.attention, "#3b6ea5"),
                  (f"occlusion: fall in p(\"{case.predicted}\")\nwhen the token becomes \"{REPLACEMENT}\"",
                   case.occlusion, "#c8553d"),
                  (f"gradient x input of log p(\"{case.predicted}\")", case.gradient_x_input, "#588157"))
        for ax, (label, values, colour) in zip(axes, panels, strict=True):
            bars = ax.bar(positions, values, color=colour)
            if values is case.gradient_x_input:  # its small credits are invisible as bars: write them out
                ax.bar_label(bars, labels=[f"{value:.1e}" for value in values], fontsize=7, padding=2)
                ax.margins(y=0.15)
            ax.axhline(0.0, color="black", linewidth=0.8)
            ax.set_xticks(positions, result.words, rotation=45, ha="right", rotation_mode="anchor")
            ax.set_title(label, fontsize=10)
            ax.get_xticklabels()[result.words.index("it")].set_fontweight("bold")
        rhos = ", ".join(f"{pair}: {rho:+.2f}" for pair, rho in case.correlations.items())
        tops = ", ".join(f"{name} \"{result.words[int(np.argmax(values))]}\"" for name, values in
                         (("attention", case.attention), ("occlusion", case.occlusion),
                          ("gradient x input", case.gradient_x_input)))
        sub.suptitle(f"{'AB'[row] if row < 2 else row + 1}. {case.title}: predicts \"{case.predicted}\" "
                     f"(p = {case.probability:.2f})\nSpearman rank correlation: {rhos}\ntop token: {tops}",
                     fontsize=10.5, x=0.01, ha="left")
    figure.suptitle(f"Which tokens matter for the answer at \"it\"? {result.source}", fontsize=12)
    figure.supxlabel(textwrap.fill(CAPTION, width=190), fontsize=8.5, style="italic", ha="left", x=0.01)
    figure.savefig(out, dpi=110)
    plt.close(figure)


MEASUREMENT = Measurement(
    command="demo --explain", needs=NEEDS,
    uses="trains your model of exercise 9 and examines it with your exercise 10",
    compute=lambda impl, source: compute(impl, source=source), summary_lines=summary_lines, plot=plot,
    default_out=DEFAULT_OUT, caption=CAPTION)


def run(args: argparse.Namespace) -> int:
    """``attention-kit demo --explain``."""
    return run_measurement(args, MEASUREMENT)
