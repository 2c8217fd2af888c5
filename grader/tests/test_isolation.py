"""The isolated worker: student code runs in a separate, confined process.

Each test builds a tiny submission in tmp_path (a copy of solutions/ with one
planted change) and calls it through grader.sandbox.proxy.IsolatedImplementation.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.sandbox import codec, frames, limits, load
from grader.sandbox.proxy import IsolatedImplementation, Limits, SandboxError, WorkerCrashed
from grader.tests.waiting import HANG_SECONDS, SETTLE_SECONDS
from tests.kit import ImplementationError, LocalImplementation

SOLUTIONS = ROOT / "solutions"
FAST = Limits(call_timeout=2.0)


def make_submission(folder: Path, **changes: str) -> Path:
    """Copy the reference's modules into ``folder``; ``changes`` maps a module to code appended to it.

    Appending ``def softmax(...)`` to softmax.py redefines the function: an easy way to plant a bug.
    A value starting with "=" replaces the whole file instead.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for source in SOLUTIONS.glob("*.py"):
        shutil.copyfile(source, folder / source.name)
    for module, code in changes.items():
        target = folder / f"{module}.py"
        if code.startswith("="):
            target.write_text(code[1:], encoding="utf-8")
        else:
            target.write_text(target.read_text(encoding="utf-8") + "\n\n" + code + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def isolated(tmp_path):
    """Factory: an IsolatedImplementation of a planted submission, closed after the test."""
    opened: list[IsolatedImplementation] = []

    def build(changes: dict[str, str] | None = None, *, path: Path | None = None, **options) -> IsolatedImplementation:
        folder = path or make_submission(tmp_path / f"student{len(opened)}", **(changes or {}))
        implementation = IsolatedImplementation(folder, limits=options.pop("limits", FAST), **options)
        opened.append(implementation)
        return implementation

    yield build
    for implementation in opened:
        implementation.close()


@pytest.fixture(scope="module")
def reference_isolated():
    with IsolatedImplementation(SOLUTIONS, limits=FAST) as implementation:
        yield implementation


@pytest.fixture(scope="module")
def local():
    return LocalImplementation(SOLUTIONS)


def namespaces_or_skip(implementation: IsolatedImplementation) -> None:
    if not implementation.isolation.startswith("namespaces"):
        assert implementation.isolation.startswith("rlimits only"), implementation.isolation
        pytest.skip(f"no kernel namespaces on this machine: {implementation.isolation}")


# ---------------------------------------------------------------- the worker's code stands alone


@pytest.mark.parametrize("name", ["worker.py", *limits.SANDBOX_MODULES])
def test_the_sandbox_code_imports_only_stdlib_numpy_and_itself(name):
    # The sandbox holds worker.py and the modules beside it (limits.SANDBOX_MODULES), nothing else of the kit.
    from grader.sandbox import process

    tree = ast.parse(process.source_of(name).read_text(encoding="utf-8"))
    imported, siblings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 1 and name != "worker.py", f"{name}: {'.' * node.level}{node.module or ''}"
            siblings |= {f"{node.module or alias.name}.py" for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    allowed = set(sys.stdlib_module_names) | {"numpy", "__future__"}
    assert imported <= allowed, imported - allowed
    assert siblings <= set(limits.SANDBOX_MODULES), siblings - set(limits.SANDBOX_MODULES)


def test_the_sandbox_code_is_what_a_worker_and_a_fork_server_are_given():
    from grader.sandbox import process

    plan = limits.Plan("rlimits", None, "rlimits only")
    worker_files, server_files = process.sandbox_files(plan), process.sandbox_files(plan, fork_server=True)
    assert set(server_files) - set(worker_files) >= {"forkserver.py"}
    for name in ["worker.py", *limits.SANDBOX_MODULES]:
        assert server_files[name] == process.source_of(name).read_bytes()


def test_worker_sees_only_the_modules_and_a_scrubbed_environment(isolated, tmp_path):
    probe = (
        "def softmax(x, axis=-1):\n"
        "    import os, sys\n"
        "    return {'cwd': sorted(os.listdir('.')), 'env': sorted(os.environ), 'isolated': sys.flags.isolated,\n"
        "            'no_site': sys.flags.no_site, 'uid': os.getuid()}\n"
    )
    folder = make_submission(tmp_path / "student", softmax=probe)
    (folder / "conftest.py").write_text("raise SystemExit('never copied')\n", encoding="utf-8")
    (folder / "notes.txt").write_text("private\n", encoding="utf-8")
    impl = isolated(path=folder)
    seen = impl.function("softmax", "softmax")(None)
    assert "conftest.py" not in seen["cwd"] and "notes.txt" not in seen["cwd"]
    curriculum = load_curriculum()
    allowed = (*curriculum.names, *curriculum.given_modules, "_checks")
    assert set(seen["cwd"]) <= {f"{name}.py" for name in allowed}
    assert set(seen["env"]) <= {"PATH", "LANG", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                "NUMEXPR_NUM_THREADS", "LC_CTYPE", "PWD", *limits.KERNEL_SELECTORS}
    assert seen["isolated"] == 1 and seen["no_site"] == 1
    if os.geteuid() == 0 and "unprivileged user" in impl.isolation:
        assert seen["uid"] >= limits.UID_BASE  # a user of its own, never root


# ---------------------------------------------------------------- calls and values


def test_round_trip_equals_in_process(reference_isolated, local):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 5, 12))
    params = local.function("multihead", "init_multi_head")(np.random.default_rng(3), 12, 3)
    mask = np.tril(np.ones((5, 5), dtype=bool))
    for exercise, name, args, kwargs in [
        ("softmax", "softmax", (x,), {"axis": 1}),
        ("attention", "scaled_dot_product_attention", (x, x, x[..., :7]), {"mask": mask}),
        ("multihead", "multi_head_attention", (x, params, 3), {"mask": mask}),
        ("masks", "to_additive", (mask,), {"dtype": np.float32}),
        ("positional", "alibi_bias", (4, 2), {}),
    ]:
        remote = reference_isolated.function(exercise, name)(*args, **kwargs)
        expected = local.function(exercise, name)(*args, **kwargs)
        for got, want in zip(remote if isinstance(remote, tuple) else (remote,),
                             expected if isinstance(expected, tuple) else (expected,), strict=True):
            assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_the_worker_computes_with_the_machines_kernels_and_nothing_else_of_its_environment(monkeypatch):
    # A machine whose environment pins OpenBLAS's core type (OPENBLAS_CORETYPE=Haswell on a Zen 4) gave the worker,
    # whose environment is scrubbed, other kernels: its matrix products differed in the last bit from the grading
    # process's and the student's own (test_round_trip_equals_in_process failed there, 22 of 120 values).
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "AVX512F")
    monkeypatch.setenv("GRADER_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    environment = limits.worker_environment()
    assert environment["OPENBLAS_CORETYPE"] == "Haswell" and environment["NPY_DISABLE_CPU_FEATURES"] == "AVX512F"
    assert "GRADER_SECRET_TOKEN" not in environment and "s3cret" not in environment.values()
    assert environment["OPENBLAS_NUM_THREADS"] == "1"  # one thread a worker, whatever the machine says
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert "OPENBLAS_CORETYPE" not in limits.worker_environment()


def test_one_array_in_two_places_crosses_as_one_array_both_ways(isolated, tmp_path):
    # A blind round: init_transformer_layer giving one np.ones to ln1_gamma and ln2_gamma fails the init test in the
    # student's own run ("one array (the same memory)") and got full marks graded: the worker sent the array once per
    # place, so the grading side saw two arrays. Both ways now carry one object as one; other objects stay apart.
    probe = (
        "def softmax(x, axis=-1):\n"
        "    import numpy as np\n"
        "    ones = np.ones(3)\n"
        "    return {'a': ones, 'b': ones, 'c': np.ones(3), 'd': ones[:], 'seen': [x[0] is x[1], x[0] is x[2]]}\n"
    )
    impl = isolated(path=make_submission(tmp_path / "student", softmax=probe))
    x = np.zeros(2)
    result = impl.function("softmax", "softmax")([x, x, x.copy()])
    assert result["a"] is result["b"] and np.shares_memory(result["a"], result["b"])
    assert not np.shares_memory(result["a"], result["c"]) and not np.shares_memory(result["a"], result["d"])
    assert result["seen"] == [True, False]  # an argument given twice is one array in the worker, as in process


def test_generator_state_is_synchronised(reference_isolated, local):
    remote_rng, local_rng = np.random.default_rng(11), np.random.default_rng(11)
    remote = reference_isolated.function("layer", "init_transformer_layer")(remote_rng, 8, 2, 16)
    expected = local.function("layer", "init_transformer_layer")(local_rng, 8, 2, 16)
    np.testing.assert_array_equal(remote["attention"]["w_q"], expected["attention"]["w_q"])
    np.testing.assert_array_equal(remote["w_2"], expected["w_2"])
    # the caller's generator advanced exactly as in-process, so the next draws agree
    assert remote_rng.random() == local_rng.random()


def test_exceptions_come_back_as_the_same_types(isolated):
    impl = isolated({
        "masks": "def causal_mask(n):\n    return {}[n]\n",
        "positional": "class Oops(Exception):\n    pass\n\ndef alibi_bias(n, n_heads):\n    raise Oops('bad')\n",
        "softmax": "def softmax(x, axis=-1):\n    import numpy as np\n    return np.sum(np.asarray(x), axis=axis)\n",
    })
    with pytest.raises(ValueError, match=r"q of shape \(2, 3\) and k of shape \(2, 4\) must share d_k"):
        impl.function("attention", "attention_scores")(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(KeyError):
        impl.function("masks", "causal_mask")(3)
    with pytest.raises(RuntimeError, match="Oops: bad") as info:
        impl.function("positional", "alibi_bias")(3, 2)
    assert "positional.py line" in "".join(getattr(info.value, "__notes__", []))
    # numpy's AxisError is a ValueError and an IndexError: it still is one on this side
    with pytest.raises(ValueError, match="axis") as info:
        impl.function("softmax", "softmax")(np.zeros((2, 3)), axis=5)
    assert isinstance(info.value, IndexError) and type(info.value).__name__ == "AxisError"


def test_stubs_raise_not_implemented(isolated):
    impl = isolated(path=ROOT / "exercises")
    with pytest.raises(NotImplementedError, match="softmax: not implemented yet"):
        impl.function("softmax", "softmax")(np.zeros(3))


def test_in_place_changes_are_copied_back(isolated):
    impl = isolated({
        "softmax": "def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    return x\n",
        "layer": "def feed_forward(x, params, activation='relu'):\n"
                 "    params['w_1'] *= 2.0\n    del params['b_2']\n    return x\n",
    })
    x = np.array([[1.0, 2.0, 4.0]])
    impl.function("softmax", "softmax")(x)
    np.testing.assert_array_equal(x, [[-3.0, -2.0, 0.0]])
    params = {"w_1": np.ones((3, 2)), "b_1": np.zeros(2), "w_2": np.ones((2, 3)), "b_2": np.zeros(3)}
    impl.function("layer", "feed_forward")(x, params)
    np.testing.assert_array_equal(params["w_1"], 2.0 * np.ones((3, 2)))
    assert "b_2" not in params


def test_kit_reports_mutation_as_in_process(isolated):
    from tests.kit import Kit

    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    return x\n"})
    failures = []

    class Recorder:
        def fail(self, message):
            failures.append(message)

    import tests.failures as failures_module  # (where every failed check is reported)

    original, failures_module.check = failures_module.check, Recorder()
    try:
        Kit(impl, "softmax").softmax(np.array([[1.0, 2.0]]))
    finally:
        failures_module.check = original
    assert failures and "softmax() changed its input x in place" in failures[0]


def test_a_change_in_place_is_reported_then_undone_so_no_later_test_or_student_sees_it(isolated, monkeypatch):
    # A grading process keeps the tests' data for its next students (a cached corpus's merges): a submission that
    # zeroed it in place lowered a correct classmate's grade. The Kit reports the change, then undoes it.
    import tests.failures as failures_module
    from tests.kit import Kit

    impl = isolated({
        "softmax": "def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    return x + 0.0\n",
        "layer": "def feed_forward(x, params, activation='relu'):\n"
                 "    params['w_1'] *= 2.0\n    del params['b_2']\n    params['extra'] = 1\n    return x\n",
    })
    failures = []
    monkeypatch.setattr(failures_module, "check", type("Recorder", (), {"fail": lambda self, m: failures.append(m)})())
    shared = np.array([[1.0, 2.0, 4.0]])
    out = Kit(impl, "softmax").softmax(shared)
    np.testing.assert_array_equal(out, [[-3.0, -2.0, 0.0]])  # the student's result, as returned
    np.testing.assert_array_equal(shared, [[1.0, 2.0, 4.0]])  # the test's data, as it was
    params = {"w_1": np.ones((3, 2)), "b_1": np.zeros(2), "w_2": np.ones((2, 3)), "b_2": np.zeros(3)}
    b_2 = params["b_2"]
    Kit(impl, "layer").feed_forward(shared, params)
    assert sorted(params) == ["b_1", "b_2", "w_1", "w_2"] and params["b_2"] is b_2
    np.testing.assert_array_equal(params["w_1"], np.ones((3, 2)))
    assert len(failures) == 2 and "changed its input" in failures[0] and "keys added: 'extra'" in failures[1]


def test_a_result_that_is_the_changed_argument_survives_the_undo(monkeypatch):
    # In a student's own run the result may be the very array the call changed (x -= m; return x).
    import tests.failures as failures_module
    import tests.kit as kit_module
    from tests.kit import Kit

    class Local:
        def function(self, exercise, name):
            def softmax(x, axis=-1):
                x -= x.max(axis=axis, keepdims=True)
                return x
            return softmax

    monkeypatch.setattr(failures_module, "check", type("Recorder", (), {"fail": lambda self, m: None})())
    monkeypatch.setattr(kit_module, "recorded_function", lambda implementation, exercise, name:
                        implementation.function(exercise, name))
    x = np.array([[1.0, 2.0, 4.0]])
    out = Kit(Local(), "softmax").softmax(x)
    np.testing.assert_array_equal(out, [[-3.0, -2.0, 0.0]])
    np.testing.assert_array_equal(x, [[1.0, 2.0, 4.0]])

    class Popping:  # a list the call shortens (a task's vocabulary, a list of texts) is given back whole
        def function(self, exercise, name):
            def softmax(x, axis=-1):
                x["vocab"].pop()
                x["vocab"][0] = "changed"
                return 0.0
            return softmax

    task = {"vocab": ["the", "vessel", "it"]}
    Kit(Popping(), "softmax").softmax(task)
    assert task == {"vocab": ["the", "vessel", "it"]}


def test_results_are_plain_ndarrays(isolated):
    impl = isolated({"softmax": (
        "import numpy as _np\n"
        "class Liar(_np.ndarray):\n"
        "    def __eq__(self, other):\n        return True\n"
        "def softmax(x, axis=-1):\n    return _np.zeros(3).view(Liar)\n")})
    out = impl.function("softmax", "softmax")(np.ones(3))
    assert type(out) is np.ndarray
    assert not np.array_equal(out, np.ones(3))


def test_unsendable_values_are_refused(isolated):
    impl = isolated({"masks": "def causal_mask(n):\n    return lambda: n\n"})
    with pytest.raises(TypeError, match="cannot receive"):
        impl.function("masks", "causal_mask")(3)
    with pytest.raises(TypeError, match="dtype object"):
        impl.function("softmax", "softmax")(np.array([object()]))


def test_monkey_patching_in_the_worker_stays_there(isolated):
    impl = isolated({"softmax": (
        "import builtins, numpy\n"
        "numpy.testing.assert_allclose = lambda *a, **k: None\n"
        "numpy.array_equal = lambda *a, **k: True\n"
        "builtins.len = lambda obj: 0\n"
        "def softmax(x, axis=-1):\n    return numpy.zeros(2)\n")})
    impl.function("softmax", "softmax")(np.ones(2))
    assert not np.array_equal(np.zeros(2), np.ones(2))
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(np.zeros(2), np.ones(2))
    assert len([1, 2]) == 2


# ---------------------------------------------------------------- the channel's frames


def _frame(descriptions: list, body: bytes, header: dict | None = None) -> bytes:
    """A hand-made frame: what a worker whose channel the student's code wrote to might send."""
    head = json.dumps({"h": header or {"status": "ok"}, "a": descriptions}).encode()
    return frames.PREFIX.pack(frames.MAGIC, len(head), len(body)) + head + body


def test_frames_carry_raw_arrays_of_every_allowed_kind():
    arrays = [np.arange(6.0).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(2, 3).T,  # Fortran order
              np.array([True, False]), np.array(2.5 + 1j, dtype=np.complex64), np.zeros((0, 4)),
              np.arange(3, dtype=">f8"), np.arange(12, dtype=np.uint8)[::3], np.float16([1, 2]),
              np.ones((1,) * 33), np.zeros((1,) * 64)]  # numpy 2's arrays have up to 64 axes: each one crosses
    (header, received), size = frames.unpack(frames.pack({"op": "x"}, arrays))
    assert header == {"op": "x"} and size == len(frames.pack({"op": "x"}, arrays))
    for got, sent in zip(received, arrays, strict=True):
        assert type(got) is np.ndarray and got.dtype == sent.dtype and got.shape == sent.shape
        np.testing.assert_array_equal(got, sent)
        assert got.flags.writeable and got.flags.owndata  # fresh, as an array made in-process
    assert received[1].flags.f_contiguous  # the layout survives, as with np.save
    assert frames.unpack(frames.pack({}, arrays)[:-1]) is None  # incomplete: wait for the rest


@pytest.mark.parametrize("dtype", ["|O8", "<U3", "|S4", "|V8", "<M8[s]", "<m8[D]", "float64", "", 7, None])
def test_frames_with_refused_dtypes_are_rejected(dtype):
    with pytest.raises(ValueError, match="refused"):
        frames.unpack(_frame([[dtype, [1], "C", 8]], bytes(8)))


@pytest.mark.parametrize("description, body, message", [
    (["<f8", [2, 3], "C", 40], bytes(40), "size mismatch"),  # 2 x 3 float64 is 48 bytes, not 40
    (["<f8", [2, 3], "C", 48], bytes(40), "size mismatch"),  # the body is shorter than the array
    (["<f8", [5], "C", 40], bytes(48), "size mismatch"),  # bytes that belong to no array
    (["<f8", [-1], "C", -8], b"", "shape"),
    (["<f8", [True], "C", 8], bytes(8), "shape"),
    (["<f8", [2.0], "C", 16], bytes(16), "shape"),
    (["<f8", [1] * 65, "C", 8], bytes(8), "shape"),  # more axes than numpy has
    (["<f8", [1], "X", 8], bytes(8), "order"),
    (["<f8", [1], "C"], bytes(8), "description"),
])
def test_frames_whose_sizes_do_not_add_up_are_rejected(description, body, message):
    with pytest.raises(ValueError, match=message):
        frames.unpack(_frame([description], body))


def test_bytes_cross_as_bytes():
    # Exercise 15's pieces of text are bytes (a UTF-8 character may be split between two tokens).
    for value in (b"", b"ab\x00\xff", [b"na", "\u00ef".encode()[:1], b"ve"], (b"x", 1)):
        arrays: list = []
        back = codec.decode(codec.encode(value, arrays), arrays)
        assert back == value and type(back) is type(value)
    with pytest.raises(ValueError, match="malformed"):
        codec.decode({"$": "bytes", "v": 7}, [])


def test_refused_values_are_not_sent():
    for value in (np.array([object()]), np.array(["text"]), np.zeros(2, dtype=[("a", "f8")]),
                  np.array(["2024-01-01"], dtype="datetime64[D]"), {1, 2}, object()):
        with pytest.raises(codec.Unsendable):
            codec.encode(value, [])
    with pytest.raises(ValueError, match="not allowed"):
        codec.decode({"$": "dtype", "v": "|O8"}, [])
    with pytest.raises(ValueError, match="no array"):
        codec.decode({"$": "array", "i": -1}, [np.zeros(1)])


def test_a_reply_sends_back_only_the_arguments_the_call_changed():
    rng = np.random.default_rng(0)
    x, y = np.ones((2, 3)), np.zeros(4)
    params = {"w": np.eye(3), "b": np.zeros(3), "n": 3}
    arrays: list = []
    sent = codec.encode([[x, y, rng], {"params": params}], arrays)
    (_, received), _ = frames.unpack(frames.pack({"payload": sent}, arrays))
    args, kwargs = codec.decode(sent, received)
    reply: list = []
    assert codec.result_payload(args[0] * 2, [args, kwargs], sent, received, reply) [1] is None
    assert len(reply) == 1  # the result only: no argument changed
    kwargs["params"]["w"][0, 0] = 5.0  # one array changed in place, the generator advanced
    args[2].random()
    reply = []
    payload = codec.result_payload(None, [args, kwargs], sent, received, reply)
    assert len(reply) == 1 and reply[0][0, 0] == 5.0  # only the changed array travels back
    codec.receive_result(payload, reply, (x, y, rng), {"params": params})
    assert params["w"][0, 0] == 5.0 and params["b"].tolist() == [0.0] * 3
    assert rng.random() == np.random.default_rng(0).random(2)[1]
    del kwargs["params"]["b"]  # a removed key and a swapped-in array are changes too
    kwargs["params"]["w"] = received[0]
    reply = []
    codec.receive_result(codec.result_payload(None, [args, kwargs], sent, received, reply), reply,
                          (x, y, rng), {"params": params})
    assert sorted(params) == ["n", "w"] and params["w"].shape == (2, 3)


def test_a_malformed_reply_is_a_crash_not_a_result(isolated):
    forged = _frame([["|O8", [1], "C", 8]], bytes(8), {"status": "ok", "payload": [{"$": "array", "i": 0}, None]})
    write = f"    os.write(int(sys.argv[sys.argv.index('--replies') + 1]), {forged!r})\n"
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    import os, sys\n" + write + "    return x\n"})
    with pytest.raises(WorkerCrashed, match="malformed message.*refused"):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)  # a fresh worker


# A student's attention that asks the reference for softmax over the worker's channel, as the worker asks for a
# function of an exercise the kit has no given implementation of (an instructor's own).
ASKS_FOR_SOFTMAX = (
    "import sys as _sys\n"
    "_M = _sys.modules['__main__']\n"
    "_fd = lambda name: int(_sys.argv[_sys.argv.index(name) + 1])\n"
    "_ask = _M.Worker(_M.Channel(_fd('--requests'), _fd('--replies')), '/').forwarder('softmax', 'softmax')\n"
    "\n"
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    return _ask(q), _ask(k)\n")


def test_callbacks_answered_before_are_answered_again_from_memory(isolated, local):
    from grader.sandbox import proxy

    q = np.random.default_rng(9).normal(size=(3, 4))
    attention = isolated({"attention": ASKS_FOR_SOFTMAX}).function("attention", "scaled_dot_product_attention")
    proxy._ANSWERS.clear()
    first = attention(q, q + 1, q)
    remembered = len(proxy._ANSWERS)
    assert remembered == 2
    second = isolated({"attention": ASKS_FOR_SOFTMAX}).function(  # another student
        "attention", "scaled_dot_product_attention")(q, q + 1, q)
    assert len(proxy._ANSWERS) == remembered
    softmax = local.function("softmax", "softmax")
    for got in (first, second):
        np.testing.assert_array_equal(got[0], softmax(q))
        np.testing.assert_array_equal(got[1], softmax(q + 1))


# ---------------------------------------------------------------- broken modules


def test_missing_module_and_syntax_error(isolated, tmp_path):
    folder = make_submission(tmp_path / "student", multihead="=import numpy\n\ndef split_heads(x, n_heads)\n    pass\n")
    (folder / "positional.py").unlink()
    impl = isolated(path=folder)
    with pytest.raises(ImplementationError, match="missing module positional: positional.py not found"):
        impl.function("positional", "alibi_bias")
    with pytest.raises(ImplementationError, match="syntax error in multihead.py line 3"):
        impl.function("multihead", "split_heads")
    # the rest of the submission still works
    assert impl.function("softmax", "softmax")(np.zeros(2)).tolist() == [0.5, 0.5]


def test_exit_at_import(isolated):
    impl = isolated({"masks": "=import sys\nsys.exit(3)\n", "positional": "=import os\nos._exit(3)\n"})
    with pytest.raises(ImplementationError, match=r"importing masks.py raised SystemExit: 3"):
        impl.function("masks", "causal_mask")
    with pytest.raises(ImplementationError, match=r"importing positional.py ended the worker process \(exit code 3\)"):
        impl.function("positional", "alibi_bias")
    with pytest.raises(ImplementationError):  # remembered, not retried
        impl.function("positional", "alibi_bias")
    assert impl.function("softmax", "softmax")(np.zeros(2)).tolist() == [0.5, 0.5]


def test_exit_during_a_call(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    import os\n    os._exit(3)\n",
                     "masks": "def causal_mask(n):\n    import sys\n    sys.exit(4)\n"})
    ended = r"your code ended the worker process \(exit code 3\) while running softmax"
    with pytest.raises(WorkerCrashed, match=ended):
        impl.function("softmax", "softmax")(np.zeros(2))
    with pytest.raises(WorkerCrashed, match=r"sys.exit\(4\) while running causal_mask"):
        impl.function("masks", "causal_mask")(3)
    assert impl.function("positional", "alibi_bias")(3, 2).shape == (2, 3, 3)  # a fresh worker
    assert impl.restarts == 1
    # Both are crashes in the row's status (a sys.exit in every call had left it "ok"), though sys.exit's worker lives.
    assert impl.stats["crashed"] == 2, impl.stats


# ---------------------------------------------------------------- limits


class _Busy:
    """A stand-in for ``load.LoadClock``: the machine made every call wait ``seconds`` for a CPU."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def start(self) -> None:
        pass

    def waited(self) -> float:
        return self.seconds

    def lowered(self) -> bool:
        return False  # the worker kept its priority: the waits are the machine's

    def close(self) -> None:
        pass


def test_a_calls_waits_for_a_cpu_are_not_charged(isolated, monkeypatch):
    slow = ("import time\nimport numpy as np\n"
            "def softmax(x, axis=-1):\n    time.sleep(0.8)\n    return np.asarray(x, float)\n")
    impl = isolated({"softmax": slow}, limits=Limits(call_timeout=0.5))
    monkeypatch.setattr(load, "LoadClock", lambda pid: _Busy(0.6))  # 0.6 s of the call were the load's
    assert impl.function("softmax", "softmax")(np.zeros(2)).shape == (2,)  # 0.8 s of wall time, little CPU
    assert impl.stats["timed_out"] == 0
    assert impl.spent < 0.4  # its 0.8 s less the 0.6 s it waited for a CPU
    assert impl.forgiven > 0.4  # the wall time not charged


def test_a_call_within_its_time_keeps_its_priority(isolated):
    slow = ("import time\nimport numpy as np\n"
            "def softmax(x, axis=-1):\n    time.sleep(0.3)\n    return np.asarray(x, float)\n")
    impl = isolated({"softmax": slow}, limits=Limits(call_timeout=2.0))
    impl.function("softmax", "softmax")(np.zeros(2))
    # The grader's own priority (the worker inherits it: a grader run under `nice` has niceness above 0).
    assert os.getpriority(os.PRIO_PROCESS, impl._worker.worker_pid) == os.getpriority(os.PRIO_PROCESS, 0)


def test_a_sleeping_call_times_out_as_the_students(isolated):
    impl = isolated({"softmax": "import time\ndef softmax(x, axis=-1):\n    time.sleep(30)\n"},
                    limits=Limits(call_timeout=0.5))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 0.5 s: an infinite loop\?"):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert time.monotonic() - started < 25  # it slept, it did not wait for a CPU: not run again
    assert impl.stats["timed_out"] == 1 and "machine_busy" not in impl.stats
    assert impl.internal == []
    assert impl.spent >= 0.5  # a sleep uses up the submission's budget as a loop does


def test_a_call_the_machine_starves_is_run_again_then_not_graded(isolated, monkeypatch):
    from grader.sandbox import budget
    from grader.sandbox.proxy import MachineBusy

    impl = isolated({"softmax": "import time\ndef softmax(x, axis=-1):\n    time.sleep(30)\n"},
                    limits=Limits(call_timeout=0.5))
    impl.function("masks", "causal_mask")(2)  # the worker is up
    # As if the worker had waited for a CPU all along (a machine hopelessly overloaded): no CPU time, no sleep.
    monkeypatch.setattr(load, "LoadClock", lambda pid: _Busy(100.0))
    monkeypatch.setattr(budget, "WALL_FACTOR", 0.0)
    monkeypatch.setattr(budget, "WALL_SLACK", 0.3)
    impl._budget.attach(impl._worker.worker_pid, impl._worker.uid)
    spent = impl.spent
    with pytest.raises(MachineBusy, match=r"the machine was too busy \(rerun\): softmax\(\)"):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert impl.stats["machine_busy"] == budget.MACHINE_RETRIES + 1  # the first run and each retry
    assert impl.stats["timed_out"] == 0  # never the student's timeout
    assert impl.internal and impl.internal[-1].startswith(MachineBusy.PREFIX)  # so the tests it hit are not graded
    assert impl.spent == pytest.approx(spent, abs=0.05)  # nor charged to the submission's budget
    assert issubclass(MachineBusy, SandboxError)


def test_a_worker_restarted_after_a_timeout_runs_at_the_graders_priority(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    while True:\n        pass\n"},
                    limits=Limits(call_timeout=0.5))
    with pytest.raises(TimeoutError):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert impl.spent >= 0.5  # the loop's CPU time
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)  # a fresh worker
    # A budget in CPU time needs no lower priority: a lower one would only stretch a loop's wall time.
    assert os.getpriority(os.PRIO_PROCESS, impl._worker.worker_pid) == os.getpriority(os.PRIO_PROCESS, 0)


def test_the_load_clock_reads_this_machines_cpu_waits():
    if not Path("/proc/thread-self/schedstat").is_file():
        pytest.skip("this system does not report CPU waits (/proc/<pid>/schedstat)")
    clock = load.LoadClock(os.getpid())
    try:
        first = clock.total()
        assert first is not None and first >= 0
        sum(range(2_000_000))
        assert clock.total() >= first and clock.waited() >= 0
    finally:
        clock.close()
    chain = subprocess.Popen(["sh", "-c", "sleep 30; true"])  # sh, then its child sleep
    try:
        deadline = time.monotonic() + SETTLE_SECONDS  # polled: ends once it holds

        def started() -> bool:  # sh has forked its child, and the child has become sleep (not sh's copy yet)
            end = load.innermost_child(chain.pid)
            return end != chain.pid and Path(f"/proc/{end}/cmdline").read_bytes().startswith(b"sleep")

        while not started() and time.monotonic() < deadline:
            time.sleep(0.01)
        end = load.innermost_child(chain.pid)
        assert end != chain.pid and Path(f"/proc/{end}/cmdline").read_bytes().startswith(b"sleep")
        assert load.innermost_child(end) == end  # a process without children is its own end
    finally:
        chain.kill()
        chain.wait()


def test_infinite_loop_times_out_and_the_next_call_works(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    while True:\n        pass\n"},
                    limits=Limits(call_timeout=0.5))
    with pytest.raises(TimeoutError, match=r"softmax\(\) did not finish within 0.5 s: an infinite loop\?"):
        impl.function("softmax", "softmax")(np.zeros(2))
    # Stopped by its CPU budget, not by a wall-clock fallback: charged about the budget (the wall time is the
    # machine's: on a busy one, 0.5 CPU-s take several seconds).
    assert 0.5 <= impl.spent < 2.0, impl.spent
    assert impl.function("masks", "causal_mask")(2).tolist() == [[True, False], [True, True]]


def test_memory_bomb_fails_cleanly(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    import numpy\n    return numpy.ones(2**34)\n",
                     "masks": "def causal_mask(n):\n    blocks = []\n    while True:\n"
                              "        blocks.append(bytearray(50_000_000))\n"},
                    limits=Limits(memory_bytes=512 << 20, call_timeout=5.0))
    with pytest.raises((MemoryError, WorkerCrashed)):
        impl.function("softmax", "softmax")(np.zeros(2))
    with pytest.raises((MemoryError, WorkerCrashed)):
        impl.function("masks", "causal_mask")(2)
    assert impl.function("positional", "alibi_bias")(3, 2).shape == (2, 3, 3)


def test_fork_bomb_is_contained(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    import os\n    while True:\n"
                                "        try:\n            os.fork()\n        except OSError:\n            pass\n"},
                    limits=Limits(call_timeout=1.0, processes=16))
    if "unprivileged user" not in impl.isolation and "namespaces" not in impl.isolation and os.geteuid() == 0:
        pytest.skip(f"a fork bomb as root is only limited by an unprivileged user or a PID namespace: {impl.isolation}")
    softmax = impl.function("softmax", "softmax")  # the worker is up: note its PID namespace (or session)
    worker_pid = impl._worker.process.pid
    uid = impl._worker.uid if impl.plan.drop_to is not None else None  # and its user, where it has one of its own
    children = [pid for pid in _pids() if _parent(pid) == worker_pid]
    own = _pid_namespace(os.getpid())
    namespace = next((_pid_namespace(pid) for pid in children if _pid_namespace(pid) != own), None)
    with pytest.raises((TimeoutError, OSError, WorkerCrashed)):
        softmax(np.zeros(2))
    # Every process of the bomb is gone with the worker: the whole PID namespace (or session) was killed. On a busy
    # machine the killed ones may take a moment to be reaped: a zombie is dead, and the check is repeated a while.
    def left_behind() -> list[int]:
        return [pid for pid in _pids() if ((namespace and _pid_namespace(pid) == namespace and not impl.plan.forks)
                                           or _session(pid) == worker_pid) and not _dead(pid)] \
            + (_processes_of(uid) if uid is not None else [])

    left = left_behind()
    deadline = time.monotonic() + SETTLE_SECONDS  # polled: ends once it holds
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = left_behind()
    assert not left, f"processes left behind: {[(pid, _cmdline(pid)) for pid in left]}"
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _dead(pid: int) -> bool:
    """Whether ``pid`` has ended (gone, or a zombie not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _session(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


# ---------------------------------------------------------------- the sandbox's file system


def test_student_cannot_read_the_kit_or_other_submissions(isolated, tmp_path):
    other = make_submission(tmp_path / "other_student")
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    import os\n"
                                "    if os.path.isdir(x):\n        return sorted(os.listdir(x))\n"
                                "    return open(x).read()\n",
                     "masks": "def causal_mask(n):\n    import socket\n"
                              "    socket.create_connection(('1.1.1.1', 80), timeout=1)\n"})
    namespaces_or_skip(impl)
    read = impl.function("softmax", "softmax")
    for target in (SOLUTIONS / "softmax.py", ROOT, ROOT / "tests" / "kit.py", other / "softmax.py", other,
                   impl.path / "softmax.py", "../solutions/softmax.py", "/etc/passwd"):
        with pytest.raises(OSError):
            read(str(target))
    # /tmp may exist inside the sandbox as the empty parent of a bound virtual environment (as in CI),
    # but it must show nothing of the kit, the test run or other students.
    try:
        listing = read("/tmp")
    except OSError:
        listing = []
    assert not {ROOT.name, tmp_path.parts[2], other.name} & set(listing), listing
    with pytest.raises(OSError):
        impl.function("masks", "causal_mask")(2)
    # Process 1 of the sandbox is bubblewrap: its command line must not list the binds and the hidden folders
    # (where the kit, the reference and the hidden tests are on the grading machine).
    command_line = read("/proc/1/cmdline")
    assert "--args" in command_line or "bwrap" not in command_line, command_line
    assert str(ROOT) not in command_line and "--ro-bind" not in command_line and "--tmpfs" not in command_line


# ---------------------------------------------------------------- fair grading


def test_fair_grading_serves_dependencies_from_the_reference(isolated, local):
    buggy = {"softmax": "def softmax(x, axis=-1):\n    return x\n"}  # no normalisation at all
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    expected = local.function("attention", "scaled_dot_product_attention")(q, k, v)
    fair = isolated(buggy)
    context, weights = fair.function("attention", "scaled_dot_product_attention")(q, k, v)
    np.testing.assert_allclose(weights, expected[1])
    np.testing.assert_allclose(context, expected[0])
    # the student's own softmax is still graded as theirs
    assert fair.function("softmax", "softmax")(np.ones(2)).tolist() == [1.0, 1.0]
    unfair = isolated(buggy, fair=False)
    _, weights = unfair.function("attention", "scaled_dot_product_attention")(q, k, v)
    assert not np.allclose(weights, expected[1])


def test_fair_grading_with_generators_and_nested_dependencies(isolated, local):
    mine = "    raise ValueError('mine')\n"
    impl = isolated({"attention": "def scaled_dot_product_attention(q, k, v, mask=None):\n" + mine,
                     "projections": "def init_weight(rng, d_in, d_out):\n" + mine})
    remote_rng, local_rng = np.random.default_rng(2), np.random.default_rng(2)
    params = impl.function("layer", "init_transformer_layer")(remote_rng, 8, 2, 12)
    expected = local.function("layer", "init_transformer_layer")(local_rng, 8, 2, 12)
    np.testing.assert_array_equal(params["w_1"], expected["w_1"])
    assert remote_rng.random() == local_rng.random()
    x = np.random.default_rng(4).normal(size=(3, 8))
    np.testing.assert_allclose(impl.function("layer", "transformer_layer")(x, params, 2),
                               local.function("layer", "transformer_layer")(x, expected, 2))


# ---------------------------------------------------------------- end to end and speed


def test_graded_suite_passes_through_the_isolated_worker():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "--impl", "solutions", "-q", "-p", "grader.sandbox.plugin",
         "--isolated", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_benchmark_reports_start_up_and_round_trip():
    result = subprocess.run([sys.executable, "benchmarks/worker_overhead.py", "--calls", "20", "--starts", "2"],
                            cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert result.returncode == 0, result.stderr
    assert "start-up" in result.stdout and "round trip" in result.stdout


def test_warnings_from_student_code_reach_the_grading_side(isolated):
    # The graded softmax test "no RuntimeWarning for an all -inf row" must see the student's warning.
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    e = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
                                "    return e / e.sum(axis=axis, keepdims=True)\n"})
    softmax = impl.function("softmax", "softmax")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = softmax(np.array([[-np.inf, -np.inf]]))
    assert np.isnan(out).all()
    assert any(issubclass(w.category, RuntimeWarning) and "invalid value" in str(w.message) for w in caught), [
        str(w.message) for w in caught]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        softmax(np.array([[0.0, 1.0]]))
    assert not caught, [str(w.message) for w in caught]


