"""Values as plain data: what may cross the sandbox boundary inside a frame, and how it comes back.

Run by both sides: the grading process imports it as ``grader.sandbox.codec``
(to encode a call's arguments, decode a reply, answer fair grading's
callbacks); the worker, in the sandbox, imports the copy placed next to
``worker.py`` (to decode a call and encode its result). It imports only the
standard library, numpy and :mod:`grader.sandbox.frames`, so that it can.

Values travel as plain data only (see :func:`encode`): None, numbers,
strings, bytes, lists, tuples, dicts, numeric and bool arrays (carried by the frame,
by index), random generators (as their state) and the functions of
:data:`PLAIN_FUNCTIONS`. A reply sends back only the arguments a call changed
(see :func:`encode_after`); exceptions cross as their type, builtin bases,
message and the student's frames (:func:`exception_info`).
"""

from __future__ import annotations

import builtins
import re
import traceback
import warnings
from typing import Any

import numpy as np

from .cell_lines import place
from .frames import ALLOWED_DTYPES, Received, Unsendable, check_dtype
from .generators import generator_of

PYTHON_TYPES = {"float": float, "int": int, "bool": bool, "complex": complex}  # as dtype arguments

# --------------------------------------------------------------------------- plain functions

# The only functions that may cross the channel: scalar functions of one array, named by a kind from this
# list and given by their coefficients (plain data), so exercise 8's numerical_gradient(f, x) can be graded
# in the worker. The graded tests build them with tests.kit.plain_function (the same formulas, in-process);
# grader/tests checks that both sides compute the same values.
PLAIN_FUNCTIONS: dict[str, Any] = {
    # f(x) = sum(a x + b x^2 + c x^3) + (sum(d x))^2 / 2, the coefficients broadcasting against x; the last
    # term couples the entries, so a gradient check that does not put an entry back before the next one shows
    "cubic": lambda x, a, b, c, d: float(np.sum(a * x + b * x**2 + c * x**3) + 0.5 * np.sum(d * x) ** 2),
}


class PlainFunction:
    """A function of :data:`PLAIN_FUNCTIONS` with its coefficients; callable like ``f(x)``."""

    PLAIN_FUNCTION = True
    __slots__ = ("kind", "params")

    def __init__(self, kind: str, params: dict) -> None:
        if kind not in PLAIN_FUNCTIONS:
            raise ValueError(f"unknown plain function {str(kind)[:40]!r}")
        self.kind, self.params = kind, params

    def __call__(self, x: Any) -> float:
        """The function's value at ``x``."""
        return PLAIN_FUNCTIONS[self.kind](np.asarray(x), **self.params)


def _is_plain_function(value: Any) -> bool:
    return getattr(type(value), "PLAIN_FUNCTION", False) is True


# --------------------------------------------------------------------------- values


