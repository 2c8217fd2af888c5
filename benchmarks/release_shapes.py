"""How long the test of one release shape takes: build it, install it in a fresh venv, run pytest, status, demos.

``grader/tests/test_release_shapes.py`` (marked slow) builds each shape of
the student release (Parts I, II, III, all, a course's Part III, a course's
Parts I and III), installs it editable in a fresh virtual environment as its
README says and runs ``pytest``, ``attention-kit status`` and every demo
there. This script runs that test for the shapes named (default: three of
them), each in a fresh pytest process, and prints the wall time and the CPU
time (user + system of the process and its children) of each, and their
medians. On a shared machine the wall time also measures the other
processes: the load average is recorded with the figures.

Usage: ``python benchmarks/release_shapes.py [SHAPE ...] [--record]`` (shapes: part-1, part-2, part-3, all,
course-part-3, course-parts-1-3; ``--record`` writes the figures to benchmarks/results/, for the docs).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import record  # noqa: E402

TEST = "grader/tests/test_release_shapes.py::test_a_release_works_on_its_own_from_a_fresh_venv"
SHAPES = ("part-1", "part-2", "part-3", "all", "course-part-3", "course-parts-1-3")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", metavar="SHAPE", help=f"one of {', '.join(SHAPES)}")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    args.shapes = args.shapes or ["part-1", "part-3", "course-parts-1-3"]
    unknown = [shape for shape in args.shapes if shape not in SHAPES]
    if unknown:
        parser.error(f"SHAPE: {', '.join(unknown)} is not one of {', '.join(SHAPES)}")
    environment = os.environ | {"PYTHONPATH": str(ROOT)}
    walls, cpus = {}, {}
    for shape in args.shapes:
        start, before = time.monotonic(), children_cpu()
        done = subprocess.run([sys.executable, "-m", "pytest", f"{TEST}[{shape}]", "-q", "-p", "no:randomly",
                               "-p", "no:cacheprovider"], cwd=ROOT, env=environment, capture_output=True, text=True)
        walls[shape], cpus[shape] = time.monotonic() - start, children_cpu() - before
        state = "passed" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
        print(f"{shape:<18} {walls[shape]:6.1f} s wall  {cpus[shape]:6.1f} CPU-s  {state}", flush=True)
        if done.returncode != 0:
            print(done.stdout[-3000:], file=sys.stderr)
            return 1
    wall, cpu = statistics.median(walls.values()), statistics.median(cpus.values())
    summary = (f"one release shape tested (built, installed in a fresh venv, pytest, status, every demo): "
               f"{cpu:.0f} CPU-s, {wall:.0f} s wall (median over {', '.join(args.shapes)})")
    print(summary)
    if args.record:
        record(__file__, summary, {"shapes": list(args.shapes), "cpu_s_median": round(cpu, 1),
                                   "wall_s_median": round(wall, 1),
                                   "cpu_s": {k: round(v, 1) for k, v in cpus.items()},
                                   "wall_s": {k: round(v, 1) for k, v in walls.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
