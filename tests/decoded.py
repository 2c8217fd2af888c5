"""What a watched ``causal_decode`` call's result was made of: steps over caches the student's own appends built.

Imported on both sides of the sandbox, as ``tests/by_code.py`` is: by the student's worker (a copy beside
``worker.py``, named in ``limits.SANDBOX_MODULES``; numpy and the standard library only) and by a student's own
run (``tests/reach.py``). The profiler of a watched call (``by_code.every_call``) tells a :class:`Steps` each call
and return of the student's API functions; it keeps:

- the contents of every cache ``kv_cache_append`` returned one position longer than the cache it was given (none,
  or one it returned before), as they were when it returned: the cache grows as the tokens come (a copy of one is
  one; a cache made by hand of slices of the inputs is not, nor one appended a whole prefix at once, nor a
  returned array overwritten since);
- each ``attend_step`` call whose cache is one of those and holds, with its query, the call's own inputs up to a
  position (for each batch entry the step covers: a step may take one entry at a time), and the context it
  returned if that is attention over that cache (a step that returns rows computed elsewhere is not one);

and then says which of the result's vectors (along its last axis) are none of those contexts. Code that calls
the two functions on made-up data, or feeds attend_step caches of its own making, and returns values computed
another way (full attention under the causal mask), is so told apart from code that decodes through the cache.
Values are compared to a tolerance of their dtype's precision (float32 steps round differently).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

# The API function whose returns make up the result, and the one whose caches it must be given; at most this many
# of a call's steps are called again after it (the tests decode at most 41 positions).
MADE_BY, CACHES_FROM = "attend_step", "kv_cache_append"
REPLAYS = 256


def _tolerance(*arrays: Any) -> float:
    """A relative tolerance for values of these arrays' dtypes: a few hundred roundings of the coarsest."""
    eps = max((float(np.finfo(a.dtype).eps) for a in arrays if a.dtype.kind == "f"), default=2.2e-16)
    return max(1e-9, 256 * eps)


def _rounded(expected: np.ndarray, got: np.ndarray) -> bool:
    """Whether ``got`` is ``expected`` rounded to float32 at most.

    (A blind round: a first cache kept in float32 was told causal_decode went around the API, where the values'
    checks say it is a question of precision.)
    """
    return expected.shape == got.shape and bool(np.allclose(got, expected, rtol=_tolerance(np.float32(0)), atol=0))


def _plain(value: Any) -> np.ndarray | None:
    """A plain float64 copy of an array of the student's, or None.

    Never the student's object itself: an ndarray subclass can make its arithmetic, ``shape`` or ``reshape`` say
    what it likes (a helper's round: a context whose subtraction gave zeros).
    """
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu":
        return None
    return np.array(value, dtype=np.float64, subok=False, copy=True)


def _read(cache: Any, key: str) -> Any:
    """``cache[key]`` as the cache holds it, None if it has none.

    A dict's own item: a subclass's ``__getitem__`` may answer the kit one thing and the student's function another.
    """
    try:
        return dict.__getitem__(cache, key) if isinstance(cache, dict) else cache[key]
    except Exception:  # noqa: BLE001 - no such item, or a mapping that refuses: no cache
        return None


def _blocks(array: Any) -> list[bytes] | None:
    """The (positions, d) block of each batch entry of an array ``(..., positions, d)``, as keys (values as float64).

    A cache is known by its entries' blocks, whatever its batch axes: a step may take one entry's slice of a cache,
    or the cache with its batch axes flattened.
    """
    plain = _plain(array)
    if plain is None or plain.ndim < 2:
        return None
    m, d = plain.shape[-2:]
    head = f"{m},{d}:".encode()
    return [head + row.tobytes() for row in np.ascontiguousarray(plain).reshape(-1, m * d)]


