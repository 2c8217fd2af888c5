"""Print the wall time of the whole graded suite against the reference.

Target (issue 33): at most 2 s wall on a 2-core machine, pytest start-up
included, and at most 4 times an empty pytest run, so that students run it all
the time. The CPU time (user + system) of the runs is printed too: on a shared,
loaded machine the wall time mostly measures the other processes, and the CPU
time is what to compare.

The runs are a student's: bytecode caching on (pytest keeps its rewritten
test modules between runs, as on any machine where ``PYTHONDONTWRITEBYTECODE``
is not set), and the tests' own values of seeded inputs read back from the
last run (``tests/kept_values.py``, in the student's cache folder), after one
warm-up run that is not counted.

``--part P`` times the test files of some parts of the manifest (``1``, ``1,2``). ``--compare
DIR`` times another checkout of the kit (e.g. ``git worktree add /tmp/old
38b91f4``) in the same runs, interleaved with this one, on the test files of
the chosen part that both have, and prints the difference in CPU time: the way
to say what a change costs the student's loop on a shared machine.

Besides the suite, each run times (in the same interleaved runs) an empty
pytest run (one empty test, the floor: issue 33 asks for the suite within 4
times it), ``pytest -m softmax`` (one exercise's file collected, not all 15)
and ``attention-kit status`` on an unchanged tree (its second run reads the
kept results back); ``--per-file`` adds each test file's CPU time alone.

Usage: ``python benchmarks/suite_time.py [RUNS] [--part P] [--compare DIR] [--per-file] [--record]``
(``--record`` writes the figures to benchmarks/results/, for the README).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _record import record  # noqa: E402

from grader.curriculum import load  # noqa: E402


def _files(parts: str | None) -> list[str]:
    """The graded test files of ``parts`` ("1", "1,2"; all of them without), relative to the kit's root."""
    chosen = None if parts is None else set(parts.split(","))
    return [e.test_file for e in load().exercises if chosen is None or str(e.part) in chosen]


EMPTY_TEST = "def test_nothing():\n    pass\n"


