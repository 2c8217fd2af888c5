"""The memory test of exercise 11 is measured outside the student's process: the ways to fool tracemalloc fail.

Red-team cases: a ``blockwise_attention`` that builds the full ``(n_q, n_k)``
score matrix and hides it from a measurement inside its own process
(tracemalloc reset or restarted, ``tracemalloc.get_traced_memory`` replaced,
the scores held in an anonymous mmap, in libc ``malloc`` memory, in memfd
files, computed in a forked child, or held since the import, an earlier call
or in System V shared memory an earlier worker made). Graded, the peak is read from the
worker's memory control group, where every page of its processes counts: each
cheat fails the memory test, and the reference passes it. Where no control
group can be made, the call is not measured: the grader's failure (not
graded), never a pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import cgroup
from grader.sandbox.errors import SandboxError
from grader.sandbox.measuring import installed_imports
from grader.sandbox.proxy import IsolatedImplementation
from grader.tests.test_isolation import make_submission
from tests.kit import Kit

ROOT = Path(__file__).resolve().parents[2]
N_Q, N_K, BLOCK, D = 512, 8192, 32, 2  # the sizes of tests/test_11_decoding.py's memory test
MATRIX = N_Q * N_K * 8  # the float64 score matrix: 32 MiB

# Every cheat computes full attention from an (n_q, n_k) float64 matrix ``scores`` it holds somewhere, on the
# memory test's large inputs only (the reference's blockwise_attention elsewhere, so every other test passes).
FULL = """
import numpy as _np

_honest = blockwise_attention

def _full_attention(q, k, v, scores):
    _np.matmul(q, _np.swapaxes(k, -1, -2), out=scores)
    scores /= _np.sqrt(q.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    _np.exp(scores, out=scores)
    return (scores @ v) / scores.sum(axis=-1, keepdims=True)
"""

CHEATS = {
    "scores held since the import": """
_held = _np.ones((512, 8192))  # every page touched before any call is measured
def blockwise_attention(q, k, v, block_size, causal=False):
    return _full_attention(q, k, v, _held[:q.shape[0], :k.shape[0]])
""",
    "scores kept from an earlier call": """
_kept = []
def blockwise_attention(q, k, v, block_size, causal=False):
    if not _kept:
        _kept.append(_np.ones((512, 8192)))  # an earlier call pays; the measured one reuses it
    return _full_attention(q, k, v, _kept[0][:q.shape[0], :k.shape[0]])
""",
    "scores in System V shared memory left by an earlier worker": """
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_shmid = _libc.shmget(0x5eed, 512 * 8192 * 8, 0o1666)  # one segment for every worker (uid) of the sandbox
_held = _np.ctypeslib.as_array(ctypes.cast(_libc.shmat(_shmid, None, 0), ctypes.POINTER(ctypes.c_double)),
                               shape=(512, 8192))
_held[:] = 1.0  # touched by the first worker that imports this module
def blockwise_attention(q, k, v, block_size, causal=False):
    return _full_attention(q, k, v, _held[:q.shape[0], :k.shape[0]])
""",
    "tracemalloc reset": """
import tracemalloc
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    out = _full_attention(q, k, v, _np.empty(q.shape[:-1] + k.shape[-2:-1]))
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    return out
""",
    "tracemalloc restarted": """
import tracemalloc
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    out = _full_attention(q, k, v, _np.empty(q.shape[:-1] + k.shape[-2:-1]))
    tracemalloc.stop()
    tracemalloc.start()
    return out
""",
    "get_traced_memory replaced": """
import tracemalloc
tracemalloc.get_traced_memory = lambda: (0, 0)
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    return _full_attention(q, k, v, _np.empty(q.shape[:-1] + k.shape[-2:-1]))
""",
    "scores in an mmap": """
import mmap
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    shape = q.shape[:-1] + k.shape[-2:-1]
    buffer = mmap.mmap(-1, int(_np.prod(shape)) * 8)
    scores = _np.frombuffer(buffer, dtype=_np.float64).reshape(shape)
    out = _full_attention(q, k, v, scores)
    del scores
    buffer.close()
    return out
""",
    "scores in libc malloc memory": """
import ctypes
_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    shape = q.shape[:-1] + k.shape[-2:-1]
    address = _libc.malloc(ctypes.c_size_t(int(_np.prod(shape)) * 8))
    scores = _np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_double)), shape=shape)
    out = _full_attention(q, k, v, scores)
    del scores
    _libc.free(ctypes.c_void_p(address))
    return out
