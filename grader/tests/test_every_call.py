"""A watched call traced by code (``tests/by_code.py``): calls under any name or in any thread are seen, names are not.

Every call of ``causal_decode`` in its tests is watched (``tests.kit.Kit.watch``): it must call ``kv_cache_append``
and ``attend_step`` once per position at least. The wrappers on the API names see calls by name on the main
thread only; a watched call is also traced by the functions' code, in a student's run and in the worker
(``every_call`` in the call's header). A module that only named the functions (an unused alias, a branch never
taken) once passed: the old check read the modules as text for calls its tracing could not see; so did one call of
each on made-up data, and decoding through the cache only for a gate's own call.
"""

from __future__ import annotations

import _thread
import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.grading.grade import grade_batch
from grader.sandbox import protocol
from grader.tests.cheats import CHEATS, HONEST_DECODING, plant
from grader.tests.test_grade import QUIET, read_grades
from tests import by_code

MODULE = '''
import _thread
import functools


def g(x):
    return x + 1


def _h(x):
    return x * 2


h = _h  # an API function bound by assignment: its code is _h's


def _plain(function):
    def wrapper(*args):
        return function(*args)
    return wrapper


k = _plain(lambda x: x)  # a decorator's wrapper without functools.wraps


class _Step:
    def __call__(self, x):
        return x - 1


s = _Step()  # a callable object


def _own_thread(x):
    done, box = _thread.allocate_lock(), []
    done.acquire()

    def work():
        box.append(g(x))
        done.release()

    _thread.start_new_thread(work, ())
    done.acquire()
    return box[0]


def f(x, how):
    if how == "name":
        return g(x)
    if how == "partial":
        return functools.partial(g, x)()
    if how == "alias":
        return h(x)
    if how == "wrapper":
        return k(x)
    if how == "thread":
        with POOL() as pool:
            return pool.submit(functools.partial(g, x)).result()
    if how == "object":
        return s(x)
    if how == "_thread":
        return _own_thread(x)
    if how == "dead":
        unused = (g, h)
        if x is None:
            g(x)
        return x + 1
    raise ValueError(how)
'''
HOME = {"f": "m", "g": "m", "h": "m", "k": "m", "s": "m"}
FOLDER = "/student/"  # where the student's files lie: the code written there is theirs


@pytest.fixture(autouse=True)
def uncarried(monkeypatch):
    """Threads that do not carry the profiler (as where ``carry_threads`` was never called), unless a test says so.

    (Another test of the same process may have called it: a local implementation does.)
    """
    monkeypatch.setattr(by_code, "_BEFORE", None)


@pytest.fixture
def module():
    namespace = vars(types.ModuleType("student.m"))
    namespace["POOL"] = lambda: ThreadPoolExecutor(max_workers=1)
    exec(compile(MODULE, FOLDER + "m.py", "exec"), namespace)  # noqa: S102 - the test's own module
    return namespace


def traced(namespace: dict, how: str) -> tuple[set[tuple[str, str]], int]:
    seen: set[tuple[str, str]] = set()
    untraced: list[int] = []
    before, before_threads, start = sys.getprofile(), threading.getprofile(), _thread.start_new_thread
    with by_code.every_call({"m": namespace}, HOME, FOLDER, "f", lambda caller, callee: seen.add((caller, callee)),
                            lambda: untraced.append(1)):
        namespace["f"](1, how)
    # Put back as it was.
    assert sys.getprofile() is before and threading.getprofile() is before_threads
    assert _thread.start_new_thread is start
    return seen, len(untraced)


@pytest.mark.parametrize("how, callee", [("name", "g"), ("partial", "g"), ("alias", "h"), ("wrapper", "k"),
                                         ("thread", "g"), ("object", "s"), ("_thread", "g")])
def test_a_call_under_any_name_or_in_a_thread_is_seen(module, how, callee):
    running = threading.active_count() > 1  # (a test runner's own threads, if any)
    seen, untraced = traced(module, how)
    assert ("", "f") in seen, seen
    assert ("f", callee) in seen, seen
    assert untraced == running


