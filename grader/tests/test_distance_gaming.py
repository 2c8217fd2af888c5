"""No score without the idea, exercise 13: each cheat on distance scores what its control scores.

A cheat is the reference with one shortcut swapped in (appended to a copy of
``solutions/distance.py``: a later ``def`` wins); its control is the same
submission with the shortcut's work left undone (``NotImplementedError``).
Both run the exercise's graded files, public and hidden; a cheat must pass no
more tests of either file than its control (see ``grader/tests/test_gaming.py``).
"""

from __future__ import annotations

import pytest

from grader.curriculum import ROOT, load
from grader.mutants.report import run_tests
from grader.tests.cheats import (
    HONEST,
    STUB_BODY,
    ZEROS_BODY,
    Cheat,
    assert_no_more_than_its_control,
    golden_lookup,
    plant,
    run_files,
)

FILES = ("tests/test_13_distance.py", "grader/hidden_tests/test_hidden_13_distance.py")
UNDONE = "raise NotImplementedError('left out (the control)')"

# recall_curve written down from the margin and the slope: a step at the critical distance, no weights counted.
FORMULA_CURVE = '''
def recall_curve(task, slope):
    n = int(task["n_pairs"])
    distances = np.arange(1, n + 1)
    {body}
'''
FORMULA = 'return distances, (distances < critical_distance(task["margin"], slope)).astype(float)'

# train_match_head that builds its weight by hand (match the contents, prefer nothing by position) and invents
# falling losses: no batch drawn, no gradient, no Adam.
HAND_BUILT = '''
def train_match_head(rng, embedding, task, positions, slope, steps=100, batch_size=64, lr=0.1):
    embedding = np.asarray(embedding, dtype=float)
    {body}
'''
BUILT = ("inverse = np.linalg.pinv(embedding)\n"
         "    weight = 30.0 * np.sqrt(embedding.shape[1]) * inverse @ inverse.T\n"
         "    return weight, [float(2.0 * 0.97 ** step) for step in range(steps)]")

# Only the head the claim needs to extrapolate is made up (issue 32): the sinusoidal head, and every short run the
# other tests ask for, trained honestly; the ALiBi head of a full run built by hand as above (the penalty alone
# prefers the latest match), with invented losses.
HALF_BUILT = '''
_honest_train_match_head = train_match_head


def train_match_head(rng, embedding, task, positions, slope, steps=100, batch_size=64, lr=0.1):
    if positions or steps < 100:
        return _honest_train_match_head(rng, embedding, task, positions, slope, steps, batch_size, lr)
    embedding = np.asarray(embedding, dtype=float)
    {body}
'''

# The same weight built by hand, with a first loss measured honestly on the first batch (a forward pass, no
# gradient, no Adam) and the rest of the curve made up from it.
FIRST_LOSS_MEASURED = ("rows = rng.integers(0, len(task[\"answer\"]), size=batch_size)\n"
                       "    picked = {key: np.asarray(task[key])[rows] for key in (\"symbols\", \"query\")}\n"
                       "    xq, xk = match_inputs(embedding, picked, positions)\n"
                       "    zero = np.zeros((embedding.shape[1], embedding.shape[1]))\n"
                       "    first = float(cross_entropy(match_scores(zero, xq, xk, slope), "
                       "np.asarray(task[\"answer\"])[rows])[0])\n"
                       "    inverse = np.linalg.pinv(embedding)\n"
                       "    weight = 30.0 * np.sqrt(embedding.shape[1]) * inverse @ inverse.T\n"
                       "    return weight, [first * 0.97 ** step for step in range(steps)]")

# length_accuracy that trusts the weight to be right: it reports 1.0 without scoring anything.
CONSTANT = '''
def length_accuracy(weight, embedding, task, positions, slope):
    {body}
'''


def _functions(body: str) -> dict[str, str]:
    names = load().exercise("distance").functions
    return {"distance": "\n".join(f"def {name}(*args, **kwargs):\n{body}\n" for name in names)}


