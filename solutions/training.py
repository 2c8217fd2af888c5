"""Exercise 9: attention that learns. Train one attention layer to resolve "it".

The reading's sentence, "the vessel changed course because it detected
obstacle", asks which noun "it" refers to. Until now every weight was
random, so every heatmap showed arithmetic, not meaning. Here a small model
learns the answer from examples. Reading: docs/reading.md#training.

The task (given, in ``_tasks.py``: ``antecedent_task(rng, n)``) is made of
sentences shaped like the reading's: a noun before the pronoun is its
antecedent, another noun after it is not, and both come from the same list
of nouns. At the pronoun, the model must predict the antecedent's token id.

The model is the smallest that can do it:

* ``x = embedding[tokens]``, plus ``sinusoidal_encoding(seq, d_model)`` when
  ``positions`` is True;
* ``h = x + MHA(x)``: one multi-head self-attention layer with its residual;
* ``logits = h[i, query_position[i]] @ w_out + b_out``: read the pronoun's
  vector out into one score per word of the vocabulary.

Training is the loop every model uses: forward, loss, backward, update.
The loss is the cross-entropy of the softmax of the logits (the mean over
the examples of ``-log p[target]``); its gradient with respect to the
logits is ``(softmax(logits) - onehot(target)) / n``, the rest comes from
exercise 8's backward functions. Adam updates each parameter with a running
mean ``m`` of its gradients and a running mean ``v`` of their squares. Both
start at 0, so early on they are too small; dividing by ``1 - beta**t`` (the
bias correction, ``t`` the number of the step, from 1) undoes that.

What order means here. Without positional encodings, attention sees the
sentence as a bag of tokens: the two nouns look the same to the pronoun
wherever they stand, so the model cannot tell which came first and stays
near chance between them (about half right), however long it trains. With
them, the pronoun's query can pick out the key at the antecedent's
position, and the trained model puts most of its weight there. That weight
is still a measurement of this model on this task, not an explanation of
what language models do in general.

What the tests check
--------------------
* ``cross_entropy``: the mean of ``-log softmax`` at the targets against a
  hand computation, the gradient against central differences, large logits
  (1000 and more) without overflow;
* ``init_model``: keys, shapes, ``b_out`` zeros, randomness only from ``rng``;
* ``model_forward``: shapes, the positions switched on and off, the residual,
  the read-out at the query position;
* ``model_gradients``: the loss, and the gradient of every parameter against
  central differences (repeated tokens included: their embedding rows add);
  then a model trained with it, in a loop the tests run themselves (a first
  model of init_model's scales, Adam's formula, batches of a task variant
  drawn for your submission), every answer checked as it comes: held-out
  accuracy of at least 90% and an average attention weight above 0.5 from
  the pronoun to its antecedent (about 1/8 before training); without
  positions, near chance between the two nouns;
* ``adam_step``: one and several steps against the formula with bias
  correction, new dicts (the inputs unchanged), nested parameters;
* ``train``: ``init_model`` then Adam steps with their state, on one sentence
  repeated (every batch the same, so its losses are known), the losses those
  of the model it trains, a batch drawn anew from ``rng`` at every step, and
  ``positions`` passed on.
"""

from __future__ import annotations

import numpy as np

