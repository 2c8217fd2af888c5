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

import re
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np
import pytest

from tests import conventions
from tests.crash import raising_through, where_it_crashed
from tests.failures import CRASHED, TIMED_OUT, WRONG_RESULT, Failure, fail_check, record, recorded_so_far

np.set_printoptions(precision=4, suppress=True, linewidth=100, threshold=40, edgeitems=3)


# ---------------------------------------------------------------- how a check words what it expected

def shape_words(shape: tuple[int, ...], array: bool = False) -> str:
    """What a check of a shape expected: ``shape (2, 3)`` (``array``: ``an array of shape (2, 3)``)."""
    return f"{'an array of ' if array else ''}shape {tuple(shape)}"


def dtype_words(dtype: Any) -> str:
    """What a check of a dtype expected: ``dtype float64``."""
    return f"dtype {np.dtype(dtype)}"


def input_check_words(argument: str) -> str:
    """What a check of bad input expected, where none or another exception was raised: ``ValueError naming 'x'``."""
    return f"ValueError naming {argument!r}"


# What a failure is about, read back from its expected text (``tests.plugin``: a dtype, a shape or a bad input
# accepted is a known mistake's only where one changes that on a probe). The words are the functions' above, so
# that wording and reading stay together; ``grader/tests`` holds each function's words to its kind.
_KINDS = {"dtype": re.compile(r"dtype \S+$"), "shape": re.compile(r"(an array of )?shape \("),
          "input check": re.compile(r"\w*Error naming ")}


def kind_of_expected(expected: str) -> str | None:
    """``"dtype"``, ``"shape"`` or ``"input check"`` for a failure's expected text in those words; else None."""
    return next((kind for kind, pattern in _KINDS.items() if pattern.match(expected)), None)


def _show(value: Any) -> str:
    text = np.array2string(np.asarray(value)) if isinstance(value, np.ndarray) else repr(value)
    return text.replace("\n", "\n            ")


def _number(value: Any, digits: int = 6) -> str:
    if isinstance(value, (bool, np.bool_)) or not np.isrealobj(value):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):.{digits}g}"


def few_numbers(values: Any, digits: int = 6) -> str:
    """A few numbers to ``digits`` significant digits each: ``[0.00152932, -2.5]``.

    A ratio or a sign stays visible, where the printing of arrays to 4 decimals showed 0.0001 beside 0.0093 (a
    blind round).
    """
    return "[" + ", ".join(_number(value, digits) for value in np.ravel(np.asarray(values))) + "]"


def _paired(observed: Any, expected: Any, digits: int) -> tuple[str, str]:
    """Both numbers to ``digits`` significant digits, with as many decimals as the one that needs most."""
    a, b = _number(observed, digits), _number(expected, digits)
    if not all(isinstance(v, (float, np.floating)) for v in (observed, expected)) or "e" in a + b or \
            not all(np.isfinite([observed, expected])) or not observed or not expected or \
            np.floor(np.log10(abs(float(observed)))) != np.floor(np.log10(abs(float(expected)))):
        return a, b  # numbers of different sizes (0.058 and 1) read apart without padding
    a, b = f"{float(observed):#.{digits}g}", f"{float(expected):#.{digits}g}"
    while a[-1] == b[-1] == "0" and "." in a and "." in b:  # the zeros neither needs
        a, b = a[:-1], b[:-1]
    return a.rstrip("."), b.rstrip(".")


