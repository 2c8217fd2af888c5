"""The kit's one scoring rule, used by every tool that shows points.

An exercise's points (the manifest's ``points``) are split equally between
its graded tests: a passing test earns its share, a failing one nothing. The
instructors' hidden tests of an exercise share its ``hidden_points`` the same
way, on top (a hidden file may set its own ``POINTS``). So the public tests
are worth the manifest's total (100 for Part I) everywhere: ``attention-kit
status``, the GitHub Classroom workflow, the notebooks' test cells; where the
hidden tests run too (``attention-kit grade``, Gradescope, nbgrader with
hidden cells), the maximum adds the hidden points, and those tools say so.

Standard library only: the student commands import it.
"""

from __future__ import annotations


def share(points: float, tests: int) -> float:
    """What one test of a pool of ``tests`` tests sharing ``points`` is worth."""
    if tests < 0 or points < 0:
        raise ValueError(f"share: points ({points}) and tests ({tests}) must not be negative")
    return points / tests if tests else 0.0


def earned(points: float, passed: int, tests: int) -> float:
    """The points of a pool whose ``passed`` of ``tests`` tests pass."""
    if not 0 <= passed <= tests:
        raise ValueError(f"earned: passed ({passed}) must lie between 0 and tests ({tests})")
    return share(points, tests) * passed
