"""The tests' own forward passes and gradient checks, for the test files of more than one exercise.

A graded test file never imports another (a release of one part ships only its own test files), so what
exercises 8, 9 and 12 all compute here: softmax, attention and multi-head attention written out, layer norm,
the model of exercise 9, its loss, Adam's formula, and central differences of a loss with the check of a
returned gradient against them. Everything is the tests' own code of seeded values, never the code under test.
"""

from __future__ import annotations

import numpy as np

from tests.failures import Failure
from tests.feedback import expect_close, expect_shape
from tests.kinds import remembered

STEP = 1e-6  # the tests' own central differences
DIRECTION_STEP = 1e-6  # the step of a loop's spot checks along a random direction (checked_gradients)
GRADIENTS_READ = "docs/reading.md#gradients"
RULE = (f"a backward function returns the gradient of the loss for each input of the forward function, "
        f"shaped like that input ({GRADIENTS_READ})")


def _softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    top = np.max(s.real, axis=axis, keepdims=True)  # .real: complex scores too (the exactness check's steps)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total.real > 0)

def _attention(q, k, v, mask=None):
    if np.iscomplexobj(q) or np.iscomplexobj(k):  # the exactness check's complex steps: a product BLAS runs fast
        scores = q @ np.ascontiguousarray(np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    else:
        scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), scores, -np.inf)
    weights = _softmax(scores)
    return weights @ v, weights

def _layer_norm(x, gamma, beta, eps):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps) * gamma + beta

def _mha(x, p, n_heads, mask=None):
    """Self-attention, head by head over column slices (no split_heads here)."""
    d_head = x.shape[-1] // n_heads
    contexts = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = (x @ (np.ascontiguousarray(p[f"w_{c}"][:, cols]) if np.iscomplexobj(x) or np.iscomplexobj(p[f"w_{c}"])
                        else p[f"w_{c}"][:, cols]) + p[f"b_{c}"][cols] for c in "qkv")
        contexts.append(_attention(q, k, v, mask)[0])
    return np.concatenate(contexts, axis=-1) @ p["w_o"] + p["b_o"]

@remembered  # the tests' own forward passes at seeded inputs: the same for every student, computed once
def _central(loss, x: np.ndarray, sample: int | None = None, seed: int = 0) -> tuple[tuple, np.ndarray]:
    """Central differences of ``loss`` at ``x`` (float64): at every entry, or at ``sample`` seeded entries.

    Returns the entries (an index tuple for fancy indexing) and the estimates there. ``loss`` must be
    the tests' own function of seeded values (never of a result of the code under test).
    """
    point = np.asarray(x, dtype=np.float64).copy()
    entries = list(np.ndindex(point.shape))
    if sample is not None and sample < len(entries):
        chosen = np.random.default_rng(seed).choice(len(entries), size=sample, replace=False)
        entries = [entries[i] for i in sorted(chosen)]
    values = []
    for index in entries:
        original = point[index]
        point[index] = original + STEP
        above = loss(point)
        point[index] = original - STEP
        below = loss(point)
        point[index] = original
        values.append((above - below) / (2 * STEP))
    where = tuple(np.array(entries).T.copy()) if point.ndim else ()  # contiguous index arrays
    return where, np.array(values)

def expect_gradient(observed, loss, x, *, what: str, idea: str, sample: int | None = None,
                    rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    """Check one returned gradient against the central differences of ``loss`` at ``x``."""
    if not expect_shape(observed, np.shape(x), what=f"{what}: its shape (the shape of the input)", idea=RULE):
        return False
    where, expected = _central(loss, x, sample)
    at = "every entry" if sample is None or sample >= np.size(x) else f"{len(expected)} seeded entries"
    values = np.asarray(observed, dtype=np.float64)[where]
    return expect_close(values, expected, rtol=rtol, atol=atol, idea=idea + _factor(values, expected),
                        what=f"{what} at {at}, against central differences of the loss")

def _factor(observed: np.ndarray, expected: np.ndarray) -> str:
    """A note when the observed gradient is the expected one times a constant (a scale lost or added)."""
    norm = float(np.dot(expected, expected))
    if norm == 0 or not np.all(np.isfinite(observed)):
        return ""
    ratio = float(np.dot(observed, expected) / norm)
    if abs(ratio - 1) > 1e-3 and abs(ratio) > 1e-3 and np.allclose(observed, ratio * expected, rtol=1e-4, atol=1e-9):
        return (f". Here every entry is {ratio:.4g} times the right one: a constant factor is missing or extra "
                "(a scale, a 1/n, a sum that should be a mean or the other way round)")
    return ""


def _sinusoidal(n: int, d: int) -> np.ndarray:
    pair = 2 * (np.arange(d) // 2)
    angle = np.arange(n)[:, None] / 10000.0 ** (pair / d)
    return np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))