def differing_numbers(observed: Any, expected: Any, observed_dtype: Any = None, expected_dtype: Any = None) -> str:
    """``observed`` against ``expected`` as the student reads it: two texts that differ when the numbers do.

    Each number gets the smallest number of significant digits, from 6 up to 17, at which the two texts
    differ; then the absolute and the relative error, and the two dtypes when they differ (``float32``
    against the contract's ``float64``).

    Parameters
    ----------
    observed, expected : number
        One entry of the student's result and the expected one.
    observed_dtype, expected_dtype : numpy.dtype, optional
        The dtypes of the arrays they come from (default: their own).

    Returns
    -------
    str
        E.g. ``0.0464158897 instead of 0.0464158883 (off by 1.4e-09, relative 3e-08; yours is float32,
        the expected float64)``.
    """
    observed_dtype = np.asarray(observed).dtype if observed_dtype is None else np.dtype(observed_dtype)
    expected_dtype = np.asarray(expected).dtype if expected_dtype is None else np.dtype(expected_dtype)
    digits = next((n for n in range(6, 18) if _number(observed, n) != _number(expected, n)), 17)
    text = "{} instead of {}".format(*_paired(observed, expected, digits))
    notes = []
    try:
        a, b = float(observed), float(expected)
    except (TypeError, ValueError):  # complex, or not a number at all: the two texts say it
        a = b = float("nan")
    if isinstance(observed, (bool, np.bool_)) or isinstance(expected, (bool, np.bool_)):
        a = b = float("nan")  # True against False: no error to measure
    if np.isfinite(a) and np.isfinite(b) and a != b:
        error = abs(a - b)
        notes.append(f"off by {error:.2g}" + (f", relative {error / abs(b):.2g}" if b else ""))
    if observed_dtype != expected_dtype:
        notes.append(f"yours is {observed_dtype}, the expected {expected_dtype}")
    return f"{text} ({'; '.join(notes)})" if notes else text


def expect(condition: bool, *, what: str, expected: str, observed: str, idea: str) -> bool:
    """Record a failure unless ``condition`` holds."""
    if not condition:
        fail_check(Failure(what, expected, observed, idea))
    return bool(condition)


def fail_now(*, what: str, expected: str, observed: str, idea: str) -> NoReturn:
    """End the test with this failure (what the function returned cannot be checked further)."""
    __tracebackhide__ = True
    pytest.fail(record(Failure(what, expected, observed, idea, kind=WRONG_RESULT)).message, pytrace=False)


def expect_array(value: Any, *, what: str, idea: str) -> bool:
    """Check that a function returned a numpy array at all."""
    if isinstance(value, np.ndarray):
        return True  # (the message, printing the value, is made only for a failure)
    if isinstance(value, (list, tuple, int, float, np.generic)):  # numbers, but not in an array (a blind round)
        idea = (f"the docstring's Returns gives a numpy.ndarray, and yours is a {type(value).__name__}: return "
                f"np.asarray(...) of it, or build it with numpy throughout (then: {idea})")
    return expect(
        False,
        what=what,
        expected="a numpy.ndarray",
        observed=NOTHING if value is None else f"{type(value).__name__}: {_show(value)[:200]}",
        idea=idea,
    )


# What a function that returned None is told (a blind round's print(...) in place of return read "shape NoneType").
NOTHING = "None: the function returned nothing (no `return` reached, or print(...) where return was meant?)"


def expect_shape(value: Any, shape: tuple[int, ...], *, what: str, idea: str) -> bool:
    """Check an array's shape (fails also when ``value`` is not an array)."""
    observed = np.shape(value) if isinstance(value, np.ndarray) else f"{type(value).__name__} (not an array)"
    return expect(
        observed == tuple(shape),
        what=what,
        expected=shape_words(shape),
        observed=NOTHING if value is None else f"shape {observed}",
        idea=idea,
    )


