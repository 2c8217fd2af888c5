"""Exercise 8: gradients by hand. Every gradient is checked against central differences computed here.

The expected gradients never come from your code (not even from your
numerical_gradient): each test writes its own forward pass, takes a scalar
loss ``sum(R * output)`` with a seeded random ``R`` (so ``R`` is the
``grad_out`` the backward function gets), and nudges inputs by +-1e-6.
"""

from __future__ import annotations

import numpy as np

from tests import unseen
from tests.effort import (
    cpu_call,
    cpu_seconds_per_call,
    expect_varies,
    message,
    once,
    seed_of,
    submission_salt,
    within_budget,
)
from tests.failures import Failure, fail_check, recorded_so_far
from tests.feedback import call_or_explain, expect, expect_close, expect_dtype, expect_raises_value_error, expect_shape
from tests.kit import PlainFunction
from tests.own_models import (  # noqa: F401  (hidden tests import them from here too)
    RULE,
    STEP,
    _attention,
    _central,
    _layer_norm,
    _mha,
    _softmax,
    expect_gradient,
)
from tests.probes import probe
from tests.steps import names

# Every size differs, so a swapped axis changes a shape instead of hiding.
BATCH, N_HEADS, N_Q, N_K, D_K, D_V = 2, 3, 5, 7, 4, 6
D_IN, D_OUT = 7, 4
D_MODEL, N = N_HEADS * D_K, N_Q  # multi-head: d_model 12, 5 tokens

READ = "docs/reading.md#gradients"
NUMERICAL = ("numerical_gradient: (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) for every entry i, both sides of x, "
             "on a float64 copy of x, each entry put back before the next")
SOFTMAX = ("softmax's Jacobian is diag(p) - p p^T: grad_scores = p * (g - sum(g * p)), the sum along the softmax's "
           f"own axis; the - p p^T term couples the entries of one slice ({READ})")
LINEAR = ("out = x @ W + b: grad_x = grad_out @ W^T; grad_W = x^T @ grad_out and grad_b = grad_out, both summed over "
          "every leading (batch and position) axis, because every token used the same W and b")
ATTENTION = ("backwards through softmax(q k^T / sqrt(d_k)) v: grad_v = P^T grad_context, grad_P = grad_context v^T, "
             "softmax_backward, then grad_q = grad_S k / sqrt(d_k) and grad_k = grad_S^T q / sqrt(d_k)")
SCALE = "the scores are divided by sqrt(d_k), so both grad_q and grad_k carry the factor 1/sqrt(d_k)"
KEYS = "grad_k has one row per key, like k: (..., n_k, d_k), made from grad_S^T (keys as rows) and q"
MASKED = ("the mask is in the weights: a blocked key has weight 0, so no gradient reaches its score, its key or "
          "its value; use the weights you are given rather than recomputing them from q and k")
NORM = ("layer norm's grad_x has three terms, (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) / sqrt(var + eps) "
        "with gxhat = grad_out * gamma: the direct one, the path through the mean and the path through the variance; "
        "var and xhat are the forward pass's (var the mean of (x - mean)^2 over the last axis, divided by d as np.var "
        "does, not by d - 1)")
# A gate's wrong grad_gamma is told grad_gamma's formula (a blind round: it was told grad_x's).
NORM_GAMMA = ("grad_gamma = grad_out * xhat summed over every axis but the last, with xhat = (x - mean) / sqrt(var + "
              "eps) as in the forward pass (var divided by d as np.var does, not by d - 1)")
MHA = ("multi-head backward: run the forward again, then undo each step in reverse: w_o, merge_heads, attention, "
       "split_heads, the three projections; x feeds q, k and v, so its three gradients add up")
# A blind round: a backward that gave the mask its head axis in front crashed in the forward it runs again, told only
# the steps of the backward.
MASKED = ("; the forward again with the mask, the same for every head: a (batch, n, n) mask gets its head axis after "
          "the batch axes, mask[..., None, :, :], as multi_head_attention does")
DTYPE = "dtype in = dtype out: float32 inputs give float32 gradients (no float64 constants or arrays mixed in)"


# ---------------------------------------------------------------- the tests' own forward passes


def _normal(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=shape)


def _mha_params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    params = {f"w_{c}": rng.normal(scale=1.2 / np.sqrt(D_MODEL), size=(D_MODEL, D_MODEL)) for c in "qkvo"}
    params.update({f"b_{c}": rng.normal(scale=0.3, size=D_MODEL) for c in "qkvo"})
    return params


def _blocking_mask() -> np.ndarray:
    """(n_q, n_k): query 2 sees nothing, keys 5 and 6 are blocked for everyone, the rest mixed."""
    mask = np.random.default_rng(3).random((N_Q, N_K)) < 0.7
    mask[:, 0] = True
    mask[:, 5:] = False
    mask[2] = False
    return mask


# ---------------------------------------------------------------- the backward pass, not a numerical estimate
# Every test of a backward function first asks whether it is one: at a size where nudging each input entry costs
# thousands of forward passes, its gradients must be exact to rounding (1e-13 relative, against the test's own
# complex-step derivatives, which are exact) and cost a few forward passes of CPU time, not thousands. Checked
# once per session and function, on inputs of their own (seeded, unlike any probe or golden value), at every
# test of that function; at entries drawn from the returned gradient (the same on every run, unknown to code
# until it has returned them all: computing only the entries a fixed seed picks gets it nowhere).

# Relative to the largest exact entry checked. Central differences miss it by orders of magnitude; a fourth-order
# stencil nudging an entry of every slice at once reached 2e-12 and passed 1e-10 (a hostile round: softmax_backward
# and layer_norm_backward by finite differences, 36 backward points of 36). Honest backward passes (the reference,
# explicit Jacobians, the textbook layer norm) stay below 7e-15 over a thousand draws of these inputs.
EXACT = 1e-13
LARGE_EXACT = 1e-10  # a linear output at the large size (see _gate)
EFFORT, EFFORT_FLOOR = 50, 0.05  # at most 50 forward passes of CPU time, plus 50 ms for any overheads
ANALYTIC = ("write the backward pass analytically: the chain rule through each step of the forward pass, one "
            f"matrix product or elementwise formula per step ({READ}); numerical_gradient is for checking it, "
            "not for computing it")


def _exact_derivatives(loss, x: np.ndarray, entries: tuple, linear: bool = False, step: float = 1.0) -> np.ndarray:
    """Derivatives of ``loss`` (the tests' own) at ``entries`` of ``x``.

    By default the complex step, Im f(x + ih e) / h with h = 1e-30: exact to rounding, no cancellation (the
    loss must be complex-safe). With ``linear``, real differences (f(x + step e) - f(x - step e)) / (2 step):
    exact for a loss linear in ``x`` with step 1, central differences otherwise.
    """
    if linear:
        point, values = np.asarray(x, dtype=np.float64).copy(), []
        for index in zip(*entries, strict=True):
            original = point[index]
            point[index] = original + step
            above = loss(point)
            point[index] = original - step
            values.append((above - loss(point)) / (2 * step))
            point[index] = original
        return np.array(values)
    h, point, values = 1e-30, np.asarray(x, dtype=np.complex128).copy(), []
    for index in zip(*entries, strict=True):
        point[index] += 1j * h
        values.append(loss(point).imag / h)
        point[index] -= 1j * h
    return np.array(values)


def _sampled(rng: np.random.Generator, shape: tuple[int, ...], count: int) -> tuple:
    flat = rng.choice(int(np.prod(shape)), size=min(count, int(np.prod(shape))), replace=False)
    return np.unravel_index(np.sort(flat), shape)


