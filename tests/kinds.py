"""Seeded inputs of every kind an API function's docstring allows, shared by the graded tests.

The tests that close blind spots by kind (not by case) draw from here: any number of leading batch
axes, every axis form (negative axes beyond -1), integer and boolean input where a float result is
promised, float32 through every path, and sizes that all differ. Every generator is seeded from the
name of the input, so feedback is the same on every run and on every machine.
"""

from __future__ import annotations

import copy
import functools
import types
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from tests import kept_values

# Leading batch axes: none, one, two and three, with sizes that differ from each other and from the
# sizes the exercises use for n, d_k, d_v, d_model and heads.
LEADING = ((), (3,), (2, 3), (2, 1, 3))
# The kinds the exercises' other tests do not use already (two and three leading axes), so that a
# failure caused by them is charged once, in the test about them.
MORE_LEADING = ((2, 3), (2, 1, 3))


def rng(name: str) -> np.random.Generator:
    """A generator seeded from ``name`` (stable across runs, processes and machines)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def normal(name: str, shape: tuple[int, ...], scale: float = 1.0, dtype: type = np.float64) -> np.ndarray:
    """Seeded normal entries of the given shape and dtype."""
    return rng(name).normal(scale=scale, size=shape).astype(dtype)


def axis_forms(ndim: int) -> list[int]:
    """Every ``axis`` argument a docstring that says "any axis" allows: 0 .. ndim-1 and -1 .. -ndim."""
    return [*range(ndim), *range(-1, -ndim - 1, -1)]


def describe_axes(shape: tuple[int, ...]) -> str:
    """``2 leading batch axes (2, 3)`` and the like, for messages."""
    lead = len(shape)
    return "no leading batch axis" if lead == 0 else f"{lead} leading batch axes {tuple(shape)}"


# ---------------------------------------------------------------- computing the tests' own values once

class _Unfrozen(Exception):
    """A value :func:`frozen` cannot turn into an exact key (the call is then not remembered)."""


_SCALARS = (bool, int, str, bytes, type(None))


def frozen(value: object) -> object:
    """An exact, hashable key for ``value``: equal keys only for inputs that give the same results.

    Arrays by their type, dtype, shape, strides and bytes; numbers by their type and exact value
    (``-0.0`` is not ``0.0``); dicts in their order; functions by their code (call site included),
    the values they close over, their defaults and the module-level names they read. Raises
    ``_Unfrozen`` for anything else (a generator's state, an object of the student's code).
    """
    kind = type(value)
    if kind in _SCALARS:
        return kind, value
    if kind is float:
        return kind, value.hex()
    if kind is np.ndarray or isinstance(value, np.generic):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise _Unfrozen(kind)
        return kind, array.dtype.str, array.shape, array.strides, array.tobytes()
    if kind in (tuple, list):
        return kind, tuple(frozen(item) for item in value)
    if kind is dict:
        return kind, tuple((frozen(key), frozen(item)) for key, item in value.items())
    if kind is types.FunctionType:
        return _frozen_function(value)
    if kind is types.ModuleType:
        return kind, value.__name__, value  # itself: by identity here, by name on disk (tests.kept_values)
    raise _Unfrozen(kind)


_FREEZING: set[int] = set()  # the functions being frozen (a function that closes over itself has no key)


def _frozen_function(function: types.FunctionType) -> object:
    if id(function) in _FREEZING:
        raise _Unfrozen("a function that refers to itself")
    _FREEZING.add(id(function))
    try:
        return _frozen_function_once(function)
    finally:
        _FREEZING.discard(id(function))


def _frozen_function_once(function: types.FunctionType) -> object:
    code = function.__code__
    try:
        cells = tuple(frozen(cell.cell_contents) for cell in function.__closure__ or ())
    except ValueError:  # a cell not filled yet
        raise _Unfrozen("an empty closure cell") from None
    names = []
    for name in _global_names(code):
        if name in function.__globals__:
            value = function.__globals__[name]
            # A module-level function of the tests is itself (its own module-level names do not change).
            names.append((name, value if type(value) in (types.FunctionType, type) else frozen(value)))
    return (types.FunctionType, code.co_filename, code.co_firstlineno, code.co_qualname, code, cells,
            frozen(function.__defaults__), frozen(function.__kwdefaults__), tuple(names))


def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The names ``code`` (and the code nested in it) may read from its module."""
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names.extend(_global_names(constant))
    return tuple(dict.fromkeys(names))


def _copyable(value: object) -> bool:
    """Whether copies of ``value`` are indistinguishable from it.

    True for plain containers (dict, list, tuple) of writable arrays whose copies keep their memory
    layout (no views with steps, no broadcast arrays), numbers, strings and None.
    """
    if type(value) in (dict, list, tuple):
        items = value.values() if type(value) is dict else value
        return all(_copyable(item) for item in items)
    if type(value) is np.ndarray:
        return (not value.dtype.hasobject and value.flags.writeable
                and value.copy(order="K").strides == value.strides)
    return type(value) in (*_SCALARS, float) or isinstance(value, np.generic)


_REMEMBERED_MAX = 2048  # results per function; only the tests' own, seeded computations are remembered


def remembered(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, computed once per process for each exact input (see :func:`frozen`), results copied.

    In a student's own runs the values are also kept on disk for the next run (``tests.kept_values``).

    For the tests' own, student-independent work (seeded inputs, reference computations, central
    differences of the tests' own forward passes) that a grading process would otherwise redo for every
    student. Never for anything computed from the student's results. A call with an input that has no
    exact key is computed as usual.
    """
    results: dict[object, object] = {}

    @functools.wraps(function)
    def once(*args: Any, **kwargs: Any) -> Any:
        try:
            key = frozen((args, kwargs))
        except _Unfrozen:
            return function(*args, **kwargs)
        if key in results:
            return copy.deepcopy(results[key])  # new arrays and containers, shared ones still shared
        name = kept_values.name_of(function, key)  # None but in a student's own run (tests/kept_values.py)
        result = kept_values.recall(name)
        computed = result is kept_values.MISSING
        if computed:
            result = function(*args, **kwargs)
        if _copyable(result):
            if len(results) >= _REMEMBERED_MAX:
                results.clear()
            results[key] = copy.deepcopy(result)
            if computed:
                kept_values.keep(name, results[key])
        return result

    return once
