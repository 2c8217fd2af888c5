"""The student's step functions of a watched call, swapped for stand-ins while the call runs (the worker's side).

Runs in the sandboxed worker (a copy beside ``worker.py``, named in ``limits.SANDBOX_MODULES``; the standard
library only). For a call a test watches with ``made_of`` (exercise 11's ``causal_decode``), the grading process
must see the calls of the student's ``kv_cache_append`` and ``attend_step`` itself (``grader.sandbox.watched``
says why). For the call's duration, the code of every function of the student's folder that stands for one of
those names (a module-level function of that name, the function any binding of the name holds under its
wrappers) is swapped for a stand-in's, and each binding itself for a stand-in: any alias, partial, closure,
thread, class or cache that holds one of them then calls the stand-in. The stand-in (``worker.Worker.stand_in``)
sends the arguments to the grading process and returns what the student's own function gives. A function whose
code cannot be swapped (a closure) keeps its own: its calls are then none of those the grading process sees.
"""

from __future__ import annotations

import gc
import inspect
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

TABLE = "__attention_kit_steps__"  # the stand-ins, in the globals of the functions whose code was swapped


def swap(module: types.ModuleType, steps: Any, folder: str,
         stand_in: Callable[[int, Callable[..., Any]], Callable[..., Any]]) -> list[tuple]:
    """Swap the functions ``steps`` names ({name: index}) in the student's modules; what :func:`restore` undoes.

    ``module``: the student's module of the call; ``folder``: where the student's files lie (only their
    functions are swapped); ``stand_in(index, own)``: a stand-in that records a call and then runs ``own``.
    Never raises: anything that goes wrong is put back, and nothing is swapped.
    """
    swapped: list[tuple] = []
    if not isinstance(steps, dict):
        return swapped
    try:
        _swap(module, steps, folder, stand_in, swapped)
    except Exception:  # noqa: BLE001 - never the worker's end
        restore(swapped)
        return []
    return swapped


def _swap(module: types.ModuleType, steps: dict, folder: str,
          stand_in: Callable[[int, Callable[..., Any]], Callable[..., Any]], swapped: list[tuple]) -> None:
    names = {name: index for name, index in steps.items()
             if type(name) is str and type(index) is int and name.isidentifier()}
    package = module.__name__.rpartition(".")[0]
    modules = [m for key, m in list(sys.modules.items()) if key.startswith(f"{package}.")
               and isinstance(getattr(m, "__dict__", None), dict) and m.__dict__.get("__package__") == package]
    bound: dict[int, str] = {}  # id of a function a binding holds -> its API name
    for loaded in modules:
        for name in names:
            try:
                held = inspect.unwrap(loaded.__dict__[name]) if name in loaded.__dict__ else None
            except ValueError:
                continue
            if type(held) is types.FunctionType:
                bound.setdefault(id(held), name)
    for function in gc.get_objects():
        if type(function) is not types.FunctionType:
            continue
        code = function.__code__
        # A method named like the API (``self`` first) is not the API's function; the function it calls is.
        name = bound.get(id(function)) or (code.co_name if function.__qualname__ == code.co_name else None)
        if name not in names or code.co_freevars or not code.co_filename.startswith(folder):
            continue
        namespace = function.__globals__
        table = namespace.setdefault(TABLE, {}) if isinstance(namespace.get(TABLE, {}), dict) else None
        if table is None:
            continue
        key = f"{name} {len(swapped)}"  # each function its own (two may bear one name: a later def and an alias)
        try:
            own = types.FunctionType(code, namespace, function.__name__, function.__defaults__)
            own.__kwdefaults__ = function.__kwdefaults__
            table[key] = stand_in(names[name], own)
            swapped.append((function, code, function.__defaults__, function.__kwdefaults__, namespace))
            function.__code__ = _code(key)
            function.__defaults__ = function.__kwdefaults__ = None
        except (TypeError, ValueError):  # a function that refuses: its code kept, its calls not seen
            continue
    standing = {id(entry[0]) for entry in swapped}
    for loaded in modules:
        for name, index in names.items():
            value = loaded.__dict__.get(name)
            # A wrapper too: what it calls need not be its __wrapped__ (functools.singledispatch). A call through it
            # that passes its arguments on as they came is sent once (``Asking.stand_in``), not again by the stand-in
            # of the function it wraps.
            if value is not None and id(value) not in standing:
                swapped.append((None, name, value, None, loaded.__dict__))
                loaded.__dict__[name] = stand_in(index, value)


