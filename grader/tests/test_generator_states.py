"""A random generator's state sent as data is one its bit generator can be in, or it is refused as the sender's.

numpy checks a state's type, not its positions: a ``Philox`` state whose ``buffer_pos`` is -2**31, or an ``MT19937``
state whose ``pos`` is 10**9, is accepted and reads outside its buffer at the first draw, and the process ends with
SIGSEGV. A student's module that gives such a generator to an earlier exercise's function (answered by the
reference under fair grading) crashed the reference's worker: the student's row said "not graded" (the grader's
failure) and the batch exited 1. ``codec`` now rebuilds a generator only from a state with a fresh state's fields
and sizes and its positions in range: anything else is the sender's ``ValueError``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import codec, generators
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.tests.test_trust import copy_reference


def _state(name: str, change) -> dict:
    state = getattr(np.random, name)(3).state
    change(state)
    return state


def _set(key: str, value):
    return lambda state: state.__setitem__(key, value)


BROKEN = {
    "Philox buffer_pos -2**31": _state("Philox", _set("buffer_pos", -(2**31))),
    "Philox buffer_pos 5": _state("Philox", _set("buffer_pos", 5)),
    "Philox buffer of 2": _state("Philox", _set("buffer", np.zeros(2, np.uint64))),
    "MT19937 pos 10**9": _state("MT19937", lambda s: s["state"].__setitem__("pos", 10**9)),
    "MT19937 pos -1": _state("MT19937", lambda s: s["state"].__setitem__("pos", -1)),
    "MT19937 key of float": _state("MT19937", lambda s: s["state"].__setitem__("key", np.zeros(624))),
    "PCG64 uinteger -1": _state("PCG64", _set("uinteger", -1)),
    "PCG64 has_uint32 7": _state("PCG64", _set("has_uint32", 7)),
    "PCG64 state 2**200": _state("PCG64", lambda s: s["state"].__setitem__("state", 2**200)),
    "SFC64 a field more": _state("SFC64", _set("extra", 1)),
    "PCG64DXSM a field less": _state("PCG64DXSM", lambda s: s.pop("uinteger")),
    "PCG64 state as a float": _state("PCG64", lambda s: s["state"].__setitem__("inc", 1.5)),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_state_no_generator_can_be_in_is_refused_when_rebuilt(name: str) -> None:
    arrays: list = []
    data = {"$": "rng", "state": codec.encode(BROKEN[name], arrays)}
    with pytest.raises(ValueError, match="malformed"):
        codec.decode(data, arrays)


@pytest.mark.parametrize("name", generators.BIT_GENERATORS)
def test_every_state_a_generator_reaches_is_rebuilt_as_it_was(name: str) -> None:
    generator = np.random.Generator(getattr(np.random, name)(11))
    for draw in (lambda: generator.random(5), lambda: generator.integers(0, 9, size=3, dtype=np.int32),
                 lambda: generator.normal(size=1)):
        draw()
        arrays: list = []
        rebuilt = codec.decode(codec.encode(generator, arrays), arrays)
        assert repr(rebuilt.bit_generator.state) == repr(generator.bit_generator.state)
        expected = np.random.Generator(type(generator.bit_generator)(0))
        expected.bit_generator.state = generator.bit_generator.state
        assert rebuilt.normal() == expected.normal()


def test_a_crafted_generator_given_to_the_reference_fails_the_students_call_not_the_grader(tmp_path: Path) -> None:
    crafted = ("def dropout(*args, **kwargs):\n"
               "    import numpy as np\n"
               "    from .projections import init_weight\n"
               "    rng = np.random.Generator(np.random.Philox(0))\n"
               "    state = rng.bit_generator.state\n"
               "    state['buffer_pos'] = -2**31\n"
               "    rng.bit_generator.state = state\n"
               "    return init_weight(rng, 4, 3)\n")
    folder = copy_reference(tmp_path / "student", layer=crafted)
    impl = IsolatedImplementation(folder, limits=Limits(call_timeout=5), fair=True)
    try:
        with pytest.raises(ValueError, match="malformed Philox state"):
            impl.function("layer", "dropout")(np.zeros((2, 4)), 0.5, np.random.default_rng(0))
        assert not impl.internal  # the student's mistake, not the grader's failure
        x = np.random.default_rng(1).normal(size=(3, 5))  # and the same implementation grades on
        np.testing.assert_allclose(impl.function("softmax", "softmax")(x).sum(axis=-1), 1.0)
    finally:
        impl.close()
