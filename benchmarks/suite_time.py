"""Print the wall time of the whole graded suite against the reference.

Target: under 1.5 s on a 2-core machine, pytest start-up included, so that
students run it all the time. The CPU time (user + system) of the runs is
printed too: on a shared, loaded machine the wall time mostly measures the
other processes. Usage: ``python benchmarks/suite_time.py [RUNS]``.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
