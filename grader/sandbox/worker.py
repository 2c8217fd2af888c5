"""The isolated worker: runs a student's modules in a process of its own.

This file is a standalone script. It imports only the standard library and
numpy (never ``grader`` or ``tests``), because the sandbox it runs in holds
nothing else: a copy of the student's modules, the Python installation and
this file. The grading process (``grader.sandbox.proxy``) starts it as::

    python -I -S -B worker.py --requests FD --replies FD --modules DIR --site DIR [--uid N --gid N]

and talks to it over two dedicated pipes, never over stdout/stderr (those
are a capped capture of whatever the student prints).

Messages are frames: a JSON header (which also gives each array's dtype,
shape and size) followed by the arrays' raw bytes. Values travel as plain
data only (see :func:`encode`): nothing is ever pickled, and arrays are
rebuilt with ``np.frombuffer`` from an allow-list of numeric and bool dtypes
after their sizes are checked, so a message cannot run code on the receiving
side. A reply sends back only the arguments a call changed (see
:func:`encode_after`). The codec below is shared: ``grader.sandbox.proxy`` imports it
from here, so both sides speak exactly the same format.
"""

from __future__ import annotations

import builtins
import math
import os
import struct
import sys
import traceback
import types
import warnings
from typing import Any

np: Any = None  # numpy, imported in main() after the privileges are dropped (or by load_numpy())

# Frame: b"AKW2", header length (u32), body length (u64), the JSON header, the body. The header is
# {"h": message, "a": [[dtype, shape, order, nbytes], ...]}; the body holds the arrays' raw bytes back to back.
# No .npy and no pickle: the receiver rebuilds each array with np.frombuffer, from a dtype of ALLOWED_DTYPES
# only, after checking that the shapes and sizes add up to exactly the body it got.
MAGIC = b"AKW2"
PREFIX = struct.Struct("!4sIQ")
MAX_HEADER = 64 << 20
MAX_ARRAYS = 100_000
MAX_ARRAY_BYTES = 2 << 30
MAX_BODY = 2 << 30
MAX_DIMS = 32
# One pipe's worth per read: asking for much more makes every read allocate (mmap) and free a buffer that
# large, ~10x the cost of the read itself for the small messages that most calls are.
READ_BYTES = 1 << 16
ARRAY_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex: nothing that can hold objects
_NUMERIC_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "longdouble", "complex64", "complex128", "clongdouble")
# dtype.str -> dtype, both byte orders, for the types above (filled in by load_numpy()): the allow-list.
ALLOWED_DTYPES: dict[str, Any] = {}
PYTHON_TYPES = {"float": float, "int": int, "bool": bool, "complex": complex}  # as dtype arguments
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def _make_json_codec() -> tuple[Any, Any]:
    """A compact JSON writer and a whole-text JSON reader, both built once (not per message).

    ``json.dumps`` with ``separators`` builds a new encoder for every message, and ``json.loads`` detects the
    text's encoding and strips whitespace around it: on a header of a few hundred bytes that is most of the cost.
    The writer skips the check for circular containers: it only ever sees the trees that :func:`encode` and
    :func:`pack` build, fresh lists and dicts (a circular value never gets that far: encoding it recurses until
    RecursionError). The reader accepts exactly one JSON value spanning the whole header (NaN and Infinity
    included, as Python writes them) and raises ValueError for anything else.
    """
    import json.decoder
    import json.encoder
    import json.scanner

    make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if make_encoder is not None:
        # markers (no circularity check), default (the standard "is not JSON serializable" TypeError), string
        # encoder (ASCII, as json.dumps), indent, separators, sort_keys, skipkeys, allow_nan (nan and inf as JSON
        # extensions, as json.dumps writes them).
        iterencode = make_encoder(None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None,
                                  ":", ",", False, False, True)

        def dumps(value: Any) -> str:
            return "".join(iterencode(value, 0))
    else:  # an interpreter without the C accelerator: the standard route
        encoder = json.JSONEncoder(separators=(",", ":"), check_circular=False)
        dumps = encoder.encode
    scan = json.scanner.make_scanner(json.decoder.JSONDecoder())

    def loads(text: str) -> Any:
        try:
            value, end = scan(text, 0)
        except StopIteration as error:  # what the scanner raises for no value at all
            raise ValueError(f"bad header (no JSON value at {error.value})") from None
        if end != len(text):
            raise ValueError("bad header (data after its JSON value)")
        return value

    return dumps, loads


_dumps, _loads = _make_json_codec()


