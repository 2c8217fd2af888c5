"""The tests' own remembered values, kept on disk between a student's runs (``tests.kinds.remembered``).

Run by: the student's own pytest (and ``attention-kit status``), in the process that runs the tests; never by a
grading process, which remembers them in memory for the whole class (``tests.plugin`` turns this on only where
the implementation under test is the student's folder run locally). A student runs the suite again and again;
the tests' own work on seeded inputs (central differences of their own forward passes, their own attention and
blockwise simulations, their own training runs and byte-pair merges) gives the same values every time, so it is
computed once and read back in later runs: the suite then costs what the code under test costs. A run that
collects test files outside the manifest (an instructor's hidden tests) keeps and reads nothing: their expected
values are never written to a cache.

A value is kept under a digest of the function (its module, name and code; a function defined inside another is
never kept) and of its exact input key (``frozen``), in a file named by a digest of every file of ``tests/`` and
the versions of Python and numpy: any change to the tests makes a new file. Values are plain data (arrays,
numbers, strings and the containers of them), written as a JSON index and the arrays' raw bytes, never pickles
(an array of Python objects is refused when read): a file changed by hand can only change its author's own
feedback, never run code. A file that cannot be read or written is not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 1
MISSING = object()  # what recall() returns for a value not kept
TESTS = Path(__file__).resolve().parent
MAX_ENTRIES = 4096  # a file past this many values is not added to (a key that changes every run would grow it)


class _Unkept(Exception):
    """A key or value that cannot be written portably (the value is then computed every run)."""


class Store:
    """The values of one file: those read back and those computed in this run.

    The file: an 8-byte length, a JSON index of the values (arrays described by dtype, shape, order and offset),
    then the arrays' bytes; read whole, once, and each value decoded when first asked for.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index: dict[str, Any] = {}
        self.body = b""
        self.new: dict[str, Any] = {}
        with contextlib.suppress(Exception):  # an unreadable or malformed file: nothing is read back
            data = path.read_bytes()
            size = int.from_bytes(data[:8], "little")
            index = json.loads(data[8 : 8 + size].decode())
            if isinstance(index, dict):
                self.index, self.body = index, data[8 + size :]

    def recall(self, name: str) -> Any:
        """The value kept under ``name``, or MISSING."""
        if name in self.new:
            return self.new[name]
        if name not in self.index:
            return MISSING
        try:
            return _decode(self.index[name], self.body)
        except Exception:  # noqa: BLE001 - a damaged entry is computed again
            return MISSING

    def keep(self, name: str, value: Any) -> None:
        """Keep ``value`` under ``name``, to be written at the end of the run."""
        if len(self.index) + len(self.new) < MAX_ENTRIES:
            self.new[name] = value

    def save(self) -> None:
        """Write the values read back and the new ones to the file (whole, then renamed); nothing if none is new."""
        if not self.new:
            return
        parts = _Parts()
        index: dict[str, Any] = {}
        for name, value in [*((name, self.recall(name)) for name in self.index), *self.new.items()]:
            if value is not MISSING:
                with contextlib.suppress(_Unkept):  # what cannot be written back exactly is computed every run
                    index[name] = _encode(value, parts)  # (its bytes so far: unread)
        head = json.dumps(index).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".kept-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(len(head).to_bytes(8, "little") + head)
                file.writelines(parts)
            os.replace(temporary, self.path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        self.new = {}


_STORE: list[Store] = []  # the store of this process, once turned on
_REFUSED: list[bool] = []  # a run with test files outside the manifest (an instructor's hidden tests): none kept


def refuse() -> None:
    """Keep nothing and read nothing in this process (test files of the instructor's are collected)."""
    _REFUSED.append(True)
    _STORE.clear()


def use(folder: Path) -> None:
    """Keep the tests' values in ``folder`` from now on (the student's cache folder)."""
    if not _STORE and not _REFUSED:
        with contextlib.suppress(OSError):
            _STORE.append(Store(folder / f"tests-values-{_tests_digest()}.bin"))


def name_of(function: Any, key: object) -> str | None:
    """The name ``function``'s value at ``key`` (``frozen``'s) is kept under; None: nothing is kept here."""
    if not _STORE:
        return None
    try:
        return _name(function, key)
    except _Unkept:
        return None


def recall(name: str | None) -> Any:
    """The value kept under ``name`` (:func:`name_of`), or MISSING."""
    return _STORE[0].recall(name) if name is not None and _STORE else MISSING


def keep(name: str | None, value: Any) -> None:
    """Keep ``value`` under ``name`` for the next runs (written at the end of the run, if it is plain data)."""
    if name is not None and _STORE:
        _STORE[0].keep(name, value)


def save() -> None:
    """Write this run's new values (at the end of the session)."""
    if _STORE:
        with contextlib.suppress(Exception):  # a cache folder that cannot be written: the next run computes them
            _STORE[0].save()


def _tests_digest() -> str:
    digest = hashlib.sha256(f"{FORMAT}|{sys.version}|{np.__version__}".encode())
    for path in sorted(TESTS.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(f"\0{path.relative_to(TESTS).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def _name(function: Any, key: object) -> str:
    """The digest of a module-level function of the tests (its name and code) and an input key (``frozen``'s).

    A function defined inside another has no name of its own (two of them may share one): it is never kept.
    """
    if "<locals>" in function.__qualname__:
        raise _Unkept(function.__qualname__)
    digest = hashlib.blake2b(f"{function.__module__}.{function.__qualname__}".encode(), digest_size=20)
    _digest(function.__code__, digest)
    _digest(key, digest)
    return digest.hexdigest()


def _digest(value: object, digest: Any) -> None:
    """Feed a ``frozen`` key to ``digest``, the same in every process (objects by name, never by id)."""
    kind = type(value)
    if kind is tuple:
        digest.update(b"(%d" % len(value))
        for item in value:
            _digest(item, digest)
        digest.update(b")")
    elif kind in (bytes, bytearray):
        digest.update(b"y%d:" % len(value) + bytes(value))
    elif kind is str:
        data = value.encode("utf-8", "surrogatepass")
        digest.update(b"s%d:" % len(data) + data)
    elif kind in (int, bool) or value is None:
        digest.update(f"{kind.__name__}:{value!r};".encode())
    elif kind is types.CodeType:
        digest.update(f"c{os.path.basename(value.co_filename)}|{value.co_qualname}|{value.co_firstlineno}|".encode())
        digest.update(value.co_code)
        _digest(tuple(value.co_names), digest)
        _digest(tuple(value.co_consts), digest)
    elif kind is float:
        digest.update(f"f{value.hex()};".encode())
    elif isinstance(value, (type, types.FunctionType)):
        digest.update(f"o{value.__module__}.{value.__qualname__};".encode())
    elif kind is types.ModuleType:
        digest.update(f"m{value.__name__};".encode())
    else:
        raise _Unkept(kind)


class _Parts(list):
    """The arrays' bytes of a file, in order, and their length so far."""

    size = 0

    def add(self, data: bytes) -> int:
        """Append ``data``; its offset."""
        offset, self.size = self.size, self.size + len(data)
        self.append(data)
        return offset


def _encode(value: Any, parts: _Parts) -> Any:
    """``value`` as JSON, its arrays' bytes added to ``parts`` (raises _Unkept for anything but plain data)."""
    kind = type(value)
    if kind is np.ndarray or isinstance(value, np.generic):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise _Unkept(array.dtype)
        fortran = array.ndim > 1 and array.flags.f_contiguous and not array.flags.c_contiguous
        data = array.tobytes(order="F" if fortran else "C")
        offset = parts.add(data)
        return {"a" if kind is np.ndarray else "g": [array.dtype.str, list(array.shape), fortran, offset, len(data)]}
    if kind is bool or value is None:
        return {"b": value}
    if kind is int:
        return {"i": str(value)}
    if kind is float:
        return {"f": value.hex()}
    if kind is str:
        return {"s": value}
    if kind in (list, tuple):
        return {"l" if kind is list else "t": [_encode(item, parts) for item in value]}
    if kind is dict:
        return {"d": [[_encode(key, parts), _encode(item, parts)] for key, item in value.items()]}
    raise _Unkept(kind)


def _decode(entry: dict, body: bytes) -> Any:
    (tag, data), = entry.items()
    if tag in ("a", "g"):
        dtype, shape, fortran, offset, size = data
        kind = np.dtype(dtype)
        if kind.hasobject:
            raise ValueError(dtype)
        array = np.frombuffer(body[offset : offset + size], dtype=kind).reshape(shape, order="F" if fortran else "C")
        return array.copy(order="K") if tag == "a" else array[()]
    if tag == "b":
        return data
    if tag == "i":
        return int(data)
    if tag == "f":
        return float.fromhex(data)
    if tag == "s":
        return data
    if tag in ("l", "t"):
        items = [_decode(item, body) for item in data]
        return items if tag == "l" else tuple(items)
    if tag == "d":
        return {_decode(key, body): _decode(item, body) for key, item in data}
    raise ValueError(tag)
