"""Speed-ups of private pytest code for the grading processes: THEY CHANGE NO GRADE.

Run by: each long-lived grading process (``grader.grading.session``), once
per process.

Every function here replaces a private pytest function with one that gives
the same answer faster (remembered). None changes what a test checks, how it
is scored or what a student reads; ``grader/tests/test_speedups.py`` grades
the same class with and without them and compares the results. Each may stop
applying on a pytest release (it then does nothing, never fails). Each is kept
only because it was measured to save at least 5% of the grading time on its
own (figures and method: ``benchmarks/results/NOTES.md``, "Speed-ups of
private pytest code"). Four others were measured, found to save less, and removed: the
memoized ``getstatementrange_ast`` (never reached by the suite's failures),
``getfuncargnames`` for the ``request`` fixture, ``Session.gethookproxy``,
and the terminal reporter's per-test hooks (each 0.5 to 3% of a grading
process's time).

Switch them all off with ``ATTENTION_KIT_NO_SPEEDUPS=1`` (the grading
processes read it when they start); a comma-separated list of names of
:data:`SPEEDUPS` switches off only those (used to measure them one by one).
"""

from __future__ import annotations

import os
from typing import Any

OFF_SWITCH = "ATTENTION_KIT_NO_SPEEDUPS"


def enabled(name: str) -> bool:
    """Whether the speed-up ``name`` (a key of :data:`SPEEDUPS`) is on (``ATTENTION_KIT_NO_SPEEDUPS`` unset)."""
    off = os.environ.get(OFF_SWITCH, "").strip()
    if not off or off == "0":
        return True
    return off != "1" and name not in {part.strip() for part in off.split(",")}


def patch_pytest() -> None:
    """Apply the speed-ups that are on (once per process; a second call changes nothing)."""
    for name, patch in SPEEDUPS.items():
        if enabled(name):
            patch()


def memoize_code_paths() -> None:
    """Make pytest find the file of a traceback entry's code without a new path and a ``stat`` each time.

    For every failure, pytest cuts its traceback down to the test function
    (``_pytest.python.Function._traceback_filter``), asking every entry from
    its own runner's frames on for its code's file (``Code.path``: an absolute
    ``Path`` and an ``exists()`` check), about twenty per failure. The answer
    depends only on the file name (and, for a relative one, the working
    directory), so it is remembered per name. A private pytest property: if it
    is not there (another pytest), nothing changes.
    """
    try:
        from _pytest._code import code
    except ImportError:
        return
    prop = getattr(getattr(code, "Code", None), "path", None)
    if not isinstance(prop, property) or prop.fget is None or getattr(prop.fget, "memoized_by_attention_kit", False):
        return
    original = prop.fget
    answers: dict[tuple[str, str], Any] = {}

    def path(self: Any) -> Any:
        filename = getattr(self.raw, "co_filename", None)
        if not isinstance(filename, str):
            return original(self)
        key = (filename, "" if os.path.isabs(filename) else os.getcwd())
        if key not in answers:
            if len(answers) > 5000:
                answers.clear()
            answers[key] = original(self)
        return answers[key]

    path.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    code.Code.path = property(path, doc=prop.__doc__)  # type: ignore[method-assign]


# Every speed-up by name (the names ATTENTION_KIT_NO_SPEEDUPS may list).
SPEEDUPS = {"code_paths": memoize_code_paths}
