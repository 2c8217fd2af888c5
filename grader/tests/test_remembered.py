"""The graded tests' own computations, remembered per process (issue 15), never answer for other inputs.

``tests.kinds.remembered`` keys a call by everything that decides its result; ``tests.kit`` remembers
signatures. These checks make sure a remembered value is never handed out for a different input,
and that what is handed out is a copy.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from tests import kinds, kit


def _counted():
    calls = []

    @kinds.remembered
    def total(*args, **kwargs):
        calls.append((args, kwargs))
        return np.array([float(np.sum(np.asarray(list(a.values()) if isinstance(a, dict) else a, dtype=float)))
                         for a in args])

    return total, calls


@pytest.mark.parametrize("first, second", [
    (np.zeros(3), np.array([0.0, 0.0, np.nextafter(0.0, 1.0)])),  # one bit
    (np.zeros(3), -np.zeros(3)),  # -0.0 is not 0.0
    (np.zeros(3), np.zeros(3, dtype=np.float32)),
    (np.zeros(3), np.zeros((3, 1))),
    (np.zeros((2, 2)), np.zeros((2, 2)).T[::1]),
    (0.0, -0.0),
    (1, True),
    (1, 1.0),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    ([1, 2], (1, 2)),
])
def test_different_inputs_are_computed_again(first, second):
    total, calls = _counted()
    total(first)
    total(second)
    assert len(calls) == 2


def test_the_same_input_is_computed_once_and_copied_out():
    total, calls = _counted()
    x = np.arange(4.0)
    one = total(x)
    one[0] = 99.0
    two = total(x.copy())
    assert len(calls) == 1
    assert two[0] == 6.0  # the caller's change did not reach the remembered value
    two[0] = -1.0
    assert total(x)[0] == 6.0


def test_functions_are_told_apart_by_what_they_close_over_and_read():
    @kinds.remembered
    def apply(f, x):
        return f(x)

    r, s = np.ones(3), np.full(3, 2.0)
    assert apply(lambda z: float(np.sum(r * z)), np.ones(3)) == 3.0
    assert apply(lambda z: float(np.sum(s * z)), np.ones(3)) == 6.0  # same code elsewhere, other closure
    results = [apply(lambda z, w=w: float(np.sum(w * z)), np.ones(3)) for w in (1.0, 3.0)]
    assert results == [3.0, 9.0]  # same line, other default
    scale = {"by": 1.0}

    def scaled(z):
        return float(np.sum(z)) * scale["by"]

    assert apply(scaled, np.ones(2)) == 2.0
    scale["by"] = 5.0  # a value it closes over changed in place
    assert apply(scaled, np.ones(2)) == 10.0


def test_globals_read_are_part_of_the_key():
    namespace = {"np": np, "FACTOR": 2.0}
    exec("def f(z):\n    return float(np.sum(z)) * FACTOR", namespace)  # noqa: S102 - a module-level function

    @kinds.remembered
    def apply(f, x):
        return f(x)

    assert apply(namespace["f"], np.ones(2)) == 4.0
    namespace["FACTOR"] = 3.0
    assert apply(namespace["f"], np.ones(2)) == 6.0


def test_what_has_no_exact_key_or_copy_is_computed_every_time():
    calls = []

    @kinds.remembered
    def draw(rng):
        calls.append(1)
        return rng.normal()

    draw(np.random.default_rng(0))
    draw(np.random.default_rng(0))
    assert len(calls) == 2  # a generator has no exact key

    @kinds.remembered
    def generator(seed):
        calls.append(1)
        return np.random.default_rng(seed)

    first = generator(1)
    second = generator(1)
    assert first is not second and len(calls) == 4  # a generator is not remembered as a result

    @kinds.remembered
    def view(seed):
        calls.append(1)
        return np.arange(10.0)[::2]

    view(0)
    view(0)
    assert len(calls) == 6  # a copy would not keep its strides: not remembered


def test_shared_arrays_stay_shared_in_the_copies():
    @kinds.remembered
    def pair(n):
        a = np.zeros(n)
        return (a, a)

    pair(2)
    one, two = pair(2)
    assert one is two


def test_the_signature_of_a_function_follows_its_defaults():
    def f(x, axis=-1):
        return x

    assert kit._labelled_arguments(f, (1,), {}) == {"x": 1}
    f.__defaults__ = None
    f.__code__ = (lambda y, z: y).__code__
    assert kit._labelled_arguments(f, (1, 2), {}) == {"y": 1, "z": 2}


@pytest.mark.parametrize("source, args, kwargs", [
    ("def f(x, y=1, *, z=2): pass", (1,), {"z": 3}),
    ("def f(x, y=1, *, z=2): pass", (1, 2, 3), {}),
    ("def f(x, y=1, *, z=2): pass", (1,), {"x": 3}),
    ("def f(x, y=1, *, z=2): pass", (), {"q": 3}),
    ("def f(x, /, y): pass", (1,), {"y": 2}),
    ("def f(*args, **kwargs): pass", (1,), {"y": 2}),
    ("def f(x, y): pass", (), {"y": 2, "x": 1}),
])
def test_arguments_are_labelled_as_bind_partial_does(source, args, kwargs):
    namespace: dict = {}
    exec(source, namespace)  # noqa: S102
    function = namespace["f"]
    try:
        expected = dict(inspect.signature(function).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        expected = {f"argument {i + 1}": a for i, a in enumerate(args)} | kwargs
    for _ in range(2):  # the second time from the remembered signature
        assert list(kit._labelled_arguments(function, args, kwargs).items()) == list(expected.items())