from ._checks import as_float_array, require_positive_int
from .backward import linear_backward, multi_head_attention_backward
from .multihead import init_multi_head, multi_head_attention
from .positional import sinusoidal_encoding
from .projections import init_weight


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of ``softmax(logits)`` at the targets, and its gradient.

    Parameters
    ----------
    logits : numpy.ndarray
        Shape ``(n, n_classes)``: unnormalised scores.
    targets : numpy.ndarray
        Shape ``(n,)``: integer class ids in ``[0, n_classes)``.

    Returns
    -------
    loss : float
        ``mean_i(logsumexp(logits[i]) - logits[i, targets[i]])``, computed
        after subtracting each row's maximum, so large logits do not overflow.
    grad_logits : numpy.ndarray
        ``(softmax(logits) - onehot(targets)) / n``, shape ``(n, n_classes)``.

    Raises
    ------
    ValueError
        If the shapes do not fit or a target is not a valid class id.
    """
    logits = as_float_array("logits", logits)
    targets = np.asarray(targets)
    if logits.ndim != 2:
        raise ValueError(f"logits must have shape (n, n_classes), got {logits.shape}")
    n, n_classes = logits.shape
    if targets.shape != (n,) or not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"targets must be integers of shape ({n},), got {targets.dtype} of shape {targets.shape}")
    if n and (targets.min() < 0 or targets.max() >= n_classes):
        raise ValueError(f"targets must lie in [0, {n_classes}), got values from {targets.min()} to {targets.max()}")
    shifted = logits - logits.max(axis=-1, keepdims=True)  # the largest logit of each row becomes 0
    log_total = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    log_probs = shifted - log_total  # (n, n_classes)
    rows = np.arange(n)
    loss = float(-log_probs[rows, targets].mean())
    grad = np.exp(log_probs)
    grad[rows, targets] -= 1.0
    return loss, grad / n


def init_model(rng: np.random.Generator, vocab_size: int, d_model: int, n_heads: int) -> dict:
    """Create the random parameters of the one-layer model.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    vocab_size, d_model, n_heads : int
        Number of words, model width, number of heads (dividing ``d_model``).

    Returns
    -------
    dict
        ``embedding`` ``(vocab_size, d_model)``: 0.3 times a standard normal
        (drawn first); ``attention``: ``init_multi_head(rng, d_model,
        n_heads)``; ``w_out``: ``init_weight(rng, d_model, vocab_size)``;
        ``b_out``: zeros ``(vocab_size,)``.

    Raises
    ------
    ValueError
        If a size is not positive or ``n_heads`` does not divide ``d_model``.
    """
    vocab_size = require_positive_int("vocab_size", vocab_size)
    d_model = require_positive_int("d_model", d_model)
    embedding = 0.3 * rng.normal(size=(vocab_size, d_model))  # smaller than the positions, so order shows
    attention = init_multi_head(rng, d_model, n_heads)
    return {
        "embedding": embedding,
        "attention": attention,
        "w_out": init_weight(rng, d_model, vocab_size),
        "b_out": np.zeros(vocab_size),
    }


def _embed(params: dict, tokens: np.ndarray, positions: bool) -> np.ndarray:
    embedding = as_float_array("params['embedding']", params["embedding"])
    x = embedding[tokens]  # (n, seq, d_model)
    if positions:
        x = x + sinusoidal_encoding(tokens.shape[-1], embedding.shape[-1])
    return x


def _check_batch(params: dict, tokens: np.ndarray, query_position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(params, dict) or not {"embedding", "attention", "w_out", "b_out"} <= set(params):
        raise ValueError("params must be a dict made like init_model's (embedding, attention, w_out, b_out)")
    tokens, query_position = np.asarray(tokens), np.asarray(query_position)
    vocab_size = np.shape(params["embedding"])[0]
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integers of shape (n, seq), got {tokens.dtype} of shape {tokens.shape}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"tokens must lie in [0, {vocab_size}), the rows of params['embedding']")
    if query_position.shape != tokens.shape[:1] or not np.issubdtype(query_position.dtype, np.integer) or (
            query_position.size and not (0 <= query_position.min() and query_position.max() < tokens.shape[1])):
        raise ValueError(f"query_position must be {tokens.shape[0]} integers in [0, {tokens.shape[1]}), "
                         f"got {query_position.dtype} of shape {query_position.shape}")
    return tokens, query_position


def model_forward(
    params: dict, tokens: np.ndarray, query_position: np.ndarray, n_heads: int, positions: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Run the model on a batch of sentences.

    Parameters
    ----------
    params : dict
        As made by :func:`init_model`.
    tokens : numpy.ndarray
        Shape ``(n, seq)``: token ids.
    query_position : numpy.ndarray
        Shape ``(n,)``: where each sentence's pronoun is.
    n_heads : int
        Number of heads.
    positions : bool, optional
        Add ``sinusoidal_encoding(seq, d_model)`` to the embeddings.

    Returns
    -------
    logits : numpy.ndarray
        Shape ``(n, vocab_size)``: ``h[i, query_position[i]] @ w_out +
        b_out`` with ``h = x + MHA(x)``.
    weights : numpy.ndarray
        Shape ``(n, n_heads, seq, seq)``: the attention weights.

    Raises
    ------
    ValueError
        If the parameters, tokens or positions do not fit.
    """
    tokens, query_position = _check_batch(params, tokens, query_position)
    x = _embed(params, tokens, positions)  # (n, seq, d_model)
    attended, weights = multi_head_attention(x, params["attention"], n_heads)
    h = x + attended  # the residual
    read = h[np.arange(len(tokens)), query_position]  # (n, d_model): the pronoun's vector
    return read @ params["w_out"] + params["b_out"], weights