def test_names_that_are_never_called_are_not_calls(module):
    seen, _ = traced(module, "dead")
    assert seen == {("", "f")}, seen


def test_a_thread_already_running_leaves_the_call_untraced(module):
    stop = threading.Event()
    runner = threading.Thread(target=stop.wait)
    runner.start()
    try:
        _, untraced = traced(module, "name")
    finally:
        stop.set()
        runner.join()
    assert untraced == 1


def test_one_wrapper_around_two_functions_stands_for_both_and_what_it_wraps_for_its_own(module):
    module["g2"] = module["_plain"](module["g"])
    module["h2"] = module["_plain"](module["_h"])
    codes = by_code._codes({"m": module}, {"g2": "m", "h2": "m"}, FOLDER)
    wrapper = module["g2"].__code__
    assert wrapper is module["h2"].__code__ and codes[wrapper] == {"g2", "h2"}
    assert codes[module["g"].__code__] == {"g2"} and codes[module["_h"].__code__] == {"h2"}


def test_a_function_is_named_by_its_own_binding_before_a_closure_that_holds_it(module):
    # f's closure holds h's function (a decoder made by a factory): _h is still h, not f.
    module["f"] = (lambda append: (lambda x, how: append(x)))(module["h"])
    codes = by_code._codes({"m": module}, HOME, FOLDER)
    assert codes[module["_h"].__code__] == {"h"}


def test_code_written_outside_the_student_s_folder_is_not_theirs(module):
    codes = by_code._codes({"m": module}, HOME, "/elsewhere/")
    assert codes == {}


def test_a_frame_made_up_by_student_code_is_not_a_call(module):
    class Frame:  # what a student's code could hand the profiler it finds in sys.getprofile()
        f_code, f_globals, f_back = module["g"].__code__, module, None

    seen: set[tuple[str, str]] = set()
    with by_code.every_call({"m": module}, HOME, FOLDER, "f", lambda caller, callee: seen.add((caller, callee)),
                            lambda: None):
        sys.getprofile()(Frame(), "call", None)
    assert seen == set(), seen


def test_a_module_that_replaces_threading_active_count_changes_nothing(module, monkeypatch):
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    running = by_code._ACTIVE() > 1
    _, untraced = traced(module, "name")
    assert untraced == running


def test_the_request_field_is_checked():
    call = {"op": "call", "view": "decoding", "module": "decoding", "function": "causal_decode", "payload": []}
    assert protocol.check({**call, "every_call": True}, protocol.REQUESTS) == "call"
    with pytest.raises(protocol.ProtocolError, match="every_call"):
        protocol.check({**call, "every_call": "yes"}, protocol.REQUESTS)


def test_graded_decoding_cheats_earn_what_their_controls_earn_and_honest_variants_full_marks(tmp_path):
    """Graded (the worker traces the watched calls): as test_gaming finds in a student's own run."""
    cheats = {name: cheat for name, cheat in CHEATS.items() if name.startswith("decode-")}
    students = {"correct": {}, **{name: cheat.code for name, cheat in cheats.items()},
                **{f"{name}-control": cheat.control for name, cheat in cheats.items()},
                **{name: code for name, code in HONEST_DECODING.items() if name.startswith("decode-")}}
    for name, code in students.items():
        plant(tmp_path / "submissions" / name, code)
    assert grade_batch(tmp_path / "submissions", tmp_path / "out", **(QUIET | {"exercises": ["decoding"]})) == 0
    scores = {student: float(row["score"]) for student, row in read_grades(tmp_path / "out").items()}
    assert all(scores[f"{name}-control"] < scores["correct"] for name in cheats), scores
    assert {name: scores[name] for name in cheats} == {name: scores[f"{name}-control"] for name in cheats}, scores
    honest = {name: scores[name] for name in students if name in HONEST_DECODING}
    assert honest == dict.fromkeys(honest, scores["correct"]), (honest, scores["correct"])


