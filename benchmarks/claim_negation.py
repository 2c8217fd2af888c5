"""Print, seed by seed, exercise 12's claim: a bag of words at chance on same-words pairs, one attention layer not.

For each seed: a fresh task variant drawn as the graded test draws it
(``variant_tasks``: 192 pairs and 192 controls to train on, 64 held-out pairs
and 32 controls, sentences of 15 tokens, ids shuffled), and the reference's
``compare`` with its defaults (400 Adam steps, lr 2e-2, d_model 16, one
head). Every figure is recomputed with the graded test's own forward passes
(``_figures``) from the models ``compare`` returns. A seed holds when the bag
model is at chance on the pairs (exactly 0.5, no pair with both right) while
it gets at least 0.9 of the controls, the attention model gets at least 0.95
of the held-out pairs, and the asked verb's attention is at least 0.4 on its
own slot and at least 0.3 more than on the other event's (the graded test's
thresholds).

Usage: ``python benchmarks/claim_negation.py [N_SEEDS] [FIRST_SEED] [--impl DIR] [--record]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kit import LocalImplementation  # noqa: E402
from tests.test_12_negation import _figures, variant_tasks  # noqa: E402  (the graded test's own recomputation)


def holds(figures: dict) -> bool:
    """The graded test's thresholds, all at once."""
    pooled, attention = figures["pooled"], figures["attention"]
    return (pooled["accuracy"] == 0.5 and pooled["both_right"] == 0.0 and pooled["controls"] >= 0.9
            and attention["accuracy"] >= 0.95 and figures["own"] >= 0.4 and figures["own"] - figures["other"] >= 0.3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_seeds", type=int, nargs="?", default=100)
    parser.add_argument("first_seed", type=int, nargs="?", default=3000)
    parser.add_argument("--impl", default="solutions", help="folder holding negation.py (default: solutions)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    compare = LocalImplementation(ROOT / args.impl).function("negation", "compare")
    rows, seconds, passing = [], [], 0
    print(f"{'seed':>6} {'bag':>6} {'bag ctl':>7} {'attn':>6} {'both':>6} {'own':>6} {'other':>6} "
          f"{'s':>5}  holds")
    for seed in range(args.first_seed, args.first_seed + args.n_seeds):
        train_set, test_set = variant_tasks(seed)
        start = time.process_time()
        record = compare(np.random.default_rng(seed + 1), train_set, test_set)
        seconds.append(time.process_time() - start)
        figures = _figures(record["models"], test_set)
        ok = holds(figures)
        passing += ok
        rows.append(figures)
        print(f"{seed:>6} {figures['pooled']['accuracy']:>6.3f} {figures['pooled']['controls']:>7.3f} "
              f"{figures['attention']['accuracy']:>6.3f} "
              f"{figures['attention']['both_right']:>6.3f} {figures['own']:>6.3f} {figures['other']:>6.3f} "
              f"{seconds[-1]:>5.2f}  {'yes' if ok else 'NO'}")

    def mean(get) -> float:
        return round(float(np.mean([get(f) for f in rows])), 3)

    def low(get) -> float:
        return round(float(np.min([get(f) for f in rows])), 3)

    summary = (f"{passing}/{args.n_seeds} seeds (from {args.first_seed}) hold the whole claim; on held-out pairs the "
               f"bag of words gets {mean(lambda f: f['pooled']['accuracy']):.3f} (max "
               f"{max(f['pooled']['accuracy'] for f in rows):.3f}), one attention layer with positions "
               f"{mean(lambda f: f['attention']['accuracy']):.3f} (min {low(lambda f: f['attention']['accuracy'])}); "
               f"the asked verb's weight on its own slot {mean(lambda f: f['own']):.3f} (min "
               f"{low(lambda f: f['own'])}, own minus other min {low(lambda f: f['own'] - f['other'])}), "
               f"on the other event's {mean(lambda f: f['other']):.3f}; "
               f"{np.median(seconds):.2f} CPU s per compare (two trainings)")
    print(summary)
    if args.record:
        from _record import record as write

        write(__file__, summary, {
            "seeds": args.n_seeds, "first_seed": args.first_seed, "passing": passing,
            "fraction_holding": round(passing / args.n_seeds, 3),
            "bag_pair_accuracy_mean": mean(lambda f: f["pooled"]["accuracy"]),
            "bag_pair_accuracy_max": round(float(max(f["pooled"]["accuracy"] for f in rows)), 3),
            "bag_controls_mean": mean(lambda f: f["pooled"]["controls"]),
            "attention_pair_accuracy_mean": mean(lambda f: f["attention"]["accuracy"]),
            "attention_pair_accuracy_min": low(lambda f: f["attention"]["accuracy"]),
            "attention_both_right_mean": mean(lambda f: f["attention"]["both_right"]),
            "own_slot_weight_mean": mean(lambda f: f["own"]), "own_slot_weight_min": low(lambda f: f["own"]),
            "own_minus_other_min": low(lambda f: f["own"] - f["other"]),
            "other_slot_weight_mean": mean(lambda f: f["other"]),
            "other_slot_weight_max": round(float(max(f["other"] for f in rows)), 3),
            "cpu_seconds_median": round(float(np.median(seconds)), 3)})
    return 0 if passing >= 0.95 * args.n_seeds else 1


if __name__ == "__main__":
    sys.exit(main())
