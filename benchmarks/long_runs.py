"""How often exercise 9's graded long runs reach their figures, salt by salt.

The long runs (``tests/test_09_training.py``: ``test_training_resolves_the_pronoun``
and ``test_without_positions_the_nouns_cannot_be_told_apart``) train a model in a
loop the test runs itself over the student's ``model_gradients`` (``train_here``),
on a task variant and a seed drawn from the submission's salt. This runs that
loop over the reference's ``model_gradients`` for many salts, as the tests do:
the first of ``LONG_ATTEMPTS`` draws that reaches held-out accuracy 0.9 and
attention on the antecedent above 0.5 is judged. It prints how many salts
need a second or third draw, how many none reaches, and the range of the share
of noun answers naming the antecedent without positions (the test asks 0.3 to
0.7). The figures quoted in the test file come from here.

Usage: ``python benchmarks/long_runs.py [N_SALTS] [FIRST_SALT] [--impl DIR] [--record]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests import test_09_training as nine  # noqa: E402  (the graded tests' own loop and forward pass)
from tests.kit import LocalImplementation  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_salts", type=int, nargs="?", default=200)
    parser.add_argument("first_salt", type=int, nargs="?", default=0)
    parser.add_argument("--impl", default="solutions", help="folder holding training.py (default: solutions)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    gradients = LocalImplementation(ROOT / args.impl).function("training", "model_gradients")

    class Impl:  # the test's loop asks impl.model_gradients; nothing is remembered between salts
        model_gradients = staticmethod(gradients)

    nine.once = lambda impl, name, key, compute: compute()
    attempts, shares = {}, []
    for salt in range(args.first_salt, args.first_salt + args.n_salts):
        attempts[salt] = None
        for attempt in range(nine.LONG_ATTEMPTS):
            train_set, test = nine.variant_tasks([nine.VARIANT_SEED, salt, attempt])
            params, failure = nine.train_here(Impl, train_set, [nine.TRAIN_SEED, salt, attempt], nine.TRAIN_STEPS)
            if failure is not None:
                print(f"salt {salt}: {failure}")
                return 1
            if nine._resolves(params, test):
                attempts[salt] = attempt
                break
        train_set, test = nine.variant_tasks([nine.VARIANT_SEED, salt, 0])
        params, _ = nine.train_here(Impl, train_set, [nine.TRAIN_SEED, salt, 0], 40, positions=False)
        shares.append(nine._outcome(params, test, False)["first_noun_share"])
    later = {salt: attempt for salt, attempt in attempts.items() if attempt != 0}
    first = sum(attempt == 0 for attempt in attempts.values())
    print(f"{args.n_salts} salts from {args.first_salt}: {first} reach the figures at the first draw; "
          f"later or never: {later or 'none'}")
    print(f"without positions (40 steps): the share of noun answers naming the antecedent is "
          f"{min(shares):.3f} to {max(shares):.3f} (the test asks 0.3 to 0.7)")
    if args.record:
        from _record import record

        record(__file__, f"{args.n_salts} salts (from {args.first_salt}): {first} reach the figures at the first "
                         f"draw, {sum(a is not None and a > 0 for a in later.values())} at a later one, "
                         f"{sum(a is None for a in later.values())} never; without positions the share naming "
                         f"the antecedent {min(shares):.2f} to {max(shares):.2f} (asked 0.3 to 0.7)",
               {"salts": args.n_salts, "first_salt": args.first_salt, "first_draw": first,
                "later": {str(salt): attempt for salt, attempt in later.items()},
                "share_min": round(min(shares), 3), "share_max": round(max(shares), 3)})
    return 0 if None not in attempts.values() and 0.3 <= min(shares) and max(shares) <= 0.7 else 1


if __name__ == "__main__":
    sys.exit(main())