def test_a_student_s_cprofile_run_keeps_its_profiler(module):
    # python -m cProfile -m pytest: cProfile's hook is its Profile object, which sys.setprofile cannot take back.
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    try:
        with by_code.every_call({"m": module}, HOME, FOLDER, "f", lambda caller, callee: None, lambda: None):
            module["f"](1, "name")
        module["g"](1)  # a call after the watched one: "'Profile' object is not callable" before
        again = sys.getprofile()
    finally:
        profile.disable()
    assert again is profile
    assert any(getattr(entry.code, "co_name", "") == "g" for entry in profile.getstats())



def test_a_thread_started_before_the_call_is_within_reach_once_threads_carry_the_profiler(module, monkeypatch):
    # A thread the student's module started at import, waiting; it calls g when the watched call wakes it. Before,
    # any thread running at the start left the call untraced: a gate concluded nothing (a cheat's way past).
    monkeypatch.setattr(_thread, "start_new_thread", _thread.start_new_thread)  # (put back after the test)
    monkeypatch.setattr(by_code, "_BEFORE", frozenset(by_code._thread_idents()))
    before_threads = threading.getprofile()
    threading.setprofile(by_code._first)  # what carry_threads does
    _thread.start_new_thread = by_code._carrying
    go, done = threading.Event(), threading.Event()

    def waiting():
        go.wait()
        module["g"](1)
        done.set()

    runner = threading.Thread(target=waiting)
    try:
        runner.start()
        namespace = dict(module, GO=go, DONE=done)
        exec(compile("def f(x, how):\n    GO.set()\n    DONE.wait()\n    return x\n", FOLDER + "m.py", "exec"),  # noqa: S102
             namespace)
        seen, untraced = traced(namespace, "")
    finally:
        go.set()
        runner.join()
        threading.setprofile(before_threads)
    assert untraced == 0
    assert ("f", "g") in seen, seen


def _decode_steps(q, k, v, steps, make_cache=None, context_of=None, append_of=None):
    """Tell ``steps`` a decoding of (q, k, v) as the profiler would: each append's return, each step's call, return."""
    import numpy as np

    class Frame:  # what decoded.Steps reads of a frame: its code's arguments and their values
        def __init__(self, code, **local):
            self.f_code, self.f_locals = code.__code__, local

    cache, rows = None, []
    for t in range(q.shape[-2]):
        k_t, v_t = k[..., t:t + 1, :], v[..., t:t + 1, :]
        append = Frame(lambda cache, k_t, v_t: None, cache=cache, k_t=k_t, v_t=v_t)
        steps.called("kv_cache_append", append)
        cache = {"k": k_t, "v": v_t} if cache is None else {"k": np.concatenate([cache["k"], k_t], axis=-2),
                                                           "v": np.concatenate([cache["v"], v_t], axis=-2)}
        cache = append_of(cache) if append_of else cache
        steps.returned("kv_cache_append", append, cache)
        given = make_cache(t) if make_cache else cache
        frame = Frame(lambda q_t, cache: None, q_t=q[..., t:t + 1, :], cache=given)
        steps.called("attend_step", frame)
        scores = q[..., t:t + 1, :] @ np.swapaxes(given["k"], -1, -2) / np.sqrt(q.shape[-1])
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        context = (weights / weights.sum(axis=-1, keepdims=True)) @ given["v"]
        context = context_of(t, context) if context_of else context
        steps.returned("attend_step", frame, (context.astype(q.dtype), weights))
        rows.append(context.astype(q.dtype))
    return np.concatenate(rows, axis=-2)