def _attention_weights(x, p, n_heads):
    d_head = x.shape[-1] // n_heads
    out = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k = (x @ p[f"w_{c}"][:, cols] + p[f"b_{c}"][cols] for c in "qk")
        s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_head)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        out.append(e / e.sum(axis=-1, keepdims=True))
    return np.stack(out, axis=-3)  # (n, heads, seq, seq)

def _forward(params, tokens, query_position, n_heads, positions=True, weights=True):
    """Logits and attention weights (None with ``weights=False``), as the API defines the model."""
    x = np.asarray(params["embedding"], dtype=np.float64)[tokens]
    if positions:
        x = x + _sinusoidal(tokens.shape[1], x.shape[-1])
    h = x + _mha(x, params["attention"], n_heads)
    read = h[np.arange(tokens.shape[0]), query_position]
    logits = read @ params["w_out"] + params["b_out"]
    return logits, (_attention_weights(x, params["attention"], n_heads) if weights else None)

def _loss(logits, target):
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-log_probs[np.arange(len(target)), target].mean())

def _adam(params, grads, state, lr, b1, b2, eps):
    t = 1 if state is None else state["step"] + 1
    out, m_new, v_new = {}, {}, {}
    for key, value in params.items():
        if type(value) is dict:
            sub = None if state is None else {"step": state["step"], "m": state["m"][key], "v": state["v"][key]}
            out[key], inner = _adam(value, grads[key], sub, lr, b1, b2, eps)
            m_new[key], v_new[key] = inner["m"], inner["v"]
            continue
        m = (0 if state is None else b1 * state["m"][key]) + (1 - b1) * grads[key]
        v = (0 if state is None else b2 * state["v"][key]) + (1 - b2) * grads[key] ** 2
        out[key] = value - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        m_new[key], v_new[key] = m, v
    return out, {"step": t, "m": m_new, "v": v_new}

def _show_losses(losses) -> str:
    return "[" + ", ".join(f"{value:.6g}" for value in np.asarray(losses, dtype=float).ravel()[:8]) + "]"


def read_losses(losses, expected, named: dict[str, tuple[object, str]], function: str) -> tuple[str, str]:
    """What a training loop's wrong losses are, said only as far as they show it: ``(found, idea)``.

    ``named``: ``{what it is: (the losses of that mistake, or a function giving them, its idea)}``, asked in
    order, each only when it matches every loss. Then what the numbers alone show: the right losses one step late
    (each recorded after its step's update), the first loss right and the later ones not (where to look, no cause
    named), or only that they differ. A cause is never guessed (a blind round: an lr not passed on was told to pass
    the state on, and a loss recorded after the update "losses that follow no Adam steps", its list the right one
    shifted by one).
    """
    losses, expected = np.asarray(losses, dtype=float).ravel(), np.asarray(expected, dtype=float).ravel()

    def same(a, b) -> bool:
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-9))

    if losses.shape != expected.shape:
        return f"{losses.size} losses for {expected.size} steps", f"{function}: one loss per step, in order"
    for found, (values, idea) in named.items():
        if same(losses, np.asarray(values() if callable(values) else values, dtype=float).ravel()):
            return found, idea
    if losses.size > 1 and same(losses[:-1], expected[1:]):
        return ("the right losses one step late: each recorded after its step's update",
                f"{function}: record each step's loss as the gradient function gives it on that step's batch, "
                "before adam_step updates the parameters")
    if losses.size > 1 and same(losses[:1], expected[:1]):
        return ("the first loss right, the later ones not",
                f"{function}: the first step is right (the initial parameters, the first batch, the loss), so look "
                "at what each step passes on to the next: the state adam_step returns (None on the first step "
                "only), lr and the other arguments adam_step is given, the parameters it returns, how each loss "
                "is recorded")
    return "other losses than those steps give", ""


