"""Which private pytest functions would a speed-up patch pay for? Their CPU share of a grading process.

    python benchmarks/pytest_patches.py [--n 12] [--unfinished] [--part 1] [--record]

Grades a class in this process as a grading process does
(``grader.grading.session.grade_in_process``, student code in its isolated
workers) and prints, per student, the grading process's CPU time and the CPU
time spent inside each candidate private pytest function, each wrapped with
a timer. Run it with ``ATTENTION_KIT_NO_SPEEDUPS=1`` to see what a function
costs unpatched, and without to see what is left with the kit's speed-ups
(``grader.grading.speedups``). A patch can save at most the unpatched cost:
below 5% of the grading time, it is not worth a private function.

A ratio inside one process, so much steadier on a shared machine than
``grade_throughput.py``'s core-seconds, whose run-to-run noise (10-40% under
load) hides effects of a few percent. The timers' own cost (two clock reads
per call) makes the unpatched figures upper bounds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SPENT: dict[str, float] = {}


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, adding the thread CPU time of each call to ``SPENT[name]``."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.thread_time() - started

    return wrapper


def instrument(session_module: Any, speedups: Any) -> None:
    """Wrap the candidates: module functions after the kit's patches, a session's after it is made."""
    from _pytest import fixtures
    from _pytest._code import code

    apply = speedups.patch_pytest

    def patch_then_time() -> None:
        apply()
        if not getattr(code, "timed_by_benchmark", False):
            code.getstatementrange_ast = timed("getstatementrange_ast", code.getstatementrange_ast)
            fixtures.getfuncargnames = timed("getfuncargnames", fixtures.getfuncargnames)
            code.Code.path = property(timed("Code.path", code.Code.path.fget))
            code.timed_by_benchmark = True

    session_module.patch_pytest = patch_then_time
    made = session_module.Session.__init__

    def session_then_time(self: Any, job: Any) -> None:
        made(self, job)
        self.session.gethookproxy = timed("Session.gethookproxy", self.session.gethookproxy)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for hook in ("pytest_runtest_logstart", "pytest_runtest_logreport", "pytest_runtest_logfinish"):
            for implementation in getattr(self.config.hook, hook).get_hookimpls():
                if implementation.plugin is reporter:
                    implementation.function = timed("terminal reporter's per-test hooks", implementation.function)

    session_module.Session.__init__ = session_then_time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="students (default 12)")
    parser.add_argument("--unfinished", action="store_true",
                        help="every student hands in the untouched stubs (every test fails with a traceback)")
    parser.add_argument("--part", default="1", help="the course's part to grade (default 1)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    from grader.curriculum import make_importable, select_part

    make_importable()
    select_part(args.part)
    from grader.grading import session, speedups
    from grader.grading.records import Job, suite_files
    from grader.grading.samples import _copy_reference, plant_mutants
    from grader.suite import graded_suite

    instrument(session, speedups)
    work = Path(tempfile.mkdtemp(prefix="pytest-patches-"))
    try:
        mutants = plant_mutants(work / "_pool", args.n)
        folders = []
        for index in range(args.n):
            target = work / f"student{index:02d}"
            if args.unfinished:
                shutil.copytree(ROOT / "exercises", target, ignore=shutil.ignore_patterns("__pycache__"))
            elif index % 3 == 0 or not mutants:
                _copy_reference(target)
            else:
                shutil.copytree(mutants[index % len(mutants)], target)
            folders.append(target)
        suite = graded_suite(None, None)[0]
        options = {"files": tuple(f.path for f in suite), "suite": suite_files(suite)}
        session.grade_in_process(Job(student="warm-up", folder=str(folders[0]), **options))  # collection: once
        SPENT.clear()
        cpu = 0.0
        for folder in folders:
            started = time.process_time()
            result = session.grade_in_process(Job(student=folder.name, folder=str(folder), **options))
            cpu += time.process_time() - started
            if result.error:
                print(f"{folder.name}: not graded: {result.error}")
                return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    off = "off" if not all(speedups.enabled(name) for name in speedups.SPEEDUPS) else "on"
    kind = "unfinished (stubs)" if args.unfinished else "a third correct, the rest mutants"
    print(f"{args.n} students ({kind}), part {args.part}, the kit's speed-ups {off}")
    print(f"grading process CPU per student: {cpu / args.n * 1000:.1f} ms")
    shares = {}
    for name in ("getstatementrange_ast", "getfuncargnames", "Code.path", "Session.gethookproxy",
                 "terminal reporter's per-test hooks"):
        spent = SPENT.get(name, 0.0) / args.n
        shares[name] = round(spent / (cpu / args.n), 4)
        print(f"  in {name}: {spent * 1000:.2f} ms ({spent / (cpu / args.n):.1%})")
    if args.record:
        from _record import record

        largest = max(shares, key=shares.__getitem__)
        record(__file__, f"{kind}, speed-ups {off}: {largest} {shares[largest]:.0%} of a grading process, "
               f"{cpu / args.n * 1000:.0f} ms CPU per student",
               {"students": args.n, "unfinished": args.unfinished, "part": args.part, "speedups": off,
                "cpu_ms_per_student": round(cpu / args.n * 1000, 1), "shares": shares})
    return 0


if __name__ == "__main__":
    sys.exit(main())
