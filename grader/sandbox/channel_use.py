"""What a test may send the grader over the channel: a multiple of what the reference sends in the same test.

Run by the grading process (the facade, ``grader.sandbox.proxy``, stops a test at its allowance) and by the batch
(``grader.grading.reference_use`` judges each test once the kit's check has measured the reference).

A fixed number of bytes or messages is either too low for some honest code (two students identical to the
reference once lost tests to "your code has sent the grader 536850544 bytes") or too high to mean anything for a
small test. So the limits follow the reference: the kit's check grades the reference through the same sandbox and
records, per test, the bytes and the messages (a reply per call, a request per callback to the reference) its
worker sent; a student's test may send ``Limits.channel_factor`` times that, and never less than a floor
(``Limits.test_bytes``, ``Limits.test_messages``: a tiny test stays workable); a submission, that factor times the
reference's total over its tests, at least ``Limits.student_reply_bytes``. Honest code sends what the reference
sends, give or take a small factor, and never meets them; a loop that calls a function once per entry of an array
(a numerical gradient) sends hundreds or thousands of times more. Every number is a field of
:class:`grader.sandbox.limits.Limits` (one place); this module only derives the allowances and words the failures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grader.sandbox.limits import Limits

UNLIMITED = 1 << 62
# Said after a failure: what sending far more than the reference usually is.
LIKELY = "far more than the exercise needs (a loop that calls a function once per entry of an array, as a " \
         "numerical gradient does?)"


@dataclass(frozen=True)
class Use:
    """What a worker sent the grader: ``sent`` bytes in ``messages`` frames."""

    sent: int = 0
    messages: int = 0


@dataclass(frozen=True)
class Allowance:
    """What one test may send (``reference``: the reference's use it is derived from; None: not known yet)."""

    sent: int
    messages: int
    reference: Use | None = None


def size(count: float) -> str:
    """``count`` bytes for a reader: ``512 bytes``, ``3.4 MB``, ``2.1 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} bytes"


def for_test(limits: Limits, reference: Use | None) -> Allowance:
    """What a test may send, given what the reference sends in it (None: not known; only the grader's bound)."""
    if reference is None:
        return Allowance(limits.unknown_bytes, UNLIMITED)
    factor = limits.channel_factor
    return Allowance(max(limits.test_bytes, math.ceil(factor * reference.sent)),
                     max(limits.test_messages, math.ceil(factor * reference.messages)), reference)


def for_submission(limits: Limits, reference_total: int | None) -> int:
    """The bytes a submission may send in one test file's tests, given the reference's total there (None: unknown)."""
    if reference_total is None:
        return limits.unknown_bytes
    return max(limits.student_reply_bytes, math.ceil(limits.channel_factor * reference_total))


def over_test(limits: Limits, used: Use, allowance: Allowance) -> str | None:
    """Why a test that sent ``used`` is failed (it sent all of ``allowance``, or more), or None."""
    reference = allowance.reference
    if used.sent >= allowance.sent:
        if reference is None:
            return (f"your code sent {size(used.sent)} to the grader in this test; the limit is {size(allowance.sent)} "
                    f"per submission: {LIKELY}")
        return (f"your code sent {size(used.sent)} to the grader in this test; the reference sends "
                f"{size(reference.sent)}; the limit is {limits.channel_factor:g}x that (at least "
                f"{size(limits.test_bytes)}): {LIKELY}")
    if used.messages > allowance.messages and reference is not None:
        return (f"your code sent the grader {used.messages} messages in this test (a reply per call, a request per "
                f"call of the reference's functions); the reference sends {reference.messages}; the limit is "
                f"{limits.channel_factor:g}x that (at least {limits.test_messages}): {LIKELY}")
    return None


def over_submission(limits: Limits, sent: int, allowance: int, reference_total: int | None) -> str:
    """Why a submission that has sent ``sent`` bytes in one test file's tests may send no more in them."""
    if reference_total is None:
        return (f"your code has sent the grader {size(sent)} in this file's tests (replies and requests to the "
                f"reference); the limit is {size(allowance)} per file of tests: {LIKELY}")
    return (f"your code has sent the grader {size(sent)} in this file's tests (replies and requests to the "
            f"reference); the reference sends {size(reference_total)} in them; the limit is "
            f"{limits.channel_factor:g}x that (at least {size(limits.student_reply_bytes)}): {LIKELY}")
