"""One array returned by several calls is one array on both sides of the sandbox, as it is in one process.

Run by both sides: the worker imports the copy placed beside ``worker.py`` (``limits.SANDBOX_MODULES``; the
standard library and numpy only) for :class:`Sent`; the grading process imports ``grader.sandbox.kept`` for
:class:`Kept`.

In-process, a ``causal_mask`` wrapped in ``functools.lru_cache`` gives every caller the same array: a caller that
writes into it (``mask &= padding``) changes every later mask, and ``np.shares_memory(first, second)`` says so. The
sandbox decodes each reply into fresh arrays, so the same code passed that test graded and failed it in the
student's own run. A call's request now carries ``kept`` (``protocol``), and its reply, for each array of the
result, an entry ``[k, token, state]`` (``protocol.KEPT``): the ``k``-th array of the reply is the worker's object
named ``token``, and ``state`` says what the grading side makes of it:

- ``NEW``: an object not sent before (the grading side keeps the decoded array under ``token``);
- ``SAME``: an object sent before, its bytes as they were sent then: the grading side gives the object it
  decoded then (what the test did to it stays, as in one process where both are one object);
- ``CHANGED``: an object sent before whose bytes changed since (the student's cache written into): its new bytes
  are copied into that same object (``np.copyto``), so every earlier holder sees them, as in one process; but never
  into a test's own array given back before (``GIVEN``) unless the call was given it again, where the Kit undoes
  what the call changed: a grading process keeps its tests' data for its next students (a cached corpus's merges);
- ``GIVEN`` (with a fourth item, ``i``): the ``i``-th array of the request, given back (``return cache``): the
  caller's own argument, its bytes made the reply's first.

The other way, a request names by token (``tokens``, ``[[i, token]]``) its arrays that the worker gave (a mask
passed back to ``attention``): the worker puts its own object in their place, with the bytes received copied in
(what the test wrote into it), as the function would get it in one process (:meth:`Sent.take`).

Bytes always travel (what a reply sends is unchanged), so a grading-side object that is gone (nothing of the
test's held it any more) is simply the decoded array again. Tokens name only this worker's results and the
arguments given back to it: :class:`Kept` is per implementation and emptied at every new worker
(``proxy._spawn``), a token above the last one given is a malformed reply (the student's crash, as any), and a
token at or below it can only name an object the student's code was handed and could have kept anyway.

Left as they are (written down here, not handled): views of one cached base (``cache[:n, :n]``) are new objects at
every call and cross apart, as within one call; 0-d arrays (numpy scalars travel as values); a test's writes into
an array reach the worker's object only when the test passes it back (not when the student's code reads its cache
by itself in a later call); an object both the test and the worker wrote into takes the worker's bytes; a decoded
array is writeable even where the worker's is read-only (the frames carry no flags); an array put into a
dict or list argument in place of an array of the same shape is copied into the caller's (``codec.sync``), so a
later result giving it back is another object.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Any

import numpy as np

from .frames import PREFIX, pack

NEW, SAME, CHANGED, GIVEN = 0, 1, 2, 3
MAX_SENT = 4096  # the worker's live arrays it remembers; the oldest is forgotten first (it then crosses as new)


class _Sent(weakref.ref):
    """A weak reference to an array the worker sent, with its token and the digest of the bytes sent."""

    __slots__ = ("digest", "key", "token")


def digest(array: np.ndarray) -> bytes:
    """A digest of ``array``'s dtype, shape and bytes, laid out as ``frames`` sends them."""
    hashed = hashlib.blake2b(f"{array.dtype.str}{array.shape}".encode(), digest_size=16)
    flags = array.flags
    hashed.update(array if flags.c_contiguous else array.T if flags.f_contiguous else array.tobytes())
    return hashed.digest()