def expect_dtype(value: Any, dtype: Any, *, what: str, idea: str) -> bool:
    """Check an array's dtype."""
    observed = getattr(value, "dtype", type(value).__name__)
    if isinstance(observed, np.dtype) and observed.kind == np.dtype(dtype).kind == "f" \
            and observed.itemsize < np.dtype(dtype).itemsize:
        idea = (f"{idea} (a lower precision, not a wrong formula: this kit's contract is {np.dtype(dtype)}, numpy's "
                f"default; yours is {observed}, torch's default: compute in {np.dtype(dtype)} throughout)")
    elif isinstance(observed, np.dtype) and observed.kind == np.dtype(dtype).kind == "f" \
            and observed.itemsize > np.dtype(dtype).itemsize and "promoted by" not in idea:
        made = (" (np.eye, np.zeros, np.ones, np.asarray(x, float), np.float64(...) and np.sqrt of an int are "
                "float64)" if observed == np.float64 else "")
        idea = (f"{idea} (yours is {observed}: it was built from, or promoted by, {observed} arrays or numbers "
                f"made on the way{made}; make them with the dtype the result must have, {np.dtype(dtype)})")
    elif isinstance(observed, np.dtype) and np.dtype(dtype) == np.bool_ and observed.kind in "iuf" \
            and value.size and bool(np.isin(value, (0, 1)).all()) and "Hugging Face" not in idea:
        idea = (f"{idea} (yours holds 1s and 0s as {observed}, as Hugging Face's attention_mask does: a convention, "
                "not a misconception; this kit's masks are booleans, True where attention is allowed: .astype(bool), "
                "or build them from comparisons, which give booleans)")
    return expect(
        observed == np.dtype(dtype),
        what=what,
        expected=dtype_words(dtype),
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
    tiny_term: str = "",
) -> bool:
    """Check values against expected ones, describing the worst mismatch.

    The tolerance is ``rtol``/``atol``, widened to a float32 (or float16) precision only when the
    contract's dtype is that one: ``dtype`` when given (the dtype the call's inputs promise), else the
    expected values' own dtype. The returned array's dtype never widens it (that is the dtype check's
    business, and a way to buy a loose check). ``tiny_term``: where values that agree only to float32's
    precision have a likelier cause here than precision (Adam hides a gradient's scale), it is said too.
    """
    expected = np.asarray(expected)
    if not isinstance(observed, np.ndarray) and not np.isscalar(observed):
        return expect(False, what=what, expected=shape_words(expected.shape, array=True),
                      observed=f"{type(observed).__name__}", idea=idea)
    observed = np.asarray(observed)
    contract = np.dtype(dtype) if dtype is not None else expected.dtype
    if rtol > 0 and contract.kind == "f" and contract.itemsize < 8:
        # The precision is the contract's (the dtype the inputs promise), never the returned array's: a
        # float16 result for float64 inputs must not widen the check to float16's rounding.
        eps = float(np.finfo(contract).eps)
        rtol, atol = max(rtol, 50 * eps), max(atol, 10 * eps)
    if observed.shape != expected.shape:
        return expect(False, what=what, expected=shape_words(expected.shape),
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
    note = precision_note(observed, expected, contract) or rounded_note(observed, expected)
    idea = (f"{note}; here, likelier: {tiny_term}" if tiny_term else note) if note else idea
    detail = (
        f"{len(bad)} of {close.size} entries differ; the first, at index {first}, is "
        f"{differing_numbers(observed[first], expected[first], observed.dtype, expected.dtype)}"
    )
    if observed.size <= 40:
        shown = _show(expected), _show(observed)
        for precision in (8, 12, 17):  # printed alike to 4 decimals: as many as it takes to tell them apart
            if shown[0] != shown[1]:
                break
            with np.printoptions(precision=precision):
                shown = _show(expected), _show(observed)
        return expect(False, what=what, expected=shown[0], observed=shown[1] + f"\n            ({detail})", idea=idea)
    return expect(False, what=what, expected=f"the reference values (to a relative {rtol:g})",
                  observed=detail, idea=idea)


def precision_note(observed: np.ndarray, expected: np.ndarray, contract: Any = np.float64) -> str:
    """The idea to revisit for values right to a lower precision than the contract's, else "".

    Either the result is in a lower precision (float32, float16) and agrees with the expected values to
    that precision, or its dtype is the contract's but its values agree only to about float32's and are
    float32 numbers (computed in float32, then converted): a question of precision, not of the formula, so
    no idea of the formula (nor any mistake) is named. Float64 values that agree only to float32's
    precision but are not float32 numbers get both readings, precision or a tiny term of the formula,
    neither claimed. Values that differ by more are left to the check's own idea.

    Parameters
    ----------
    observed, expected : numpy.ndarray
        The student's values and the expected ones, of one shape.
    contract : numpy.dtype
        The dtype the kit's contract promises (the inputs' dtype, float64 for the kit's functions).

    Returns
    -------
    str
        The precision message, naming the dtypes and the contract; "" when it does not apply.
    """
    contract = np.dtype(contract)
    if contract.kind != "f" or observed.dtype.kind != "f" or expected.dtype.kind not in "fiu" \
            or observed.shape != expected.shape or not observed.size:
        return ""
    low = observed.dtype.itemsize < contract.itemsize
    precision = observed.dtype if low else np.dtype(np.float32)
    if precision.itemsize >= contract.itemsize:
        return ""
    eps = float(np.finfo(precision).eps)
    with np.errstate(all="ignore"):
        observed64, expected64 = observed.astype(np.float64), expected.astype(np.float64)
        finite = observed64[np.isfinite(observed64)]
        # Values computed in float32 and then converted are float32 numbers, every one of them. Float64 values
        # that are not were computed (at least at the end) in float64: float32 somewhere inside, or a term of
        # the formula too small to show on these inputs (a scale that Adam's update almost cancels); both stay
        # named, neither is claimed. Numbers with few binary digits (0.5, 0.25, 3) are float32 numbers whatever
        # computed them: at least one value must need more digits than float16 holds.
        stored = low or bool(np.array_equal(finite.astype(precision).astype(np.float64), finite)
                             and not np.array_equal(finite.astype(np.float16).astype(np.float64), finite))
        # Float32 arithmetic, seen in the dtype or in the values themselves, says where the error comes from: its
        # own rounding, which a sum of many terms carries to a few dozen eps. Without that sign only an error of
        # float32's size points at precision (a formula that is slightly off, an eps of 1e-6 for 1e-5, differs
        # by more).
        rtol = 50 * eps if stored else 8 * eps
        scale = float(np.max(np.abs(expected64))) if np.all(np.isfinite(expected64)) else 0.0
        if not (scale > 0 and np.allclose(observed64, expected64, rtol=rtol, atol=rtol * scale)):
            return ""
        error = float(np.max(np.abs(observed64 - expected64))) / scale
        if error < eps / 1000:  # far below a lower precision's rounding: whatever it is, it is not that precision
            return ""
    if not stored:
        # The tiny term first: values that are no float32 numbers were computed in float64 at least at the end,
        # and a blind round's pure float64 code (an eps inside a square root, a scale Adam cancels) read the
        # float32 reading first and took it.
        return (f"your values differ from the expected ones only at {precision}'s precision (errors up to "
                f"{error:.1g} times the largest value): either a term of the formula differs that is tiny on these "
                "inputs (a small scale or offset, an eps in another place, or a factor that a later step almost "
                f"cancels), or part of your computation runs in {precision} (this kit's contract is {contract}: "
                f"compute in {contract} throughout; torch's default dtype is float32, use torch.float64)")
    held = f"yours is {observed.dtype}" if low else f"yours is {observed.dtype} but was computed in lower precision"
    return (f"a question of precision, not of the formula: your values agree with the expected ones only to "
            f"{precision}'s precision (errors up to {error:.1g} times the largest value; {held}); this kit's "
            f"contract is {contract}: compute in {contract} throughout (numpy's default; torch's default dtype is "
            "float32, use torch.float64)")


def float32_formula_note(observed: Any, in_float32: list[np.ndarray], large: str) -> str:
    """The idea to revisit for values that a float32 evaluation of the right formula gives, else "".

    Where inputs are large, float32 loses more than the outputs show (logits near 1e4: a float32 sum such as
    max + log(sum(exp(...))) keeps steps of 1e-3 there, which moves a gradient of size 1 by 1e-4), so the error
    is float32's relative to the inputs, not to the values. ``in_float32``: the right formula evaluated in float32
    in the usual ways (torch's log_softmax, a softmax divided by its sum, ...); ``large`` says what is large.
    """
    try:
        values = np.asarray(observed, dtype=np.float64)
    except (TypeError, ValueError):
        return ""
    eps = float(np.finfo(np.float32).eps)
    for candidate in in_float32:
        candidate = np.asarray(candidate, dtype=np.float64)
        scale = float(np.max(np.abs(candidate))) if candidate.size else 0.0
        if values.shape == candidate.shape and scale > 0 and np.all(np.isfinite(values)) and np.allclose(
                values, candidate, rtol=8 * eps, atol=8 * eps * scale):
            return ("a question of precision, not of the formula: your values are what the right formula gives "
                    f"computed in float32, where {large} keep few decimals (near 1e4, steps of 1e-3); this kit's "
                    "contract is float64: compute in float64 throughout (numpy's default; torch's default dtype is "
                    "float32, use torch.float64)")
    return ""


def rounded_note(observed: np.ndarray, expected: np.ndarray) -> str:
    """The idea to revisit for values that are the expected ones rounded to a number of decimals, else "".

    Evaluation libraries round their figures for display (BEIR's ``round(recall, 5)``, a report's 4 decimals);
    this kit's contract is the unrounded value. Said only where rounding explains every value: each one equals
    the expected one rounded to the same number of decimals, at least three (a fraction of 100 questions has two
    decimals whatever its mistake), and some value needs more binary digits than float16 holds (0.5 or 0.75 are
    what many a wrong formula gives: the expected values rounded, by chance).
    """
    if observed.shape != expected.shape or observed.dtype.kind != "f" or expected.dtype.kind != "f" \
            or not observed.size or not np.all(np.isfinite(expected)) or np.array_equal(observed, expected):
        return ""
    with np.errstate(all="ignore"):
        if np.array_equal(observed.astype(np.float16).astype(observed.dtype), observed):
            return ""
        for decimals in range(3, 11):
            if np.array_equal(observed, np.round(expected, decimals)):
                return (f"your values are the expected ones rounded to {decimals} decimals, every one of them: a "
                        "convention, not a misconception (BEIR and pytrec_eval round their figures for display); "
                        "this kit's contract is the unrounded value")
    return ""


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
    return expect(same, what=what, expected=_show(expected), observed=_show(observed) + _first_difference(
        observed, expected) + _kind_difference(observed, expected), idea=idea)


TRIVIAL = ("a result that ignores its inputs (zeros, ones, a fixed or seeded random array: any constant of the "
           "right shape)")


def expect_differs(first: Any, second: Any, *, what: str, expected: str, passed: str, idea: str) -> bool:
    """Check that two results differ where the idea says they must: the contrast to a check of sameness.

    A check that a result stays the same (a blocked key changed, the tokens shuffled, each sequence run alone) or
    keeps a property (rows summing to what the weights give, a symmetric bias) is passed by a result that ignores
    its inputs: zeros or ones of the right shape earn it without computing anything ("no points without the
    idea"). A test adds this after its own check, on inputs that must change every honest result, so that a
    constant fails here and a real mistake's first message stays the one the check gives. It says nothing once the
    test has recorded a failure: its message tells a constant that it passed the checks above, and a mistake
    that failed them (an inverted mask blocks the allowed keys too) learns nothing more from it.

    Parameters
    ----------
    first, second : array_like or tuple of array_like
        The two results. Alike means the same shape and close values (relative 1e-9, absolute 1e-12); arrays of
        different shapes, or what is not numbers, count as different (the test's own checks report those). A
        result of parts (a tuple ``(context, weights)``) is alike only if every part is: a function that returns
        its parts in another order is not taken for one that ignores its inputs.
    what : str
        What was compared, as the failure's first line: "context after changing an allowed key".
    expected : str
        Why they must differ, in the idea's words: "a different context (an allowed key's value reaches it)".
    passed : str
        The check above that a constant passes, in a few words: "blocked keys change nothing".
    idea : str
        The idea to revisit.

    Returns
    -------
    bool
        True when they differ (or cannot be compared, or a check above failed); False, with a failure recorded,
        when they are alike.
    """
    if recorded_so_far():
        return True

    def whole(result: Any) -> np.ndarray:
        parts = result if isinstance(result, (tuple, list)) else (result,)
        return np.concatenate([np.ravel(np.asarray(part, dtype=float)) for part in parts])

    try:
        a, b = whole(first), whole(second)
    except (TypeError, ValueError):
        return True
    if a.shape != b.shape or not bool(np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)):
        return True
    return expect(False, what=what, expected=expected, idea=idea,
                  observed=f"the same values: {TRIVIAL} passes the check above ({passed}) without computing anything")