def _run(root: Path, files: list[str], *extra: str,
         command: list[str] | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """One run of the suite in ``root``: wall seconds, CPU seconds (user + system) and the process.

    ``extra`` goes to pytest; ``command`` replaces the pytest command (run in ``root`` all the same).
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)  # that checkout's own tests, grader and solutions
    env["ATTENTION_KIT_CACHE"] = str(Path(tempfile.gettempdir()) / f"attention-kit-benchmark-{root.name}")
    command = command or [sys.executable, "-m", "pytest", *files, "--impl", "solutions", "-q", "-p",
                          "no:cacheprovider", "-p", "no:xdist", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=5, help="how many runs (default 5)")
    parser.add_argument("--part", default=None, help="only the test files of these parts of the manifest (1, or 1,2)")
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR",
                        help="another checkout of the kit, timed in the same runs, interleaved")
    parser.add_argument("--per-file", action="store_true", help="also each test file's CPU time, alone")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    options = parser.parse_args()
    runs = options.runs
    files = _files(options.part)
    roots = [ROOT]
    if options.compare is not None:
        other = options.compare.resolve()
        files = [f for f in files if (other / f).is_file()]
        roots.append(other)
    if not files:
        print(f"no test files for part {options.part!r}")
        return 2
    times: dict[Path, list[float]] = {root: [] for root in roots}
    cpu: dict[Path, list[float]] = {root: [] for root in roots}
    loop: dict[tuple[Path, str], list[tuple[float, float]]] = {}  # (root, what) -> (wall, CPU) per run
    summaries: dict[Path, str] = {}
    with tempfile.TemporaryDirectory() as empty:
        (Path(empty) / "test_empty.py").write_text(EMPTY_TEST, encoding="utf-8")
        others = {"empty pytest": ([empty, "-p", "no:cacheprovider", "-p", "no:xdist", "-q"], 0),
                  "pytest -m softmax": (["tests", "--impl", "solutions", "-m", "softmax", "-q", "-p",
                                         "no:cacheprovider", "-p", "no:xdist"], 0),
                  "status, unchanged tree": (["status", "--impl", "solutions"], 1)}
        for number in range(runs + 1):  # the first is the warm-up: pytest writes its rewritten modules
            for root in roots if number % 2 else reversed(roots):
                wall, seconds, done = _run(root, files)
                if done.returncode != 0:
                    print(done.stdout[-2000:])
                    print(f"the suite failed against solutions/ in {root}; timing is meaningless")
                    return 1
                summaries[root] = done.stdout.strip().splitlines()[-1]
                for what, (arguments, grader) in others.items():
                    module = ["grader"] if grader else ["pytest"]
                    measured = _run(root, [], command=[sys.executable, "-m", *module, *arguments])[:2]
                    if number:
                        loop.setdefault((root, what), []).append(measured)
                if number:
                    times[root].append(wall)
                    cpu[root].append(seconds)
    for root in roots:
        label = "this checkout" if root == ROOT else str(root)
        print(f"{label}: graded suite vs solutions/ ({len(files)} files): {summaries[root]}")
        print(f"  wall time over {runs} runs: median {statistics.median(times[root]):.2f} s, "
              f"min {min(times[root]):.2f} s, max {max(times[root]):.2f} s (target < 2 s)")
        print(f"  CPU time (user + system) per run: median {statistics.median(cpu[root]):.2f} s, "
              f"min {min(cpu[root]):.2f} s")
    for (root, what), measured in loop.items():
        label = "this checkout" if root == ROOT else root.name
        print(f"  {label}: {what}: median {statistics.median(w for w, _ in measured):.2f} s wall, "
              f"{statistics.median(c for _, c in measured):.2f} CPU-s")
    empty_cpu = statistics.median(c for _, c in loop[(ROOT, "empty pytest")])
    empty_wall = statistics.median(w for w, _ in loop[(ROOT, "empty pytest")])
    print(f"  the suite against an empty pytest run: {statistics.median(times[ROOT]) / empty_wall:.1f}x wall, "
          f"{statistics.median(cpu[ROOT]) / empty_cpu:.1f}x CPU (target at most 4x)")
    if options.per_file:
        for file in files:
            spent = sorted(_run(ROOT, [file])[1] for _ in range(max(1, runs // 2)))
            print(f"  {file}: {spent[len(spent) // 2]:.2f} CPU-s alone ({spent[len(spent) // 2] - empty_cpu:.2f} "
                  "above an empty run)")
    figures = {"runs": runs, "part": options.part or "all", "files": len(files),
               "median_s": round(statistics.median(times[ROOT]), 3), "min_s": round(min(times[ROOT]), 3),
               "max_s": round(max(times[ROOT]), 3), "cpu_s": round(statistics.median(cpu[ROOT]), 3),
               "pytest": summaries[ROOT].split(" in ")[0], "empty_cpu_s": round(empty_cpu, 3),
               "empty_median_s": round(empty_wall, 3),
               "m_softmax_cpu_s": round(statistics.median(c for _, c in loop[(ROOT, "pytest -m softmax")]), 3),
               "status_unchanged_s": round(statistics.median(w for w, _ in loop[(ROOT, "status, unchanged tree")]), 3),
               "status_unchanged_cpu_s": round(statistics.median(c for _, c in loop[(ROOT, "status, unchanged tree")]),
                                               3)}
    summary = (f"{figures['median_s']:.2f} s median over {runs} runs, {figures['cpu_s']:.2f} CPU-s per run "
               f"({figures['cpu_s'] / empty_cpu:.1f}x an empty pytest run; target < 2 s, 4x); status on an unchanged "
               f"tree {figures['status_unchanged_s']:.2f} s")
    if options.compare is not None:
        base = statistics.median(cpu[roots[1]])
        change = statistics.median(cpu[ROOT]) / base - 1
        print(f"CPU time against {roots[1]}: {change:+.1%} (median of each; min to min "
              f"{min(cpu[ROOT]) / min(cpu[roots[1]]) - 1:+.1%})")
        figures.update({"compared_with": roots[1].name, "compared_cpu_s": round(base, 3),
                        "cpu_change": round(change, 4)})
        summary += f"; {change:+.0%} CPU against {roots[1].name}"
    if options.record:
        record(__file__, summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