# Sizes of the two calls: small for exactness (complex steps are cheap there), large for the cost, where
# nudging every input entry costs tens of thousands of forward passes (seconds to minutes) and the chain rule a
# few milliseconds. {name: (small, large)} of (leading, n_q, n_k, d) per case. (softmax and layer norm act on
# each slice of their last axis alone: one pass can nudge an entry of every slice at once, and that estimate
# costs n passes of a slice of n, as a slice's explicit Jacobian does: slices of 64 hide both, long ones do not,
# see _LONG.)
# A linear layer's forward is linear: nudging input column a of every row at once (and row a of the weight) gives
# column a of both gradients exactly, one pass per input column; 512 of them make that ten times the bound, and
# a forward pass of about a millisecond puts the bound well above its floor.
# The formula of each backward function, for a gate's wrong value (the generic rule where none is written here).
_FORMULA = {"softmax_backward": SOFTMAX, "linear_backward": LINEAR, "attention_backward": ATTENTION,
            "layer_norm_backward": NORM, "multi_head_attention_backward": MHA}
_FORMULA_OF = {("layer_norm_backward", "grad_gamma"): NORM_GAMMA}  # an output's own, where it has one
_GATE_SIZES = {"softmax_backward": ((2, 5, 7), (8, 64, 64)),
               "linear_backward": ((2, 5, 7, 4), (8, 64, 512, 48)),
               "attention_backward": ((2, 5, 7, 4), (8, 32, 48, 32)),
               "layer_norm_backward": ((2, 5, 7), (8, 64, 64)),
               "multi_head_attention_backward": ((2, 5, 12, 3), (2, 32, 64, 4))}


def _gate_case(name: str, rng: np.random.Generator, large: bool, size: tuple[int, ...] | None = None):
    """``(args, forward, [(label, where in the result, loss of that input, the input, linear)])``, seeded by ``rng``.

    The losses are the tests' own and complex-safe (for the complex step); ``linear`` marks a loss that is
    linear in that input. ``size`` replaces the gate's own (``_GATE_SIZES``; the long slices of ``_LONG``).
    """
    normal, size = rng.normal, size or _GATE_SIZES[name][large]
    if name == "softmax_backward":
        scores, r = normal(scale=2.0, size=size), normal(size=size)
        return (r, _softmax(scores)), lambda: _softmax(scores), [
            ("grad_scores", None, lambda s: np.sum(r * _softmax(s)), scores, False)]
    if name == "linear_backward":
        b, n, d_in, d_out = size
        x, weight, r = normal(size=(b, n, d_in)), normal(size=(d_in, d_out)), normal(size=(b, n, d_out))
        return (r, x, weight), lambda: x @ weight, [
            ("grad_x", 0, lambda z: np.sum(r * (z @ weight)), x, True),
            ("grad_weight", 1, lambda w: np.sum(r * (x @ w)), weight, True),
            ("grad_bias", 2, lambda bias: np.sum(r * (x @ weight + bias)), np.zeros(d_out), True)]
    if name == "attention_backward":
        b, n_q, n_k, d = size
        q, r = normal(size=(b, n_q, d)), normal(size=(b, n_q, d))
        k, v = normal(size=(b, n_k, d)), normal(size=(b, n_k, d))
        return (r, q, k, v, _attention(q, k, v)[1]), lambda: _attention(q, k, v), [
            ("grad_q", 0, lambda z: np.sum(r * _attention(z, k, v)[0]), q, False),
            ("grad_k", 1, lambda z: np.sum(r * _attention(q, z, v)[0]), k, False),
            ("grad_v", 2, lambda z: np.sum(r * _attention(q, k, z)[0]), v, True)]
    if name == "layer_norm_backward":
        x, r = normal(loc=1.0, scale=0.7, size=size), normal(size=size)
        gamma, beta = rng.uniform(0.5, 2.0, size=size[-1]), normal(size=size[-1])
        return (r, x, gamma), lambda: _layer_norm(x, gamma, beta, 1e-5), [
            ("grad_x", 0, lambda z: np.sum(r * _layer_norm(z, gamma, beta, 1e-5)), x, False),
            ("grad_gamma", 1, lambda g: np.sum(r * _layer_norm(x, g, beta, 1e-5)), gamma, True)]
    b, n, d, heads = size
    params = {f"w_{c}": normal(scale=1.2 / np.sqrt(d), size=(d, d)) for c in "qkvo"}
    params.update({f"b_{c}": normal(scale=0.3, size=d) for c in "qkvo"})
    x, r = normal(size=(b, n, d)), normal(size=(b, n, d))
    return (r, x, params, heads), lambda: _mha(x, params, heads), [
        ("grad_x", 0, lambda z: np.sum(r * _mha(z, params, heads)), x, False)] + [
        (f"grads[{key!r}]", (1, key), lambda z, key=key: np.sum(r * _mha(x, params | {key: z}, heads)), params[key],
         key in ("w_o", "b_o")) for key in ("w_q", "w_k", "w_v", "b_q", "w_o")]


def _pick(result, where):
    """The returned gradient at ``where``: None (the result itself), an index, or (index, key)."""
    try:
        if where is None:
            return result
        if isinstance(where, tuple):
            return result[where[0]][where[1]]
        return result[where]
    except (TypeError, KeyError, IndexError):
        return None


def _gate(impl, name: str) -> list[Failure]:
    """Why ``name`` is not an analytic backward pass (empty when it is one)."""
    # Inputs of their own, seeded (the same feedback every run) but unlike any probe or golden value.
    rng = np.random.default_rng([8_000 + sum(map(ord, name)), submission_salt("backward")])  # (tests/effort.py)
    failures = []
    for large in (False, True):
        if large and not failures and name in _LONG and _LONG[name][0] is not None:
            # The memory first: a Jacobian held whole (dual numbers) costs time in its pages too, near the bound
            # below on a busy machine (told a numerical estimate there, on one CI run), and its memory is the
            # same on any machine.
            failures = _long_memory(impl, name, rng, _LONG[name][0], _long_idea(name))
            if failures:
                return failures
        case = _gate_case(name, rng, large)
        args, forward, outputs = case
        size = sum(np.size(at) for *_, at, _ in outputs)
        bound = None
        if large:
            forward_seconds = cpu_seconds_per_call(forward, minimum=1e-3)
            bound = EFFORT * forward_seconds + EFFORT_FLOOR
            # Over the bound, once more (a busy machine may have slowed it), on inputs drawn afresh: the same
            # inputs again would let a function that remembers its answers return the first one at no cost.
            (args, forward, outputs), result, seconds = within_budget(
                lambda attempt, case=case: case if attempt == 0 else _gate_case(name, rng, True),
                lambda drawn, bound=bound: cpu_call(impl, name, *drawn[0], budget=bound), bound)
        else:
            result, seconds = cpu_call(impl, name, *args, budget=bound)
        where_said = f"({size} input entries in all)"
        if large and seconds is not None and seconds > bound:
            stopped = " (stopped there)" if seconds == float("inf") else ""
            failures.append(message(
                f"{name}: its CPU time at a larger size {where_said}",
                f"at most {bound * 1e3:.0f} ms ({EFFORT} forward passes of {forward_seconds * 1e3:.2f} ms, plus "
                f"{EFFORT_FLOOR * 1e3:.0f} ms)",
                f"more than {bound * 1e3:.0f} ms{stopped}" if stopped else
                f"{seconds * 1e3:.0f} ms, about {seconds / forward_seconds:.0f} forward passes",
                "the backward pass costs a few forward passes; perturbing the inputs one entry at a time costs "
                f"two per entry ({2 * size} here): your gradients look like a numerical estimate. " + ANALYTIC))
            return failures
        for label, where, loss, at, linear in outputs[:3] if large else outputs:  # (large: a few, cheaply)
            got = _pick(result, where)
            what = f"{name}: {label} on inputs of its own {where_said}"
            if not isinstance(got, np.ndarray) or got.shape != np.shape(at):
                failures.append(message(what, f"an array of shape {np.shape(at)}",
                                        f"{type(got).__name__} of shape {np.shape(got)}", RULE))
                continue
            # Which entries: drawn from the returned gradient itself (the same every run, unknown before it).
            entries = _sampled(np.random.default_rng(seed_of(got)), np.shape(at), 6 if not large else 2)
            # Exact at both sizes (the complex step: as cheap as central differences for a few entries). Central
            # differences at the large size missed the exact derivative by about 1e-5 on some draws: a correct
            # softmax_backward failed five tests for one submission in a hundred, by its draw (draw_fairness.py).
            exact = _exact_derivatives(loss, at, entries, linear=linear)
            observed = np.asarray(got, dtype=np.float64)[entries]
            scale = max(float(np.max(np.abs(exact))), 1e-12)
            error = float(np.max(np.abs(observed - exact))) / scale
            # At the large size its cost is what is checked: a nonlinear output to 1e-5, a linear one (exact by any
            # differences) to 1e-10, as sums over thousands of rows round (an honest grad_weight of 512 rows was
            # 7.5e-13 off on one draw).
            limit = (1e-5 if not linear else LARGE_EXACT) if large else EXACT
            if not error <= limit:
                estimate = error < 1e-3 and not large
                failures.append(message(
                    f"{what}, against its exact derivatives at {len(exact)} entries",
                    f"a relative error of at most {limit:g}"
                    + (" (exact to rounding)" if limit in (EXACT, LARGE_EXACT) else ""),
                    f"a relative error of {error:.2g}",
                    ("your gradient is close to the exact derivative, not equal to it: either a numerical estimate "
                     "(" + ANALYTIC + "), or a small term of the formula left out or changed (an eps, a scale): "
                     "compare each term with the forward pass")
                    if estimate else "the gradient is wrong here: " + _FORMULA_OF.get((name, label),
                                                                               _FORMULA.get(name, RULE))))
    if not failures and name in _LONG:
        failures += _long_cpu(impl, name, rng, _LONG[name][1], _long_idea(name))
    return failures