def test_a_decoding_is_made_of_steps_over_the_student_s_own_caches_of_the_inputs():
    import numpy as np

    from tests import decoded

    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 3, 6, 4)) for _ in range(3))
    steps = decoded.Steps((q, k, v), {})
    out = _decode_steps(q, k, v, steps)
    assert steps.made_of(out)[:2] == (36, -1)
    assert steps.made_of(out + 1e-12)[:2] == (36, -1)  # the same values to rounding
    other = out.copy()
    other[0, 1, 2] = 7.0  # batch entry 1 (flat), position 2: no step's context
    assert steps.made_of(other)[:2] == (36, 8)
    # Caches made by hand (slices of the inputs), kv_cache_append called on made-up data (position 0 again and again).
    steps = decoded.Steps((q, k, v), {})
    steps_returned = steps.returned
    steps.returned = lambda name, frame, value: steps_returned(
        name, frame, {"k": k[..., :1, :].copy(), "v": v[..., :1, :].copy()} if name == "kv_cache_append" else value)
    out = _decode_steps(q, k, v, steps, make_cache=lambda t: {"k": k[..., :t + 1, :], "v": v[..., :t + 1, :]})
    assert steps.made_of(out)[:2] == (36, 1)  # (position 0's cache is made-up data's too)
    # Whole prefixes appended at once (each step's cache one append of positions 0..t to nothing): not grown.
    steps = decoded.Steps((q, k, v), {})
    steps_called = steps.called

    def whole(name, frame):
        if name == "kv_cache_append":
            frame.f_locals["cache"] = None
        steps_called(name, frame)

    steps.called = whole
    out = _decode_steps(q, k, v, steps)
    assert steps.made_of(out)[:2] == (36, 1)
    # Copies of the student's caches are their caches.
    steps = decoded.Steps((q, k, v), {})
    kept: dict = {}
    steps_returned = steps.returned

    def keeping(name, frame, value):
        if name == "kv_cache_append":
            kept["last"] = value
        steps_returned(name, frame, value)

    steps.returned = keeping
    out = _decode_steps(q, k, v, steps, make_cache=lambda t: {key: kept["last"][key].copy() for key in "kv"})
    assert steps.made_of(out)[:2] == (36, -1)
    # A read-only view of the cache (a mapping, not a dict): the same cache.
    import types as _types

    steps = decoded.Steps((q, k, v), {})
    steps_returned = steps.returned
    steps.returned = keeping
    out = _decode_steps(q, k, v, steps, make_cache=lambda t: _types.MappingProxyType(kept["last"]))
    assert steps.made_of(out)[:2] == (36, -1)
    # A step whose context is not attention over its cache (rows computed elsewhere, handed back).
    steps = decoded.Steps((q, k, v), {})
    out = _decode_steps(q, k, v, steps, context_of=lambda t, context: context + (t == 3))
    assert steps.made_of(out)[1] == 3
    assert decoded.Steps((q, k), {}).made_of(out) is None  # not the three inputs: nothing concluded
    assert steps.made_of(object()) is None


def test_a_cache_kept_in_float32_is_a_question_of_precision_not_a_way_around_the_api():
    # A blind round: kv_cache_append storing the first position in float32 was told causal_decode's rows were none of
    # its steps' (its caches not kv_cache_append's of the inputs); the values' own checks say it is precision.
    import numpy as np

    from tests import decoded

    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)) for _ in range(3))
    steps = decoded.Steps((q, k, v), {})
    out = _decode_steps(q, k, v, steps, append_of=lambda cache: {
        key: array.astype(np.float32).astype(np.float64) for key, array in cache.items()})
    assert steps.made_of(out)[:2] == (30, -1)
    # Caches far from the inputs (not a rounding of them) are still not the inputs'.
    steps = decoded.Steps((q, k, v), {})
    out = _decode_steps(q, k, v, steps, append_of=lambda cache: {key: array * 1.01 for key, array in cache.items()})
    assert steps.made_of(out)[1] != -1