def test_a_function_that_keeps_looping_is_not_run_again_and_again(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    while True:\n        pass\n"},
                    limits=Limits(call_timeout=0.3, function_timeouts=2, total_timeouts=6))
    softmax = impl.function("softmax", "softmax")
    for _ in range(2):
        with pytest.raises(TimeoutError, match="did not finish"):
            softmax(np.zeros(2))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"softmax\(\) was not run: your code already ran out of time 2 times"):
        softmax(np.zeros(2))
    assert time.monotonic() - started < 0.2
    assert impl.function("masks", "causal_mask")(2).tolist() == [[True, False], [True, True]]


def test_a_tests_function_argument_runs_on_the_grading_side(reference_isolated, local):
    # occlusion_importance(predict, ...): the test's model stays here; the worker calls it back with plain data.
    calls = []

    def predict(tokens):
        calls.append(np.asarray(tokens).shape)
        scores = np.stack([np.sum(tokens == 2, axis=1), np.sum(tokens == 3, axis=1)], axis=1).astype(float)
        e = np.exp(scores)
        return e / e.sum(axis=1, keepdims=True)

    tokens = np.array([1, 2, 2, 3, 0])
    expected = local.function("explain", "occlusion_importance")(predict, tokens, 0)
    calls.clear()
    observed = reference_isolated.function("explain", "occlusion_importance")(predict, tokens, 0)
    np.testing.assert_array_equal(observed, expected)
    assert calls == [(6, 5)]  # called from the worker, run here
    assert reference_isolated._callbacks.grading_functions == []  # reachable during its call only