# Softmax and layer norm act on each slice of their last axis alone, and a slice's gradient is a few sums and
# products over it (the formulas above). A slice's n x n Jacobian, written out or made of one direction per entry
# (a nudge, a dual number, a complex step: an estimate or exact), costs n times the memory or the time: the tests'
# slices (n of 7 to 64) hide that, long ones do not. First the memory at slices of 2048: an n x n matrix for each
# is 64 MiB, 2048 arrays the size of the input; the formulas, written in any style, hold a few (a staged graph that
# keeps every intermediate on float64 copies, about 18; Python lists of the whole input, about 24: a Python float
# is four times numpy's), and 128 are allowed. Then, for a Jacobian made a few rows at a time (within that memory),
# the CPU time at slices of 16384: n passes over a slice are 16384 forward passes, several times the bound where
# one of 8192 was only 1.8 times it. Written in pure Python, the formulas cost about what they cost in the large
# case above (32768 entries both). {name: (memory, cpu) sizes}.
# attention_backward's softmax acts on each query's row of scores: long rows (many keys, few queries, narrow heads)
# tell its formula from a Jacobian per row or one direction per key (a hostile round: a complex step through a
# recomputed softmax, one key column of every row at a time, passed the gate's 48 keys, under its 50 passes; at
# 4096 keys it costs about 20 times the bound, the formula a fraction of a forward pass, a Python loop over keys or
# rows a few milliseconds). Its CPU time alone is checked: a Jacobian per row costs ten times the bound there too,
# and the memory's measure would start one more worker per student. (None: no memory check.)
_LONG = {"softmax_backward": ((2, 2048), (2, 16384)), "layer_norm_backward": ((2, 2048), (2, 16384)),
         "attention_backward": (None, (2, 4, 4096, 8))}
_LONG_ROOM = 128  # the memory allowed at long slices: this many arrays the size of one input, besides the graded own
_LONG_OWN = 6 << 20  # graded, the fresh worker's own pages (the module imported during the call; see test_11's)
_LONG_IDEA = ("a slice's gradient is a few sums and products over it: {formula}. Written as an n x n Jacobian per "
              "slice, or built from one direction per entry (a nudge of each score, a dual number, a complex "
              "step), it costs n times the memory or the time: that formula needs no Jacobian")


def _shapes(name: str, size: tuple[int, ...]) -> str:
    """The inputs of a case of ``size``, for a message."""
    if name == "attention_backward":
        b, n_q, n_k, d = size
        return f"q of shape {(b, n_q, d)}, k and v of shape {(b, n_k, d)}"
    return f"shape {size}"


def _slices(name: str, size: tuple[int, ...]) -> tuple[int, int]:
    """How many slices a case of ``size`` holds, and their length (an attention's rows of scores, one per query)."""
    if name == "attention_backward":
        b, n_q, n_k, _ = size
        return b * n_q, n_k
    return int(np.prod(size[:-1])), size[-1]


def _long_idea(name: str) -> str:
    """What to revisit when ``name`` costs more than a few passes over a long slice: see ``_LONG``."""
    formula = {"softmax_backward": "grad_scores = p * (g - sum(g * p))",
               "layer_norm_backward": "grad_x = (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) / "
                                      "sqrt(var + eps)",
               "attention_backward": "grad_S = P * (grad_P - sum(grad_P * P)) over each query's row, with "
                                     "grad_P = grad_context v^T"}[name]
    return _LONG_IDEA.format(formula=formula)


def _long_memory(impl, name: str, rng: np.random.Generator, memory_size: tuple[int, ...], idea: str) -> list[Failure]:
    """Why ``name`` holds more than a few arrays the size of its input on long slices (empty when it does not)."""
    args, _, _ = _gate_case(name, rng, True, memory_size)
    _, peak = impl.measure(name, *args)
    own = _LONG_OWN if impl.measures_elsewhere else 0
    one = max(np.asarray(a).nbytes for a in args)
    allowed = _LONG_ROOM * one + own
    count, length = _slices(name, memory_size)
    jacobians = count * length**2 * 8
    what = f"{name}: the memory of a call on slices of {length} entries ({_shapes(name, memory_size)})"
    if peak is None:  # (a student's own run only: its tracemalloc, stopped by the code under test)
        return [message(what, "a measurement", "none: the tracing was stopped during the call", idea)]
    if peak > allowed:
        room = " and 6 MiB of the process's own" if own else ""
        return [message(what, f"at most {allowed / 2**20:.1f} MiB ({_LONG_ROOM} arrays the size of the input{room})",
                        f"{peak / 2**20:.1f} MiB (an n x n matrix for each slice takes {jacobians / 2**20:.0f} MiB)",
                        idea)]
    return []


def _long_cpu(impl, name: str, rng: np.random.Generator, cpu_size: tuple[int, ...], idea: str) -> list[Failure]:
    """Why ``name`` costs more than a few forward passes on long slices (empty when it does not)."""
    args, forward, _ = _gate_case(name, rng, True, cpu_size)
    forward_seconds = cpu_seconds_per_call(forward, minimum=1e-3)
    bound = EFFORT * forward_seconds + EFFORT_FLOOR
    _, _, seconds = within_budget(
        lambda attempt: args if attempt == 0 else _gate_case(name, rng, True, cpu_size)[0],
        lambda drawn: cpu_call(impl, name, *drawn, budget=bound), bound)
    if seconds is not None and seconds > bound:
        stopped = seconds == float("inf")
        return [message(
            f"{name}: its CPU time on slices of {_slices(name, cpu_size)[1]} entries ({_shapes(name, cpu_size)})",
            f"at most {bound * 1e3:.0f} ms ({EFFORT} forward passes of {forward_seconds * 1e3:.2f} ms, plus "
            f"{EFFORT_FLOOR * 1e3:.0f} ms)",
            f"more than {bound * 1e3:.0f} ms (stopped there)" if stopped else
            f"{seconds * 1e3:.0f} ms, about {seconds / forward_seconds:.0f} forward passes", idea)]
    return []


def require_analytic(impl, name: str) -> bool:
    """Fail the test (with the reason) unless ``name`` is an analytic backward pass; True when it is one."""
    failures = once(impl, name, "analytic", lambda: _gate(impl, name))
    for failure in failures:
        fail_check(failure)  # recorded as data, as every failure (tests/failures.py)
    return not failures


# ---------------------------------------------------------------- probes (reference values, for the diagnosis)

def _cubic(seed: int, shape: tuple[int, ...]) -> PlainFunction:
    rng = np.random.default_rng(seed)
    return PlainFunction("cubic", a=rng.normal(size=shape), b=rng.normal(size=shape), c=rng.normal(size=shape),
                         d=rng.normal(size=shape))