def test_float32_steps_are_compared_at_float32_s_precision():
    import numpy as np

    from tests import decoded

    rng = np.random.default_rng(6)
    q, k, v = (rng.normal(size=(7, 3)).astype(np.float32) for _ in range(3))
    steps = decoded.Steps((q, k, v), {})
    out = _decode_steps(q, k, v, steps)
    nudged = out.copy()
    nudged[3] = np.nextafter(nudged[3], np.float32(np.inf))  # one rounding away (einsum's order, a float64 pass)
    assert steps.made_of(nudged)[:2] == (7, -1)
    nudged[3] += np.float32(1e-2)
    assert steps.made_of(nudged)[:2] == (7, 3)


def test_an_array_overwritten_since_its_append_a_flood_of_copies_and_a_complex_result_are_seen_through():
    # A helper's second round: an appended array resized and overwritten in place with slices of the inputs; one
    # step over the first position's data tiled a million times (past the kept bound, the check concluded nothing);
    # full attention returned as complex numbers (not floats: nothing concluded).
    import numpy as np

    from tests import decoded

    class Frame:
        def __init__(self, code, **local):
            self.f_code, self.f_locals = code.__code__, local

    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, 3, 4)) for _ in range(3))
    steps = decoded.Steps((q, k, v), {})
    append = Frame(lambda cache, k_t, v_t: None, cache=None, k_t=k[:, :1], v_t=v[:, :1])
    steps.called("kv_cache_append", append)
    cache = {"k": k[:, :1].copy(), "v": v[:, :1].copy()}
    steps.returned("kv_cache_append", append, cache)
    for key, value in (("k", k), ("v", v)):  # resized and overwritten since it was returned: two input positions
        cache[key].resize((2, 2, 4), refcheck=False)
        cache[key][...] = value[:, :2]
    step = Frame(lambda q_t, cache: None, q_t=q[:, 1:2], cache=cache)
    steps.called("attend_step", step)
    assert steps.pending[id(step)] is None
    flood = Frame(lambda q_t, cache: None, q_t=np.broadcast_to(q[:, :1], (64, 2, 1, 4)),
                  cache={key: np.broadcast_to(value[:, :1], (64, 2, 1, 4)) for key, value in (("k", k), ("v", v))})
    steps.called("attend_step", flood)
    assert steps.pending[id(flood)] is None  # more entries than the inputs hold
    honest = decoded.Steps((q, k, v), {})
    out = _decode_steps(q, k, v, honest)
    assert honest.made_of(out.astype(complex))[:2] == (6, -1)
    assert honest.made_of(out.astype(complex) + 1.0)[:2] == (6, 0)


def test_a_step_s_context_must_be_attention_in_plain_finite_numbers():
    # A helper's third round: a context holding one NaN was kept (NaN compares false); an ndarray subclass whose
    # subtraction gave zeros was kept with whatever values it held; a dict subclass answered the kit one cache
    # and attend_step another.
    import numpy as np

    from tests import decoded

    class Frame:
        def __init__(self, code, **local):
            self.f_code, self.f_locals = code.__code__, local

    class Lying(np.ndarray):
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return np.zeros(np.broadcast_shapes(*(np.shape(x) for x in inputs)))

    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(size=(3, 2, 4)) for _ in range(3))
    for context in (np.full((3, 1, 4), np.nan), np.ones((3, 1, 4)).view(Lying)):
        steps = decoded.Steps((q, k, v), {})
        append = Frame(lambda cache, k_t, v_t: None, cache=None, k_t=k[:, :1], v_t=v[:, :1])
        steps.called("kv_cache_append", append)
        steps.returned("kv_cache_append", append, {"k": k[:, :1].copy(), "v": v[:, :1].copy()})
        step = Frame(lambda q_t, cache: None, q_t=q[:, :1], cache={"k": k[:, :1].copy(), "v": v[:, :1].copy()})
        steps.called("attend_step", step)
        assert steps.pending[id(step)] is not None  # a true step...
        steps.returned("attend_step", step, (context, None))
        assert steps.kept == [], type(context)  # ...whose context is not attention over its cache


