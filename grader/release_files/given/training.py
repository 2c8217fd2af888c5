"""Exercise 9, training: GIVEN. This course does not assign it; you need not write it.

Working code of an earlier exercise that the exercises of this course build on, so that they run and their
demos work. Read it as a worked answer; its public tests (tests/test_09_training.py) ship and pass. The
reading explains the idea: docs/reading.md#training. The task it learns is in ``_tasks.py``.
"""

from __future__ import annotations

import numbers

import numpy as np

from .backward import linear_backward, multi_head_attention_backward
from .multihead import init_multi_head, multi_head_attention
from .positional import sinusoidal_encoding
from .projections import init_weight

MODEL_KEYS = ("embedding", "attention", "w_out", "b_out")
TASK_KEYS = ("tokens", "query_position", "target", "vocab")


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """The mean of ``-log softmax(logits)[target]`` over the rows, and its gradient with respect to the logits."""
    logits, targets = np.asarray(logits), np.asarray(targets)
    if logits.dtype == object or not np.issubdtype(logits.dtype, np.number):
        raise ValueError(f"logits must be a numeric array, got dtype {logits.dtype}")
    logits = logits if np.issubdtype(logits.dtype, np.floating) else logits.astype(np.float64)
    if logits.ndim != 2:
        raise ValueError(f"logits must be 2-D, shape (n, n_classes), got {logits.shape}")
    n, classes = logits.shape
    if not (targets.shape == (n,) and np.issubdtype(targets.dtype, np.integer)):
        raise ValueError(f"targets must be {n} integers, shape ({n},), got {targets.dtype} of shape {targets.shape}")
    if n and not (0 <= targets.min() and targets.max() < classes):
        raise ValueError(f"targets must be class ids in [0, {classes}), got {targets.min()} to {targets.max()}")
    stable = logits - np.max(logits, axis=1, keepdims=True)  # no exp overflows: the largest logit is now 0
    log_p = stable - np.log(np.sum(np.exp(stable), axis=1, keepdims=True))  # log-softmax, never log(0)
    picked = np.arange(n), targets
    loss = -float(log_p[picked].mean())
    probs = np.exp(log_p)
    probs[picked] -= 1.0
    return loss, probs / n


def init_model(rng: np.random.Generator, vocab_size: int, d_model: int, n_heads: int) -> dict:
    """The embedding (0.3 times a normal, drawn first), one multi-head attention, the output layer."""
    words, width = _count("vocab_size", vocab_size), _count("d_model", d_model)
    model = {"embedding": rng.normal(size=(words, width)) * 0.3}
    model["attention"] = init_multi_head(rng, width, n_heads)
    model["w_out"] = init_weight(rng, width, words)
    model["b_out"] = np.zeros(words)
    return model


