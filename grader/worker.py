"""The isolated worker: runs a student's modules in a process of its own.

This file is a standalone script. It imports only the standard library and
numpy (never ``grader`` or ``tests``), because the sandbox it runs in holds
nothing else: a copy of the student's modules, the Python installation and
this file. The grading process (``grader.proxy``) starts it as::

    python -I -S -B worker.py --requests FD --replies FD --modules DIR --site DIR [--uid N --gid N]

and talks to it over two dedicated pipes, never over stdout/stderr (those
are a capped capture of whatever the student prints).

Messages are frames: a small JSON header plus numpy arrays written with
``np.save(allow_pickle=False)``. Values travel as plain data only (see
:func:`encode`): nothing is ever pickled, so a message cannot run code on the
receiving side. The codec below is shared: ``grader.proxy`` imports it from
here, so both sides speak exactly the same format.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import struct
import sys
import traceback
import types
from typing import Any

np: Any = None  # numpy, imported in main() after the privileges are dropped (or by load_numpy())

# Frame: b"AKW1", header length (u32), number of arrays (u32), header, then per array u64 length + .npy bytes.
MAGIC = b"AKW1"
MAX_HEADER = 64 << 20
MAX_ARRAYS = 100_000
MAX_ARRAY_BYTES = 2 << 30
ARRAY_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex: nothing that can hold objects
PYTHON_TYPES = {"float": float, "int": int, "bool": bool, "complex": complex}  # as dtype arguments
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def load_numpy() -> Any:
    """Import numpy into this module (the grading process calls this too)."""
    global np
    if np is None:
        import numpy

        np = numpy
    return np


# --------------------------------------------------------------------------- codec


class Unsendable(TypeError):
    """A value that is not plain data (and so cannot cross the channel)."""


def _check_dtype(array: Any) -> None:
    if array.dtype.kind not in ARRAY_KINDS or array.dtype.fields is not None:
        raise Unsendable(f"numpy arrays of dtype {array.dtype} cannot be sent (only numeric and bool arrays)")


def encode(value: Any, arrays: list) -> Any:
    """Turn ``value`` into JSON-able data, appending its arrays to ``arrays``.

    Allowed: None, bool, int, float, str, lists/tuples/dicts of those, plain
    numeric or bool numpy arrays and scalars, and ``numpy.random.Generator``
    (sent as its bit generator's state). Anything else raises ``Unsendable``.
    """
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
        _check_dtype(array)
        arrays.append(array)
        return {"$": "array", "i": len(arrays) - 1}
    if isinstance(value, np.generic):
        array = np.asarray(value)
        _check_dtype(array)
        arrays.append(array)
        return {"$": "scalar", "i": len(arrays) - 1}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        dtype = np.dtype(value)  # a dtype argument such as dtype=np.float32
        _check_dtype(np.empty(0, dtype))
        return {"$": "dtype" if isinstance(value, np.dtype) else "scalar_type", "v": dtype.str}
    if any(value is kind for kind in PYTHON_TYPES.values()):
        return {"$": "python_type", "v": value.__name__}
    if isinstance(value, np.random.Generator):
        return {"$": "rng", "state": encode(dict(value.bit_generator.state), arrays)}
    if isinstance(value, (list, tuple)):
        return {"$": "list" if isinstance(value, list) else "tuple", "v": [encode(item, arrays) for item in value]}
    if isinstance(value, dict):
        keys = []
        for key in value:
            if not (key is None or isinstance(key, (str, int, float, bool))):
                raise Unsendable(f"dict keys of type {type(key).__name__} cannot be sent")
            keys.append(encode(key, arrays))
        return {"$": "dict", "k": keys, "v": [encode(item, arrays) for item in value.values()]}
    raise Unsendable(f"a value of type {type(value).__name__} cannot be sent (plain data and numpy arrays only)")


def decode(data: Any, arrays: list) -> Any:
    """The inverse of :func:`encode` (arrays are fresh, writable, plain ndarrays)."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, dict):
        tag = data.get("$")
        if tag == "array":
            return arrays[data["i"]]
        if tag == "scalar":
            return arrays[data["i"]][()]
        if tag == "list":
            return [decode(item, arrays) for item in data["v"]]
        if tag == "tuple":
            return tuple(decode(item, arrays) for item in data["v"])
        if tag == "dict":
            return {decode(k, arrays): decode(v, arrays) for k, v in zip(data["k"], data["v"], strict=True)}
        if tag in ("dtype", "scalar_type"):
            dtype = np.dtype(str(data["v"]))
            _check_dtype(np.empty(0, dtype))
            return dtype if tag == "dtype" else dtype.type
        if tag == "python_type":
            return PYTHON_TYPES[data["v"]]
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
    """One frame: the JSON header and the arrays as .npy blobs."""
    head = json.dumps(header, separators=(",", ":")).encode()
    parts = [MAGIC, struct.pack("!II", len(head), len(arrays)), head]
    for array in arrays:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        blob = buffer.getvalue()
        parts.append(struct.pack("!Q", len(blob)))
        parts.append(blob)
    return b"".join(parts)


def load_array(blob: bytes | memoryview) -> Any:
    """A .npy blob as a writable plain ndarray of an allowed dtype."""
    array = np.load(io.BytesIO(blob), allow_pickle=False)
    _check_dtype(array)
    if not array.flags.writeable:
        array = array.copy()
    return array


def unpack(buffer: bytes | bytearray | memoryview) -> tuple[tuple[dict, list], int] | None:
    """Parse one frame from the start of ``buffer``: ((header, arrays), size), or None if incomplete."""
    view = memoryview(buffer)
    if len(view) < 12:
        return None
    if bytes(view[:4]) != MAGIC:
        raise ValueError("bad frame (the channel is corrupt)")
    head_len, count = struct.unpack("!II", view[4:12])
    if head_len > MAX_HEADER or count > MAX_ARRAYS:
        raise ValueError("frame too large")
    position = 12 + head_len
    if len(view) < position:
        return None
    spans = []
    for _ in range(count):
        if len(view) < position + 8:
            return None
        (size,) = struct.unpack("!Q", view[position : position + 8])
        if size > MAX_ARRAY_BYTES:
            raise ValueError("array too large")
        position += 8
        if len(view) < position + size:
            return None
        spans.append((position, size))
        position += size
    header = json.loads(bytes(view[12 : 12 + head_len]))
    if not isinstance(header, dict):
        raise ValueError("bad header")
    arrays = [load_array(view[start : start + size]) for start, size in spans]
    return (header, arrays), position


def sync(original: Any, returned: Any) -> None:
    """Make ``original`` (the caller's argument) look like ``returned`` (the callee's after the call).

    Arrays are overwritten in place (``np.copyto``), dicts and lists get the
    callee's keys and items, generators take the callee's state, so in-place
    changes and random streams look the same as in a single process.
    """
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
            if key in original and _syncable(original[key], item):
                sync(original[key], item)
            else:
                original[key] = item
    elif isinstance(original, list) and isinstance(returned, list):
        if len(original) != len(returned):
            original[:] = returned
        else:
            for index, item in enumerate(returned):
                if _syncable(original[index], item):
                    sync(original[index], item)
                else:
                    original[index] = item
    elif isinstance(original, tuple) and isinstance(returned, tuple) and len(original) == len(returned):
        for old, new in zip(original, returned, strict=True):
            sync(old, new)


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
    name, message = str(info.get("type", "Exception")), str(info.get("message", ""))
    bases = []
    for base_name in info.get("builtins", ()):
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
    if info.get("traceback"):
        error.add_note("student traceback (most recent call last):\n  " + "\n  ".join(info["traceback"]))
    return error


# --------------------------------------------------------------------------- the worker

_BUILTINS = dict(vars(builtins))


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
            parsed = unpack(self.buffer)
            if parsed is not None:
                message, size = parsed
                del self.buffer[:size]
                return message
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise EOFError("the grading process closed the channel")
            self.buffer += chunk


class Worker:
    """Imports the student's modules lazily, one package per view, and runs calls."""

    def __init__(self, channel: Channel, modules: str) -> None:
        self.channel = channel
        self.modules = modules.rstrip("/") + "/"
        self.functions: dict[str, list[str]] = {}
        self.dependencies: dict[str, list[str]] = {}

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
            result, after_args, after_kwargs = decode(header["payload"], reply_arrays)
            sync(list(args), after_args)
            sync(kwargs, after_kwargs)
            return result

        forward.__name__ = forward.__qualname__ = function
        return forward

    def load(self, view: str, module: str) -> types.ModuleType:
        """Import the student's ``module`` in the package of ``view``."""
        import importlib

        return importlib.import_module(f"{self.package(view)}.{module}")

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
        """Route one request by its ``op``."""
        op = header.get("op")
        if op == "init":
            self.functions = header["functions"]
            self.dependencies = header["dependencies"]
            self.channel.send({"status": "ok", "pid": os.getpid(), "uid": os.getuid()}, [])
        elif op == "import":
            self.handle_import(header)
        elif op == "call":
            self.handle_call(header, arrays)
        else:
            self.channel.send({"status": "error", "error": {"type": "ValueError", "message": f"bad op {op!r}"}}, [])

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
        args, kwargs = decode(header["payload"], arrays)
        try:
            target = getattr(self.load(header["view"], module), function)
        except BaseException as error:  # noqa: BLE001
            self.channel.send({"status": "import_error", "message": self.describe_import_error(module, error)}, [])
            return
        try:
            result = target(*args, **kwargs)
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
            payload = encode([result, list(args), kwargs], reply_arrays)
        except Exception as error:  # noqa: BLE001 - e.g. a result that is not plain data
            info = {"type": "TypeError", "builtins": ["TypeError"], "traceback": [],
                    "message": f"{function}() returned a value the grader cannot receive: {error}"}
            self.channel.send({"status": "error", "error": info}, [])
            return
        self.channel.send({"status": "ok", "payload": payload}, reply_arrays)


def _drop_privileges(uid: int, gid: int) -> None:
    if os.getuid() == 0 and uid != 0:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() != uid:
            raise SystemExit("could not drop privileges")


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """Entry point of the worker process."""
    options = dict(zip(argv[0::2], argv[1::2], strict=False))
    read_fd, write_fd = int(options["--requests"]), int(options["--replies"])
    if "--uid" in options:
        _drop_privileges(int(options["--uid"]), int(options.get("--gid", options["--uid"])))
    if options.get("--site"):
        sys.path.append(options["--site"])
    os.chdir(options["--modules"])
    load_numpy()
    for fd in (read_fd, write_fd):
        os.set_inheritable(fd, False)  # programs that student code executes do not get the channel
    # A process that student code forks must never speak on the channel: close it there at once.
    os.register_at_fork(after_in_child=lambda: [_close_quietly(fd) for fd in (read_fd, write_fd)])
    channel = Channel(read_fd, write_fd)
    worker = Worker(channel, os.path.realpath(options["--modules"]))
    while True:
        try:
            header, arrays = channel.receive()
        except EOFError:
            return 0
        worker.handle(header, arrays)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
