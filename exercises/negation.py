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

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import numpy as np
from .backward import linear_backward
from .projections import init_weight
from .training import adam_step, cross_entropy, model_forward, train


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
    raise NotImplementedError('pooled_features: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('init_pooled: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('pooled_forward: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('pooled_gradients: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('train_pooled: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('pair_accuracy: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('negation_attention: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')


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
    raise NotImplementedError('compare: not implemented yet (exercise 12, negation.py; run `pytest -m negation`)')