def model_gradients(
    params: dict,
    tokens: np.ndarray,
    query_position: np.ndarray,
    target: np.ndarray,
    n_heads: int,
    positions: bool = True,
) -> tuple[float, dict]:
    """The loss on a batch and its gradient with respect to every parameter.

    Parameters
    ----------
    params : dict
        As made by :func:`init_model`.
    tokens, query_position : numpy.ndarray
        As for :func:`model_forward`.
    target : numpy.ndarray
        Shape ``(n,)``: the token id to predict at each pronoun.
    n_heads : int
        Number of heads.
    positions : bool, optional
        As for :func:`model_forward`.

    Returns
    -------
    loss : float
        ``cross_entropy(logits, target)``'s loss.
    grads : dict
        Shaped like ``params`` (``attention`` a dict of its own). A token
        that occurs several times adds the gradient of each occurrence to
        its embedding row.

    Raises
    ------
    ValueError
        As :func:`model_forward` and :func:`cross_entropy`.
    """
    tokens, query_position = _check_batch(params, tokens, query_position)
    x = _embed(params, tokens, positions)
    attended, _ = multi_head_attention(x, params["attention"], n_heads)
    h = x + attended
    rows = np.arange(len(tokens))
    read = h[rows, query_position]  # (n, d_model)
    loss, grad_logits = cross_entropy(read @ params["w_out"] + params["b_out"], target)
    grads: dict = {}
    grad_read, grads["w_out"], grads["b_out"] = linear_backward(grad_logits, read, params["w_out"])
    grad_h = np.zeros_like(h)
    grad_h[rows, query_position] = grad_read  # only the pronoun's vector reached the loss
    grad_x, grads["attention"] = multi_head_attention_backward(grad_h, x, params["attention"], n_heads)
    grad_x = grad_x + grad_h  # the residual path
    grad_embedding = np.zeros_like(np.asarray(params["embedding"], dtype=grad_x.dtype))
    np.add.at(grad_embedding, tokens, grad_x)  # a repeated token adds every occurrence's gradient
    grads["embedding"] = grad_embedding
    return loss, {key: grads[key] for key in params}


def _update(params: dict, grads: dict, m: dict | None, v: dict | None, step: int, lr: float,
            beta1: float, beta2: float, eps: float) -> tuple[dict, dict, dict]:
    new_params, new_m, new_v = {}, {}, {}
    for key, param in params.items():
        old_m, old_v = (None if m is None else m[key]), (None if v is None else v[key])
        if isinstance(param, dict):
            new_params[key], new_m[key], new_v[key] = _update(param, grads[key], old_m, old_v, step, lr,
                                                              beta1, beta2, eps)
            continue
        grad = np.asarray(grads[key])
        moment = (1 - beta1) * grad if old_m is None else beta1 * old_m + (1 - beta1) * grad
        square = (1 - beta2) * grad**2 if old_v is None else beta2 * old_v + (1 - beta2) * grad**2
        m_hat = moment / (1 - beta1**step)  # bias correction: both means start at 0
        v_hat = square / (1 - beta2**step)
        new_params[key] = param - lr * m_hat / (np.sqrt(v_hat) + eps)
        new_m[key], new_v[key] = moment, square
    return new_params, new_m, new_v