def test_a_call_s_cache_is_its_mapping_of_k_and_v_and_an_empty_one_starts_a_cache():
    # A helper's fourth honest round: attend_step(q_t, scale=None, cache=cache) through a class decorator (the
    # None was taken for the cache), and decoding begun from {} or from {'k': None, 'v': None}.
    import numpy as np

    from tests import decoded

    k, v = np.zeros((1, 2)), np.ones((1, 3))
    cache = {"k": k, "v": v}
    assert decoded._cache([np.ones((1, 2)), None, cache]) is cache
    assert decoded._cache(["append", None, k, v]) is None
    assert decoded._cache([np.ones(2)]) is False

    class Frame:
        def __init__(self, **local):
            self.f_code, self.f_locals = (lambda cache, k_t, v_t: None).__code__, local

    for empty in ({}, {"k": None, "v": None}):
        steps = decoded.Steps((np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 3))), {})
        append = Frame(cache=empty, k_t=k, v_t=v)
        steps.called("kv_cache_append", append)
        assert steps.growing[id(append)][0] == 1


def test_an_append_must_keep_the_cache_it_was_given():
    # A helper's fourth round: a chain of all-zero caches grown by honest appends, each real cache the return of an
    # append given a zero cache (the inputs' prefix, sliced): an append's return must begin with what it was given.
    import numpy as np

    from tests import decoded

    class Frame:
        def __init__(self, **local):
            self.f_code, self.f_locals = (lambda cache, k_t, v_t: None).__code__, local

    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=(2, 3, 4)) for _ in range(3))
    steps = decoded.Steps((q, k, v), {})
    first = Frame(cache=None, k_t=np.zeros((2, 1, 4)), v_t=np.zeros((2, 1, 4)))
    steps.called("kv_cache_append", first)
    zeros = {"k": np.zeros((2, 1, 4)), "v": np.zeros((2, 1, 4))}
    steps.returned("kv_cache_append", first, zeros)
    grown = Frame(cache=zeros, k_t=k[:, 1:2], v_t=v[:, 1:2])
    steps.called("kv_cache_append", grown)
    steps.returned("kv_cache_append", grown, {"k": k[:, :2].copy(), "v": v[:, :2].copy()})  # not zeros, grown
    assert not steps._appended(k[:, :2])
    honest = Frame(cache=zeros, k_t=k[:, 1:2], v_t=v[:, 1:2])
    steps.called("kv_cache_append", honest)
    steps.returned("kv_cache_append", honest, {"k": np.concatenate([zeros["k"], k[:, 1:2]], axis=1),
                                               "v": np.concatenate([zeros["v"], v[:, 1:2]], axis=1)})
    assert steps._appended(np.concatenate([zeros["k"], k[:, 1:2]], axis=1))


def test_a_step_that_looks_up_its_rows_is_found_out_by_calling_it_again():
    # A helper's fourth round: attend_step(q_t, cache, _row=...) returning a precomputed row of full attention (the
    # step's context had the right values). After the call, a kept step is called again with another query.
    import numpy as np

    from tests import decoded

    def honest(q_t, cache, _row=None):
        return decoded._attention(q_t, cache["k"], cache["v"]), None

    def lookup(q_t, cache, _row=None):
        return (_row, None) if _row is not None else honest(q_t, cache)

    class Frame:
        def __init__(self, code, **local):
            self.f_code, self.f_locals = code, local

    rng = np.random.default_rng(10)
    q, k, v = (rng.normal(size=(2, 3, 4)) for _ in range(3))
    full = np.concatenate([decoded._attention(q[:, t:t + 1], k[:, :t + 1], v[:, :t + 1]) for t in range(3)], axis=1)
    for function, expected, looked_up in ((honest, (6, -1), range(3)), (lookup, (6, 0), range(3)),
                                          (lookup, (6, 0), (1,))):  # (a lookup in a middle step only, too)
        steps = decoded.Steps((q, k, v), {})
        steps.functions = {("attend_step", function.__code__): function}
        cache = None
        for t in range(3):
            append = Frame((lambda cache, k_t, v_t: None).__code__, cache=cache, k_t=k[:, t:t + 1], v_t=v[:, t:t + 1])
            steps.called("kv_cache_append", append)
            cache = {"k": k[:, :t + 1].copy(), "v": v[:, :t + 1].copy()}
            steps.returned("kv_cache_append", append, cache)
            row = full[:, t:t + 1] if t in looked_up else None
            step = Frame(function.__code__, q_t=q[:, t:t + 1], cache=cache, _row=row)
            steps.called("attend_step", step)
            steps.returned("attend_step", step, function(q[:, t:t + 1], cache, _row=row))
        assert steps.made_of(full)[:2] == expected, function.__name__