def test_a_returned_function_is_still_refused(isolated):
    impl = isolated({"explain": "def gradient_x_input(grad_inputs, inputs):\n    return lambda: 0\n"})
    with pytest.raises(TypeError, match="cannot receive"):
        impl.function("explain", "gradient_x_input")(np.ones((2, 3)), np.ones((2, 3)))


def test_peak_memory_is_measured_outside_the_worker(reference_isolated):
    from grader.sandbox import cgroup
    from grader.sandbox.errors import SandboxError
    from tests.kit import Kit

    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(128, 2)), rng.normal(size=(16384, 2)), rng.normal(size=(16384, 2))
    if cgroup.available().memory is None:  # nothing can measure it where the student's code cannot reach
        with pytest.raises(SandboxError, match="not measured"):
            reference_isolated.measure("decoding", "blockwise_attention", q, k, v, 32)
        return
    out, blockwise = Kit(reference_isolated, "decoding").measure("blockwise_attention", q, k, v, 32)
    assert out.shape == (128, 2) and blockwise is not None
    _, full = Kit(reference_isolated, "attention").measure("scaled_dot_product_attention", q, k, v)
    # The worker's pages (its (128, 16384) weights: 16 MiB), not the grading process's; the blockwise call's are
    # its blocks, the import of its module (a fresh worker's) and the call's messages.
    assert full >= 128 * 16384 * 8 > 3 * blockwise