def _leaves(tree: dict, path: tuple = ()):
    """``(path, value)`` of every array of a parameter tree (nested dicts), in sorted order of the keys."""
    for key in sorted(tree):
        if type(tree[key]) is dict:
            yield from _leaves(tree[key], (*path, key))
        else:
            yield (*path, key), tree[key]


def _at(tree, path: tuple):
    """The value at ``path`` of a tree, or None where the tree has no such key."""
    for key in path:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _built(tree: dict, value_at) -> dict:
    """A tree shaped like ``tree``, with ``value_at(path)`` at each of its leaves."""
    def build(node: dict, path: tuple) -> dict:
        return {key: build(node[key], (*path, key)) if type(node[key]) is dict else value_at((*path, key))
                for key in node}
    return build(tree, ())


def checked_gradients(result, params: dict, loss_at, *, what: str, idea: str,
                      direction: np.random.Generator | None = None) -> tuple[dict | None, Failure | None]:
    """``(grads, None)`` when a gradient function's ``result`` holds at ``params``; else ``(None, failure)``.

    For the training loops a test runs itself over the student's gradient function (exercises 9 and 12), so that
    no model or loss curve made another way is scored. Always: a pair ``(loss, grads)``, ``grads`` a finite
    array shaped like every parameter (nested dicts as in ``params``), returned as float64 in ``params``' shape.
    With ``direction`` (a generator: the spot checks the loop draws), also the loss against ``loss_at(params)``,
    the test's own forward pass, and the gradient along a random unit direction through every parameter at once
    against central differences of ``loss_at``.
    """
    grads = result[1] if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict) else None
    shapes = {path: np.shape(value) for path, value in _leaves(params)}
    label = {path: "".join(f"[{key!r}]" for key in path) for path in shapes}
    expected = {label[path]: shape for path, shape in shapes.items()}
    observed = {label[path]: np.shape(_at(grads, path)) for path in shapes} if grads is not None else None
    if observed != expected:
        return None, Failure(what, f"(loss, grads) with gradients of the shapes {expected}",
                             f"{type(result).__name__}: gradient shapes {observed}", idea)
    flat = {path: np.asarray(_at(grads, path), dtype=np.float64) for path in shapes}
    broken = [label[path] for path, value in flat.items() if not np.all(np.isfinite(value))]
    if broken:
        return None, Failure(what, "finite gradients", f"NaN or inf in grads{', grads'.join(broken)}", idea)
    if direction is not None:
        failure = _spot_check(result[0], flat, params, loss_at, what, idea, direction)
        if failure is not None:
            return None, failure
    return _built(params, flat.__getitem__), None


def _spot_check(reported, flat: dict, params: dict, loss_at, what: str, idea: str,
                direction: np.random.Generator) -> Failure | None:
    """Why a gradient's answer does not hold at ``params`` (its loss, its slope along a random direction), or None."""
    loss = loss_at(params)
    try:
        observed_loss = float(reported) if np.ndim(reported) == 0 else np.nan
    except (TypeError, ValueError):  # not a number: the check below says what it is
        observed_loss = np.nan
    if not np.isclose(observed_loss, loss, rtol=1e-6, atol=1e-9):
        return Failure(what + ": the loss", f"{loss:.8g}, cross_entropy of this file's forward pass", f"{reported!r}",
                       idea)
    u = {path: direction.normal(size=value.shape) for path, value in flat.items()}
    norm = np.sqrt(sum(float(np.sum(value**2)) for value in u.values()))
    above, below = (loss_at(_built(params, lambda path, sign=sign: np.asarray(_at(params, path), dtype=np.float64)
                                   + sign * DIRECTION_STEP * u[path] / norm)) for sign in (1, -1))
    expected = (above - below) / (2 * DIRECTION_STEP)
    along = sum(float(np.sum(flat[path] * u[path])) for path in flat) / norm
    size = np.sqrt(sum(float(np.sum(value**2)) for value in flat.values()))
    if abs(along - expected) > 1e-5 * size + 1e-8:
        return Failure(what + ": the gradient along a random direction (every parameter at once)",
                       f"{expected:.8g} (central differences of the loss)", f"{along:.8g}", idea)
    return None
