"""Exercise 12: context changes the meaning. A "not" belongs to one verb: which one decides the answer.

"The payment was not approved and the refund was indeed rejected" and "the
payment was indeed approved and the refund was not rejected" are made of
the same eleven words. Asked "was the payment approved?", the first says no
and the second yes. What decides is not which words occur but which word
stands next to which: the "not" belongs to the verb it precedes.

Read first: the reading (docs/reading.md#meaning).

The task (given, in ``_negation_task.py``: ``negation_task(rng, n_pairs,
n_controls)``) is made of such pairs: the same words, the same question
asked at the same verb, opposite answers ("yes" and "no", two words of the
vocabulary). Two models are compared on held-out pairs:

* a bag of words: the mean of the token embeddings next to the asked verb's
  own embedding, then a hidden layer with a ReLU and a read-out. Whatever
  its weights, both members of a pair give it the same input, so it gives
  them the same answer and gets at most one of the two right: at most 50%
  on pairs, and no pair with both right. This is a bound, not a measurement;
  training shows the model sitting on it;
* one attention layer with positional encodings, exercise 9's model trained
  by exercise 9's ``train``: the asked verb's query can pick out the key of
  the slot right before it, where its own "not" stands or does not. It gets
  the pairs right, and its weights show where it looked. (The same layer
  without positions sees a bag again, and the same bound holds for it.)

The gradients of the bag model are written by hand, as in exercises 8 and
9: ``cross_entropy`` and ``adam_step`` (exercise 9) and ``linear_backward``
(exercise 8) are reused; what is new is the ReLU and the mean.

What the tests check
--------------------
* ``pooled_features``: the shape ``(n, 2 d_model)``, the mean of the rows and
  the query's own row against the test's own computation, the same output
  for two orders of the same tokens;
* ``init_pooled``: keys, shapes, zero biases, randomness only from ``rng``;
* ``pooled_forward``: the logits against the test's own forward pass (the
  ReLU included), and bad parameters rejected with a ``ValueError``;
* ``pooled_gradients``: computed by the chain rule (at a larger size it
  may cost a few dozen forward passes, not one per parameter); the loss,
  and every gradient against central differences (repeated tokens and the
  asked word's double role included);
* ``train_pooled``: on one sentence repeated, its losses are those of
  ``init_pooled`` followed by Adam steps that keep their state, and the
  model it returns is the one after the last step;
* ``pair_accuracy`` and ``negation_attention``: on the test's own
  predictions and weights, against a hand count;
* ``compare``: on a task drawn by the test (a vocabulary of its own), its
  models are those of ``train_pooled`` then ``train`` from its generator,
  and its figures those the test recomputes from them;
* the claim: a bag model that the test trains itself with your
  ``pooled_gradients`` (its own first model, batches and Adam, your
  gradient at every step) gets exactly 50% on pairs while it gets the
  controls right. Only your gradients can earn it. That one attention
  layer with positions reads the pairs is exercise 9's ``train`` at work:
  ``compare`` shows it, no test of this exercise scores it.

Bad input raises ``ValueError`` with a message that names the argument that
is wrong, as the function's signature calls it (``params`` for parameters
that do not fit, not the name of one of their arrays).
"""

from __future__ import annotations

import numpy as np

from ._checks import as_float_array, require_positive_int
from .backward import linear_backward
from .projections import init_weight
from .training import adam_step, cross_entropy, model_forward, train

TASK_KEYS = {"tokens", "query_position", "target", "pair", "own_slot", "other_slot", "vocab"}
POOLED_KEYS = ("embedding", "w_hidden", "b_hidden", "w_out", "b_out")