def test_plain_functions_cross_to_the_worker(reference_isolated, local):
    # numerical_gradient(f, x) takes a function: the tests pass a PlainFunction, which crosses as its kind
    # and coefficients (plain data) and is rebuilt from grader/sandbox/worker.py's own formula.
    from tests.kit import PlainFunction

    rng = np.random.default_rng(11)
    f = PlainFunction("cubic", **{name: rng.normal(size=(3, 4)) for name in "abcd"})
    x = rng.normal(size=(3, 4))
    remote = reference_isolated.function("backward", "numerical_gradient")(f, x, eps=1e-4)
    np.testing.assert_array_equal(remote, local.function("backward", "numerical_gradient")(f, x, eps=1e-4))
    # Any other function of a test is not sent either: the worker calls it back in the grading process
    # (see test_a_tests_function_argument_runs_on_the_grading_side), slower but with the same result.
    total = reference_isolated.function("backward", "numerical_gradient")(lambda z: float(np.sum(z)), x[:1, :2])
    np.testing.assert_allclose(total, np.ones((1, 2)), rtol=1e-6)


def test_plain_function_formulas_agree_on_both_sides():
    from tests.kit import PlainFunction

    assert set(codec.PLAIN_FUNCTIONS) == set(PlainFunction.FORMULAS)
    rng = np.random.default_rng(12)
    for kind in codec.PLAIN_FUNCTIONS:
        params = {name: rng.normal(size=(2, 3)) for name in "abcd"}
        x = rng.normal(size=(2, 3))
        arrays: list = []
        rebuilt = codec.decode(codec.encode(PlainFunction(kind, **params), arrays), arrays)
        assert isinstance(rebuilt, codec.PlainFunction)
        assert rebuilt(x) == PlainFunction(kind, **params)(x)
    with pytest.raises(ValueError, match="unknown plain function"):
        codec.decode({"$": "function", "kind": "os.system", "v": {"$": "dict", "k": [], "v": []}}, [])