""",
    "scores in memfd files": """
import mmap, os
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    rows = (1 << 20) // (k.shape[0] * 8)  # the rows of scores in 1 MiB, the most one file may hold here
    held, outs = [], []
    for start in range(0, q.shape[0], rows):
        fd = os.memfd_create("scores")
        os.ftruncate(fd, 1 << 20)
        buffer = mmap.mmap(fd, 1 << 20)
        os.close(fd)
        scores = _np.frombuffer(buffer, dtype=_np.float64).reshape(rows, k.shape[0])
        outs.append(_full_attention(q[start:start + rows], k, v, scores[:len(q[start:start + rows])]))
        held.append((buffer, scores))  # the whole matrix is held at once, in files outside the heap
    return _np.concatenate(outs)
""",
    "computed in a forked child": """
import os
def blockwise_attention(q, k, v, block_size, causal=False):
    if causal or k.shape[-2] < 2048:
        return _honest(q, k, v, block_size, causal)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = _full_attention(q, k, v, _np.empty(q.shape[:-1] + k.shape[-2:-1]))
        data = _np.ascontiguousarray(out).tobytes()
        while data:
            data = data[os.write(write, data):]
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return _np.frombuffer(b"".join(chunks), dtype=_np.float64).reshape(q.shape[:-1] + v.shape[-1:]).copy()
""",
}


def _needs_a_group() -> None:
    if cgroup.available().memory is None:
        pytest.skip(f"no memory cgroup on this machine, so nothing is measured: {cgroup.available().missing}")


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(236)
    return rng.normal(size=(N_Q, D)), rng.normal(size=(N_K, D)), rng.normal(size=(N_K, D))


def _full(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    scores = q @ k.T / np.sqrt(D)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights @ v) / weights.sum(axis=-1, keepdims=True)


@pytest.fixture
def isolated(tmp_path):
    """Factory: an IsolatedImplementation of the reference with ``decoding`` code appended, closed afterwards."""
    opened: list[IsolatedImplementation] = []

    def build(code: str | None) -> IsolatedImplementation:
        changes = {} if code is None else {"decoding": FULL + code}
        implementation = IsolatedImplementation(make_submission(tmp_path / f"student{len(opened)}", **changes))
        opened.append(implementation)
        return implementation

    yield build
    for implementation in opened:
        implementation.close()


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_full_score_matrix_hidden_from_tracemalloc_is_measured_from_outside(isolated, cheat):
    _needs_a_group()
    impl = isolated(CHEATS[cheat])
    q, k, v = _inputs()
    Kit(impl, "decoding").blockwise_attention(q, k, v, BLOCK)  # an earlier call, as the suite's earlier tests make
    out, peak = Kit(impl, "decoding").measure("blockwise_attention", q, k, v, BLOCK)
    np.testing.assert_allclose(out, _full(q, k, v), rtol=1e-9, atol=1e-12)  # a right answer, by a full matrix
    assert peak is not None and peak >= 0.9 * MATRIX, f"{cheat}: {peak} bytes measured"
    assert impl.internal == []


def test_the_reference_stays_far_below_the_score_matrix(isolated):
    _needs_a_group()
    impl = isolated(None)
    q, k, v = _inputs()
    out, peak = Kit(impl, "decoding").measure("blockwise_attention", q, k, v, BLOCK)
    np.testing.assert_allclose(out, _full(q, k, v), rtol=1e-9, atol=1e-12)
    assert peak is not None and peak < MATRIX / 4  # its blocks, its import and the call's messages: about 3 MiB


def test_without_a_memory_group_the_call_is_not_measured(isolated, monkeypatch):
    monkeypatch.setattr(cgroup, "available", lambda: cgroup.Support(None, None, None, missing="none (simulated)"))
    impl = isolated(CHEATS["tracemalloc reset"])
    q, k, v = _inputs()
    with pytest.raises(SandboxError, match="not measured"):
        impl.measure("decoding", "blockwise_attention", q, k, v, BLOCK)
    assert impl.internal and "blockwise_attention() was not measured" in impl.internal[0]  # not graded


def _graded(folder: Path, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_11_decoding.py", "-k", "memory", "--impl", str(folder),
         "-p", "grader.sandbox.plugin", "--isolated", "-q", "-n", "0", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **environment})


@pytest.mark.parametrize("cheat", ["computed in a forked child", "get_traced_memory replaced"])
def test_the_graded_memory_test_fails_a_cheat_with_the_idea(tmp_path, cheat):
    _needs_a_group()
    result = _graded(make_submission(tmp_path / "student", decoding=FULL + CHEATS[cheat]))
    assert "1 failed" in result.stdout, result.stdout[-2000:]
    assert "more memory than one block at a time takes: keep one block of scores" in result.stdout
    assert re.search(r"the \(n_q, n_k\) scores of full attention alone take \d+ MiB", result.stdout)


def test_the_graded_memory_test_passes_the_reference(tmp_path):
    _needs_a_group()
    result = _graded(make_submission(tmp_path / "student"))
    assert "1 passed" in result.stdout, result.stdout[-2000:]


def test_without_a_memory_group_the_graded_memory_test_never_passes(tmp_path):
    result = _graded(make_submission(tmp_path / "student", decoding=FULL + CHEATS["tracemalloc reset"]),
                     **{cgroup.SIMULATE_NO_CGROUP: "1"})
    assert "1 failed" in result.stdout, result.stdout[-2000:]
    assert "the memory of blockwise_attention() was not measured: its worker has no memory control group " \
           "(no cgroup (simulated))" in result.stdout


def test_the_libraries_a_module_imports_are_not_its_call_s_memory(tmp_path):
    # The measured call runs in a fresh worker that imports the student's module within it; asyncio's pages
    # (about 1.5 MiB) took an unchanged blockwise_attention past the allowance, 7.81 MiB against 7.26 (a helper's
    # honest variant). The libraries are imported before the baseline now.
    _needs_a_group()
    result = _graded(make_submission(tmp_path / "student", decoding=FULL + "\nimport asyncio  # noqa: E402, F401\n"))
    assert "1 passed" in result.stdout, result.stdout[-2000:]


def test_only_installed_libraries_are_imported_before_the_baseline(tmp_path):
    # Never a module of the student's own (it could fill its pages before the baseline, for the call to reuse).
    (tmp_path / "decoding.py").write_text(
        "import asyncio, os.path\nfrom scipy.special import logsumexp\nfrom . import _cache\nimport _buffers\n"
        "from _buffers import big\n\ndef f():\n    import json\n", encoding="utf-8")
    (tmp_path / "_buffers.py").write_text("big = bytearray(1 << 26)\n", encoding="utf-8")
    assert installed_imports(tmp_path / "decoding.py") == ["asyncio", "os.path", "scipy.special", "json"]
    (tmp_path / "broken.py").write_text("import (\n", encoding="utf-8")
    assert installed_imports(tmp_path / "broken.py") == []
    # Read once per version of the file: an edited module (here a second run of a watched folder) is read again.
    (tmp_path / "decoding.py").write_text("import asyncio\nimport json, csv\n", encoding="utf-8")
    assert installed_imports(tmp_path / "decoding.py") == ["asyncio", "json", "csv"]
    (tmp_path / "_buffers.py").unlink()
    (tmp_path / "decoding.py").write_text("import _buffers\n", encoding="utf-8")
    assert installed_imports(tmp_path / "decoding.py") == ["_buffers"]  # no longer a file of the folder
