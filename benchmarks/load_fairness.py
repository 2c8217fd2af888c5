"""The same gradebook on a busy machine: a mixed class graded idle, then under ``nice -n 10`` beside bounded load.

    python benchmarks/load_fairness.py [--n 21] [--part all] [--per-core 4] [--jobs CORES] [--record]

Generates a class of at least 10 of every part (honest, wrong: the mutant
catalogue, crashing: ``os._exit`` in a function, looping: a ``while True`` in
one function of Part I and in one of Part III, slow: a function that computes
for a while, within its budget, sleeping: a function asleep past its budget,
syntax: a module that does not parse),
grades it with ``python -m grader grade --force`` once with nothing else
started, then once more under ``nice -n 10`` (the way a polite instructor runs
a batch job on a shared server) beside ``--per-core`` load processes per core
of three kinds, each in a session of its own as another user's would be:
busy loops, numpy streaming through more memory than the caches hold, and
runs of the kit's own graded suite. Every load process stops by itself
(after ``--load-seconds``, or when this script ends). The two gradebooks
(every student's status and scores) must be identical, and both runs must
exit 0; the script exits 1 otherwise.

The machine this runs on may be shared with other work: its load average is
recorded with the figures.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grader.grading.samples import _copy_reference, plant_mutants  # noqa: E402

KINDS = ("honest", "wrong", "crashing", "looping", "slow", "sleeping", "looping3", "syntax")
CRASH = "\n\ndef causal_mask(n):\n    import os\n    os._exit(3)\n"
LOOP = "\n\ndef causal_mask(n):\n    while True:\n        pass\n"
# Within the 5 s budget of a call whatever the load, and slow enough that a wall-clock limit would have noticed.
SLOW = ("\n\n_honest_mask = causal_mask\n\n\ndef causal_mask(n):\n    total = 0\n    for i in range(3_000_000):\n"
        "        total += i\n    return _honest_mask(n)\n")
# Asleep past a call's budget: the student's own time (the kernel tells sleeping from waiting for a CPU).
SLEEP = "\n\ndef causal_mask(n):\n    import time\n    time.sleep(30)\n"
# Part III: a loop in exercise 12 costs exercise 12's tests, never exercises 13-15's.
LOOP3 = "\n\ndef pooled_features(embedding, tokens, query_position):\n    while True:\n        pass\n"
EXTRA = {"crashing": ("masks", CRASH), "looping": ("masks", LOOP), "slow": ("masks", SLOW),
         "sleeping": ("masks", SLEEP), "looping3": ("negation", LOOP3), "syntax": ("distance", "\n\ndef (:\n")}
DIE_WITH_PARENT = "import ctypes, signal\nctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
LOAD = {
    "busy": "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n",
    "memory": ("import time\nimport numpy as np\nend = time.monotonic() + {seconds}\n"
               "a = np.ones(64 << 17)\nb = np.empty_like(a)\n"  # 64 MiB each: far beyond the caches
               "while time.monotonic() < end:\n    np.multiply(a, 1.0001, out=b)\n    a, b = b, a\n"),
    "suite": ("import subprocess, sys, time\nend = time.monotonic() + {seconds}\n"
              "while time.monotonic() < end:\n"
              "    subprocess.run([sys.executable, '-m', 'pytest', 'tests', '--impl', 'solutions', '-q', '-p', "
              "'no:cacheprovider'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=max(1, end - "
              "time.monotonic()))\n"),
}


def make_class(folder: Path, n: int) -> dict[str, str]:
    """``n`` submissions cycling through ``KINDS``; their kinds by name."""
    mutants = plant_mutants(folder / "_pool", n)
    kinds = {}
    for index in range(n):
        kind = KINDS[index % len(KINDS)]
        target = folder / f"{kind}{index:02d}"
        if kind == "wrong" and mutants:
            shutil.copytree(mutants[index % len(mutants)], target)
        else:
            _copy_reference(target)
            if kind in EXTRA:
                module_name, extra = EXTRA[kind]
                with open(target / f"{module_name}.py", "a", encoding="utf-8") as module:
                    module.write(extra)
        kinds[target.name] = kind
    shutil.rmtree(folder / "_pool")
    return kinds


def grade(submissions: Path, out: Path, jobs: int, niceness: int,
          part: str = "all") -> tuple[int, float, list[dict[str, str]], str]:
    """Grade ``submissions`` into ``out``: (exit status, wall seconds, the gradebook's rows by student, output)."""
    command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out), "--jobs", str(jobs),
               "--force", "--part", part]
    if niceness:
        command = ["nice", "-n", str(niceness), *command]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    rows: list[dict[str, str]] = []
    if (out / "grades.csv").is_file():
        with open(out / "grades.csv", newline="", encoding="utf-8") as table:
            rows = sorted(csv.DictReader(table), key=lambda row: row["student"])
    return done.returncode, wall, rows, done.stdout[-4000:] + done.stderr[-2000:]


