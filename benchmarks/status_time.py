"""How long `attention-kit status` takes: a fresh copy, a finished tree, and a tree unchanged since the last status.

``status`` runs the whole graded suite, unless nothing changed since its last
run (it then reads that run's results back). The three cases a student meets:

- a fresh copy: every exercise still a stub (``exercises/``), the first run;
- a finished tree: every exercise done (``--impl solutions``), run again after
  a change (``--rerun``: the whole suite runs);
- an unchanged tree: the same command again, nothing changed (the kept
  results are read back).

Each is run as a student runs it, in a fresh process, with the kit's results
cache in a scratch folder; the wall time and the CPU time (user + system of
the process and its children) are printed, median over the runs, after one
warm-up run each. On a shared machine the wall time also measures the other
processes: the load average is recorded with the figures.

Usage: ``python benchmarks/status_time.py [RUNS] [--record]`` (default 3 runs;
``--record`` writes the figures to benchmarks/results/, for the docs).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import record  # noqa: E402

# What a student types, and the options that make the case (the cache folder is per case).
CASES = {
    "fresh copy": ["status"],
    "finished tree": ["status", "--impl", "solutions", "--rerun"],
    "unchanged tree": ["status", "--impl", "solutions"],
}


def run_status(arguments: list[str], cache: Path) -> tuple[float, float]:
    """One ``python -m grader ARGUMENTS`` in the kit's root: wall seconds and CPU seconds (user + system).

    Raises
    ------
    RuntimeError
        If the command crashed (a status that only reports failing tests exits 0 or 1).
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env |= {"PYTHONPATH": str(ROOT), "ATTENTION_KIT_CACHE": str(cache), "NO_COLOR": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "grader", *arguments], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1) or "Traceback" in done.stdout + done.stderr:
        raise RuntimeError(f"`attention-kit {' '.join(arguments)}` failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=3, help="runs of each case (default 3)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("RUNS must be at least 1")
    measured: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    with tempfile.TemporaryDirectory(prefix="attention-kit-status-time-") as scratch:
        for number in range(options.runs + 1):  # the first is the warm-up (bytecode, the cache filled)
            for case, arguments in CASES.items():
                cache = Path(scratch) / ("finished" if case != "fresh copy" else "fresh")
                if case == "fresh copy":  # a first run: nothing kept from before
                    shutil.rmtree(cache, ignore_errors=True)
                wall, cpu = run_status(arguments, cache)
                if number:
                    measured[case].append((wall, cpu))
    figures: dict[str, object] = {"runs": options.runs}
    for case, runs in measured.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        key = case.split()[0]
        figures[f"{key}_s"] = round(wall, 2)
        figures[f"{key}_cpu_s"] = round(cpu, 2)
        print(f"status, {case}: median {wall:.2f} s wall, {cpu:.2f} CPU-s "
              f"(min {min(w for w, _ in runs):.2f} s, max {max(w for w, _ in runs):.2f} s, {len(runs)} runs)")
    summary = (f"`attention-kit status`: fresh copy {figures['fresh_s']:.2f} s ({figures['fresh_cpu_s']:.2f} CPU-s), "
               f"finished tree {figures['finished_s']:.2f} s ({figures['finished_cpu_s']:.2f} CPU-s), "
               f"unchanged tree {figures['unchanged_s']:.2f} s (median of {options.runs})")
    print(summary)
    if options.record:
        record(__file__, summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
