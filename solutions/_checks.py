"""Input checks shared by the reference modules (not part of the exercises).

Each check raises ``ValueError`` with a message that names the argument and
the shape or value that was wrong, as the API conventions require.
"""

from __future__ import annotations

import numbers

import numpy as np


def as_float_array(name: str, value: object) -> np.ndarray:
    """Return ``value`` as a floating-point array (integers become float64)."""
    arr = np.asarray(value)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
    ):
        raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def require_ndim(name: str, array: np.ndarray, min_ndim: int, layout: str) -> None:
    """Raise if ``array`` has fewer than ``min_ndim`` axes."""
    if array.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} axes {layout}, "
            f"got shape {array.shape}"
        )


def require_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int, raising unless it is a whole number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def require_divisible(d_model: int, n_heads: int) -> int:
    """Return ``d_model // n_heads``, raising if the heads do not tile d_model."""
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: "
            "every head needs the same number of feature columns"
        )
    return d_model // n_heads


def require_broadcast(name: str, shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    """Raise unless an array of ``shape`` broadcasts to exactly ``target``."""
    try:
        result = np.broadcast_shapes(shape, target)
    except ValueError:
        result = None
    if result != tuple(target):
        raise ValueError(
            f"{name} of shape {tuple(shape)} does not broadcast to the "
            f"attention weights' shape {tuple(target)}"
        )


def require_params(name: str, params: object, shapes: dict[str, tuple[int, ...]]) -> None:
    """Raise unless ``params`` is a dict holding arrays of the given shapes."""
    if not isinstance(params, dict):
        raise ValueError(f"{name} must be a dict, got {type(params).__name__}")
    for key, shape in shapes.items():
        if key not in params:
            raise ValueError(f"{name} is missing the key {key!r}")
        got = np.shape(params[key])
        if got != shape:
            raise ValueError(f"{name}[{key!r}] must have shape {shape}, got {got}")
