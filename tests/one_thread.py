"""Numpy's BLAS on one thread in a run of the graded suite, as in the grader's worker.

The suite's arrays are small: OpenBLAS's extra threads only spin (busy-wait) beside the one that works, and
their CPU time is the student's loop's: the public suite takes about a sixth more CPU time with them (3.0 ->
2.5 CPU-s on 2 cores, ``benchmarks/suite_time.py``), more on a busy machine. The budget of a call counts every
thread of the process (``tests.kit.call_budget``), and the grader's isolated worker runs on one BLAS thread
(``grader.sandbox.limits``): one thread here too makes a student's run measure what grading measures.

OpenBLAS reads its thread count once, when numpy is first imported; :func:`import_numpy_on_one_thread` imports
it with ``OPENBLAS_NUM_THREADS=1`` (and its kin), then gives the environment back as it was, so that nothing
this process starts inherits the setting. A variable the user set is left as it is; a process that imported
numpy before (a grading process) is left as it is.
"""

from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def import_numpy_on_one_thread() -> None:
    """Import numpy with its BLAS on one thread, unless it is imported already; the environment is unchanged."""
    if "numpy" in sys.modules:
        return
    unset = [name for name in THREAD_VARIABLES if name not in os.environ]
    for name in unset:
        os.environ[name] = "1"
    try:
        import numpy  # noqa: F401 - its BLAS reads the variables now
    finally:
        for name in unset:
            os.environ.pop(name, None)



def torch_on_one_thread() -> None:
    """Set torch (when the student's code imported it) to one thread, as the grader's worker runs it.

    torch takes its thread count from the machine, not from the variables above (given back after numpy's
    import): a correct analytic backward written with torch spent its CPU time on every core's spinning
    threads, and the suite's effort check (``tests.effort``) told it a numerical estimate under load.
    """
    torch = sys.modules.get("torch")
    get, set_ = getattr(torch, "get_num_threads", None), getattr(torch, "set_num_threads", None)
    if callable(get) and callable(set_) and get() != 1:
        set_(1)


import_numpy_on_one_thread()