class _Same:
    """In a reply: "the array sent at this place, unchanged" (see :func:`encode_after`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SAME"


SAME = _Same()

def _encode_key(key: Any, arrays: list) -> Any:
    if not (key is None or isinstance(key, (str, int, float, bool))):
        raise Unsendable(f"dict keys of type {type(key).__name__} cannot be sent")
    return encode(key, arrays)


def _array_index(array: np.ndarray, arrays: list) -> int:
    """The index of ``array`` among the message's ``arrays``, appending it unless that very object is there.

    One array given to two places (init_transformer_layer's ln1_gamma and ln2_gamma as one np.ones, a call
    f(x, x)) arrives as one array, as it is in process: sent twice, it arrived as two, so a test asking whether two
    parameters share memory could never fail when graded. Views of one buffer that are other objects still
    travel apart.
    """
    for index, sent in enumerate(arrays):
        if sent is array:
            return index
    arrays.append(array)
    return len(arrays) - 1


def encode(value: Any, arrays: list, functions: list | None = None) -> Any:
    """Turn ``value`` into JSON-able data, appending its arrays to ``arrays``.

    Allowed: None, bool, int, float, str, bytes and bytearray (as hex text:
    exercise 15's pieces of text), lists/tuples/dicts of those, plain
    numeric or bool numpy arrays and scalars, ``numpy.random.Generator``
    (sent as its bit generator's state) and the functions of
    :data:`PLAIN_FUNCTIONS` (sent as their kind and coefficients). Anything
    else raises ``Unsendable``.

    ``functions``: only the grading side passes it, for a call's arguments. A
    function among them (a test's model, e.g. the ``predict`` of
    ``occlusion_importance``) is then not sent: it is appended to
    ``functions`` and travels as its index. The worker gets a stand-in that
    asks the grading process to run it (a ``"grading_function"`` callback,
    plain data both ways), so the test's code stays on the grading side and
    student code never crosses the other way.
    """
    kind = type(value)  # the exact types of honest calls first; any other type takes the general route below
    if kind is np.ndarray:
        check_dtype(value.dtype)
        return {"$": "array", "i": _array_index(value, arrays)}
    if kind is float or kind is int or kind is str or kind is bool or value is None:
        return value
    if kind is list:  # a list is a JSON array; every other container is an object tagged by "$"
        return [encode(item, arrays, functions) for item in value]
    if kind is tuple:
        return {"$": "tuple", "v": [encode(item, arrays, functions) for item in value]}
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)  # JSON as Python writes it keeps every bit, nan and inf included
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return {"$": "bytes", "v": bytes(value).hex()}
    if isinstance(value, bytearray):  # (equal to the bytes it holds, as in the student's own run)
        return {"$": "bytearray", "v": bytes(value).hex()}
    if isinstance(value, np.ndarray):
        array = np.asarray(value)  # a subclass arrives as a plain ndarray
        check_dtype(array.dtype)
        return {"$": "array", "i": _array_index(array, arrays)}
    if isinstance(value, np.generic):
        array = np.asarray(value)
        check_dtype(array.dtype)
        arrays.append(array)
        return {"$": "scalar", "i": len(arrays) - 1}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        dtype = np.dtype(value)  # a dtype argument such as dtype=np.float32
        check_dtype(dtype)
        return {"$": "dtype" if isinstance(value, np.dtype) else "scalar_type", "v": dtype.str}
    if any(value is kind for kind in PYTHON_TYPES.values()):
        return {"$": "python_type", "v": value.__name__}
    if isinstance(value, np.random.Generator):
        return {"$": "rng", "state": encode(dict(value.bit_generator.state), arrays)}
    if isinstance(value, list):
        return [encode(item, arrays, functions) for item in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "v": [encode(item, arrays, functions) for item in value]}
    if _is_plain_function(value):
        kind, params = value.kind, value.params
        if kind not in PLAIN_FUNCTIONS or not isinstance(params, dict):
            raise Unsendable(f"plain function {str(kind)[:40]!r} cannot be sent")
        return {"$": "function", "kind": str(kind), "v": encode(dict(params), arrays)}
    if isinstance(value, dict):
        keys = [_encode_key(key, arrays) for key in value]
        return {"$": "dict", "k": keys, "v": [encode(item, arrays, functions) for item in value.values()]}
    if functions is not None and callable(value) and not isinstance(value, type):
        functions.append(value)
        return {"$": "grading_function", "i": len(functions) - 1}
    raise Unsendable(f"a value of type {type(value).__name__} cannot be sent (plain data and numpy arrays only)")


def encode_after(value: Any, sent: Any, received: Received, arrays: list) -> tuple[Any, bool]:
    """Encode ``value``, an argument after a call, against ``sent``, its encoding in the request.

    Only what the call changed needs to go back: an array that is still the
    one received at this place, with the same dtype, shape and bytes,
    becomes ``{"$": "same"}`` instead of a copy. Returns ``(data, changed)``;
    ``changed`` is False when the whole value is exactly as it was received
    (then nothing needs to be sent back at all).
    """
    tag = sent.get("$") if isinstance(sent, dict) else None
    if tag == "function" and _is_plain_function(value):
        return {"$": "same"}, False  # rebuilt from plain data on both sides: nothing to send back
    if tag == "grading_function" and getattr(value, "grading_function", None) == sent.get("i"):
        return {"$": "same"}, False  # the stand-in of a grading-side function: the caller keeps its own
    if isinstance(value, np.ndarray) and tag == "array":
        if received.unchanged(sent["i"], value):
            return {"$": "same"}, False
        return encode(value, arrays), True
    is_list = isinstance(value, list) and type(sent) is list
    if is_list or (isinstance(value, tuple) and tag == "tuple"):
        items = sent if is_list else sent["v"]
        changed = len(value) != len(items)
        encoded = []
        for position, item in enumerate(value):
            data, item_changed = encode_after(item, items[position] if position < len(items) else None,
                                              received, arrays)
            encoded.append(data)
            changed = changed or item_changed
        return (encoded if is_list else {"$": "tuple", "v": encoded}), changed
    if isinstance(value, dict) and tag == "dict":
        places = {decode(key, []): item for key, item in zip(sent["k"], sent["v"], strict=True)}
        keys, encoded = [], []
        changed = len(value) != len(places)
        for key, item in value.items():
            keys.append(_encode_key(key, arrays))
            data, item_changed = encode_after(item, places.get(key), received, arrays)
            encoded.append(data)
            changed = changed or item_changed or key not in places
        return {"$": "dict", "k": keys, "v": encoded}, changed
    before = len(arrays)
    data = encode(value, arrays)
    # Unchanged: the same plain data and no array in it (a new array at an old index is still a change).
    return data, not (len(arrays) == before and type(data) is type(sent) and data == sent)


def _as_received(value: Any, sent: Any, received: Received) -> bool:
    """A quick check that :func:`encode_after` would find ``value`` exactly as received (nothing to send back).

    True only for the plain cases (arrays, lists, tuples, dicts with the same keys in the same order,
    numbers, strings, None) that are all as they came; False whenever in doubt, and then
    :func:`encode_after` decides, as before.
    """
    kind = type(value)
    if kind is np.ndarray:
        return type(sent) is dict and sent.get("$") == "array" and received.unchanged(sent.get("i"), value)
    if kind is list:
        if type(sent) is not list or len(sent) != len(value):
            return False
        for item, item_sent in zip(value, sent, strict=True):
            if not _as_received(item, item_sent, received):
                return False
        return True
    if kind is float or kind is int or kind is str or kind is bool or value is None:
        return type(sent) is kind and sent == value  # what encode() makes of them: the value itself
    if type(sent) is not dict:
        return False
    if kind is dict:
        items = sent.get("v")
        if (sent.get("$") != "dict" or type(items) is not list or len(items) != len(value)
                or sent.get("k") != list(value)):
            return False
        for key, item, item_sent in zip(value, value.values(), items, strict=True):
            if type(key) is not str or not _as_received(item, item_sent, received):
                return False
        return True
    if kind is tuple:
        items = sent.get("v")
        if sent.get("$") != "tuple" or type(items) is not list or len(items) != len(value):
            return False
        for item, item_sent in zip(value, items, strict=True):
            if not _as_received(item, item_sent, received):
                return False
        return True
    return False


def _array_at(data: dict, arrays: list) -> Any:
    index = data["i"]
    if type(index) is not int or not 0 <= index < len(arrays):
        raise ValueError(f"no array {str(index)[:20]} in the message")
    return arrays[index]


def decode(data: Any, arrays: list, same: bool = False, functions: Any = None) -> Any:
    """The inverse of :func:`encode` (arrays are fresh, writable, plain ndarrays).

    ``same``: also accept ``{"$": "same"}`` (from :func:`encode_after`), decoded as ``SAME``.
    ``functions``: the worker's maker of stand-ins for grading-side functions (index -> callable);
    without it a function in a message is malformed.
    """
    kind = type(data)
    if kind is list:
        return [decode(item, arrays, same, functions) for item in data]
    if data is None or isinstance(data, (int, float, str)):  # bool is an int
        return data
    if isinstance(data, dict):
        tag = data.get("$")
        if tag == "array":
            return _array_at(data, arrays)
        if tag == "same" and same:
            return SAME
        if tag == "scalar":
            return _array_at(data, arrays)[()]
        if tag == "list":  # the tagged form of a list (a JSON array is one too)
            return [decode(item, arrays, same, functions) for item in data["v"]]
        if tag == "tuple":
            return tuple(decode(item, arrays, same, functions) for item in data["v"])
        if tag == "dict":
            return {decode(k, arrays): decode(v, arrays, same, functions)
                    for k, v in zip(data["k"], data["v"], strict=True)}
        if tag == "grading_function" and functions is not None and type(data.get("i")) is int:
            return functions(data["i"])
        if tag in ("dtype", "scalar_type"):
            dtype = ALLOWED_DTYPES.get(data["v"]) if isinstance(data["v"], str) else None
            if dtype is None:
                raise ValueError(f"dtype {str(data['v'])[:40]!r} is not allowed")
            return dtype if tag == "dtype" else dtype.type
        if tag == "python_type":
            return PYTHON_TYPES[data["v"]]
        if tag == "bytes" and isinstance(data.get("v"), str):
            return bytes.fromhex(data["v"])
        if tag == "bytearray" and isinstance(data.get("v"), str):
            return bytearray.fromhex(data["v"])
        if tag == "function":
            params = decode(data["v"], arrays)
            if not isinstance(params, dict) or not all(isinstance(key, str) for key in params):
                raise ValueError("malformed plain function")
            return PlainFunction(data.get("kind"), params)
        if tag == "rng":
            return generator_of(decode(data["state"], arrays))
    raise ValueError(f"malformed value in message: {str(data)[:80]}")

def result_payload(result: Any, after: list, sent: Any, received: Received, arrays: list) -> list:
    """The payload of a reply: ``[result, changes]``, where ``changes`` is None if the call changed no argument.

    ``after`` is ``[args, kwargs]`` after the call, ``sent`` their encoding in
    the request and ``received`` the request's arrays. Only arrays the call
    changed are sent back (see :func:`encode_after`).
    """
    data = encode(result, arrays)
    if _as_received(after, sent, received):  # the usual case: no argument changed
        return [data, None]
    before = len(arrays)
    changes, changed = encode_after(after, sent, received, arrays)
    if not changed:
        del arrays[before:]
        return [data, None]
    return [data, changes]


def receive_result(payload: Any, arrays: list, args: tuple, kwargs: dict) -> Any:
    """Decode a reply's ``[result, changes]`` and apply the changes to the caller's ``args`` and ``kwargs``."""
    if not isinstance(payload, list) or len(payload) != 2:
        raise ValueError("malformed reply payload")
    result = decode(payload[0], arrays)
    if payload[1] is not None:
        after_args, after_kwargs = decode(payload[1], arrays, same=True)
        if not isinstance(after_args, list) or not isinstance(after_kwargs, dict):
            raise ValueError("malformed reply payload")
        sync(list(args), after_args)
        sync(kwargs, after_kwargs)
    return result


def _plain(value: Any) -> Any:
    """``value`` itself, after checking that no ``SAME`` hides in it (it may go to the caller as it is)."""
    if value is SAME:
        raise ValueError("malformed reply: 'same' where nothing was sent")
    if isinstance(value, (list, tuple)):
        for item in value:
            _plain(item)
    elif isinstance(value, dict):
        for item in value.values():
            _plain(item)
    return value


def sync(original: Any, returned: Any) -> None:
    """Make ``original`` (the caller's argument) look like ``returned`` (the callee's after the call).

    Arrays are overwritten in place (``np.copyto``), dicts and lists get the
    callee's keys and items, generators take the callee's state, so in-place
    changes and random streams look the same as in a single process.
    ``SAME`` (an array the call left as it was) leaves the caller's in place.
    """
    if returned is SAME or original is returned:
        return
    if isinstance(original, np.ndarray) and isinstance(returned, np.ndarray):
        if original.shape == returned.shape and not np.array_equal(original, returned, equal_nan=True):
            if original.flags.writeable:
                np.copyto(original, returned, casting="unsafe")
    elif isinstance(original, np.random.Generator) and isinstance(returned, np.random.Generator):
        original.bit_generator.state = returned.bit_generator.state
    elif isinstance(original, dict) and isinstance(returned, dict):
        for key in [key for key in original if key not in returned]:
            del original[key]
        for key, item in returned.items():
            if key in original and (item is SAME or _syncable(original[key], item)):
                sync(original[key], item)
            else:
                original[key] = _plain(item)
    elif isinstance(original, list) and isinstance(returned, list):
        for index, item in enumerate(returned[: len(original)]):
            if item is SAME or _syncable(original[index], item):
                sync(original[index], item)
            else:
                original[index] = _plain(item)
        del original[len(returned) :]
        original.extend(_plain(item) for item in returned[len(original) :])
    elif isinstance(original, tuple) and isinstance(returned, tuple) and len(original) == len(returned):
        for old, new in zip(original, returned, strict=True):
            sync(old, new)
    else:
        _plain(returned)


def _syncable(old: Any, new: Any) -> bool:
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray):
        return old.shape == new.shape
    for kind in (np.random.Generator, dict, list, tuple):
        if isinstance(old, kind) and isinstance(new, kind):
            return True
    return old is new or (type(old) is type(new) and not isinstance(old, np.ndarray) and old == new)


def exception_info(error: BaseException, keep: str | None = None) -> dict:
    """Describe an exception as plain data: type, builtin base(s), message, short traceback.

    ``keep`` limits the traceback to frames whose file lies in that folder
    (the student's files), so the grading side never shows worker internals.
    """
    builtin_bases = []
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins" and issubclass(cls, Exception) and cls is not Exception:
            if not any(issubclass(seen, cls) for seen in builtin_bases):
                builtin_bases.append(cls)
    frames = traceback.extract_tb(error.__traceback__)
    if keep is not None:
        frames = [frame for frame in frames if frame.filename.startswith(keep)]
    lines = [f"{place(f.filename, f.lineno)}, in {f.name}: {(f.line or '').strip()}" for f in frames]
    try:
        message = str(error)
    except Exception:  # a student exception whose __str__ fails
        message = f"<{type(error).__name__} with an unprintable message>"
    return {
        "type": type(error).__name__,
        "builtins": [cls.__name__ for cls in builtin_bases],
        "message": message[:4000],
        "traceback": lines[-6:],
    }


_REBUILT: dict[tuple, type] = {}


def rebuild_exception(info: dict) -> BaseException:
    """An exception like the one :func:`exception_info` described.

    A builtin type comes back as itself; a class derived from builtins (numpy's
    AxisError is a ValueError and an IndexError) as a same-named subclass of
    them, so ``except ValueError`` still catches it; anything else as
    RuntimeError naming the type.
    """
    name, message = str(info.get("type", "Exception"))[:100], str(info.get("message", ""))[:4000]
    if not name.isidentifier():
        name = "Exception"
    bases = []
    named = info.get("builtins")
    for base_name in (named[:10] if isinstance(named, list) else ()):
        base = getattr(builtins, str(base_name), None)
        if isinstance(base, type) and issubclass(base, Exception) and base not in bases:
            bases.append(base)
    if not bases:
        error: BaseException = RuntimeError(f"{name}: {message}" if message else name)
    elif len(bases) == 1 and bases[0].__name__ == name:
        error = _made(bases[0], name, message)
    else:
        key = (name, tuple(bases))
        if key not in _REBUILT:
            try:
                _REBUILT[key] = type(name, tuple(bases), {"__module__": "student"})
            except TypeError:  # incompatible layouts: keep the first builtin base
                _REBUILT[key] = type(name, (bases[0],), {"__module__": "student"})
        error = _made(_REBUILT[key], name, message)
    error.attention_kit_student = True  # type: ignore[attr-defined]  # raised by student code, not by the grader
    frames = info.get("traceback")
    if isinstance(frames, list) and frames:
        lines = [str(line)[:500] for line in frames[-6:]]
        error.add_note("student traceback (most recent call last):\n  " + "\n  ".join(lines))
    return error

def _made(kind: type, name: str, message: str) -> BaseException:
    """``kind(message)``, or an exception named ``name`` of its nearest ancestor that takes a message.

    A builtin that takes other arguments (UnicodeDecodeError: five, ExceptionGroup: two) becomes its nearest
    ancestor that takes one (a UnicodeError: still a ValueError, as in one process).
    """
    for ancestor in kind.__mro__:
        try:
            return (kind if ancestor is kind else type(name, (ancestor,), {"__module__": "student"}))(message)
        except TypeError:
            continue
    return RuntimeError(f"{name}: {message}")

_ALWAYS = ("always", None, Warning, None, 0)  # the filter warnings.simplefilter("always") inserts


class RecordedWarnings:
    """What ``warnings.catch_warnings(record=True)`` + ``warnings.simplefilter("always")`` do, without their overhead.

    On entry: a copy of the filters with "always" first, the default ``showwarning`` and a log that
    records every warning; on exit the module's filters, ``showwarning`` and ``_showwarnmsg_impl`` are put back
    as they were, whatever the code in between did to them. The same steps as the standard library's, as
    attribute assignments (one per call, in the worker, around student code).
    """

    __slots__ = ("log", "saved")

    def __enter__(self) -> list:
        module = warnings
        self.saved = (module.filters, module.showwarning, module._showwarnmsg_impl)
        filters = list(self.saved[0])
        if _ALWAYS in filters:
            filters.remove(_ALWAYS)
        filters.insert(0, _ALWAYS)
        module.filters = filters
        module._filters_mutated()
        self.log = []
        module._showwarnmsg_impl = self.log.append
        module.showwarning = module._showwarning_orig
        return self.log

    def __exit__(self, *exc_info: object) -> None:
        module = warnings
        module.filters, module.showwarning, module._showwarnmsg_impl = self.saved
        module._filters_mutated()


def warning_list(caught: list) -> list[list[str]]:
    """The warnings a call raised, as ``[category name, message]`` pairs (at most 20, trimmed).

    The category is the nearest builtin one (numpy's ComplexWarning is a RuntimeWarning, as a test sees it in process).
    """
    return [[next((kind.__name__ for kind in type(item.message).__mro__ if kind.__module__ == "builtins"),
                  "UserWarning") if isinstance(item.message, Warning) else "UserWarning",
             str(item.message)[:500]] for item in caught[:20]]


def reissue_warnings(pairs: object) -> None:
    """Raise again, on the grading side, the warnings a student call raised in the worker.

    Only builtin warning categories are re-created (others become UserWarning),
    so a test that checks "no RuntimeWarning" sees the same as in-process.
    """
    if not isinstance(pairs, list):
        return
    for pair in pairs[:20]:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)):
            continue
        category = getattr(builtins, pair[0], None)
        if not (isinstance(category, type) and issubclass(category, Warning)):
            category = UserWarning
        warnings.warn(pair[1][:500], category, stacklevel=3)


# --------------------------------------------------------------------------- signatures

def described_signature(function: Any) -> list | None:
    """A function's parameters as plain data: ``[[name, kind, default], ...]`` (at most 64), for the worker's reply.

    Each default as :func:`described_default` writes it; ``grader.sandbox.signatures`` reads them back and checks
    them (``tests.api_signatures``: a signature that is not the API's).
    """
    import inspect

    parameters = [[p.name, int(p.kind), described_default(p.default, p.empty)]
                  for p in inspect.signature(function).parameters.values()]
    return parameters[:64] or None


def described_default(value: Any, empty: Any) -> Any:
    """A parameter's default as plain data.

    JSON's own values, ``{"dtype": name}`` for a numpy scalar type, ``{"repr": text}`` (200 characters at most)
    for anything else, and ``{"empty": True}`` for none.
    """
    import math

    if value is empty:
        return {"empty": True}
    if isinstance(value, np.generic) and type(value.item()) in (bool, int, float):
        value = value.item()
    if value is None or type(value) in (bool, int) or (type(value) is float and math.isfinite(value)):
        return value
    if type(value) is str:
        return value[:200]
    try:
        if isinstance(value, type) and issubclass(value, np.generic):
            return {"dtype": np.dtype(value).name}
        return {"repr": str(repr(value))[:200]}
    except BaseException:  # noqa: BLE001 - a repr of the student's that fails
        return {"repr": "<a default without a repr>"}


def import_error_text(module: str, error: BaseException, modules: str) -> str:
    """Say in one line why the student's ``module`` could not be imported (the worker's; ``modules``: its folder).

    Same wording as ``tests.kit.describe_import_error``, so local and isolated runs read alike: the line named is
    the last of the student's files the import went through, and the package names the views are imported as
    (``_student_<view>``), which the student never wrote, are taken out (a relative import of a module that is
    not in the folder says so).
    """
    if isinstance(error, SyntaxError):
        return f"syntax error in {place(error.filename, error.lineno, f'{module}.py')}: {error.msg}"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(modules)]
    where = f" ({place(frames[-1].filename, frames[-1].lineno)})" if frames else ""
    name = getattr(error, "name", None)
    if isinstance(error, ModuleNotFoundError) and isinstance(name, str) and name.startswith("_student_") \
            and "." in name:
        missing = name.partition(".")[2]
        text = (f"No module named {missing!r} in your folder (a relative import, from .{missing} import ..., "
                f"reads the files beside your module, and {missing.replace('.', '/')}.py is not one of them)")
    else:
        text = re.sub(r"'_student_\w+'", "'your folder'", re.sub(r"\b_student_\w+\.", "", str(error)))
    return f"importing {module}.py raised {type(error).__name__}: {text}{where}"