# The names of the result arrays, for a diagnosis that points at the ones that differ (tests/steps.py).
ATTENTION_KEYS = ("b_k", "b_o", "b_q", "b_v", "w_k", "w_o", "w_q", "w_v")
names("linear_backward", "grad_x", "grad_weight", "grad_bias")
names("attention_backward", "grad_q", "grad_k", "grad_v")
names("layer_norm_backward", "grad_x", "grad_gamma", "grad_beta")
names("multi_head_attention_backward", "grad_x", *(f"grads[{key!r}]" for key in ATTENTION_KEYS))

@probe("numerical_gradient")
def cubic_coarse_step():
    return (_cubic(801, (3, 4)), _normal(802, 3, 4)), {"eps": 1e-3}


@probe("numerical_gradient")
def cubic_float32():
    return (_cubic(803, (2, 3)), _normal(804, 2, 3).astype(np.float32)), {"eps": 1e-4}


@probe("softmax_backward")
def batched_last_axis():
    weights = _softmax(_normal(805, BATCH, N_HEADS, N_Q, N_K, scale=2.0))
    return (_normal(806, BATCH, N_HEADS, N_Q, N_K), weights), {}


@probe("softmax_backward")
def over_axis_one():
    weights = _softmax(_normal(807, BATCH, N_Q, N_K), axis=1)
    return (_normal(808, BATCH, N_Q, N_K), weights), {"axis": 1}


@probe("softmax_backward")
def square_slices():
    # n_q = n_k: a sum that loses its axis still broadcasts, so the mistake shows in the values
    weights = _softmax(_normal(829, N_Q, N_Q, scale=2.0))
    return (_normal(830, N_Q, N_Q), weights), {}


@probe("linear_backward")
def square_weight():
    # d_in = d_out: a forgotten transpose still runs
    return (_normal(831, BATCH, N_Q, D_IN), _normal(832, BATCH, N_Q, D_IN), _normal(833, D_IN, D_IN)), {}


@probe("attention_backward")
def as_many_keys_as_queries():
    q, k, v = _normal(834, BATCH, N_Q, D_K), _normal(835, BATCH, N_Q, D_K), _normal(836, BATCH, N_Q, D_V)
    return (_normal(837, BATCH, N_Q, D_V), q, k, v, _attention(q, k, v)[1]), {}


@probe("linear_backward")
def rows_without_a_batch_axis():
    # x (rows, d_in), as an output layer gives it: grad_weight and grad_bias sum the rows
    return (_normal(864, 6, D_OUT), _normal(865, 6, D_IN), _normal(866, D_IN, D_OUT)), {}


@probe("linear_backward")
def batched_tokens():
    return (_normal(809, BATCH, N_Q, D_OUT), _normal(810, BATCH, N_Q, D_IN), _normal(811, D_IN, D_OUT)), {}


@probe("attention_backward")
def batched_heads():
    q, k, v = _normal(812, BATCH, N_HEADS, N_Q, D_K), _normal(813, BATCH, N_HEADS, N_K, D_K), \
        _normal(814, BATCH, N_HEADS, N_K, D_V)
    return (_normal(815, BATCH, N_HEADS, N_Q, D_V), q, k, v, _attention(q, k, v)[1]), {}


@probe("attention_backward")
def keys_shared_over_the_batch():
    # k and v without the batch axis (broadcast over it): their gradients are summed back over that axis.
    q, k, v = _normal(838, BATCH, N_HEADS, N_Q, D_K), _normal(839, N_HEADS, N_K, D_K), _normal(840, N_HEADS, N_K, D_V)
    return (_normal(841, BATCH, N_HEADS, N_Q, D_V), q, k, v, _attention(q, k, v)[1]), {}


@probe("attention_backward")
def masked():
    q, k, v = _normal(816, BATCH, N_Q, D_K), _normal(817, BATCH, N_K, D_K), _normal(818, BATCH, N_K, D_V)
    return (_normal(819, BATCH, N_Q, D_V), q, k, v, _attention(q, k, v, _blocking_mask())[1]), {}


@probe("softmax_backward")
def float32_rows():
    # float32 in, float32 out: a mistake in the formula and a float64 result are two mistakes, which only a float32
    # probe tells apart (a blind round's diagonal Jacobian returned in float64 was told the diagonal alone).
    weights = _softmax(_normal(870, BATCH, N_Q, N_K, scale=2.0)).astype(np.float32)
    return (_normal(871, BATCH, N_Q, N_K).astype(np.float32), weights), {}


@probe("linear_backward")
def float32_tokens():
    return tuple(a.astype(np.float32) for a in (_normal(872, BATCH, N_Q, D_OUT), _normal(873, BATCH, N_Q, D_IN),
                                                _normal(874, D_IN, D_OUT))), {}


@probe("attention_backward")
def float32_batch():
    q, k, v = _normal(875, BATCH, N_Q, D_K), _normal(876, BATCH, N_K, D_K), _normal(877, BATCH, N_K, D_V)
    return tuple(a.astype(np.float32) for a in (_normal(886, BATCH, N_Q, D_V), q, k, v, _attention(q, k, v)[1])), {}


@probe("attention_backward")
def axes_of_size_one():
    # q with one head for every head of k, k with one set for the batch: summed back with the axes kept.
    q, k = _normal(879, BATCH, 1, N_Q, D_K), _normal(880, 1, N_HEADS, N_K, D_K)
    v = _normal(881, BATCH, N_HEADS, N_K, D_V)
    return (_normal(882, BATCH, N_HEADS, N_Q, D_V), q, k, v, _attention(q, k, v)[1]), {}


@probe("layer_norm_backward")
def float32_tokens_norm():
    x = _normal(883, BATCH, N_Q, D_IN) * 0.5 + 1.0
    gamma = np.random.default_rng(884).uniform(0.5, 2.0, size=D_IN)
    return tuple(a.astype(np.float32) for a in (_normal(885, BATCH, N_Q, D_IN), x, gamma)), {}


@probe("layer_norm_backward")
def large_eps():
    x = _normal(820, BATCH, N_Q, D_IN) * 0.5 + 1.0
    gamma = np.random.default_rng(821).uniform(0.5, 2.0, size=D_IN)
    return (_normal(822, BATCH, N_Q, D_IN), x, gamma), {"eps": 0.1}


# large_eps with the default eps: an eps argument not used (a hard-coded 1e-5) gives this one's result there.
@probe("layer_norm_backward")
def large_eps_left_default():
    args, _ = large_eps()
    return args, {}


@probe("multi_head_attention_backward")
def unmasked():
    return (_normal(823, BATCH, N, D_MODEL), _normal(824, BATCH, N, D_MODEL), _mha_params(825), N_HEADS), {}


@probe("multi_head_attention_backward")
def causal():
    mask = np.tril(np.ones((N, N), dtype=bool))
    return (_normal(826, BATCH, N, D_MODEL), _normal(827, BATCH, N, D_MODEL), _mha_params(828), N_HEADS), \
        {"mask": mask}


# ---------------------------------------------------------------- numerical_gradient

def test_numerical_gradient_shape_and_dtype(impl):
    f = _cubic(1, (3, 4))
    for dtype in (np.float64, np.float32):
        x = _normal(2, 3, 4).astype(dtype)
        grad = impl.numerical_gradient(f, x)
        if expect_shape(grad, (3, 4), what=f"numerical_gradient(f, x) for a (3, 4) {dtype.__name__} x",
                        idea="one estimate per entry of x, in an array shaped like x"):
            expect_dtype(grad, np.float64, what=f"numerical_gradient of a {dtype.__name__} x",
                         idea="always float64: in float32, x + 1e-6 is x itself for most entries, so work on a "
                              "float64 copy")
            expect_varies(grad.ravel(), axis=0, what=f"numerical_gradient(f, x) for a (3, 4) {dtype.__name__} x: "
                          "its entries", idea=NUMERICAL + "; f's slope differs from entry to entry")
    # The values for a float32 x: steps taken on a float64 copy (a blind round's steps on x's own float32 entries
    # were off by 5%, in a float64 array that passed the dtype check).
    x = _normal(2, 3, 4).astype(np.float32)
    grad = impl.numerical_gradient(f, x, eps=1e-4)
    wanted = _central_at(f, x.astype(np.float64), 1e-4)
    precision = _right_for_float64(impl, f, x, wanted, grad)
    expect_close(grad, wanted, rtol=1e-6, atol=1e-7,
                 what="numerical_gradient(f, x, eps=1e-4) for a float32 x (3, 4)",
                 idea="the steps x +- eps on a float64 copy of x: in float32, x + 1e-4 rounds to a step of another "
                      "size for most entries" if precision else
                      NUMERICAL + " (these values are wrong for the same x as float64 numbers too)")