def _in_float32(values: list[Any]) -> bool:
    """Whether a step was given float32 arrays (its query, or its cache's keys or values): their dtype only is read."""
    cache = _cache(values)
    arrays = [*values, *((_read(cache, key) for key in ("k", "v")) if cache else ())]
    return any(type(array) is np.ndarray and array.dtype == np.float32 for array in arrays)


def _arguments(frame: Any) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of ``frame``'s call: positional ones in order with what ``*args`` holds, and keyword ones.

    (A wrapper's ``**kwargs`` too: ``attend_step(q_t=..., cache=...)`` through a class-based decorator.)
    """
    code, local = frame.f_code, frame.f_locals
    count = code.co_argcount + code.co_kwonlyargcount
    positional = [local.get(name) for name in code.co_varnames[:code.co_argcount]]
    keywords = {name: local.get(name) for name in code.co_varnames[code.co_argcount:count]}
    if code.co_flags & 0x04:  # CO_VARARGS
        extra = local.get(code.co_varnames[count])
        if isinstance(extra, tuple):
            positional += list(extra)
        count += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        extra = local.get(code.co_varnames[count])
        if isinstance(extra, dict):
            keywords.update(extra)
    return positional, keywords


def _values(frame: Any) -> list[Any]:
    """The arguments of ``frame``'s call in order: positional ones, then keyword ones (:func:`_arguments`)."""
    positional, keywords = _arguments(frame)
    return positional + list(keywords.values())


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Attention of queries ``q`` over keys ``k`` and values ``v`` (plain float64, batch axes first)."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


def _cache(values: list[Any]) -> Any:
    """The cache a call was given (False: no cache argument).

    The first mapping holding ``k`` and ``v``, else the first mapping, else None if an argument is None. (One
    function of the student's may stand for both API functions, behind two partials, its first argument saying
    which; a keyword ``scale=None`` may come before ``cache=...``.)
    """
    mappings = [x for x in values if isinstance(x, Mapping)]
    for mapping in mappings:
        if _read(mapping, "k") is not None and _read(mapping, "v") is not None:
            return mapping
    if mappings:
        return mappings[0]
    return None if any(x is None for x in values) else False


class Steps:
    """The steps of one watched ``causal_decode(q, k, v)`` call (``args``, ``kwargs``: the call's own inputs).

    At most ``most`` numbers of contexts are kept (past that, none more: a row not among them is not the steps');
    when the inputs are not three arrays, or the result has more numbers, nothing is concluded.
    """

    def __init__(self, args: tuple, kwargs: dict, most: int = 1 << 20) -> None:
        self.name, self.most = MADE_BY, most
        self.contents: set[bytes] = set()  # the shapes and values of the caches' arrays (a copy of one is one)
        self.pending: dict[int, Any] = {}  # id(frame) of an attend_step call -> its (q, k, v) blocks, or None
        # id(frame) of a kv_cache_append call -> the length it must return, and the cache's arrays it was given (its
        # returned arrays must begin with them: an append keeps what it is given).
        self.growing: dict[int, tuple[int, dict[str, np.ndarray]]] = {}
        self.kept: list[tuple[np.ndarray, np.dtype]] = []  # the steps' contexts (flat) and their dtypes
        # {(API function, code): the function a frame of it called} (by_code.every_call sets it), and every kept
        # step (up to REPLAYS) as (function, positional, keywords, its (q, k, v)): called again after the call with
        # another query, a step must answer attention for it (a lookup of precomputed rows answers the old one).
        self.functions: dict[tuple[str, Any], Any] = {}
        self.replays: list[tuple[Any, list[Any], dict[str, Any], Any]] = []
        self.replayed: bool | None = None
        self.size, self.unknown = 0, False
        # The cache blocks (an entry's keys up to a length) the appends returned, and how many were returned again
        # by a later append: a cache begun anew at every position builds the same prefixes again (nothing kept
        # between steps). One append seen through a wrapper returns its blocks twice in a row, in its thread.
        self.grown: set[bytes] = set()
        self.last: dict[int, list[bytes]] = {}  # per thread, the blocks its last append returned
        self.prefixes: set[bytes] | None = None  # the inputs' keys up to each length, per entry (made when needed)
        self.again = 0
        self._prefixes: dict[int, dict[bytes, list[int]]] = {}
        try:
            given = list(args[:3]) + [kwargs[name] for name in ("q", "k", "v")[len(args):]]
            q, k, v = (np.asarray(x) for x in given)
            if q.ndim < 2 or k.shape[:-1] != q.shape[:-1] or v.shape[:-1] != q.shape[:-1]:
                raise ValueError("shapes")
            self.q, self.k, self.v = (x.astype(np.float64).reshape((-1,) + x.shape[-2:]) for x in (q, k, v))
        except Exception:  # noqa: BLE001 - not three arrays of fitting shapes: the values are wrong anyway
            self.unknown = True

    # -- what the profiler tells (any exception here is the profiler's to swallow)

    def called(self, name: str, frame: Any) -> None:
        """An API call began: for ``attend_step``, whether its query and cache are the inputs' own.

        For ``kv_cache_append`` given no cache or one of the student's, the length the cache it returns must have.
        """
        if self.unknown:
            return
        if name == self.name:
            positional, keywords = _arguments(frame)
            step = self._step(positional + list(keywords.values()))
            function = self.functions.get((name, frame.f_code))
            if step is not None:  # the arguments as they are now, for the replay: a cache grown in place since
                try:                # (an append that changes the dict it is given) holds other positions then
                    positional, keywords = copy.deepcopy((positional, keywords))
                except Exception:  # noqa: BLE001, S110 - arguments that refuse a copy are replayed as they are
                    pass
            self.pending[id(frame)] = (step, function, positional, keywords) if step is not None else None
        elif name == CACHES_FROM:
            cache = _cache(_values(frame))
            held = _read(cache, "k") if cache is not None and cache is not False else None
            keys = _plain(held)
            values_ = _plain(_read(cache, "v")) if keys is not None else None
            if cache is None or (cache is not False and held is None) or (
                    keys is not None and keys.ndim >= 2 and keys.shape[-2] == 0):
                self.growing[id(frame)] = (1, {})  # (no cache yet: none, an empty mapping, or one of no positions)
            elif keys is not None and self._appended(keys) and self._appended(values_):
                self.growing[id(frame)] = (keys.shape[-2] + 1, {"k": keys, "v": values_})

    def returned(self, name: str, frame: Any, value: Any) -> None:
        """An API call returned ``value``: keep a cache's arrays, or a step's context if it attends over its cache."""
        if self.unknown:
            return
        if name == CACHES_FROM:
            growing = self.growing.pop(id(frame), None)
            if growing is None or not isinstance(value, Mapping):
                return
            length, given = growing
            for key in ("k", "v"):
                array = _plain(_read(value, key))
                if array is None or array.ndim < 2 or array.shape[-2] != length:
                    continue
                if key in given and not (array.shape[:-2] == given[key].shape[:-2]
                                         and np.array_equal(array[..., :-1, :], given[key])):
                    continue  # (not the cache it was given, grown: a chain of made-up caches, then the inputs)
                blocks = _blocks(array) or []
                if key == "k":
                    self._count_again(blocks)
                self.contents.update(blocks)
        elif name == self.name:
            pending = self.pending.pop(id(frame), None)
            if pending is None:
                return
            step, function, positional, keywords = pending
            kept = len(self.kept)
            self._keep(step, value[0] if isinstance(value, (tuple, list)) and value else value,
                       _in_float32(positional + list(keywords.values())))
            if len(self.kept) > kept and function is not None:
                if len(self.replays) < REPLAYS:  # (every step: a lookup in some steps only is found too)
                    self.replays.append((function, positional, keywords, step))

    def _count_again(self, blocks: list[bytes]) -> None:
        """Count the inputs' blocks an append returned that an earlier append (not this one, seen twice) returned.

        Only the inputs' prefixes count: appends on made-up data (a thread calling the student's functions on zeros
        beside an honest decoding) build no cache of the decoding. One append seen through a wrapper returns its
        blocks twice in a row, in its thread.
        """
        if self.prefixes is None:
            self.prefixes = {f"{m},{self.k.shape[-1]}:".encode() + np.ascontiguousarray(self.k[e, :m]).tobytes()
                             for e in range(len(self.k)) for m in range(1, self.k.shape[1] + 1)}
        blocks = [block for block in blocks if block in self.prefixes]
        if not blocks:  # (nor does it come between an append and its echo through a wrapper)
            return
        thread = threading.get_ident()
        if self.last.get(thread) != blocks:
            self.again += sum(block in self.grown for block in blocks)
        self.last[thread] = blocks
        self.grown.update(blocks)

    # -- the checks

    def _step(self, values: list[Any]) -> Any:
        """``(q, k, v)`` of one step (flat over batch entries), if its cache is the student's and holds the inputs."""
        cache = _cache(values)
        query = _plain(next((x for x in values if isinstance(x, np.ndarray)), None))
        keys, values_ = (_plain(_read(cache, key)) if cache else None for key in ("k", "v"))
        if query is None or keys is None or values_ is None:
            return None
        if not (self._appended(keys) and self._appended(values_)):
            return None  # a cache kv_cache_append did not return
        d_k, d_v, m = self.q.shape[-1], self.v.shape[-1], keys.shape[-2] if keys.ndim >= 2 else 0
        if query.shape[-1:] != (d_k,) or keys.shape[-1:] != (d_k,) or values_.shape[-1:] != (d_v,) or not m:
            return None
        entries = query.size // d_k
        if (m > self.k.shape[1] or entries > len(self.k) or keys.size != entries * m * d_k
                or values_.size != entries * m * d_v):
            return None  # (more entries than the inputs hold: copies of them, to drown the check)
        q, k, v = query.reshape(-1, 1, d_k), keys.reshape(-1, m, d_k), values_.reshape(-1, m, d_v)
        prefixes = self._prefixes.get(m)
        if prefixes is None:
            prefixes = self._prefixes[m] = {}
            for entry in range(len(self.k)):
                prefixes.setdefault(self.k[entry, :m].tobytes(), []).append(entry)
        for i in range(len(q)):
            entries = prefixes.get(k[i].tobytes())
            if entries is not None:
                same = np.array_equal
            else:  # the inputs rounded (a cache kept in float32): a question of precision, for the values' checks
                same = _rounded
                entries = [e for e in range(len(self.k)) if _rounded(self.k[e, :m], k[i])]
            if not any(same(self.v[e, :m], v[i]) and same(self.q[e, m - 1], q[i, 0]) for e in entries):
                return None
        return q, k, v

    def _appended(self, array: Any) -> bool:
        """Whether ``array`` holds what an array of a cache the student's appends grew held when it was returned.

        Known by contents, never by identity alone: an array returned, then resized or overwritten in place with
        slices of the inputs, is a cache made by hand (a helper's round).
        """
        blocks = _blocks(array)
        return bool(blocks) and all(block in self.contents for block in blocks)

    def _keep(self, step: Any, context: Any, float32: bool = False) -> None:
        """Keep ``context`` if it is attention of the step's query over its cache (every number finite).

        ``float32``: the step was given float32 arrays, so its context holds float32's precision whatever its dtype
        (float32 inputs over a float64 scale: a float64 context; a blind round's rows were told none of attend_step's
        answers).
        """
        got = _plain(context)
        if got is None or context.dtype.kind != "f":
            return
        q, k, v = step
        if got.size != len(q) * v.shape[-1]:
            return
        expected = _attention(q, k, v)
        got = got.reshape(expected.shape)
        scale = max(1.0, float(np.max(np.abs(expected))))
        tolerance = _tolerance(context, np.float32(0)) if float32 else _tolerance(context)
        if not (np.all(np.isfinite(got)) and np.max(np.abs(got - expected)) <= tolerance * scale):
            return  # (a NaN compares false: a context holding one once passed)
        if self.size + got.size <= self.most:  # (past it, nothing more is kept: a flood of steps excuses nothing)
            self.size += got.size
            self.kept.append((got.reshape(-1, v.shape[-1]), context.dtype))

    def made_of(self, result: Any) -> tuple[int, int, int] | None:
        """``(vectors, first, again)``: ``result``'s vectors along its last axis, the first that is none of the steps'.

        ``first`` is an index among the vectors (``-1``: each is a context of a step over the student's cache);
        ``again``: how many cache blocks (an entry's keys up to a length) appends returned that an earlier append
        had returned (0 when the cache is kept from step to step). None when nothing can be said (inputs or a
        result that are not arrays, too many numbers).
        """
        try:
            found = self._made_of(result)
        except Exception:  # noqa: BLE001 - a result that refuses a look (not numbers): nothing to say
            return None
        return None if found is None else (*found, self.again)

    def _replay(self) -> bool:
        """Whether every kept step, called again with another query, answers attention for it.

        Called after the watched call, with the same arguments but the query (``q * 0.5 + 0.25``): an
        ``attend_step`` that returns rows looked up (by an extra argument, or from its cache) answers the old row.
        """
        for function, positional, keywords, (q, k, v) in self.replays:
            slots = [(positional, i) for i in range(len(positional))] + [(keywords, key) for key in keywords]
            where = next(((holder, slot) for holder, slot in slots if isinstance(holder[slot], np.ndarray)), None)
            if where is None:
                return False
            holder, slot = where
            old = holder[slot]
            new = np.asarray(old) * 0.5 + 0.25
            new = new.astype(old.dtype) if old.dtype.kind == "f" else new
            args, kwargs = list(positional), dict(keywords)
            (args if holder is positional else kwargs)[slot] = new
            try:
                answer = function(*args, **kwargs)
            except (Exception, SystemExit):  # noqa: BLE001 - it answered nothing
                return False
            got = _plain(answer[0] if isinstance(answer, (tuple, list)) and answer else answer)
            expected = _attention(_plain(new).reshape(q.shape), k, v)
            if got is None or got.size != expected.size:
                return False
            got = got.reshape(expected.shape)
            scale = max(1.0, float(np.max(np.abs(expected))))
            if not (np.all(np.isfinite(got)) and np.max(np.abs(got - expected)) <= _tolerance(new) * scale):
                return False
        return True

    def _made_of(self, result: Any) -> tuple[int, int] | None:
        given = np.asarray(result)
        if given.dtype.kind == "c":  # (a complex result of the right values: its real part is what the tests read)
            given = given.real
        if (self.unknown or given.ndim < 1 or given.size == 0 or given.size > self.most
                or given.dtype.kind not in "fiub"):
            return None
        d = given.shape[-1]
        rows = given.astype(np.float64).reshape(-1, d)
        if self.replayed is None:
            self.replayed = self._replay()
        if not self.replayed:
            return len(rows), 0  # (its steps answer rows they were not computing)
        kept = [(array, dtype) for array, dtype in self.kept if array.shape[-1] == d]
        if not kept:
            return len(rows), 0
        pool = np.concatenate([array for array, _ in kept])
        tolerance = _tolerance(given)  # (the result's precision: a float16 step must not widen it for every row)
        exact = {pool[i].tobytes() for i in range(len(pool))}
        for index, row in enumerate(rows):
            if row.tobytes() in exact:
                continue
            if not np.any(np.max(np.abs(pool - row), axis=1) <= tolerance * max(1.0, float(np.max(np.abs(row))))):
                return len(rows), index
        return len(rows), -1
