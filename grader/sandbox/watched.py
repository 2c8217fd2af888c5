"""A watched call's steps, seen by the grading process: the functions its result must be made of, run elsewhere.

Run by the grading process (``grader.sandbox.proxy.IsolatedImplementation``), for a call that a test watches with
``made_of`` (``tests.kit.Kit.watch``: exercise 11's ``causal_decode``, whose result must be ``attend_step``'s
answers over caches ``kv_cache_append`` built). What the student's worker says of its own calls cannot be trusted:
the tracer runs in the process of the code it watches, which can reach it and rewrite what it reports (a hostile
helper's round: counts and steps noted by hand, full attention graded as decoding). So, for such a call, the worker
is asked to run the student's two step functions elsewhere: their code is swapped, for the call's duration, for a
stand-in that asks the grading process (``worker.Worker.stand_in_steps``; a ``grading_function`` callback), which
runs them in a second worker of the same submission (:class:`Steps` ``.own``), confined and limited as the first,
and keeps each call's arguments and answer. What the watcher is told (a traced call, the calls made, what the
result is made of: ``tests/decoded.py``'s check, on these calls) comes from that record only; the worker's own
claims about the call are dropped. Code that computes its result without calling the two functions, or calls
copies of them, makes no such calls, and its result is made of none.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from grader.sandbox import codec, protocol
from tests import decoded
from tests.reach import note_counted, note_elsewhere, note_made_of, note_watched

# The functions whose calls a watched call's result is made of, asked of the grading process.
STEPS = (decoded.CACHES_FROM, decoded.MADE_BY)
MADE_BY = decoded.MADE_BY  # a call watched with this ``made_of`` has its steps run so (``proxy``)


class _Frame:
    """What ``tests.decoded`` reads of a call's frame: its code's parameters and their values."""

    def __init__(self, code: Any, local: dict[str, Any]) -> None:
        self.f_code, self.f_locals = code, local


class Steps:
    """The steps of one watched call, made in another worker and recorded here.

    Parameters
    ----------
    run : callable
        ``run(name, args, kwargs)``: the student's ``name`` run in the second worker (its answer, or its error
        raised).
    signatures : callable
        ``signatures(name)``: the API's signature of ``name`` (from the reference), or None.
    args, kwargs : tuple, dict
        The watched call's own arguments.
    """

    def __init__(self, run: Callable[[str, tuple, dict], Any],
                 signatures: Callable[[str], inspect.Signature | None], args: tuple, kwargs: dict) -> None:
        self._run, self._asked = run, signatures
        self._known: dict[str, inspect.Signature | None] = {}  # the signatures asked, by name (once: every step asks)
        self.steps = decoded.Steps(args, kwargs)
        self.counts: dict[str, int] = dict.fromkeys(STEPS, 0)
        self._codes: dict[str, Any] = {}

    def _signatures(self, name: str) -> inspect.Signature | None:
        if name not in self._known:
            self._known[name] = self._asked(name)
        return self._known[name]

    def stand_ins(self) -> dict[str, Callable[..., Any]]:
        """The functions the worker's stand-ins call, by name: each runs the student's own, and is recorded."""
        stand_ins = {}
        for name in STEPS:
            def stand_in(*args: Any, name: str = name, **kwargs: Any) -> Any:
                return self._recorded(name, args, kwargs)

            stand_in.runs_elsewhere = True  # type: ignore[attr-defined]  # (no memory of its own here to bound)
            stand_ins[name] = stand_in
        return stand_ins

    def _code(self, name: str) -> Any:
        """A code object with the API's parameters of ``name`` (what ``tests.decoded`` reads of a frame)."""
        if name not in self._codes:
            signature = self._signatures(name)
            parameters = ", ".join(signature.parameters) if signature is not None else "*args, **kwargs"
            namespace: dict[str, Any] = {}
            exec(f"def {name}({parameters}):\n    pass\n", namespace)  # noqa: S102 - the API's own names
            self._codes[name] = namespace[name].__code__
        return self._codes[name]

    def _frame(self, name: str, args: tuple, kwargs: dict) -> _Frame:
        signature = self._signatures(name)
        try:
            bound = signature.bind(*args, **kwargs) if signature is not None else None
        except TypeError:
            bound = None
        if bound is None:  # arguments the API does not take: the step is seen as none of the inputs'
            return _Frame(self._code("_unbound"), {"args": args, "kwargs": kwargs})
        bound.apply_defaults()
        return _Frame(self._code(name), dict(bound.arguments))

    def _recorded(self, name: str, args: tuple, kwargs: dict) -> Any:
        self.counts[name] += 1
        frame = self._frame(name, args, kwargs)
        # A replay (after the call, another query: ``decoded.Steps._replay``) asks the student's function again,
        # in the second worker, without counting as a step.
        self.steps.functions[(name, frame.f_code)] = lambda *a, name=name, **k: self._run(name, a, k)
        self.steps.called(name, frame)
        result = self._run(name, args, kwargs)
        self.steps.returned(name, frame, result)
        return result

    @staticmethod
    def claims_dropped(reply: dict) -> dict:
        """``reply`` without what the worker says of the call's steps (the student's code's word)."""
        return {key: value for key, value in reply.items() if key not in (protocol.COUNTED, protocol.MADE_OF)}

    def note(self, caller: str, result: Any, returned: bool) -> None:
        """Tell the recordings under way what this call did: a traced call, its steps, what ``result`` is made of."""
        note_watched()
        made = [name for name in STEPS if self.counts[name]]
        if made:
            note_elsewhere([(caller, name) for name in made])
            note_counted([(caller, name, self.counts[name]) for name in made])
        if returned:
            found = self.steps.made_of(result)
            if found is not None:
                note_made_of(decoded.MADE_BY, *found)


