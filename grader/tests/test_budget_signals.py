"""A CPU budget stops its call even when its first signal is swallowed (CI's warning, "Exception ignored in").

A signal that lands while Python runs a finalizer (a weakref callback, a ``__del__``) raises there, and the
exception is printed and dropped: the one-shot timer of a gate's budget (``tests/effort.py``) never fired again, and
the call ran on past its budget; it now fires again until disarmed. (A call's budget in ``tests/kit.py`` needs no
change: its wall-clock look re-arms itself and stops such a call too.) The case runs in a child process with a
backstop, so that the old behaviour fails the test instead of hanging it.
"""

from __future__ import annotations

import subprocess
import sys

from grader.curriculum import ROOT

# The child uses 0.25 CPU-s when the budget works; stuck far past that, it is the one-shot timer's hang (a busy
# machine stretches CPU time to wall time by ten at most: grader/tests/waiting.py).
STUCK_SECONDS = 120

SWALLOWS_ONCE = '''
import time
swallowed = []

def spin():
    while True:
        try:
            count = 0
            while True:
                count += 1
        except BaseException:  # as a finalizer does: the first stop is dropped, once
            if swallowed:
                raise
            swallowed.append(time.process_time())
'''


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SWALLOWS_ONCE + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=STUCK_SECONDS)


def test_a_gates_budget_stops_a_call_whose_first_stop_was_swallowed():
    done = _run("from tests.effort import _limited\nprint(_limited(spin, 0.2))\n")
    assert done.returncode == 0 and "(None, inf)" in done.stdout, done.stdout + done.stderr


def test_a_stop_swallowed_by_a_finalizer_is_not_printed_and_other_errors_still_are():
    # CI printed "Exception ignored in: ... _OverBudget" (a PytestUnraisableExceptionWarning): the timer's own stop,
    # dropped in a finalizer and fired again, is not news; any other error raised in a finalizer still is.
    done = _run(
        "from tests.effort import _OverBudget, _limited\n"
        "class Dropped:\n"
        "    def __init__(self, error):\n        self.error = error\n"
        "    def __del__(self):\n        raise self.error\n"
        "def call():\n"
        "    Dropped(_OverBudget())\n    Dropped(ValueError('a finalizer of the student'))\n    return 1\n"
        "print(_limited(call, 5.0)[0])\n")
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stdout + done.stderr
    assert "_OverBudget" not in done.stderr and "a finalizer of the student" in done.stderr, done.stderr
