"""Exercise 13: An available context is not a used context: recall against distance.

A model whose context holds the answer has not yet used it: attention must
still put its weight there. Here one attention head, built by hand and not
trained, looks up a key: the context holds ``n_pairs`` keys, the query is a
copy of one of them (the answer), and recall succeeds when the query's
largest weight falls on the answer. The given task (``_distance_task.py``,
``recall_task``) builds contexts in which the answer's scaled score
``q . k / sqrt(d_k)`` leads every other key by a known margin, and asks
for the answer at every distance from the query.

ALiBi (Press, Smith and Lewis, 2022; exercise 5's ``alibi_bias``) adds to
the score of a key ``-slope * distance``: the farther the key, the lower its
score, whatever it holds. That is how ALiBi tells near from far without
positional encodings, and it has a price you can compute. The answer at
distance ``t`` scores ``margin - slope * t``; the nearest distractor, one
step away, scores ``0 - slope * 1``. The answer keeps the largest weight as
long as ``margin - slope * t > -slope``, that is for ``t`` below the
critical distance ``1 + margin / slope``; beyond it, recall falls to 0 even
though the answer is right there in the context. Without the penalty
(slope 0), recall does not depend on the distance at all.

The margin is measured on the scaled scores, the ones softmax sees: the
raw dot product is ``sqrt(d_k)`` times larger, and a critical distance
computed from it would be ``sqrt(d_k)`` times too far.

Beyond the training length. The second half trains a head (one weight
matrix, ``score = x_q W x_j / sqrt(d) + penalty``) on the given
``latest_match_task``: the query is a symbol, the answer its most recent
occurrence in the context. Content says which keys match; only position
says which match is the latest. One head gets its positions from
sinusoidal encodings added to its inputs, the other from ALiBi's penalty
alone. Both learn the task at the training length; at two and four times
that length the sinusoidal head meets position vectors it was never
trained on and loses the answer, while ALiBi's penalty, a function of
distance only, means the same at every length. Press et al. (2022) measured
this on language models: ALiBi extrapolates and sinusoidal encodings do not.

Read first: the reading (docs/reading.md#context-use).

What the tests check
--------------------
* ``distance_penalty``: shape ``(n_keys,)``, ``-slope`` times the distance
  ``n_keys - j`` of key ``j`` from the query right after the context (the
  last key one step away), the row of ALiBi's bias for that slope; slope 0
  gives zeros; a negative slope or a bad ``n_keys`` is rejected;
* ``recall_weights``: shape ``(b, n_keys)``, rows sum to 1, the softmax of
  the scaled scores plus the penalty (checked against the test's own
  computation), for slopes 0 (plain attention), 0.25 and 1.5;
* ``score_margin``: the answer's scaled score minus the largest other one,
  on keys and queries the test draws (a negative margin when a distractor
  leads);
* ``critical_distance``: ``1 + margin / slope`` for margins and slopes the
  test draws, infinity for slope 0, bad arguments rejected;
* ``recall_curve``: the distances 1 to ``n_pairs`` and, for each, the
  fraction of its queries whose largest weight is the answer, equal to the
  test's own count from your ``recall_weights``; on a task the test draws,
  recall is 1 below your critical distance and 0 beyond it, it moves when
  the slope or the margin moves, and it stays at 1 at every distance
  without the penalty;
* ``match_inputs``: embedding rows of the symbols and of the query, plus
  ``sinusoidal_encoding`` rows ``0 .. n - 1`` for the keys and ``n`` for the
  query when ``positions`` is True, nothing added otherwise;
* ``match_scores``: ``x_q W x_j / sqrt(d)`` plus ``distance_penalty``,
  against the test's own computation;
* ``train_match_head``: starts from zeros and takes Adam steps (exercise 9's
  ``adam_step``) on the cross-entropy (exercise 9's ``cross_entropy``) of
  the scores at the answer, one batch of the task drawn from ``rng`` per
  step, as exercise 9's ``train`` draws them; its
  first step is checked against the test's own gradient, its first loss
  against the test's own on the first batch, and the trained weight's loss
  on new contexts is at most half that of zeros;
* ``length_accuracy``: the fraction of a task's queries whose top score is
  the answer, equal to the test's own count;
* beyond the training length, on an embedding the test draws: both heads
  answer at least 90% at the training length; at four times that length
  the ALiBi head still does and the sinusoidal head falls below 60%
  (accuracies computed by the test's own scoring of your trained weights).
"""

# Exercise stub generated from the reference by `python -m grader.authoring.sync`. Fill in the bodies.
from __future__ import annotations

import numbers
import numpy as np
from .attention import scaled_dot_product_attention
from .positional import sinusoidal_encoding
from .training import adam_step, cross_entropy


