"""Measure the isolated worker's start-up time and per-call round trip.

Start-up: from constructing ``IsolatedImplementation`` to the first answer of
a fresh worker (sandbox, Python, numpy; or, where workers are forked, a fork of
the fork server, whose own start the first measurement includes and the
median leaves out). Round trip: one small call
(``softmax`` of a (4, 8) array, and a fair-mode ``scaled_dot_product_attention``
whose softmax is a callback to the reference), minus nothing: all overhead
included. Each round trip is given as wall time, CPU time in the grading process
(``time.process_time``) and CPU time in the worker's processes (bwrap and the
sandboxed Python: the user + system ticks of every descendant of this process,
read from ``/proc/<pid>/stat`` before and after the calls; Linux only, and
"n/a" elsewhere). Usage::

    python benchmarks/worker_overhead.py [--calls N] [--starts M] [--record]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def descendants_cpu() -> float | None:
    """CPU seconds (user + system) used so far by the live descendants of this process; None without /proc."""
    me, parents, times = os.getpid(), {}, {}
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # After the command name: ppid is the 2nd field, utime and stime the 12th and 13th (in clock ticks).
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = int(fields[11]) + int(fields[12])
    total = 0
    for pid, ticks in times.items():
        ancestor, hops = parents.get(pid), 0
        while ancestor not in (None, 0, 1, me) and hops < 20:
            ancestor, hops = parents.get(ancestor), hops + 1
        if ancestor == me:
            total += ticks
    return total / os.sysconf("SC_CLK_TCK")


def worker_cpu_seconds(implementation: object) -> float | None:
    """CPU seconds the worker of ``implementation`` used so far (a forked one: its own process only)."""
    worker = getattr(implementation, "_worker", None)  # grader.sandbox.process.WorkerProcess
    pid = getattr(worker, "worker_pid", None)
    if getattr(worker, "server", None) is not None and pid:
        try:
            with open(f"/proc/{pid}/schedstat") as stat:
                return int(stat.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return None
    return descendants_cpu()  # the worker's processes (bwrap, Python): the only descendants


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    options = parser.parse_args()
    figures: dict[str, object] = {}

    import numpy as np

    from grader.sandbox import proxy
    from grader.sandbox.limits import plan
    from grader.sandbox.proxy import IsolatedImplementation
    from tests.kit import LocalImplementation

    started = time.perf_counter()
    description = plan().summary
    probe = time.perf_counter() - started
    print(f"isolation: {description} (probed in {probe * 1000:.0f} ms, once per process)")

    starts, start_cpu, first = [], [], 0.0
    for index in range(options.starts + 1):  # the first one may also start the fork server
        begin = time.perf_counter()
        with IsolatedImplementation(ROOT / "solutions") as implementation:
            implementation.function("softmax", "softmax")  # waits for the worker and imports softmax.py
            took = time.perf_counter() - begin
            spent = worker_cpu_seconds(implementation)  # before its processes are killed
        if index == 0:
            first = took
            continue
        starts.append(took)
        if spent is not None:
            start_cpu.append(spent)
    figures["isolation"] = description
    figures["first_startup_ms"] = round(first * 1000)
    figures["startup_ms_median"] = round(statistics.median(starts) * 1000)
    figures["startup_worker_cpu_ms_mean"] = round(statistics.mean(start_cpu) * 1000, 1) if start_cpu else None
    in_worker = f"; {statistics.mean(start_cpu) * 1000:.1f} ms CPU in the worker" if start_cpu else ""
    print(f"start-up (new worker + first import): median {statistics.median(starts) * 1000:.0f} ms, "
          f"min {min(starts) * 1000:.0f} ms over {len(starts)}{in_worker}; the first one (with the fork server's "
          f"own start, where workers are forked) {first * 1000:.0f} ms")

    x = np.random.default_rng(0).normal(size=(4, 8))
    q = np.random.default_rng(1).normal(size=(2, 5, 8))
    local = LocalImplementation(ROOT / "solutions")
    with IsolatedImplementation(ROOT / "solutions") as implementation:
        for label, exercise, name, args, forget in [
            ("softmax", "softmax", "softmax", (x,), False),
            # Fair mode remembers the reference's answers (grader.sandbox.proxy._ANSWERS): the first figure is a
            # question asked before (as when many students' code asks the same), the second a new one each time.
            ("attention (fair: softmax is a callback, answered from memory)", "attention",
             "scaled_dot_product_attention", (q, q, q), False),
            ("attention (fair: softmax is a callback, run by the reference)", "attention",
             "scaled_dot_product_attention", (q, q, q), True),
        ]:
            remote = implementation.function(exercise, name)
            remote(*args)
            worker_cpu = descendants_cpu()
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(options.calls):
                if forget:
                    proxy._ANSWERS.clear()
                remote(*args)
            wall, cpu = (time.perf_counter() - wall) / options.calls, (time.process_time() - cpu) / options.calls
            after = descendants_cpu()
            worker_us = None if worker_cpu is None or after is None else (after - worker_cpu) / options.calls * 1e6
            # /proc counts clock ticks (10 ms each, usually): fewer than ten of them make a rough figure.
            rough = worker_us is not None and worker_us * options.calls / 1e6 < 10 / os.sysconf("SC_CLK_TCK")
            function = local.function(exercise, name)
            begin = time.perf_counter()
            for _ in range(options.calls):
                function(*args)
            inline = (time.perf_counter() - begin) / options.calls
            figures[f"round_trip_us: {label}"] = round(wall * 1e6)
            figures[f"grading_cpu_us: {label}"] = round(cpu * 1e6)
            figures[f"worker_cpu_us: {label}"] = None if worker_us is None else round(worker_us)
            in_worker = "n/a" if worker_us is None else f"{worker_us:.0f} us" + (" (rough: use more --calls)" * rough)
            print(f"round trip {label}: {wall * 1e6:.0f} us per call (CPU: {cpu * 1e6:.0f} us in the grading "
                  f"process, {in_worker} in the worker; in-process call {inline * 1e6:.0f} us)")
    if options.record:
        from _record import record

        softmax = figures["round_trip_us: softmax"]
        record(__file__, f"start-up {figures['startup_ms_median']} ms (median of {options.starts}), "
               f"round trip {softmax} us per softmax call", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