def load_numpy() -> Any:
    """Import numpy into this module (the grading process calls this too)."""
    global np
    if np is None:
        import numpy

        np = numpy
        for name in _NUMERIC_TYPES:
            for order in "<>":
                dtype = np.dtype(name).newbyteorder(order)
                ALLOWED_DTYPES[dtype.str] = dtype
    return np


_PROTOCOL: Any = None


def protocol() -> Any:
    """``grader/sandbox/protocol.py``, loaded from the file next to this one (the sandbox holds a copy)."""
    global _PROTOCOL
    if _PROTOCOL is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.py")
        spec = importlib.util.spec_from_file_location("_attention_kit_protocol", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no protocol module at {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _PROTOCOL = module
    return _PROTOCOL


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


# --------------------------------------------------------------------------- codec


class Unsendable(TypeError):
    """A value that is not plain data (and so cannot cross the channel)."""


class _Same:
    """In a reply: "the array sent at this place, unchanged" (see :func:`encode_after`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SAME"


SAME = _Same()


# id(dtype) -> (dtype, dtype.str) for the dtypes that passed the check below (each kept alive here, so an id is
# never reused while it is in this table): the common dtypes are numpy's singletons, checked once per process.
_CHECKED_DTYPES: dict[int, tuple[Any, str]] = {}


def _check_dtype(dtype: Any) -> str:
    """``dtype.str`` if arrays of ``dtype`` may be sent, else Unsendable."""
    known = _CHECKED_DTYPES.get(id(dtype))
    if known is not None and known[0] is dtype:
        return known[1]
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None or dtype.str not in ALLOWED_DTYPES:
        raise Unsendable(f"numpy arrays of dtype {dtype} cannot be sent (only numeric and bool arrays)")
    if len(_CHECKED_DTYPES) < 1000:
        _CHECKED_DTYPES[id(dtype)] = (dtype, dtype.str)
    return dtype.str


def _encode_key(key: Any, arrays: list) -> Any:
    if not (key is None or isinstance(key, (str, int, float, bool))):
        raise Unsendable(f"dict keys of type {type(key).__name__} cannot be sent")
    return encode(key, arrays)


def encode(value: Any, arrays: list, functions: list | None = None) -> Any:
    """Turn ``value`` into JSON-able data, appending its arrays to ``arrays``.

    Allowed: None, bool, int, float, str, lists/tuples/dicts of those, plain
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
        _check_dtype(value.dtype)
        arrays.append(value)
        return {"$": "array", "i": len(arrays) - 1}
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
    if isinstance(value, np.ndarray):
        array = np.asarray(value)  # a subclass arrives as a plain ndarray
        _check_dtype(array.dtype)
        arrays.append(array)
        return {"$": "array", "i": len(arrays) - 1}
    if isinstance(value, np.generic):
        array = np.asarray(value)
        _check_dtype(array.dtype)
        arrays.append(array)
        return {"$": "scalar", "i": len(arrays) - 1}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        dtype = np.dtype(value)  # a dtype argument such as dtype=np.float32
        _check_dtype(dtype)
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
        if tag == "function":
            params = decode(data["v"], arrays)
            if not isinstance(params, dict) or not all(isinstance(key, str) for key in params):
                raise ValueError("malformed plain function")
            return PlainFunction(data.get("kind"), params)
        if tag == "rng":
            state = decode(data["state"], arrays)
            name = state.get("bit_generator") if isinstance(state, dict) else None
            if name not in BIT_GENERATORS:
                raise ValueError(f"unknown bit generator {name!r}")
            generator = np.random.Generator(getattr(np.random, name)(0))
            generator.bit_generator.state = state
            return generator
    raise ValueError(f"malformed value in message: {str(data)[:80]}")


def pack(header: dict, arrays: list) -> bytes:
    """One frame: the JSON header, which describes the arrays, then their raw bytes (one buffer, one write)."""
    described, blobs = [], []
    body_len = 0
    for array in arrays:
        name = _check_dtype(array.dtype)
        flags = array.flags
        if flags.f_contiguous and not flags.c_contiguous:  # as np.save does
            order, blob = "F", array.tobytes("F")
        else:
            order, blob = "C", array.tobytes()
        described.append([name, list(array.shape), order, len(blob)])
        blobs.append(blob)
        body_len += len(blob)
    head = _dumps({"h": header, "a": described}).encode()
    return b"".join([PREFIX.pack(MAGIC, len(head), body_len), head, *blobs])


class Received(list):
    """The arrays of one frame, and the bytes they arrived as (to tell which ones a call changed).

    ``body`` holds the arrays' bytes from ``base`` on (the whole frame, when it was not copied out of a
    buffer that is reused); ``spans`` give each array's place in ``body``.
    """

    def __init__(self, body: bytes | bytearray, base: int = 0) -> None:
        super().__init__()
        self.body, self.base = body, base
        self.spans: list[tuple[int, int, str, Any, tuple]] = []  # offset in body, size, order, dtype, shape

    def unchanged(self, index: Any, array: Any) -> bool:
        """Whether ``array`` is the ``index``-th array of the frame, with its dtype, shape and bytes as received."""
        if type(index) is not int or not 0 <= index < len(self) or array is not self[index]:
            return False
        offset, size, order, dtype, shape = self.spans[index]
        return (array.dtype == dtype and array.shape == shape
                and array.tobytes(order) == self.body[offset : offset + size])


def _array_description(entry: Any) -> tuple[Any, tuple, str, int]:
    """Check one array's [dtype, shape, order, nbytes]: an allowed dtype, and a size that matches its shape."""
    if not isinstance(entry, list) or len(entry) != 4:
        raise ValueError("bad array description")
    name, shape, order, size = entry
    dtype = ALLOWED_DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ValueError(f"arrays of dtype {str(name)[:40]!r} are refused (only numeric and bool arrays)")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise ValueError(f"bad array shape {str(shape)[:80]}")
    for n in shape:
        if type(n) is not int or not 0 <= n <= MAX_ARRAY_BYTES:
            raise ValueError(f"bad array shape {str(shape)[:80]}")
    if order != "C" and order != "F":
        raise ValueError("bad array order")
    expected = math.prod(shape) * dtype.itemsize
    if type(size) is not int or size != expected or size > MAX_ARRAY_BYTES:
        raise ValueError(f"array size mismatch: {name} of shape {tuple(shape)} takes {expected} bytes, "
                         f"not {str(size)[:20]}")
    return dtype, tuple(shape), order, size


def frame_size(buffer: bytes | bytearray | memoryview) -> int | None:
    """The size of the frame at the start of ``buffer`` if it is all there, else None (ValueError if corrupt)."""
    if len(buffer) < PREFIX.size:
        return None
    magic, head_len, body_len = PREFIX.unpack_from(buffer)
    if magic != MAGIC:
        raise ValueError("bad frame (the channel is corrupt)")
    if head_len > MAX_HEADER or body_len > MAX_BODY:
        raise ValueError("frame too large")
    end = PREFIX.size + head_len + body_len
    return end if len(buffer) >= end else None


def unpack(buffer: bytes | bytearray | memoryview, owned: bool = False) -> tuple[tuple[dict, Received], int] | None:
    """Parse one frame from the start of ``buffer``: ((header, arrays), size), or None if incomplete.

    Raises ValueError for anything malformed: a bad prefix, a refused dtype, sizes that do not match.
    ``owned``: ``buffer`` (a bytearray) belongs to this frame alone and is never changed afterwards, so the
    arrays' bytes need not be copied out of it first (nor out of an immutable ``bytes``).
    """
    if len(buffer) < PREFIX.size:
        return None
    magic, head_len, body_len = PREFIX.unpack_from(buffer)
    if magic != MAGIC:
        raise ValueError("bad frame (the channel is corrupt)")
    if head_len > MAX_HEADER or body_len > MAX_BODY:
        raise ValueError("frame too large")
    start = PREFIX.size + head_len
    end = start + body_len
    if len(buffer) < end:
        return None
    with memoryview(buffer) as view:  # released at once: a bytearray under a view cannot be resized
        message = _loads(str(view[PREFIX.size : start], "utf-8"))
        keep = type(buffer) is bytes or (owned and type(buffer) is bytearray)
        body, base = (buffer, start) if keep else (bytes(view[start:end]) if body_len else b"", 0)
    if not isinstance(message, dict):
        raise ValueError("bad header")
    header, described = message.get("h"), message.get("a")
    if not (isinstance(header, dict) and isinstance(described, list)):
        raise ValueError("bad header")
    if len(described) > MAX_ARRAYS:
        raise ValueError("too many arrays")
    arrays = Received(body, base)
    offset = 0
    for entry in described:
        dtype, shape, order, size = _array_description(entry)
        if offset + size > body_len:
            raise ValueError("array size mismatch: the arrays are larger than the frame")
        # The bytes read in place (shape, dtype, buffer, offset, strides, order), then a copy: fresh, writable and
        # owning its memory, as an array made in-process would be.
        arrays.append(np.ndarray(shape, dtype, body, base + offset, None, order).copy(order="K"))
        arrays.spans.append((base + offset, size, order, dtype, shape))
        offset += size
    if offset != body_len:
        raise ValueError("array size mismatch: the frame holds bytes that belong to no array")
    return (header, arrays), end


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
    lines = [f"{os.path.basename(f.filename)} line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames]
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
        error = bases[0](message)
    else:
        key = (name, tuple(bases))
        if key not in _REBUILT:
            try:
                _REBUILT[key] = type(name, tuple(bases), {"__module__": "student"})
            except TypeError:  # incompatible layouts: keep the first builtin base
                _REBUILT[key] = type(name, (bases[0],), {"__module__": "student"})
        error = _REBUILT[key](message)
    error.attention_kit_student = True  # type: ignore[attr-defined]  # raised by student code, not by the grader
    frames = info.get("traceback")
    if isinstance(frames, list) and frames:
        lines = [str(line)[:500] for line in frames[-6:]]
        error.add_note("student traceback (most recent call last):\n  " + "\n  ".join(lines))
    return error


# --------------------------------------------------------------------------- the worker

_BUILTINS = dict(vars(builtins))
_ALWAYS = ("always", None, Warning, None, 0)  # the filter warnings.simplefilter("always") inserts


class _RecordedWarnings:
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


def restore_builtins() -> None:
    """Undo any change that student code made to the builtins module."""
    namespace = vars(builtins)
    if namespace != _BUILTINS:
        for name in [name for name in namespace if name not in _BUILTINS]:
            del namespace[name]
        namespace.update(_BUILTINS)


class Channel:
    """Blocking frame IO over the two protocol pipes (the worker's side)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = bytearray()

    def send(self, header: dict, arrays: list) -> None:
        """Write one frame (blocking)."""
        restore_builtins()
        data = memoryview(pack(header, arrays))
        while data:
            written = os.write(self.write_fd, data)
            data = data[written:]

    def receive(self) -> tuple[dict, list]:
        """Read one frame (blocking); EOFError when the grading process is gone."""
        while True:
            if self.buffer:
                parsed = unpack(self.buffer)
                if parsed is not None:
                    message, size = parsed
                    del self.buffer[:size]
                    return message
                if len(self.buffer) >= PREFIX.size:  # a valid prefix (unpack checked it), the frame incomplete
                    _, head_len, body_len = PREFIX.unpack_from(self.buffer)
                    size = PREFIX.size + head_len + body_len
                    if size - len(self.buffer) > READ_BYTES:
                        return self._receive_large(size)
            chunk = os.read(self.read_fd, READ_BYTES)
            if not chunk:
                raise EOFError("the grading process closed the channel")
            if not self.buffer:  # the usual case: one read holds the whole frame, parsed without buffering it
                parsed = unpack(chunk)
                if parsed is not None:
                    message, size = parsed
                    self.buffer += memoryview(chunk)[size:]
                    return message
            self.buffer += chunk

    def _receive_large(self, size: int) -> tuple[dict, list]:
        """The rest of a large frame of ``size`` bytes, read straight into a buffer of its own (no copies)."""
        frame = bytearray(size)
        have = len(self.buffer)
        frame[:have] = self.buffer
        self.buffer = bytearray()
        with memoryview(frame) as view:
            while have < size:
                count = os.readv(self.read_fd, [view[have:]])
                if not count:
                    raise EOFError("the grading process closed the channel")
                have += count
        parsed = unpack(frame, owned=True)
        if parsed is None or parsed[1] != size:  # cannot happen: the prefix gave the size
            raise ValueError("bad frame (the channel is corrupt)")
        return parsed[0]


class Worker:
    """Imports the student's modules lazily, one package per view, and runs calls."""

    def __init__(self, channel: Channel, modules: str) -> None:
        self.channel = channel
        self.modules = modules.rstrip("/") + "/"
        self.functions: dict[str, list[str]] = {}
        self.dependencies: dict[str, list[str]] = {}
        self._loaded: dict[tuple[str, str], tuple[str, str, types.ModuleType]] = {}  # see load()

    # -- packages

    def package(self, view: str) -> str:
        """Create (once) the package for ``view``: an exercise name (fair) or "all"."""
        name = f"_student_{view}"
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [self.modules.rstrip("/")]
            package.__package__ = name
            sys.modules[name] = package
            # Fair grading: the exercises this one depends on are served by the reference, in the grading process.
            for dependency in self.dependencies.get(view, []):
                sys.modules[f"{name}.{dependency}"] = self.forwarding_module(name, dependency)
        return name

    def forwarding_module(self, package: str, exercise: str) -> types.ModuleType:
        """A module standing in for ``exercise``: each function calls the reference in the grading process."""
        module = types.ModuleType(f"{package}.{exercise}", f"{exercise}.py, served by the reference implementation")
        module.__package__ = package
        # The reference module also exposes the names it imports from its own dependencies.
        for owner in [exercise, *self.dependencies.get(exercise, [])]:
            for function in self.functions.get(owner, []):
                if not hasattr(module, function):
                    setattr(module, function, self.forwarder(owner, function))
        return module

    def forwarder(self, exercise: str, function: str) -> Any:
        """A function that sends its call to the grading process and returns the reference's answer."""
        channel = self.channel

        def forward(*args: Any, **kwargs: Any) -> Any:
            arrays: list = []
            payload = encode([list(args), kwargs], arrays)
            channel.send({"op": "callback", "exercise": exercise, "function": function, "payload": payload}, arrays)
            header, reply_arrays = channel.receive()
            if header.get("status") != "ok":
                raise rebuild_exception(header.get("error", {}))
            return receive_result(header["payload"], reply_arrays, args, kwargs)

        forward.__name__ = forward.__qualname__ = function
        return forward

    def grading_function(self, index: int) -> Any:
        """A stand-in for function ``index`` of the current call's arguments, run by the grading process."""
        channel = self.channel

        def grading_function(*args: Any, **kwargs: Any) -> Any:
            arrays: list = []
            payload = encode([list(args), kwargs], arrays)
            channel.send({"op": "grading_function", "index": index, "payload": payload}, arrays)
            header, reply_arrays = channel.receive()
            if header.get("status") != "ok":
                raise rebuild_exception(header.get("error", {}))
            return receive_result(header["payload"], reply_arrays, args, kwargs)

        grading_function.grading_function = index  # type: ignore[attr-defined]
        return grading_function

    def load(self, view: str, module: str) -> types.ModuleType:
        """Import the student's ``module`` in the package of ``view``.

        A module imported before is returned as long as it (and its package) are still the ones in
        ``sys.modules``, as ``importlib.import_module`` would return it, without its machinery on every call.
        """
        known = self._loaded.get((view, module))
        if known is not None and known[0] in sys.modules and sys.modules.get(known[1]) is known[2]:
            return known[2]
        import importlib

        package = self.package(view)
        loaded = importlib.import_module(f"{package}.{module}")
        self._loaded[(view, module)] = (package, f"{package}.{module}", loaded)
        return loaded

    def describe_import_error(self, module: str, error: BaseException) -> str:
        """Say in one line why ``module`` could not be imported."""
        # Same wording as tests.kit.describe_import_error, so local and isolated runs read alike.
        if isinstance(error, SyntaxError):
            where = os.path.basename(error.filename or f"{module}.py")
            return f"syntax error in {where} line {error.lineno}: {error.msg}"
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(self.modules)]
        where = f" ({os.path.basename(frames[-1].filename)} line {frames[-1].lineno})" if frames else ""
        return f"importing {module}.py raised {type(error).__name__}: {error}{where}"

    # -- requests

    def handle(self, header: dict, arrays: list) -> None:
        """Answer one request of the grading process."""
        try:
            self.dispatch(header, arrays)
        finally:
            # Student code may have replaced builtins (len, isinstance, ...); the worker's own code needs the real
            # ones. A patch made at import or in one call therefore does not last into the next call.
            restore_builtins()

    def dispatch(self, header: dict, arrays: list) -> None:
        """Route one request by its ``op``: only the requests that ``protocol.REQUESTS`` lists."""
        try:
            op = protocol().check(header, protocol().REQUESTS)
        except ValueError as error:
            self.channel.send({"status": "error", "error": {"type": "ValueError", "message": str(error)}}, [])
            return
        if op == "init":
            self.functions = header["functions"]
            self.dependencies = header["dependencies"]
            self.channel.send({"status": "ok", "pid": os.getpid(), "uid": os.getuid()}, [])
        elif op == "import":
            self.handle_import(header)
        elif op == "call":
            self.handle_call(header, arrays)

    def handle_import(self, header: dict) -> None:
        """Import a module and report its public callables, or why it failed."""
        module = header["module"]
        try:
            loaded = self.load(header["view"], module)
        except BaseException as error:  # noqa: BLE001 - SystemExit at import is the student's, report it
            self.channel.send({"status": "import_error", "message": self.describe_import_error(module, error)}, [])
            return
        names = [name for name in dir(loaded) if not name.startswith("_") and callable(getattr(loaded, name, None))]
        self.channel.send({"status": "ok", "callables": names}, [])

    def handle_call(self, header: dict, arrays: list) -> None:
        """Run one student function; reply with its result and arguments, or its exception as text."""
        module, function = header["module"], header["function"]
        args, kwargs = decode(header["payload"], arrays, functions=self.grading_function)
        try:
            target = getattr(self.load(header["view"], module), function)
        except BaseException as error:  # noqa: BLE001
            self.channel.send({"status": "import_error", "message": self.describe_import_error(module, error)}, [])
            return
        measure = header.get("measure_memory") is True  # the peak memory of this call, for a memory test
        peak = None
        try:
            with _RecordedWarnings() as caught:  # e.g. numpy's RuntimeWarnings
                if measure:
                    import tracemalloc

                    tracemalloc.start()
                try:
                    result = target(*args, **kwargs)
                finally:
                    if measure:  # None if the student's code stopped the tracing itself
                        peak = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else None
                        tracemalloc.stop()
        except SystemExit as error:
            info = {"type": "SystemExit", "builtins": [], "traceback": [],
                    "message": f"your code called sys.exit({error.code!r}) while running {function}()"}
            self.channel.send({"status": "error", "error": info}, [])
            return
        except BaseException as error:  # noqa: BLE001 - every student failure goes back as text
            self.channel.send({"status": "error", "error": exception_info(error, keep=self.modules)}, [])
            return
        reply_arrays: list = []
        try:
            payload = result_payload(result, [list(args), kwargs], header["payload"], arrays, reply_arrays)
        except Exception as error:  # noqa: BLE001 - e.g. a result that is not plain data
            info = {"type": "TypeError", "builtins": ["TypeError"], "traceback": [],
                    "message": f"{function}() returned a value the grader cannot receive: {error}"}
            self.channel.send({"status": "error", "error": info}, [])
            return
        reply = {"status": "ok", "payload": payload, "warnings": warning_list(caught)}
        if measure:
            reply["peak_memory"] = peak
        self.channel.send(reply, reply_arrays)


def warning_list(caught: list) -> list[list[str]]:
    """The warnings a call raised, as ``[category name, message]`` pairs (at most 20, trimmed)."""
    return [[type(item.message).__name__ if isinstance(item.message, Warning) else "UserWarning",
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


def _drop_privileges(uid: int, gid: int) -> None:
    if os.getuid() == 0 and uid != 0:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() != uid:
            raise SystemExit("could not drop privileges")


_KEYCTL = {"x86_64": 250, "aarch64": 219}  # the keyctl system call's number, where the kit knows it


def _clear_keyrings() -> None:
    """Empty the keyrings of this process's user that outlive its processes: the user, user-session and persistent.

    User ids come round again (``limits.fresh_uid``): what an earlier worker of this uid left in them must not
    reach this one. Run after the privileges are dropped, before any student code; quietly a no-op where the
    kernel (or a seccomp filter) has no keyrings.
    """
    number = _KEYCTL.get(os.uname().machine)
    if number is None or os.getuid() == 0:  # only ever a worker's own user's, never root's
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    libc.syscall.restype = ctypes.c_long
    user, user_session = ctypes.c_long(-4), ctypes.c_long(-5)
    persistent = libc.syscall(number, 22, ctypes.c_long(-1), user)  # KEYCTL_GET_PERSISTENT, linked into @u
    for ring in ([ctypes.c_long(persistent)] if persistent >= 0 else []) + [user_session, user]:
        libc.syscall(number, 7, ring)  # KEYCTL_CLEAR
    libc.syscall(number, 8, user, user_session)  # KEYCTL_LINK: @u in @us again, as a new user's keyrings are


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def run_worker(read_fd: int, write_fd: int, modules: str) -> int:
    """Serve the grading process's requests over the two pipes until it closes them (numpy is imported)."""
    os.chdir(modules)
    for fd in (read_fd, write_fd):
        os.set_inheritable(fd, False)  # programs that student code executes do not get the channel
    # A process that student code forks must never speak on the channel: close it there at once.
    os.register_at_fork(after_in_child=lambda: [_close_quietly(fd) for fd in (read_fd, write_fd)])
    channel = Channel(read_fd, write_fd)
    worker = Worker(channel, os.path.realpath(modules))
    while True:
        try:
            header, arrays = channel.receive()
        except EOFError:
            return 0
        worker.handle(header, arrays)


# --------------------------------------------------------------------------- the fork server

# Resource limits of a forked worker, in the order the grading process sends them (see grader.sandbox.limits).
_LIMITS = ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")
_NOGROUP = 65534
_KILLER_UID = 65534  # the real and saved uid of the helper that kills a worker's user (see _kill_user)
# The workers this server forked and has not reaped yet: only their exit statuses are kept (a child that student
# code gives the server, with CLONE_PARENT, is reaped and forgotten; its pid may later be a worker's).
_FORKED: set[int] = set()


def serve(control_fd: int, students: str) -> int:
    """The fork server: start each submission's worker by forking this process, numpy already imported.

    The grading process starts one server per grading process, in a sandbox like a worker's, except that it
    shows ``students`` (one folder per submission, each readable by that submission's own user only) instead
    of one submission's modules. The server runs as root with only CAP_SETUID and CAP_SETGID and never runs
    student code: it answers the requests of ``protocol.SERVER_REQUESTS`` on ``control_fd`` (a Unix socket;
    ``fork`` brings the new worker's three pipes with it). A forked worker drops to its submission's user,
    in a session of its own, with its limits, before it touches anything of the submission; it then runs
    exactly what a worker started on its own runs (:func:`run_worker`). Starting a worker this way costs a
    fork, not an interpreter and numpy's import (about 70 ms of CPU each).
    """
    import ctypes  # noqa: F401 - for _clear_keyrings in every forked worker, imported once here
    import socket

    load_numpy()
    proto = protocol()
    os.set_inheritable(control_fd, False)
    control = socket.socket(fileno=control_fd)
    exited: dict[int, int] = {}  # pid -> wait status of the forked workers that ended
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
        except OSError:
            return 0
        if not data:
            return 0
        try:
            message = _loads(data.decode("utf-8"))
            op = proto.check(message, proto.SERVER_REQUESTS)
            if op != "fork" and fds:
                raise ValueError(f"{op}: no file descriptors expected")
            if op == "fork":
                reply = _fork_worker(message, fds, control_fd, students)
                fds = []  # closed by _fork_worker
            elif op == "kill":
                reply = _kill_user(message["uid"], exited)
            elif op == "wait":
                reply = {"status": "ok", "code": _wait_for(message["pid"], message["timeout"], exited)}
            else:  # cannot happen: check() allows only the operations above
                raise ValueError(f"operation {op!r} is not served")
        except Exception as error:  # noqa: BLE001 - a bad request is answered, never the end of the server
            reply = {"status": "error", "message": f"{type(error).__name__}: {error}"[:300]}
        for fd in fds:
            _close_quietly(fd)
        control.send(_dumps(reply).encode("ascii"))


def _fork_worker(message: dict, fds: list[int], control_fd: int, students: str) -> dict:
    """Fork a worker for one submission (see :func:`serve`); the reply holds its pid."""
    import resource

    try:
        name, uid, limits = message["modules"], message["uid"], message["limits"]
        if len(fds) != 3:
            raise ValueError(f"fork: expected 3 file descriptors, got {len(fds)}")
        if not name or name.startswith(".") or "/" in name:
            raise ValueError(f"fork: bad submission folder name {name[:40]!r}")
        if (not 0 < uid < 2**31 or uid == _KILLER_UID or len(limits) != len(_LIMITS)
                or not all(isinstance(n, int) for n in limits)):
            raise ValueError("fork: bad uid or limits")
        modules = os.path.join(students, name, "modules")
        pid = os.fork()
    except BaseException:
        for fd in fds:
            _close_quietly(fd)
        raise
    if pid == 0:  # the worker: nothing of the server's but numpy and this code
        code = 70
        try:
            requests, replies, output = fds
            os.close(control_fd)
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.close(output)
            low, high = sorted((requests, replies))
            for start, end in ((3, low), (low + 1, high), (high + 1, 1 << 20)):  # nothing else of the server's
                os.closerange(start, end)
            os.setsid()  # a session (and a scheduling group) of its own, as a worker started by bwrap
            if message["niceness"]:
                os.nice(message["niceness"])
            for rlimit, value in zip(_LIMITS, limits, strict=True):
                number = getattr(resource, rlimit)
                resource.setrlimit(number, (value, value + 1 if rlimit == "RLIMIT_CPU" else value))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # no POSIX message queue outlives it
            _drop_privileges(uid, _NOGROUP)
            _clear_keyrings()
            # The command line a worker started on its own would have (student code may read it).
            sys.argv = [sys.argv[0], "--requests", str(requests), "--replies", str(replies), "--modules", modules,
                        "--uid", str(uid), "--gid", str(_NOGROUP)]
            code = run_worker(requests, replies, modules)
        except BaseException:  # noqa: BLE001 - told on the worker's output, which the grading side reports
            traceback.print_exc()
        finally:
            os._exit(code)
    for fd in fds:
        _close_quietly(fd)
    _FORKED.add(pid)
    return {"status": "ok", "pid": pid}


def _processes_of(uid: int) -> list[int]:
    """The live processes of ``uid`` in this PID namespace: those with a thread that is not a zombie.

    Not the main thread's state alone: a process whose main thread ended (``SYS_exit``) shows as a zombie in
    ``/proc/<pid>/stat`` while its other threads run on.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            tasks = os.listdir(f"/proc/{entry}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{entry}/task/{task}/stat", "rb") as stat:
                    state = stat.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                found.append(int(entry))
                break
    return found


def _reap(exited: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in _FORKED:
            _FORKED.discard(pid)
            exited[pid] = status
        if len(exited) > 10_000:  # statuses nobody asked for (never in practice)
            exited.pop(next(iter(exited)))


def kill_all_of(uid: int, killer_uid: int, gid: int = _NOGROUP) -> None:
    """Send SIGKILL to every process of ``uid``, from a fork of this process that never executes anything.

    ``kill(-1)`` with ``uid`` as effective uid reaches exactly that user's processes. The killer's real and
    saved uids are ``killer_uid`` (never a worker's), so that the user's processes cannot signal it back: a
    SIGSTOP would stop it, and whoever waits for it. Executing a program (``kill -9 -1``) would not do:
    executing sets the saved uid to the effective one. The grading side uses this too (``limits.kill_user``).
    """
    import signal

    killer = os.fork()
    if killer == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(killer_uid, uid, killer_uid)
            if os.getresuid() == (killer_uid, uid, killer_uid):
                os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(killer, 0)


def _kill_user(uid: int, exited: dict[int, int]) -> dict:
    """Kill every process of ``uid``; say whether anything of it is left (a reason to start a new server)."""
    import time

    if not 0 < uid < 2**31 or uid == _KILLER_UID:
        raise ValueError("kill: bad uid")
    for attempt in range(20):
        _reap(exited)
        if attempt and not _processes_of(uid):  # always once: what /proc cannot tell apart is killed too
            break
        kill_all_of(uid, _KILLER_UID)
        time.sleep(0.0005 * attempt)
    _reap(exited)
    left = _processes_of(uid)
    # What could outlive a worker's processes in the namespaces it shares with the next ones: System V IPC
    # objects (files are impossible: nothing but the submission's own folder is writable, and POSIX queues
    # are disabled by RLIMIT_MSGQUEUE). Any of them, or a process that survived, and the server is replaced.
    ipc = 0
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                ipc += max(len(table.read().splitlines()) - 1, 0)
        except OSError:
            ipc += 1  # cannot tell: assume the worst
    return {"status": "ok", "left": len(left), "tainted": bool(left or ipc)}


def _wait_for(pid: int, timeout: float, exited: dict[int, int]) -> int | None:
    """The exit code of forked worker ``pid`` (negative: the signal that ended it), waiting up to ``timeout``."""
    import time

    deadline = time.monotonic() + max(0.0, min(float(timeout), 10.0))
    while True:
        _reap(exited)
        if pid in exited:
            status = exited.pop(pid)
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)


def main(argv: list[str]) -> int:
    """Entry point of the worker process (or, with ``--serve``, of the fork server)."""
    options = dict(zip(argv[0::2], argv[1::2], strict=False))
    if options.get("--site"):
        sys.path.append(options["--site"])
    if "--serve" in options:
        return serve(int(options["--serve"]), options["--students"])
    read_fd, write_fd = int(options["--requests"]), int(options["--replies"])
    if "--uid" in options:
        _drop_privileges(int(options["--uid"]), int(options.get("--gid", options["--uid"])))
        _clear_keyrings()
    os.chdir(options["--modules"])
    load_numpy()
    protocol()  # before any student code runs
    return run_worker(read_fd, write_fd, options["--modules"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
