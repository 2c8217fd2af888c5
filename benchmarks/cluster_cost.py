"""What the Dask engine costs: core-seconds per submission of `grade --cluster local:2` against local grading.

    python benchmarks/cluster_cost.py [--n 12] [--part 1] [--workers 2] [--repeat 2] [--record]

The same class (N copies of the reference) is graded by ``python -m grader
grade --force --jobs W`` (the local pool) and by ``... --cluster local:W`` (a
``LocalCluster`` of W worker processes that this command starts, each grading
in its own pool, sandboxed alike), alternately, ``--repeat`` times each; the
figures are the medians. Core-seconds come from the kernel's accounting of
every process of the command (``grade_throughput.DescendantSampler``: the
scheduler, the nannies, the Dask workers, their grading processes and
sandboxed workers). Each engine is also run on one copy, so that its fixed
cost (starting the pool, or the cluster) is told apart from its cost per
submission: ``per_submission = (cost(N) - cost(1)) / (N - 1)``. The engine's
overhead is the ratio of the cluster's cost per submission over the local
one (the target is at most 1.1x), and of the totals for the N copies, from
the medians of the runs and from their minimums (on a shared machine the
other load moves single runs by a third).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grade_cost import measured  # noqa: E402

from grader.grading.samples import _copy_reference  # noqa: E402


def run(folder: Path, out: Path, part: str, engine: list[str]) -> float:
    """Core-seconds of one ``grade --force`` of ``folder`` with ``engine``'s options."""
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "--force",
               "--part", part, *engine]
    cpu, _, code = measured(command, sample=True)
    if code != 0:
        raise SystemExit(f"grade exited {code}: {' '.join(command)}")
    return cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="copies of the reference (default 12)")
    parser.add_argument("--part", default="1", help="the part graded (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="grading processes / Dask workers (default 2)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each engine and size (default 2)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    engines = {"local": ["--jobs", str(args.workers)], "cluster": ["--cluster", f"local:{args.workers}"]}
    costs: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="cluster-cost-") as scratch:
        classes = {}
        for size in (1, args.n):
            classes[size] = Path(scratch) / f"class{size}"
            for index in range(size):
                _copy_reference(classes[size] / f"copy{index:02d}")
        for _ in range(args.repeat):
            for size, folder in classes.items():
                for name, options in engines.items():  # alternately: the machine's load falls on both alike
                    cpu = run(folder, Path(scratch) / f"out-{name}-{size}", args.part, options)
                    costs.setdefault((name, size), []).append(cpu)
                    print(f"{name}, {size} submission(s): {cpu:.1f} core-s", flush=True)
    figures: dict[str, object] = {"n": args.n, "part": args.part, "workers": args.workers, "repeat": args.repeat,
                                  "runs": {f"{name}-{size}": [round(c, 2) for c in values]
                                           for (name, size), values in costs.items()}}
    # The median of the runs, and their minimum (the run the machine's other load disturbed least).
    for estimate, pick in (("median", statistics.median), ("min", min)):
        found: dict[str, dict[str, float]] = {}
        for name in engines:
            total, one = pick(costs[(name, args.n)]), pick(costs[(name, 1)])
            each = (total - one) / (args.n - 1)
            found[name] = {"core_s_total": round(total, 2), "core_s_one": round(one, 2),
                           "per_submission": round(each, 3), "fixed": round(one - each, 2)}
        found["ratio_per_submission"] = round(found["cluster"]["per_submission"] / found["local"]["per_submission"], 3)
        found["ratio_total"] = round(found["cluster"]["core_s_total"] / found["local"]["core_s_total"], 3)
        figures[estimate] = found
    median, least = figures["median"], figures["min"]
    assert isinstance(median, dict) and isinstance(least, dict)
    local, remote = median["local"], median["cluster"]
    summary = (f"part {args.part}, {args.n} copies of the reference, {args.workers} workers, {args.repeat} runs each: "
               f"local:{args.workers} over the local pool {median['ratio_per_submission']}x per submission "
               f"({remote['per_submission']} vs {local['per_submission']} core-s) and {median['ratio_total']}x in "
               f"total (medians; the least disturbed runs: {least['ratio_per_submission']}x and "
               f"{least['ratio_total']}x); the cluster's fixed cost {remote['fixed']} core-s (the pool's "
               f"{local['fixed']})")
    print(summary)
    if args.record:
        from _record import record

        record(__file__, summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
