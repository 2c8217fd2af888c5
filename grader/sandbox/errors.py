"""What can go wrong behind the sandbox's door, as exceptions the grading side tells apart.

Raised by: the grading side's facade (``grader.sandbox.proxy.IsolatedImplementation``)
and its parts, in the grading process. :class:`WorkerCrashed` is the student's
code misbehaving (the worker ended, or sent too much); :class:`SandboxError`
and :class:`MachineBusy` are the grader's own failures, never a student's
zero (the tests they hit are not graded).
"""

from __future__ import annotations


class WorkerCrashed(RuntimeError):
    """The worker process ended (or misbehaved) while running student code."""


class SandboxError(RuntimeError):
    """The grader itself failed (the worker could not start, ...): never the student's fault.

    Every such failure is also listed in ``IsolatedImplementation.internal``,
    so the grader reports the tests it hit as not graded, whatever the test
    did with the exception.
    """


class MachineBusy(SandboxError):
    """A call was stopped by the machine's load (it waited for a CPU, past every retry): rerun the grading.

    The grader's failure, never the student's: the tests it hit are not graded (``internal``), with a reason
    that starts with ``PREFIX``.
    """

    PREFIX = "the machine was too busy (rerun)"