def test_numerical_gradient_is_the_central_difference(impl):
    # A coarse step makes the formula visible: a one-sided difference is off by about eps * f''.
    f, x, eps = _cubic(3, (3, 4)), _normal(4, 3, 4), 1e-3
    expected = _central_at(f, x, eps)
    observed = impl.numerical_gradient(f, x, eps=eps)
    # An eps of its own in place of the one given moves the values by about eps^2 times the third derivative, near
    # float32's precision: said as what it is, not as a question of precision (a blind round's eps = 1e-6 was told
    # float32).
    other = next((step for step in (1e-6, 1e-5, 1e-4, 1e-7, 1e-8) if np.shape(observed) == x.shape and np.allclose(
        observed, _central_at(f, x, step), rtol=1e-10, atol=1e-12)), None)
    ignored = (f"the values are the central differences with eps={other:g}, not with the eps given (1e-3): use "
               "the eps argument" if other is not None else "")
    # A one-sided difference is named only where the values are one (either side): said of others, it was wrong.
    one_sided = np.shape(observed) == x.shape and any(
        np.allclose(observed, _central_at(f, x, step, one_sided=True), rtol=1e-8, atol=1e-9) for step in (eps, -eps))
    expect_close(observed, expected, rtol=1e-8, atol=1e-9, tiny_term=ignored,
                 what="numerical_gradient(f, x, eps=1e-3) for f(x) = sum(a x + b x^2 + c x^3) + (sum(d x))^2 / 2",
                 idea=NUMERICAL + (": yours is a one-sided difference (f(x + eps) - f(x)) / eps, off by about eps * "
                                   "f''" if one_sided else "") + (f"; {ignored}" if ignored else ""))


def _right_for_float64(impl, f, x: np.ndarray, wanted: np.ndarray, grad) -> bool:
    """Whether a float32 ``x``'s wrong ``grad`` is right for the same values as float64 numbers (its dtype's fault).

    Float32 is named only then: a mistake of the formula is wrong for both (a blind round was told float32).
    """
    if np.shape(grad) == x.shape and np.allclose(np.asarray(grad, dtype=float), wanted, rtol=1e-6, atol=1e-7):
        return True  # (right: nothing is said)
    try:
        as_float64 = np.asarray(impl.numerical_gradient(f, x.astype(np.float64), eps=1e-4), dtype=float)
    except Exception:  # noqa: BLE001 - a crash there is told by the float64 tests
        return False
    return as_float64.shape == x.shape and bool(np.allclose(as_float64, wanted, rtol=1e-6, atol=1e-7))


def _central_at(f, x: np.ndarray, eps: float, one_sided: bool = False) -> np.ndarray:
    """The central differences of ``f`` at ``x`` with step ``eps``, entry by entry (the test's own).

    ``one_sided``: (f(x + eps e_i) - f(x)) / eps instead, a mistake's values.
    """
    values = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        values[index] = (f(x + step) - f(x)) / eps if one_sided else (f(x + step) - f(x - step)) / (2 * eps)
    return values


def test_numerical_gradient_matches_the_derivative(impl):
    rng = np.random.default_rng(5)
    a, b, c, d = (rng.normal(size=(2, 5)) for _ in range(4))
    x = rng.normal(size=(2, 5))
    exact = a + 2 * b * x + 3 * c * x**2 + d * np.sum(d * x)
    expect_close(impl.numerical_gradient(PlainFunction("cubic", a=a, b=b, c=c, d=d), x), exact, rtol=1e-6,
                 atol=1e-7, what="numerical_gradient(f, x) with the default eps, against the exact derivative "
                                 "a + 2 b x + 3 c x^2 + d sum(d x)",
                 idea=NUMERICAL + "; the default eps is 1e-6")


def test_numerical_gradient_leaves_x_as_it_was(impl):
    for dtype in (np.float64, np.float32):
        x = _normal(6, 4, 3).astype(dtype)
        before = x.copy()
        f = _cubic(7, (4, 3))
        grad = impl.numerical_gradient(f, x, eps=1e-3)
        expect_varies(grad, axis=None, what=f"numerical_gradient(f, x) for a {dtype.__name__} x: its entries",
                      idea=NUMERICAL)
        expect(np.array_equal(x, before), what=f"a {dtype.__name__} x after numerical_gradient(f, x)",
               expected="exactly the values it had before the call",
               observed=f"{int(np.sum(x != before))} of {x.size} entries changed",
               idea="nudge a float64 copy of x, and put each entry back (assign the saved value, do not subtract "
                    "eps again: x + eps - eps is not always x) before the next")
        # The estimate too, roughly: numbers that vary, x itself or the gradient at another x leave x as it was
        # ("no points without the idea"). Said only once x is; the exact values have their own tests.
        if not recorded_so_far():
            expect_close(grad, _central_at(f, before.astype(np.float64), 1e-3), rtol=0.05, atol=0.05,
                         what=f"numerical_gradient(f, x, eps=1e-3) for a {dtype.__name__} x it left as it was, "
                              "within 5%", idea=NUMERICAL)


def test_numerical_gradient_rejects_a_bad_eps(impl):
    expect_raises_value_error(lambda: impl.numerical_gradient(_cubic(8, (2,)), np.ones(2), eps=0.0), argument="eps",
                              what="numerical_gradient(f, x, eps=0.0)", idea="eps must be positive")


# ---------------------------------------------------------------- softmax_backward

def test_softmax_backward_shape_and_dtype(impl):
    require_analytic(impl, "softmax_backward")
    for dtype in (np.float64, np.float32):
        weights = _softmax(_normal(10, BATCH, N_Q, N_K)).astype(dtype)
        grad = impl.softmax_backward(_normal(11, BATCH, N_Q, N_K).astype(dtype), weights)
        if expect_shape(grad, weights.shape, what=f"softmax_backward of {dtype.__name__} (2, 5, 7) weights",
                        idea=RULE):
            expect_dtype(grad, dtype, what=f"softmax_backward of {dtype.__name__} inputs", idea=DTYPE)


def test_softmax_backward_gradient_sums_to_zero_in_each_slice(impl):
    require_analytic(impl, "softmax_backward")
    # Adding the same constant to every score of a slice leaves softmax unchanged: the gradient
    # cannot point that way, so it sums to 0 along the softmax axis. Without the - p p^T term it does not.
    weights = _softmax(_normal(12, BATCH, N_Q, N_K, scale=2.0))
    grad = impl.softmax_backward(_normal(13, BATCH, N_Q, N_K), weights)
    if expect_shape(grad, weights.shape, what="softmax_backward(grad_weights, weights)", idea=RULE):
        expect_close(grad.sum(axis=-1), np.zeros((BATCH, N_Q)), atol=1e-12,
                     what="the sum of each row of grad_scores (softmax over the last axis)",
                     idea=SOFTMAX + ": shifting all scores of a row changes nothing, so the gradient sums to 0")


def test_softmax_backward_matches_central_differences(impl):
    require_analytic(impl, "softmax_backward")
    scores, r = _normal(14, BATCH, N_HEADS, N_Q, N_K, scale=2.0), _normal(15, BATCH, N_HEADS, N_Q, N_K)
    grad = impl.softmax_backward(r, _softmax(scores))
    expect_gradient(grad, lambda s: np.sum(r * _softmax(s)), scores, sample=40,
                    what="softmax_backward on (2, 3, 5, 7) scores", idea=SOFTMAX)