def start_load(per_core: int, seconds: float) -> list[subprocess.Popen]:
    """``per_core`` load processes per core (busy, memory, suite in turn), each stopping after ``seconds``."""
    kinds = list(LOAD)
    processes = []
    for index in range(per_core * (os.cpu_count() or 1)):
        # Each also dies with the benchmark (Linux's parent-death signal): a run killed half way leaves no load behind.
        code = DIE_WITH_PARENT + LOAD[kinds[index % len(kinds)]].format(seconds=seconds)
        processes.append(subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return processes


def stop_load(processes: list[subprocess.Popen]) -> None:
    """End the load now (each would stop by itself): the whole session of each, so a suite run goes too."""
    for process in processes:
        try:
            os.killpg(process.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()


def differences(idle: list[dict[str, str]], busy: list[dict[str, str]]) -> list[str]:
    """What differs between the two gradebooks, one line per student and column."""
    found = []
    by_student = {row["student"]: row for row in busy}
    for row in idle:
        other = by_student.get(row["student"])
        if other is None:
            found.append(f"{row['student']}: missing under load")
            continue
        found += [f"{row['student']} {column}: {value!r} idle, {other.get(column)!r} under load"
                  for column, value in row.items() if other.get(column) != value]
    found += [f"{student}: only under load" for student in set(by_student) - {row["student"] for row in idle}]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=21, help="submissions (at least 10; default 21)")
    parser.add_argument("--part", default="all", help="the part graded (default: all)")
    parser.add_argument("--per-core", type=int, default=4, help="load processes per core (default 4)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grading processes (default: cores)")
    parser.add_argument("--load-seconds", type=float, default=1800.0,
                        help="the longest a load process runs before it stops by itself (default 1800)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    if args.n < 10:
        parser.error("--n must be at least 10")
    with tempfile.TemporaryDirectory(prefix="load-fairness-") as scratch:
        submissions = Path(scratch) / "class"
        kinds = make_class(submissions, args.n)
        idle_code, idle_wall, idle, idle_said = grade(submissions, Path(scratch) / "idle", args.jobs, 0, args.part)
        print(f"idle: exit {idle_code}, {idle_wall:.0f} s, {len(idle)} rows")
        load = start_load(args.per_core, args.load_seconds)
        try:
            time.sleep(2)  # the load is running before grading starts
            busy_code, busy_wall, busy, busy_said = grade(submissions, Path(scratch) / "busy", args.jobs, 10, args.part)
            load_average = os.getloadavg()[0]
        finally:
            stop_load(load)
        print(f"nice -n 10 beside {len(load)} load processes ({args.per_core} per core): exit {busy_code}, "
              f"{busy_wall:.0f} s, {len(busy)} rows, load average {load_average:.1f}")
        different = differences(idle, busy)
        for line in different[:40]:
            print("  " + line)
        same = not different and len(idle) == args.n
        print("the same gradebook" if same else f"{len(different)} differences")
        if idle_code or busy_code or not same:
            print(idle_said if idle_code else busy_said)
        counts = {kind: sum(1 for k in kinds.values() if k == kind) for kind in KINDS}
        if args.record:
            from _record import record

            verdict = "the same gradebook" if same else f"{len(different)} differences"
            record(__file__, f"{args.n} students ({', '.join(f'{v} {k}' for k, v in counts.items())}): "
                   f"{verdict}, exit {idle_code} idle ({idle_wall:.0f} s) and exit {busy_code} under nice -n 10 "
                   f"beside {args.per_core} load processes per core ({busy_wall:.0f} s, load {load_average:.0f}; "
                   "on a machine shared with other work)",
                   {"students": args.n, "kinds": counts, "jobs": args.jobs, "per_core": args.per_core,
                    "idle_exit": idle_code, "idle_wall_s": round(idle_wall, 1), "busy_exit": busy_code,
                    "busy_wall_s": round(busy_wall, 1), "load_average_busy": round(load_average, 1),
                    "same_gradebook": same, "differences": different[:40],
                    "note": "the machine was shared with other engineers' work during both runs: 'idle' means "
                            "no load started by this script"})
        return 0 if same and idle_code == 0 and busy_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