def _kind_of(value: Any, numbers_alike: bool = False) -> str:
    """What ``value`` is, as a student would name it: ``str``, ``bytes``, ``integer``, ``list of bytes`` ...

    ``numbers_alike``: integers and floats are both ``number`` (their values tell them apart, not their kind).
    """
    if isinstance(value, (list, tuple)):
        inner = sorted({_kind_of(item, numbers_alike) for item in value})
        return type(value).__name__ + (f" of {' and '.join(inner)}" if inner and len(inner) <= 2 else "")
    if isinstance(value, np.ndarray):
        return "numpy array"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "number" if numbers_alike else "integer" if isinstance(value, (int, np.integer)) else "float"
    return type(value).__name__


def _kind_difference(observed: Any, expected: Any) -> str:
    """A line saying that the two are different kinds of thing (str pieces for bytes, a tuple for a list ...).

    Printed, they may look alike (``'ab'`` and ``b'ab'``). Nothing for arrays (the dtype and the first
    difference say it) nor for numbers (their values do).
    """
    if isinstance(observed, np.ndarray) or isinstance(expected, np.ndarray):
        return ""
    if _kind_of(observed, numbers_alike=True) == _kind_of(expected, numbers_alike=True):
        return ""
    return f"\n            (a {_kind_of(observed)}, where the API returns a {_kind_of(expected)})"


