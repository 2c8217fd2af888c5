"""Which graded test files a ``-m`` expression can select, decided before they are collected.

Every test of an exercise's test file carries that exercise's marker and no
other exercise's (``tests/plugin.py`` adds it at collection). So
``pytest -m softmax`` can select nothing from ``test_03_attention.py``, and
collecting that file (importing it, building its tests) is wasted time: the
whole suite's collection costs about as much as running Part I.

A file is skipped only when the expression is false for *every* choice of the
markers its tests might also carry (``slow``, ``parametrize``, a marker with
keyword arguments): its own exercise's marker true, the other exercises'
false, any other name either way. Any expression that could select one of its
tests keeps the file.
"""

from __future__ import annotations

from collections.abc import Collection

from _pytest.mark.expression import Expression

# More free names than this in one expression: the file is kept rather than trying 2**n assignments.
MOST_FREE_NAMES = 12


class _Unknown(Exception):
    """Raised by the matcher for a name not yet given a value: the search branches on it."""

    def __init__(self, key: tuple[str, tuple[tuple[str, object], ...]]) -> None:
        super().__init__(key[0])
        self.key = key


def could_select(expression: str, exercise: str, exercises: Collection[str]) -> bool:
    """Whether the ``-m`` expression can select a test of ``exercise``'s file.

    Parameters
    ----------
    expression : str
        The mark expression, exercise numbers already replaced by names (as ``tests/plugin.py`` does).
    exercise : str
        The exercise whose test file is asked about: its marker is on every test of the file.
    exercises : collection of str
        Every exercise's name: no test of the file carries another exercise's marker.

    Returns
    -------
    bool
        False only when no test of the file can match, whatever other markers it carries; True for an
        empty expression and for one pytest cannot parse (pytest reports that itself).
    """
    if not expression.strip():
        return True
    try:
        compiled = Expression.compile(expression)
    except Exception:  # noqa: BLE001 - a malformed expression: pytest itself says what is wrong
        return True
    return _any_assignment(compiled, exercise, frozenset(exercises), {})


def _any_assignment(compiled: Expression, exercise: str, exercises: frozenset[str],
                    fixed: dict[tuple[str, tuple[tuple[str, object], ...]], bool]) -> bool:
    """Whether some value of the names not in ``fixed`` (nor exercise names) makes ``compiled`` true."""

    def matcher(name: str, /, **kwargs: object) -> bool:
        if name in exercises and not kwargs:
            return name == exercise
        key = (name, tuple(sorted(kwargs.items())))
        if key not in fixed:  # a marker the file's tests may or may not carry (a kwargs one: it may match)
            raise _Unknown(key)
        return fixed[key]

    try:
        return compiled.evaluate(matcher)
    except _Unknown as unknown:
        if len(fixed) >= MOST_FREE_NAMES:
            return True
        return any(_any_assignment(compiled, exercise, exercises, {**fixed, unknown.key: value})
                   for value in (True, False))
