"""Whether a mistake's grade depends on the inputs drawn for its submission: the same mistake under several keys.

Graded, every submission gets inputs of its own (``tests/effort.py``: the gates' and twins' draws, salted by the
submission's bytes and the grader's key). Two students with the same mistake then meet different inputs, and a
gate whose verdict depends on the draw gives them different grades: sizes that agree on one draw and not another
(``attention-weights-transposed`` crashes only where ``n_q != n_k``), a move that breaks the structure of one
input and not another's (Pearson's correlation is Spearman's on evenly spaced values). This runs every mistake of
the catalogue (``grader/mutants``) and of the held-out set (``benchmarks/heldout``) under each key, with that key
mixed in as the grading process mixes the grader's (``tests.effort.use_draw_key``), and lists those whose
failing tests differ between keys: each is a test whose outcome a student's draw decides, not the student's code.

Usage: ``python benchmarks/draw_fairness.py [--keys N] [--jobs J] [--only SUBSTRING]`` (8 keys by default, the
first the empty one, a student's own run: about 8 minutes on 2 cores). A test that one draw in five decides shows
under 8 keys with probability 1 - 0.8^8 - 0.2^8 = 0.83: more keys for a rarer one. Exit status 1 when a mistake's
failing tests vary.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import multiprocessing
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.heldout import load as load_heldout  # noqa: E402
from benchmarks.heldout import plant  # noqa: E402


def _failing(job: tuple[str, str, str]) -> tuple[str, tuple[str, ...] | str]:
    """Plant one mistake (``kind`` "catalogue" or "heldout", its id) and run its exercise's tests under ``key``."""
    kind, mistake_id, key = job
    from grader.curriculum import load as load_curriculum
    from grader.mutants import apply, load_catalogue
    from grader.mutants.report import run_tests
    from tests import effort

    effort.use_draw_key(key)
    with tempfile.TemporaryDirectory(prefix="attention-kit-fairness-") as workdir:
        try:
            if kind == "catalogue":
                mutant = next(m for m in load_catalogue() if m.id == mistake_id)
                target, exercise = apply(mutant, Path(workdir) / mistake_id), mutant.exercise
            else:
                mistake = next(m for m in load_heldout() if m.id == mistake_id)
                target, exercise = plant(mistake, Path(workdir) / mistake_id), mistake.run
        except ValueError as error:
            return f"{kind}:{mistake_id}", f"not planted: {error}"
        run = run_tests(load_curriculum().exercise(exercise).test_path, target)
    if run.exit_code not in (0, 1):
        return f"{kind}:{mistake_id}", f"pytest could not run (exit {run.exit_code})"
    return f"{kind}:{mistake_id}", tuple(sorted(run.failed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=8, help="how many keys (the first is the empty one)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="only the mistakes whose id contains this")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    from grader.mutants import load_catalogue

    mistakes = [("catalogue", m.id) for m in load_catalogue() if args.only in m.id]
    mistakes += [("heldout", m.id) for m in load_heldout() if args.only in m.id]
    keys = [""] + [hashlib.sha256(f"draw fairness {index}".encode()).hexdigest() for index in range(1, args.keys)]
    jobs = [(kind, mistake_id, key) for key in keys for kind, mistake_id in mistakes]
    context = multiprocessing.get_context("spawn")
    outcomes: dict[str, list] = {}
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        for name, failing in pool.map(_failing, jobs, chunksize=8):
            outcomes.setdefault(name, []).append(failing)
    varying = {name: runs for name, runs in outcomes.items() if len(set(runs)) > 1}
    for name, runs in sorted(varying.items()):
        every = set().union(*(set(run) for run in runs if isinstance(run, tuple)))
        print(f"{name}: failing tests differ between keys")
        for test in sorted(every):
            under = [index for index, run in enumerate(runs) if isinstance(run, tuple) and test in run]
            if len(under) < len(runs):
                print(f"    {test}: fails under keys {under} of {len(runs)}")
        for index, run in enumerate(runs):
            if isinstance(run, str):
                print(f"    key {index}: {run}")
    summary = f"{len(outcomes)} mistakes under {len(keys)} keys: {len(varying)} whose failing tests depend on the key"
    print(summary)
    if args.record and not args.only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _record import record

        record(__file__, summary, {"mistakes": len(outcomes), "keys": len(keys), "varying": len(varying)})
    return 1 if varying else 0


if __name__ == "__main__":
    raise SystemExit(main())
