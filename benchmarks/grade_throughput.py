"""How fast does ``attention-kit grade`` go? Submissions per second and CPU cost per submission.

    python benchmarks/grade_throughput.py [--n 100] [--slow 5] [--unfinished 10] [--jobs CORES] [--keep DIR] [--record]

Generates N submissions (a third correct, the rest spread over the mutant
catalogue; ``--unfinished`` adds untouched stubs, whose every test fails with
a traceback), grades them in a fresh ``python -m grader grade --force`` with
``--jobs`` = the number of cores, and prints wall time, submissions per
second and core-seconds per submission (user + system CPU of this process
and of every process it waited for: the grader, its grading processes and
the isolated student processes), then where a student's grading time goes:
worker start-up (overlapping collection), pytest configuration and
collection, calls to the worker, the tests' own checks, and reports (from the
``timing`` that each results.json records).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grader.grading.grade import STUDENT_BUDGET  # noqa: E402
from grader.grading.samples import _copy_reference, plant_mutants  # noqa: E402


def make_class(folder: Path, n: int) -> None:
    """A third correct submissions, the rest cycling through the mutants that apply."""
    mutants = plant_mutants(folder / "_pool", n)
    for index in range(n):
        target = folder / f"student{index:03d}"
        if index % 3 == 0 or not mutants:
            _copy_reference(target)
        else:
            shutil.copytree(mutants[index % len(mutants)], target)
    shutil.rmtree(folder / "_pool", ignore_errors=True)  # none with --n 0


SLOW = {
    "sleeps": "\n\ndef {name}(*args, **kwargs):\n    import time\n    time.sleep(4.8)\n",
    "loops": "\n\ndef {name}(*args, **kwargs):\n    while True:\n        pass\n",
}


def add_slow(folder: Path, count: int) -> None:
    """``count`` submissions whose every function sleeps just under the per-call limit, or loops."""
    from grader.curriculum import load

    for index in range(count):
        kind = list(SLOW)[index % len(SLOW)]
        target = folder / f"slow{index:02d}_{kind}"
        _copy_reference(target)
        for exercise in load().exercises:
            with open(target / exercise.module_file, "a", encoding="utf-8") as module:
                module.write("".join(SLOW[kind].format(name=name) for name in exercise.functions))


def add_unfinished(folder: Path, count: int) -> None:
    """``count`` submissions that are the untouched stubs of ``exercises/`` (every test fails: NotImplementedError)."""
    for index in range(count):
        shutil.copytree(ROOT / "exercises", folder / f"unfinished{index:02d}",
                        ignore=shutil.ignore_patterns("__pycache__"))


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class DescendantSampler(threading.Thread):
    """CPU seconds of every descendant process, sampled from /proc (Linux).

    getrusage(RUSAGE_CHILDREN) only counts processes that were waited for; a
    sandboxed worker killed together with its bwrap parent may never be. So
    we also read each descendant's utime + stime every few hundredths of a
    second and keep the last value seen per process (a process living shorter
    than one sampling interval is missed, so this is a lower bound too). The
    tree is walked from this process through ``/proc/<pid>/task/<tid>/children``:
    a few dozen reads per sample, not the whole of /proc, so the sampler
    itself takes little from the grading it measures.
    """

    def __init__(self, interval: float = 0.05, root: int | None = None) -> None:
        super().__init__(daemon=True)
        self.root = root  # whose descendants are counted (default: this process's)
        self.interval, self.seen, self.done = interval, {}, threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def _children(self, pid: int) -> list[int]:
        found = []
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return found
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                    found.extend(int(child) for child in children.read().split())
            except OSError:
                continue
        return found

    def run(self) -> None:
        me = os.getpid()
        while not self.done.is_set():
            pending, visited = ([self.root] if self.root else self._children(me)), set()
            while pending:
                pid = pending.pop()
                if pid in visited:
                    continue
                visited.add(pid)
                try:
                    with open(f"/proc/{pid}/stat", "rb") as stat:
                        fields = stat.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                # Fields after the command name: utime/stime are the 12th/13th, starttime the 20th.
                key = (pid, int(fields[19]))  # (pid, start time) tells a reused pid from the earlier process
                self.seen[key] = max(self.seen.get(key, 0.0), (int(fields[11]) + int(fields[12])) / self.tick)
                pending.extend(self._children(pid))
            self.done.wait(self.interval)

    def total(self) -> float:
        return sum(self.seen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="number of submissions (default 100)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grading processes (default: cores)")
    parser.add_argument("--keep", type=Path, default=None, help="grade into this folder and keep it")
    parser.add_argument("--slow", type=int, default=0,
                        help="add this many slow submissions (sleeping or looping in every call)")
    parser.add_argument("--unfinished", type=int, default=0,
                        help="add this many unfinished submissions (the untouched stubs)")
    from grader.curriculum import load as load_curriculum

    parser.add_argument("--part", choices=(*load_curriculum().parts, "all"), default=None,
                        help="grade these exercises (default: the manifest's [course] part)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grade-throughput-") as scratch:
        submissions = Path(scratch) / "submissions"
        out = args.keep or Path(scratch) / "out"
        make_class(submissions, args.n)
        add_slow(submissions, args.slow)
        add_unfinished(submissions, args.unfinished)
        command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out),
                   "--jobs", str(args.jobs), "--force"] + (["--part", args.part] if args.part else [])
        sampler = DescendantSampler()
        cpu_before, start = cpu_seconds(), time.perf_counter()
        sampler.start()
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        errors: list[str] = []
        reader = threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True)
        reader.start()
        lines, finished = [], {}  # when each student's progress line came, in seconds from the start
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("[") and "] " in line and ": " in line:
                finished[line.split("] ", 1)[1].split(": ", 1)[0]] = time.perf_counter() - start
        returncode = process.wait()
        reader.join()
        sampler.done.set()
        sampler.join()
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu_before
        sampled = sampler.total()
        if returncode != 0:
            print("\n".join(lines)[-3000:], "".join(errors)[-3000:], sep="\n")
            print(f"grading failed with exit status {returncode}")
            return 1
        isolation = [line for line in lines if line.startswith("Isolation:")]
        slow = (f" + {args.slow} slow ones" if args.slow else "") + \
            (f" + {args.unfinished} unfinished" if args.unfinished else "")
        from grader.curriculum import load

        part = args.part or load().part
        print(f"{args.n} submissions{slow}, part {part} ({len(load().selection(part))} exercises), "
              f"--jobs {args.jobs} on {os.cpu_count()} cores")
        print(f"wall time:              {wall:.1f} s")
        total = args.n + args.slow + args.unfinished
        print(f"submissions per second: {total / wall:.2f}")
        print(f"core-seconds per submission: {cpu / total:.3f} (getrusage: self + waited children)")
        print(f"core-seconds per submission: {sampled / total:.3f} (all descendants, sampled from /proc)")
        print(f"load average at the end: {os.getloadavg()[0]:.1f} (other work on the machine slows the wall time)")
        print(isolation[0] if isolation else "Isolation: ?")
        honest = max((seconds for student, seconds in finished.items() if student.startswith("student")), default=0.0)
        if args.slow:
            slowest = max((seconds for student, seconds in finished.items() if student.startswith("slow")),
                          default=0.0)
            print(f"the last honest submission was graded at {honest:.1f} s, the last slow one at {slowest:.1f} s "
                  f"(each slow one may use its budget: {STUDENT_BUDGET:g} s of student code)")
        split = print_split(out, total)
        if args.record:
            from _record import record

            slow = f" + {args.slow} slow (the last honest one done at {honest:.0f} s)" if args.slow else ""
            variant = "".join([f"part{part}" if args.part and args.part != load().part else "",
                               "slow" if args.slow else "", "unfinished" if args.unfinished else ""])
            record(__file__, f"{args.n}{slow} in {wall:.0f} s (part {part}, --jobs {args.jobs}), "
                   f"{sampled / total:.2f} core-s each",
                   {"submissions": args.n, "slow": args.slow, "unfinished": args.unfinished, "part": part,
                    "jobs": args.jobs,
                    "wall_s": round(wall, 1), "last_honest_s": round(honest, 1), "per_second": round(total / wall, 2),
                    "core_s_each_getrusage": round(cpu / total, 3), "core_s_each_sampled": round(sampled / total, 3),
                    "split_s_each": split, "isolation": isolation[0] if isolation else "?"}, variant=variant)
    return 0


def print_split(out: Path, n: int) -> dict[str, float]:
    """Mean seconds per submission of each part of grading, from the results' ``timing``; returns them."""
    totals: dict[str, float] = {}
    for path in out.glob("*/results.json"):
        timing = json.loads(path.read_text(encoding="utf-8")).get("extra_data", {}).get("timing", {})
        for part, seconds in timing.items():
            totals[part] = totals.get(part, 0.0) + float(seconds)
    if not totals:
        print("split: no timing recorded")
        return {}
    parts = ", ".join(f"{part} {seconds / n:.3f}" for part, seconds in totals.items())
    print(f"split, wall seconds per submission in its grading process: {parts} "
          "(start-up: waiting for the worker; calls: exchanges with it, its work included; checks: the tests' own)")
    return {part: round(seconds / n, 4) for part, seconds in totals.items()}


if __name__ == "__main__":
    sys.exit(main())