# ---------------------------------------------------------------- the codec's fast paths agree with the general ones


def test_lists_travel_as_json_arrays_and_the_tagged_form_is_still_read():
    arrays: list = []
    assert codec.encode([1, [2.5, None], (3,)], arrays) == [1, [2.5, None], {"$": "tuple", "v": [3]}]
    assert codec.decode({"$": "list", "v": [1, {"$": "list", "v": ["a"]}]}, []) == [1, ["a"]]
    with pytest.raises(ValueError, match="malformed"):
        codec.decode({"$": "set", "v": [1]}, [])


def _change(after: list, change: str) -> None:
    """What a call may do to its arguments ``[args, kwargs]`` (see the test below)."""
    args, kwargs = after
    if change == "array":
        args[0][0, 0] = 9.0
    elif change == "swap":
        args[1][0] = np.ones(4)
    elif change == "append":
        args[1].append(1)
    elif change == "key":
        kwargs["k"]["b"] = 2
    elif change == "value":
        kwargs["k"]["a"] = 2
    elif change == "tuple":
        args[2] = (1.5, "t")
    elif change == "rng":
        kwargs["g"].random()


def test_nothing_changed_is_decided_as_the_full_comparison_decides_it():
    # The quick check may only say "unchanged" where encode_after says so too, whatever the call did.
    cases = []
    for change in ("none", "array", "swap", "append", "key", "value", "nan", "tuple", "rng"):
        x, y = np.arange(6.0).reshape(2, 3), np.zeros(4, dtype=np.float32)
        args = [x, [y, 3], (1.5, "s"), float("nan") if change == "nan" else 2.0]
        kwargs = {"k": {"a": 1}, **({"g": np.random.default_rng(5)} if change == "rng" else {})}
        arrays: list = []
        sent = codec.encode([args, kwargs], arrays)
        (_, received), _ = frames.unpack(frames.pack({"payload": sent}, arrays))
        after = codec.decode(sent, received)
        _change(after, change)
        quick = codec._as_received(after, sent, received)
        _, changed = codec.encode_after(after, sent, received, [])
        cases.append((change, quick, changed))
        assert not (quick and changed), change
    # Plain arguments left alone take the quick way; a generator is always left to the full comparison.
    assert ("none", True, False) in cases and ("array", False, True) in cases and ("rng", False, True) in cases