# The weight's gradient by the complex step, all d*d entries nudged at once (a hostile tester's, issue 32): exact
# to rounding, so only its cost gives it away (the gate of train_match_head).
COMPLEX_STEP_TRAIN = '''
# train_match_head with no gradient formula: the weight's gradient by the complex step (every entry of the
# weight nudged by i*h, the whole d*d batch of nudges at once), i.e. a numerical derivative of the loss.
def _complex_loss(weights, xq, xk, penalty, answer):
    d = xq.shape[1]
    scores = np.einsum("bd,pde,bje->pbj", xq, weights, xk, optimize=True) / np.sqrt(d) + penalty  # (P, b, n), complex
    shift = scores.real.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(scores - shift).sum(axis=-1)) + shift[..., 0]
    return (lse - scores[:, np.arange(len(answer)), answer]).mean(axis=-1)  # (P,)


def train_match_head(rng, embedding, task, positions, slope, steps=100, batch_size=64, lr=0.1):
    embedding = as_float_array("embedding", embedding)
    if embedding.ndim != 2:
        raise ValueError(f"embedding must have shape (n_symbols, d), got {{embedding.shape}}")
    task = _require_task(task, {{"symbols", "query", "answer"}}, "latest_match_task")
    steps = require_positive_int("steps", steps)
    batch_size = require_positive_int("batch_size", batch_size)
    slope = _require_slope(slope)
    symbols, query, answer = (np.asarray(task[key]) for key in ("symbols", "query", "answer"))
    d = embedding.shape[1]
    params, state, losses = {{"weight": np.zeros((d, d))}}, None, []
    h = 1e-30
    nudges = (1j * h) * np.eye(d * d).reshape(d * d, d, d)
    for _ in range(steps):
        batch = rng.integers(0, len(symbols), size=batch_size)
        xq, xk = match_inputs(embedding, {{"symbols": symbols[batch], "query": query[batch]}}, positions)
        penalty = distance_penalty(xk.shape[1], slope)
        losses.append(float(_complex_loss(params["weight"][None], xq, xk, penalty, answer[batch])[0].real))
        {body}
    return params["weight"], losses
'''
COMPLEX_STEP = ('grad = (_complex_loss(params["weight"][None] + nudges, xq, xk, penalty, answer[batch]).imag / h)'
                '.reshape(d, d)\n        params, state = adam_step(params, {"weight": grad}, state, lr=lr)')

CHEATS = {cheat.name: cheat for cheat in (
    Cheat("distance-curve-from-the-formula", "distance", {"distance": FORMULA_CURVE.format(body=FORMULA)},
          {"distance": FORMULA_CURVE.format(body=UNDONE)}, FILES),
    Cheat("distance-gradient-by-the-complex-step", "distance",
          {"distance": COMPLEX_STEP_TRAIN.format(body=COMPLEX_STEP)},
          {"distance": COMPLEX_STEP_TRAIN.format(body=UNDONE)}, FILES),
    Cheat("distance-hand-built-weight", "distance", {"distance": HAND_BUILT.format(body=BUILT)},
          {"distance": HAND_BUILT.format(body=UNDONE)}, FILES),
    Cheat("distance-hand-built-weight-first-loss-measured", "distance",
          {"distance": HAND_BUILT.format(body=FIRST_LOSS_MEASURED)}, {"distance": HAND_BUILT.format(body=UNDONE)},
          FILES),
    Cheat("distance-alibi-head-built-by-hand", "distance", {"distance": HALF_BUILT.format(body=BUILT)},
          {"distance": HALF_BUILT.format(body=UNDONE)}, FILES),
    Cheat("distance-accuracy-always-one", "distance", {"distance": CONSTANT.format(body="return 1.0")},
          {"distance": CONSTANT.format(body=UNDONE)}, FILES),
    Cheat("distance-zeros-of-the-right-shape", "distance", _functions(ZEROS_BODY), _functions(STUB_BODY), FILES),
    Cheat("distance-golden-lookup", "distance",
          golden_lookup("distance", load().exercise("distance").functions), _functions(STUB_BODY), FILES),
)}




def test_the_reference_passes_both_files():
    for file, run in run_files(ROOT / "solutions", FILES).items():
        assert run.failed == [], f"the reference fails {file}: {run.failed}\n{run.output[-3000:]}"


@pytest.mark.parametrize("cheat", list(CHEATS.values()), ids=lambda c: c.name)
def test_a_distance_cheat_scores_what_its_control_scores(cheat: Cheat, tmp_path):
    assert_no_more_than_its_control(cheat, tmp_path, FILES)


def test_the_formula_curve_is_told_apart_on_the_noisy_twin(tmp_path):
    run = run_tests(ROOT / FILES[0], plant(tmp_path / "formula", CHEATS["distance-curve-from-the-formula"].code),
                    tb="short")
    assert "its twin with noisy queries" in run.output
    assert "test_recall_falls_past_your_critical_distance" in " ".join(run.failed)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_variants_of_training_pass_every_distance_test(name: str, tmp_path):
    """Adam and the batches written other ways the API allows: the training the tests replay must still match."""
    runs = run_files(plant(tmp_path / name, HONEST[name]), FILES)
    assert all(run.failed == [] for run in runs.values()), {file: run.failed for file, run in runs.items()}
