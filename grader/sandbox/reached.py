"""What a graded call reached of the student's own functions, as the worker says: checked, then noted for the blame.

Run by the grading process, for ``grader.sandbox.proxy.IsolatedImplementation``'s calls. The worker notes which
of the student's API functions a call went through, and which called which (``worker.Worker.instrument``), and
sends the names with its reply (``protocol.REACHED``); they go to the same records a student's own run makes
in-process (``tests/reach.py``), so that a graded failure leads with the function a local ``pytest`` names
(issue 34.2).

The worker runs the student's code, so what it sends is untrusted: only a list of at most
``protocol.MAX_REACHED`` ``[caller, callee]`` pairs of strings counts, and of it only the pairs whose names
are functions of the request's view (an exercise's own functions under fair grading, where the others are
the kit's given code or the reference's; every function of the manifest under ``--no-fair``), the caller
possibly ``""`` (the test's own call). Anything else is dropped, never raised: these names choose which
function a failure's first line names, never a test's outcome or a grade.
"""

from __future__ import annotations

from typing import Any

from grader.curriculum import load as load_curriculum
from grader.sandbox import protocol
from tests.reach import (
    every_call_made_of,
    every_call_wanted,
    note_counted,
    note_elsewhere,
    note_made_of,
    note_untraced,
    note_watched,
)


def known_functions(view: str) -> frozenset[str]:
    """The API functions a call of ``view`` may reach of the student's: its exercise's, or all (``VIEW_ALL``)."""
    curriculum = load_curriculum()
    kept = _KNOWN.get(view)
    if kept is None or kept[0] is not curriculum:  # per manifest in force (asked twice in every call)
        kept = _KNOWN[view] = (curriculum, _known(curriculum, view))
    return kept[1]


_KNOWN: dict[str, tuple[Any, frozenset[str]]] = {}  # view -> (the manifest, its functions)


def _known(curriculum: Any, view: str) -> frozenset[str]:
    if view == protocol.VIEW_ALL:
        return frozenset(f for exercise in curriculum.exercises for f in exercise.functions)
    try:
        return frozenset(curriculum.exercise(view).functions)
    except (KeyError, ValueError):
        return frozenset()


def _entries(raw: Any, view: str, size: int) -> list[list]:
    """The entries of ``raw`` that are lists of ``size`` items, the first two of them ``view``'s names.

    Never raises: a field that is not a list, or longer than ``protocol.MAX_REACHED``, counts as nothing; an entry
    whose caller and callee are not known names (the caller may be ``""``) is dropped.
    """
    if type(raw) is not list or len(raw) > protocol.MAX_REACHED:
        return []
    known = known_functions(view)
    return [entry for entry in raw if type(entry) is list and len(entry) == size
            and type(entry[0]) is str and type(entry[1]) is str and entry[1] in known
            and (entry[0] == "" or entry[0] in known)]


def accepted(raw: Any, view: str) -> list[tuple[str, str]]:
    """The well-formed ``(caller, callee)`` pairs of ``raw`` (a reply's ``reached``) that name ``view``'s functions."""
    return list(dict.fromkeys((caller, callee) for caller, callee in _entries(raw, view, 2)))


def note(reply: Any, view: str, students: bool) -> None:
    """Note what a call's ``reply`` says it reached in the recordings under way (``tests.reach.note_elsewhere``).

    ``students``: the worker runs a student's code (not the reference's, which answers a test's own call of
    another exercise's function under fair grading: nothing of the student's is reached there).
    """
    if students and isinstance(reply, dict):
        pairs = accepted(reply.get(protocol.REACHED), view)
        if pairs:
            note_elsewhere(pairs)
        if reply.get(protocol.UNTRACED) is True:
            note_untraced()
        if type(reply.get(protocol.COUNTED)) is list:  # a watched call (its counts, possibly none)
            note_watched()
        counted = counts(reply.get(protocol.COUNTED), view)
        if counted:
            note_counted(counted)
        made = made_of(reply.get(protocol.MADE_OF), view)
        if made is not None:
            note_made_of(*made)


def made_of(raw: Any, view: str) -> tuple[str, int, int] | None:
    """A reply's well-formed ``made_of`` (``[function, vectors, first]``, the function one of ``view``'s), or None."""
    if (type(raw) is not list or len(raw) != 3 or type(raw[0]) is not str or raw[0] not in known_functions(view)
            or type(raw[1]) is not int or type(raw[2]) is not int or not 0 <= raw[1] < 2**40
            or not -1 <= raw[2] < raw[1]):
        return None
    return raw[0], raw[1], raw[2]


def counts(raw: Any, view: str) -> list[tuple[str, str, int]]:
    """The well-formed ``(caller, callee, count)`` triples of ``raw`` (a reply's ``counted``) of ``view``'s names."""
    found = {(caller, callee): count for caller, callee, count in _entries(raw, view, 3)
             if type(count) is int and 0 < count < 2**31}
    return [(caller, callee, count) for (caller, callee), count in found.items()]


def asked(header: dict) -> dict:
    """A call's ``header``, asking the worker to trace it by code while the test watches it (``Kit.watch``)."""
    if not every_call_wanted():
        return header
    made = every_call_made_of()
    return {**header, "every_call": True, **({"made_of": made} if made else {})}
