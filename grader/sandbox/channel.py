"""The grading side of the channel: frames to and from one worker over its pipes, never blocking past a deadline.

Run by the grading process. A worker has three pipes: requests (this process
writes), replies (the worker writes frames, :mod:`grader.sandbox.frames`) and
output (what the student's code prints, kept in a capped :class:`Output`).
:class:`Channel` writes a frame without blocking, waits for the next whole
frame with ``poll`` (no threads) until the call's deadline, which the
submission's :class:`grader.sandbox.budget.Budget` may move on, and refuses a
frame over the reply limits from its prefix, before any more of it is read.
What a frame means is the facade's business (``grader.sandbox.proxy``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
from typing import Any

from grader.sandbox import channel_use, frames
from grader.sandbox.budget import Budget
from grader.sandbox.limits import Limits

# The largest JSON header the grading side parses from a worker (a field of ``Limits``, as every limit).
MAX_REPLY_HEADER = Limits.reply_header_bytes
# The protocol pipes' capacity (the kernel's default is 64 KiB): a large frame (a training batch and its
# gradients, up to a few MiB) then crosses in a few writes and reads instead of one wake-up per 64 KiB on both
# sides. Kept small enough that a machine grading many submissions at once stays well within the kernel's
# per-user allowance of pipe memory (fs.pipe-user-pages-soft); where the kernel refuses, the default stays.
PIPE_BYTES = 256 << 10


class Timeout(Exception):
    """The call's deadline passed (and the budget did not move it on)."""


class Ended(Exception):
    """The worker closed the channel, or sent what the protocol does not allow (the message says what)."""


class TooLarge(Exception):
    """The worker sent, or announced, more bytes than the reply limits allow (``args``: how many; its header)."""


