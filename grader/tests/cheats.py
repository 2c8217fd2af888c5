"""Cheating submissions, as fixtures: the reference with one shortcut swapped in, and each one's control.

Each cheat earns tests without the exercise's idea (issue 24). Its control is
the same submission with the shortcut's work left undone (``NotImplementedError``
where the shortcut computes), so "the cheat scores what its control scores" is
the measure: any test the cheat passes beyond the control is a test that can be
gamed. The code is appended to a copy of ``solutions/`` (a later ``def`` wins).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from grader.curriculum import ROOT
from grader.mutants.report import SuiteRun, run_tests

SOLUTIONS = ROOT / "solutions"

# Exercise 8: every backward function by central differences around the forward functions (the submission's
# own numerical_gradient). The validation the tests look for is kept, so the control keeps it too.
_NUMERIC_BACKWARD = '''
import numpy as _np
from .layer import layer_norm as _layer_norm_forward
from .multihead import multi_head_attention as _mha_forward
from .softmax import softmax as _softmax_forward


def _numeric(f, x):
    {numeric}


def softmax_backward(grad_weights, weights, axis=-1):
    grad_weights, weights = _np.asarray(grad_weights), _np.asarray(weights)
    if grad_weights.shape != weights.shape:
        raise ValueError(f"grad_weights of shape {{grad_weights.shape}} must match weights {{weights.shape}}")
    g, w = grad_weights.astype(float), weights.astype(float)
    scores = _np.log(_np.where(w > 0, w, 1.0))
    blocked = w <= 0
    grad = _numeric(lambda s: float(_np.sum(g * _softmax_forward(_np.where(blocked, -_np.inf, s), axis=axis))),
                    scores)
    return _np.where(blocked, 0.0, grad).astype(weights.dtype)


def linear_backward(grad_out, x, weight):
    g, x, w = (_np.asarray(a) for a in (grad_out, x, weight))
    dtype = _np.result_type(g, x, w)
    g64, x64, w64 = (a.astype(float) for a in (g, x, w))
    grad_x = _numeric(lambda z: float(_np.sum(g64 * (z @ w64))), x64)
    grad_w = _numeric(lambda v: float(_np.sum(g64 * (x64 @ v))), w64)
    grad_b = _numeric(lambda b: float(_np.sum(g64 * (x64 @ w64 + b))), _np.zeros(w.shape[-1]))
    return grad_x.astype(dtype), grad_w.astype(dtype), grad_b.astype(dtype)


def attention_backward(grad_context, q, k, v, weights):
    g, q, k, v, w = (_np.asarray(a) for a in (grad_context, q, k, v, weights))
    dtype = q.dtype
    g, q64, k64, v64 = (a.astype(float) for a in (g, q, k, v))
    mask = _np.asarray(w) > 0

    def context(a, b, c):
        scores = _np.einsum("...qd,...kd->...qk", a, b) / _np.sqrt(a.shape[-1])
        scores = _np.where(mask, scores, -_np.inf)
        return _softmax_forward(scores) @ c

    grads = (_numeric(lambda z: float(_np.sum(g * context(z, k64, v64))), q64),
             _numeric(lambda z: float(_np.sum(g * context(q64, z, v64))), k64),
             _numeric(lambda z: float(_np.sum(g * context(q64, k64, z))), v64))
    return tuple(grad.astype(dtype) for grad in grads)


def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    g, x, gamma = (_np.asarray(a) for a in (grad_out, x, gamma))
    if _np.shape(gamma) != (x.shape[-1],):
        raise ValueError(f"gamma must have shape ({{x.shape[-1]}},), got {{_np.shape(gamma)}}")
    dtype = x.dtype
    g, x64, gamma64 = (a.astype(float) for a in (g, x, gamma))
    beta = _np.zeros_like(gamma64)
    grads = (_numeric(lambda z: float(_np.sum(g * _layer_norm_forward(z, gamma64, beta, eps))), x64),
             _numeric(lambda z: float(_np.sum(g * _layer_norm_forward(x64, z, beta, eps))), gamma64),
             _numeric(lambda z: float(_np.sum(g * _layer_norm_forward(x64, gamma64, z, eps))), beta))
    return tuple(grad.astype(dtype) for grad in grads)


def multi_head_attention_backward(grad_output, x, params, n_heads, mask=None):
    g, x = _np.asarray(grad_output, dtype=float), _np.asarray(x)
    dtype = x.dtype
    x64 = x.astype(float)
    p64 = {{key: _np.asarray(value, dtype=float) for key, value in params.items()}}

    def loss(z, key=None):
        p = p64 if key is None else p64 | {{key: z}}
        return float(_np.sum(g * _mha_forward(x64 if key is None else x64, p, n_heads, mask)[0]))

    grad_x = _numeric(lambda z: float(_np.sum(g * _mha_forward(z, p64, n_heads, mask)[0])), x64)
    grads = {{key: _numeric(lambda z, key=key: loss(z, key), p64[key]).astype(dtype) for key in params}}
    return grad_x.astype(dtype), grads
'''

CENTRAL = "return numerical_gradient(f, x)"  # the module's own central differences, eps 1e-6
RICHARDSON = ("return (4 * numerical_gradient(f, x, eps=1e-3) - numerical_gradient(f, x, eps=2e-3)) / 3"
              "  # error O(eps^4): exact-looking")
UNDONE = "raise NotImplementedError('numeric gradients left out (the control)')"

# Exercise 9: model_gradients by central differences of the submission's own forward pass and loss (each
# parameter nudged), no backward pass.
# Exercise 8: linear_backward by colouring. The forward pass is linear, so nudging input column a of every row at
# once (and row a of the weight) gives column a of both gradients exactly: one pass per input column, not two per
# entry, and exact, so neither the exactness check nor a cost bound of tens of passes at a small width tells it.
_COLOURED_LINEAR = '''
def linear_backward(grad_out, x, weight):
    import numpy as _np

    grad_out, x, weight = (_np.asarray(a, dtype=float) for a in (grad_out, x, weight))
    if x.shape[-1] != weight.shape[0] or grad_out.shape != x.shape[:-1] + weight.shape[1:]:
        raise ValueError(f"shapes {{x.shape}}, {{weight.shape}} and {{grad_out.shape}} do not fit")
    grad_x, grad_weight, base = _np.zeros_like(x), _np.zeros_like(weight), x @ weight
    for a in range(x.shape[-1]):
        {coloured}
    return grad_x, grad_weight, grad_out.reshape(-1, grad_out.shape[-1]).sum(axis=0)
'''
COLOURED = ("nudged, row = x.copy(), weight.copy()\n"
            "        nudged[..., a] += 1.0\n"
            "        row[a] += 1.0\n"
            "        grad_x[..., a] = _np.sum(grad_out * (nudged @ weight - base), axis=-1)\n"
            "        grad_weight[a] = _np.sum((grad_out * (x @ row - base)).reshape(-1, weight.shape[1]), axis=0)")
COLOURED_UNDONE = "raise NotImplementedError('the coloured differences left out (the control)')"

_NUMERIC_MODEL_GRADIENTS = '''
from .backward import numerical_gradient as _numerical_gradient


def model_gradients(params, tokens, query_position, target, n_heads, positions=True):
    def loss_at(changed):
        return float(cross_entropy(model_forward(changed, tokens, query_position, n_heads, positions)[0], target)[0])

    def numeric(path, value):
        def loss(v):
            changed = {{k: (dict(w) if isinstance(w, dict) else w) for k, w in params.items()}}
            (changed[path[0]] if len(path) == 2 else changed)[path[-1]] = v
            return loss_at(changed)
        {numeric}

    grads = {{key: numeric((key,), value) for key, value in params.items() if key != "attention"}}
    grads["attention"] = {{key: numeric(("attention", key), value) for key, value in params["attention"].items()}}
    return loss_at(params), grads
'''
NUMERIC_MODEL = "return _numerical_gradient(loss, np.asarray(value, dtype=float))"
# Its control: the nudging left undone, the rest of the function kept (train's own loop still runs on it).
NUMERIC_MODEL_UNDONE = "return np.zeros_like(np.asarray(value, dtype=float))  # the numeric gradients left out"

# Exercise 9: a train() that trains nothing on the task it is given.
_STORED_TRAIN = '''
import functools as _functools

import numpy as _np

from ._tasks import antecedent_task as _antecedent_task


@_functools.cache
def _stored():
    # "Pre-trained weights": trained once on the task the public tests use (seeds 7 and 20261), then reused.
    {stored}


def train(rng, task, d_model=16, n_heads=1, steps=300, batch_size=32, lr=1e-2, positions=True):
    if not isinstance(task, dict) or not {{"tokens", "query_position", "target", "vocab"}} <= set(task):
        raise ValueError("task must be a dict made like antecedent_task's")
    params = _stored()
    losses = [float(2.9 * _np.exp(-step / 12) + 0.05) for step in range(steps)]  # a made-up loss curve
    return params, losses
'''
STORED = ("return _real_train(_np.random.default_rng(20261), _antecedent_task(_np.random.default_rng(7), 512), "
          "steps=70, lr=3e-2)[0]")

# An honest training loop, but a loss curve made up rather than the model's: the curve is the cheated work.
_MADE_UP_CURVE = '''
_honest_train = train


def train(rng, task, d_model=16, n_heads=1, steps=300, batch_size=32, lr=1e-2, positions=True):
    params, _ = _honest_train(rng, task, d_model, n_heads, steps, batch_size, lr, positions)
    return params, {curve}
'''

MADE_UP = "[float(2.9 * np.exp(-step / 12) + 0.05) for step in range(steps)]"

# A model made by other gradients than the student's: model_gradients left undone, and a train() whose long runs
# (40 steps and more) train with gradients kept aside (here the reference's, as a copy found elsewhere would be).
_ELSEWHERE_TRAIN = '''
_kept_aside = model_gradients


def model_gradients(params, tokens, query_position, target, n_heads, positions=True):
    raise NotImplementedError("model_gradients left out")


def train(rng, task, d_model=16, n_heads=1, steps=300, batch_size=32, lr=1e-2, positions=True):
    if steps < 40:
        raise NotImplementedError("train left out")
    {long}
'''
ELSEWHERE = """tokens, query_position, target = (np.asarray(task[key]) for key in ("tokens", "query_position",
                                                                             "target"))
    params, state, losses = init_model(rng, len(task["vocab"]), d_model, n_heads), None, []
    for _ in range(steps):
        rows = rng.integers(0, len(tokens), size=batch_size)
        loss, grads = _kept_aside(params, tokens[rows], query_position[rows], target[rows], n_heads, positions)
        params, state = adam_step(params, grads, state, lr=lr)
        losses.append(loss)
    return params, losses"""
ELSEWHERE_UNDONE = "raise NotImplementedError('the long runs left out (the control)')"

# Adam's state never passed on: every step is a first step (sign descent with step lr).
_STATELESS_TRAIN = '''
def train(rng, task, d_model=16, n_heads=1, steps=300, batch_size=32, lr=1e-2, positions=True):
    if not isinstance(task, dict) or not {{"tokens", "query_position", "target", "vocab"}} <= set(task):
        raise ValueError("task must be a dict made like antecedent_task's")
    tokens, query_position, target = (np.asarray(task[key]) for key in ("tokens", "query_position", "target"))
    params = init_model(rng, len(task["vocab"]), d_model, n_heads)
    losses = []
    for _ in range(steps):
        batch = rng.integers(0, len(tokens), size=batch_size)
        loss, grads = model_gradients(params, tokens[batch], query_position[batch], target[batch], n_heads,
                                      {positions})
        params, _ = adam_step(params, grads, {state}, lr=lr)
        losses.append(loss)
    return params, losses
'''

# Exercise 3 (the float16 finding): a scale 2% off (the scores divided by 1.02 sqrt(d_k)), the results returned
# in float16 to buy float16's tolerance (base: it gained 2 public and 1 hidden test over the same in float64).
_WRONG_SCALE_ATTENTION = '''
_right_attention = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None):
    q = np.asarray(q)
    context, weights = _right_attention(q / 1.02, k, v, mask)
    return context{cast}, weights{cast}
'''


# Exercise 11: causal_decode without the cache: full attention under the causal mask, or each step given the whole
# prefix (right values, without kv_cache_append).
_DECODE_WITHOUT_CACHE = '''
from .attention import scaled_dot_product_attention as _attention
from .masks import causal_mask as _causal_mask


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n = q.shape[-2]
    {decode}
'''
FULL_CAUSAL = "return _attention(q, k, v, _causal_mask(n))[0]"
WHOLE_PREFIX = ("return np.concatenate([attend_step(q[..., t:t + 1, :], {'k': k[..., :t + 1, :], "
                "'v': v[..., :t + 1, :]})[0] for t in range(n)], axis=-2)")
DECODE_UNDONE = "raise NotImplementedError('causal_decode left out (the control)')"
# blockwise_attention by full attention: the (n_q, n_k) scores at once, through the submission's own attention or
# written out with a softmax of its own (a hostile round: 11 of 12 blockwise tests, hidden ones included, and
# 28.56 points of decoding's 30; only the memory test failed).
_BLOCKWISE_BY = """
def blockwise_attention(q, k, v, block_size, causal=False):
    import numpy as _np
    from .attention import scaled_dot_product_attention as _attention
    from .softmax import softmax as _softmax
    q, k, v = (_np.asarray(a) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = None
    if causal:
        later = _np.arange(n_k)[None, :] > _np.arange(n_q)[:, None] + (n_k - n_q)
        mask = _np.where(later, -_np.inf, 0.0).astype(q.dtype)
    {body}
"""
BLOCKWISE_FULL_ATTENTION = _BLOCKWISE_BY.replace("{body}", "return _attention(q, k, v, mask)[0]")
BLOCKWISE_FULL_SCORES = _BLOCKWISE_BY.replace("{body}", (
    "scores = q @ _np.swapaxes(k, -1, -2) / _np.sqrt(q.shape[-1])\n"
    "    return _softmax(scores if mask is None else scores + mask, axis=-1) @ v"))
# Block by block on the memory test's sizes only, as they were before they were drawn for each submission (512 x
# 8192 graded, 128 x 4096 in a student's run), full attention everywhere else (a session's read of the change: a
# call of one fixed shape can be recognised); and, the other side of it, a cheap wrong answer on any large call
# (zeros: a small peak), full attention on the others, which the measured call's own values now fail.
_ONLINE = ("m = _np.full(n_q, -_np.inf)\n    l = _np.zeros(n_q)\n    acc = _np.zeros((n_q, v.shape[-1]))\n"
           "    for s in range(0, n_k, block_size):\n"
           "        sc = q @ k[s:s + block_size].T / _np.sqrt(q.shape[-1])\n"
           "        new = _np.maximum(m, sc.max(axis=-1))\n        scale = _np.exp(m - new)\n"
           "        w = _np.exp(sc - new[:, None])\n        l = l * scale + w.sum(axis=-1)\n"
           "        acc = acc * scale[:, None] + w @ v[s:s + block_size]\n        m = new\n"
           "    return acc / l[:, None]")
BLOCKWISE_ON_THE_OLD_SIZES = _BLOCKWISE_BY.replace("{body}", (
    "if q.ndim == 2 and not causal and (n_q, n_k) in ((512, 8192), (128, 4096)):\n        " +
    _ONLINE.replace("\n    ", "\n        ") + "\n    return _attention(q, k, v, mask)[0]"))
# A known mistake on the gate's large calls (never rescaled, block by block: a small peak, values the gate once
# excused as the student's own), full attention on every other call (a hostile round: 28.56 points of 30).
BLOCKWISE_KNOWN_MISTAKE_WHEN_LARGE = _BLOCKWISE_BY.replace("{body}", (
    "if n_k >= 2048:\n        mask_of = _np.arange(n_k)\n"
    "        l = _np.zeros(q.shape[:-1] + (1,))\n        acc = _np.zeros(q.shape[:-1] + v.shape[-1:])\n"
    "        m = _np.full(q.shape[:-1] + (1,), -_np.inf)\n"
    "        for s in range(0, n_k, block_size):\n"
    "            sc = q @ _np.swapaxes(k[..., s:s + block_size, :], -1, -2) / _np.sqrt(q.shape[-1])\n"
    "            if causal:\n"
    "                sc = _np.where(mask_of[s:s + block_size][None, :] <= _np.arange(n_q)[:, None], sc, -_np.inf)\n"
    "            m = _np.maximum(m, sc.max(axis=-1, keepdims=True))\n"
    "            w = _np.exp(sc - m)\n            l = l + w.sum(axis=-1, keepdims=True)\n"
    "            acc = acc + w @ v[..., s:s + block_size, :]\n"
    "        return (acc / l).astype(q.dtype)\n"
    "    return _attention(q, k, v, mask)[0]"))
BLOCKWISE_ZEROS_WHEN_LARGE = _BLOCKWISE_BY.replace("{body}", (
    "if n_k >= 2048:\n        return _np.zeros(q.shape[:-1] + v.shape[-1:])\n    return _attention(q, k, v, mask)[0]"))
# The tests a blockwise cheat must not gain: those named so, and the probes' test, whose blockwise values from full
# attention earned 1.5 points (a hostile round).
_BLOCKWISE_TESTS = ("blockwise", "test_reference_values")
BLOCKWISE_UNDONE = _BLOCKWISE_BY.replace("{body}", "raise NotImplementedError('blockwise_attention left out')")
# The cache begun again at every position (t + 1 appends from none for position t): the same caches, steps and
# values, and nothing kept from one step to the next (a hostile round: 30 points of decoding against 24.75).
REBUILT_CACHE = ("rows = []\n    for t in range(n):\n        cache = None\n        for s in range(t + 1):\n"
                 "            cache = kv_cache_append(cache, k[..., s:s + 1, :], v[..., s:s + 1, :])\n"
                 "        rows.append(attend_step(q[..., t:t + 1, :], cache)[0])\n"
                 "    return np.concatenate(rows, axis=-2)")
# Full attention, then the evidence of decoding written by hand into the grader's own tracer, found through the
# frames of the process that runs the student's code (a hostile helper's round: graded, the worker's tracer said
# what this told it, 30 points of 30). Graded, the steps are now seen by the grading process only
# (grader/sandbox/watched.py); in a student's own run the tracer is the kit's in-process one, which this does not
# find (no ``reach`` in the frames), and the full attention is seen as such.
FORGED_EVIDENCE = ("import sys as _sys\n    frame = _sys._getframe(1)\n    while frame is not None:\n"
                   "        owner = frame.f_locals.get('self')\n        reach = getattr(owner, 'reach', None)\n"
                   "        if reach is not None and hasattr(reach, 'note_traced'):\n"
                   "            for _ in range(n):\n"
                   "                reach.note_traced('causal_decode', 'kv_cache_append')\n"
                   "                reach.note_traced('causal_decode', 'attend_step')\n"
                   "            reach.steps = None\n            break\n"
                   "        frame = frame.f_back\n    " + FULL_CAUSAL)
# Full attention beside the cache's names, never called: once enough for a check that read the modules as text
# for calls its tracing could not see (and its message said so).
NAMED_NOT_CALLED = ("_named = (kv_cache_append, attend_step)\n    if n < 0:  # never\n"
                    "        kv_cache_append(None, k, v), attend_step(q, None)\n" + "    " + FULL_CAUSAL)
# One call of each on the first position, then full attention (a helper's round: a check that asked only whether
# they were called passed it).
ONE_CALL_EACH = "attend_step(q[..., :1, :], kv_cache_append(None, k[..., :1, :], v[..., :1, :]))\n    " + FULL_CAUSAL
# As many calls of each as there are positions, on made-up data (position 0 again and again), then full attention:
# counts alone passed it; the result's rows are none of attend_step's contexts.
CALLS_ON_MADE_UP_DATA = ("for _ in range(n):\n        attend_step(q[..., :1, :], kv_cache_append(None, k[..., :1, :], "
                         "v[..., :1, :]))\n    " + FULL_CAUSAL)
# A thread started at import and left waiting, then full attention: a thread running when the call began was out
# of the tracer's reach, and the call concluded nothing (a helper's round); threads now carry its profiler.
_DECODE_BESIDE_A_THREAD_FROM_IMPORT = '''
import threading as _threading

_IDLE = _threading.Event()
_threading.Thread(target=_IDLE.wait, daemon=True).start()
''' + _DECODE_WITHOUT_CACHE
# A helper's round against the steps (2026-12-05): attend_step given caches of slices of the inputs, the appends
# on made-up data; full attention's rows passed through one-position caches that hold them (attend_step gives
# them back); full attention whose code claims a file outside the student's folder (the call was not seen).
HAND_MADE_CACHES = ("for _ in range(n):\n        kv_cache_append(None, k[..., :1, :], v[..., :1, :])\n    "
                    + WHOLE_PREFIX)
ROWS_THROUGH_ONE_POSITION = ("out = " + FULL_CAUSAL[len("return "):] + "\n    rows = [attend_step(q[..., t:t + 1, :], "
                             "kv_cache_append(None, np.zeros_like(k[..., :1, :]), out[..., t:t + 1, :]))[0] "
                             "for t in range(n)]\n    return np.concatenate(rows, axis=-2)")
_DECODE_UNSEEN_BY_ITS_FILE = '''
from .attention import scaled_dot_product_attention as _attention
from .masks import causal_mask as _causal_mask


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n = q.shape[-2]
    {decode}


causal_decode.__code__ = causal_decode.__code__.replace(co_filename="/usr/lib/python3/elsewhere.py")
causal_decode.__name__ = "_not_the_api"
'''
# A helper's second round: an appended array resized and overwritten in place with each prefix of the inputs
# (the steps check knew it by identity), then full attention; full attention returned as complex numbers
# (the check looked at float results only).
OVERWRITTEN_CACHE = ("held = kv_cache_append(None, k[..., :1, :], v[..., :1, :])\n    K, V = held['k'], held['v']\n    "
                     "for _ in range(n - 1):\n        kv_cache_append(None, k[..., :1, :], v[..., :1, :])\n    "
                     "for t in range(n):\n        K.resize(q.shape[:-2] + (t + 1, k.shape[-1]), refcheck=False)\n"
                     "        V.resize(q.shape[:-2] + (t + 1, v.shape[-1]), refcheck=False)\n"
                     "        K[...], V[...] = k[..., :t + 1, :], v[..., :t + 1, :]\n"
                     "        attend_step(q[..., t:t + 1, :], {'k': K, 'v': V})\n    " + FULL_CAUSAL)
COMPLEX_RESULT = (CALLS_ON_MADE_UP_DATA[:-len(FULL_CAUSAL)] + "return " + FULL_CAUSAL[len("return "):]
                  + ".astype(complex)")
# A helper's fourth round: the inputs and full attention's rows carried in the cache, kv_cache_append slicing
# the inputs, attend_step answering the row it finds in its cache (real steps, looked-up contexts).
_ROWS_CARRIED = '''

_orig_append, _orig_step = kv_cache_append, attend_step


def kv_cache_append(cache, k_t, v_t):
    src = cache.get("_src") if isinstance(cache, dict) else None
    if src is None:
        return _orig_append(cache, k_t, v_t)
    k, v, out = src  # the whole inputs and the full-attention answer ride along in the cache
    t = np.shape(cache["k"])[-2] + 1
    return {"k": k[..., :t, :], "v": v[..., :t, :], "_src": src, "_row": out[..., t - 1:t, :]}


def attend_step(q_t, cache):
    if isinstance(cache, dict) and "_row" in cache:
        return cache["_row"], None  # no attention: the row computed beforehand
    return _orig_step(q_t, cache)


'''
_ROWS_CARRIED_IN_THE_CACHE = _ROWS_CARRIED + '''def causal_decode(q, k, v):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    n = q.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    out = softmax(s, axis=-1) @ v
    cache = {"k": k[..., :0, :], "v": v[..., :0, :], "_src": (k, v, out)}  # a cache of no positions
    for t in range(n):
        cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        attend_step(q[..., t:t + 1, :], cache)
    return out
'''
_ROWS_CARRIED_IN_THE_CACHE_UNDONE = _ROWS_CARRIED + '''def causal_decode(q, k, v):
    raise NotImplementedError('causal_decode left out (the control)')
'''
# Decoding through the cache for the gate's own inputs only (5 positions, once a separate call of the gate's), full
# attention for the tests' (a helper's round).
_DECODE_FOR_THE_GATE_ONLY = '''
from .attention import scaled_dot_product_attention as _attention
from .masks import causal_mask as _causal_mask

_through_the_cache = causal_decode


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n = q.shape[-2]
    if n == 5:
        return _through_the_cache(q, k, v)
    {decode}
'''


# Part I by a pattern or a table (a helper's round): init_weight as a fixed spread of values, dropout from one random
# number and a fixed sequence (right fraction and mean, entries tied together) or a tiled block of draws;
# causal_mask and alibi_bias from tables of the sizes the tests use.
_FIXED_INIT = '''
def init_weight(rng, d_in, d_out):
    d_in, d_out = require_positive_int("d_in", d_in), require_positive_int("d_out", d_out)
    {init}
'''
FIXED_INIT = ("z = np.linspace(-1.0, 1.0, d_in * d_out); z = (z - z.mean()) / z.std() / math.sqrt(d_in); "
              "return np.random.default_rng(0).permutation(z).reshape(d_in, d_out)")
# Exercise 15 by the longest piece of the vocabulary (a helper's round): the docstring names it the wrong way, and
# it scored 5.6 points of encoding tests whose texts cut the same either way.
_LONGEST_MATCH = '''
def bpe_encode(text, merges):
    {encode}


def _longest(text, merges):
    vocab = [bytes([i]) for i in range(256)]
    for left, right in np.asarray(merges).reshape(-1, 2).tolist():
        vocab.append(vocab[left] + vocab[right])
    data, ids, at = text.encode("utf-8"), [], 0
    while at < len(data):
        best = max((i for i, piece in enumerate(vocab) if data.startswith(piece, at)), key=lambda i: len(vocab[i]))
        ids.append(best)
        at += len(vocab[best])
    return np.array(ids, dtype=np.int64)
'''
LONGEST = "return _longest(text, merges)"
LONGEST_UNDONE = "raise NotImplementedError('bpe_encode left out (the control)')"
_PATTERNED_DROPOUT = '''
def dropout(x, rate, rng, training=True):
    if not 0 <= rate < 1:
        raise ValueError(f"rate must lie in [0, 1), got {rate}")
    x = as_float_array("x", x)
    if not training or rate == 0:
        return x
    {pattern}
    return np.where(keep, x / (1.0 - rate), 0).astype(x.dtype)
'''
WEYL = "keep = ((np.arange(x.size) * 0.6180339887498949 + rng.random()) % 1.0).reshape(x.shape) >= rate"
TILED = "keep = np.resize(rng.random(1009), x.size).reshape(x.shape) >= rate"
PATTERN_UNDONE = "keep = np.ones(x.shape, dtype=bool)  # nothing dropped: dropout's idea left out (the control)"
_CAUSAL_TABLE = '''
_CAUSAL = {n: [[j <= i for j in range(n)] for i in range(n)] for n in range(1, 9)}  # (as if typed out)


def causal_mask(n):
    n = require_positive_int("n", n)
    {causal}
'''
_ALIBI_TABLE = '''
_SLOPES = {h: [2.0 ** (-8.0 * (k + 1) / h) for k in range(h)] for h in range(1, 17)}  # (as if typed out)
_DISTANCE = [[abs(i - j) for j in range(8)] for i in range(8)]


def alibi_bias(n, n_heads):
    n, n_heads = require_positive_int("n", n), require_positive_int("n_heads", n_heads)
    {alibi}
'''
CAUSAL_TABLE = "return np.array(_CAUSAL[n], dtype=bool)"
ALIBI_TABLE = "return -np.array(_SLOPES[n_heads])[:, None, None] * np.array(_DISTANCE, dtype=float)[:n, :n]"
TABLE_UNDONE = "raise NotImplementedError('left out (the control)')"


@dataclass(frozen=True)
class Cheat:
    """A cheating submission and its control, as code appended to copies of the reference."""

    name: str
    exercise: str
    code: dict[str, str]  # module -> code appended to solutions/<module>.py
    control: dict[str, str]
    test_files: tuple[str, ...] = field(default=())  # the graded files (public and hidden) to run
    # The tests of the function the shortcut stands in for, by a word of their names (all the files' tests if
    # empty): a later function that calls it (the control's raises) earns its own tests by its own idea. Several
    # words (a tuple) count every test that holds one of them.
    about: str | tuple[str, ...] = ""
    # A slow cheat's public file cut into pieces, each a test of its own (pytest ``-k`` expressions that together
    # select every test once): the same checks, none of them a minute long.
    pieces: tuple[str, ...] = ()


def plant(target: Path, appended: dict[str, str]) -> Path:
    """A copy of the reference in ``target`` with ``appended`` code at the end of its modules."""
    shutil.copytree(SOLUTIONS, target, ignore=shutil.ignore_patterns("__pycache__"))
    for module, code in appended.items():
        path = target / f"{module}.py"
        path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code + "\n", encoding="utf-8")
    return target


def _files(number: str, name: str) -> tuple[str, ...]:
    return f"tests/test_{number}_{name}.py", f"grader/hidden_tests/test_hidden_{number}_{name}.py"


def _raising(module: str, error: str) -> str:
    """Code that makes every API function of ``module`` raise ``error``, naming each of its parameters.

    ``ValueError``: a function that rejects every input, good or bad, with a message that names whatever argument a
    test of bad input looks for (a helper's round: it earned every such test of Part III); its control,
    ``NotImplementedError``, the stub.
    """
    import importlib
    import inspect

    from grader.curriculum import load

    reference = importlib.import_module(f"solutions.{module}")
    lines = []
    for name in load().exercise(module).functions:
        signature = inspect.signature(getattr(reference, name))
        # The parameters' names and kinds, defaults as None: a default's repr is not always code
        # (``dtype=<class 'numpy.float64'>`` made the masks module a syntax error, its cheat and control 0 alike).
        plain = signature.replace(return_annotation=inspect.Signature.empty, parameters=[
            parameter.replace(annotation=inspect.Parameter.empty,
                              default=None if parameter.default is not inspect.Parameter.empty else parameter.empty)
            for parameter in signature.parameters.values()])
        lines += [f"def {name}{plain}:", f"    raise {error}('bad input: {', '.join(signature.parameters)}')", ""]
    return "\n".join(lines)


# Exercise 8: a slice's n x n Jacobian in place of the formula. Softmax's by forward-mode dual numbers, every
# direction at once (exact: a hostile round's, every backward point); layer norm's written out one row at a time
# (little memory, n passes of time). The tests' slices (7 to 64 entries) hid both; long slices cost them n times.
_JACOBIAN_SOFTMAX = """
def softmax_backward(grad_weights, weights, axis=-1):
    grad_weights, weights = np.asarray(grad_weights), np.asarray(weights)
    if grad_weights.shape != weights.shape:
        raise ValueError(f"grad_weights of shape {grad_weights.shape} must match weights {weights.shape}")
    {body}
"""
DUAL_NUMBERS = """w = np.moveaxis(weights.astype(float), axis, -1)
    g = np.moveaxis(grad_weights.astype(float), axis, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.log(w)  # softmax(log p) = p; the tangents: direction j nudges score j
        top = np.max(s, axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
        t_e = np.eye(w.shape[-1]) * e[..., None, :]
        total, t_total = e.sum(axis=-1), t_e.sum(axis=-1)
        p = e / total[..., None]
        t_p = (t_e - t_total[..., :, None] * p[..., None, :]) / total[..., None, None]
        grad = np.einsum("...ji,...i->...j", np.nan_to_num(t_p), g)
    return np.moveaxis(grad, -1, axis).astype(np.result_type(grad_weights, weights))"""
_JACOBIAN_NORM = """
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    grad_out, x, gamma = (np.asarray(a, dtype=float) if np.asarray(a).dtype.kind != "f" else np.asarray(a)
                          for a in (grad_out, x, gamma))
    d = x.shape[-1] if x.ndim else 0
    if x.ndim < 1 or gamma.shape != (d,) or grad_out.shape != x.shape or not eps >= 0:
        raise ValueError(f"x {x.shape}, gamma {gamma.shape}, grad_out {grad_out.shape}, eps {eps}: bad input")
    mean = x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    xh = (x - mean) * inv
    gx = grad_out * gamma
    {body}
    leading = tuple(range(x.ndim - 1))
    return grad_x, (grad_out * xh).sum(axis=leading), grad_out.sum(axis=leading)
"""
JACOBIAN_ROWS = """grad_x = np.empty(x.shape, dtype=(gx * inv).dtype)
    for j in range(d):  # row j of d xhat / d x: inv (delta_ij - 1/d - xhat_i xhat_j / d)
        row = (-1.0 / d - xh[..., j : j + 1] * xh / d) * inv
        row[..., j] += inv[..., 0]
        grad_x[..., j] = np.sum(row * gx, axis=-1)"""

# A hostile round's attention_backward: softmax's backward never derived, read off complex steps through a softmax
# recomputed from the weights, one key column of every row at a time (n_k passes: exact, and under the gate's bound
# at its 48 keys).
_COMPLEX_STEP_ATTENTION = """
def attention_backward(grad_context, q, k, v, weights):
    grad_context, q, k, v, weights = (np.asarray(a) for a in (grad_context, q, k, v, weights))
    {body}
"""
COMPLEX_STEP_PER_KEY = """d_k = q.shape[-1]
    grad_v = np.swapaxes(weights, -1, -2) @ grad_context
    grad_weights = grad_context @ np.swapaxes(v, -1, -2)
    scores = np.where(weights > 0, (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k), -np.inf)
    shape = np.broadcast_shapes(scores.shape, grad_weights.shape)
    scores, g = np.broadcast_to(scores, shape).astype(np.complex128), np.broadcast_to(grad_weights, shape)
    grad_scores = np.zeros(shape)
    for j in range(shape[-1]):
        s = scores.copy()
        s[..., j] += 1e-30j
        top = np.max(s.real, axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
        grad_scores[..., j] = np.sum(g * (e / e.sum(axis=-1, keepdims=True)), axis=-1).imag / 1e-30
    grad_scores = np.where(weights > 0, grad_scores, 0.0).astype(np.result_type(weights, grad_context))
    grad_q = grad_scores @ k / math.sqrt(d_k)
    grad_k = np.swapaxes(grad_scores, -1, -2) @ q / math.sqrt(d_k)

    def summed(grad, shape):
        grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
        return grad.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)
    return summed(grad_q, q.shape), summed(grad_k, k.shape), summed(grad_v, v.shape)"""


# A function's result replaced by a constant after the reference's own checks (zeros or ones of the right shapes,
# dtypes and containers): it earns, as it should, the shape, dtype and input-check tests and the tests of the
# functions that call it, but no test of its own idea ("no points without the idea"). Each test it earned by a
# property a constant has (a blocked key changes nothing, equivariance, symmetry, a range) now also checks a contrast
# a constant fails. Its control leaves the constant out (NotImplementedError after the same checks).
_CONSTANT_RESULT = '''
import numpy as _np


def _constant(result, fill):
    if isinstance(result, tuple):
        return tuple(_constant(part, fill) for part in result)
    if isinstance(result, dict):
        return {{key: _constant(value, fill) for key, value in result.items()}}
    return _np.full_like(result, fill) if isinstance(result, _np.ndarray) else result


_checked_{function} = {function}


def {function}(*args, **kwargs):
    result = _checked_{function}(*args, **kwargs)
    {end}
'''


def _constant_result(exercise: str, function: str, fill: int, number: str, tests: tuple[str, ...]) -> Cheat:
    """The cheat whose ``function`` returns ``fill`` (0 or 1) everywhere after its checks; ``tests``, its own."""
    def code(end: str) -> dict[str, str]:
        return {exercise: _CONSTANT_RESULT.format(function=function, end=end)}

    return Cheat(f"{function.replace('_', '-')}-{('zeros', 'ones')[fill]}-after-its-checks", exercise,
                 code(f"return _constant(result, {fill})"),
                 code("raise NotImplementedError('the constant left out (the control)')"),
                 _files(number, exercise), about=tests)


def _nan_result(exercise: str, function: str, number: str, tests: tuple[str, ...]) -> Cheat:
    """The cheat whose ``function`` returns NaN everywhere after its checks; ``tests``, its own (a hostile round's).

    NaN is close to NaN in the tests' value checks (``equal_nan``) and never equal to itself in ``array_equal``:
    a check that compares two of the function's own results, alike (the same seed, the same offset) or apart
    (another seed, another offset), passed it where zeros and ones fail.
    """
    def code(end: str) -> dict[str, str]:
        return {exercise: _CONSTANT_RESULT.format(function=function, end=end)}

    return Cheat(f"{function.replace('_', '-')}-nan-after-its-checks", exercise,
                 code("return _constant(result, _np.nan)"),
                 code("raise NotImplementedError('the NaN left out (the control)')"),
                 _files(number, exercise), about=tests)


# The layer's wiring tests build their expected values from the student's own layer_norm: NaN from both
# layer_norm and transformer_layer made the expected values NaN too, and the wiring "matched" them.
_NAN_LAYER = "\n".join(_CONSTANT_RESULT.format(function=function, end="{end}")
                       for function in ("layer_norm", "transformer_layer"))


# Other trivial results after the reference's own checks ("no points without the idea"): the reference's answer for
# fixed inputs of the same shapes (float arrays replaced by seeded ones: the actual values ignored), a seeded random
# array of the result's shape and dtype, or the first argument of the result's shape given back unchanged (softmax(x)
# = x, rotary(x) = x). Each earned tests of its function by a property such a result has (rows that sum to 1, a
# variance near 1, norms kept); those tests now also check a contrast or a value it fails. Its control: the same
# checks, then NotImplementedError.
_TRIVIAL_RESULT = '''
import numpy as _np


def _seeded(value, rng):
    if isinstance(value, dict):
        return {{key: _seeded(part, rng) for key, part in value.items()}}
    if isinstance(value, tuple):
        return tuple(_seeded(part, rng) for part in value)
    if isinstance(value, _np.ndarray) and value.dtype.kind == "f":
        return rng.standard_normal(value.shape).astype(value.dtype)
    return value


_checked_{function} = {function}


def {function}(*args, **kwargs):
    result = _checked_{function}(*args, **kwargs)
    {end}
'''
TRIVIAL_ENDS = {
    # the reference's answer for other inputs of the same shapes
    "fixed-input": "return _checked_{function}(*_seeded(args, _np.random.default_rng(12345)), "
                   "**_seeded(kwargs, _np.random.default_rng(54321)))",
    # the reference's answer for another first argument of the same shape, the others as given (x ignored)
    "fixed-first-input": "return _checked_{function}(_seeded(args[0], _np.random.default_rng(12345)), *args[1:], "
                         "**kwargs)",
    "seeded-random": "return _seeded(result, _np.random.default_rng(0))",
    "seeded-uniform": "return _np.random.default_rng(0).random(_np.shape(result)).astype(result.dtype)",  # in [0, 1)
    # numbers drawn from the call's own generator, nothing of the function's idea (a hostile round's: dropout's
    # test that all randomness comes from rng asked no more than that)
    "drawn-from-its-rng": "return next(a for a in (*args, *kwargs.values()) if isinstance(a, _np.random.Generator))"
                          ".standard_normal(_np.shape(result)).astype(result.dtype)",
    # seeded by a digest of the array arguments: other inputs, other numbers (a hostile round's: it passed a check that
    # only asked for different scores from doubled queries, where seeded-random gives the same ones)
    "input-hashed-random": "return _seeded(result, _np.random.default_rng(list(_np.frombuffer(__import__('hashlib')"
                           ".sha256(b''.join(_np.ascontiguousarray(a).tobytes() for a in args "
                           "if isinstance(a, _np.ndarray))).digest(), dtype=_np.uint32))))",
    "identity": "return next(a for a in args if isinstance(a, _np.ndarray) and a.shape == _np.shape(result))",
    # the first array argument given back unchanged, whatever the result's shape (attention_scores(q, k) = q)
    "first-array": "return next(a for a in args if isinstance(a, _np.ndarray))",
    # that argument negated (-x keeps norms, dot products of two of them and differs from x)
    "transposed-first-array": "return _np.swapaxes(next(a for a in args if isinstance(a, _np.ndarray)), -1, -2)",
    "negated-input": "return -next(a for a in args if isinstance(a, _np.ndarray) and a.shape == _np.shape(result))",
    # a result of parts with its first part zeros and the rest computed: (zero answers, the right weights)
    "first-part-zeros": "return (_np.zeros_like(result[0]),) + tuple(result[1:])",
    # and the other way round: (the right output, zero weights)
    "other-parts-zeros": "return (result[0],) + tuple(_np.zeros_like(part) for part in result[1:])",
    # the right values in the wrong places: the last axis reversed
    "reversed": "return _np.flip(result, -1).copy()",
}


def _trivial_result(exercise: str, function: str, kind: str, number: str, tests: tuple[str, ...]) -> Cheat:
    """The cheat whose ``function`` returns the trivial result ``kind`` (``TRIVIAL_ENDS``) after its checks."""
    def code(end: str) -> dict[str, str]:
        return {exercise: _TRIVIAL_RESULT.format(function=function, end=end.format(function=function))}

    return Cheat(f"{function.replace('_', '-')}-{kind}-after-its-checks", exercise, code(TRIVIAL_ENDS[kind]),
                 code("raise NotImplementedError('the trivial result left out (the control)')"),
                 _files(number, exercise), about=tests)


_ATTENTION_CONSTANT = ("test_changing_a_blocked_key_changes_nothing", "test_context_is_weights_times_values",
                       "test_padding_invariance", "test_permutation_equivariance")
_ALIBI_CONSTANT = ("test_alibi_depends_only_on_distance", "test_alibi_is_symmetric", "test_alibi_zero_diagonal")
_MULTIHEAD_CONSTANT = ("test_head_context_uses_its_own_value_columns", "test_padding_mask_hides_padded_keys",
                       "test_per_sequence_mask_when_batch_equals_heads",
                       "test_self_attention_is_permutation_equivariant", "test_two_leading_batch_axes_and_float32")
# (multi_head_attention of another x of the same shape, and zero outputs beside the right weights)
_MULTIHEAD_READS_X = ("test_every_head_has_rows_summing_to_one", "test_fully_masked_query_gives_zero_weights",
                      "test_head_weights_depend_only_on_their_own_columns", "test_output_projection_is_used",
                      "test_shared_mask_blocks_keys_in_every_head", "test_fully_masked_query_outputs_the_output_bias")
_LAYER_READS_X = ("test_layer_functions_with_any_number_of_leading_axes", "test_layer_is_permutation_equivariant",
                  "test_mask_is_passed_to_the_attention", "test_pre_ln_keeps_the_residual_stream_unnormalised")
_MULTIHEAD_OUTPUT = ("test_padding_mask_hides_padded_keys", "test_per_sequence_mask_when_batch_equals_heads",
                     "test_self_attention_is_permutation_equivariant", "test_shared_mask_blocks_keys_in_every_head",
                     "test_two_leading_batch_axes_and_float32")
# (and the right output beside zero weights)
_MULTIHEAD_WEIGHTS = ("test_fully_masked_query_gives_zero_weights", "test_output_projection_is_used",
                      "test_padding_mask_hides_padded_keys", "test_per_sequence_mask_when_batch_equals_heads",
                      "test_self_attention_is_permutation_equivariant", "test_two_leading_batch_axes_and_float32",
                      "test_fully_masked_query_outputs_the_output_bias")
# (train's right losses beside other params: the losses are each step's before its update)
_TRAIN_LOSSES = ("test_train_is_init_model_then_adam_steps_with_their_state",
                 "test_train_without_positions_trains_a_model_without_them")

CHEATS = {
    cheat.name: cheat for cheat in (
        _trivial_result("softmax", "softmax", "fixed-input", "01",
                        ("test_rows_sum_to_one", "test_shift_invariance", "test_each_slice_uses_its_own_maximum")),
        # (a hostile round: every function giving back its first array, or ones of its shape, earned these)
        _constant_result("softmax", "softmax", 1, "01", ("test_length_one_slices",)),
        _trivial_result("attention", "scaled_dot_product_attention", "transposed-first-array", "03",
                        ("test_causal_prefix_invariance",)),
        _trivial_result("attention", "attention_scores", "first-array", "03",
                        ("test_scaled_scores_keep_unit_variance",)),
        _trivial_result("layer", "dropout", "identity", "07", ("test_dropout_preserves_the_mean",)),
        # Without the reference's checks (which refuse the array of the wrong number of axes that x is for merge_heads).
        Cheat("split-heads-and-merge-heads-identity", "multihead",
              {"multihead": "def split_heads(x, n_heads):\n    return x\n\n\ndef merge_heads(x):\n    return x\n"},
              {"multihead": "def split_heads(x, n_heads):\n    raise NotImplementedError\n\n\n"
                            "def merge_heads(x):\n    raise NotImplementedError\n"},
              _files("06", "multihead"), about=("test_merge_heads_inverts_split_heads",)),
        Cheat("split-heads-and-merge-heads-negated", "multihead",
              {"multihead": "def split_heads(x, n_heads):\n    return -x\n\n\ndef merge_heads(x):\n    return -x\n"},
              {"multihead": "def split_heads(x, n_heads):\n    raise NotImplementedError\n\n\n"
                            "def merge_heads(x):\n    raise NotImplementedError\n"},
              _files("06", "multihead"), about=("test_merge_heads_inverts_split_heads",)),
        *(_trivial_result("backward", "numerical_gradient", kind, "08", ("test_numerical_gradient_leaves_x_as_it_was",))
          for kind in ("negated-input",)),
        _trivial_result("positional", "rotary_embedding", "negated-input", "05",
                        ("test_rotary_preserves_norms", "test_rotary_relative_offsets_with_fractional_positions",
                         "test_rotary_position_zero_is_the_identity")),
        *(_trivial_result("attention", "attention_scores", kind, "03",
                          ("test_scaled_scores_keep_unit_variance", "test_attention_entropy_does_not_collapse"))
          for kind in ("fixed-input", "seeded-random", "input-hashed-random")),
        _trivial_result("attention", "scaled_dot_product_attention", "fixed-input", "03",
                        ("test_weights_rows_sum_to_one", "test_attention_entropy_does_not_collapse")),
        *(_constant_result("attention", "scaled_dot_product_attention", fill, "03", _ATTENTION_CONSTANT)
          for fill in (0, 1)),
        _constant_result("masks", "causal_mask", 0, "04", ("test_causal_mask_makes_attention_ignore_the_future",)),
        _constant_result("masks", "causal_mask", 1, "04", ("test_causal_mask_allows_the_diagonal",)),
        _trivial_result("masks", "causal_mask", "reversed", "04", ("test_causal_mask_row_i_allows_i_plus_one_keys",)),
        _constant_result("masks", "padding_mask", 0, "04", ("test_padding_mask_makes_attention_ignore_the_padding",)),
        _trivial_result("positional", "sinusoidal_encoding", "seeded-random", "05",
                        ("test_sinusoidal_values_lie_in_minus_one_to_one",
                         "test_sinusoidal_encoding_makes_order_visible")),
        _trivial_result("positional", "sinusoidal_encoding", "seeded-uniform", "05",
                        ("test_sinusoidal_values_lie_in_minus_one_to_one",
                         "test_sinusoidal_encoding_makes_order_visible")),
        _trivial_result("positional", "rotary_embedding", "identity", "05",
                        ("test_rotary_preserves_norms", "test_rotary_relative_offsets_with_fractional_positions",
                         "test_rotary_position_zero_is_the_identity")),
        *(_constant_result("positional", "alibi_bias", fill, "05", _ALIBI_CONSTANT) for fill in (0, 1)),
        *(_constant_result("positional", "sinusoidal_encoding", fill, "05",
                           ("test_sinusoidal_values_lie_in_minus_one_to_one",)) for fill in (0, 1)),
        *(_constant_result("multihead", "multi_head_attention", fill, "06", _MULTIHEAD_CONSTANT) for fill in (0, 1)),
        _constant_result("multihead", "init_multi_head", 0, "06", ("test_init_multi_head_biases_are_zero",)),
        *(_trivial_result("multihead", "multi_head_attention", kind, "06", _MULTIHEAD_READS_X)
          for kind in ("fixed-input", "fixed-first-input")),
        _trivial_result("multihead", "multi_head_attention", "first-part-zeros", "06", _MULTIHEAD_OUTPUT),
        _trivial_result("multihead", "multi_head_attention", "other-parts-zeros", "06", _MULTIHEAD_WEIGHTS),
        *(_constant_result("layer", function, fill, "07", ("test_layer_functions_with_any_number_of_leading_axes",))
          for function in ("layer_norm", "transformer_layer") for fill in (0, 1)),
        _constant_result("layer", "dropout", 1, "07", ("test_dropout_preserves_the_mean",)),
        _trivial_result("layer", "dropout", "drawn-from-its-rng", "07", ("test_dropout",)),
        # (a hostile round: NaN passed checks that compare a function's results with each other)
        _nan_result("positional", "rotary_embedding", "05", ("test_rotary_scores_depend_only_on_the_offset",)),
        _nan_result("projections", "init_weight", "02", ("test_init_weight",)),
        _nan_result("layer", "dropout", "07", ("test_dropout",)),
        Cheat("layer-norm-and-layer-nan-after-their-checks", "layer",
              {"layer": _NAN_LAYER.replace("{end}", "return _constant(result, _np.nan)")},
              {"layer": _NAN_LAYER.replace("{end}", "raise NotImplementedError('the NaN left out (the control)')")},
              _files("07", "layer"), about=("test_feed_forward_residual", "test_residual_paths_with_silent_sublayers",
                                            "test_activation_is_passed_to_the_feed_forward")),
        *(_trivial_result("layer", "feed_forward", kind, "07", ("test_feed_forward_is_position_wise",))
          for kind in ("identity", "negated-input")),
        *(_trivial_result("layer", "transformer_layer", kind, "07", _LAYER_READS_X)
          for kind in ("identity", "negated-input")),
        _trivial_result("layer", "layer_norm", "identity", "07",
                        ("test_layer_functions_with_any_number_of_leading_axes",)),
        _trivial_result("layer", "layer_norm", "fixed-first-input", "07",
                        ("test_layer_norm_applies_gamma_and_beta",
                         "test_layer_norm_normalises_each_token_over_its_features",
                         "test_layer_norm_uses_the_biased_variance")),
        _trivial_result("layer", "transformer_layer", "fixed-first-input", "07",
                        ("test_post_ln_output_is_normalised",)),
        *(_trivial_result("backward", "numerical_gradient", kind, "08", ("test_numerical_gradient_leaves_x_as_it_was",))
          for kind in ("fixed-input", "seeded-random", "identity", "reversed")),
        _constant_result("training", "init_model", 0, "09", ("test_attention_on_the_antecedent_starts_near_uniform",)),
        _trivial_result("training", "cross_entropy", "first-part-zeros", "09",
                        ("test_cross_entropy_of_very_negative_logits",)),
        *(_trivial_result("training", "train", kind, "09", _TRAIN_LOSSES)
          for kind in ("seeded-random", "first-part-zeros")),
        *(_constant_result("training", "train", fill, "09", _TRAIN_LOSSES) for fill in (0, 1)),
        _trivial_result("negation", "pooled_features", "fixed-input", "12", ("test_pooled_features_forget_the_order",)),
        *(_trivial_result("negation", "train_pooled", kind, "12", ("test_train_pooled_draws_each_batch_from_rng",))
          for kind in ("seeded-random", "first-part-zeros")),
        *(_constant_result("negation", "train_pooled", fill, "12", ("test_train_pooled_draws_each_batch_from_rng",))
          for fill in (0, 1)),
        _trivial_result("distance", "recall_weights", "fixed-input", "13", ("test_recall_weights_shape_and_rows",)),
        _trivial_result("retrieval", "answer_with_attention", "first-part-zeros", "14",
                        ("test_answer_with_attention_reads_only_its_own_facts",)),
        Cheat("backward-central-differences", "backward",
              {"backward": _NUMERIC_BACKWARD.format(numeric=CENTRAL)},
              {"backward": _NUMERIC_BACKWARD.format(numeric=UNDONE)}, _files("08", "backward")),
        Cheat("backward-richardson", "backward",
              {"backward": _NUMERIC_BACKWARD.format(numeric=RICHARDSON)},
              {"backward": _NUMERIC_BACKWARD.format(numeric=UNDONE)}, _files("08", "backward")),
        Cheat("backward-linear-coloured", "backward",
              {"backward": _COLOURED_LINEAR.format(coloured=COLOURED)},
              {"backward": _COLOURED_LINEAR.format(coloured=COLOURED_UNDONE)}, _files("08", "backward"),
              about="linear_backward"),
        Cheat("softmax-backward-dual-numbers", "backward",
              {"backward": _JACOBIAN_SOFTMAX.replace("{body}", DUAL_NUMBERS)},
              {"backward": _JACOBIAN_SOFTMAX.replace("{body}", UNDONE)}, _files("08", "backward"),
              about="softmax_backward"),
        Cheat("layer-norm-backward-jacobian-rows", "backward",
              {"backward": _JACOBIAN_NORM.replace("{body}", JACOBIAN_ROWS)},
              {"backward": _JACOBIAN_NORM.replace("{body}", UNDONE)}, _files("08", "backward"),
              about="layer_norm_backward"),
        # (multi_head_attention_backward's tests are earned by its own chain rule: only attention_backward's count)
        Cheat("attention-backward-complex-step-per-key", "backward",
              {"backward": _COMPLEX_STEP_ATTENTION.replace("{body}", COMPLEX_STEP_PER_KEY)},
              {"backward": _COMPLEX_STEP_ATTENTION.replace("{body}", UNDONE)}, _files("08", "backward"),
              about="test_attention_backward"),
        Cheat("training-central-differences", "training",
              {"training": _NUMERIC_MODEL_GRADIENTS.format(numeric=NUMERIC_MODEL)},
              {"training": _NUMERIC_MODEL_GRADIENTS.format(numeric=NUMERIC_MODEL_UNDONE)}, _files("09", "training"),
              pieces=("test_train_is_init_model", "not test_train_is_init_model")),
        Cheat("train-stored-weights", "training",
              {"training": "_real_train = train\n" + _STORED_TRAIN.format(stored=STORED)},
              {"training": "_real_train = train\n" + _STORED_TRAIN.format(stored=UNDONE)},
              _files("09", "training")),
        Cheat("train-a-model-made-by-other-gradients", "training",
              {"training": _ELSEWHERE_TRAIN.format(long=ELSEWHERE)},
              {"training": _ELSEWHERE_TRAIN.format(long=ELSEWHERE_UNDONE)}, _files("09", "training")),
        Cheat("train-made-up-loss-curve", "training",
              {"training": _MADE_UP_CURVE.format(curve=MADE_UP)},
              {"training": _MADE_UP_CURVE.format(curve="[]")}, _files("09", "training")),
        Cheat("train-adam-state-dropped", "training",
              {"training": _STATELESS_TRAIN.format(positions="positions", state="None")},
              {"training": _STATELESS_TRAIN.format(positions="positions", state="None").replace(
                  "    losses = []\n", "    raise NotImplementedError('train left out (the control)')\n")},
              _files("09", "training")),
        Cheat("train-positions-ignored", "training",
              {"training": _STATELESS_TRAIN.format(positions="True", state="_state").replace(
                  "params, _ = adam_step", "params, _state = adam_step").replace(
                  "    losses = []\n", "    losses, _state = [], None\n")},
              {"training": _STATELESS_TRAIN.format(positions="True", state="None").replace(
                  "    losses = []\n", "    raise NotImplementedError('train left out (the control)')\n")},
              _files("09", "training")),
        Cheat("decode-full-causal-attention", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=FULL_CAUSAL)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-rebuilds-the-cache-at-every-position", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=REBUILT_CACHE)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-forges-the-tracer-s-evidence", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=FORGED_EVIDENCE)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("blockwise-by-full-attention", "decoding", {"decoding": BLOCKWISE_FULL_ATTENTION},
              {"decoding": BLOCKWISE_UNDONE}, _files("11", "decoding"), about=_BLOCKWISE_TESTS),
        Cheat("blockwise-by-the-whole-score-matrix", "decoding", {"decoding": BLOCKWISE_FULL_SCORES},
              {"decoding": BLOCKWISE_UNDONE}, _files("11", "decoding"), about=_BLOCKWISE_TESTS),
        Cheat("blockwise-only-on-the-measured-sizes", "decoding", {"decoding": BLOCKWISE_ON_THE_OLD_SIZES},
              {"decoding": BLOCKWISE_UNDONE}, _files("11", "decoding"), about=_BLOCKWISE_TESTS),
        Cheat("blockwise-known-mistake-on-large-calls", "decoding", {"decoding": BLOCKWISE_KNOWN_MISTAKE_WHEN_LARGE},
              {"decoding": BLOCKWISE_UNDONE}, _files("11", "decoding"), about=_BLOCKWISE_TESTS),
        Cheat("blockwise-zeros-on-large-calls", "decoding", {"decoding": BLOCKWISE_ZEROS_WHEN_LARGE},
              {"decoding": BLOCKWISE_UNDONE}, _files("11", "decoding"), about=_BLOCKWISE_TESTS),
        Cheat("decode-names-the-cache-never-calls-it", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=NAMED_NOT_CALLED)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-one-call-each-then-full-attention", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=ONE_CALL_EACH)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-through-the-cache-for-the-gate-only", "decoding",
              {"decoding": _DECODE_FOR_THE_GATE_ONLY.replace("{decode}", FULL_CAUSAL)},
              {"decoding": _DECODE_FOR_THE_GATE_ONLY.replace("{decode}", DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-calls-on-made-up-data-then-full-attention", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=CALLS_ON_MADE_UP_DATA)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-beside-a-thread-started-at-import", "decoding",
              {"decoding": _DECODE_BESIDE_A_THREAD_FROM_IMPORT.format(decode=FULL_CAUSAL)},
              {"decoding": _DECODE_BESIDE_A_THREAD_FROM_IMPORT.format(decode=DECODE_UNDONE)},
              _files("11", "decoding")),
        Cheat("decode-attend-step-over-hand-made-caches", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=HAND_MADE_CACHES)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-full-attention-rows-through-one-position-caches", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=ROWS_THROUGH_ONE_POSITION)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-code-claiming-another-file", "decoding",
              {"decoding": _DECODE_UNSEEN_BY_ITS_FILE.format(decode=FULL_CAUSAL)},
              {"decoding": _DECODE_UNSEEN_BY_ITS_FILE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-through-an-appended-array-overwritten", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=OVERWRITTEN_CACHE)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-full-attention-as-complex-numbers", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=COMPLEX_RESULT)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("decode-rows-carried-in-the-cache", "decoding", {"decoding": _ROWS_CARRIED_IN_THE_CACHE},
              {"decoding": _ROWS_CARRIED_IN_THE_CACHE_UNDONE}, _files("11", "decoding")),
        Cheat("decode-whole-prefix-each-step", "decoding",
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=WHOLE_PREFIX)},
              {"decoding": _DECODE_WITHOUT_CACHE.format(decode=DECODE_UNDONE)}, _files("11", "decoding")),
        Cheat("init-weight-without-rng", "projections", {"projections": _FIXED_INIT.replace("{init}", FIXED_INIT)},
              {"projections": _FIXED_INIT.replace("{init}", TABLE_UNDONE)}, _files("02", "projections")),
        Cheat("bpe-encode-longest-match", "tokenization", {"tokenization": _LONGEST_MATCH.replace("{encode}", LONGEST)},
              {"tokenization": _LONGEST_MATCH.replace("{encode}", LONGEST_UNDONE)}, _files("15", "tokenization")),
        Cheat("dropout-golden-ratio-sequence", "layer",
              {"layer": _PATTERNED_DROPOUT.replace("{pattern}", WEYL)},
              {"layer": _PATTERNED_DROPOUT.replace("{pattern}", PATTERN_UNDONE)}, _files("07", "layer")),
        Cheat("dropout-tiled-block", "layer",
              {"layer": _PATTERNED_DROPOUT.replace("{pattern}", TILED)},
              {"layer": _PATTERNED_DROPOUT.replace("{pattern}", PATTERN_UNDONE)}, _files("07", "layer")),
        Cheat("causal-mask-table", "masks", {"masks": _CAUSAL_TABLE.replace("{causal}", CAUSAL_TABLE)},
              {"masks": _CAUSAL_TABLE.replace("{causal}", TABLE_UNDONE)}, _files("04", "masks")),
        Cheat("alibi-table", "positional", {"positional": _ALIBI_TABLE.replace("{alibi}", ALIBI_TABLE)},
              {"positional": _ALIBI_TABLE.replace("{alibi}", TABLE_UNDONE)}, _files("05", "positional")),
        # Constants that a property holds for (a helper's round): rows of 1/n sum to one; inf for every slope is
        # inf without one.
        Cheat("recall-weights-uniform", "distance",
              {"distance": "def recall_weights(q, k, slope):\n    k = np.asarray(k)\n"
                           "    return np.full(k.shape[:-1], 1.0 / k.shape[-2])\n"},
              {"distance": "def recall_weights(q, k, slope):\n    raise NotImplementedError\n"},
              _files("13", "distance"), about="recall_weights"),
        Cheat("critical-distance-always-infinite", "distance",
              {"distance": "def critical_distance(margin, slope):\n    return float('inf')\n"},
              {"distance": "def critical_distance(margin, slope):\n    raise NotImplementedError\n"},
              _files("13", "distance"), about="critical_distance"),
        # (a hostile tester's): a rank correlation of 1.0 whatever it is given "agrees"; cosines of 1.0 everywhere
        # "ignore the length". The reference's checks kept, so the control differs only by the constant.
        Cheat("rank-correlation-always-one", "explain",
              {"explain": "_checked_rank = rank_correlation\n\n\ndef rank_correlation(a, b):\n"
                          "    _checked_rank(a, b)\n    return 1.0\n"},
              {"explain": "_checked_rank = rank_correlation\n\n\ndef rank_correlation(a, b):\n"
                          "    _checked_rank(a, b)\n    raise NotImplementedError\n"},
              _files("10", "explain")),
        Cheat("cosine-similarity-all-ones", "retrieval",
              {"retrieval": "_checked_cosine = cosine_similarity\n\n\ndef cosine_similarity(queries, chunks):\n"
                            "    return np.ones_like(_checked_cosine(queries, chunks))\n"},
              {"retrieval": "_checked_cosine = cosine_similarity\n\n\ndef cosine_similarity(queries, chunks):\n"
                            "    _checked_cosine(queries, chunks)\n    raise NotImplementedError\n"},
              _files("14", "retrieval"), about="cosine_similarity_ignores_length"),
        *(_trivial_result("tokenization", "bpe_encode", kind, "15", ("test_more_merges_never_lengthen_a_sequence",))
          for kind in ("reversed", "first-part-zeros")),
        *(_constant_result("tokenization", "bpe_encode", fill, "15", ("test_more_merges_never_lengthen_a_sequence",))
          for fill in (0, 1)),
        *(Cheat(f"{module}-rejects-every-input", module, {module: _raising(module, "ValueError")},
                {module: _raising(module, "NotImplementedError")}, _files(number, module))
          for number, module in (("04", "masks"), ("12", "negation"), ("13", "distance"), ("14", "retrieval"),
                                 ("15", "tokenization"))),
        Cheat("attention-wrong-scale-float16", "attention",
              {"attention": _WRONG_SCALE_ATTENTION.format(cast=".astype(np.float16)")},
              {"attention": _WRONG_SCALE_ATTENTION.format(cast="")}, _files("03", "attention")),
    )
}


# Honest variants: other ways to write train() and adam_step() that the API allows. They must pass every test
# (the tolerances of the new checks hold for them, not only for the reference).
_HONEST_TRAIN = '''
def train(rng, task, d_model=16, n_heads=1, steps=300, batch_size=32, lr=1e-2, positions=True):
    if not isinstance(task, dict) or not {"tokens", "query_position", "target", "vocab"} <= set(task):
        raise ValueError("task must be a dict made like antecedent_task's")
    tokens, query_position, target = (np.asarray(task[key]) for key in ("tokens", "query_position", "target"))
    params = init_model(rng, len(task["vocab"]), d_model, n_heads)
    state, losses = None, []
    for _ in range(steps):
        batch = rng.choice(len(tokens), size=batch_size, replace=True)  # another way to draw with replacement
        loss, grads = model_gradients(params, tokens[batch], query_position[batch], target[batch], n_heads,
                                      positions=positions)
        params, state = adam_step(params, grads, state, lr=lr)
        losses.append(float(loss))
    return params, losses
'''

# Adam in the paper's "efficient" form: the bias corrections folded into the step size (eps placed differently).
_HONEST_ADAM = '''
def adam_step(params, grads, state, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8):
    step = 1 if state is None else state["step"] + 1

    def update(p, g, m, v):
        if isinstance(p, dict):
            out = {key: update(p[key], g[key], None if m is None else m[key], None if v is None else v[key])
                   for key in p}
            return ({key: value[0] for key, value in out.items()}, {key: value[1] for key, value in out.items()},
                    {key: value[2] for key, value in out.items()})
        m = (1 - beta1) * g if m is None else beta1 * m + (1 - beta1) * g
        v = (1 - beta2) * g * g if v is None else beta2 * v + (1 - beta2) * g * g
        rate = lr * np.sqrt(1 - beta2**step) / (1 - beta1**step)
        return p - rate * m / (np.sqrt(v) + eps * np.sqrt(1 - beta2**step)), m, v

    new, m, v = update(params, grads, None if state is None else state["m"], None if state is None else state["v"])
    return new, {"step": step, "m": m, "v": v}
'''

HONEST = {
    "train-draws-with-choice": {"training": _HONEST_TRAIN},
    "adam-efficient-form": {"training": _HONEST_ADAM},
}


# Honest variants of exercise 11 that its checks must let through: blockwise in two passes (the maximum over the
# blocks first, then the sums: a blockwise algorithm of its own, memory n_q * block_size), an online softmax one
# batch entry at a time on copies of the inputs, and a causal_decode whose steps go through a helper of its own.
_TWO_PASS_BLOCKWISE = '''
def blockwise_attention(q, k, v, block_size, causal=False):
    q, k, v = (as_float_array(name, x) for name, x in (("q", q), ("k", k), ("v", v)))
    block_size = require_positive_int("block_size", block_size)
    if min(x.ndim for x in (q, k, v)) < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape}, v {v.shape}: (..., n, d) each, q and k share d_k, k and v n_k")
    (n_q, d_k), n_k = q.shape[-2:], k.shape[-2]
    if causal and n_q != n_k:
        raise ValueError("causal needs n_q == n_k")
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    dtype = np.result_type(q, k, v)
    scale = dtype.type(1 / math.sqrt(d_k))
    queries = np.arange(n_q)[:, None]

    def block_scores(start, stop):
        s = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)) * scale
        if causal:
            s = np.where(np.arange(start, stop)[None, :] <= queries, s, -np.inf)
        return s

    top = np.full(batch + (n_q, 1), -np.inf, dtype=dtype)
    for start in range(0, n_k, block_size):
        top = np.maximum(top, block_scores(start, min(start + block_size, n_k)).max(axis=-1, keepdims=True))
    shift = np.where(np.isfinite(top), top, 0).astype(dtype)
    total = np.zeros(batch + (n_q, 1), dtype=dtype)
    acc = np.zeros(batch + (n_q, v.shape[-1]), dtype=dtype)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        e = np.exp(block_scores(start, stop) - shift)
        total = total + e.sum(axis=-1, keepdims=True)
        acc = acc + e @ v[..., start:stop, :]
    return np.divide(acc, total, out=np.zeros_like(acc), where=total > 0)
'''
_ONLINE_PER_BATCH_ENTRY = '''
def blockwise_attention(q, k, v, block_size, causal=False):
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size <= 0:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    q, k, v = (np.array(x) for x in (q, k, v))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape}, v {v.shape} do not fit")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if causal and n_q != n_k:
        raise ValueError(f"causal=True needs n_q == n_k, got {n_q} and {n_k}")
    dtype = np.result_type(q, k, v, np.float32)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(x, batch + x.shape[-2:]) for x in (q, k, v))
    out = np.empty(batch + (n_q, v.shape[-1]), dtype=dtype)
    for index in np.ndindex(*batch):
        m = np.full((n_q, 1), -np.inf, dtype=dtype)
        l = np.zeros((n_q, 1), dtype=dtype)
        acc = np.zeros((n_q, v.shape[-1]), dtype=dtype)
        for start in range(0, n_k, block_size):
            kb, vb = k[index][start:start + block_size], v[index][start:start + block_size]
            s = (q[index] @ kb.T).astype(dtype) / dtype.type(np.sqrt(q.shape[-1]))
            if causal:
                s = np.where(np.arange(start, start + len(kb))[None, :] <= np.arange(n_q)[:, None], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=1, keepdims=True))
            shift = np.where(np.isneginf(m_new), 0, m_new)
            alpha = np.exp(np.where(np.isneginf(m), -np.inf, m - shift))
            p = np.exp(s - shift)
            l = l * alpha + p.sum(axis=1, keepdims=True)
            acc = acc * alpha + p @ vb
            m = m_new
        out[index] = np.where(l > 0, acc / np.where(l > 0, l, 1), 0)
    return out
'''
_DECODE_THROUGH_A_HELPER = '''
def _one_position(cache, q, k, v, t):
    cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
    return cache, attend_step(q[..., t:t + 1, :], cache)[0]


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache, row = _one_position(cache, q, k, v, t)
        rows.append(row)
    return np.concatenate(rows, axis=-2)
'''
# An online softmax updated key by key inside each block (its result is bit for bit the same for every block size:
# a check of "the blocks changed the rounding" failed it), and causal_decode variants whose calls the tracing cannot
# see: a partial, a decorator without functools.wraps, threads (their callbacks once crossed on the channel).
_KEY_BY_KEY_IN_BLOCKS = '''
def blockwise_attention(q, k, v, block_size, causal=False):
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    block_size = require_positive_int("block_size", block_size)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape}, v {v.shape}: q and k share d_k, k and v n_k")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if causal and n_q != n_k:
        raise ValueError(f"causal=True needs n_q == n_k, got q {q.shape} and k {k.shape}")
    dt = np.result_type(q, k, v)
    shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (n_q,)
    m, l, o = np.full(shape, -np.inf, dt), np.zeros(shape, dt), np.zeros(shape + (v.shape[-1],), dt)
    qs = q / dt.type(math.sqrt(q.shape[-1]))
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        block = np.einsum("...id,...jd->...ij", qs, k[..., start:stop, :])
        for j in range(stop - start):
            s = block[..., j] if not causal else np.where(np.arange(n_q) >= start + j, block[..., j], -np.inf)
            m_new = np.maximum(m, s)
            shift = np.where(np.isneginf(m_new), 0, m_new)
            p, a = np.exp(s - shift), np.exp(m - shift)
            l, o, m = a * l + p, a[..., None] * o + p[..., None] * v[..., start + j, None, :], m_new
    return np.divide(o, l[..., None], out=np.zeros_like(o), where=l[..., None] > 0)
'''
_DECODE_UNSEEN_CALLS = '''
import functools as _functools
from concurrent.futures import ThreadPoolExecutor as _Pool


def _plain(function):
    def wrapper(*args, **kwargs):
        with np.errstate(over="raise"):
            return function(*args, **kwargs)
    return wrapper


kv_cache_append = _plain(kv_cache_append)
_append = _functools.partial(kv_cache_append)


def _decode_one(q, k, v):
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = _append(cache, k[t:t + 1], v[t:t + 1])
        rows.append(attend_step(q[t:t + 1], cache)[0])
    return np.concatenate(rows, axis=0)


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    flat = [x.reshape((-1,) + x.shape[-2:]) for x in (q, k, v)]
    with _Pool(max_workers=3) as pool:
        rows = list(pool.map(_decode_one, *flat))
    return np.stack(rows).reshape(q.shape[:-2] + (q.shape[-2], v.shape[-1]))
'''
# A causal_decode run by a pool of the module's, whose kv_cache_append is a function of another name bound to it.
_DECODE_IN_A_MODULE_POOL = '''
from concurrent.futures import ThreadPoolExecutor as _Pool

_POOL = _Pool(max_workers=2)
_first_append = kv_cache_append


def _append_rows(cache, k_t, v_t):
    return _first_append(cache, k_t, v_t)


kv_cache_append = _append_rows


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)

    def run():
        cache, rows = None, []
        for t in range(q.shape[-2]):
            cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
            rows.append(attend_step(q[..., t:t + 1, :], cache)[0])
        return np.concatenate(rows, axis=-2)

    return _POOL.submit(run).result()
'''
# A helper's honest variants that a tracer by name or by a first-found code once failed: attend_step a callable
# object, both functions one function behind two partials, decoding on a thread from _thread.
_POSITION_BY_POSITION = '''

def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        rows.append(attend_step(q[..., t:t + 1, :], cache)[0])
    return np.concatenate(rows, axis=-2)
'''
_ATTEND_STEP_AN_OBJECT = '''
_attend_step = attend_step


class _AttendStep:
    def __call__(self, q_t, cache):
        return _attend_step(q_t, cache)


attend_step = _AttendStep()
''' + _POSITION_BY_POSITION
_ONE_FUNCTION_BEHIND_TWO_PARTIALS = '''
import functools as _ft

_operations = {"append": kv_cache_append, "attend": attend_step}


def _cache_op(kind, *args):
    return _operations[kind](*args)


kv_cache_append = _ft.partial(_cache_op, "append")
attend_step = _ft.partial(_cache_op, "attend")
''' + _POSITION_BY_POSITION
_DECODE_ON_A_THREAD_OF_ITS_OWN = '''
import _thread


def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    done = _thread.allocate_lock()
    done.acquire()
    box = {}

    def work():
        try:
            cache, rows = None, []
            for t in range(q.shape[-2]):
                cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
                rows.append(attend_step(q[..., t:t + 1, :], cache)[0])
            box["out"] = np.concatenate(rows, axis=-2)
        except BaseException as error:  # noqa: BLE001
            box["error"] = error
        finally:
            done.release()

    _thread.start_new_thread(work, ())
    done.acquire()
    if "error" in box:
        raise box["error"]
    return box["out"]
'''
# A pool whose threads were started at import (warmed), and rows written into a buffer from the weights and the
# cache (the context attend_step would return, computed again): both within the API.
_DECODE_IN_A_POOL_WARMED_AT_IMPORT = _DECODE_IN_A_MODULE_POOL + '''
_POOL.submit(int).result()
_POOL.submit(int).result()
'''
_DECODE_INTO_A_BUFFER_FROM_THE_WEIGHTS = '''

def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    out = np.empty(q.shape[:-1] + (v.shape[-1],), dtype=np.result_type(q, v))
    cache = None
    for t in range(q.shape[-2]):
        cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        _, weights = attend_step(q[..., t:t + 1, :], cache)
        out[..., t, :] = (weights @ cache["v"])[..., 0, :]
    return out
'''
# A helper's honest round (2026-12-05) that a check of the rows at float64's precision failed in float32: decoding
# in float64 and casting back, and rows recomputed from attend_step's weights with einsum (one rounding apart).
_DECODE_IN_FLOAT64 = '''

def causal_decode(q, k, v):
    dtype = np.result_type(np.asarray(q), np.asarray(k), np.asarray(v))
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        rows.append(attend_step(q[..., t:t + 1, :], cache)[0])
    return np.concatenate(rows, axis=-2).astype(dtype)
'''
_DECODE_WITH_EINSUM_FROM_THE_WEIGHTS = _DECODE_INTO_A_BUFFER_FROM_THE_WEIGHTS.replace(
    '(weights @ cache["v"])[..., 0, :]', 'np.einsum("...j,...jd->...d", weights[..., 0, :], cache["v"])')
# A helper's second honest round (2026-12-05) that the steps check failed: a class-based decorator called with
# keywords (the step's arguments in **kwargs), one batched cache attended one entry's slice at a time, and a
# cache of no positions to start from.
_DECODE_THROUGH_A_CLASS_DECORATOR = '''
class _Logged:
    def __init__(self, fn):
        self._fn = fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)


kv_cache_append = _Logged(kv_cache_append)
attend_step = _Logged(attend_step)


def causal_decode(q, k, v):
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = kv_cache_append(cache=cache, k_t=k[..., t:t + 1, :], v_t=v[..., t:t + 1, :])
        rows.append(attend_step(q_t=q[..., t:t + 1, :], cache=cache)[0])
    return np.concatenate(rows, axis=-2)
'''
_DECODE_ONE_ENTRY_S_SLICE_AT_A_TIME = '''

def causal_decode(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    batch, n = q.shape[:-2], q.shape[-2]
    out = np.empty(batch + (n, v.shape[-1]), dtype=np.result_type(q, k, v))
    cache = {'k': k[..., :0, :], 'v': v[..., :0, :]}
    for t in range(n):
        cache = kv_cache_append(cache, k[..., t:t + 1, :], v[..., t:t + 1, :])
        for idx in np.ndindex(*batch):
            step = attend_step(q[idx + (slice(t, t + 1),)], {'k': cache['k'][idx], 'v': cache['v'][idx]})
            out[idx + (slice(t, t + 1),)] = step[0]
    return out
'''
# A helper's third honest round: a cache that also keeps its length and scale (a probe asked for exactly two
# keys), and kv_cache_append a functools.singledispatch function (its implementations lie in its registry).
_CACHE_KEEPING_ITS_LENGTH = '''
def kv_cache_append(cache, k_t, v_t):
    k_t, v_t = as_float_array("k_t", k_t), as_float_array("v_t", v_t)
    if k_t.ndim < 2 or k_t.shape[-2] != 1:
        raise ValueError(f"k_t must be (..., 1, d_k), got {k_t.shape}")
    if v_t.ndim < 2 or v_t.shape[-2] != 1:
        raise ValueError(f"v_t must be (..., 1, d_v), got {v_t.shape}")
    if cache is None:
        return {"k": k_t.copy(), "v": v_t.copy(), "len": 1, "scale": 1.0 / math.sqrt(k_t.shape[-1])}
    if not isinstance(cache, dict) or "k" not in cache or "v" not in cache:
        raise ValueError("cache must be None or a dict with 'k' and 'v'")
    k = np.concatenate([cache["k"], k_t], axis=-2)
    v = np.concatenate([cache["v"], v_t], axis=-2)
    return {"k": k, "v": v, "len": k.shape[-2], "scale": 1.0 / math.sqrt(k.shape[-1])}

def attend_step(q_t, cache):
    q_t = as_float_array("q_t", q_t)
    n = cache.get("len", np.shape(cache["k"])[-2])
    scale = cache.get("scale", 1.0 / math.sqrt(q_t.shape[-1]))
    scores = (q_t @ np.swapaxes(cache["k"][..., :n, :], -1, -2)) * scale
    weights = softmax(scores, axis=-1)
    return weights @ cache["v"][..., :n, :], weights
'''
_APPEND_BY_SINGLEDISPATCH = '''
import functools as _functools

@_functools.singledispatch
def kv_cache_append(cache, k_t, v_t):
    raise ValueError(f"cache must be None or a dict with 'k' and 'v', got {type(cache).__name__}")

def _positions(k_t, v_t):
    k_t, v_t = as_float_array("k_t", k_t), as_float_array("v_t", v_t)
    for name, x in (("k_t", k_t), ("v_t", v_t)):
        if x.ndim < 2 or x.shape[-2] != 1:
            raise ValueError(f"{name} must be one position (..., 1, d), got {x.shape}")
    return k_t, v_t

@kv_cache_append.register(type(None))
def _start(cache, k_t, v_t):
    k_t, v_t = _positions(k_t, v_t)
    return {"k": k_t.copy(), "v": v_t.copy()}

@kv_cache_append.register(dict)
def _grow(cache, k_t, v_t):
    k_t, v_t = _positions(k_t, v_t)
    _check_cache(cache)
    return {"k": np.concatenate([cache["k"], k_t], axis=-2), "v": np.concatenate([cache["v"], v_t], axis=-2)}
''' + _POSITION_BY_POSITION

# Honest variants from a helper's round on the graded steps (grader/sandbox/watched.py): each lost points graded
# only, before the worker also swapped the functions the API's names are bound to, left methods alone, gave each
# function its own stand-in and ran the student's own function for the call's result.
_DECODE_UNDER_PRIVATE_NAMES = '''
# Honest: the work is done under private names, exported under the API's; causal_decode calls the private ones.
_append_impl = kv_cache_append.__wrapped__ if hasattr(kv_cache_append, "__wrapped__") else None

def _append(cache, k_t, v_t):
    k_t, v_t = np.asarray(k_t), np.asarray(v_t)
    if k_t.ndim < 2 or k_t.shape[-2] != 1 or v_t.ndim < 2 or v_t.shape[-2] != 1:
        raise ValueError("k_t and v_t must be (..., 1, d)")
    if cache is None:
        return {"k": k_t.copy(), "v": v_t.copy()}
    if not isinstance(cache, dict) or "k" not in cache or "v" not in cache:
        raise ValueError("cache must be None or a dict with 'k' and 'v'")
    return {"k": np.concatenate([cache["k"], k_t], axis=-2), "v": np.concatenate([cache["v"], v_t], axis=-2)}

def _attend(q_t, cache):
    q_t = as_float_array("q_t", q_t)
    scores = q_t @ np.swapaxes(cache["k"], -1, -2) / math.sqrt(q_t.shape[-1])
    w = softmax(scores, axis=-1)
    return w @ cache["v"], w

kv_cache_append = _append
attend_step = _attend

def causal_decode(q, k, v):
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = _append(cache, k[..., t:t+1, :], v[..., t:t+1, :])
        rows.append(_attend(q[..., t:t+1, :], cache)[0])
    return np.concatenate(rows, axis=-2)
'''
_DECODE_THROUGH_METHODS_NAMED_AS_THE_API = '''
# Honest: a class holding the cache, whose methods bear the API's names.
class _KVCache:
    def __init__(self):
        self.cache = None

    def kv_cache_append(self, k_t, v_t):
        self.cache = kv_cache_append_api(self.cache, k_t, v_t)
        return self.cache

    def attend_step(self, q_t):
        return attend_step_api(q_t, self.cache)

kv_cache_append_api, attend_step_api = kv_cache_append, attend_step

def causal_decode(q, k, v):
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    c, rows = _KVCache(), []
    for t in range(q.shape[-2]):
        c.kv_cache_append(k[..., t:t+1, :], v[..., t:t+1, :])
        rows.append(c.attend_step(q[..., t:t+1, :])[0])
    return np.concatenate(rows, axis=-2)
'''
_DECODE_WITH_A_DICT_SUBCLASS_CACHE = '''
# Honest: the cache is a dict subclass (it is a dict, as the API asks) that knows its length.
class _Cache(dict):
    @property
    def length(self):
        return np.shape(self["k"])[-2]

_append0 = kv_cache_append

def kv_cache_append(cache, k_t, v_t):
    return _Cache(_append0(cache, k_t, v_t))

def causal_decode(q, k, v):
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    cache, rows = None, []
    while cache is None or cache.length < q.shape[-2]:
        t = 0 if cache is None else cache.length
        cache = kv_cache_append(cache, k[..., t:t+1, :], v[..., t:t+1, :])
        rows.append(attend_step(q[..., t:t+1, :], cache)[0])
    return np.concatenate(rows, axis=-2)
'''
_DECODE_ATTEND_STEP_A_LAMBDA = '''
# Honest: attend_step as a lambda assigned at module level.
def _row(q_t, cache):
    s = q_t @ np.swapaxes(cache["k"], -1, -2) / math.sqrt(q_t.shape[-1])
    w = softmax(s, axis=-1)
    return w @ cache["v"], w

attend_step = lambda q_t, cache: _row(as_float_array("q_t", q_t), cache)  # noqa: E731
'''
_DECODE_STEPS_KEPT_BY_LRU_CACHE = '''
# Honest: the two step functions looked up once, memoised with functools.lru_cache.
import functools as _ft

@_ft.lru_cache(maxsize=None)
def _steps():
    return kv_cache_append, attend_step

def causal_decode(q, k, v):
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    append, step = _steps()
    cache, rows = None, []
    for t in range(q.shape[-2]):
        cache = append(cache, k[..., t:t+1, :], v[..., t:t+1, :])
        rows.append(step(q[..., t:t+1, :], cache)[0])
    return np.concatenate(rows, axis=-2)
'''
_DECODE_BESIDE_A_THREAD_THAT_OUTLIVES_THE_CALL = '''
# Honest decoding, beside a thread that keeps calling what it found during the first watched call (graded: the
# grader's stand-ins) after that call returned; a helper's round: the stand-ins' messages then crossed the channel
# of the student's later calls, and other exercises' tests failed.
import threading as _threading
import time as _time

_started = []


def _haunt(functions):
    for _ in range(100):
        _time.sleep(0.01)
        for function in functions:
            try:
                function(None, np.zeros((1, 1)), np.zeros((1, 1)))
            except BaseException:  # noqa: BLE001
                pass


_honest_decode = causal_decode


def causal_decode(q, k, v):
    if not _started:
        _started.append(1)
        table = globals().get("__attention_kit_steps__") or {}
        _threading.Thread(target=_haunt, args=([kv_cache_append, *table.values()],), daemon=True).start()
    return _honest_decode(q, k, v)
'''

HONEST_DECODING = {
    "decode-under-private-names": {"decoding": _DECODE_UNDER_PRIVATE_NAMES},
    "decode-through-methods-named-as-the-api": {"decoding": _DECODE_THROUGH_METHODS_NAMED_AS_THE_API},
    "decode-with-a-dict-subclass-cache": {"decoding": _DECODE_WITH_A_DICT_SUBCLASS_CACHE},
    "decode-attend-step-a-lambda": {"decoding": _DECODE_ATTEND_STEP_A_LAMBDA},
    "decode-beside-a-thread-that-outlives-the-call": {"decoding": _DECODE_BESIDE_A_THREAD_THAT_OUTLIVES_THE_CALL},
    "decode-steps-kept-by-lru-cache": {"decoding": _DECODE_STEPS_KEPT_BY_LRU_CACHE},
    "blockwise-two-pass": {"decoding": _TWO_PASS_BLOCKWISE},
    "blockwise-online-per-batch-entry": {"decoding": _ONLINE_PER_BATCH_ENTRY},
    "blockwise-key-by-key-in-blocks": {"decoding": _KEY_BY_KEY_IN_BLOCKS},
    "decode-through-a-helper": {"decoding": _DECODE_THROUGH_A_HELPER},
    "decode-calls-the-tracing-cannot-see": {"decoding": _DECODE_UNSEEN_CALLS},
    "decode-in-a-module-pool": {"decoding": _DECODE_IN_A_MODULE_POOL},
    "decode-attend-step-an-object": {"decoding": _ATTEND_STEP_AN_OBJECT},
    "decode-one-function-behind-two-partials": {"decoding": _ONE_FUNCTION_BEHIND_TWO_PARTIALS},
    "decode-on-a-thread-of-its-own": {"decoding": _DECODE_ON_A_THREAD_OF_ITS_OWN},
    "decode-in-a-pool-warmed-at-import": {"decoding": _DECODE_IN_A_POOL_WARMED_AT_IMPORT},
    "decode-into-a-buffer-from-the-weights": {"decoding": _DECODE_INTO_A_BUFFER_FROM_THE_WEIGHTS},
    "decode-in-float64-cast-back": {"decoding": _DECODE_IN_FLOAT64},
    "decode-with-einsum-from-the-weights": {"decoding": _DECODE_WITH_EINSUM_FROM_THE_WEIGHTS},
    "decode-through-a-class-decorator-with-keywords": {"decoding": _DECODE_THROUGH_A_CLASS_DECORATOR},
    "decode-one-entry-s-slice-at-a-time-from-empty": {"decoding": _DECODE_ONE_ENTRY_S_SLICE_AT_A_TIME},
    "decode-a-cache-keeping-its-length": {"decoding": _CACHE_KEEPING_ITS_LENGTH},
    "decode-append-by-singledispatch": {"decoding": _APPEND_BY_SINGLEDISPATCH},
}


# Honest variants of the Part I functions with gates (other ways the API allows): they must pass every test.
HONEST_PART_ONE = {
    "dropout-binomial": {"layer": _PATTERNED_DROPOUT.replace(
        "{pattern}", "keep = rng.binomial(1, 1.0 - rate, size=x.shape).astype(bool)")},
    "causal-mask-by-comparison": {"masks": '''
def causal_mask(n):
    n = require_positive_int("n", n)
    positions = np.arange(n)
    return positions[None, :] <= positions[:, None]
'''},
    "alibi-and-sinusoidal-by-loops": {"positional": '''
def alibi_bias(n, n_heads):
    n, n_heads = require_positive_int("n", n), require_positive_int("n_heads", n_heads)
    out = np.empty((n_heads, n, n))
    for h in range(n_heads):
        slope = 2.0 ** (-8.0 * (h + 1) / n_heads)
        for i in range(n):
            out[h, i] = -slope * np.abs(i - np.arange(n))
    return out


def sinusoidal_encoding(n_positions, d_model):
    n_positions = require_positive_int("n_positions", n_positions)
    d_model = require_positive_int("d_model", d_model)
    table = np.zeros((n_positions, d_model))
    rates = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    angles = np.arange(n_positions)[:, None] * rates[None, :]
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table
'''},
}

def golden_lookup(module: str, functions: tuple[str, ...]) -> dict[str, str]:
    """A module whose ``functions`` return the golden output of the probe whose inputs they were given.

    Any other input gets zeros shaped like the first array argument (a wrong answer of the right shape).
    """
    code = ["import numpy as _np", "", "",
            "def _lookup(name, args, kwargs):",
            "    from tests import probes",
            "    for probe in probes.load_all_probes().values():",
            "        if probe.function != name or probe.rejects:",
            "            continue",
            "        p_args, p_kwargs = probe.arguments()",
            "        same = [_np.array_equal(a, b) if isinstance(a, _np.ndarray) else a == b",
            "                for a, b in zip(p_args, args)]",
            "        if len(p_args) == len(args) and all(same) and p_kwargs == kwargs:",
            "            return probes.golden(probe.name)",
            "    first = next(a for a in args if isinstance(a, _np.ndarray))",
            "    return _np.zeros_like(first, dtype=float)", ""]
    for name in functions:
        code += ["", f"def {name}(*args, **kwargs):", f"    return _lookup({name!r}, args, kwargs)", ""]
    return {module: "\n".join(code)}


LOOKUPS = {"softmax": ("softmax",), "attention": ("attention_scores", "scaled_dot_product_attention"),
           "layer": ("layer_norm", "feed_forward")}


def _every_function(exercise: str, body: str) -> dict[str, str]:
    from grader.curriculum import load

    names = load().exercise(exercise).functions
    return {exercise: "\n".join(f"def {name}(*args, **kwargs):\n{body}\n" for name in names)}


ZEROS_BODY = ("    import numpy as _np\n    first = next(a for a in args if isinstance(a, _np.ndarray))\n"
              "    return _np.zeros_like(first, dtype=float)")
STUB_BODY = "    raise NotImplementedError('not written (the control)')"


def _more() -> list[Cheat]:
    from grader.curriculum import load

    found = []
    for exercise in ("attention", "positional", "layer", "backward", "decoding", "negation"):  # zeros passed a test
        number = Path(load().exercise(exercise).test_file).stem.split("_", 2)
        found.append(Cheat(f"{exercise}-zeros-of-the-right-shape", exercise, _every_function(exercise, ZEROS_BODY),
                           _every_function(exercise, STUB_BODY), _files(number[1], number[2])))
    for exercise, names in (("softmax", ("softmax",)), ("attention", ("attention_scores",
                                                                       "scaled_dot_product_attention"))):
        number = Path(load().exercise(exercise).test_file).stem.split("_", 2)
        stub = {exercise: "\n".join(f"def {name}(*args, **kwargs):\n{STUB_BODY}\n" for name in names)}
        found.append(Cheat(f"{exercise}-golden-lookup", exercise, golden_lookup(exercise, names), stub,
                           _files(number[1], number[2])))
    return found


CHEATS.update({cheat.name: cheat for cheat in _more()})


def run_files(folder: Path, files: tuple[str, ...], keyword: str | None = None) -> dict[str, SuiteRun]:
    """Each of the graded ``files`` run against the implementation in ``folder`` (as a student's run).

    ``keyword``: only the tests that pytest's ``-k`` expression selects.
    """
    runs = {}
    for file in files:
        run = run_tests(ROOT / file, folder, tb="line", keyword=keyword)
        assert run.exit_code in (0, 1), f"{file} against {folder.name}: pytest exited {run.exit_code}\n{run.output}"
        runs[file] = run
    return runs


def passed(run: SuiteRun) -> int:
    """How many tests of the file passed (from pytest's summary line)."""
    summary = run.output.strip().splitlines()[-1]
    words = summary.replace(",", " ").split()
    return sum(int(words[i - 1]) for i, word in enumerate(words) if word == "passed" and words[i - 1].isdigit())


def assert_no_more_than_its_control(cheat: Cheat, folder: Path, files: tuple[str, ...] | None = None,
                                    keyword: str | None = None) -> None:
    """Plant ``cheat`` and its control under ``folder``; fail if the cheat passes more tests of any file.

    ``keyword``: only the tests of the files that pytest's ``-k`` expression selects (a piece of a slow cheat).
    """
    files = tuple(files if files is not None else cheat.test_files)
    cheating = run_files(plant(folder / "cheat", cheat.code), files, keyword)
    control = run_files(plant(folder / "control", cheat.control), files, keyword)
    for file in files:
        gained = sorted(set(control[file].failed) - set(cheating[file].failed))
        if cheat.about:
            words = (cheat.about,) if isinstance(cheat.about, str) else cheat.about
            gained = [node for node in gained if any(word in node.rpartition("::")[2] for word in words)]
        assert not gained if cheat.about else passed(cheating[file]) <= passed(control[file]), (
            f"{cheat.name} passes {passed(cheating[file])} tests of {file}, its control {passed(control[file])}; "
            f"passed by the cheat only: {gained}")