def _code(key: str) -> types.CodeType:
    """The code of the stand-in ``key`` of its globals' table."""
    namespace: dict[str, Any] = {}
    exec(compile(f"def stand_in(*args, **kwargs):\n    return {TABLE}[{key!r}](*args, **kwargs)\n",  # noqa: S102
                 "<the grader's stand-in>", "exec"), namespace)
    return namespace["stand_in"].__code__


def restore(swapped: list[tuple]) -> None:
    """Put back the code (and defaults) and the bindings that :func:`swap` swapped."""
    for function, code, defaults, kwdefaults, namespace in reversed(swapped):
        if function is None:  # a binding: (None, name, its value, None, the module's namespace)
            namespace[code] = defaults
            continue
        try:
            function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults
        except (TypeError, ValueError):  # noqa: PERF203 - a function the student's code changed meanwhile
            pass
        namespace.pop(TABLE, None)


class Asking:
    """A worker's questions to the grading process during a call: one at a time, and never between calls.

    What stands in for a function of the grading side (a function the test passed, a watched call's steps) serves
    its own call only: a thread left running, or a cache that kept it, sends nothing once that call ended (its
    message would cross a later call's). ``codec``: the worker's codec module.
    """

    def __init__(self, channel: Any, codec: Any) -> None:
        self.channel, self.codec = channel, codec
        self.lock = threading.RLock()  # a question and its reply (threads asking at once crossed their replies)
        self.calls, self.open = 0, 0  # the calls handled so far, and the one running now (0: none)
        self.running = threading.local()  # per thread: the steps sent whose own function runs now (``stand_in``)

    def close(self) -> None:
        """The call ended: a question under way ends first, none starts after."""
        with self.lock:
            self.open = 0

    def grading_function(self, index: int) -> Callable[..., Any]:
        """A stand-in for function ``index`` of the current call's arguments, run by the grading process."""
        call, codec = self.calls, self.codec

        def grading_function(*args: Any, **kwargs: Any) -> Any:
            arrays: list = []
            payload = codec.encode([list(args), kwargs], arrays)
            with self.lock:
                if self.open != call:
                    raise RuntimeError("a function the test passed was called after the call it was passed to ended")
                self.channel.send({"op": "grading_function", "index": index, "payload": payload}, arrays)
                header, reply_arrays = self.channel.receive()
            if header.get("status") != "ok":
                raise codec.rebuild_exception(header.get("error", {}))
            return codec.receive_result(header["payload"], reply_arrays, args, kwargs)

        grading_function.grading_function = index  # type: ignore[attr-defined]
        return grading_function

    def stand_in(self, index: int, own: Callable[..., Any]) -> Callable[..., Any]:
        """``own`` (a function of the student's), each call also sent to the grading process's record (``index``).

        During the current call only; later it is ``own`` alone. Nothing of the record comes back into the call.
        """
        call, codec = self.calls, self.codec

        def stand_in(*args: Any, **kwargs: Any) -> Any:
            running = self.running.__dict__.setdefault("steps", [])
            if any(_same_step(step, index, args, kwargs) for step in running):
                # A wrapper's stand-in sent this very call (the same objects) and now runs the function it wraps:
                # the grading process, which runs the API's name itself, would record the same step again.
                return own(*args, **kwargs)
            arrays: list = []
            try:
                payload = codec.encode([list(args), kwargs], arrays)
            except Exception:  # noqa: BLE001 - arguments that cannot be sent: this call is not recorded
                payload = None
            sent = False
            with self.lock:
                if payload is not None and self.open == call:
                    self.channel.send({"op": "grading_function", "index": index, "payload": payload}, arrays)
                    self.channel.receive()
                    sent = True
            if not sent:
                return own(*args, **kwargs)
            running.append((index, args, kwargs))
            try:
                return own(*args, **kwargs)
            finally:
                running.pop()

        return stand_in


def _same_step(step: tuple, index: int, args: tuple, kwargs: dict) -> bool:
    """Whether a call of function ``index`` with ``args`` and ``kwargs`` is ``step`` (index, args, kwargs) again.

    The same objects in the same places: a wrapper that passes its arguments on as it got them (a decorator, a
    class-based one, an alias's stand-in and the function it holds). A call with any other argument is a step of
    its own (a step per batch entry inside a batched one, a wrapper that converts its arguments).
    """
    sent, sent_args, sent_kwargs = step
    return (sent == index and len(sent_args) == len(args) and all(a is b for a, b in zip(sent_args, args, strict=True))
            and sent_kwargs.keys() == kwargs.keys() and all(sent_kwargs[key] is kwargs[key] for key in kwargs))