def _first_difference(observed: Any, expected: Any) -> str:
    """For two arrays of one shape, printed rounded or cut short: the first entry that differs, in full.

    Integers and booleans print in full, unless the array is too long to print whole (numpy's ``...``): then two
    different arrays may print alike (a blind round's ``hit``, True and False, showed the same line twice).
    """
    if not (isinstance(observed, np.ndarray) and isinstance(expected, np.ndarray)) or observed.shape != expected.shape:
        return ""
    exact = {observed.dtype.kind, expected.dtype.kind} <= set("biu")
    if exact and observed.size <= np.get_printoptions()["threshold"]:
        return ""  # (printed in full already)
    if exact:
        bad = np.argwhere(observed != expected)
        if not len(bad):
            return ""
        first = tuple(int(i) for i in bad[0])
        return (f"\n            ({len(bad)} of {observed.size} entries differ; the first, at index {first}, is "
                f"{observed[first].item()!r} instead of {expected[first].item()!r})")
    if observed.dtype.kind not in "fiu" or expected.dtype.kind not in "fiu":
        return ""
    with np.errstate(all="ignore"):
        bad = np.argwhere(~((observed == expected) | (np.isnan(observed) & np.isnan(expected))))
    if not len(bad):
        return ""
    first = tuple(int(i) for i in bad[0])
    return (f"\n            ({len(bad)} of {observed.size} entries differ; the first, at index {first}, is "
            f"{differing_numbers(observed[first], expected[first], observed.dtype, expected.dtype)})")


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


