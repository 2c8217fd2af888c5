"""A crash of the student's code: when a test lets it through, and where in the student's file it happened.

Both the implementation's wrapper (``tests.kit``) and the feedback helpers
(``tests.feedback``) need these two things; they live here so that neither
of those modules imports the other.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import traceback
from collections.abc import Iterator
from pathlib import Path

import grader

_RAISE_THROUGH: contextvars.ContextVar[bool | str] = contextvars.ContextVar("attention_kit_raise_through",
                                                                    default=False)


@contextlib.contextmanager
def raising_through() -> Iterator[None]:
    """Inside this block an exception of the student's code reaches the caller (a test that expects one)."""
    token = _RAISE_THROUGH.set(True)
    try:
        yield
    finally:
        _RAISE_THROUGH.reset(token)


def is_raising_through() -> bool:
    """Whether the caller is inside :func:`raising_through` (the exception goes to the test, not a failure)."""
    return bool(_RAISE_THROUGH.get())


@contextlib.contextmanager
def raising_everything() -> Iterator[None]:
    """:func:`raising_through`, a ``NotImplementedError`` too (a gate's own call: its answer, not the test's end)."""
    token = _RAISE_THROUGH.set("everything")
    try:
        yield
    finally:
        _RAISE_THROUGH.reset(token)


def is_raising_everything() -> bool:
    """Whether the caller is inside :func:`raising_everything`."""
    return _RAISE_THROUGH.get() == "everything"


_KIT = Path(__file__).resolve().parent.parent
# These tests and the grader package wherever they are imported from: in an installed kit the tests are
# grader/_kit/tests and the grader's own code (grader/sandbox/proxy.py ...) is not under _KIT / "grader".
_OWN = (Path(__file__).resolve().parent, Path(grader.__file__).resolve().parent)


def _is_kit_file(filename: str) -> bool:
    """Whether a traceback frame belongs to the kit's own test or grading code."""
    path = Path(filename).resolve()
    return any(path.is_relative_to(folder) for folder in (*_OWN, _KIT / "tests", _KIT / "grader"))


def where_it_crashed(error: BaseException) -> str:
    """The student's file and line that raised ``error`` (or the isolated worker's note), one line per place."""
    notes = getattr(error, "__notes__", None)  # the isolated grader reports the student's frames here
    if notes:
        return "\n            " + "\n            ".join(line for note in notes for line in note.splitlines())
    # A call stopped past its budget (tests.kit.call_budget): its TimeoutError is raised where the budget ends
    # (contextlib's frame, named before); the line that was running is in the timer's signal, the context.
    stopped = _stopped(error)
    frames = [frame for frame in traceback.extract_tb((stopped or error).__traceback__)
              if "numpy" not in Path(frame.filename).parts and not _is_kit_file(frame.filename)]
    if frames:
        last = frames[-1]
        at = "stopped at" if stopped else "at"
        where = f"\n            {at} {Path(last.filename).name} line {last.lineno}: {last.line}"
        # Raised in another of the student's files (a blind round: multi_head_attention handing k and v of two
        # lengths to scaled_dot_product_attention, whose own check raised): the line that made the call too, or
        # "the line above" is the callee's raise, which did its job.
        # Every file the call came through, innermost first (a blind round: multi_head_attention_backward giving
        # the mask its head axis in front made _checks.py's require_broadcast raise inside attention.py, and only
        # attention.py's line was named, not backward.py's call, where the mistake was).
        current = last.filename
        for frame in reversed(frames):
            if frame.filename != current:
                where += f"\n            called from {Path(frame.filename).name} line {frame.lineno}: {frame.line}"
                current = frame.filename
        return where
    return ""


def _stopped(error: BaseException) -> BaseException | None:
    """The timer's signal inside the student's code, when ``error`` is the budget's TimeoutError (else None)."""
    context = error.__context__
    if isinstance(error, TimeoutError) and error.__suppress_context__ and type(context).__name__ == "_OverBudget":
        return context
    return None


def not_about_the_inputs(error: BaseException) -> str | None:
    """What to revisit for a crash that no input causes (a name the module never defined), or None.

    Such a crash is told "what does the line assume about the inputs" otherwise, which sends the student to the
    arguments (a README walk: a body copied without the helper it calls).
    """
    if isinstance(error, UnicodeDecodeError) or type(error).__name__ == "UnicodeDecodeError":
        return ("these bytes are not valid UTF-8, and bytes.decode raises on them unless told what to do: the "
                "docstring says what the function gives for them (errors='replace' gives '\\ufffd' for each broken "
                "sequence)")
    if _stopped(error) is not None:
        return ("the call was stopped past its time budget at the line above: a loop whose condition never changes, "
                "a sleep or a wait for input, or far more work than these inputs need (a Python loop over every "
                "entry where one array operation does it)")
    if isinstance(error, TimeoutError) and "was not run: your code already ran out of time" in str(error):
        return ("earlier calls of this function were stopped past their time budget (the first such failure shows "
                "the line that was running): fix that first; until then the kit does not run the function again")
    if isinstance(error, UnboundLocalError):
        return ("a local variable is read before this path through the function gave it a value: assign it on "
                "every path before its first use")
    if isinstance(error, NameError):
        found = re.search(r"name '([^']+)' is not defined", str(error))
        name = f"'{found.group(1)}'" if found else "a name"
        return (f"{name} is not defined in your module: every name a function uses must be defined or imported in "
                "its own file (an import at the top, or a helper written in that file); code copied from elsewhere "
                "may call a helper that only its source had")
    return None
