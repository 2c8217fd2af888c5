"""What importing ``numpy.random`` in the fork server buys each forked worker (``grader.sandbox.worker.load_modules``).

numpy imports its random module lazily, at the first ``np.random`` attribute. A worker forked from a server that
had not imported it imported it again, at its first Generator (most Part II and III calls take one: the kit
sends the test's ``rng``). This prints the CPU time of a forked child's first ``default_rng`` (children's user +
system time, from ``getrusage``), with the module not imported and imported in the parent before the fork:
the difference is what each worker start saves (about 12 ms on a 2-core AMD EPYC, of ~0.5 s of worker CPU
per Part II submission spread over five workers).

Usage: ``python benchmarks/fork_preload.py [FORKS] [--record]``
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable


def child_cpu_ms(work: Callable[[], object], forks: int) -> float:
    """Mean CPU milliseconds of a forked child that runs ``work`` and exits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            try:
                work()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) / forks * 1e3


def main() -> None:
    arguments = [a for a in sys.argv[1:] if a != "--record"]
    forks = int(arguments[0]) if arguments else 20
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np

    assert "numpy.random" not in sys.modules, "numpy.random was imported before the first measurement"
    lazy = child_cpu_ms(lambda: np.random.default_rng(1), forks)
    import numpy.random  # noqa: F401 - the preload, as the fork server does

    preloaded = child_cpu_ms(lambda: np.random.default_rng(1), forks)
    summary = (f"a forked worker's first Generator: {lazy:.1f} ms of CPU with numpy.random imported lazily, "
               f"{preloaded:.1f} ms with it imported before the fork ({forks} forks each)")
    print(summary)
    if "--record" in sys.argv[1:]:
        from _record import record

        record(__file__, summary, {"lazy_ms": round(lazy, 2), "preloaded_ms": round(preloaded, 2), "forks": forks})


if __name__ == "__main__":
    main()
