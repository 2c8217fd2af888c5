"""The kit's one scoring rule, used by every tool that shows points.

An exercise's points (the manifest's ``points``) are split between its graded
tests as equally as whole sixteenths of a point allow: a passing test earns
its share, a failing one nothing. The instructors' hidden tests of an exercise
share its ``hidden_points`` the same way, on top (a hidden file may set its own
``POINTS``). So the public tests are worth the manifest's total (100 for Part I)
everywhere: ``attention-kit status``, the GitHub Classroom workflow, the
notebooks' test cells; where the hidden tests run too (``attention-kit grade``,
Gradescope, nbgrader with hidden cells), the maximum adds the hidden points,
and those tools say so.

Why sixteenths: nbgrader, Gradescope and GitHub Classroom's reporter add up the
tests' points as binary floats. Equal shares such as 10/15 are not exact in
binary (nor in decimal), so 15 of them add up to 9.999999999999998 or, rounded
to 4 decimals first, to 10.0005. A multiple of :data:`QUANTUM` (1/16 = 0.0625)
is exact in binary and in :data:`DECIMALS` decimals, and so is any sum of
them: every tool's total of the shares is the maximum exactly. Test ``i`` (from
1, in file order) of ``n`` sharing ``P`` points is worth ``P * i / n`` rounded
down to the quantum, minus the same for ``i - 1``: shares differ by at most
one sixteenth, and the larger ones are spread evenly through the file (a
largest-remainder split whose ties go to evenly spaced tests).

Standard library only: the student commands import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

QUANTUM = 0.0625
"""Every share is a whole multiple of this (1/16 of a point: exact in binary and in decimal)."""
DECIMALS = 4
"""Decimals every tool writes and prints points with: enough for any multiple of :data:`QUANTUM`."""
_PER_POINT = 16  # quanta per point (1 / QUANTUM)


def _quanta(points: float, what: str = "points") -> int:
    """``points`` as a whole number of quanta.

    Raises
    ------
    ValueError
        If ``points`` is negative, not finite or not a whole multiple of :data:`QUANTUM`.
    """
    try:
        exact = Fraction(points) * _PER_POINT
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what} ({points!r}) must be a finite number of points") from None
    if exact < 0 or exact.denominator != 1:
        raise ValueError(f"{what} ({points!r}) must be a non-negative whole multiple of {QUANTUM} "
                         f"(1/{_PER_POINT} of a point), e.g. 10, 2.5 or 0.75")
    return int(exact)


def shares(points: float, tests: int) -> list[float]:
    """What each test of a pool of ``tests`` tests sharing ``points`` is worth, in file order.

    Parameters
    ----------
    points : float
        The pool's points: a whole multiple of :data:`QUANTUM`.
    tests : int
        The number of tests sharing them.

    Returns
    -------
    list of float
        ``tests`` shares, each a positive multiple of :data:`QUANTUM`, whose float sum is ``points``
        exactly (empty when ``tests`` is 0).

    Raises
    ------
    ValueError
        If ``tests`` is negative, ``points`` not a multiple of the quantum, or too few points for every
        test to be worth at least one quantum.
    """
    if isinstance(tests, bool) or not isinstance(tests, int) or tests < 0:
        raise ValueError(f"shares: tests ({tests!r}) must be a non-negative whole number")
    units = _quanta(points, "shares: points")
    if tests == 0:
        return []
    if units and units < tests:
        raise ValueError(f"shares: {points:g} points cannot be split between {tests} tests in whole "
                         f"{QUANTUM}s with every test worth something (at least {tests * QUANTUM:g} points needed)")
    cumulative = [units * i // tests for i in range(tests + 1)]
    return [(cumulative[i + 1] - cumulative[i]) / _PER_POINT for i in range(tests)]


def earned(points: float, outcomes: Sequence[bool]) -> float:
    """The points of a pool whose tests (in file order) passed where ``outcomes`` is true."""
    return sum(share for share, passed in zip(shares(points, len(outcomes)), outcomes, strict=True) if passed)


def total(values: Iterable[float]) -> float:
    """The sum of scores, rounded to :data:`DECIMALS` decimals (exact for multiples of :data:`QUANTUM`)."""
    return round(sum(values), DECIMALS)


def number(value: float) -> str:
    """``value`` as the kit writes points: at most :data:`DECIMALS` decimals, no trailing zeros (``9.375``, ``24``)."""
    text = f"{round(value, DECIMALS):.{DECIMALS}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def final_score(computed: float, adjustments: Iterable[float] = (), late_fraction: float = 0.0) -> float:
    """The score a student gets: the kit's one rule for manual points and late penalties, in that order.

    ``computed`` (the tests' points) plus the manual ``adjustments`` (never below 0), then the late penalty:
    ``late_fraction`` of that is lost (1.0: the score is 0). Every output uses it, through
    ``grader.grading.term_stage``: results.json, feedback.md, grades.csv, the exports, the class report.
    """
    if not 0.0 <= late_fraction <= 1.0:
        raise ValueError(f"final_score: late_fraction ({late_fraction!r}) must be between 0 and 1")
    before = max(0.0, computed + sum(adjustments))
    return round(before * (1.0 - late_fraction), DECIMALS)
