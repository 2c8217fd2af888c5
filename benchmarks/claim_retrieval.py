"""Print, seed by seed, whether answer accuracy follows retrieval recall (exercise 14's claim).

For each seed: a fresh collection drawn with the graded tests' sizes (``SIZES`` of
``tests/test_14_retrieval.py``: 30 entities, 3 attributes, 6 values, chunks of 3 facts,
360 questions), run through ``evaluate`` of ``--impl``, and the graded tests' three
checks with their thresholds:

* retrieved: accuracy where the evidence was retrieved at least 0.97 (k = 3 and 6);
* missed: accuracy where it was not within 0.08 of chance, 1/6 (k = 1 with sharpness
  1, 10 and 100; k = 2 with sharpness 10): a sharper reader does not help;
* line: accuracy within 0.06 of ``chance + (1 - chance) * recall`` at k = 1, 2, 4, 8.

A seed holds when all three do. Beside it, the figure: the mean over the seeds of
recall and accuracy at each k, and of the accuracy where the evidence was missed;
and the best reader there can be (the value of the fact asked about if it was
retrieved, else the first value) on the same retrieved chunks, to show that even
it is at chance without the evidence.

Usage: ``python benchmarks/claim_retrieval.py [N_SEEDS] [FIRST_SEED] [--impl DIR] [--record]``
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
from tests.test_14_retrieval import SIZES, facts_module, own_pipeline  # noqa: E402  (the graded tests' own)

KS = (1, 2, 3, 4, 6, 8)
RETRIEVED = ((3, 10.0), (6, 10.0))
MISSED = ((1, 1.0), (1, 10.0), (1, 100.0), (2, 10.0))
LINE = (1, 2, 4, 8)


def best_reader_missed(data: dict, k: int) -> float:
    """Accuracy, where the evidence was missed, of a reader that finds the fact asked about whenever it is there."""
    mine = own_pipeline(data, k)
    facts, question = mine["facts"], data["questions"]
    match = (facts[..., 0] == question[:, None, 0]) & (facts[..., 1] == question[:, None, 1])
    answer = facts[np.arange(len(facts)), np.argmax(match, axis=1), 2]
    correct = answer == data["answers"]
    return float(correct[~mine["hit"]].mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_seeds", type=int, nargs="?", default=100)
    parser.add_argument("first_seed", type=int, nargs="?", default=2026)
    parser.add_argument("--impl", default="solutions", help="folder holding retrieval.py (default: solutions)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    evaluate = LocalImplementation(ROOT / args.impl).function("retrieval", "evaluate")
    holding, table, best, worst_gap, seconds = 0, [], [], [], []
    print(f"{'seed':>6} {'min acc in':>10} {'worst miss-chance':>17} {'worst line gap':>14}  holds")
    for seed in range(args.first_seed, args.first_seed + args.n_seeds):
        start = time.process_time()
        data = facts_module().fact_collection(np.random.default_rng(seed), **SIZES)
        chance = 1 / len(data["values"])
        runs = {(k, s): evaluate(data, k, sharpness=s) for k, s in {*RETRIEVED, *MISSED, *((k, 10.0) for k in KS),
                                                                    *((k, 10.0) for k in LINE)}}
        acc_in = min(runs[key]["accuracy_retrieved"] for key in RETRIEVED)
        miss = max(abs(runs[key]["accuracy_missed"] - chance) for key in MISSED)
        gap = max(abs(runs[k, 10.0]["accuracy"] - (chance + (1 - chance) * runs[k, 10.0]["recall"])) for k in LINE)
        ok = acc_in >= 0.97 and miss <= 0.08 and gap <= 0.06
        holding += ok
        worst_gap.append(gap)
        table.append([[runs[k, 10.0][key] for key in ("recall", "accuracy", "accuracy_missed")] for k in KS])
        best.append(best_reader_missed(data, 1))
        seconds.append(time.process_time() - start)
        print(f"{seed:>6} {acc_in:>10.3f} {miss:>17.3f} {gap:>14.3f}  {'yes' if ok else 'NO'}")
    mean = np.mean(table, axis=0)  # (len(KS), 3)
    chance = 1 / SIZES["n_values"]
    print(f"\nmeans over {args.n_seeds} seeds (sharpness 10; chance = 1/{SIZES['n_values']} = {chance:.3f}):")
    print(f"{'k':>3} {'recall':>7} {'accuracy':>9} {'chance + (1 - chance) recall':>29} {'accuracy missed':>16}")
    for k, (recall, accuracy, missed) in zip(KS, mean, strict=True):
        print(f"{k:>3} {recall:>7.3f} {accuracy:>9.3f} {chance + (1 - chance) * recall:>29.3f} {missed:>16.3f}")
    print(f"the best possible reader, where the evidence was missed (k = 1): {np.mean(best):.3f}")
    print(f"{holding}/{args.n_seeds} seeds hold all three checks (retrieved >= 0.97, missed within 0.08 of chance, "
          f"accuracy within 0.06 of the line); worst line gap {max(worst_gap):.3f}; "
          f"{np.median(seconds):.3f} CPU s per seed")
    if args.record:
        from _record import record

        record(__file__, f"{holding}/{args.n_seeds} seeds (from {args.first_seed}) hold: accuracy where retrieved "
                         f">= 0.97, where missed within 0.08 of chance 1/6, on the line chance + (1 - chance) "
                         f"recall within 0.06; recall {mean[0, 0]:.2f} -> {mean[-1, 0]:.2f} and accuracy "
                         f"{mean[0, 1]:.2f} -> {mean[-1, 1]:.2f} for k = {KS[0]} -> {KS[-1]}; missed "
                         f"{mean[0, 2]:.3f} (best reader {np.mean(best):.3f})",
               {"seeds": args.n_seeds, "first_seed": args.first_seed, "holding": holding,
                "fraction_holding": holding / args.n_seeds, "ks": list(KS),
                "recall_mean": [round(float(x), 3) for x in mean[:, 0]],
                "accuracy_mean": [round(float(x), 3) for x in mean[:, 1]],
                "accuracy_missed_mean": [round(float(x), 3) for x in mean[:, 2]],
                "best_reader_missed_mean": round(float(np.mean(best)), 3), "chance": round(chance, 3),
                "worst_line_gap": round(float(max(worst_gap)), 3),
                "cpu_seconds_per_seed": round(float(np.median(seconds)), 3)})
    return 0 if holding >= 0.95 * args.n_seeds else 1


if __name__ == "__main__":
    sys.exit(main())
