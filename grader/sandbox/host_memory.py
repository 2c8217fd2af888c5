"""A bound on the memory the grading process may take while it runs a test's function for a student.

Run by the grading process (``grader.sandbox.callbacks``). A call whose arguments hold a function of the test
(explain's ``predict``, backward's ``f``) asks the grading side to run that function on arguments the student
chose: the function is the test's code (a closure over the test's objects), so it cannot cross into a sandbox,
but what it computes is sized by the student. Without a bound, 64 MiB of int8 token ids sent to a ``predict``
made the grading process index a (9e6, 7, 5) float64 table: 3 GB, outside the worker's memory limit, as root.

:func:`bounded` lowers the grading process's soft address-space limit (``RLIMIT_AS``) to what it maps now plus
the student's memory limit for the length of the call: past it the allocation fails, the test's function raises
``MemoryError`` in the student's code (with a line naming the limit), and the limit is put back. The grading
process runs one student's call at a time, so the bound covers that call's work only.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator


def mapped_bytes() -> int | None:
    """The address space this process maps now (``/proc/self/statm``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def bounded(extra_bytes: int) -> Iterator[None]:
    """Run the body with at most ``extra_bytes`` more address space than this process maps now.

    Where the limit cannot be read or set (no ``/proc``, a hard limit below it), the body runs unbounded.
    """
    now = mapped_bytes()
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        now = None
    if now is None:
        yield
        return
    target = now + max(0, int(extra_bytes))
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    if soft != resource.RLIM_INFINITY and soft <= target:
        yield  # an instructor's own, lower limit stays
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (target, hard))
    except (OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
