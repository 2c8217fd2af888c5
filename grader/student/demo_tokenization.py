"""``attention-kit demo --measure tokenization``: how the tokenizer sets attention's bill. Measure it.

Your ``train_bpe`` learns 256 merges on 40 sentences of the kit's corpus
(``_tokenization_corpus.py``, shuffled with seed 1500); the other 10 are held
out and measured as one sequence. For vocabularies from 256 tokens (bytes
only) to 512, the demo shows:

* the held-out text's length in tokens (your ``sequence_lengths``);
* attention's cost for that length: your ``attention_cost`` (operations and
  bytes of the scores), beside what full attention (your
  ``scaled_dot_product_attention`` of exercise 3, d = 16) takes when run on
  that many positions, its peak memory measured with ``tracemalloc`` (as a
  run of exercise 11's memory test measures it) and its CPU time, all
  relative to the byte-level sequence, on one axis: they fall together, with
  the square of the length;
* the pieces your ``token_pieces`` cuts a product identifier, a measured
  value and two common words of the corpus into.

The picture goes to ``attention-tokenization.png``.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from grader.curriculum import ROOT
from grader.student.measured_demo import Measurement, run_measurement

SEED = 1500
N_TRAIN = 40
N_MERGES = 256
VOCAB_SIZES = (256, 264, 272, 288, 320, 352, 384, 448, 512)
D = 16
HEADS = 4  # the timed run: enough work that the n^2 part dominates
REPEATS = 5
WORDS = ("vessel", "sensor", "12.5 mg/L", "XK-9931-B")
DEFAULT_OUT = "attention-tokenization.png"
NEEDS = ("attention", "tokenization")  # and what they build on
CAPTION = (
    "Byte-pair encoding (Sennrich et al., 2016) learns merges of frequent neighbours; the more merges, the "
    "bigger the vocabulary and the shorter the sequence. Attention pays for the sequence squared: operations "
    "and score memory (your attention_cost) and the peak memory full attention really took fall together, relative "
    "to the text in bytes; CPU time (one thread) falls at least as fast, here faster, as smaller score arrays fit "
    "in the processor's caches. The common words of the corpus are one token each; an "
    "identifier it never saw stays in one piece per character, each a position that attention pays for."
)


@dataclass
class TokenizationResult:
    """What the tokenization demo measured."""

    sizes: list  # vocabulary sizes V
    lengths: list  # held-out tokens at each V
    predicted_ops: list  # attention_cost(n, D)[0]
    predicted_bytes: list  # attention_cost(n, D)[1]
    measured_peak: list  # bytes traced during one head of full attention over n positions
    measured_seconds: list  # best CPU seconds of HEADS heads over n positions
    pieces: dict  # word -> list of bytes
    held_out_bytes: int
    held_out_sentences: int
    source: str


# The measurement runs in a fresh Python with one BLAS thread: on a shared machine, several threads make the time
# of a small matrix product jump by 10x from one size to the next (threads waiting for a core, not work).
_MEASURE = """
import json, sys, time, tracemalloc
import numpy as np
from tests.kit import LocalImplementation
impl, seed, d, heads, repeats, lengths = json.loads(sys.argv[1])
attention = LocalImplementation(impl).module("attention").scaled_dot_product_attention
out = []
for n in lengths:
    x = np.random.default_rng(seed).normal(size=(n, d))
    tracemalloc.start()
    attention(x, x, x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    many = np.random.default_rng(seed).normal(size=(heads, n, d))
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        attention(many, many, many)
        best = min(best, time.process_time() - start)
    out.append((peak, best))
print(json.dumps(out))
"""


def measure(impl: Path, lengths: list[int]) -> list[tuple[int, float]]:
    """Peak traced bytes of one head and best CPU seconds of HEADS heads of full attention, for each length."""
    import json
    import os
    import subprocess

    threads = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps([str(impl), SEED, D, HEADS, REPEATS, lengths])],
                          env={**os.environ, **threads}, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measuring attention failed: {done.stderr.strip().splitlines()[-1:]}")
    return [(int(peak), float(seconds)) for peak, seconds in json.loads(done.stdout)]


def compute(impl: Path, source: str = "your code") -> TokenizationResult:
    """Train, measure lengths, costs, memory, time and pieces with the implementation in ``impl``."""
    import numpy as np

    from tests.kit import LocalImplementation

    implementation = LocalImplementation(impl)
    tok = implementation.module("tokenization")
    sentences = implementation.module("_tokenization_corpus").SENTENCES
    order = np.random.default_rng(SEED).permutation(len(sentences))
    train = "\n".join(sentences[i] for i in sorted(order[:N_TRAIN])) + "\n"
    held = "\n".join(sentences[i] for i in sorted(order[N_TRAIN:])) + "\n"
    merges = np.asarray(tok.train_bpe(train, N_MERGES))
    sizes = [size for size in VOCAB_SIZES if size <= 256 + len(merges)]
    lengths = [int(n) for n in np.asarray(tok.sequence_lengths([held], merges, sizes))[:, 0]]
    costs = [tok.attention_cost(n, D) for n in lengths]
    measured = measure(impl, lengths)
    return TokenizationResult(
        sizes=sizes, lengths=lengths, predicted_ops=[int(c[0]) for c in costs],
        predicted_bytes=[int(c[1]) for c in costs], measured_peak=[m[0] for m in measured],
        measured_seconds=[m[1] for m in measured],
        pieces={word: [bytes(p) for p in tok.token_pieces(word, merges)] for word in WORDS},
        held_out_bytes=len(held.encode("utf-8")), held_out_sentences=len(sentences) - N_TRAIN, source=source)


def _show(piece: bytes) -> str:
    text = piece.decode("utf-8", errors="replace")
    return text.replace(" ", "\u2423")  # an open box for the space, so a piece's spaces show


def summary_lines(result: TokenizationResult) -> list[str]:
    """The numbers, as the terminal prints them."""
    lines = [f"tokenization demo ({result.source}): {N_MERGES} merges learned on {N_TRAIN} sentences; "
             f"the other {result.held_out_sentences} held out ({result.held_out_bytes} bytes)",
             f"{'V':>5} {'tokens':>7} {'ops 4n^2d':>12} {'score bytes':>12} {'peak traced':>12} {'CPU s':>8}"]
    for row in zip(result.sizes, result.lengths, result.predicted_ops, result.predicted_bytes,
                   result.measured_peak, result.measured_seconds, strict=True):
        lines.append(f"{row[0]:>5} {row[1]:>7} {row[2]:>12,} {row[3]:>12,} {row[4]:>12,} {row[5]:>8.4f}")
    first, last = 0, len(result.sizes) - 1
    # The digits of the reading's figures (docs/reading.md#tokenization): "2.7 times shorter", "7.5 times cheaper",
    # "falls 6.8-fold", CPU time "about 12-fold".
    lines.append(f"from V = {result.sizes[first]} to V = {result.sizes[last]}: the sequence is "
                 f"{result.lengths[first] / result.lengths[last]:.1f}x shorter; attention_cost "
                 f"{result.predicted_ops[first] / result.predicted_ops[last]:.1f}x lower, measured peak memory "
                 f"{result.measured_peak[first] / result.measured_peak[last]:.1f}x, CPU time "
                 f"{result.measured_seconds[first] / max(result.measured_seconds[last], 1e-9):.0f}x")
    for word, pieces in result.pieces.items():
        plural = "s" if len(pieces) != 1 else ""
        lines.append(f"{word!r}: {len(pieces)} token{plural}: " + " | ".join(_show(p) for p in pieces))
    return lines


def plot(result: TokenizationResult, out: Path) -> None:
    """Three panels: length against V, cost against V (predicted and measured), the words' pieces."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure = plt.figure(figsize=(14, 5.6), layout="constrained")
    grid = figure.add_gridspec(1, 3, width_ratios=(1, 1.15, 1.25))
    sizes = np.array(result.sizes)

    ax = figure.add_subplot(grid[0])
    ax.plot(sizes, result.lengths, "o-", color="tab:blue")
    for size, n in zip(sizes[[0, -1]], np.array(result.lengths)[[0, -1]], strict=True):
        ax.annotate(f"{n} tokens", (size, n), textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.set_xlabel("vocabulary size V (256 bytes + merges)")
    ax.set_ylabel("held-out text, tokens n")
    ax.set_title("A. The sequence shortens as the vocabulary grows", fontsize=10.5)
    ax.set_ylim(0, max(result.lengths) * 1.12)
    ax.grid(alpha=0.3)

    ax = figure.add_subplot(grid[1])
    relative = {
        "(n / n_bytes)^2": (np.array(result.lengths) / result.lengths[0]) ** 2,
        "attention_cost: operations": np.array(result.predicted_ops) / result.predicted_ops[0],
        "attention_cost: score bytes": np.array(result.predicted_bytes) / result.predicted_bytes[0],
        "measured: peak memory (tracemalloc)": np.array(result.measured_peak) / result.measured_peak[0],
        "measured: CPU time": np.array(result.measured_seconds) / max(result.measured_seconds[0], 1e-12),
        "n / n_bytes (not squared)": np.array(result.lengths) / result.lengths[0],
    }
    styles = {"(n / n_bytes)^2": dict(color="black", linewidth=3, alpha=0.25),
              # The predicted lines coincide (both n^2) and the measured memory follows them: hollow, larger
              # markers drawn on top keep all three visible.
              "attention_cost: operations": dict(color="tab:orange", marker="o", markersize=10,
                                                 markerfacecolor="none", markeredgewidth=1.5, zorder=4),
              "attention_cost: score bytes": dict(color="tab:red", marker="x", markersize=8, linestyle="--",
                                                  zorder=5),
              "measured: peak memory (tracemalloc)": dict(color="tab:green", marker="s", markersize=4, zorder=3),
              "measured: CPU time": dict(color="tab:purple", marker="^"),
              "n / n_bytes (not squared)": dict(color="tab:blue", linestyle=":")}
    for label, values in relative.items():
        ax.plot(sizes, values, label=label, **styles[label])
    ax.set_xlabel("vocabulary size V")
    ax.set_ylabel("relative to the text in bytes (V = 256)")
    ax.set_ylim(0, 1.08)
    fall = result.predicted_ops[0] / result.predicted_ops[-1]
    ax.set_title(f"B. Attention's cost falls with n squared: {fall:.1f}x at V = {result.sizes[-1]}", fontsize=10.5)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)

    ax = figure.add_subplot(grid[2])
    ax.set_axis_off()
    ax.set_title(f"C. Pieces at V = {result.sizes[-1]} (your token_pieces)", fontsize=10.5)
    colours = ("#cfe2f3", "#fce5cd")
    for row, (word, pieces) in enumerate(result.pieces.items()):
        y = 0.86 - row * 0.23
        ax.text(0.0, y + 0.085, f"{word!r}: {len(pieces)} token{'s' if len(pieces) != 1 else ''}", fontsize=10,
                transform=ax.transAxes, fontweight="bold" if len(pieces) > 3 else "normal")
        x = 0.0
        for i, piece in enumerate(pieces):
            label = _show(piece)
            width = 0.035 + 0.032 * len(label)
            ax.text(x, y, label, fontsize=11, family="monospace", transform=ax.transAxes, va="center",
                    bbox=dict(boxstyle="round,pad=0.3", facecolor=colours[i % 2], edgecolor="grey"))
            x += width + 0.02
    figure.suptitle(f"Tokenization changes the sequence, and attention pays for it squared ({result.source})",
                    fontsize=12)
    figure.supxlabel(textwrap.fill(CAPTION, width=200), fontsize=8.5, style="italic", ha="left", x=0.01)
    figure.savefig(out, dpi=110)
    plt.close(figure)


MEASUREMENT = Measurement(
    command="demo --measure tokenization", needs=NEEDS,
    uses="runs your byte-pair encoding and your attention of exercise 3",
    compute=lambda impl, source: compute(impl, source=source), summary_lines=summary_lines, plot=plot,
    default_out=DEFAULT_OUT, caption=CAPTION)


def run(args: argparse.Namespace) -> int:
    """``attention-kit demo --measure tokenization``."""
    return run_measurement(args, MEASUREMENT)
