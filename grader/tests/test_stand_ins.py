"""A watched call's stand-ins (``grader.sandbox.stand_ins``, the worker's side): what each step sends, and how often.

Graded, every step of a watched ``causal_decode`` is sent to the grading process, which runs it again in a second
worker and calls it once more after the call (``grader.sandbox.watched``): a step sent twice costs all of that
twice. A wrapper on an API name (a decorator, a class-based one) has a stand-in of its own, and so has the function
it wraps; a call that the wrapper passes on with the very arguments it got is one step, sent once. A call with
other arguments (one batch entry at a time inside a batched step, a wrapper that converts its arguments) is a step
of its own, and is sent.
"""

from __future__ import annotations

import threading

import numpy as np

from grader.sandbox import codec
from grader.sandbox.stand_ins import Asking


class _Channel:
    """The worker's channel to the grading process, as far as a stand-in uses it: what was sent."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, header: dict, arrays: list) -> None:
        self.sent.append(header)

    def receive(self) -> tuple[dict, list]:
        return {"status": "ok", "payload": None}, []


def _asking() -> tuple[Asking, _Channel]:
    channel = _Channel()
    asking = Asking(channel, codec)
    asking.calls = asking.open = 1  # a call is running: its stand-ins send
    return asking, channel


def _attend(q_t, cache):
    return q_t + cache["k"].sum(), None


def test_a_wrapper_that_passes_its_arguments_on_sends_the_step_once():
    asking, channel = _asking()
    wrapped = asking.stand_in(0, _attend)  # the wrapped function's stand-in (its code swapped)

    def decorator_wrapper(*args, **kwargs):  # a decorator without functools.wraps: the same objects passed on
        return wrapped(*args, **kwargs)

    binding = asking.stand_in(0, decorator_wrapper)  # the API name's binding, the wrapper, stands in too
    q, cache = np.ones((1, 2)), {"k": np.zeros((1, 2))}
    for _ in range(3):
        binding(q, cache=cache)
    assert len(channel.sent) == 3, channel.sent  # not 6: one step per call, as an undecorated function sends
    assert {header["index"] for header in channel.sent} == {0}


def test_calls_with_other_arguments_inside_a_step_are_steps_of_their_own():
    asking, channel = _asking()
    wrapped = asking.stand_in(0, _attend)

    def one_entry_at_a_time(q_t, cache):  # a batched step made of a step per batch entry
        return [wrapped(q_t[i : i + 1], {"k": cache["k"][i : i + 1]}) for i in range(len(q_t))]

    def converting(q_t, cache):  # a wrapper that converts its arguments before it passes them on
        return wrapped(np.asarray(q_t, dtype=np.float32), cache)

    q, cache = np.ones((3, 2)), {"k": np.zeros((3, 2))}
    asking.stand_in(0, one_entry_at_a_time)(q, cache)
    assert len(channel.sent) == 1 + 3
    channel.sent.clear()
    asking.stand_in(0, converting)(q, cache)
    assert len(channel.sent) == 2
    channel.sent.clear()
    asking.stand_in(1, lambda q_t, cache: wrapped(q_t, cache))(q, cache)  # another API function's stand-in
    assert len(channel.sent) == 2


def test_the_same_step_in_another_thread_or_after_the_first_returned_is_sent_again():
    asking, channel = _asking()
    wrapped = asking.stand_in(0, _attend)
    q, cache = np.ones((1, 2)), {"k": np.zeros((1, 2))}

    def in_a_thread(*args):
        worker = threading.Thread(target=wrapped, args=args)
        worker.start()
        worker.join()
        return None

    asking.stand_in(0, in_a_thread)(q, cache)
    assert len(channel.sent) == 2  # the thread's call is not nested in this thread's step
    channel.sent.clear()
    wrapped(q, cache)
    wrapped(q, cache)
    assert len(channel.sent) == 2  # one after the other: two steps