def test_softmax_backward_uses_its_axis(impl):
    require_analytic(impl, "softmax_backward")
    # (and axis 0 of a 2-D input: a blind round's code that took the last axis for 2-D inputs passed the others)
    for axis, shape in ((1, (BATCH, N_Q, N_K)), (-3, (BATCH, N_Q, N_K)), (0, (N_Q, N_K))):
        scores, r = _normal(16, *shape), _normal(17, *shape)
        grad = impl.softmax_backward(r, _softmax(scores, axis=axis), axis=axis)
        expect_gradient(grad, lambda s, axis=axis, r=r: np.sum(r * _softmax(s, axis=axis)), scores, sample=30,
                        what=f"softmax_backward(..., axis={axis}) of {len(shape)}-D weights = softmax(scores, "
                             f"axis={axis})", idea=SOFTMAX + "; here the slices run along `axis`, not the last axis")


def test_softmax_backward_gives_zero_where_the_weight_is_zero(impl):
    require_analytic(impl, "softmax_backward")
    mask = _blocking_mask()
    weights = _softmax(np.where(mask, _normal(18, BATCH, N_Q, N_K), -np.inf))
    grad = impl.softmax_backward(_normal(19, BATCH, N_Q, N_K), weights)
    if expect_shape(grad, weights.shape, what="softmax_backward of masked weights", idea=RULE):
        expect_close(np.where(mask, 0.0, grad), np.zeros_like(grad), atol=0,
                     what="grad_scores at blocked entries (weight 0), including the fully blocked row 2",
                     idea="a weight of exactly 0 passes no gradient back: grad_scores = p * (...) is 0 where p is 0")


def test_softmax_backward_rejects_mismatched_shapes(impl):
    expect_raises_value_error(lambda: impl.softmax_backward(np.ones((2, 3)), np.full((2, 4), 0.25)),
                              argument="grad_weights", what="softmax_backward with grad_weights (2, 3), weights (2, 4)",
                              idea="grad_weights is the gradient for weights: it has the same shape")


# ---------------------------------------------------------------- linear_backward

def test_linear_backward_shapes(impl):
    require_analytic(impl, "linear_backward")
    result = call_or_explain(impl.linear_backward, _normal(20, BATCH, N_Q, D_OUT), _normal(21, BATCH, N_Q, D_IN),
                             _normal(22, D_IN, D_OUT), what="linear_backward on (2, 5, 7) tokens and a (7, 4) weight",
                             idea=LINEAR)
    if expect(isinstance(result, tuple) and len(result) == 3, what="linear_backward's result",
              expected="a tuple (grad_x, grad_weight, grad_bias)", observed=type(result).__name__, idea=LINEAR):
        for name, value, shape in zip(("grad_x", "grad_weight", "grad_bias"), result,
                                      ((BATCH, N_Q, D_IN), (D_IN, D_OUT), (D_OUT,)), strict=True):
            expect_shape(value, shape, what=f"{name} for x (2, 5, 7) and weight (7, 4)",
                         idea=LINEAR + "; the parameters' gradients have the parameters' shapes")


def test_linear_backward_matches_central_differences(impl):
    require_analytic(impl, "linear_backward")
    x, weight, bias = _normal(23, BATCH, N_Q, D_IN), _normal(24, D_IN, D_OUT), _normal(25, D_OUT)
    r = _normal(26, BATCH, N_Q, D_OUT)
    grad_x, grad_weight, grad_bias = impl.linear_backward(r, x, weight)
    expect_gradient(grad_x, lambda z: np.sum(r * (z @ weight + bias)), x, what="grad_x", idea=LINEAR)
    expect_gradient(grad_weight, lambda w: np.sum(r * (x @ w + bias)), weight,
                    what="grad_weight (x has batch and position axes)", idea=LINEAR)
    expect_gradient(grad_bias, lambda b: np.sum(r * (x @ weight + b)), bias,
                    what="grad_bias (x has batch and position axes)", idea=LINEAR)


def _check_linear_backward(impl, x, weight, bias, r, shown: str, summed: str) -> None:
    """``linear_backward(r, x, weight)``: a tuple of the parameters' shapes, each against central differences.

    ``shown``: the inputs, for the messages ("x (6, 7) and a (7, 4) weight"); ``summed``: what the parameters'
    gradients sum over, said with their idea.
    """
    result = call_or_explain(impl.linear_backward, r, x, weight, idea=LINEAR, what=f"linear_backward on {shown}")
    if not expect(isinstance(result, tuple) and len(result) == 3, what="linear_backward's result",
                  expected="a tuple (grad_x, grad_weight, grad_bias)", observed=type(result).__name__, idea=LINEAR):
        return
    for name, value, shape in zip(("grad_x", "grad_weight", "grad_bias"), result,
                                  (x.shape, weight.shape, (weight.shape[1],)), strict=True):
        if not expect_shape(value, shape, what=f"{name} for {shown}", idea=f"{LINEAR}; {summed}"):
            return
    grad_x, grad_weight, grad_bias = result
    expect_gradient(grad_x, lambda z: np.sum(r * (z @ weight + bias)), x, what=f"grad_x for {shown}", idea=LINEAR)
    expect_gradient(grad_weight, lambda w: np.sum(r * (x @ w + bias)), weight, what=f"grad_weight for {shown}",
                    idea=f"{LINEAR}; {summed}")
    expect_gradient(grad_bias, lambda b: np.sum(r * (x @ weight + b)), bias, what=f"grad_bias for {shown}",
                    idea=f"{LINEAR}; {summed}")


def test_linear_backward_square_weight_and_two_batch_axes(impl):
    # A square weight (d_in = d_out, as in a model's projections): grad_out @ weight and grad_out @ weight.T have
    # the same shape there, so only the values tell a missing transpose; and x with two leading axes besides the
    # positions, (..., d_in) as the docstring allows: grad_weight sums over all of them.
    require_analytic(impl, "linear_backward")
    x, weight, bias = _normal(850, BATCH, N_HEADS, N_Q, D_IN), _normal(851, D_IN, D_IN), _normal(852, D_IN)
    _check_linear_backward(impl, x, weight, bias, _normal(853, BATCH, N_HEADS, N_Q, D_IN),
                           "x (2, 3, 5, 7) (two batch axes and positions) and a square (7, 7) weight",
                           "grad_weight and grad_bias sum over every leading axis of x")


def test_linear_backward_of_rows_without_a_batch_axis(impl):
    # x of two axes (rows, d_in), as the output layer of exercise 9 gives it: grad_bias sums the rows (a blind round:
    # a linear_backward that averaged them there passed every test of this exercise, and model_gradients was blamed).
    require_analytic(impl, "linear_backward")
    x, weight, bias = _normal(860, 6, D_IN), _normal(861, D_IN, D_OUT), _normal(862, D_OUT)
    _check_linear_backward(impl, x, weight, bias, _normal(863, 6, D_OUT),
                           "x of 6 rows and no batch axis, (6, 7), and a (7, 4) weight",
                           "grad_weight and grad_bias sum over the rows, not a mean")


def test_linear_backward_float32(impl):
    require_analytic(impl, "linear_backward")
    x, weight = _normal(27, BATCH, N_Q, D_IN), _normal(28, D_IN, D_OUT)
    r = _normal(29, BATCH, N_Q, D_OUT)
    result = impl.linear_backward(r.astype(np.float32), x.astype(np.float32), weight.astype(np.float32))
    for name, value, loss, at in zip(
            ("grad_x", "grad_weight", "grad_bias"), result,
            (lambda z: np.sum(r * (z @ weight)), lambda w: np.sum(r * (x @ w)), lambda b: np.sum(r * (x @ weight + b))),
            (x, weight, np.zeros(D_OUT)), strict=True):
        if expect_dtype(value, np.float32, what=f"{name} for float32 inputs", idea=DTYPE):
            expect_gradient(value, loss, at, rtol=1e-4, atol=1e-4, what=f"{name} for float32 inputs", idea=LINEAR)


# ---------------------------------------------------------------- attention_backward

