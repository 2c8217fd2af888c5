"""``attention-kit demo --measure retrieval``: answer accuracy follows retrieval recall. Measure it.

Your ``evaluate`` (exercise 14) runs on four collections of the given module
(``fact_collection(default_rng(seed))`` for seeds 14 to 17, each 60
entities, 4 attributes, 8 values, chunks of 4 facts, 480 questions) for k = 1
to 12 retrieved chunks and three readers, of sharpness 1 (soft), 10 and 100
(sharp). The demo prints, for each k, the recall and the accuracy (means over
the four collections), split by whether the evidence was retrieved, and draws
two panels into ``attention-retrieval.png``:

* accuracy against recall at k, one point per k, beside the line ``chance +
  (1 - chance) * recall`` that a reader right on every retrieved fact and at
  chance on every missed one would give;
* the accuracy where the evidence was retrieved and where it was not, against
  k, for the three readers: where it was missed every reader is at chance.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from grader.student.measured_demo import Measurement, run_measurement

SEEDS = (14, 15, 16, 17)  # four collections, averaged: one alone is noisy where few questions miss
KS = (1, 2, 3, 4, 6, 8, 10, 12)
SHARPNESS = (1.0, 10.0, 100.0)
MAIN = 10.0  # the reader of the first panel and of the printed table
DEFAULT_OUT = "attention-retrieval.png"
NEEDS = ("retrieval",)  # and what it builds on
CAPTION = (
    "Retrieval is a hard choice made before the model reads: the k chunks most similar to the question are in, "
    "the rest are out. The reader is one attention head over the facts of the retrieved chunks only. Where the "
    "chunk holding the answer was retrieved, a sharp head finds it; where it was not, no head can: the values "
    "are drawn independently, so every reader, however sharp, is right about one time in n_values (chance). So "
    "accuracy follows recall, on the line chance + (1 - chance) * recall: a stronger reader cannot make up for "
    "evidence that was not retrieved (Lewis et al., 2020, put retrieval in front of a generator). A soft reader "
    "(sharpness 1) also loses facts that were retrieved, more of them as more chunks crowd its context."
)


@dataclass
class RetrievalResult:
    """What the demo measured: per sharpness, the figures of ``evaluate`` at every k."""

    ks: tuple[int, ...]
    chance: float
    n_questions: int
    figures: dict = field(default_factory=dict)  # sharpness -> {"recall": [...], "accuracy": [...], ...}
    source: str = "your code"


def compute(impl: Path, *, source: str = "your code", ks: tuple[int, ...] | None = None,
            sharpness: tuple[float, ...] | None = None) -> RetrievalResult:
    """Run ``evaluate`` of the implementation in ``impl`` on the demo's collection, for every k and reader.

    Parameters
    ----------
    impl : pathlib.Path
        The folder holding ``retrieval.py``, the given ``_facts.py`` and what they import.
    source : str, optional
        Whose code this is, for the title.
    ks : tuple of int, optional
        The numbers of chunks retrieved (default ``KS``).
    sharpness : tuple of float, optional
        The readers (default ``SHARPNESS``).

    Returns
    -------
    RetrievalResult
        Recall and accuracies for every k and reader.
    """
    import numpy as np

    from tests.kit import LocalImplementation

    ks, sharpness = (KS if ks is None else tuple(ks)), (SHARPNESS if sharpness is None else tuple(sharpness))
    implementation = LocalImplementation(impl)
    facts = implementation.module("_facts")
    evaluate = implementation.function("retrieval", "evaluate")
    collections = [facts.fact_collection(np.random.default_rng(seed)) for seed in SEEDS]
    result = RetrievalResult(tuple(ks), 1.0 / len(collections[0]["values"]),
                             sum(len(data["questions"]) for data in collections), source=source)
    keys = ("recall", "accuracy", "accuracy_retrieved", "accuracy_missed")
    for s in sharpness:
        runs = [[evaluate(data, k, sharpness=s) for data in collections] for k in ks]
        result.figures[s] = {key: [float(np.mean([run[key] for run in at_k])) for at_k in runs] for key in keys}
    return result


def summary_lines(result: RetrievalResult) -> list[str]:
    """The numbers behind the picture: one line per k for the main reader, then the other readers' extremes."""
    main = result.figures[MAIN]
    chance = result.chance
    lines = [f"{len(SEEDS)} collections, {result.n_questions} questions in all, chance = {chance:.3f}; means over "
             f"the collections, reader of sharpness {MAIN:g}:",
             f"{'k':>3} {'recall':>7} {'accuracy':>9} {'line':>6} {'where retrieved':>16} {'where missed':>13}"]
    for i, k in enumerate(result.ks):
        line = chance + (1 - chance) * main["recall"][i]
        lines.append(f"{k:>3} {main['recall'][i]:>7.3f} {main['accuracy'][i]:>9.3f} {line:>6.3f} "
                     f"{main['accuracy_retrieved'][i]:>16.3f} {main['accuracy_missed'][i]:>13.3f}")
    lines.append("line = chance + (1 - chance) * recall")
    for s, fig in result.figures.items():
        lines.append(f"sharpness {s:>5g}: where retrieved {min(fig['accuracy_retrieved']):.3f} to "
                     f"{max(fig['accuracy_retrieved']):.3f}, where missed {min(fig['accuracy_missed']):.3f} to "
                     f"{max(fig['accuracy_missed']):.3f} over k = {result.ks[0]} to {result.ks[-1]}")
    return lines