class Sent:
    """The worker's side: the arrays its results gave, weakly, by ``id``, with their tokens and bytes' digests.

    A result's new arrays cost a weak reference each; a digest is taken only of those the student's code still
    holds once the reply is packed (:meth:`settle`), from the bytes packed, so the usual result, a new array
    nobody keeps, is never hashed.
    """

    def __init__(self, limit: int = MAX_SENT) -> None:
        self.sent: dict[int, _Sent] = {}
        self.limit, self.tokens = limit, 0
        self.fresh: list[tuple[_Sent, int, int]] = []  # this reply's new ones: (reference, offset, size) in the body

    def _drop(self, reference: _Sent) -> None:
        if self.sent.get(reference.key) is reference:
            del self.sent[reference.key]

    def note(self, arrays: list, count: int, received: list) -> list:
        """The reply's ``kept`` entries for its first ``count`` arrays (a result's; ``received``: the request's)."""
        entries, sent, offset, places = [], self.sent, 0, None
        self.fresh = []
        for k in range(count):
            array = arrays[k]
            size = array.nbytes
            if array.ndim == 0:  # a numpy scalar's, made for the message
                offset += size
                continue
            known = sent.get(id(array))
            if known is not None and known() is array:
                now = digest(array)
                entries.append([k, known.token, SAME if now == known.digest else CHANGED])
                known.digest = now
            else:
                if len(sent) >= self.limit:  # (a student's thread may drop entries meanwhile: pop, never del)
                    sent.pop(next(iter(sent), None), None)
                reference = _Sent(array, self._drop)
                reference.key, reference.token, reference.digest = id(array), self.tokens, None
                sent[reference.key] = reference
                self.tokens += 1
                self.fresh.append((reference, offset, size))
                if places is None:  # the request's arrays by id, once a reply has a new array
                    places = {id(item): i for i, item in enumerate(received)}
                given = places.get(id(array))
                entries.append([k, reference.token, NEW] if given is None else [k, reference.token, GIVEN, given])
            offset += size
        return entries

    def take(self, pairs: Any, received: list) -> None:
        """Put back in ``received`` (a request's arrays) the worker's own arrays that ``pairs`` name: ``[[i, token]]``.

        The grading side names so an array its worker gave that a test passes back (``attention(..., mask=m)``):
        in one process the function gets that very object, with whatever the test wrote into it, so the worker's
        object takes the bytes received before it stands in for them. One of another dtype or shape, read-only,
        or no longer held by the student's code, is left as received.
        """
        if type(pairs) is not list or not pairs:
            return
        by_token = {reference.token: reference for reference in list(self.sent.values())}
        for pair in pairs[: len(received)]:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or type(pair[1]) is not int:
                continue
            reference = by_token.get(pair[1])
            array = reference() if reference is not None else None
            if array is None or not 0 <= pair[0] < len(received):
                continue
            got = received[pair[0]]
            if array.dtype != got.dtype or array.shape != got.shape:
                continue
            if array.flags.writeable:
                np.copyto(array, got)  # what the test wrote into it, if anything (a copy costs less than a comparison)
            elif not np.array_equal(array, got, equal_nan=True):
                continue
            received[pair[0]] = array

    def pack(self, reply: dict, arrays: list) -> bytes:
        """``reply``'s frame (``frames.pack``); ``arrays`` is emptied, then :meth:`settle` runs on the frame."""
        frame = pack(reply, arrays)
        arrays.clear()  # the caller dropped the result: the student's code alone may hold its arrays now
        self.settle(frame, PREFIX.size + PREFIX.unpack_from(frame)[1])
        return frame

    def settle(self, frame: bytes, body: int) -> None:
        """Digest the bytes sent (``frame`` from ``body`` on) of this reply's new arrays that are still held."""
        fresh, self.fresh = self.fresh, []
        for reference, offset, size in fresh:
            array = reference()
            if array is not None and reference.digest is None:
                hashed = hashlib.blake2b(f"{array.dtype.str}{array.shape}".encode(), digest_size=16)
                with memoryview(frame) as view:
                    hashed.update(view[body + offset : body + offset + size])
                reference.digest = hashed.digest()


