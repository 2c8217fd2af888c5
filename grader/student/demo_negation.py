"""``attention-kit demo --measure negation``: whose "not" is it? A bag of words against one attention layer.

With your code of exercise 12 (and exercise 9's ``train``), on the given
negation task (seed 42: 192 pairs and 192 controls to train on, 64 held-out
pairs and 32 controls): your ``compare`` trains the bag-of-words model and
the attention model, and exercise 9's ``train`` trains the same attention
layer without positions too. The demo prints the three accuracies on the
held-out pairs (a bag of words cannot pass one half), then draws the trained
attention model's weights on the reading's pair, "the payment was not
approved and the refund was indeed rejected" and "the payment was indeed
approved and the refund was not rejected", asked about the payment: the row
of "approved" puts its weight on the slot right before it, "not" in one
sentence and "indeed" in the other. The picture goes to
``attention-negation.png``.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.student.measured_demo import Measurement, run_measurement

SEED = 42
N_PAIRS, N_TEST_PAIRS = 192, 64
DEFAULT_OUT = "attention-negation.png"
NEEDS = ("training", "negation")  # and what they build on
NAMES = {"pooled": "bag of words (mean + ReLU layer)", "bag_attention": "attention, no positions",
         "attention": "attention with positions"}
CAPTION = (
    "The two sentences are made of the same words and ask the same question at the same verb, yet their answers "
    "differ. A bag of words (the mean of the embeddings, even with a nonlinear layer on top) gives both the same "
    "input, so the same answer: one of the two right at most, 0.5 on pairs whatever it learns. Without positional "
    "encodings an attention layer is a bag too. With them, the asked verb's query picks out the key of the slot "
    "right before it: its row (framed) puts its weight on its own \"not\" in one sentence and on the adverb in the "
    "other, where the \"not\" belongs to the refund. Only the verbs' rows are read out, so the other rows were "
    "never trained to mean anything. Such a weight is a measurement of this small model on this task, not of "
    "what language models do."
)


@dataclass
class NegationResult:
    """What the negation demo computed."""

    accuracy: dict  # name -> accuracy on the held-out pairs
    both_right: dict  # name -> fraction of pairs with both members right
    own: float  # the asked verb's mean weight on its own slot (held-out pairs)
    other: float  # ... on the other event's slot
    words: list  # the reading pair's two sentences, as lists of words
    weights: Any  # (2, seq, seq): the attention model's weights on them (heads averaged)
    query: int  # the asked verb's position
    own_slot: int
    other_slot: int
    answers: list  # the model's answer for each sentence of the pair
    targets: list
    source: str


def compute(impl: Path, *, source: str = "your code") -> NegationResult:
    """Train the models with the code in ``impl`` and measure them (see the module docstring)."""
    import numpy as np

    from tests.kit import LocalImplementation

    implementation = LocalImplementation(impl)
    tasks, negation = implementation.module("_negation_task"), implementation.module("negation")
    training = implementation.module("training")
    rng = np.random.default_rng(SEED)
    train_set = tasks.negation_task(rng, N_PAIRS, n_controls=N_PAIRS)
    test_set = tasks.negation_task(rng, N_TEST_PAIRS, n_controls=N_TEST_PAIRS // 2)
    record = negation.compare(rng, train_set, test_set)
    blind, _ = training.train(rng, train_set, steps=400, lr=2e-2, positions=False)
    blind_logits, _ = training.model_forward(blind, test_set["tokens"], test_set["query_position"], 1,
                                             positions=False)
    blind_scores = negation.pair_accuracy(np.argmax(blind_logits, axis=-1), test_set["target"], test_set["pair"])
    accuracy = {"pooled": record["accuracy"]["pooled"], "bag_attention": blind_scores[0],
                "attention": record["accuracy"]["attention"]}
    both = {"pooled": record["both_right"]["pooled"], "bag_attention": blind_scores[1],
            "attention": record["both_right"]["attention"]}
    pair = tasks.reading_pair()
    logits, weights = training.model_forward(record["models"]["attention"], pair["tokens"], pair["query_position"], 1)
    vocab = list(pair["vocab"])
    return NegationResult(accuracy, both, float(record["own"]), float(record["other"]),
                          [[vocab[t] for t in row] for row in pair["tokens"]], np.asarray(weights).mean(axis=1),
                          int(pair["query_position"][0]), int(pair["own_slot"][0]), int(pair["other_slot"][0]),
                          [vocab[int(i)] for i in np.argmax(logits, axis=-1)],
                          [vocab[int(i)] for i in pair["target"]], source)


def summary_lines(result: NegationResult) -> list[str]:
    """The numbers behind the picture."""
    lines = [f"held-out pairs (same words, opposite answers), {N_TEST_PAIRS} pairs:"]
    for name in ("pooled", "bag_attention", "attention"):
        lines.append(f"  {NAMES[name]:<34} accuracy {result.accuracy[name]:.3f}, both members right in "
                     f"{result.both_right[name]:.3f} of the pairs")
    lines.append(f"the asked verb's attention: {result.own:.3f} on its own slot, {result.other:.3f} on the other "
                 "event's (held-out pairs)")
    verb = result.words[0][result.query]
    for words, weights, answer, target in zip(result.words, result.weights, result.answers, result.targets,
                                              strict=True):
        lines.append(f"\"{' '.join(w for w in words if w != '.')}\": was the {words[result.query - 3]} {verb}? "
                     f"model: {answer} (right: {target}); row of \"{verb}\": "
                     f"{weights[result.query, result.own_slot]:.2f} on \"{words[result.own_slot]}\" (own slot), "
                     f"{weights[result.query, result.other_slot]:.2f} on \"{words[result.other_slot]}\"")
    return lines


def plot(result: NegationResult, out: Path) -> None:
    """Two heatmaps (the pair's sentences) and a bar chart of the accuracies on pairs; save a PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    figure = plt.figure(figsize=(16, 7.4), layout="constrained")
    axes = figure.subplots(1, 3, width_ratios=[1, 1, 0.62])
    verb = result.words[0][result.query]
    for ax, words, weights, answer, target in zip(axes[:2], result.words, result.weights, result.answers,
                                                  result.targets, strict=True):
        image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
        seq = len(words)
        ax.set_xticks(range(seq), words, rotation=60, ha="right", rotation_mode="anchor", fontsize=9)
        ax.set_yticks(range(seq), words, fontsize=9)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query")
        ax.add_patch(Rectangle((-0.5, result.query - 0.5), seq, 1, fill=False, edgecolor="#ff4d4d", linewidth=2.2))
        for slot in (result.own_slot, result.other_slot):
            value = weights[result.query, slot]
            ax.text(slot, result.query, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.5 else "white", fontweight="bold")
        for label in (ax.get_xticklabels()[result.own_slot], ax.get_yticklabels()[result.query]):
            label.set_fontweight("bold")
        sentence = " ".join(w for w in words if w != ".")
        ax.set_title(textwrap.fill(f"\"{sentence}\"", 48) + f"\nwas the {words[result.query - 3]} {verb}? "
                     f"model: {answer} (right: {target})", fontsize=10)
    figure.colorbar(image, ax=list(axes[:2]), shrink=0.6, label="attention weight")
    names = ("pooled", "bag_attention", "attention")
    values = [result.accuracy[name] for name in names]
    bars = axes[2].bar(range(3), values, color=["#8d99ae", "#8d99ae", "#2a9d8f"])
    axes[2].bar_label(bars, labels=[f"{v:.2f}" for v in values], padding=2)
    axes[2].axhline(0.5, color="#c8553d", linestyle="--", linewidth=1.2)
    axes[2].text(-0.4, 0.6, "0.5: the bound of any\nbag of words", ha="left", va="bottom", fontsize=8.5,
                 color="#c8553d")
    axes[2].set_xticks(range(3), [textwrap.fill(NAMES[name], 16) for name in names], fontsize=9)
    axes[2].set_ylim(0, 1.08)
    axes[2].set_ylabel(f"accuracy on {N_TEST_PAIRS} held-out pairs")
    axes[2].set_title(f"same words, opposite answers\nown slot {result.own:.2f}, other event's {result.other:.2f}",
                      fontsize=10)
    figure.suptitle(f"Whose \"not\" is it? The row of \"{verb}\" (framed) attends to the slot before it "
                    f"({result.source})", fontsize=12.5)
    figure.supxlabel(textwrap.fill(CAPTION, width=200), fontsize=8.5, style="italic", ha="left", x=0.01)
    figure.savefig(out, dpi=100)
    plt.close(figure)


MEASUREMENT = Measurement(
    command="demo --measure negation", needs=NEEDS,
    uses="trains your models of exercise 12 (with exercise 9's train)",
    compute=lambda impl, source: compute(impl, source=source), summary_lines=summary_lines, plot=plot,
    default_out=DEFAULT_OUT, caption=CAPTION)


def run(args: argparse.Namespace) -> int:
    """``attention-kit demo --measure negation``."""
    return run_measurement(args, MEASUREMENT)
