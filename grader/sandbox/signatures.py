"""A student function's signature, as its worker describes it: read back from plain data, and checked.

Run by: the grading process (:class:`Signatures`, a part of ``grader.sandbox.proxy.IsolatedImplementation``), for
``tests.api_signatures`` (a default that is not the API's, said first when a test fails). The proxies' own
``__signature__`` is the API's (failure messages name arguments by it); this is the student's, as
``inspect.signature`` gives it in a student's own run. Nothing of the student's runs here: the worker sends
``[[name, kind, default], ...]`` (``grader.sandbox.worker.described_default``), and anything that is not that
shape gives None, and no claim.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from grader.sandbox import protocol

MAX_PARAMETERS = 64
MAX_TEXT = 200
# The names a worker gives numpy's scalar types (``np.dtype(value).name``, ``codec.described_default``) -> the type,
# from numpy's own names only: numpy's dtype parser, given a worker's text, can kill the grading process (SIGFPE).
_SCALAR_TYPES = {name: np.dtype(name).type for name in {np.dtype(kind).name for kind in set(np.sctypeDict.values())}}


class ShownDefault:
    """A default known by its text only (an object the worker could not send as data)."""

    def __init__(self, text: str) -> None:
        self.text = text[:MAX_TEXT]

    def __repr__(self) -> str:
        return self.text


def signature_from(parameters: Any) -> inspect.Signature | None:
    """The signature the worker described (``[[name, kind, default], ...]``), or None where it is not one."""
    if not isinstance(parameters, list) or len(parameters) > MAX_PARAMETERS:
        return None
    found = []
    try:
        for entry in parameters:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                    and entry[0].isidentifier() and type(entry[1]) is int and 0 <= entry[1] <= 4):
                return None
            found.append(inspect.Parameter(entry[0], inspect._ParameterKind(entry[1]), default=_default(entry[2])))
        return inspect.Signature(found)
    except (ValueError, TypeError):  # parameters out of order, a name twice, a default of the wrong shape
        return None


def _default(value: Any) -> Any:
    """A described default as a value to compare with the API's (TypeError where it is not a described one)."""
    if value is None or type(value) in (bool, int, float, str):
        return value[:MAX_TEXT] if type(value) is str else value
    if isinstance(value, dict) and len(value) == 1:
        if value.get("empty") is True:
            return inspect.Parameter.empty
        if type(value.get("dtype")) is str:
            known = _SCALAR_TYPES.get(value["dtype"])  # never np.dtype() of the worker's text: "m8[Y/0]" is SIGFPE
            return known if known is not None else ShownDefault(f"dtype {value['dtype'][:40]!r}")
        if type(value.get("repr")) is str:
            return ShownDefault(value["repr"])
    raise TypeError("not a described default")


class Signatures:
    """The isolated implementation's signature method (``tests.api_signatures``), using the facade's worker."""

    def signature_of(self, exercise: str, name: str) -> inspect.Signature | None:
        """The student's own signature of ``name``, as its worker describes it; None where it is not known.

        For ``tests.api_signatures`` (a default that is not the API's): the proxies' ``__signature__`` is the API's.
        A function of an exercise that fair grading serves from the reference has none of the student's.
        """
        try:
            module = self.curriculum.exercise_of_function(name).name
            if self.fair and module != exercise and module in self.curriculum.dependencies(exercise):
                return None
            self.function(exercise, name)  # imports the module (or raises)
            view = module if self.fair else protocol.VIEW_ALL
            reply, _ = self._request({"op": "signature", "view": view, "module": module, "function": name}, [],
                                     f"reading the signature of {name}()", counted=False)
        except Exception:  # noqa: BLE001 - no signature known: no claim is made from it
            return None
        return signature_from(reply.get("parameters"))