TORCH_NAN = conventions.NAN_ROWS


def nan_idea(value: Any, blocked: np.ndarray, idea: str) -> str:
    """``idea``, naming the NaN convention (PyTorch's, scipy's) when ``value`` is NaN on exactly ``blocked``.

    ``blocked`` (bool, ``value``'s shape) marks the entries of the rows that have no allowed key.
    """
    return conventions.with_convention(idea, conventions.nan_rows(value, blocked))


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
        return expect(False, what=what, expected=input_check_words(argument),
                      observed=f"{type(error).__name__}: {error}", idea=idea)
    return expect(False, what=what, expected=input_check_words(argument),
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


def call_expecting_no_warning(function: Any, *args: Any, what: str, idea: str,
                              explain: Callable[[Any], str] | None = None, **kwargs: Any) -> Any:
    """Call ``function`` and record a failure if it raised a RuntimeWarning; return its result.

    Masked rows are where numpy warns (``-inf - -inf``, ``0 / 0``): a correct
    implementation handles them without a warning. ``explain(result)`` names a convention the result
    shows (NaN rows are PyTorch's and scipy's), added to ``idea``.
    """
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    runtime = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)))
    if runtime and explain is not None:
        idea = conventions.with_convention(idea, explain(result))
    observed = "; ".join(f"{text} ({WARNINGS[text]})" if text in WARNINGS else text for text in runtime)
    expect(not runtime, what=what, expected="no warning", observed=observed, idea=idea)
    return result


# What numpy's warning says happened, in the terms of the values (a blind round: "invalid value encountered in
# subtract" alone did not say which values). Facts of arithmetic, never a guess at the code.
WARNINGS = {
    "invalid value encountered in subtract": "-inf - (-inf) is NaN: a slice whose largest entry is -inf cannot be "
                                             "shifted by that entry",
    "invalid value encountered in divide": "0 / 0 or inf / inf is NaN",
    "divide by zero encountered in divide": "a number over 0 is inf",
    "divide by zero encountered in log": "log(0) is -inf, with this warning",
    "overflow encountered in exp": "exp of a number above about 709 is inf",
}
