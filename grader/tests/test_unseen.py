"""A function that answers the tests' inputs from a table fails every test of it; known mistakes do not change.

A hostile round recorded the answers to every input of exercises 12 to 15's tests into private helper modules
and looked them up: 24/24 against 0 for the same submission without the tables. ``tests/unseen.py`` asks each
registered function once more, on an input of the same kind drawn from the submission's salt, when a test of
it passed and it is right on its probes (the kit's fixed inputs with known answers): a lookup misses there.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

from grader.curriculum import ROOT
from tests import effort, moves, unseen
from tests.kit import LocalImplementation

REFERENCE = ROOT / "solutions"


class Asking:
    """What the gate asks a Kit for: ``kit.<name>(...)`` and the implementation behind it (for its probes)."""

    def __init__(self, answer) -> None:
        self._implementation = LocalImplementation(REFERENCE)
        self.answer = answer

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.answer


@pytest.fixture(autouse=True)
def salted(monkeypatch, tmp_path):
    import tests.test_14_retrieval  # noqa: F401 - registers retrieval's twins

    (tmp_path / "retrieval.py").write_text("# a submission\n")
    monkeypatch.setattr(effort, "CONFIG", SimpleNamespace(option=SimpleNamespace(impl=str(tmp_path))))


def test_a_lookup_that_misses_fails():
    def table(queries, chunks):
        raise NotImplementedError("not in the table")

    (failure,) = unseen.gate(Asking(table), "retrieval", "cosine_similarity")
    assert "drawn for your submission" in failure.message and "not in the table" in failure.message


def test_a_wrong_answer_on_the_drawn_input_fails():
    (failure,) = unseen.gate(Asking(lambda queries, chunks: np.zeros((len(queries), len(chunks)))), "retrieval",
                             "cosine_similarity")
    assert "expected" in failure.message and "observed" in failure.message


def test_a_function_that_computes_passes():
    from tests.test_14_retrieval import own_cosine

    assert unseen.gate(Asking(own_cosine), "retrieval", "cosine_similarity") == []


def test_a_rounding_of_its_own_is_left_to_the_tests_own_checks():
    # A blind round: an eps of 1e-8 in the denominator, or the product computed in float32, passed every check of
    # the tests' own (within their tolerance) and was told, on every test, that it answers the tests' inputs only.
    from tests.test_14_retrieval import own_cosine

    def with_eps(queries, chunks):
        norms = np.linalg.norm(queries, axis=1)[:, None] * np.linalg.norm(chunks, axis=1)[None, :]
        return queries @ chunks.T / (norms + 1e-8)

    def in_float32(queries, chunks):
        return own_cosine(queries.astype(np.float32), chunks.astype(np.float32)).astype(np.float64)

    for rounded in (with_eps, in_float32):
        assert unseen.gate(Asking(rounded), "retrieval", "cosine_similarity") == []


def test_a_function_wrong_on_its_probes_is_left_to_the_tests(monkeypatch):
    # A known mistake differs on a probe: the gate says nothing, the tests' own messages come first.
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    monkeypatch.setattr(diagnosis, "asked_probes_answered", lambda implementation, exercise, name: [])
    with pytest.raises(unseen.Undecided):  # nothing it answered to ask again: the next test that passes asks
        unseen.gate(Asking(lambda queries, chunks: None), "retrieval", "cosine_similarity")


def test_a_function_wrong_only_on_probes_no_test_asks_is_asked(monkeypatch):
    # Answers recorded from the public tests are right on every probe a test asks and wrong on those only the
    # diagnosis asks: the gate once stood aside for them as for a mistake (a helper's table passed exercise 15).
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes",
                        lambda implementation, exercise, name, asked_only=False: asked_only)
    (failure,) = unseen.gate(Asking(lambda queries, chunks: None), "retrieval", "cosine_similarity")
    assert "drawn for your submission" in failure.message and "this test's own checks" in failure.message
    assert "answers the tests' own inputs" not in failure.message  # (it may be a mistake those checks miss)


def test_the_probes_a_test_asks_are_found_in_the_test_files():
    from tests.diagnosis import asked_by_a_test

    assert asked_by_a_test("softmax/mixed_scores")  # named whole in a test
    assert asked_by_a_test("scaled_dot_product_attention/padding_mask_per_sequence")  # a key of a table of cases
    assert not asked_by_a_test("bpe_decode/characters_split_across_tokens")  # the diagnosis's only


def _every_twin():
    """``(exercise, function, twin)`` of every registered twin, each test file imported (which registers them)."""
    import importlib

    from grader.curriculum import load

    for exercise in load().exercises:
        importlib.import_module(f"tests.{exercise.test_file.removeprefix('tests/').removesuffix('.py')}")
        for name in exercise.functions:
            if (spec := unseen.twin(exercise.name, name)) is not None:
                yield exercise.name, name, spec


def test_every_twin_draws_inputs_the_reference_answers_as_the_test_file_does():
    """Each registered twin's own answer is the reference's, on the draws of three salts (the twins are right)."""
    implementation = LocalImplementation(REFERENCE)
    for exercise, name, spec in _every_twin():
        for salt in (1, 2, 3):
            args, kwargs = spec.draw(np.random.default_rng([unseen.SEED, salt]))
            expected = spec.own(*copy.deepcopy(args), **copy.deepcopy(kwargs))
            got = implementation.function(exercise, name)(*args, **kwargs)
            assert (spec.same or unseen.equal)(got, expected), (exercise, name, salt)


def _axes(value, found: list[int]) -> list[int]:
    """The sizes of every array axis in a drawn call, in the order they appear."""
    if isinstance(value, np.ndarray):
        found.extend(value.shape)
    elif isinstance(value, dict):
        for key in sorted(value):
            _axes(value[key], found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _axes(item, found)
    return found


def test_whether_two_axes_of_a_drawn_input_agree_never_depends_on_the_draw():
    """Two axes of a drawn input have equal sizes on every draw (the API ties them) or on none.

    Each submission gets its own draw: sizes drawn apart agreed on some and not on others, and a mistake that
    confuses two axes failed a test for some students and passed it for others with the same mistake
    (``attention-weights-transposed`` crashes only where ``n_q != n_k``: 317.625 or 319.375 of 336 by the key).
    """
    failures: list[str] = []
    for exercise, name, spec in _every_twin():
        patterns: dict[tuple, tuple] = {}  # a draw's structure (its number of sizes, its flags) -> which sizes agree
        for salt in range(60):
            args, kwargs = spec.draw(np.random.default_rng([unseen.SEED, salt]))
            sizes = _axes([list(args), kwargs], [])
            agree = tuple(i < j and a == b for i, a in enumerate(sizes) for j, b in enumerate(sizes))
            flags = tuple(value for value in kwargs.values() if isinstance(value, (bool, str)))  # causal=...
            if agree != patterns.setdefault((len(sizes), flags), agree):
                failures.append(f"{exercise}.{name}: axes agree on some draws only ({sizes})")
                break
    assert not failures, "\n".join(failures)


# A table may keep one wrong answer on purpose: wrong on an input a test asks, it passed for a mistake and the gate
# stood aside (exercise 10: 6 of 18 public tests against 0 for the stub). A mistake is a rule: the inputs it answers,
# every float scaled, it answers too; a table does not.
def _table_of(answers: list[tuple[tuple, np.ndarray]]):
    def looked_up(queries, chunks):
        for (q, c), answer in answers:
            if np.array_equal(q, queries) and np.array_equal(c, chunks):
                return answer
        raise ValueError("queries: not in the table")
    return looked_up


def _a_call_of_this_test():
    rng = np.random.default_rng(5)
    return rng.normal(size=(3, 4)), rng.normal(size=(5, 4))


def test_a_table_wrong_on_an_asked_input_on_purpose_fails_on_its_other_inputs_scaled(monkeypatch):
    from tests import diagnosis
    from tests.test_14_retrieval import own_cosine

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    monkeypatch.setattr(diagnosis, "asked_probes_answered", lambda implementation, exercise, name: [])
    queries, chunks = _a_call_of_this_test()
    asking = Asking(_table_of([((queries, chunks), own_cosine(queries, chunks))]))
    asking._answered = {"cosine_similarity": [((queries, chunks), {}, own_cosine(queries, chunks))]}
    (failure,) = unseen.gate(asking, "retrieval", "cosine_similarity")
    assert "an input a test gave it" in failure.message and "not the same input moved" in failure.message
    assert "queries: not in the table" in failure.message


def test_a_mistake_that_answers_an_input_answers_it_scaled(monkeypatch):
    # Wrong where the tests look (asked probes, the drawn input), right on this test's input and on it scaled: the
    # gate stands aside, the tests' own messages say what is wrong.
    from tests import diagnosis
    from tests.test_14_retrieval import own_cosine

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    monkeypatch.setattr(diagnosis, "asked_probes_answered", lambda implementation, exercise, name: [])
    queries, chunks = _a_call_of_this_test()

    def mistaken(q, c):  # right only for three queries (a mistake of shapes, say)
        return own_cosine(q, c) if len(q) == 3 else np.zeros((len(q), len(c)))

    asking = Asking(mistaken)
    asking._answered = {"cosine_similarity": [((queries, chunks), {}, mistaken(queries, chunks))]}
    assert unseen.gate(asking, "retrieval", "cosine_similarity") == []


def test_a_mistake_right_on_a_test_input_by_its_structure_only_is_not_told_it_keeps_answers(monkeypatch):
    # Pearson's correlation of the values is Spearman's where the values are evenly spaced (a test's input): moved
    # by a few percent an entry, the mistake answers as its rule gives, near the reference's answer and not on it.
    # It was told its answer "does not follow from the input" on two tests, under one grader's key and not another
    # (a held-out mistake graded under four keys: 7 or 5 tests failed).
    import tests.test_10_explain  # noqa: F401 - registers explain's twins
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    monkeypatch.setattr(diagnosis, "asked_probes_answered", lambda implementation, exercise, name: [])
    a, b = 1.0 + 0.1 * np.arange(6.0), 1.0 + 0.1 * np.array([2.0, 0.0, 1.0, 5.0, 3.0, 4.0])  # moved: 1.3% off

    def pearson(x, y):
        return float(np.corrcoef(x, y)[0, 1])

    def table(x, y):
        if np.array_equal(x, a) and np.array_equal(y, b):
            return pearson(a, b)
        raise ValueError("a: not in the table")

    for function, told in ((pearson, False), (table, True)):
        asking = Asking(function)
        asking._answered = {"rank_correlation": [((a, b), {}, pearson(a, b))]}
        failures = unseen.gate(asking, "explain", "rank_correlation")
        assert bool(failures) == told and all("not the same input moved" in f.message for f in failures), function


def test_an_input_of_this_test_the_function_got_wrong_is_not_asked_again(monkeypatch):
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    monkeypatch.setattr(diagnosis, "asked_probes_answered", lambda implementation, exercise, name: [])
    queries, chunks = _a_call_of_this_test()
    # Zeros for every input (a shape test passes it; its values are not the answer): a mistake, wrong everywhere.
    asking = Asking(lambda queries, chunks: np.zeros((len(queries), len(chunks))))
    asking._answered = {"cosine_similarity": [((queries, chunks), {}, np.zeros((3, 5)))]}
    with pytest.raises(unseen.Undecided):
        unseen.gate(asking, "retrieval", "cosine_similarity")


def test_a_function_that_raises_on_valid_input_and_answered_nothing_right_fails(monkeypatch):
    # A table of one function wrong on the only call a test made of it, raising on every other input (a shapes
    # test passed it, and compare() passed through it: 15 of exercise 12's tests against its control's 14): nothing
    # it answered can be moved, and it raised on a valid input drawn for the submission, which is said as such.
    from tests import diagnosis

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    monkeypatch.setattr(diagnosis, "asked_probes_answered", lambda implementation, exercise, name: [])
    queries, chunks = _a_call_of_this_test()
    wrong = np.zeros((3, 5))
    asking = Asking(_table_of([((queries, chunks), wrong)]))
    asking._answered = {"cosine_similarity": [((queries, chunks), {}, wrong)]}
    (failure,) = unseen.gate(asking, "retrieval", "cosine_similarity")
    assert "queries: not in the table" in failure.message and "raised on this input" in failure.message
    # A stub (its input checks written, then NotImplementedError) answered no call: its other tests say so, and its
    # test of bad input is its own (tests.kit: a stub tells bad input from nothing yet).
    def stub(queries, chunks):
        raise NotImplementedError("cosine_similarity: the body is not written yet")

    stubbed = Asking(stub)
    stubbed._answered = {}
    with pytest.raises(unseen.Undecided):
        unseen.gate(stubbed, "retrieval", "cosine_similarity")
    # A call stopped by its time budget is the budget's to report (its tests say it timed out), not a raise.
    def slow(queries, chunks):
        if np.array_equal(queries, _a_call_of_this_test()[0]):
            return wrong
        raise TimeoutError("cosine_similarity() did not finish within 5 s: an infinite loop?")

    timed = Asking(slow)
    timed._answered = {"cosine_similarity": [((queries, chunks), {}, wrong)]}
    with pytest.raises(unseen.Undecided):
        unseen.gate(timed, "retrieval", "cosine_similarity")


def test_scaled_moves_every_float_and_nothing_else():
    tokens, mask, weights = np.arange(4), np.array([True, False]), np.array([[0.3, -0.7], [1.1, 0.2]], np.float32)
    (moved, model), changed = moves.scaled(((tokens, mask, weights), {"w": weights, "n": 3}), 1.5)
    assert changed and moved[0] is tokens and moved[1] is mask and model["n"] == 3
    # Every entry its own factor, within 2% of the drawn one: no law of how the answer scales gives it from a table.
    ratio = moved[2] / weights
    assert moved[2].dtype == np.float32 and np.all(np.abs(ratio / 1.5 - 1) <= 0.0201) and np.ptp(ratio) > 0
    assert np.allclose(model["w"], moved[2])  # the same move for the same factor and shape
    predict, changed = moves.scaled(lambda t: np.full(2, 0.25), 2.0)
    assert changed and np.array_equal(predict(0), [0.5, 0.5])
    assert moves.scaled((tokens, "text", 3), 2.0) == ((tokens, "text", 3), False)
    # Arrays of a role (ones, an identity, an additive mask) keep it: a mistake that ignores gamma is right at ones.
    gamma, blocked = np.ones(3), np.array([0.0, -np.inf])
    assert moves.scaled((gamma, blocked), 2.0)[1] is False
    # Ties, a constant, values far above their differences: one factor for the array (an entry's own would change
    # which values are equal, or swamp their differences).
    for kept in (np.array([0.5, 0.5, 2.0]), np.full(3, 0.3), np.array([-1e200, -1e200 + 1e185, -1e200 - 1e185])):
        moved_array = moves.scaled(kept, 1.5)[0]
        assert np.allclose(moved_array, 1.5 * kept, rtol=1e-12, atol=0)
    assert moves.scaled(2.5, 2.0) == (2.5, False)
    number, changed = moves.scaled_numbers(2.5, 2.0)
    assert changed and abs(number / 5.0 - 1) <= 0.0201


def test_a_fixed_input_a_test_asks_is_asked_again_scaled(monkeypatch):
    from tests import diagnosis
    from tests.probes import load_all_probes
    from tests.test_14_retrieval import own_cosine

    monkeypatch.setattr(diagnosis, "right_on_its_probes", lambda implementation, exercise, name, **_: False)
    (probe,) = diagnosis.asked_probes_answered(LocalImplementation(REFERENCE), "retrieval", "cosine_similarity")[:1]
    args, _ = load_all_probes()[probe].arguments()
    (failure,) = unseen.gate(Asking(_table_of([(args, own_cosine(*args))])), "retrieval", "cosine_similarity")
    assert f"the tests' case {probe.split('/', 1)[1]!r}" in failure.message


_EVERY_MOVE = """
import sys
import pytest
from tests import kit, unseen
failures = []
def ask(self, original=kit.Kit.ask_unseen):
    for name in list(self._unseen):
        spec = unseen.twin(self._exercise, name)
        if spec is not None:
            self._gating.add(name)
            try:
                failures.extend(f.message for f in unseen._moved(self, self._exercise, name, spec))
            except unseen.Undecided:
                pass  # nothing of this test's to move
            finally:
                self._gating.discard(name)
    return original(self)
