"""Print, seed by seed, recall against distance with and without ALiBi's penalty, and accuracy at longer lengths.

For each seed: a fresh recall task from the given ``_distance_task.recall_task``
(40 pairs, d_k 48, margin 4, score noise 0.3, every distance asked 10 times),
and the implementation's ``recall_curve`` with slope 0.3 (critical distance
``1 + 4 / 0.3 = 14.33``) and with slope 0. A seed holds the claim when

* with the penalty, recall is at least 0.9 at every distance up to the
  critical distance minus 4 (distances 1 to 10) and at most 0.1 at every
  distance from the critical distance plus 4 on (19 to 40);
* without it, recall is at least 0.95 at every distance (flat).

The figures: the mean recall near (distances <= 10) and far (>= 19), the
distance where recall first drops below 0.5 (against the critical distance),
the mean measured margin (``score_margin``: noise makes the best distractor
score above 0, so the measured margin is below the nominal 4), and without
the penalty the lowest recall over the distances.

Beyond the training length, for the same seed: an embedding of 6 symbols in
16 dimensions drawn from the seed, 1024 latest-match contexts of length 16,
two heads trained on them with ``train_match_head``'s defaults (sinusoidal
inputs, slope 0; no positions, ALiBi slope 0.5), and their accuracy (``length_accuracy``) on
300 fresh latest-match contexts of lengths 16, 32 and 64. The seed holds
this claim when both heads reach 0.9 at length 16, the ALiBi head still
0.9 at 64, and the sinusoidal head falls below 0.6 at 64 (the graded test's
thresholds).

Usage: ``python benchmarks/claim_distance.py [N_SEEDS] [FIRST_SEED] [--impl DIR] [--record]``
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

N_PAIRS, D_K, MARGIN, NOISE, REPEATS, SLOPE, WINDOW = 40, 48, 4.0, 0.3, 10, 0.3, 4.0
N_SYMBOLS, D_HEAD, TRAIN_LENGTH, ALIBI_SLOPE, N_TRAIN, N_EVAL = 6, 16, 16, 0.5, 1024, 300
HEADS = {"sinusoidal": (True, 0.0), "alibi": (False, ALIBI_SLOPE)}


def lengths(distance, tasks, seed: int) -> dict:
    """Accuracy of the two trained heads at 1, 2 and 4 times the training length, for one seed."""
    rng = np.random.default_rng(seed)
    embedding = rng.normal(size=(N_SYMBOLS, D_HEAD))
    train_set = tasks.latest_match_task(rng, N_TRAIN, TRAIN_LENGTH, N_SYMBOLS)
    out = {}
    for name, (positions, slope) in HEADS.items():
        weight, _ = distance.train_match_head(rng, embedding, train_set, positions, slope)
        out[name] = [float(distance.length_accuracy(weight, embedding, tasks.latest_match_task(
            rng, N_EVAL, k * TRAIN_LENGTH, N_SYMBOLS), positions, slope)) for k in (1, 2, 4)]
    out["holds"] = bool(min(out["sinusoidal"][0], out["alibi"][0]) >= 0.9 and out["alibi"][2] >= 0.9
                        and out["sinusoidal"][2] < 0.6)
    return out


def one_seed(distance, tasks, seed: int) -> dict:
    """The curves with and without the penalty on the task of one seed, and whether the claim holds."""
    task = tasks.recall_task(np.random.default_rng(seed), N_PAIRS, D_K, MARGIN, noise=NOISE, repeats=REPEATS)
    t_star = float(distance.critical_distance(MARGIN, SLOPE))
    distances, recall = distance.recall_curve(task, SLOPE)
    _, flat = distance.recall_curve(task, 0.0)
    near, far = distances <= t_star - WINDOW, distances >= t_star + WINDOW
    below = distances[recall < 0.5]
    return {"near": float(recall[near].mean()), "far": float(recall[far].mean()),
            "near_min": float(recall[near].min()), "far_max": float(recall[far].max()),
            "half": int(below.min()) if below.size else N_PAIRS + 1, "flat_min": float(flat.min()),
            "margin": float(np.mean(distance.score_margin(task["queries"], task["keys"], task["answer"]))),
            "t_star": t_star,
            "holds": bool(recall[near].min() >= 0.9 and recall[far].max() <= 0.1 and flat.min() >= 0.95)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_seeds", type=int, nargs="?", default=100)
    parser.add_argument("first_seed", type=int, nargs="?", default=2026)
    parser.add_argument("--impl", default="solutions", help="folder holding distance.py (default: solutions)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    impl = LocalImplementation(ROOT / args.impl)
    distance, tasks = impl.module("distance"), impl.module("_distance_task")
    start = time.perf_counter()
    rows = []
    print(f"{'seed':>6} {'near':>6} {'far':>6} {'<0.5 at':>8} {'margin':>7} {'flat min':>9}  holds   "
          f"{'sinusoidal 16/32/64':>20} {'ALiBi 16/32/64':>16}  holds")
    for seed in range(args.first_seed, args.first_seed + args.n_seeds):
        row = one_seed(distance, tasks, seed)
        row["length"] = lengths(distance, tasks, seed)
        rows.append(row)
        sin, ali = row["length"]["sinusoidal"], row["length"]["alibi"]
        print(f"{seed:>6} {row['near']:>6.3f} {row['far']:>6.3f} {row['half']:>8} {row['margin']:>7.3f} "
              f"{row['flat_min']:>9.3f}  {'yes' if row['holds'] else 'NO ':<5} "
              f"{'/'.join(f'{a:.2f}' for a in sin):>20} {'/'.join(f'{a:.2f}' for a in ali):>16}  "
              f"{'yes' if row['length']['holds'] else 'NO'}")
    seconds = time.perf_counter() - start
    passing = sum(row["holds"] for row in rows)
    mean = {key: float(np.mean([row[key] for row in rows])) for key in ("near", "far", "half", "margin", "flat_min")}
    t_star = rows[0]["t_star"]
    summary = (f"{passing}/{args.n_seeds} seeds (from {args.first_seed}) hold the claim: with slope {SLOPE} "
               f"(critical distance {t_star:.2f}) recall {mean['near']:.3f} at distances <= {t_star - WINDOW:.0f} "
               f"and {mean['far']:.3f} at >= {np.ceil(t_star + WINDOW):.0f}, first below 0.5 at distance "
               f"{mean['half']:.1f} (mean); without the penalty the lowest recall is {mean['flat_min']:.3f}; "
               f"measured margin {mean['margin']:.2f} (nominal {MARGIN})")
    length_passing = sum(row["length"]["holds"] for row in rows)
    accuracy = {name: [float(np.mean([row["length"][name][k] for row in rows])) for k in range(3)] for name in HEADS}
    summary += (f". Beyond the training length: {length_passing}/{args.n_seeds} seeds hold (both >= 0.9 at 16, "
                "ALiBi >= 0.9 and sinusoidal < 0.6 at 64); mean accuracy at 16/32/64: sinusoidal "
                + "/".join(f"{a:.2f}" for a in accuracy["sinusoidal"]) + ", ALiBi "
                + "/".join(f"{a:.2f}" for a in accuracy["alibi"]))
    print(summary + f"; {seconds:.1f} s")
    if args.record:
        from _record import record

        record(__file__, summary,
               {"seeds": args.n_seeds, "first_seed": args.first_seed, "passing": passing,
                "fraction": round(passing / args.n_seeds, 3),
                "setting": {"n_pairs": N_PAIRS, "d_k": D_K, "margin": MARGIN, "noise": NOISE, "repeats": REPEATS,
                            "slope": SLOPE, "window": WINDOW},
                "critical_distance": round(t_star, 3),
                **{f"{key}_mean": round(value, 3) for key, value in mean.items()},
                "near_min_worst": round(min(row["near_min"] for row in rows), 3),
                "far_max_worst": round(max(row["far_max"] for row in rows), 3),
                "length_passing": length_passing, "length_fraction": round(length_passing / args.n_seeds, 3),
                "length_setting": {"n_symbols": N_SYMBOLS, "d": D_HEAD, "train_length": TRAIN_LENGTH,
                                   "n_train": N_TRAIN,
                                   "alibi_slope": ALIBI_SLOPE, "n_eval": N_EVAL, "eval_lengths": [16, 32, 64]},
                **{f"length_accuracy_{name}": [round(a, 3) for a in acc] for name, acc in accuracy.items()},
                "length_sinusoidal_64_worst": round(max(row["length"]["sinusoidal"][2] for row in rows), 3),
                "length_alibi_64_worst": round(min(row["length"]["alibi"][2] for row in rows), 3),
                "length_at_16_worst": round(min(min(row["length"]["sinusoidal"][0], row["length"]["alibi"][0])
                                                for row in rows), 3),
                "seconds": round(seconds, 2)})
    return 0 if min(passing, length_passing) >= 0.95 * args.n_seeds else 1


if __name__ == "__main__":
    sys.exit(main())