def adam_step(
    params: dict,
    grads: dict,
    state: dict | None,
    lr: float = 1e-2,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> tuple[dict, dict]:
    """One Adam update of every parameter (nested dicts allowed).

    Parameters
    ----------
    params, grads : dict
        The parameters and their gradients, with the same keys and shapes
        (a value may itself be a dict).
    state : dict or None
        None on the first call, then the ``new_state`` of the previous call.
    lr, beta1, beta2, eps : float, optional
        Step size, decay rates of the two running means, and the term that
        keeps the division away from 0.

    Returns
    -------
    new_params : dict
        ``p - lr * m_hat / (sqrt(v_hat) + eps)`` for every parameter, where
        at step ``t`` (1 on the first call) ``m = beta1 m + (1 - beta1) g``,
        ``v = beta2 v + (1 - beta2) g**2`` (both start at 0), ``m_hat = m /
        (1 - beta1**t)`` and ``v_hat = v / (1 - beta2**t)``. New dicts and
        arrays; ``params`` is not changed.
    new_state : dict
        ``{"step": t, "m": ..., "v": ...}``, ``m`` and ``v`` shaped like
        ``params``.

    Raises
    ------
    ValueError
        If ``lr`` is not positive, a beta is outside ``[0, 1)``, or a
        gradient is missing.
    """
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    for name, beta in (("beta1", beta1), ("beta2", beta2)):
        if not 0 <= beta < 1:
            raise ValueError(f"{name} must lie in [0, 1), got {beta}")
    if not isinstance(params, dict) or not isinstance(grads, dict):
        raise ValueError("params and grads must be dicts with the same keys")

    def same_keys(p: dict, g: dict, where: str) -> None:
        if set(p) != set(g):
            raise ValueError(f"grads{where} must have the keys of params{where}: {sorted(p)}, got {sorted(g)}")
        for key, inner in p.items():
            if isinstance(inner, dict):
                same_keys(inner, g[key], f"{where}[{key!r}]")

    same_keys(params, grads, "")
    step = 1 if state is None else int(state["step"]) + 1
    m = None if state is None else state["m"]
    v = None if state is None else state["v"]
    new_params, new_m, new_v = _update(params, grads, m, v, step, lr, beta1, beta2, eps)
    return new_params, {"step": step, "m": new_m, "v": new_v}


def train(
    rng: np.random.Generator,
    task: dict,
    d_model: int = 16,
    n_heads: int = 1,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 1e-2,
    positions: bool = True,
) -> tuple[dict, list[float]]:
    """Train a fresh model on ``task`` with Adam.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness: first ``init_model``, then each
        step's batch of ``batch_size`` examples drawn with replacement.
    task : dict
        As made by ``antecedent_task``: ``tokens``, ``query_position``,
        ``target``, ``vocab``.
    d_model, n_heads : int, optional
        The model's width and number of heads.
    steps, batch_size : int, optional
        Number of Adam steps and examples per step.
    lr : float, optional
        Adam's step size.
    positions : bool, optional
        Whether the model adds positional encodings.

    Returns
    -------
    params : dict
        The trained parameters.
    losses : list of float
        The batch loss of every step, before its update.

    Raises
    ------
    ValueError
        If the task or a size is not valid.
    """
    if not isinstance(task, dict) or not {"tokens", "query_position", "target", "vocab"} <= set(task):
        raise ValueError("task must be a dict made like antecedent_task's (tokens, query_position, target, vocab)")
    steps = require_positive_int("steps", steps)
    batch_size = require_positive_int("batch_size", batch_size)
    tokens, query_position, target = (np.asarray(task[key]) for key in ("tokens", "query_position", "target"))
    params = init_model(rng, len(task["vocab"]), d_model, n_heads)
    state = None
    losses = []
    for _ in range(steps):
        batch = rng.integers(0, len(tokens), size=batch_size)
        loss, grads = model_gradients(params, tokens[batch], query_position[batch], target[batch], n_heads,
                                      positions)
        params, state = adam_step(params, grads, state, lr=lr)
        losses.append(loss)
    return params, losses