def _inputs(params: dict, tokens: np.ndarray, query_position: np.ndarray,
            positions: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked token ids and pronoun positions, and the vectors the attention reads."""
    if not isinstance(params, dict) or any(key not in params for key in MODEL_KEYS):
        raise ValueError(f"params must be a dict made like init_model's, with the keys {', '.join(MODEL_KEYS)}")
    tokens, query_position = map(np.asarray, (tokens, query_position))
    table = np.asarray(params["embedding"])
    if not (tokens.ndim == 2 and np.issubdtype(tokens.dtype, np.integer)):
        raise ValueError(f"tokens must be integer ids of shape (n, seq), got {tokens.dtype} of shape {tokens.shape}")
    if tokens.size and not (0 <= tokens.min() and tokens.max() < table.shape[0]):
        raise ValueError(f"tokens must lie in [0, {table.shape[0]}), the rows of params['embedding']")
    n, seq = tokens.shape
    if (query_position.shape != (n,) or not np.issubdtype(query_position.dtype, np.integer)
            or (n and not (0 <= query_position.min() and query_position.max() < seq))):
        raise ValueError(f"query_position must be {n} integers in [0, {seq}), got {query_position.dtype} of shape "
                         f"{query_position.shape}")
    vectors = table[tokens]
    if positions:
        vectors = vectors + sinusoidal_encoding(seq, table.shape[1])
    return (tokens, query_position, vectors)


def model_forward(params: dict, tokens: np.ndarray, query_position: np.ndarray, n_heads: int,
                  positions: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The logits read at each pronoun (after attention and its residual), and the attention weights."""
    _, where, x = _inputs(params, tokens, query_position, positions)
    mixed, weights = multi_head_attention(x, params["attention"], n_heads)
    at_pronoun = (x + mixed)[np.arange(len(where)), where]
    return at_pronoun @ params["w_out"] + params["b_out"], weights


def model_gradients(params: dict, tokens: np.ndarray, query_position: np.ndarray, target: np.ndarray,
                    n_heads: int, positions: bool = True) -> tuple[float, dict]:
    """The batch's loss and the gradient of every parameter (shaped like ``params``)."""
    ids, where, x = _inputs(params, tokens, query_position, positions)
    mixed, _ = multi_head_attention(x, params["attention"], n_heads)
    batch = np.arange(len(where))
    at_pronoun = (x + mixed)[batch, where]
    loss, grad_logits = cross_entropy(at_pronoun @ params["w_out"] + params["b_out"], target)
    grad_pronoun, grad_w_out, grad_b_out = linear_backward(grad_logits, at_pronoun, params["w_out"])
    grad_sum = np.zeros(x.shape, dtype=grad_pronoun.dtype)
    grad_sum[batch, where] = grad_pronoun  # the loss saw only each pronoun's vector
    grad_x, grad_attention = multi_head_attention_backward(grad_sum, x, params["attention"], n_heads)
    grad_x = grad_x + grad_sum  # and the residual carried it straight back to x too
    grad_embedding = np.zeros(np.shape(params["embedding"]), dtype=grad_x.dtype)
    np.add.at(grad_embedding, ids, grad_x)  # every occurrence of a word adds to its row
    grads = {"embedding": grad_embedding, "attention": grad_attention, "w_out": grad_w_out, "b_out": grad_b_out}
    return loss, {name: grads[name] for name in params}


def _check_keys(params: dict, grads: object, where: str = "") -> None:
    if not isinstance(grads, dict) or set(grads) != set(params):
        found = sorted(grads) if isinstance(grads, dict) else type(grads).__name__
        raise ValueError(f"grads{where} must have the keys of params{where}: {sorted(params)}, got {found}")
    for key, value in params.items():
        if isinstance(value, dict):
            _check_keys(value, grads[key], f"{where}[{key!r}]")


def adam_step(params: dict, grads: dict, state: dict | None, lr: float = 1e-2, beta1: float = 0.9,
              beta2: float = 0.999, eps: float = 1e-8) -> tuple[dict, dict]:
    """One Adam step on every (nested) parameter; returns new parameters and the new state."""
    if not lr > 0:
        raise ValueError(f"lr must be a positive step size, got {lr}")
    if not 0 <= beta1 < 1:
        raise ValueError(f"beta1 must lie in [0, 1), got {beta1}")
    if not 0 <= beta2 < 1:
        raise ValueError(f"beta2 must lie in [0, 1), got {beta2}")
    if type(params) is not dict and not isinstance(params, dict):
        raise ValueError("params and grads must both be dicts, with the same keys")
    _check_keys(params, grads)
    t = 1 if state is None else int(state["step"]) + 1

    def walk(p: dict, g: dict, m: dict | None, v: dict | None) -> tuple[dict, dict, dict]:
        out_p, out_m, out_v = {}, {}, {}
        for key in p:
            old_m = None if m is None else m[key]
            old_v = None if v is None else v[key]
            if isinstance(p[key], dict):
                out_p[key], out_m[key], out_v[key] = walk(p[key], g[key], old_m, old_v)
                continue
            grad = np.asarray(g[key])
            first = (1 - beta1) * grad + (0 if old_m is None else beta1 * old_m)
            second = (1 - beta2) * (grad * grad) + (0 if old_v is None else beta2 * old_v)
            step = lr * (first / (1 - beta1**t)) / (np.sqrt(second / (1 - beta2**t)) + eps)
            out_p[key], out_m[key], out_v[key] = p[key] - step, first, second
        return out_p, out_m, out_v

    new_params, m, v = walk(params, grads, None if state is None else state["m"],
                            None if state is None else state["v"])
    return new_params, {"step": t, "m": m, "v": v}


def train(rng: np.random.Generator, task: dict, d_model: int = 16, n_heads: int = 1, steps: int = 300,
          batch_size: int = 32, lr: float = 1e-2, positions: bool = True) -> tuple[dict, list[float]]:
    """A fresh model (``init_model`` draws first), then ``steps`` Adam steps on batches drawn with replacement."""
    if not isinstance(task, dict) or any(key not in task for key in TASK_KEYS):
        raise ValueError(f"task must be a dict made like antecedent_task's, with the keys {', '.join(TASK_KEYS)}")
    steps, batch_size = _count("steps", steps), _count("batch_size", batch_size)
    data = {key: np.asarray(task[key]) for key in TASK_KEYS[:3]}
    params = init_model(rng, vocab_size=len(task["vocab"]), d_model=d_model, n_heads=n_heads)
    state, losses = None, []
    for _ in range(steps):
        pick = rng.integers(0, len(data["tokens"]), size=batch_size)
        loss, grads = model_gradients(params, data["tokens"][pick], data["query_position"][pick],
                                      data["target"][pick], n_heads, positions)
        params, state = adam_step(params, grads, state, lr)
        losses.append(loss)

    return params, losses
