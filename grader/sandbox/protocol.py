"""The operations that may cross the sandbox boundary, with their arguments: the one list.

Both sides read this file. The grading side (``grader.sandbox.proxy``)
imports it; the worker and the fork server (``grader/sandbox/worker.py``, a
script, and ``forkserver.py``) import the copy placed next to the worker in
the sandbox. It imports only the standard library, so that it can.

Grading process -> worker (``REQUESTS``):

- ``init``: the manifest's ``functions`` per exercise, the ``dependencies``
  the worker must serve (empty under ``--no-fair``), and those of them it
  serves with the kit's ``given`` code (``grader.sandbox.given``), the others
  from the reference;
- ``import``: import the student's ``module`` in the package of ``view``;
- ``call``: run the student's ``module.function`` (in ``view``) on ``payload``
  (a call's peak memory is read from outside the worker, never reported by it); with ``answer_here``, sent only
  for the kit's own check (whose folder is the reference), the worker answers the call's callbacks itself, with
  the same modules, and sends them sealed (``answered_here``) before its reply; with ``every_call`` (a test's
  watched call, ``tests.kit.Kit.watch``), the worker also notes the student's API calls by their code (``calls``),
  and with ``made_of`` keeps what that function returns; with ``kept`` (the grading side's own calls, never the
  reference's answers to callbacks, which pass through as they are), its reply says which arrays it sent before,
  and ``tokens`` (``[[i, token]]``) names the request's arrays that are arrays it sent, passed back;
- ``answers``: the sealed answers of ``view`` (``grader.sandbox.sealed``): ``entries`` of [index (hex), size,
  CPU seconds], their bytes back to back in one uint8 array; the worker keeps them with those of the views it
  was given before. No reply: the next request follows;
- ``forget_answers``: drop the sealed answers of ``views`` (the worker's memory). No reply;
- ``preload``: import the installed ``modules`` (libraries a measured module imports, never a file of the
  student's folder) before a measured call's baseline, so that a library's pages are not the call's; ``ok``.

Worker -> grading process, only while one of those requests is in flight:

- a reply: ``status`` is one of ``REPLY_STATUSES``; a call's reply may carry ``reached`` (``REACHED``): the
  ``[caller, callee]`` pairs of the student's own API functions the call went through (``""`` for the call
  itself), names only, at most ``MAX_REACHED`` of them, for the blame of a failure (``tests/reach.py``). It is
  feedback, never a grade: the grading side keeps only well-formed pairs of the names of the request's view
  (``grader.sandbox.reached``) and ignores the rest, whatever the worker sends; and ``answered`` (``ANSWERED``):
  the reference's CPU seconds of the sealed answers the call opened, charged to it; ``untraced`` (``UNTRACED``,
  only ``True``): a call traced by code began beside threads out of the tracer's reach (a gate concludes nothing);
  ``counted`` (``COUNTED``): for a call traced by code, ``[caller, callee, count]``: how often each pair was seen;
  ``made_of`` (``MADE_OF``): for a call traced by code whose header named ``made_of`` (an API function whose
  returns it keeps), ``[function, vectors, first]``: the result's vectors along its last axis, and the first of
  them that is none of those the function returned (``-1``: none such); ``kept`` (``KEPT``, for a request with
  ``kept``): ``[k, token, state]`` (or ``[k, token, GIVEN, i]``) per array of the reply, the worker's objects by
  token, so that one object sent twice is one object on the grading side (``grader.sandbox.kept``);
- ``callback`` (``CALLBACKS``): fair grading's one question, "run the
  reference's ``exercise.function`` on ``payload``". The grading side answers
  it only for the functions of the exercises that the request's view depends
  on (:func:`reference_functions`), never the view's own functions and nothing
  at all under ``--no-fair``; any other callback is refused with a
  ``PermissionError`` and the refusal is recorded in the student's report;
- ``grading_function``: run a function that the test itself passed to the
  student's function, by its index among that call's functions (never one of
  an earlier call); its errors come back as type and message only.

The fork server (``SERVER_REQUESTS``, grading process -> server) starts, kills and
waits for workers; it answers with ``status`` "ok" or "error" only.

Every field is checked by :func:`check` against its type before use; values
in ``payload`` are plain data (see ``codec.encode``), never pickles.
"""

from __future__ import annotations

from typing import Any

# The reference's errors that are not its answer to a question but a fact of the moment (the memory, the stack of
# the process that ran it): answered, never kept as the question's answer (sealed, or remembered for the next
# student), as is anything that is not an ``Exception`` (an exit, an interrupt).
MOMENTARY_ERRORS = frozenset({"MemoryError", "RecursionError"})


def of_the_moment(error: BaseException) -> bool:
    """Whether the reference's ``error`` says nothing of the question it was asked (see ``MOMENTARY_ERRORS``)."""
    return not isinstance(error, Exception) or any(kind.__name__ in MOMENTARY_ERRORS for kind in type(error).__mro__)