class _Held(weakref.ref):
    __slots__ = ("key", "token")


class Kept:
    """The grading side's: token -> the object it stands for (weakly), for one worker's life (:meth:`reset`)."""

    def __init__(self) -> None:
        self.held: dict[int, _Held] = {}
        self.ids: dict[int, _Held] = {}  # id(array) -> its latest reference, to name it when a test passes it back
        self.given: set[int] = set()  # the tokens of the test's own arrays given back (GIVEN): never written later
        self.last = -1

    def reset(self) -> None:
        """A new worker: no token of the last one names anything any more."""
        self.held.clear()
        self.ids.clear()
        self.given.clear()
        self.last = -1

    def _drop(self, reference: _Held) -> None:
        if self.held.get(reference.token) is reference:
            del self.held[reference.token]
        if self.ids.get(reference.key) is reference:
            del self.ids[reference.key]

    def _hold(self, token: int, array: np.ndarray) -> np.ndarray:
        reference = _Held(array, self._drop)
        reference.key, reference.token = id(array), token
        self.held[token] = self.ids[reference.key] = reference
        return array

    def tokens(self, arrays: list) -> list | None:
        """``[[i, token]]`` for a request's ``arrays`` that are arrays the worker gave (see :meth:`Sent.take`)."""
        ids = self.ids
        if not ids:
            return None
        named = []
        for i, array in enumerate(arrays):
            reference = ids.get(id(array))
            if reference is not None and reference() is array:
                named.append([i, reference.token])
        return named or None

    def resolve(self, entries: Any, arrays: list, request: list) -> None:
        """Put in ``arrays`` (a reply's, before it is decoded) the objects that its ``kept`` ``entries`` name.

        ``request``: the arrays the call sent. ValueError for anything malformed (the worker's crash).
        """
        if entries is None:
            return
        if type(entries) is not list or len(entries) > len(arrays):
            raise ValueError("malformed kept arrays")
        for entry in entries:
            if type(entry) is not list or not 3 <= len(entry) <= 4 or not all(type(n) is int for n in entry):
                raise ValueError("malformed kept array")
            k, token, state = entry[:3]
            if not 0 <= k < len(arrays) or not 0 <= token or (state == GIVEN) != (len(entry) == 4):
                raise ValueError("malformed kept array")
            decoded = arrays[k]
            if state in (NEW, GIVEN):
                if token <= self.last:
                    raise ValueError(f"token {token} given twice")
                self.last = token
                given = request[entry[3]] if state == GIVEN and 0 <= entry[3] < len(request) else None
                if state == GIVEN and given is None:
                    raise ValueError("no such array in the request")
                arrays[k] = self._hold(token, decoded if given is None else self._same(given, decoded, True))
                if given is not None:
                    self.given.add(token)
            elif state in (SAME, CHANGED):
                if token > self.last:
                    raise ValueError(f"unknown token {token}")
                reference = self.held.get(token)
                held = reference() if reference is not None else None
                if state == CHANGED and token in self.given and not any(held is sent for sent in request):
                    # The test's own array (a cache the grading process keeps for its next students), outside this
                    # call's arguments, whose changes the Kit undoes: never written into, the new bytes are new.
                    held = None
                arrays[k] = self._hold(token, decoded if held is None else self._same(held, decoded, state == CHANGED))
            else:
                raise ValueError(f"unknown kept state {state}")

    @staticmethod
    def _same(held: np.ndarray, decoded: np.ndarray, changed: bool) -> np.ndarray:
        """``held`` with ``decoded``'s bytes if ``changed``; ``decoded`` where ``held`` cannot take them."""
        if type(held) is not np.ndarray or held.dtype != decoded.dtype or held.shape != decoded.shape:
            return decoded
        if changed and not np.array_equal(held, decoded, equal_nan=True):
            if not held.flags.writeable:
                return decoded
            np.copyto(held, decoded)
        return held
