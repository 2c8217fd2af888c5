"""``attention-kit demo --measure distance``: recall against distance, and accuracy beyond the training length.

Two measurements of exercise 13, made with your code:

* recall against distance: the given ``recall_task`` (40 key-value pairs,
  d_k 48, the answer leading by a margin of 4 in scaled score, score noise
  0.3, every distance asked 10 times), your ``recall_curve`` with ALiBi's
  penalty (slope 0.3) and without it (slope 0), and your
  ``critical_distance(4, 0.3)`` marked on the curve;
* beyond the training length: two heads trained by your
  ``train_match_head`` on 1024 contexts of the given latest-match task at
  length 16, one
  with sinusoidal encodings, one with ALiBi's penalty (slope 0.5), and
  their ``length_accuracy`` at lengths from 8 to 64.

The picture goes to ``attention-distance.png``.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.student.measured_demo import Measurement, run_measurement

SEED = 42
N_PAIRS, D_K, MARGIN, NOISE, REPEATS, SLOPE = 40, 48, 4.0, 0.3, 10, 0.3
N_SYMBOLS, D_HEAD, TRAIN_LENGTH, ALIBI_SLOPE, N_TRAIN, N_EVAL = 6, 16, 16, 0.5, 1024, 300
LENGTHS = (8, 12, 16, 24, 32, 48, 64)
DEFAULT_OUT = "attention-distance.png"
NEEDS = ("distance",)  # and what it builds on
CAPTION = (
    "Left: the answer is in the context at every distance, yet with ALiBi's penalty (slope 0.3) the query "
    "finds it only up to the critical distance 1 + margin / slope: beyond it the penalty has eaten the answer's "
    "lead over the nearest distractor, which is penalised by one step only. The measured curve falls a little "
    "before the line because the noise lets the best distractor score above 0 (the measured margin is below 4). "
    "Without the penalty, recall is the same at every distance. An available context is not a used context. "
    "Right: two heads trained at length 16. Press et al. (2022) found that ALiBi extrapolates to longer inputs "
    "and sinusoidal encodings do not; here too, the sinusoidal head meets position vectors it never trained on "
    "and loses the answer (even a shorter context puts its query at a position it never trained on), while "
    "ALiBi's penalty means the same at every length."
)


@dataclass
class DistanceResult:
    """What the distance demo measured."""

    distances: Any  # (N_PAIRS,)
    recall_penalty: Any  # (N_PAIRS,)
    recall_flat: Any  # (N_PAIRS,)
    critical: float
    margin_measured: float
    lengths: tuple[int, ...]
    accuracy: dict  # "sinusoidal" / "ALiBi" -> list over LENGTHS
    source: str


def compute(impl: Path, *, source: str = "your code") -> DistanceResult:
    """Measure both figures with the modules in ``impl`` (``distance.py``, the given ``_distance_task.py``)."""
    import numpy as np

    from tests.kit import LocalImplementation

    implementation = LocalImplementation(impl)
    distance, tasks = implementation.module("distance"), implementation.module("_distance_task")
    task = tasks.recall_task(np.random.default_rng(SEED), N_PAIRS, D_K, MARGIN, noise=NOISE, repeats=REPEATS)
    distances, recall_penalty = distance.recall_curve(task, SLOPE)
    _, recall_flat = distance.recall_curve(task, 0.0)
    margin = float(np.mean(distance.score_margin(task["queries"], task["keys"], task["answer"])))
    rng = np.random.default_rng(SEED)
    embedding = rng.normal(size=(N_SYMBOLS, D_HEAD))
    train_set = tasks.latest_match_task(rng, N_TRAIN, TRAIN_LENGTH, N_SYMBOLS)
    accuracy = {}
    for name, positions, slope in (("sinusoidal", True, 0.0), ("ALiBi", False, ALIBI_SLOPE)):
        weight, _ = distance.train_match_head(rng, embedding, train_set, positions, slope)
        accuracy[name] = [float(distance.length_accuracy(weight, embedding, tasks.latest_match_task(
            rng, N_EVAL, length, N_SYMBOLS), positions, slope)) for length in LENGTHS]
    return DistanceResult(np.asarray(distances), np.asarray(recall_penalty, dtype=float),
                          np.asarray(recall_flat, dtype=float), float(distance.critical_distance(MARGIN, SLOPE)),
                          margin, LENGTHS, accuracy, source)


def summary_lines(result: DistanceResult) -> list[str]:
    """The numbers behind the picture."""
    lines = [f"recall against distance ({N_PAIRS} pairs, margin {MARGIN}, noise {NOISE}, {REPEATS} queries "
             f"per distance), {result.source}",
             f"critical distance 1 + {MARGIN} / {SLOPE} = {result.critical:.2f}; measured mean margin "
             f"{result.margin_measured:.2f}",
             f"{'distance':>8} {'slope ' + str(SLOPE):>10} {'slope 0':>8}"]
    for t, with_penalty, flat in zip(result.distances, result.recall_penalty, result.recall_flat, strict=True):
        if t <= 24 or t % 4 == 0:
            # Three decimals, as the reading gives recall (docs/reading.md#context-use: "means 1.000 and 0.000").
            lines.append(f"{int(t):>8} {with_penalty:>10.3f} {flat:>8.3f}")
    lines.append(f"accuracy of heads trained at length {TRAIN_LENGTH}, by evaluation length:")
    lines.append(f"{'length':>8} " + " ".join(f"{name:>10}" for name in result.accuracy))
    for i, length in enumerate(result.lengths):
        lines.append(f"{length:>8} " + " ".join(f"{acc[i]:>10.2f}" for acc in result.accuracy.values()))
    return lines


def plot(result: DistanceResult, out: Path) -> None:
    """Two panels: recall against distance (critical distance marked), accuracy against length; save a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.6), layout="constrained")
    left.plot(result.distances, result.recall_flat, "o-", color="#588157", markersize=4,
              label="without a penalty (slope 0)")
    left.plot(result.distances, result.recall_penalty, "o-", color="#c8553d", markersize=4,
              label=f"with ALiBi's penalty (slope {SLOPE})")
    left.axvline(result.critical, color="black", linestyle="--", linewidth=1.2)
    left.annotate(f"critical distance\n1 + {MARGIN:g} / {SLOPE:g} = {result.critical:.1f}",
                  xy=(result.critical, 0.5), xytext=(result.critical + 2.5, 0.55), fontsize=9,
                  arrowprops={"arrowstyle": "->", "color": "black"})
    left.set_xlabel("distance between the query and the answer (steps)")
    left.set_ylabel("recall (largest weight on the answer)")
    left.set_ylim(-0.05, 1.1)
    left.set_title(f"The answer is always in the context ({N_PAIRS} pairs, margin {MARGIN:g})", fontsize=10.5)
    left.legend(loc="center right", bbox_to_anchor=(1.0, 0.33), fontsize=9)
    colours = {"sinusoidal": "#3b6ea5", "ALiBi": "#c8553d"}
    for name, acc in result.accuracy.items():
        right.plot(result.lengths, acc, "o-", color=colours.get(name, "grey"), label=f"{name} head")
    right.axvline(TRAIN_LENGTH, color="black", linestyle=":", linewidth=1.2)
    right.annotate("training length", xy=(TRAIN_LENGTH, 0.05), xytext=(TRAIN_LENGTH + 3, 0.05), fontsize=9)
    right.set_xscale("log", base=2)
    right.set_xticks(result.lengths, [str(n) for n in result.lengths])
    right.set_xlabel("evaluation length (symbols in the context)")
    right.set_ylabel("accuracy (top score on the latest match)")
    right.set_ylim(-0.05, 1.1)
    right.set_title(f"Trained at length {TRAIN_LENGTH}, evaluated at other lengths", fontsize=10.5)
    right.legend(loc="center left", fontsize=9)
    figure.suptitle(f"An available context is not a used context ({result.source})", fontsize=12)
    figure.supxlabel(textwrap.fill(CAPTION, width=170), fontsize=8.5, style="italic", ha="left", x=0.01)
    figure.savefig(out, dpi=110)
    plt.close(figure)


MEASUREMENT = Measurement(
    command="demo --measure distance", needs=NEEDS,
    uses="measures recall with your exercise 13 (and what it builds on)",
    compute=lambda impl, source: compute(impl, source=source), summary_lines=summary_lines, plot=plot,
    default_out=DEFAULT_OUT, caption=CAPTION)


def run(args: argparse.Namespace) -> int:
    """``attention-kit demo --measure distance``."""
    return run_measurement(args, MEASUREMENT)
