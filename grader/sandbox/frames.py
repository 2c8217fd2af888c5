"""The wire format between the grading process and a worker: frames of a JSON header and raw array bytes.

Run by both sides: the grading process imports it as ``grader.sandbox.frames``;
the worker and the fork server, in the sandbox, import the copy placed next to
``worker.py`` (see :mod:`grader.sandbox.worker`). It imports only the standard
library and numpy, so that it can.

A frame is a JSON header (which also gives each array's dtype, shape and
size) followed by the arrays' raw bytes. Nothing is ever pickled: arrays are
rebuilt with ``np.frombuffer``-style views from an allow-list of numeric and
bool dtypes after their sizes are checked, so a message cannot run code on the
receiving side. What the header's values mean (plain data, arrays by index) is
:mod:`grader.sandbox.codec`'s business.
"""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any

import numpy as np

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
MAX_DIMS = 64  # numpy 2's own most: a valid array of 33 axes once ended a worker as "malformed"
# One pipe's worth per read: asking for much more makes every read allocate (mmap) and free a buffer that
# large, ~10x the cost of the read itself for the small messages that most calls are.
READ_BYTES = 1 << 16
ARRAY_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex: nothing that can hold objects
_NUMERIC_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "longdouble", "complex64", "complex128", "clongdouble")
# dtype.str -> dtype, both byte orders, for the types above: the allow-list.
ALLOWED_DTYPES: dict[str, Any] = {np.dtype(name).newbyteorder(order).str: np.dtype(name).newbyteorder(order)
                                  for name in _NUMERIC_TYPES for order in "<>"}


def _make_json_codec() -> tuple[Any, Any]:
    """A compact JSON writer and a whole-text JSON reader, both built once (not per message).

    ``json.dumps`` with ``separators`` builds a new encoder for every message, and ``json.loads`` detects the
    text's encoding and strips whitespace around it: on a header of a few hundred bytes that is most of the cost.
    The writer skips the check for circular containers: it only ever sees the trees that ``codec.encode``
    and :func:`pack` build, fresh lists and dicts (a circular value never gets that far: encoding it recurses until
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


dumps, loads = _make_json_codec()


class Unsendable(TypeError):
    """A value that is not plain data (and so cannot cross the channel)."""


# id(dtype) -> (dtype, dtype.str) for the dtypes that passed the check below (each kept alive here, so an id is
# never reused while it is in this table): the common dtypes are numpy's singletons, checked once per process.
_CHECKED_DTYPES: dict[int, tuple[Any, str]] = {}


def check_dtype(dtype: Any) -> str:
    """``dtype.str`` if arrays of ``dtype`` may be sent, else Unsendable."""
    known = _CHECKED_DTYPES.get(id(dtype))
    if known is not None and known[0] is dtype:
        return known[1]
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None or dtype.str not in ALLOWED_DTYPES:
        raise Unsendable(f"numpy arrays of dtype {dtype} cannot be sent (only numeric and bool arrays)")
    if len(_CHECKED_DTYPES) < 1000:
        _CHECKED_DTYPES[id(dtype)] = (dtype, dtype.str)
    return dtype.str

def _parts(header: dict, arrays: list) -> list:
    """A frame's parts, in order: prefix, JSON header, then each array's bytes as a buffer (no copy if contiguous).

    A C-contiguous array is its own buffer; an F-contiguous one goes in F order (as np.save does), as the
    buffer of its transpose; any other array is copied out (``tobytes``).
    """
    described, blobs = [], []
    body_len = 0
    for array in arrays:
        name = check_dtype(array.dtype)
        flags = array.flags
        if flags.c_contiguous:
            order, blob = "C", array
        elif flags.f_contiguous:
            order, blob = "F", array.T
        else:
            order, blob = "C", array.tobytes()
        described.append([name, list(array.shape), order, array.nbytes])
        blobs.append(blob)
        body_len += array.nbytes
    head = dumps({"h": header, "a": described}).encode()
    return [PREFIX.pack(MAGIC, len(head), body_len), head, *blobs]


def pack(header: dict, arrays: list) -> bytes:
    """One frame: the JSON header, which describes the arrays, then their raw bytes (one buffer, one write)."""
    return b"".join(_parts(header, arrays))


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
        message = loads(str(view[PREFIX.size : start], "utf-8"))
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


# Sealed answers (``grader.sandbox.sealed``): the reference's answer to a callback that the kit's own check asked,
# readable only by a worker that asks the very same question. The index is a digest of the question's frame; the
# answer is XORed with a keystream whose key is another digest of the same frame. Knowing an index tells nothing
# of its question, so a sealed answer opens only for code that can write the question, which could ask it anyway.
SEAL_INDEX = 20


def seal_keys(frame: bytes | bytearray | memoryview) -> tuple[bytes, bytes]:
    """A callback frame's (index, key): both digests of the whole frame (SHA-256, then a personalised BLAKE2b)."""
    return _keys(hashlib.sha256(frame))