def distance_penalty(n_keys: int, slope: float) -> np.ndarray:
    """ALiBi's penalty for a query standing right after ``n_keys`` keys.

    The keys sit at positions ``0 .. n_keys - 1`` and the query at position
    ``n_keys``, so key ``j`` is ``n_keys - j`` steps away: the last key 1,
    the first ``n_keys``. Its penalty is ``-slope`` times that distance, the
    same as row ``n_keys`` of ALiBi's bias (exercise 5) for a head of this
    slope. Added to the scores, it lowers a key the more the farther it is.

    Parameters
    ----------
    n_keys : int
        Number of keys in the context, positive.
    slope : float
        The penalty per step of distance, ``>= 0`` (0: no penalty).

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(n_keys,)``: entry ``j`` is ``-slope * (n_keys - j)``.

    Raises
    ------
    ValueError
        If ``n_keys`` is not a positive integer or ``slope`` is negative or
        not a finite number.
    """
    raise NotImplementedError('distance_penalty: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def recall_weights(queries: np.ndarray, keys: np.ndarray, slope: float) -> np.ndarray:
    """The attention weights of each query over its own context, with ALiBi's penalty.

    Each query has its own context of keys. The weights are
    ``softmax(q . k_j / sqrt(d_k) - slope * (n_keys - j))`` over the keys
    ``j``: exercise 3's attention with the penalty as an additive mask.

    Parameters
    ----------
    queries : numpy.ndarray
        Shape ``(b, d_k)``: one query per context.
    keys : numpy.ndarray
        Shape ``(b, n_keys, d_k)``: the keys of each query's context.
    slope : float
        ALiBi's slope, ``>= 0``.

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(b, n_keys)``: each row sums to 1.

    Raises
    ------
    ValueError
        If the shapes do not fit or ``slope`` is negative.
    """
    raise NotImplementedError('recall_weights: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def score_margin(queries: np.ndarray, keys: np.ndarray, answer: np.ndarray) -> np.ndarray:
    """How far the answer's scaled score leads the best other key, before any penalty.

    The scores are the ones softmax sees, ``q . k_j / sqrt(d_k)``. The margin
    is the answer's score minus the largest score among the other keys of
    its context: positive when the answer leads, negative when a distractor
    does.

    Parameters
    ----------
    queries : numpy.ndarray
        Shape ``(b, d_k)``.
    keys : numpy.ndarray
        Shape ``(b, n_keys, d_k)``, ``n_keys >= 2`` (a margin needs a distractor).
    answer : numpy.ndarray
        Shape ``(b,)``: integer positions in ``[0, n_keys)``, the answer's key.

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(b,)``.

    Raises
    ------
    ValueError
        If the shapes do not fit, there is a single key, or an answer is not
        a position of the context.
    """
    raise NotImplementedError('score_margin: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def critical_distance(margin: float, slope: float) -> float:
    """The distance beyond which ALiBi's penalty costs the answer its lead.

    The answer at distance ``t`` scores ``margin - slope * t``; the nearest
    distractor, one step from the query, scores ``0 - slope``: it is
    penalised too, by one step. The answer leads while
    ``margin - slope * t > -slope``, i.e. while ``t < 1 + margin / slope``.
    (The answer one step away is never overtaken: its nearest distractor is
    two steps away.)

    Parameters
    ----------
    margin : float
        The answer's lead in scaled score, positive.
    slope : float
        ALiBi's slope, ``>= 0``.

    Returns
    -------
    float
        ``1 + margin / slope``; ``inf`` for slope 0 (no distance is too far).

    Raises
    ------
    ValueError
        If ``margin`` is not positive or ``slope`` is negative (or either is
        not a finite number).
    """
    raise NotImplementedError('critical_distance: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def recall_curve(task: dict, slope: float) -> tuple[np.ndarray, np.ndarray]:
    """Recall against distance: for each distance, the fraction of its queries answered.

    A query is answered when its largest weight (``recall_weights``) falls on
    the answer's key. The queries are grouped by the distance of their
    answer, ``task["distance"]``, and each group's fraction is its recall.

    Parameters
    ----------
    task : dict
        Made like ``recall_task``'s: ``keys`` ``(b, n_pairs, d_k)``,
        ``queries`` ``(b, d_k)``, ``answer`` and ``distance`` ``(b,)``.
    slope : float
        ALiBi's slope, ``>= 0``.

    Returns
    -------
    distances : numpy.ndarray
        Int64, shape ``(n_pairs,)``: 1, 2, ..., ``n_pairs``.
    recall : numpy.ndarray
        Float64, shape ``(n_pairs,)``: entry ``t - 1`` is the fraction of
        the queries at distance ``t`` answered (NaN where none asks for it).

    Raises
    ------
    ValueError
        If ``task`` lacks a field or ``slope`` is negative.
    """
    raise NotImplementedError('recall_curve: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def match_inputs(embedding: np.ndarray, task: dict, positions: bool) -> tuple[np.ndarray, np.ndarray]:
    """The head's inputs: each symbol's embedding row, plus its position's encoding if asked.

    The keys are the context's symbols at positions ``0 .. n - 1``; the query
    stands after them, at position ``n``. With ``positions`` the rows of
    ``sinusoidal_encoding(n + 1, d)`` (exercise 5) are added: row ``j`` to key
    ``j``, row ``n`` to the query. Without, the inputs carry content only
    (the ALiBi head gets its sense of distance from the penalty instead).

    Parameters
    ----------
    embedding : numpy.ndarray
        Shape ``(n_symbols, d)``: one vector per symbol.
    task : dict
        Made like ``latest_match_task``'s: ``symbols`` ``(b, n)``, ``query`` ``(b,)``.
    positions : bool
        Whether to add the sinusoidal encodings.

    Returns
    -------
    xq : numpy.ndarray
        Shape ``(b, d)``: the queries' inputs.
    xk : numpy.ndarray
        Shape ``(b, n, d)``: the keys' inputs.

    Raises
    ------
    ValueError
        If ``embedding`` is not 2-D or ``task`` lacks a field.
    """
    raise NotImplementedError('match_inputs: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def match_scores(weight: np.ndarray, xq: np.ndarray, xk: np.ndarray, slope: float) -> np.ndarray:
    """The trained head's scores: a bilinear form of query and key, plus ALiBi's penalty.

    ``score[i, j] = xq[i] @ weight @ xk[i, j] / sqrt(d) - slope * (n - j)``:
    ``weight`` plays the part of ``W_q W_k^T`` (queries and keys projected
    and compared in one matrix), and the penalty is ``distance_penalty``.

    Parameters
    ----------
    weight : numpy.ndarray
        Shape ``(d, d)``.
    xq : numpy.ndarray
        Shape ``(b, d)``.
    xk : numpy.ndarray
        Shape ``(b, n, d)``.
    slope : float
        ALiBi's slope, ``>= 0`` (0 for the sinusoidal head).

    Returns
    -------
    numpy.ndarray
        Float64, shape ``(b, n)``.

    Raises
    ------
    ValueError
        If the shapes do not fit or ``slope`` is negative.
    """
    raise NotImplementedError('match_scores: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def train_match_head(rng: np.random.Generator, embedding: np.ndarray, task: dict, positions: bool, slope: float,
                     steps: int = 100, batch_size: int = 64, lr: float = 0.1) -> tuple[np.ndarray, list[float]]:
    """Train the head's weight on a latest-match task, at that task's length.

    The weight starts at zeros (every key scores alike). Each step draws a
    batch of ``batch_size`` contexts of ``task`` (indices
    ``rng.integers(0, n_examples, size=batch_size)``, as exercise 9's
    ``train`` does), computes the scores, the loss and its gradient with
    respect to the scores with exercise 9's ``cross_entropy`` (the answer's
    position is the target class), and takes one step of exercise 9's
    ``adam_step`` with ``{"weight": gradient}``. The gradient of the weight
    follows from the scores being linear in it:
    ``xq^T (grad_scores @ xk) / sqrt(d)``, summed over the batch.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness (the batches).
    embedding : numpy.ndarray
        Shape ``(n_symbols, d)``, fixed (not trained).
    task : dict
        Made like ``latest_match_task``'s: the training contexts, all of the
        training length.
    positions : bool
        Sinusoidal encodings added to the inputs (``match_inputs``).
    slope : float
        ALiBi's slope, ``>= 0``.
    steps, batch_size : int, optional
        Adam steps and contexts per step (defaults 100 and 64).
    lr : float, optional
        Adam's learning rate (default 0.1).

    Returns
    -------
    weight : numpy.ndarray
        Shape ``(d, d)``: the trained weight.
    losses : list of float
        The loss of each step's batch, before its update.

    Raises
    ------
    ValueError
        If ``task`` lacks a field, a size is not a positive integer, or
        ``embedding`` or ``slope`` is bad.
    """
    raise NotImplementedError('train_match_head: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')


def length_accuracy(weight: np.ndarray, embedding: np.ndarray, task: dict, positions: bool, slope: float) -> float:
    """The fraction of a task's queries whose highest score is on the answer.

    The head answers with one key: the one with the highest score, the first
    of them (the lowest position) when several tie, as ``np.argmax`` picks.
    An answer that only ties a key before it is not the head's answer.

    Parameters
    ----------
    weight : numpy.ndarray
        Shape ``(d, d)``: a trained weight.
    embedding : numpy.ndarray
        Shape ``(n_symbols, d)``.
    task : dict
        Made like ``latest_match_task``'s, of any length.
    positions : bool
        As in training.
    slope : float
        As in training.

    Returns
    -------
    float
        In ``[0, 1]``.

    Raises
    ------
    ValueError
        If ``task`` lacks a field or a shape does not fit.
    """
    raise NotImplementedError('length_accuracy: not implemented yet (exercise 13, distance.py; run `pytest -m distance`)')
