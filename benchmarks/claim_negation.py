"""Print, seed by seed, exercise 12's claim: a bag of words at chance on same-words pairs, one attention layer not.

For each seed: a fresh task variant drawn as the graded test draws it
(``variant_tasks``: 192 pairs and 192 controls to train on, 64 held-out pairs
and 32 controls, sentences of 15 tokens, ids shuffled). The graded claim is the
bag model the test trains itself over the implementation's ``pooled_gradients``
(``train_bag_here``: 75 Adam steps from a first model of its own): it holds
when that model is at chance on the pairs (exactly 0.5, no pair with both
right) while it gets at least 0.9 of the controls. The reading's whole claim,
not graded (the attention model is exercise 9's ``train`` at work), comes from
the reference's ``compare`` with its defaults (400 Adam steps, lr 2e-2, d_model
16, one head), every figure recomputed with the graded test's own forward
passes (``_figures``): it holds when, besides, the attention model gets at
least 0.95 of the held-out pairs and the asked verb's attention is at least 0.4
on its own slot and at least 0.3 more than on the other event's.

Usage: ``python benchmarks/claim_negation.py [N_SEEDS] [FIRST_SEED] [--impl DIR] [--record]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kit import LocalImplementation  # noqa: E402
from tests.test_12_negation import (  # noqa: E402  (the graded test's own training and recomputation)
    _figures,
    bag_figures,
    train_bag_here,
    variant_tasks,
)


def bag_holds(pooled: dict) -> bool:
    """The graded claim test's thresholds, on the bag model it trains."""
    return pooled["accuracy"] == 0.5 and pooled["both_right"] == 0.0 and pooled["controls"] >= 0.9


def holds(figures: dict) -> bool:
    """The reading's whole claim on compare's two models (the attention half is not graded in exercise 12)."""
    attention = figures["attention"]
    return (bag_holds(figures["pooled"]) and attention["accuracy"] >= 0.95 and figures["own"] >= 0.4
            and figures["own"] - figures["other"] >= 0.3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_seeds", type=int, nargs="?", default=100)
    parser.add_argument("first_seed", type=int, nargs="?", default=3000)
    parser.add_argument("--impl", default="solutions", help="folder holding negation.py (default: solutions)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    local = LocalImplementation(ROOT / args.impl)
    compare = local.function("negation", "compare")
    student = SimpleNamespace(pooled_gradients=local.function("negation", "pooled_gradients"))
    rows, seconds, passing, graded = [], [], 0, 0
    print(f"{'seed':>6} {'here':>6} {'h ctl':>6} {'bag':>6} {'bag ctl':>7} {'attn':>6} {'both':>6} {'own':>6} "
          f"{'other':>6} {'s':>5}  graded whole")
    for seed in range(args.first_seed, args.first_seed + args.n_seeds):
        train_set, test_set = variant_tasks(seed)
        start = time.process_time()
        params, _, failure = train_bag_here(student, seed, seed + 1)
        here = bag_figures(params, test_set) if failure is None else {"accuracy": np.nan, "controls": np.nan}
        bag_ok = failure is None and bag_holds(here)
        graded += bag_ok
        record = compare(np.random.default_rng(seed + 1), train_set, test_set)
        seconds.append(time.process_time() - start)
        figures = _figures(record["models"], test_set)
        ok = holds(figures)
        passing += ok
        rows.append(figures)
        print(f"{seed:>6} {here['accuracy']:>6.3f} {here['controls']:>6.3f} {figures['pooled']['accuracy']:>6.3f} "
              f"{figures['pooled']['controls']:>7.3f} {figures['attention']['accuracy']:>6.3f} "
              f"{figures['attention']['both_right']:>6.3f} {figures['own']:>6.3f} {figures['other']:>6.3f} "
              f"{seconds[-1]:>5.2f}  {'yes' if bag_ok else 'NO':>6} {'yes' if ok else 'NO'}")

    def mean(get) -> float:
        return round(float(np.mean([get(f) for f in rows])), 3)

    def low(get) -> float:
        return round(float(np.min([get(f) for f in rows])), 3)

    summary = (f"{graded}/{args.n_seeds} seeds (from {args.first_seed}) hold the graded claim (the bag model trained "
               f"by the test over pooled_gradients), {passing} the reading's whole claim; on held-out pairs the "
               f"bag of words gets {mean(lambda f: f['pooled']['accuracy']):.3f} (max "
               f"{max(f['pooled']['accuracy'] for f in rows):.3f}), one attention layer with positions "
               f"{mean(lambda f: f['attention']['accuracy']):.3f} (min {low(lambda f: f['attention']['accuracy'])}); "
               # Two decimals, as the reading gives them ("averages 0.90 against 0.02"): 0.898 did not compare.
               f"the asked verb's weight on its own slot {mean(lambda f: f['own']):.2f} (min "
               f"{low(lambda f: f['own'])}, own minus other min {low(lambda f: f['own'] - f['other'])}), "
               f"on the other event's {mean(lambda f: f['other']):.2f}; "
               f"{np.median(seconds):.2f} CPU s per compare (two trainings)")
    print(summary)
    if args.record:
        from _record import record as write

        write(__file__, summary, {
            "seeds": args.n_seeds, "first_seed": args.first_seed, "graded_passing": graded, "passing": passing,
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
    return 0 if graded >= 0.95 * args.n_seeds else 1


if __name__ == "__main__":
    sys.exit(main())
