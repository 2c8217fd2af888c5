"""What grading costs against the tests it runs: ``attention-kit grade`` against plain pytest, per part.

    python benchmarks/grade_cost.py [--n 10] [--parts 1,2,3,all] [--busy PER_CORE] [--jobs CORES]
                                     [--rounds R] [--record]

For each part, N copies of the reference are graded side by side in the same
conditions: by ``python -m grader grade --force`` (sandboxed workers, fair
grading, the kit's own check, the gradebook; once with a kit checked before,
as a term goes, and once as a kit's very first batch), and by plain pytest, one
in-process ``python -m pytest`` per copy over the same public and hidden test
files (``--impl COPY``: no sandbox, no batch). Core-seconds come from the
kernel's accounting: each run in a control group of its own, whose CPU
counter holds every process it started (``_kernel_cpu``; the figures say
``counted_by``). Where no group can be made, user + system time of every
process each run waited for (``getrusage``), and for ``grade`` at least what
a sampler of all its descendants saw in ``/proc`` (sandboxed workers may end
without being waited for): lower bounds, grade's about 6% low. The ratio is
grade's core-seconds over pytest's, per submission; the batch's fixed cost is
grade's core-seconds for one copy less one copy's share of the batch.
``--busy K`` runs both under ``nice -n 10`` beside K busy processes per core
(each stops by itself). ``--rounds R`` repeats the batch and the
plain pytest runs R times, alternately, and gives the rounds' medians: on a
shared or loaded machine one pair of runs moves by a tenth or more (part all
under load: 1.233x one day, 1.412x the next, from one pair each).

Both run as on an ordinary machine: Python writes its bytecode (the
environment's ``PYTHONDONTWRITEBYTECODE`` is dropped), and one plain pytest
run, not counted, comes first. Without them each plain pytest run compiled the
kit and rewrote the test modules again (about 0.2 core-s of Part I's 0.9), the
grading processes only once each, and grade looked a fifth cheaper than it is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _kernel_cpu  # noqa: E402
from grade_throughput import DescendantSampler, cpu_seconds  # noqa: E402

from grader.curriculum import load  # noqa: E402
from grader.grading.samples import _copy_reference  # noqa: E402
from grader.suite import graded_suite, hidden_folders  # noqa: E402

# A busy process also dies with the benchmark (Linux's parent-death signal): one stopped half way, even by a kill that
# skips its ``finally``, leaves none behind to load the next run (they are in sessions of their own).
DIE_WITH_PARENT = "import ctypes, signal\nctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
BUSY = DIE_WITH_PARENT + "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def measured(command: list[str], sample: bool, cache: Path | None = None) -> tuple[float, float, int]:
    """Run ``command``: (core-seconds, wall seconds, exit status).

    Counted by the kernel in a control group of the command's own (``_kernel_cpu``), where one can be made (grade
    and plain pytest alike); elsewhere ``getrusage``, and with ``sample`` the most of it and a sampler of the
    command's own descendants (never the load processes this script started), both lower bounds. ``cache``: the
    command's XDG_CACHE_HOME (where grade remembers a kit check that passed).
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}  # see the docstring
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    group = _kernel_cpu.group()
    before, start = cpu_seconds(), time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=env, preexec_fn=group.enter if group is not None else None)
    sampler = DescendantSampler(root=process.pid) if sample and group is None else None
    if sampler is not None:
        sampler.start()
    _, errors = process.communicate()
    wall, cpu = time.perf_counter() - start, cpu_seconds() - before
    if sampler is not None:
        sampler.done.set()
        sampler.join()
        cpu = max(cpu, sampler.total())
    if group is not None:
        cpu = group.seconds()
        group.remove()
    if process.returncode != 0:
        print(errors[-2000:])
    return cpu, wall, process.returncode