def test_large_frames_cross_both_ways_and_in_place_changes_come_back(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    x[0, 0] = -1.0\n    return x * 2\n"})
    x = np.random.default_rng(3).normal(size=(700, 600))  # 3.4 MB: many pipe-fulls, a frame read into its own buffer
    expected = x.copy()
    expected[0, 0] = -1.0
    result = impl.function("softmax", "softmax")(x)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(result, expected * 2)


# ---------------------------------------------------------------- the fork server (bwrap as root)


def _forks_or_skip(implementation: IsolatedImplementation) -> None:
    if not implementation.plan.forks:
        pytest.skip(f"workers are started one by one here, not forked: {implementation.isolation}")


def _processes_of(uid: int) -> list[int]:
    """Processes of ``uid`` with at least one thread that is not a zombie (a zombie leader can hide threads)."""
    found = []
    for pid in _pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            states = [Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()[0]
                      for task in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        if any(state not in ("Z", "X") for state in states):
            found.append(pid)
    return found


def test_forked_workers_cannot_reach_each_others_modules(isolated):
    reader = ("def softmax(x, axis=-1):\n    import os\n"
              "    if x == 'list':\n        return sorted(os.listdir(os.path.dirname(os.path.dirname(os.getcwd()))))\n"
              "    return open(x).read()\n")
    one = isolated({"softmax": reader})
    _forks_or_skip(one)
    other = isolated({"softmax": "def softmax(x, axis=-1):\n    return 'SECRET-OF-THE-OTHER'\n"})
    assert other.function("softmax", "softmax")(np.zeros(2)) == "SECRET-OF-THE-OTHER"  # both workers are up
    assert one._worker.server is other._worker.server  # one server forked both
    read = one.function("softmax", "softmax")
    # Even knowing the other's folder name (which it cannot list), a worker cannot read the other's modules.
    path = f"{limits.STUDENTS_DIR}/{other._worker.scratch.name}/modules/softmax.py"
    with pytest.raises(PermissionError):
        read(path)
    with pytest.raises(PermissionError):
        read("list")


def test_what_a_forked_worker_leaves_running_dies_with_it(isolated):
    daemon = ("def softmax(x, axis=-1):\n    import os, time\n"
              "    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
              "            while True:\n                time.sleep(0.1)\n        os._exit(0)\n"
              "    time.sleep(0.2)\n    return x\n")
    impl = isolated({"softmax": daemon})
    _forks_or_skip(impl)
    impl.function("softmax", "softmax")(np.zeros(2))
    uid = impl._worker.uid
    assert len(_processes_of(uid)) >= 2  # the worker and its daemon, in a session of its own
    server = impl._worker.server
    impl.close()
    assert not _processes_of(uid), [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in _processes_of(uid)]
    assert not server.tainted  # nothing of it is left: the server goes on


def test_a_leftover_ipc_object_replaces_the_fork_server(isolated):
    planter = ("def softmax(x, axis=-1):\n    import ctypes\n"
               "    libc = ctypes.CDLL(None, use_errno=True)\n"
               "    if libc.shmget(0, 4096, 0o1666) < 0:\n        raise OSError(ctypes.get_errno(), 'shmget')\n"
               "    return x\n")
    impl = isolated({"softmax": planter})
    _forks_or_skip(impl)
    bystander = isolated({})  # another submission of this process, its worker forked by the same server
    assert bystander.function("softmax", "softmax")(np.zeros(2)).shape == (2,)
    impl.function("softmax", "softmax")(np.zeros(2))
    first = impl._worker.server
    assert bystander._worker.server is first
    first_process = first.process
    impl.close()
    assert first.tainted
    after = isolated({})
    assert after.function("masks", "causal_mask")(3).shape == (3, 3)
    assert after._worker.server is not first  # a new server (and a new IPC namespace) for the next submission
    assert first.retired
    # The bystander's worker still runs in the old sandbox: it finishes its submission there (replacing the server
    # used to end it mid-way: "the fork server ... ended", the grader's failure); the old server goes with it.
    assert bystander.function("masks", "causal_mask")(2).shape == (2, 2)
    assert bystander._worker.server is first
    bystander.close()
    if first.live == 0:  # (unless another implementation of this process, e.g. a module's fixture, still uses it)
        assert first_process.poll() is not None  # the old one is gone, and its namespaces with it


def test_what_a_worker_started_dies_even_when_the_worker_ended_itself(isolated):
    quitter = ("def softmax(x, axis=-1):\n    import os, time\n"
               "    if os.fork() == 0:\n        os.setsid()\n        while True:\n            time.sleep(0.1)\n"
               "    time.sleep(0.2)\n    os._exit(3)\n")
    impl = isolated({"softmax": quitter})
    _forks_or_skip(impl)
    softmax = impl.function("softmax", "softmax")  # the worker is up
    uid = impl._worker.uid
    with pytest.raises(WorkerCrashed, match="exit code 3"):
        softmax(np.zeros(2))
    # The worker exited by itself; the process it left behind went with it, by its user.
    assert not _processes_of(uid), [_cmdline(pid) for pid in _processes_of(uid)]
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)  # a fresh worker


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_fork_server_that_ends_under_a_call_is_the_graders_failure(isolated):
    impl = isolated({"softmax": "def softmax(x, axis=-1):\n    import time\n    time.sleep(1.5)\n    return x\n"})
    _forks_or_skip(impl)
    softmax = impl.function("softmax", "softmax")
    import threading

    server = impl._worker.server
    killer = threading.Timer(0.5, lambda: os.killpg(server.process.pid, 9))  # the server's whole sandbox
    killer.start()
    try:
        with pytest.raises(SandboxError, match="fork server"):
            softmax(np.zeros(2))
    finally:
        killer.cancel()
    assert impl.internal and impl.stats["crashed"] == 0  # not a crash of the student's code
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)  # a new server, a new worker
    assert impl._worker.server is not server


