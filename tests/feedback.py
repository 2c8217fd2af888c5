"""Checks that explain themselves.

Every failure says what was expected, what was observed, and which idea to
revisit. It is recorded as data (a ``tests.failures.Failure`` in the test's
stash) and reported, as its message, to pytest.
The helpers record failures with pytest-check, so one test reports every
broken property at once, in the order the test checks them. Each returns
True when the check passed, so a test can skip follow-up checks that would
only repeat the same failure (e.g. comparing values after a shape mismatch).
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np
import pytest
from pytest_check import check

from tests.crash import raising_through, where_it_crashed
from tests.failures import CRASHED, TIMED_OUT, WRONG_RESULT, Failure, record

np.set_printoptions(precision=4, suppress=True, linewidth=100, threshold=40, edgeitems=3)


def _show(value: Any) -> str:
    text = np.array2string(np.asarray(value)) if isinstance(value, np.ndarray) else repr(value)
    return text.replace("\n", "\n            ")


def _number(value: Any) -> str:
    return f"{float(value):.6g}" if np.isrealobj(value) else str(value)


def expect(condition: bool, *, what: str, expected: str, observed: str, idea: str) -> bool:
    """Record a failure unless ``condition`` holds."""
    if not condition:
        check.fail(record(Failure(what, expected, observed, idea)).message)
    return bool(condition)


def fail_now(*, what: str, expected: str, observed: str, idea: str) -> NoReturn:
    """End the test with this failure (what the function returned cannot be checked further)."""
    __tracebackhide__ = True
    pytest.fail(record(Failure(what, expected, observed, idea, kind=WRONG_RESULT)).message, pytrace=False)


def expect_array(value: Any, *, what: str, idea: str) -> bool:
    """Check that a function returned a numpy array at all."""
    if isinstance(value, np.ndarray):
        return True  # (the message, printing the value, is made only for a failure)
    return expect(
        False,
        what=what,
        expected="a numpy.ndarray",
        observed=f"{type(value).__name__}: {_show(value)[:200]}",
        idea=idea,
    )


def expect_shape(value: Any, shape: tuple[int, ...], *, what: str, idea: str) -> bool:
    """Check an array's shape (fails also when ``value`` is not an array)."""
    observed = np.shape(value) if isinstance(value, np.ndarray) else f"{type(value).__name__} (not an array)"
    return expect(
        observed == tuple(shape),
        what=what,
        expected=f"shape {tuple(shape)}",
        observed=f"shape {observed}",
        idea=idea,
    )


def expect_dtype(value: Any, dtype: Any, *, what: str, idea: str) -> bool:
    """Check an array's dtype."""
    observed = getattr(value, "dtype", type(value).__name__)
    return expect(
        observed == np.dtype(dtype),
        what=what,
        expected=f"dtype {np.dtype(dtype)}",
        observed=f"dtype {observed}",
        idea=idea,
    )


