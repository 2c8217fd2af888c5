"""The time limits that a student's own run and the grader share, kept in one place.

A student's run (``tests/kit.py``: ``pytest``, ``attention-kit test``, ``status``, the Classroom command) and the
grader (``grader.sandbox.limits.Limits``) stop a student's code at the same points, so that a call the student saw
pass is never stopped when graded, and the other way round. Standard library only: the student's release carries
this file (the sandbox does not ship to students).
"""

from __future__ import annotations

# CPU seconds (or seconds asleep: a ``time.sleep``, a blocking read) one call of a student's function may use; time
# spent waiting for a CPU is the machine's and never counts.
CALL_SECONDS = 5.0
# Seconds (CPU, or asleep) the kit's diagnosis may spend in a student's code: its probes of every function at the
# first failing test (``tests.diagnosis.observe_everything``). Past it the diagnosis names nothing; the reference's
# probes cost about 0.3 s.
DIAGNOSIS_SECONDS = 20.0
# After this many calls of one function stopped past CALL_SECONDS, its later calls fail at once: a loop costs a run
# a few budgets, not one per test. The diagnosis does not probe a function stopped once (its probe would wait as
# long).
FUNCTION_TIMEOUTS = 2
