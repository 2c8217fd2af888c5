"""A random generator sent as data: rebuilt only from a state its bit generator can be in.

Run by both sides: the grading process imports it as ``grader.sandbox.generators``; the worker, in the sandbox,
imports the copy placed next to ``worker.py`` (``limits.SANDBOX_MODULES``), through ``codec``. Standard library
and numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def generator_of(state: Any) -> np.random.Generator:
    """The generator of a state sent as data; ValueError unless it is a state its bit generator could have reached.

    numpy checks a state's type but not its positions: a ``Philox`` whose ``buffer_pos`` is -2**31, or an
    ``MT19937`` whose ``pos`` is 10**9, is accepted and reads far outside its buffer at its first draw (the process
    ends with SIGSEGV). A student's code could send one to the reference (a callback's argument) and have the
    grader's own worker crash. So the state must have a fresh state's fields, types and sizes, and its positions
    within the buffer they index.
    """
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in BIT_GENERATORS:
        raise ValueError(f"unknown bit generator {str(name)[:40]!r}")
    bit_generator = getattr(np.random, name)(0)
    if not _like(state, bit_generator.state) or not _positions_within(state):
        raise ValueError(f"malformed {name} state: not one a {name} generator can be in (its fields, their sizes, "
                         "or a position outside its buffer)")
    try:
        bit_generator.state = state
    except (TypeError, ValueError, OverflowError, KeyError) as error:
        raise ValueError(f"malformed {name} state: {str(error)[:200]}") from None
    return np.random.Generator(bit_generator)


def _like(value: Any, fresh: Any) -> bool:
    """Whether ``value`` has the fields, types, shapes and dtypes of the fresh state ``fresh``."""
    if isinstance(fresh, dict):
        return isinstance(value, dict) and value.keys() == fresh.keys() and all(
            _like(value[key], fresh[key]) for key in fresh)
    if isinstance(fresh, np.ndarray):
        return isinstance(value, np.ndarray) and value.shape == fresh.shape and value.dtype == fresh.dtype
    if type(fresh) is int:
        return type(value) is int
    return type(value) is type(fresh) and value == fresh  # the bit generator's name


def _positions_within(state: dict) -> bool:
    """Whether a state's positions and flags are in range (its fields checked by :func:`_like` first)."""
    inner = state["state"]
    if "buffer_pos" in state and not 0 <= state["buffer_pos"] <= len(state["buffer"]):  # Philox
        return False
    if "pos" in inner and not 0 <= inner["pos"] <= len(inner["key"]):  # MT19937
        return False
    if "has_uint32" in state and state["has_uint32"] not in (0, 1):
        return False
    return "uinteger" not in state or 0 <= state["uinteger"] < 2**32