def cost(part: str, n: int, jobs: int, nice: int, scratch: Path, rounds: int = 1) -> dict[str, object]:
    """Grade and plain pytest on ``n`` copies of the reference, for ``part``: their figures.

    With ``rounds`` above 1, the batch and the plain pytest runs are repeated, one after the other in each
    round, and the figures are the median of the rounds' (each round's ratio compares runs close in time,
    which the machine's other load moves alike); the rounds' ratios are kept as their spread.
    """
    names = list(load().selected_names(part))
    suite, _ = graded_suite(hidden_folders(), names)
    files = [f.path for f in suite]
    folder = scratch / f"part{part}"
    for index in range(n):
        _copy_reference(folder / f"copy{index:02d}")
    prefix = ["nice", "-n", str(nice)] if nice else []
    grade = [*prefix, sys.executable, "-m", "grader", "grade", str(folder), "--out", str(scratch / f"out{part}"),
             "--jobs", str(jobs), "--force", "--part", part]
    one = scratch / f"one{part}"
    _copy_reference(one / "copy00")
    single = [*prefix, sys.executable, "-m", "grader", "grade", str(one), "--out", str(scratch / f"outone{part}"),
              "--jobs", "1", "--force", "--part", part]
    # A kit never checked before: its first batch grades the reference too (the kit's check, which also records
    # the reference's answers to the check's callbacks, grader.sandbox.sealed), here one copy's.
    first_cpu, _, _ = measured(single, sample=True, cache=scratch / f"cache{part}")
    # The same batch as a kit's very first: the check runs beside the students.
    new_cpu, _, code = measured(grade, sample=True, cache=scratch / f"new{part}")
    if code != 0:
        raise SystemExit(f"grade exited {code} on part {part} (a new kit)")
    warm_up = [*prefix, sys.executable, "-m", "pytest", *files, "--impl", str(folder / "copy00"), "-q", "-p",
               "no:cacheprovider", "-p", "no:xdist"]
    measured(warm_up, sample=False)  # the bytecode and the rewritten test modules written, as after any first run
    found: list[dict[str, float]] = []
    for _ in range(rounds):
        # The batch, once the kit was checked (the same kit graded again, as a term goes), and its fixed cost.
        grade_cpu, grade_wall, code = measured(grade, sample=True, cache=scratch / f"cache{part}")
        if code != 0:
            raise SystemExit(f"grade exited {code} on part {part}")
        single_cpu, _, _ = measured(single, sample=True, cache=scratch / f"cache{part}")
        pytest_cpu = pytest_wall = 0.0
        for copy in sorted(folder.iterdir()):
            command = [*prefix, sys.executable, "-m", "pytest", *files, "--impl", str(copy), "-q", "-p",
                       "no:cacheprovider", "-p", "no:xdist"]
            cpu, wall, code = measured(command, sample=False)
            if code != 0:
                raise SystemExit(f"plain pytest exited {code} on part {part}")
            pytest_cpu, pytest_wall = pytest_cpu + cpu, pytest_wall + wall
        found.append({"grade_core_s_each": grade_cpu / n, "pytest_core_s_each": pytest_cpu / n,
                      "ratio": grade_cpu / pytest_cpu, "grade_wall_s": grade_wall, "pytest_wall_s": pytest_wall,
                      "fixed_core_s": single_cpu - grade_cpu / n,
                      "ratio_new_kit": new_cpu / pytest_cpu, "fixed_core_s_new_kit": first_cpu - grade_cpu / n})
    digits = {"grade_wall_s": 1, "pytest_wall_s": 1, "fixed_core_s": 2, "fixed_core_s_new_kit": 2}
    figures: dict[str, object] = {key: round(statistics.median(r[key] for r in found), digits.get(key, 3))
                                  for key in found[0]}
    if rounds > 1:
        figures["ratio_rounds"] = [round(r["ratio"], 3) for r in found]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="copies of the reference per part (default 10)")
    parser.add_argument("--parts", default=",".join([*load().parts, "all"]), help="parts, comma-separated")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grading processes (default: cores)")
    parser.add_argument("--busy", type=int, default=0, help="busy processes per core, and nice -n 10 (default 0)")
    parser.add_argument("--rounds", type=int, default=1, help="grade and pytest runs repeated, alternately; "
                        "the figures are the rounds' medians (default 1)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    load_processes = [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=3600)], start_new_session=True)
                      for _ in range(args.busy * (os.cpu_count() or 1))]
    probe = _kernel_cpu.group()
    if probe is not None:
        probe.remove()
    figures: dict[str, object] = {"n": args.n, "jobs": args.jobs, "busy_per_core": args.busy, "rounds": args.rounds,
                                  "counted_by": "a control group per run" if probe is not None else
                                  "getrusage and a sampler of /proc (lower bounds)"}
    try:
        with tempfile.TemporaryDirectory(prefix="grade-cost-") as scratch:
            for part in args.parts.split(","):
                found = cost(part, args.n, args.jobs, 10 if args.busy else 0, Path(scratch), args.rounds)
                figures[f"part_{part}"] = found
                print(f"part {part}: grade {found['grade_core_s_each']} core-s each, plain pytest "
                      f"{found['pytest_core_s_each']}: {found['ratio']}x ({found['ratio_new_kit']}x for a kit's "
                      f"first batch, which checks it); batch's fixed cost {found['fixed_core_s']} core-s "
                      f"({found['fixed_core_s_new_kit']} for a kit never checked before)"
                      + (f"; rounds {found['ratio_rounds']}" if "ratio_rounds" in found else ""), flush=True)
            figures["load_average"] = round(os.getloadavg()[0], 1)
    finally:
        for process in load_processes:
            process.kill()
            process.wait()
    if args.record:
        from _record import record

        ratios = ", ".join(f"part {key[5:]} {value['ratio']}x ({value['ratio_new_kit']}x as a kit's first batch)"
                           for key, value in figures.items() if key.startswith("part_") and isinstance(value, dict))
        busy = (f" under nice -n 10 beside {args.busy} busy processes per core" if args.busy
                else " with no load of its own (the load average says what else ran)")
        parts = [value for key, value in figures.items() if key.startswith("part_") and isinstance(value, dict)]
        fixed = (f"; the batch's fixed cost at most {max(part['fixed_core_s'] for part in parts)} core-s once the "
                 f"kit was checked (at most {max(part['fixed_core_s_new_kit'] for part in parts)} for a kit "
                 "never checked before, which grades the reference once)")
        rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
        rounds += f", core-seconds counted by {figures['counted_by']}"
        record(__file__, f"{args.n} copies of the reference per part{busy}{rounds}: grade over plain pytest {ratios}"
               f"{fixed}", figures, variant="busy" if args.busy else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