class Output:
    """What the student's code printed (stdout and stderr, over all its workers), up to ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        """Keep what fits of ``chunk``; count the rest."""
        room = self.limit - len(self.kept)
        self.kept += chunk[: max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        """The output as text, with a note of what was not kept."""
        text = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[... {self.dropped} more bytes of output not kept]"
        return text


class Channel:
    """The pipes of the current worker of one submission (``open`` for each new worker, ``close`` at its end).

    Parameters
    ----------
    limits : grader.sandbox.limits.Limits
        ``reply_bytes`` (per frame), ``output_bytes``; until :meth:`allow` says otherwise, ``student_reply_bytes``
        per file of tests and nothing per test (the batch tells each test's allowance: ``grader.sandbox.channel_use``).
    budget : grader.sandbox.budget.Budget
        Says how long a wait may last, and whether a call may run on at its deadline.
    """

    def __init__(self, limits: Limits, budget: Budget) -> None:
        self.limits = limits
        self.budget = budget
        self.output = Output(limits.output_bytes)
        self.received = 0  # bytes the worker sent so far (all of the submission's workers)
        self.frames = 0  # frames it sent so far: a reply per call, a request per callback (``channel_use``)
        # What the current test's file (from ``file_start`` on), and the test since ``test_start``, may still send.
        self.submission_bytes, self.reference_total = limits.student_reply_bytes, None
        self.file_start = 0
        self.test = channel_use.Allowance(channel_use.UNLIMITED, channel_use.UNLIMITED)
        self.test_start = channel_use.Use()
        self.fds: dict[str, int] = {}
        self.buffer = bytearray()
        self._pollers: dict[bool, Any] = {}

    def open(self, fds: dict[str, int]) -> None:
        """Use a new worker's pipes: ``requests`` (write end), ``replies`` and ``output`` (read ends)."""
        self.fds = dict(fds)
        for fd in self.fds.values():
            os.set_blocking(fd, False)
        for fd in (self.fds["requests"], self.fds["replies"]):
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        # What wait() waits for, registered once per worker: its replies and output, and (while a frame is being
        # sent) room in the requests pipe.
        self._pollers = {False: select.poll(), True: select.poll()}
        for poller in self._pollers.values():
            poller.register(self.fds["replies"], select.POLLIN)
            poller.register(self.fds["output"], select.POLLIN)
        self._pollers[True].register(self.fds["requests"], select.POLLOUT)
        self.buffer = bytearray()

    def close(self) -> None:
        """Close the worker's pipes (after its end)."""
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}
        self._pollers = {}

    # ------------------------------------------------------------------ output

    def drain_output(self, timeout: float) -> None:
        """Read what the worker printed, waiting up to ``timeout`` seconds for the first of it."""
        fd = self.fds.get("output")
        while fd is not None and select.select([fd], [], [], timeout)[0]:
            if not self._read_output(fd):
                return
            timeout = 0.0

    def _read_output(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, frames.READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            chunk = b""
        if not chunk:
            self.fds.pop("output", None)
            for poller in self._pollers.values():
                with contextlib.suppress(KeyError):
                    poller.unregister(fd)
            os.close(fd)
            return False
        self.output.add(chunk)
        return True

    # ------------------------------------------------------------------ frames

    def wait(self, deadline: float, write: bool) -> tuple[bool, bool]:
        """Wait for the replies pipe (or the requests pipe, when ``write``) until ``deadline``, draining output.

        Any event on a pipe counts (a closed end reports POLLHUP or POLLERR, not POLLIN or POLLOUT): the read or
        write that follows then finds it closed, as after select. Timeout when the deadline (as the budget
        moves it) has passed.
        """
        poller, replies, requests = self._pollers[write], self.fds["replies"], self.fds["requests"]
        while True:
            remaining = self.budget.left(deadline)
            if remaining <= 0:
                if self.budget.extend():
                    continue
                raise Timeout
            replies_ready = writable = False
            for fd, _ in poller.poll(remaining * 1000):  # milliseconds, rounded up
                if fd == replies:
                    replies_ready = True
                elif fd == requests:
                    writable = True
                elif fd == self.fds.get("output"):
                    self._read_output(fd)
            if replies_ready or writable:
                return replies_ready, writable

    # ------------------------------------------------------------------ what may be sent (``channel_use``)

    def allow(self, test: channel_use.Allowance, submission_bytes: int, reference_total: int | None,
              spent_before: int = 0) -> None:
        """From now on (a test starts), the test may send ``test``, its file's tests ``submission_bytes`` in all.

        ``spent_before``: what the file's earlier tests sent. Each test file has an allowance of its own: a flood
        in one exercise's tests costs that file's tests, never another exercise's (a numerical gradient past its
        tests' allowances once left every later exercise "stopped" at its import).
        """
        self.test, self.test_start = test, channel_use.Use(self.received, self.frames)
        self.submission_bytes, self.reference_total = submission_bytes, reference_total
        self.file_start = self.received - spent_before

    def file_sent(self) -> int:
        """What the worker has sent in the current test's file (its earlier tests' and this one's)."""
        return self.received - self.file_start

    def test_use(self) -> channel_use.Use:
        """What the worker has sent since the current test started."""
        return channel_use.Use(self.received - self.test_start.sent, self.frames - self.test_start.messages)

    def _allowance(self) -> int:
        return min(self.limits.reply_bytes, self.submission_bytes - self.file_sent(),
                   self.test.sent - (self.received - self.test_start.sent))

    def spent(self) -> str | None:
        """Why no more may be sent (the test's or the submission's allowance used up), or None: it may."""
        if self.file_sent() >= self.submission_bytes:
            return channel_use.over_submission(self.limits, self.file_sent(), self.submission_bytes,
                                               self.reference_total)
        return channel_use.over_test(self.limits, self.test_use(), self.test)

    def refusal(self, size: int, header: int = 0) -> str:
        """Why a frame of ``size`` bytes (announced or read; ``header`` of them its header) was refused.

        Its header's limit, one frame's, the test's, or the submission's.
        """
        if header > self.limits.reply_header_bytes:
            return (f"sent a reply whose values other than arrays (lists, numbers, text) take "
                    f"{channel_use.size(header)}, more than the grader accepts "
                    f"({channel_use.size(self.limits.reply_header_bytes)}); return numpy arrays, not long lists")
        if size > self.limits.reply_bytes:
            return (f"sent a reply of {channel_use.size(size)}, more than the grader accepts "
                    f"({channel_use.size(self.limits.reply_bytes)} per reply); return smaller values")
        used = self.test_use()
        if self.submission_bytes - self.file_sent() < self.test.sent - used.sent:
            return channel_use.over_submission(self.limits, self.file_sent() + size, self.submission_bytes,
                                               self.reference_total)
        return channel_use.over_test(self.limits, channel_use.Use(used.sent + size, used.messages), self.test) or \
            f"sent a reply of {channel_use.size(size)}, more than the grader accepts here"

    def _read_replies(self, check_prefix: bool = True) -> None:
        # One pipe's worth, or the rest of a frame whose (checked) size is known, so a large frame takes a few
        # reads; a small one never allocates more than READ_BYTES for its read.
        wanted = frames.READ_BYTES
        if len(self.buffer) >= frames.PREFIX.size:
            _, head_len, body_len = frames.PREFIX.unpack_from(self.buffer)
            wanted = min(max(wanted, frames.PREFIX.size + head_len + body_len - len(self.buffer)), PIPE_BYTES)
        try:
            chunk = os.read(self.fds["replies"], wanted)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            raise Ended
        self.buffer += chunk
        # Checked wherever the buffer grows (here, also while an answer is being sent, when nothing should come;
        # next_frame checks before anything else): the grading process never holds more than one allowed frame
        # of a worker's bytes.
        if check_prefix:
            self._check_frame_prefix()
        if len(self.buffer) > frames.PREFIX.size + self.limits.reply_header_bytes + max(self._allowance(), 0):
            raise TooLarge(len(self.buffer))

    def send(self, data: bytes, deadline: float) -> None:
        """Write one frame to the worker, reading its replies meanwhile (Ended: it is gone)."""
        # Write first, wait only when the pipe is full: a whole frame usually goes in one system call.
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fds["requests"], view) :]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise Ended from None
            readable, _ = self.wait(deadline, write=True)
            if readable:
                self._read_replies()

    def _check_frame_prefix(self) -> None:
        """Refuse a frame whose declared size is over the limits before any more of it is read."""
        if len(self.buffer) < frames.PREFIX.size:
            return
        _, head_len, body_len = frames.PREFIX.unpack_from(self.buffer)
        if head_len > self.limits.reply_header_bytes or head_len + body_len > self._allowance():
            raise TooLarge(head_len + body_len, head_len)

    def next_frame(self, deadline: float) -> bytes:
        """The next whole frame from the worker, as received (never more than the reply limits)."""
        while True:
            size = None
            if len(self.buffer) >= frames.PREFIX.size:  # (the usual first pass finds nothing buffered)
                self._check_frame_prefix()
                try:
                    size = frames.frame_size(self.buffer)
                except ValueError as error:  # garbage on the channel: the student wrote to it
                    raise Ended(f"the worker sent a malformed message ({error})") from None
            if size is not None:
                if size == len(self.buffer):  # the usual case: nothing after the frame (one copy, not two)
                    frame = bytes(self.buffer)
                    self.buffer.clear()
                else:
                    with memoryview(self.buffer) as view:
                        frame = bytes(view[:size])
                    del self.buffer[:size]
                self.received += size
                self.frames += 1
                return frame
            readable, _ = self.wait(deadline, write=False)
            if readable:
                self._read_replies(check_prefix=False)  # checked at the top of the loop, before anything else

    @staticmethod
    def parse(frame: bytes) -> tuple[dict, list]:
        """The header and arrays of a whole ``frame`` (Ended if it is malformed)."""
        try:
            parsed = frames.unpack(frame)
        except Exception as error:  # noqa: BLE001 - garbage on the channel: the student wrote to it
            raise Ended(f"the worker sent a malformed message ({error})") from None
        if parsed is None:
            raise Ended("the worker sent a malformed message (a truncated frame)")
        return parsed[0]

    def receive(self, deadline: float) -> tuple[dict, list]:
        """The next frame, parsed."""
        return self.parse(self.next_frame(deadline))