def _attention_case(seed: int, mask=None, batch=(BATCH, N_HEADS)):
    q, k, v = _normal(seed, *batch, N_Q, D_K), _normal(seed + 1, *batch, N_K, D_K), _normal(seed + 2, *batch, N_K, D_V)
    return q, k, v, _normal(seed + 3, *batch, N_Q, D_V), _attention(q, k, v, mask)[1]


def test_attention_backward_shapes(impl):
    require_analytic(impl, "attention_backward")
    q, k, v, r, weights = _attention_case(30)
    result = call_or_explain(impl.attention_backward, r, q, k, v, weights,
                             what="attention_backward with q (2, 3, 5, 4), k (2, 3, 7, 4), v (2, 3, 7, 6)",
                             idea=ATTENTION)
    if expect(isinstance(result, tuple) and len(result) == 3, what="attention_backward's result",
              expected="a tuple (grad_q, grad_k, grad_v)", observed=type(result).__name__, idea=ATTENTION):
        for name, value, like in zip(("grad_q", "grad_k", "grad_v"), result, (q, k, v), strict=True):
            expect_shape(value, like.shape, what=f"{name} for q (2, 3, 5, 4), k (2, 3, 7, 4), v (2, 3, 7, 6)",
                         idea=KEYS if name == "grad_k" else RULE)


def test_attention_backward_grad_v(impl):
    require_analytic(impl, "attention_backward")
    q, k, v, r, weights = _attention_case(34)
    expect_gradient(impl.attention_backward(r, q, k, v, weights)[2], lambda z: np.sum(r * _attention(q, k, z)[0]),
                    v, sample=40, what="grad_v", idea="context = P v, so grad_v = P^T grad_context: each key's value "
                                                          "collects the gradient of every query that used it")


def test_attention_backward_grad_q(impl):
    require_analytic(impl, "attention_backward")
    q, k, v, r, weights = _attention_case(38)
    expect_gradient(impl.attention_backward(r, q, k, v, weights)[0], lambda z: np.sum(r * _attention(z, k, v)[0]),
                    q, sample=40, what="grad_q", idea=f"{ATTENTION}; {SCALE}")


def test_attention_backward_grad_k(impl):
    require_analytic(impl, "attention_backward")
    q, k, v, r, weights = _attention_case(42)
    expect_gradient(impl.attention_backward(r, q, k, v, weights)[1], lambda z: np.sum(r * _attention(q, z, v)[0]),
                    k, sample=40, what="grad_k", idea=f"{KEYS}; {SCALE}")


def test_attention_backward_scale_in_both_grad_q_and_grad_k(impl):
    require_analytic(impl, "attention_backward")
    # d_k = 16 makes a missing 1/sqrt(d_k) a factor 4: the message names the factor.
    rng = np.random.default_rng(46)
    q, k, v = rng.normal(size=(N_Q, 16)), rng.normal(size=(N_K, 16)), rng.normal(size=(N_K, D_V))
    r = rng.normal(size=(N_Q, D_V))
    grad_q, grad_k, _ = impl.attention_backward(r, q, k, v, _attention(q, k, v)[1])
    for name, grad, loss, at in (("grad_q", grad_q, lambda z: np.sum(r * _attention(z, k, v)[0]), q),
                                 ("grad_k", grad_k, lambda z: np.sum(r * _attention(q, z, v)[0]), k)):
        if not expect_shape(grad, at.shape, what=f"{name} with d_k = 16", idea=RULE):
            continue
        where, expected = _central(loss, at, sample=30)
        observed = np.asarray(grad, dtype=float)[where]
        ratio = float(np.dot(observed, expected) / np.dot(expected, expected))
        expect(abs(ratio - 1) < 1e-4, what=f"{name} with d_k = 16, against central differences",
               expected="the gradient itself (ratio 1)", observed=f"about {ratio:.4g} times the gradient"
               + (" (a factor sqrt(d_k) = 4 too large)" if abs(ratio - 4) < 0.05 else ""), idea=SCALE)


def test_attention_backward_with_a_mask(impl):
    require_analytic(impl, "attention_backward")
    mask = _blocking_mask()
    q, k, v, r, weights = _attention_case(47, mask=mask, batch=(BATCH,))
    grad_q, grad_k, grad_v = impl.attention_backward(r, q, k, v, weights)
    for name, grad, loss, at in (
            ("grad_q", grad_q, lambda z: np.sum(r * _attention(z, k, v, mask)[0]), q),
            ("grad_k", grad_k, lambda z: np.sum(r * _attention(q, z, v, mask)[0]), k),
            ("grad_v", grad_v, lambda z: np.sum(r * _attention(q, k, z, mask)[0]), v)):
        if expect_gradient(grad, loss, at, what=f"{name} with a mask (keys 5, 6 and query 2 fully blocked)",
                           idea=MASKED):
            if name != "grad_q":
                expect_close(grad[:, 5:], np.zeros_like(grad[:, 5:]), atol=0,
                             what=f"{name} of the blocked keys 5 and 6", idea=MASKED)


def test_attention_backward_float32(impl):
    require_analytic(impl, "attention_backward")
    q, k, v, r, weights = _attention_case(51, batch=(BATCH,))
    result = impl.attention_backward(*(a.astype(np.float32) for a in (r, q, k, v, weights)))
    for name, value in zip(("grad_q", "grad_k", "grad_v"), result, strict=True):
        expect_dtype(value, np.float32, what=f"{name} for float32 inputs", idea=DTYPE)
    expect_gradient(result[1], lambda z: np.sum(r * _attention(q, z, v)[0]), k, rtol=1e-3, atol=1e-4,
                    what="grad_k for float32 inputs", idea=ATTENTION)


def test_attention_backward_keys_and_values_with_fewer_batch_axes(impl):
    """Keys of one set per head, values of one set for all, shared by every sequence of q; axes of size one."""
    require_analytic(impl, "attention_backward")
    idea = ("a k or v with fewer batch axes than q is shared by every sequence (and head) that broadcasting "
            "stretched it over; its gradient adds up the gradient of every use: sum over the axes broadcasting "
            "added, back to the input's own shape")
    cases = (  # (seeds, q, k, v shapes, which gradients, what the shapes are)
        # fewer axes: keys of one set per head, values of one set for all
        ((55, 56, 57, 58), (BATCH, N_HEADS, N_Q, D_K), (N_HEADS, N_K, D_K), (N_K, D_V), (1, 2),
         "(no batch axis for k, no batch or head axis for v)"),
        # axes of size one that broadcasting stretched (one head of queries for every head of keys, one set of keys
        # for the batch): summed back with the axis kept (a sum that drops it returns grad_q of another shape)
        ((59, 60, 61, 62), (BATCH, 1, N_Q, D_K), (1, N_HEADS, N_K, D_K), (BATCH, N_HEADS, N_K, D_V), (0, 1),
         "(axes of size one, stretched by broadcasting)"),
    )
    for seeds, q_shape, k_shape, v_shape, checked, shapes in cases:
        q, k, v = (_normal(seed, *shape) for seed, shape in zip(seeds[:3], (q_shape, k_shape, v_shape), strict=True))
        r = _normal(seeds[3], BATCH, N_HEADS, N_Q, D_V)  # the context's shape, both times
        weights = _attention(q, k, v)[1]
        what = f"attention_backward with q {q.shape}, k {k.shape}, v {v.shape} {shapes}"
        result = call_or_explain(impl.attention_backward, r, q, k, v, weights, what=what, idea=idea)
        if not expect(isinstance(result, tuple) and len(result) == 3, what="attention_backward's result",
                      expected="a tuple (grad_q, grad_k, grad_v)", observed=type(result).__name__, idea=ATTENTION):
            return
        losses = (lambda z, k=k, v=v, r=r: np.sum(r * _attention(z, k, v)[0]),
                  lambda z, q=q, v=v, r=r: np.sum(r * _attention(q, z, v)[0]),
                  lambda z, q=q, k=k, r=r: np.sum(r * _attention(q, k, z)[0]))
        for index in checked:
            name, at = ("grad_q", "grad_k", "grad_v")[index], (q, k, v)[index]
            expect_gradient(result[index], losses[index], at, sample=30, idea=idea,
                            what=f"{name} for {name[-1]} of shape {at.shape}{f' and q {q.shape}' if index else ''} "
                                 f"{shapes}")


