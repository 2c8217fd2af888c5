"""Print how often train() with its defaults reaches the exercise-9 figures, seed by seed.

For each seed: a fresh task (512 training and 256 held-out sentences) and a
fresh model, trained with the reference's ``train`` and all its defaults
(d_model 16, one head, 300 steps, batch 32, lr 1e-2), evaluated by the
graded tests' own forward pass. A seed passes with held-out accuracy of at
least 0.9 and a mean attention weight of the pronoun on its antecedent above
0.5. The same model trained without positions is shown too: the share of its
noun predictions that name the antecedent (chance is 0.5).

Usage: ``python benchmarks/training_seeds.py [N_SEEDS] [FIRST_SEED] [--impl DIR] [--steps N --lr LR] [--record]``
(``--steps 70 --lr 3e-2`` are the graded test's settings).
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
from tests.test_09_training import _outcome, tasks  # noqa: E402  (the graded tests' own forward pass)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_seeds", type=int, nargs="?", default=20)
    parser.add_argument("first_seed", type=int, nargs="?", default=2026)
    parser.add_argument("--impl", default="solutions", help="folder holding training.py (default: solutions)")
    parser.add_argument("--steps", type=int, default=None, help="instead of the default 300 (the graded test: 70)")
    parser.add_argument("--lr", type=float, default=None, help="instead of the default 1e-2 (the graded test: 3e-2)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    impl = LocalImplementation(ROOT / args.impl)
    train = impl.function("training", "train")
    init_model = impl.function("training", "init_model")
    options = {key: value for key, value in (("steps", args.steps), ("lr", args.lr)) if value is not None}
    passing, seconds, weights, shares = 0, [], [], []
    print(f"{'seed':>6} {'untrained':>9} {'accuracy':>9} {'attention':>9} {'s':>6} {'no-pos share':>13}  pass")
    for seed in range(args.first_seed, args.first_seed + args.n_seeds):
        data = np.random.default_rng(seed)
        train_set, test = tasks().antecedent_task(data, 512), tasks().antecedent_task(data, 256)
        before = _outcome(init_model(np.random.default_rng(seed + 1), len(test["vocab"]), 16, 1), test, True)
        start = time.perf_counter()
        params, _ = train(np.random.default_rng(seed + 1), train_set, **options)
        seconds.append(time.perf_counter() - start)
        after = _outcome(params, test, True)
        blind, _ = train(np.random.default_rng(seed + 1), train_set, positions=False, **options)
        share = _outcome(blind, test, False)["first_noun_share"]
        ok = after["accuracy"] >= 0.9 and after["weight"] > 0.5
        passing += ok
        weights.append((before["weight"], after["weight"]))
        shares.append(share)
        print(f"{seed:>6} {before['weight']:>9.3f} {after['accuracy']:>9.3f} {after['weight']:>9.3f} "
              f"{seconds[-1]:>6.2f} {share:>13.3f}  {'yes' if ok else 'NO'}")
    print(f"{passing}/{args.n_seeds} seeds reach accuracy >= 0.9 and attention on the antecedent > 0.5; "
          f"training takes {np.median(seconds):.2f} s (median) with " + (str(options) if options else "the defaults"))
    if args.record:
        from _record import record

        settings = str(options) if options else "the defaults"
        record(__file__, f"{passing}/{args.n_seeds} seeds (from {args.first_seed}) reach both figures with "
                         f"{settings}; attention on the antecedent {np.mean([w[0] for w in weights]):.2f} before, "
                         f"{np.mean([w[1] for w in weights]):.2f} after; without positions "
                         f"{np.mean(shares):.2f} of noun answers right (chance 0.5); "
                         f"{np.median(seconds):.2f} s per training",
               {"seeds": args.n_seeds, "first_seed": args.first_seed, "passing": passing, "options": options,
                "seconds_median": round(float(np.median(seconds)), 3),
                "weight_before_mean": round(float(np.mean([w[0] for w in weights])), 3),
                "weight_after_mean": round(float(np.mean([w[1] for w in weights])), 3),
                "no_positions_share_mean": round(float(np.mean(shares)), 3)})
    return 0 if passing >= 0.9 * args.n_seeds else 1


if __name__ == "__main__":
    sys.exit(main())