def _check_tokens(tokens: object, query_position: object, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    tokens, query_position = np.asarray(tokens), np.asarray(query_position)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integers of shape (n, seq), got {tokens.dtype} of shape {tokens.shape}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"tokens must lie in [0, {vocab_size}), the rows of the embedding")
    if query_position.shape != tokens.shape[:1] or not np.issubdtype(query_position.dtype, np.integer) or (
            query_position.size and not (0 <= query_position.min() and query_position.max() < tokens.shape[1])):
        raise ValueError(f"query_position must be {tokens.shape[0]} integers in [0, {tokens.shape[1]}), "
                         f"got {query_position.dtype} of shape {query_position.shape}")
    return tokens, query_position


def _check_task(task: object) -> dict:
    if not isinstance(task, dict) or not TASK_KEYS <= set(task):
        raise ValueError(f"task must be a dict made like negation_task's ({', '.join(sorted(TASK_KEYS))})")
    return task


def pooled_features(embedding: np.ndarray, tokens: np.ndarray, query_position: np.ndarray) -> np.ndarray:
    """What a bag of words sees: the mean of the token embeddings, and the asked word's own.

    The mean forgets the order: any two sentences made of the same tokens
    get the same mean. The asked word's embedding says which question is
    asked (about which verb); it is the same for the two members of a pair.

    Parameters
    ----------
    embedding : numpy.ndarray
        Shape ``(vocab_size, d_model)``: one row per word.
    tokens : numpy.ndarray
        Shape ``(n, seq)``: token ids.
    query_position : numpy.ndarray
        Shape ``(n,)``: where each sentence's question is asked.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 2 d_model)``: for sentence ``i``, the mean over its
        positions of ``embedding[tokens[i]]`` (first ``d_model`` columns) and
        ``embedding[tokens[i, query_position[i]]]`` (the last ``d_model``).

    Raises
    ------
    ValueError
        If ``embedding`` is not 2-D, or the tokens or positions do not fit.
    """
    embedding = as_float_array("embedding", embedding)
    if embedding.ndim != 2:
        raise ValueError(f"embedding must have shape (vocab_size, d_model), got {embedding.shape}")
    tokens, query_position = _check_tokens(tokens, query_position, embedding.shape[0])
    mean = embedding[tokens].mean(axis=1)  # (n, d_model): the bag, in any order
    asked = embedding[tokens[np.arange(len(tokens)), query_position]]  # (n, d_model): the asked word
    return np.concatenate([mean, asked], axis=-1)  # (n, 2 d_model)


