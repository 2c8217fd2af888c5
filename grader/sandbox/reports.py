"""What the grader reports of a submission's worker: its charges, its traffic, its refused callbacks.

Run by: the grading process, as part of ``grader.sandbox.proxy.IsolatedImplementation`` (this mixin reads the
facade's budget, channel and callbacks; the recorder and the reports read these numbers).
"""

from __future__ import annotations

from typing import Any

from grader.sandbox import channel_use


class Reports:
    """The reporting properties of the isolated implementation."""

    _budget: Any
    _channel: Any
    _callbacks: Any

    @property
    def spent(self) -> float:
        """CPU (and sleep) seconds charged to the submission so far (its answers from the reference included)."""
        return self._budget.spent

    @property
    def reference_spent(self) -> float:
        """CPU seconds of the reference's answers to this submission's callbacks (charged to it, in ``spent``)."""
        return self._budget.reference_spent

    @property
    def forgiven(self) -> float:
        """Wall seconds of calls not charged to this submission (waits for a CPU, calls run again; ``budget``)."""
        return self._budget.forgiven

    @property
    def call_seconds(self) -> float:
        """Wall seconds of all exchanges with the worker (start-up waits excluded)."""
        return self._budget.call_seconds

    @property
    def received(self) -> int:
        """Bytes the worker sent so far."""
        return self._channel.received

    @property
    def messages(self) -> int:
        """Frames the worker sent so far: a reply per call, a request per callback to the reference."""
        return self._channel.frames

    def allow(self, test: channel_use.Allowance, submission_bytes: int, reference_total: int | None,
              spent_before: int = 0) -> None:
        """What the test that starts now may send, and its file's tests in all (``channel_use``; the recorder's)."""
        self._channel.allow(test, submission_bytes, reference_total, spent_before)

    @property
    def refused(self) -> list[str]:
        """The distinct callbacks the channel refused (at most 20; see ``refusals``)."""
        return self._callbacks.refused

    @property
    def refusals(self) -> int:
        """How many callbacks the channel refused."""
        return self._callbacks.refusals