SLOW_STEPS = '''
import time as _time

_attend_step = attend_step


def attend_step(q_t, cache):
    end = _time.process_time() + 0.25  # CPU time of its own, in whichever worker runs it
    while _time.process_time() < end:
        pass
    return _attend_step(q_t, cache)
'''


def test_the_steps_of_a_watched_call_are_charged_to_it(tmp_path):
    # Graded, a watched call's steps are recorded in a second worker of the submission (bounded by what the call
    # has left), then run again by the stand-in in the student's own worker for the call's result: that run is
    # charged, once, so a decode of slow steps pays for them within its call budget as any call does.
    for name, code in {"correct": {}, "slow-steps": {"decoding": SLOW_STEPS}}.items():
        plant(tmp_path / "submissions" / name, code)
    assert grade_batch(tmp_path / "submissions", tmp_path / "out",
                       **(QUIET | {"exercises": ["decoding"], "call_budget": 1.0})) == 0
    rows = read_grades(tmp_path / "out")
    assert float(rows["slow-steps"]["score"]) < float(rows["correct"]["score"]), rows
    feedback = (tmp_path / "out" / "slow-steps" / "feedback.md").read_text(encoding="utf-8")
    assert "causal_decode" in feedback and "CPU" in feedback, feedback[:3000]


def test_a_cache_built_again_at_every_position_is_counted_and_made_up_data_is_not():
    # A hostile round: t + 1 appends from none for position t gave the caches, steps and values of decoding, and
    # kept nothing between steps (30 points against 24.75). The steps count the inputs' prefixes built again; a
    # thread appending zeros beside an honest decoding builds none of the inputs' (an honest variant).
    import numpy as np

    from tests import decoded

    class Frame:
        def __init__(self, code, **local):
            self.f_code, self.f_locals = code, local

    code = (lambda cache, k_t, v_t: None).__code__
    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=(2, 4, 3)) for _ in range(3))

    def again(rebuild: bool, haunted: bool = False) -> int:
        steps, cache = decoded.Steps((q, k, v), {}), None
        for t in range(4):
            if rebuild:
                cache = None
            for s in range(t + 1) if rebuild else (t,):
                append = Frame(code, cache=cache, k_t=k[:, s:s + 1], v_t=v[:, s:s + 1])
                steps.called("kv_cache_append", append)
                cache = {"k": k[:, :s + 1].copy(), "v": v[:, :s + 1].copy()}
                steps.returned("kv_cache_append", append, cache)
            if haunted:  # zeros appended to no cache, twice
                for _ in range(2):
                    zeros = Frame(code, cache=None, k_t=np.zeros((1, 1)), v_t=np.zeros((1, 1)))
                    steps.called("kv_cache_append", zeros)
                    steps.returned("kv_cache_append", zeros, {"k": np.zeros((1, 1)), "v": np.zeros((1, 1))})
        return steps.again

    assert again(False) == 0 and again(False, haunted=True) == 0
    assert again(True) > 0  # position t rebuilds t prefixes already built (one right after its like: a wrapper)