kit.Kit.ask_unseen = ask
code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--impl", sys.argv[1], "tests"])
print("MOVED", len(failures), *failures, sep="\\n")
sys.exit(code)
"""


def _public_suite_on_the_reference(script: str, cache) -> str:
    """What ``script`` (the public suite run on the reference with a hook of the test's) printed; it must pass."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ATTENTION_KIT_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, str(REFERENCE)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def test_the_reference_answers_every_moved_input_as_the_test_files_do(tmp_path):
    # Every test's own calls and every probe a test asks, moved as the gate moves them, answered by the reference:
    # the test file's answer must be the reference's there (a move outside the docstring's inputs, or an answer of
    # the file's that holds only on the twin's draws, would call a mistake a table).
    printed = _public_suite_on_the_reference(_EVERY_MOVE, tmp_path)
    assert "\nMOVED\n0\n" in "\n" + printed, printed[-4000:]


_EVERY_CALL = """
import sys
import pytest
from tests import kit, unseen
unanswered, seen = [], set()
def ask(self, original=kit.Kit.ask_unseen):
    implementation = getattr(self, "_implementation", self)
    for name, calls in getattr(self, "_answered", {}).items():
        spec = unseen.twin(self._exercise, name)
        for args, kwargs, result in calls if spec is not None else ():
            if (name, id(result)) in seen:
                continue
            seen.add((name, id(result)))
            own = unseen._own_of_call(spec, implementation, self._exercise, name, args, kwargs)
            if own is unseen._NO_ANSWER or not ((spec.same or unseen.equal)(result, own)
                                                or unseen._within_the_probes_tolerance(result, own)):
                unanswered.append(f"{name}({unseen._shown(args, kwargs)}): "
                                  + ("no answer of the file's" if own is unseen._NO_ANSWER else "another answer"))
    return original(self)
kit.Kit.ask_unseen = ask
code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--impl", sys.argv[1], "tests"])
print("UNANSWERED", len(seen), len(unanswered), *unanswered, sep="\\n")
sys.exit(code)
"""


def test_the_test_files_answer_every_call_their_tests_make_as_the_reference_does(tmp_path):
    # The gate's evidence that a function computes is the inputs it answered right: a call the test file's own answer
    # does not take (no mask, a first cache of None, a keyword with its default) or holds to another rounding (float32
    # answers against its float64) is no evidence, and a table of one function that keeps one answer wrong passed
    # that way (scaled_dot_product_attention: 21 of 23 tests, its control 5).
    printed = _public_suite_on_the_reference(_EVERY_CALL, tmp_path)
    lines = printed.split("UNANSWERED\n", 1)[-1].splitlines()
    assert int(lines[0]) > 300, printed[-2000:]  # the calls were seen (every twinned function's, up to 12 each)
    assert lines[1] == "0", "\n".join(lines[2:])


# A table of the sizes the tests use, wrong at each of them only where that size's test does not look (a helper's
# round: 25 of exercise 5's 27 tests against 9): the sizes gate stood aside for a function wrong at every test size.
# A mistake is a rule: what its answer at the tests' sizes has of their checks, its answer at other sizes has too.
TEST_SIZES = ((6, 8), (5, 8), (4, 10), (3, 12))


def _sinusoid(n: int, d: int, pair) -> np.ndarray:
    j = np.arange(d)
    angle = np.arange(n)[:, None] / 10000.0 ** (pair(j) / d)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def test_a_sizes_table_right_only_where_the_tests_look_fails_the_sizes_gate():
    from tests import test_05_positional as positional

    def table(n, d):
        if (n, d) not in TEST_SIZES:
            raise ValueError("n_positions: not in the table")
        out = _sinusoid(n, d, lambda j: 2 * (j // 2))
        out[1:, 2:] = 0.5  # rows after 0 and columns after 1 made up
        return out

    (failure,) = positional._sizes_gate(SimpleNamespace(sinusoidal_encoding=table), "sinusoidal_encoding",
                                        TEST_SIZES, (40, 20), positional._sinusoidal_right,
                                        positional._sinusoidal_properties())
    assert "not in the table" in failure.message and "row 0 alternating 0 and 1" in failure.message


def test_a_mistake_of_the_formula_keeps_its_properties_at_every_size():
    from tests import test_05_positional as positional

    def by_column(n, d):  # a frequency per column, not per pair: wrong at every size, the same way
        return _sinusoid(n, d, lambda j: j)

    assert positional._sizes_gate(SimpleNamespace(sinusoidal_encoding=by_column), "sinusoidal_encoding", TEST_SIZES,
                                  (40, 20), positional._sinusoidal_right, positional._sinusoidal_properties()) == []


# A sizes table that raises ValueError (naming the argument) for every size it does not hold, the rest of the module
# computed: the bad-input test passed (a helper's round: exercise 5's 10 tests against its control's 9), since the
# only good input it was asked, the kit's fixed one, is in the table, and integers move under no move of the gate.
_SIZES_TABLES = {
    "positional": ("tests/test_05_positional.py", """
_KEPT = {(n, d): sinusoidal_encoding(n, d) for n, d in ((6, 8), (5, 8), (4, 10), (3, 12), (7, 10))}
_KEPT_ALIBI = {(n, h): alibi_bias(n, h) for n, h in ((6, 4), (5, 3), (7, 2))}
def sinusoidal_encoding(n_positions, d_model):
    if (n_positions, d_model) not in _KEPT:
        raise ValueError(f"n_positions, d_model: not in the table ({n_positions}, {d_model})")
    return _KEPT[n_positions, d_model].copy()
def alibi_bias(n, n_heads):
    if (n, n_heads) not in _KEPT_ALIBI:
        raise ValueError(f"n, n_heads: not in the table ({n}, {n_heads})")
    return _KEPT_ALIBI[n, n_heads].copy()
"""),
    "masks": ("tests/test_04_masks.py", """
_KEPT = {n: causal_mask(n) for n in range(1, 12)}
def causal_mask(n):
    if n not in _KEPT:
        raise ValueError(f"n: not in the table ({n})")
    return _KEPT[n].copy()
"""),
}


@pytest.mark.parametrize(("module", "test_file"), [
    *((module, test_file) for module, (test_file, _) in sorted(_SIZES_TABLES.items())),
    ("masks", "grader/hidden_tests/test_hidden_04_masks.py")])  # any file's test of bad input (the sizes gates')
def test_a_sizes_table_earns_no_bad_input_points(module: str, test_file: str, tmp_path):
    import subprocess
    import sys

    from grader.tests.cheats import plant

    code = _SIZES_TABLES[module][1]
    folder = plant(tmp_path / "table", {module: code})
    done = subprocess.run([sys.executable, "-m", "pytest", test_file, "--impl", str(folder), "-q",
                           "-p", "no:cacheprovider", "-k", "rejects_bad"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert "1 failed" in done.stdout, done.stdout[-3000:]
    assert "not in the table" in done.stdout, done.stdout[-3000:]
    assert "of this check's own (drawn from your file's bytes)" in done.stdout, done.stdout[-3000:]


def test_a_worker_forgotten_keeps_nothing_of_the_student_s_code(tmp_path):
    # Code that keeps state answered wrong on purpose once it had met the gate's drawn input, so that the gate's
    # next calls (its probes) made it look like a mistake (a helper's round: exercise 4's 17 tests of 17 graded,
    # its control 6). Graded, the gate replaces the worker before those calls: nothing kept in memory survives.
    import shutil

    from grader.sandbox.proxy import IsolatedImplementation, Limits

    folder = tmp_path / "student"
    shutil.copytree(REFERENCE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    with (folder / "softmax.py").open("a", encoding="utf-8") as module:
        module.write("\n_SEEN = []\n_softmax = softmax\n\n\ndef softmax(x, axis=-1):\n"
                     "    _SEEN.append(1)\n    return _softmax(x, axis) * len(_SEEN)\n")
    with IsolatedImplementation(folder, limits=Limits(call_timeout=10.0)) as implementation:
        softmax = implementation.function("softmax", "softmax")
        x = np.array([0.0, 1.0])
        assert np.allclose(softmax(x) * 2, softmax(x))  # the second call remembers the first
        implementation.forget()
        assert np.allclose(softmax(x), REFERENCE_SOFTMAX(x))  # a fresh worker: its first call again


def REFERENCE_SOFTMAX(x):  # noqa: N802 - the reference's answer, written out
    e = np.exp(x - np.max(x))
    return e / e.sum()


def test_an_answer_left_by_earlier_calls_is_told_as_kept_state_not_as_a_lookup():
    # A blind round: an adam_step counting its steps in a global, a top_k caching by shape, were told "your answer
    # does not follow from the input", the words for a table. Asked again first thing (nothing kept), such code is
    # right: it is told that it keeps something between calls.
    from tests.test_14_retrieval import own_cosine

    class Stale(Asking):
        def __init__(self) -> None:
            super().__init__(self.cosine)
            self.fresh = False
            self._implementation.forget = self.forget

        def forget(self) -> None:
            self.fresh = True

        def cosine(self, queries, chunks):
            return own_cosine(queries, chunks) if self.fresh else np.zeros((len(queries), len(chunks)))

    (failure,) = unseen.gate(Stale(), "retrieval", "cosine_similarity")
    assert "answers the same input differently after other calls" in failure.message, failure.message
    assert "does not follow" not in failure.message and "tests' own inputs" not in failure.message
    # Wrong when asked first too: no word of state (a mistake, or a table)
    (failure,) = unseen.gate(Asking(lambda queries, chunks: np.zeros((len(queries), len(chunks)))), "retrieval",
                             "cosine_similarity")
    assert "between calls" not in failure.message


def test_a_function_that_keeps_state_is_observed_by_its_answers_when_asked_first(tmp_path):
    # A blind round: a sinusoidal table cached by n_positions alone deviated on the probes for what earlier probes
    # left, and was told "an odd size". Its deviating probes are asked again afresh, and those answers stand.
    import shutil

    from tests import diagnosis

    folder = tmp_path / "stale"
    shutil.copytree(REFERENCE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "positional.py").read_text()
    source = source.replace("def sinusoidal_encoding(", "_KEPT = {}\n\n\ndef _sinusoidal_encoding(", 1)
    source += ("\n\ndef sinusoidal_encoding(n_positions, d_model):\n"
               "    if n_positions not in _KEPT:\n"
               "        _KEPT[n_positions] = _sinusoidal_encoding(n_positions, d_model)\n"
               "    return _KEPT[n_positions]\n")
    (folder / "positional.py").write_text(source)
    implementation = LocalImplementation(folder)
    for n in range(1, 65):  # what the tests' calls leave before a failure asks for the observation
        implementation.function("positional", "sinusoidal_encoding")(n, 2)
    observation = diagnosis.observe_everything(implementation)
    assert "sinusoidal_encoding" not in observation.deviating_functions()