# ---------------------------------------------------------------- layer_norm_backward

def _norm_case(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(loc=1.0, scale=0.7, size=(BATCH, N_Q, D_IN))
    return x, rng.uniform(0.5, 2.0, size=D_IN), rng.normal(size=D_IN), rng.normal(size=(BATCH, N_Q, D_IN))


def test_layer_norm_backward_shapes(impl):
    require_analytic(impl, "layer_norm_backward")
    x, gamma, _, r = _norm_case(60)
    result = call_or_explain(impl.layer_norm_backward, r, x, gamma, what="layer_norm_backward on (2, 5, 7) tokens",
                             idea=NORM)
    if expect(isinstance(result, tuple) and len(result) == 3, what="layer_norm_backward's result",
              expected="a tuple (grad_x, grad_gamma, grad_beta)", observed=type(result).__name__, idea=NORM):
        for name, value, shape in zip(("grad_x", "grad_gamma", "grad_beta"), result,
                                      (x.shape, (D_IN,), (D_IN,)), strict=True):
            expect_shape(value, shape, what=f"{name} for x (2, 5, 7)", idea=RULE + "; gamma and beta are "
                         "shared by every token, so their gradients are summed over the leading axes")


def test_layer_norm_backward_paths_through_the_mean_and_the_variance(impl):
    require_analytic(impl, "layer_norm_backward")
    # With eps = 0, layer norm's output does not change when x moves along (1, ..., 1) (the mean absorbs
    # it) or along x - mean (the variance absorbs it): grad_x is orthogonal to both.
    x, gamma, _, r = _norm_case(61)
    grad_x = impl.layer_norm_backward(r, x, gamma, eps=0.0)[0]
    if not expect_shape(grad_x, x.shape, what="grad_x of layer_norm_backward", idea=RULE):
        return
    expect_close(grad_x.sum(axis=-1), np.zeros((BATCH, N_Q)), atol=1e-10,
                 what="the sum of each token's grad_x (eps = 0)",
                 idea="the path through the mean: shifting a token's features by a constant changes nothing, "
                      "so grad_x sums to 0; it needs the - mean(gxhat) term, and every step with the eps given "
                      "(here 0)")
    centred = x - x.mean(axis=-1, keepdims=True)
    expect_close((grad_x * centred).sum(axis=-1), np.zeros((BATCH, N_Q)), atol=1e-10,
                 what="each token's grad_x dotted with its centred features (eps = 0)",
                 idea="the path through the variance: scaling a token's centred features changes nothing, so "
                      "grad_x is orthogonal to them (exactly, with eps = 0): it needs the - xhat * mean(gxhat * "
                      "xhat) term, and the variance and xhat computed with the eps given")


def test_layer_norm_backward_matches_central_differences(impl):
    require_analytic(impl, "layer_norm_backward")
    x, gamma, beta, r = _norm_case(62)
    eps = 0.1  # large, so an eps left out of the backward pass shows
    grad_x, grad_gamma, grad_beta = impl.layer_norm_backward(r, x, gamma, eps=eps)
    expect_gradient(grad_x, lambda z: np.sum(r * _layer_norm(z, gamma, beta, eps)), x, sample=40,
                    what="grad_x with eps = 0.1", idea=NORM + "; eps sits inside the square root here too")
    expect_gradient(grad_gamma, lambda g: np.sum(r * _layer_norm(x, g, beta, eps)), gamma,
                    what="grad_gamma, summed over the batch and positions", idea="grad_gamma = sum of grad_out * xhat "
                    "over every leading axis")
    expect_gradient(grad_beta, lambda b: np.sum(r * _layer_norm(x, gamma, b, eps)), beta,
                    what="grad_beta, summed over the batch and positions",
                    idea="grad_beta = grad_out summed over every leading axis")


def test_layer_norm_backward_float32(impl):
    require_analytic(impl, "layer_norm_backward")
    x, gamma, beta, r = _norm_case(63)
    result = impl.layer_norm_backward(r.astype(np.float32), x.astype(np.float32), gamma.astype(np.float32))
    for name, value in zip(("grad_x", "grad_gamma", "grad_beta"), result, strict=True):
        expect_dtype(value, np.float32, what=f"{name} for float32 inputs", idea=DTYPE)
    expect_gradient(result[0], lambda z: np.sum(r * _layer_norm(z, gamma, beta, 1e-5)), x, sample=20, rtol=1e-3,
                    atol=1e-4, what="grad_x for float32 inputs", idea=NORM)


def test_layer_norm_backward_rejects_a_bad_gamma(impl):
    x, _, _, r = _norm_case(64)
    expect_raises_value_error(lambda: impl.layer_norm_backward(r, x, np.ones(D_IN + 1)), argument="gamma",
                              what="layer_norm_backward with gamma of shape (8,) for x (2, 5, 7)",
                              idea="gamma has one entry per feature of x")


# ---------------------------------------------------------------- multi_head_attention_backward

def _check_mha(impl, mask, seed: int, label: str) -> None:
    x, params, r = _normal(seed, BATCH, N, D_MODEL), _mha_params(seed + 1), _normal(seed + 2, BATCH, N, D_MODEL)
    idea = MHA if mask is None else MHA + MASKED
    result = call_or_explain(impl.multi_head_attention_backward, r, x, params, N_HEADS, mask=mask,
                             what=f"multi_head_attention_backward {label}", idea=idea)
    if not expect(isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict),
                  what=f"multi_head_attention_backward's result {label}", expected="a tuple (grad_x, grads dict)",
                  observed=type(result).__name__, idea=idea):
        return
    grad_x, grads = result
    if not expect(set(grads) == set(params), what=f"the keys of grads {label}", expected=str(sorted(params)),
                  observed=str(sorted(grads)), idea="one gradient for every parameter, under the parameter's key"):
        return
    expect_gradient(grad_x, lambda z: np.sum(r * _mha(z, params, N_HEADS, mask)), x, sample=30,
                    what=f"grad_x {label}", idea=idea)
    for key in sorted(params):
        def loss(value, key=key):
            return np.sum(r * _mha(x, params | {key: value}, N_HEADS, mask))

        expect_gradient(grads[key], loss, params[key], sample=8, what=f"grads[{key!r}] {label}",
                        idea=idea + "; weights and biases are summed over the batch and positions")


def test_multi_head_attention_backward(impl):
    require_analytic(impl, "multi_head_attention_backward")
    _check_mha(impl, None, 70, "(batch 2, 5 tokens, d_model 12, 3 heads)")


def test_multi_head_attention_backward_with_a_mask(impl):
    require_analytic(impl, "multi_head_attention_backward")
    padding = np.arange(N) < np.array([N, 3])[:, None]  # sequence 1 has 3 tokens
    mask = np.tril(np.ones((N, N), dtype=bool)) & padding[:, None, :]  # (2, 5, 5): causal and padding
    _check_mha(impl, mask, 75, "with a causal and padding mask")


# ---------------------------------------------------------------- inputs no table holds (tests/unseen.py)

def _unseen_numerical(rng: np.random.Generator) -> tuple[tuple, dict]:
    shape = unseen.sizes(rng, (1, 4), (1, 5))
    f = PlainFunction("cubic", **{name: rng.normal(size=shape) for name in "abcd"})
    return (f, rng.normal(size=shape)), {"eps": float(rng.uniform(1e-4, 1e-2))}


def _own_numerical(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros(np.shape(x))
    for index in np.ndindex(grad.shape):
        step = np.zeros(np.shape(x))
        step[index] = eps
        grad[index] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


def _same_differences(observed, expected) -> bool:
    """As the central-difference test compares them: two roundings of the same differences agree to 1e-8."""
    try:
        got = np.asarray(observed, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=1e-8, atol=1e-9))


unseen.register("backward", {
    "numerical_gradient": unseen.Twin(_unseen_numerical, _own_numerical, NUMERICAL, _same_differences),
})