def init_pooled(rng: np.random.Generator, vocab_size: int, d_model: int = 16, d_hidden: int = 32) -> dict:
    """Create the random parameters of the bag-of-words model.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    vocab_size, d_model, d_hidden : int, optional
        Number of words, embedding width, hidden width.

    Returns
    -------
    dict
        Drawn in this order: ``embedding`` ``(vocab_size, d_model)``, 0.3 times
        a standard normal; ``w_hidden``: ``init_weight(rng, 2 d_model,
        d_hidden)``; ``w_out``: ``init_weight(rng, d_hidden, vocab_size)``;
        and the biases ``b_hidden`` ``(d_hidden,)`` and ``b_out``
        ``(vocab_size,)``, zeros.

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    vocab_size = require_positive_int("vocab_size", vocab_size)
    d_model = require_positive_int("d_model", d_model)
    d_hidden = require_positive_int("d_hidden", d_hidden)
    embedding = 0.3 * rng.normal(size=(vocab_size, d_model))  # the same scale as exercise 9's model
    w_hidden = init_weight(rng, 2 * d_model, d_hidden)
    w_out = init_weight(rng, d_hidden, vocab_size)
    return {"embedding": embedding, "w_hidden": w_hidden, "b_hidden": np.zeros(d_hidden), "w_out": w_out,
            "b_out": np.zeros(vocab_size)}


def _check_pooled(params: object) -> dict:
    if not isinstance(params, dict) or not set(POOLED_KEYS) <= set(params):
        raise ValueError(f"params must be a dict made like init_pooled's ({', '.join(POOLED_KEYS)})")
    d_model = np.shape(params["embedding"])[-1]
    d_hidden = np.shape(params["b_hidden"])[0] if np.ndim(params["b_hidden"]) == 1 else -1
    if np.shape(params["w_hidden"]) != (2 * d_model, d_hidden) or np.shape(params["w_out"])[:1] != (d_hidden,):
        raise ValueError(f"params['w_hidden'] must have shape (2 d_model, d_hidden) = ({2 * d_model}, {d_hidden}) "
                         f"and params['w_out'] {d_hidden} rows, got {np.shape(params['w_hidden'])} and "
                         f"{np.shape(params['w_out'])}")
    return params


def pooled_forward(params: dict, tokens: np.ndarray, query_position: np.ndarray) -> np.ndarray:
    """Run the bag-of-words model: features, a hidden layer with a ReLU, a read-out.

    The hidden layer makes the model nonlinear, so it could learn any
    function of its features; but the features are the same for two
    sentences of the same words, so no weights can tell them apart.

    Parameters
    ----------
    params : dict
        As made by :func:`init_pooled`.
    tokens, query_position : numpy.ndarray
        As for :func:`pooled_features`.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, vocab_size)``: ``relu(f @ w_hidden + b_hidden) @ w_out +
        b_out`` with ``f = pooled_features(embedding, tokens,
        query_position)`` and ``relu(z) = max(z, 0)``.

    Raises
    ------
    ValueError
        If the parameters (the message names ``params``), tokens or
        positions do not fit.
    """
    params = _check_pooled(params)
    features = pooled_features(params["embedding"], tokens, query_position)  # (n, 2 d_model)
    hidden = np.maximum(features @ params["w_hidden"] + params["b_hidden"], 0.0)  # (n, d_hidden)
    return hidden @ params["w_out"] + params["b_out"]  # (n, vocab_size)


def pooled_gradients(
    params: dict, tokens: np.ndarray, query_position: np.ndarray, target: np.ndarray
) -> tuple[float, dict]:
    """The loss of the bag-of-words model on a batch, and its gradient for every parameter.

    Backwards the way the forward pass came: ``cross_entropy`` gives the
    logits' gradient; ``linear_backward`` the read-out's; the ReLU passes the
    gradient where its input was positive and blocks it elsewhere;
    ``linear_backward`` the hidden layer's; then the features' gradient goes
    back to the embedding rows: the first half spread over the ``seq``
    tokens (each gets ``1 / seq`` of it, the mean's share), the second half
    to the asked word alone. A token that occurs several times, or the asked
    word (which is also in the mean), adds every contribution.

    Parameters
    ----------
    params : dict
        As made by :func:`init_pooled`.
    tokens, query_position : numpy.ndarray
        As for :func:`pooled_features`.
    target : numpy.ndarray
        Shape ``(n,)``: the token id of each answer.

    Returns
    -------
    loss : float
        ``cross_entropy(pooled_forward(...), target)``'s loss.
    grads : dict
        The gradient of the loss for every parameter, shaped like it.

    Raises
    ------
    ValueError
        As :func:`pooled_forward` and ``cross_entropy``.
    """
    params = _check_pooled(params)
    embedding = as_float_array("params['embedding']", params["embedding"])
    tokens, query_position = _check_tokens(tokens, query_position, embedding.shape[0])
    n, seq = tokens.shape
    d_model = embedding.shape[1]
    features = pooled_features(embedding, tokens, query_position)  # (n, 2 d_model)
    before = features @ params["w_hidden"] + params["b_hidden"]  # (n, d_hidden), before the ReLU
    hidden = np.maximum(before, 0.0)
    loss, grad_logits = cross_entropy(hidden @ params["w_out"] + params["b_out"], target)
    grads: dict = {}
    grad_hidden, grads["w_out"], grads["b_out"] = linear_backward(grad_logits, hidden, params["w_out"])
    grad_before = grad_hidden * (before > 0)  # the ReLU: no gradient where it cut its input to 0
    grad_features, grads["w_hidden"], grads["b_hidden"] = linear_backward(grad_before, features, params["w_hidden"])
    grad_embedding = np.zeros_like(embedding)
    share = np.repeat(grad_features[:, None, :d_model] / seq, seq, axis=1)  # (n, seq, d_model): the mean's
    np.add.at(grad_embedding, tokens, share)  # a repeated token adds every occurrence
    np.add.at(grad_embedding, tokens[np.arange(n), query_position], grad_features[:, d_model:])  # the asked word
    grads["embedding"] = grad_embedding
    return loss, {key: grads[key] for key in POOLED_KEYS}


def train_pooled(
    rng: np.random.Generator,
    task: dict,
    d_model: int = 16,
    d_hidden: int = 32,
    steps: int = 400,
    batch_size: int = 32,
    lr: float = 2e-2,
) -> tuple[dict, list[float]]:
    """Train a fresh bag-of-words model on ``task`` with Adam.

    The same loop as exercise 9's ``train``: ``init_pooled`` first, then every
    step a batch of ``batch_size`` examples drawn with replacement from
    ``rng`` (``rng.integers(0, n, size=batch_size)``), ``pooled_gradients``
    and ``adam_step``, whose state goes on to the next step.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    task : dict
        As made by ``negation_task``.
    d_model, d_hidden : int, optional
        The model's sizes.
    steps, batch_size : int, optional
        Number of Adam steps and examples per step.
    lr : float, optional
        Adam's step size.

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
    task = _check_task(task)
    steps = require_positive_int("steps", steps)
    batch_size = require_positive_int("batch_size", batch_size)
    tokens, query_position, target = (np.asarray(task[key]) for key in ("tokens", "query_position", "target"))
    params = init_pooled(rng, len(task["vocab"]), d_model, d_hidden)
    state = None
    losses = []
    for _ in range(steps):
        batch = rng.integers(0, len(tokens), size=batch_size)
        loss, grads = pooled_gradients(params, tokens[batch], query_position[batch], target[batch])
        params, state = adam_step(params, grads, state, lr=lr)
        losses.append(loss)
    return params, losses


def pair_accuracy(predicted: np.ndarray, target: np.ndarray, pair: np.ndarray) -> tuple[float, float]:
    """How well predictions do on the pairs: per sentence, and per pair.

    Only examples that belong to a pair count (``pair >= 0``; a control
    sentence has -1). A model that gives both members of a pair the same
    answer gets at most one of them right: at most 0.5 per sentence, and 0
    pairs with both right.

    Parameters
    ----------
    predicted, target : numpy.ndarray
        Shape ``(n,)``: the predicted and the right token ids.
    pair : numpy.ndarray
        Shape ``(n,)``: the pair of each example, -1 for none.

    Returns
    -------
    accuracy : float
        The fraction of the paired examples predicted right.
    both_right : float
        The fraction of pairs whose two members are both predicted right.

    Raises
    ------
    ValueError
        If the shapes differ, no example belongs to a pair, or a pair does
        not have exactly two members.
    """
    predicted, target, pair = np.asarray(predicted), np.asarray(target), np.asarray(pair)
    if predicted.ndim != 1 or predicted.shape != target.shape or predicted.shape != pair.shape:
        raise ValueError(f"predicted, target and pair must be of one shape (n,), got {predicted.shape}, "
                         f"{target.shape} and {pair.shape}")
    paired = pair >= 0
    ids, counts = np.unique(pair[paired], return_counts=True)
    if not len(ids) or np.any(counts != 2):
        raise ValueError("pair must give every pair exactly two members (and at least one pair)")
    right = predicted[paired] == target[paired]  # (n_paired,)
    right_per_pair = np.zeros(len(ids))
    np.add.at(right_per_pair, np.searchsorted(ids, pair[paired]), right)
    return float(right.mean()), float(np.mean(right_per_pair == 2))


def negation_attention(weights: np.ndarray, task: dict) -> tuple[float, float]:
    """Where the asked verb looks: at its own slot, or at the other event's.

    The slot right before a verb holds its "not" or an adverb. A model that
    reads the right "not" attends, from the asked verb's row, to its own
    slot; the other event's slot, the other place a "not" can stand, says
    nothing about the asked event.

    Parameters
    ----------
    weights : numpy.ndarray
        Shape ``(n, n_heads, seq, seq)``: attention weights on the task's
        sentences (``model_forward``'s second output).
    task : dict
        As made by ``negation_task``: its ``query_position``, ``own_slot``,
        ``other_slot`` and ``pair`` are used.

    Returns
    -------
    own : float
        The mean over the paired examples and the heads of the weight from
        the row ``query_position`` to the column ``own_slot``.
    other : float
        The same mean to the column ``other_slot``.

    Raises
    ------
    ValueError
        If ``weights`` does not have the shape ``(n, n_heads, seq, seq)`` of
        the task, or the task no pair.
    """
    task = _check_task(task)
    weights = as_float_array("weights", weights)
    n, seq = np.shape(task["tokens"])
    if weights.ndim != 4 or weights.shape[0] != n or weights.shape[2:] != (seq, seq):
        raise ValueError(f"weights must have shape ({n}, n_heads, {seq}, {seq}), got {weights.shape}")
    paired = np.flatnonzero(np.asarray(task["pair"]) >= 0)
    if not len(paired):
        raise ValueError("task must hold at least one pair (pair >= 0)")
    rows = weights[paired, :, np.asarray(task["query_position"])[paired], :]  # (n_paired, n_heads, seq)
    own = rows[np.arange(len(paired)), :, np.asarray(task["own_slot"])[paired]]  # (n_paired, n_heads)
    other = rows[np.arange(len(paired)), :, np.asarray(task["other_slot"])[paired]]
    return float(own.mean()), float(other.mean())


def compare(
    rng: np.random.Generator, train_task: dict, test_task: dict, steps: int = 400, lr: float = 2e-2
) -> dict:
    """Train both models on ``train_task`` and measure them on ``test_task``'s pairs.

    In this order, both from ``rng``: ``train_pooled(rng, train_task,
    steps=steps, lr=lr)``, then exercise 9's ``train(rng, train_task,
    steps=steps, lr=lr)`` (d_model 16, one head, positions on). Each model
    predicts the highest logit on the test sentences, and ``pair_accuracy``
    scores it; ``negation_attention`` reads the trained attention model's
    weights on the test sentences.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    train_task, test_task : dict
        As made by ``negation_task``, with the same vocabulary; the test task
        must hold pairs.
    steps : int, optional
        Adam steps for each model.
    lr : float, optional
        Adam's step size for each model.

    Returns
    -------
    dict
        ``models``: ``{"pooled": ..., "attention": ...}``, the trained
        parameters; ``accuracy`` and ``both_right``: for each of the two
        names, ``pair_accuracy``'s two figures on the test task; ``own`` and
        ``other``: ``negation_attention`` of the attention model on the test
        task.

    Raises
    ------
    ValueError
        If a task is not valid or the two vocabularies differ.
    """
    train_task, test_task = _check_task(train_task), _check_task(test_task)
    if list(train_task["vocab"]) != list(test_task["vocab"]):
        raise ValueError("train_task and test_task must have the same vocab")
    tokens, query_position = np.asarray(test_task["tokens"]), np.asarray(test_task["query_position"])
    models = {"pooled": train_pooled(rng, train_task, steps=steps, lr=lr)[0],
              "attention": train(rng, train_task, steps=steps, lr=lr)[0]}
    logits = {"pooled": pooled_forward(models["pooled"], tokens, query_position)}
    logits["attention"], weights = model_forward(models["attention"], tokens, query_position, 1)
    scores = {name: pair_accuracy(logits[name].argmax(axis=-1), test_task["target"], test_task["pair"])
              for name in models}
    own, other = negation_attention(weights, test_task)
    return {"models": models, "accuracy": {name: score[0] for name, score in scores.items()},
            "both_right": {name: score[1] for name, score in scores.items()}, "own": own, "other": other}
