"""Seeded inputs of every kind an API function's docstring allows, shared by the graded tests.

The tests that close blind spots by kind (not by case) draw from here: any number of leading batch
axes, every axis form (negative axes beyond -1), integer and boolean input where a float result is
promised, float32 through every path, and sizes that all differ. Every generator is seeded from the
name of the input, so feedback is the same on every run and on every machine.
"""

from __future__ import annotations

import zlib

import numpy as np

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