# op -> {field: type}. ``object`` means "any plain data": it is decoded and checked by the codec.
REQUESTS: dict[str, dict[str, type]] = {
    "init": {"functions": dict, "dependencies": dict, "given": list},
    "import": {"view": str, "module": str},
    "call": {"view": str, "module": str, "function": str, "payload": object},
    "answers": {"view": str, "entries": list},
    "forget_answers": {"views": list},
    "preload": {"modules": list},
    # The signature of a student's function, as data (tests/api_signatures.py: a default that is not the API's).
    "signature": {"view": str, "module": str, "function": str},
}
CALLBACKS: dict[str, dict[str, type]] = {
    "callback": {"exercise": str, "function": str, "payload": object},
    # A function that the test passed as an argument (a model's predict, say), by its index among the
    # functions of the call in progress; only those can be reached.
    "grading_function": {"index": int, "payload": object},
    # The kit's own check only (a call sent with ``answer_here``): the callbacks the call answered in the worker,
    # sealed, as ``answers`` carries them the other way; accepted only while that check is recorded.
    "answered_here": {"entries": list},
}
# Grading process -> fork server (``forkserver.serve``), on the server's own socket; no student code runs there:
# ``fork`` a worker for the submission folder ``modules`` (its name in the server's folder of submissions),
# dropping to ``uid`` with ``limits`` (CPU seconds, address space, file size, processes, open files) and
# ``niceness``, the worker's three pipes passed along with the message; ``kill`` every process of ``uid`` (and
# say whether anything of it is left); ``wait`` up to ``timeout`` seconds for forked worker ``pid`` to end.
SERVER_REQUESTS: dict[str, dict[str, type]] = {
    "fork": {"modules": str, "uid": int, "limits": list, "niceness": int},
    "kill": {"uid": int},
    "wait": {"pid": int, "timeout": float},
}
# Optional fields (checked when present): the sources of the kit's given code that a view's first request
# carries (exercise -> source; ``grader.sandbox.given_views``), never a file the worker could read.
OPTIONAL: dict[str, dict[str, type]] = {"import": {"given": dict},
                                        "call": {"given": dict, "answer_here": bool, "every_call": bool,
                                                 "made_of": str, "steps": dict, "kept": bool,
                                                 "tokens": list}}
REPLY_STATUSES = ("ok", "error", "import_error")
# A call's reply: the student's API functions the call reached, as [caller, callee] name pairs (see the docstring).
REACHED = "reached"
ANSWERED = "answered"
UNTRACED = "untraced"
COUNTED = "counted"
MADE_OF = "made_of"
KEPT = "kept"
MAX_REACHED = 256
# The view of a request under --no-fair: every module is the student's, and no callback is answered.
VIEW_ALL = "all"
# The kit's sealed answers a worker holds at most: this part of its memory, on top of the student's (its address
# space's hard limit and its group's limit leave room for them: ``forkserver.apply_limits``, ``proxy._send_sealed``).
ANSWERS_SHARE = 8


class ProtocolError(ValueError):
    """A message that the protocol does not allow."""


def check(message: Any, table: dict[str, dict[str, type]]) -> str:
    """The ``op`` of ``message`` after checking it against ``table``; ProtocolError otherwise."""
    if not isinstance(message, dict):
        raise ProtocolError("a message that is not an object")
    op = message.get("op")
    fields = table.get(op) if isinstance(op, str) else None
    if fields is None:
        raise ProtocolError(f"operation {str(op)[:40]!r} is not allowed here")
    for name, kind in fields.items():
        if name not in message:
            raise ProtocolError(f"{op}: missing field {name!r}")
        if kind is not object and not isinstance(message[name], kind):
            raise ProtocolError(f"{op}: field {name!r} must be a {kind.__name__}")
    for name, kind in OPTIONAL.get(op, {}).items():
        if name in message and not isinstance(message[name], kind):
            raise ProtocolError(f"{op}: field {name!r} must be a {kind.__name__}")
    return op


def check_reply(message: Any) -> str:
    """The ``status`` of a worker's reply after checking it; ProtocolError otherwise."""
    if not isinstance(message, dict) or message.get("status") not in REPLY_STATUSES:
        raise ProtocolError("a reply without a known status")
    return message["status"]


def reference_functions(view: str, dependencies: dict[str, list[str]],
                        functions: dict[str, list[str]]) -> frozenset[tuple[str, str]]:
    """The ``(exercise, function)`` pairs that a callback may ask for while a request of ``view`` runs.

    Only the functions of the exercises ``view`` depends on (``dependencies``
    holds the transitive closure, and is empty for every view under
    ``--no-fair``); never those of ``view`` itself, nothing for ``VIEW_ALL``.
    """
    if view == VIEW_ALL:
        return frozenset()
    return frozenset((exercise, function) for exercise in dependencies.get(view, ()) if exercise != view
                     for function in functions.get(exercise, ()))