class Watched:
    """A submission's watched calls: their :class:`Steps`, and the second worker they run in (started at the first).

    ``start()`` starts that worker (an ``IsolatedImplementation`` of the same folder, confined and limited alike).
    """

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start, self._worker = start, None

    def prepare(self, header: dict, functions: list, module: str, args: tuple, kwargs: dict,
                signatures: Callable[[str], inspect.Signature | None], left: Callable[[], float]) -> Steps | None:
        """For a watched call (its ``header`` asks ``made_of``), its :class:`Steps`; else None.

        Their stand-ins join the call's ``functions`` (the test's own, which the worker may ask to run), and the
        header tells the worker their indices (``steps``: ``stand_ins.swap`` puts them in place). Each step runs
        in the second worker, with what the call has ``left()`` of its CPU time.
        """
        if header.get("made_of") != MADE_BY:
            return None
        steps = Steps(lambda name, a, k: run_in(self.worker(), module, name, a, k, max(0.01, left())), signatures,
                      args, kwargs)
        header["steps"] = {}
        for name, stand_in in steps.stand_ins().items():
            header["steps"][name] = len(functions)
            functions.append(stand_in)
        return steps

    def worker(self) -> Any:
        """The second worker (started now if it was not)."""
        if self._worker is None:
            self._worker = self._start()
        return self._worker

    def close(self) -> None:
        """Stop the second worker, if it was started."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()


def run_in(worker: Any, module: str, name: str, args: tuple, kwargs: dict, timeout: float) -> Any:
    """The student's ``name`` of ``module`` run in ``worker`` (an ``IsolatedImplementation``), ``timeout`` CPU s.

    Raises what the student's function raised (type and message), as the call would.
    """
    arrays: list = []
    payload = codec.encode([list(args), kwargs], arrays)
    reply, reply_arrays = worker.forward(module, name, payload, arrays, timeout)
    if reply.get("status") == "ok":
        return codec.receive_result(reply.get("payload"), reply_arrays, args, kwargs)
    if reply.get("status") == "error":
        raise codec.rebuild_exception(reply.get("error") if isinstance(reply.get("error"), dict) else {})
    raise RuntimeError(str(reply.get("message", f"{name}() could not be run")))
