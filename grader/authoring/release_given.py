"""The exercises a release gives rather than assigns: their working code and their public tests.

A course that hands out Part III (or any selection) builds on earlier
exercises it does not assign. Those ship as working code the student can read
and need not write, marked given in a header, with their public tests (which
pass), so that every test, ``status`` and every demo work in the release.
Which exercises are given is :meth:`grader.curriculum.Curriculum.given_names`
(what the selection builds on, minus the selection), in the release as here.

The given code is not the reference (no line of ``solutions/`` ships,
``grader/tests/reference_lines.py``): it is a second implementation kept in
``grader/release_files/given/`` of a checkout (the wheel and the sdist leave
it out: an installed kit reads the course folder's copy, ``given/``, made by
``attention-kit course init DIR --kit CHECKOUT``; ``grader.sandbox.given.folder``),
written apart from the reference and checked against the same public tests
(``grader/tests/test_given.py``). An exercise that a selection builds on and
that has no file there stops the build with a message naming it.

Called by ``grader.authoring.release``. Imports only the standard library and the kit's base modules.
"""

from __future__ import annotations

from typing import Any

from grader.authoring.release_allowlist import ReleaseError
from grader.sandbox import given

GIVEN_MARK = "GIVEN. This course does not assign it; you need not write it."


class NoGivenCode(ReleaseError):
    """No given implementations at all in this install: a set-up error, reported as a missing reference is.

    The student-safe package without a course folder's ``given/``: ``error: ...``, exit status 2.
    """


def given_files(curriculum: Any) -> tuple[dict[str, str], list[str]]:
    """The release's texts of the given exercises' modules, and their test files (paths in the kit).

    Raises
    ------
    ReleaseError
        If an exercise the selection builds on has no given implementation, or one lacks the given mark
        (:class:`NoGivenCode` when there are none at all).
    """
    texts, tests = {}, []
    folder = given.folder()
    if folder is None and curriculum.given_names():
        raise NoGivenCode(f"the course builds on {', '.join(curriculum.given_names())}, which it does not assign: "
                           + given.missing())
    for name in curriculum.given_names():
        exercise = curriculum.exercise(name)
        source = folder / exercise.module_file
        if not source.is_file():
            chosen = ", ".join(curriculum.selected_names())
            raise ReleaseError(f"the course's exercises ({chosen}) build on exercise {exercise.number}, {name}, "
                               f"which the course does not assign, and the kit has no given implementation of it "
                               f"({source}): write one (checked by "
                               f"grader/tests/test_given.py) or assign {name} too")
        text = source.read_text(encoding="utf-8")
        if GIVEN_MARK not in text.split('"""')[1]:
            raise ReleaseError(f"{source}: its docstring must say "
                               f"{GIVEN_MARK!r}, so the student knows it is given")
        texts[f"exercises/{exercise.module_file}"] = text
        tests.append(exercise.test_file)
    return texts, tests