def plot(result: RetrievalResult, out: Path) -> None:
    """Accuracy against recall (left), the two accuracies against k for each reader (right); save a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.8), layout="constrained")
    chance = result.chance
    line = np.linspace(0.0, 1.0, 2)
    left.plot(line, chance + (1 - chance) * line, color="black", linestyle="--", linewidth=1,
              label="chance + (1 - chance) * recall")
    left.axhline(chance, color="grey", linestyle=":", linewidth=1, label=f"chance = {chance:.3f}")
    markers = {1.0: ("^", "#c8553d"), 10.0: ("o", "#3b6ea5"), 100.0: ("s", "#588157")}
    for s, fig in result.figures.items():
        marker, colour = markers.get(s, ("x", "black"))
        left.scatter(fig["recall"], fig["accuracy"], marker=marker, color=colour, s=36, zorder=3,
                     label=f"reader of sharpness {s:g}", facecolors="none" if s == 100.0 else colour)
    main = result.figures[MAIN]
    for i, k in enumerate(result.ks):
        if k in (1, 2, 4, 8, 12):
            left.annotate(f"k={k}", (main["recall"][i], main["accuracy"][i]), textcoords="offset points",
                          xytext=(-8, 9), fontsize=8)
    left.set_xlim(0, 1)
    left.set_ylim(0, 1)
    left.set_xlabel("recall at k (share of questions whose evidence chunk was retrieved)")
    left.set_ylabel("answer accuracy")
    left.set_title("Answer accuracy follows retrieval recall", fontsize=11)
    left.legend(loc="upper left", fontsize=8)
    styles = {1.0: ":", 10.0: "-", 100.0: "--"}
    for s, fig in result.figures.items():
        style = styles.get(s, "-.")
        right.plot(result.ks, fig["accuracy_retrieved"], color="#3b6ea5", linestyle=style, marker="o",
                   markersize=3, label=f"evidence retrieved, sharpness {s:g}")
        right.plot(result.ks, fig["accuracy_missed"], color="#c8553d", linestyle=style, marker="o", markersize=3,
                   label=f"evidence missed, sharpness {s:g}")
    right.plot(result.ks, main["recall"], color="black", linewidth=1, alpha=0.5, label="recall at k")
    right.axhline(chance, color="grey", linestyle=":", linewidth=1)
    right.text(result.ks[-1], chance + 0.015, "chance", ha="right", fontsize=8, color="grey")
    right.set_ylim(0, 1.05)
    right.set_xticks(result.ks)
    right.set_xlabel("k, chunks retrieved per question")
    right.set_ylabel("accuracy")
    right.set_title("Where the evidence was missed, every reader is at chance", fontsize=11)
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=7.5)
    figure.suptitle(f"Retrieval is not attention: {result.n_questions} questions about synthetic facts in "
                    f"{len(SEEDS)} collections (means), {result.source}", fontsize=12)
    figure.supxlabel(textwrap.fill(CAPTION, width=175), fontsize=8.5, style="italic", ha="left", x=0.01)
    figure.savefig(out, dpi=110)
    plt.close(figure)


MEASUREMENT = Measurement(
    command="demo --measure retrieval", needs=NEEDS,
    uses="runs your exercise 14",
    compute=lambda impl, source: compute(impl, source=source), summary_lines=summary_lines, plot=plot,
    default_out=DEFAULT_OUT, caption=CAPTION)


def run(args: argparse.Namespace) -> int:
    """``attention-kit demo --measure retrieval``."""
    return run_measurement(args, MEASUREMENT)