def question_keys(header: dict, arrays: list) -> tuple[bytes, bytes]:
    """``seal_keys(pack(header, arrays))``, without packing: the frame's parts are hashed where they lie."""
    digest = hashlib.sha256()
    for part in _parts(header, arrays):
        digest.update(part)
    return _keys(digest)


def _keys(digest: Any) -> tuple[bytes, bytes]:
    whole = digest.digest()
    return (hashlib.blake2b(whole, digest_size=SEAL_INDEX, person=b"ak-seal-index").digest(),
            hashlib.blake2b(whole, digest_size=32, person=b"ak-seal-key").digest())


def seal(key: bytes, data: bytes | bytearray | memoryview) -> bytearray:
    """``data`` XORed with ``key``'s keystream: sealing and opening are the same step.

    The keystream is AES-256 in counter mode (the key is the question's own, so no two answers share one) from the
    OpenSSL library that ``hashlib`` already loaded, or SHAKE-128 where that library cannot be reached; which one
    is ``SEAL_CIPHER``, part of the name of the file the answers are kept in (``sealed.reference_digest``).
    A new bytearray, written once (an opened answer is unpacked from it as its own buffer, ``unpack(owned=True)``).
    """
    result = bytearray(len(data))
    if result:
        if _AES is not None:
            _AES(key, data, result)
        else:
            np.bitwise_xor(np.frombuffer(hashlib.shake_128(key).digest(len(data)), np.uint8),
                           np.frombuffer(data, np.uint8), out=np.frombuffer(result, np.uint8))
    return result


def _openssl_aes() -> Any:
    """AES-256-CTR of the OpenSSL library behind ``hashlib`` (its public EVP functions, through ctypes), or None.

    Three times SHAKE-128's speed on answers of megabytes (``benchmarks/seal_cost.py``): the keystream of every
    sealed answer a worker opens was a tenth of what grading a student of every part costs. None where hashlib
    is not OpenSSL's, or the library lacks the functions or gives another keystream than AES-256-CTR's own.
    """
    try:
        import _hashlib  # the extension module that links OpenSSL's libcrypto: its symbols are found through it
        import ctypes

        library = ctypes.CDLL(_hashlib.__file__)
        new_context, free_context = library.EVP_CIPHER_CTX_new, library.EVP_CIPHER_CTX_free
        cipher, start, update = library.EVP_aes_256_ctr, library.EVP_EncryptInit_ex, library.EVP_EncryptUpdate
    except (ImportError, AttributeError, OSError):
        return None
    new_context.restype, cipher.restype = ctypes.c_void_p, ctypes.c_void_p
    free_context.argtypes, free_context.restype = [ctypes.c_void_p], None
    start.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    update.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int]

    def aes(key: bytes, data: bytes | bytearray | memoryview, result: bytearray, counter: bytes = bytes(16)) -> None:
        # (a zero first counter block: the key is this one answer's only; one of another length is hashed to 32 bytes)
        key = bytes(key) if len(key) == 32 else hashlib.sha256(key).digest()
        source, target = np.frombuffer(data, np.uint8), np.frombuffer(result, np.uint8)
        context, written = new_context(), ctypes.c_int()
        if not context:
            raise MemoryError("OpenSSL could not make a cipher context")
        try:
            if start(context, cipher(), None, key, counter) != 1:
                raise ValueError("OpenSSL refused the AES-256-CTR key")
            for offset in range(0, len(source), 1 << 30):  # its length argument is an int
                size = min(1 << 30, len(source) - offset)
                if update(context, target.ctypes.data + offset, ctypes.byref(written),
                          source.ctypes.data + offset, size) != 1 or written.value != size:
                    raise ValueError("OpenSSL's AES-256-CTR failed")
        finally:
            free_context(context)

    # FIPS-197's AES-256 example (key 00..1f, block 00112233..ff: 8ea2b7ca516745bfeafc49904b496089), as the first
    # block of the counter mode whose counter is that block: anything else is not the cipher named.
    try:
        probe = bytearray(16)
        aes(bytes(range(32)), bytes(16), probe, bytes.fromhex("00112233445566778899aabbccddeeff"))
    except (ValueError, MemoryError, TypeError, ctypes.ArgumentError):
        return None
    return aes if probe.hex() == "8ea2b7ca516745bfeafc49904b496089" else None


_AES = _openssl_aes()
SEAL_CIPHER = "aes-256-ctr" if _AES is not None else "shake-128"