def expect_close(
    observed: Any,
    expected: Any,
    *,
    what: str,
    idea: str,
    rtol: float = 1e-7,
    atol: float = 1e-9,
    dtype: Any = None,
) -> bool:
    """Check values against expected ones, describing the worst mismatch.

    The tolerance is ``rtol``/``atol``, widened to a float32 (or float16) precision only when the
    contract's dtype is that one: ``dtype`` when given (the dtype the call's inputs promise), else the
    expected values' own dtype. The returned array's dtype never widens it (that is the dtype check's
    business, and a way to buy a loose check).
    """
    expected = np.asarray(expected)
    if not isinstance(observed, np.ndarray) and not np.isscalar(observed):
        return expect(False, what=what, expected=f"an array of shape {expected.shape}",
                      observed=f"{type(observed).__name__}", idea=idea)
    observed = np.asarray(observed)
    contract = np.dtype(dtype) if dtype is not None else expected.dtype
    if rtol > 0 and contract.kind == "f" and contract.itemsize < 8:
        # The precision is the contract's (the dtype the inputs promise), never the returned array's: a
        # float16 result for float64 inputs must not widen the check to float16's rounding.
        eps = float(np.finfo(contract).eps)
        rtol, atol = max(rtol, 50 * eps), max(atol, 10 * eps)
    if observed.shape != expected.shape:
        return expect(False, what=what, expected=f"shape {expected.shape}",
                      observed=f"shape {observed.shape}", idea=idea)
    if not np.issubdtype(observed.dtype, np.number) and observed.dtype != np.bool_:
        return expect(False, what=what, expected="numbers", observed=f"dtype {observed.dtype}", idea=idea)
    if (isinstance(rtol, (int, float)) and isinstance(atol, (int, float)) and rtol >= 0 and atol >= 0
            and (np.issubdtype(expected.dtype, np.number) or expected.dtype == np.bool_)
            and bool((observed == expected).all())):
        return True  # equal values are close: the common case, without isclose's arithmetic
    close = np.isclose(observed, expected, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return True
    bad = np.argwhere(~close)
    first = tuple(int(i) for i in bad[0]) if observed.ndim else ()
    detail = (
        f"{len(bad)} of {close.size} entries differ; the first, at index {first}, is "
        f"{_number(observed[first])} instead of {_number(expected[first])}"
    )
    if observed.size <= 40:
        return expect(False, what=what, expected=_show(expected),
                      observed=_show(observed) + f"\n            ({detail})", idea=idea)
    return expect(False, what=what, expected=f"the reference values (to a relative {rtol:g})",
                  observed=detail, idea=idea)


def expect_equal(observed: Any, expected: Any, *, what: str, idea: str) -> bool:
    """Check exact equality (arrays: same shape and values; others: ==)."""
    if isinstance(expected, np.ndarray) or isinstance(observed, np.ndarray):
        same = (
            isinstance(observed, np.ndarray)
            and np.shape(observed) == np.shape(expected)
            and bool(np.array_equal(observed, expected))
        )
    else:
        same = observed == expected
    if same:
        return bool(same)  # (the message, printing both values, is made only for a failure)
    return expect(same, what=what, expected=_show(expected), observed=_show(observed), idea=idea)


def expect_no_nan(value: Any, *, what: str, idea: str) -> bool:
    """Check that an array holds no NaN or infinity."""
    array = np.asarray(value, dtype=float) if not isinstance(value, np.ndarray) else value
    finite = bool(np.all(np.isfinite(array))) if array.dtype.kind in "fc" else True
    count = int(np.sum(~np.isfinite(array)))  # (raises, as it always did, for an array of no numbers)
    if finite:
        return True  # (the message, printing the array, is made only for a failure)
    return expect(
        finite,
        what=what,
        expected="only finite numbers",
        observed=f"{count} NaN or infinite entries: {_show(array)}",
        idea=idea,
    )


def expect_raises_value_error(call: Any, *, argument: str, what: str, idea: str) -> bool:
    """Check that ``call()`` raises ValueError whose message names ``argument``."""
    try:
        with raising_through():
            call()
    except ValueError as error:
        return expect(
            argument in str(error),
            what=what,
            expected=f"a ValueError whose message names {argument!r}",
            observed=f"ValueError({str(error)!r})",
            idea=idea,
        )
    except Exception as error:  # the student raised something else
        return expect(False, what=what, expected=f"ValueError naming {argument!r}",
                      observed=f"{type(error).__name__}: {error}", idea=idea)
    return expect(False, what=what, expected=f"ValueError naming {argument!r}",
                  observed="no exception: the bad input was accepted", idea=idea)


def call_or_explain(function: Any, *args: Any, what: str, idea: str, **kwargs: Any) -> Any:
    """Call ``function(*args, **kwargs)`` on inputs that are valid, and return its result.

    A crash is the finding to explain: the test fails at once (later checks would
    only repeat it) with what / expected / observed / revisit, and the observed
    line names the file and line of the student's code that raised, not numpy's.
    """
    __tracebackhide__ = True
    try:
        with raising_through():
            return function(*args, **kwargs)
    except Exception as error:  # any crash of the student's code on valid input
        failure = Failure(what, "a result (these inputs are valid)",
                          f"{type(error).__name__}: {error}{where_it_crashed(error)}", idea,
                          kind=TIMED_OUT if isinstance(error, TimeoutError) else CRASHED)
    pytest.fail(record(failure).message, pytrace=False)  # outside `except`, so no chained traceback


def call_expecting_no_warning(function: Any, *args: Any, what: str, idea: str, **kwargs: Any) -> Any:
    """Call ``function`` and record a failure if it raised a RuntimeWarning; return its result.

    Masked rows are where numpy warns (``-inf - -inf``, ``0 / 0``): a correct
    implementation handles them without a warning.
    """
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    expect(not runtime, what=what, expected="no warning", observed="; ".join(runtime), idea=idea)
    return result