def test_a_submission_past_its_total_of_bytes_is_told_so_not_that_one_reply_was_too_large(isolated):
    """Each reply is small; together they pass the file of tests' total: the message must say which limit it was."""
    many = "import numpy as np\ndef softmax(x, axis=-1):\n    return np.ones(50_000)\n"
    impl = isolated({"softmax": many}, limits=Limits(call_timeout=2.0, student_reply_bytes=2_000_000))
    softmax = impl.function("softmax", "softmax")
    with pytest.raises(WorkerCrashed) as raised:
        for _ in range(20):  # 400 kB each
            softmax(np.zeros(2))
    message = str(raised.value)
    assert "in this file's tests" in message and "the limit is 2.0 MB per file of tests" in message, message
    assert "more than the grader accepts" not in message, message



def test_torch_computes_on_one_thread_before_every_call_of_the_worker():
    # The per-call budget counts the CPU time of every thread: a student's module that sets torch to more
    # threads must not turn a fast call into "an infinite loop?". (Where bwrap confines the worker, torch is
    # not even importable; without it, the worker's site-packages hold it.)
    torch = pytest.importorskip("torch")
    from grader.sandbox import worker

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        worker._one_thread()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_reply_whose_header_is_too_large_is_told_so(isolated):
    """A long Python list (not an array) fills the frame's JSON header past its limit: the message must say so.

    A hostile round had the reason empty ("softmax() was stopped: "): only the byte limits were explained.
    """
    long_list = "def softmax(x, axis=-1):\n    return [0.1] * 300_000\n"
    impl = isolated({"softmax": long_list}, limits=Limits(call_timeout=2.0, reply_header_bytes=1 << 20))
    with pytest.raises(WorkerCrashed) as raised:
        impl.function("softmax", "softmax")(np.zeros(2))
    message = str(raised.value)
    assert "return numpy arrays, not long lists" in message and "(1.0 MB)" in message, message
    assert not message.rstrip().endswith(":"), message
