"""Print the wall time of the whole graded suite against the reference.

Target: under 1.5 s on a 2-core machine, pytest start-up included, so that
students run it all the time. The CPU time (user + system) of the runs is
printed too: on a shared, loaded machine the wall time mostly measures the
other processes. Usage: ``python benchmarks/suite_time.py [RUNS] [--record]``
(``--record`` writes the figures to benchmarks/results/, for the README).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import record  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=5, help="how many runs (default 5)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    options = parser.parse_args()
    runs = options.runs
    command = [sys.executable, "-m", "pytest", "tests", "--impl", "solutions", "-q", "-p", "no:cacheprovider"]
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            print(done.stdout[-2000:])
            print("the suite failed against solutions/; timing is meaningless")
            return 1
    summary = done.stdout.strip().splitlines()[-1]
    print(f"graded suite vs solutions/: {summary}")
    print(f"wall time over {runs} runs: median {statistics.median(times):.2f} s, "
          f"min {min(times):.2f} s, max {max(times):.2f} s (target < 1.5 s)")
    print(f"CPU time (user + system) per run: median {statistics.median(cpu):.2f} s")
    if options.record:
        median = statistics.median(times)
        record(__file__, f"{median:.2f} s median over {runs} runs, {statistics.median(cpu):.2f} CPU-s per run "
               "(target < 1.5 s)",
               {"runs": runs, "median_s": round(median, 3), "min_s": round(min(times), 3),
                "max_s": round(max(times), 3), "cpu_s": round(statistics.median(cpu), 3),
                "pytest": summary.split(" in ")[0]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
