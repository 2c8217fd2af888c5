"""Measure the isolated worker's start-up time and per-call round trip.

Start-up: from constructing ``IsolatedImplementation`` to the first answer of
a fresh worker (sandbox, Python, numpy). Round trip: one small call
(``softmax`` of a (4, 8) array, and a fair-mode ``scaled_dot_product_attention``
whose softmax is a callback to the reference), minus nothing: all overhead
included. Usage::

    python benchmarks/worker_overhead.py [--calls N] [--starts M] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
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
    description = plan().description
    probe = time.perf_counter() - started
    print(f"isolation: {description} (probed in {probe * 1000:.0f} ms, once per process)")

    starts = []
    for _ in range(options.starts):
        begin = time.perf_counter()
        with IsolatedImplementation(ROOT / "solutions") as implementation:
            implementation.function("softmax", "softmax")  # waits for the worker and imports softmax.py
            starts.append(time.perf_counter() - begin)
    figures["isolation"] = description
    figures["startup_ms_median"] = round(statistics.median(starts) * 1000)
    print(f"start-up (new worker + first import): median {statistics.median(starts) * 1000:.0f} ms, "
          f"min {min(starts) * 1000:.0f} ms over {len(starts)}")

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
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(options.calls):
                if forget:
                    proxy._ANSWERS.clear()
                remote(*args)
            wall, cpu = (time.perf_counter() - wall) / options.calls, (time.process_time() - cpu) / options.calls
            function = local.function(exercise, name)
            begin = time.perf_counter()
            for _ in range(options.calls):
                function(*args)
            inline = (time.perf_counter() - begin) / options.calls
            figures[f"round_trip_us: {label}"] = round(wall * 1e6)
            print(f"round trip {label}: {wall * 1e6:.0f} us per call ({cpu * 1e6:.0f} us CPU in the grading "
                  f"process; in-process call {inline * 1e6:.0f} us)")
    if options.record:
        from _record import record

        softmax = figures["round_trip_us: softmax"]
        record(__file__, f"start-up {figures['startup_ms_median']} ms (median of {options.starts}), "
               f"round trip {softmax} us per softmax call", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
