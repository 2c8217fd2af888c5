"""No score without the idea (issue 24): each cheat scores what its control scores, the reference full marks.

A cheat (``grader/tests/cheats.py``) is the reference with a shortcut swapped in:
gradients by nudging the inputs, a train() that returns stored weights, results
in float16 to buy float16's tolerance. Its control is the same submission with the
shortcut's work left undone. Both run the exercise's graded files, public and
hidden, in this process (``--impl``, as a student's run: the CPU budgets apply);
every file's tests share its points equally, so "no more passing tests than the
control, file by file" is "no more points".
"""

from __future__ import annotations

import pytest

from grader.curriculum import ROOT
from grader.mutants.report import SuiteRun, run_tests
from grader.tests.cheats import (
    CHEATS,
    HONEST,
    HONEST_DECODING,
    HONEST_PART_ONE,
    Cheat,
    assert_no_more_than_its_control,
    passed,
    plant,
    run_files,
)
from grader.tests.cheats import _files as _files_of

# One xdist worker runs this file: the reference graded once for the controls (a module fixture) is then built once,
# not once per worker.
pytestmark = pytest.mark.xdist_group("test_gaming")

# Not cheats but mistakes of one idea: they must fail the test of that idea (they did the rest of the exercise,
# so their control is the reference, not a stub).
MISTAKES = {"train-adam-state-dropped": "test_train_is_init_model_then_adam_steps_with_their_state",
            "train-positions-ignored": "test_train_without_positions_trains_a_model_without_them"}




@pytest.fixture(scope="module")
def reference_runs() -> dict[str, SuiteRun]:
    files = sorted({file for cheat in CHEATS.values() for file in cheat.test_files})
    return run_files(ROOT / "solutions", tuple(files))


def test_the_reference_passes_every_file_the_cheatsrun_files(reference_runs):
    for file, run in reference_runs.items():
        assert run.failed == [], f"the reference fails {file}: {run.failed}\n{run.output[-3000:]}"


def _file_kind(file: str) -> str:
    return "hidden" if file.startswith("grader/hidden_tests/") else "public"


def _runs(cheat: Cheat) -> list:
    """The runs of ``cheat``'s check: one per graded file, a slow cheat's public file in its pieces."""
    return [pytest.param(cheat, file, piece, id=f"{cheat.name}-{_file_kind(file)}" + (f"-{n}" if piece else ""))
            for file in cheat.test_files
            for n, piece in enumerate(cheat.pieces if cheat.pieces and _file_kind(file) == "public" else (None,))]


# One test per graded file of each cheat (its public and hidden files apart): the same checks, and no test that
# runs two files of a slow cheat (numerical gradients train slowly on purpose) in a row.
@pytest.mark.parametrize(("cheat", "file", "piece"), [run for c in CHEATS.values() if c.name not in MISTAKES
                                                      for run in _runs(c)])
def test_a_cheat_scores_what_its_control_scores(cheat: Cheat, file: str, piece: str | None, tmp_path):
    assert_no_more_than_its_control(cheat, tmp_path, (file,), piece)


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_mistake_of_one_idea_fails_the_test_of_that_idea(name: str, tmp_path, reference_runs):
    cheat = CHEATS[name]
    runs = run_files(plant(tmp_path / "mistake", cheat.code), cheat.test_files)
    failed = [node for run in runs.values() for node in run.failed]
    assert any(node.endswith("::" + MISTAKES[name]) for node in failed), (name, failed)
    public = cheat.test_files[0]
    assert passed(runs[public]) < passed(reference_runs[public])


def test_a_slice_s_jacobian_is_told_the_formula_that_needs_none(tmp_path):
    # A softmax Jacobian by dual numbers (all of it at once: its memory), layer norm's one row at a time (its time).
    for name, said in (("softmax-backward-dual-numbers", "softmax_backward: the memory of a call on slices of 2048"),
                       ("layer-norm-backward-jacobian-rows", "layer_norm_backward: its CPU time on slices of 16384"),
                       # (and attention's rows of scores, one key column of every row at a time: its time)
                       ("attention-backward-complex-step-per-key",
                        "attention_backward: its CPU time on slices of 4096")):
        run = run_tests(ROOT / "tests/test_08_backward.py", plant(tmp_path / name, CHEATS[name].code), tb="short")
        assert said in run.output and "that formula needs no Jacobian" in run.output, (name, run.output[-3000:])
        assert "numerical estimate" not in run.output  # exact, both: never called an estimate


def test_numeric_gradients_are_told_what_to_do_instead(tmp_path):
    folder = plant(tmp_path / "central", CHEATS["backward-central-differences"].code)
    run = run_tests(ROOT / "tests/test_08_backward.py", folder, tb="short")
    assert "your gradient is close to the exact derivative, not equal to it: either a numerical estimate" in run.output
    assert "write the backward pass analytically" in run.output
    # Recorded as data like every failure: its reading link, and never taken for a result the test could not use.
    assert "read:     docs/reading.md#" in run.output and "the test could not use what" not in run.output


def test_an_estimate_exact_enough_is_told_by_its_cost(tmp_path):
    folder = plant(tmp_path / "richardson", CHEATS["backward-richardson"].code)  # exact enough: its cost tells
    run = run_tests(ROOT / "tests/test_08_backward.py", folder, tb="short")
    assert "your gradients look like a numerical estimate" in run.output and "forward passes" in run.output


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_variants_pass_every_training_test(name: str, tmp_path):
    folder = plant(tmp_path / name, HONEST[name])
    runs = run_files(folder, ("tests/test_09_training.py", "grader/hidden_tests/test_hidden_09_training.py"))
    assert all(run.failed == [] for run in runs.values()), {file: run.failed for file, run in runs.items()}


BACKWARD_FILES = ("tests/test_08_backward.py", "grader/hidden_tests/test_hidden_08_backward.py")


@pytest.mark.parametrize("file", BACKWARD_FILES)
def test_every_test_of_a_backward_function_first_checks_it_is_analytic(file: str) -> None:
    """A new test of exercise 8 that calls a backward function without the gate would give numeric gradients points."""
    import ast

    tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
    ungated = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")) or "reject" in node.name:
            continue
        called = {sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
                  and isinstance(sub.value, ast.Name) and sub.value.id == "impl" and sub.attr.endswith("_backward")}
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        first = body[0] if body else None
        gated = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)
                 and getattr(first.value.func, "id", "") == "require_analytic")
        if called and not gated:
            ungated.append(f"{node.name} (calls {', '.join(sorted(called))})")
    assert not ungated, f"{file}: tests of a backward function that do not start with require_analytic: {ungated}"


DECODING_FILES = ("tests/test_11_decoding.py", "grader/hidden_tests/test_hidden_11_decoding.py")


@pytest.mark.parametrize("name", sorted(HONEST_DECODING))
def test_honest_variants_pass_every_decoding_test(name: str, tmp_path):
    """Other ways the API allows (two passes, key by key in each block, calls through a partial, threads ...)."""
    runs = run_files(plant(tmp_path / name, HONEST_DECODING[name]), DECODING_FILES)
    assert all(run.failed == [] for run in runs.values()), {file: run.failed for file, run in runs.items()}


PART_ONE_FILES = {"masks": _files_of("04", "masks"), "positional": _files_of("05", "positional"),
                  "layer": _files_of("07", "layer")}


@pytest.mark.parametrize("name", sorted(HONEST_PART_ONE))
def test_honest_variants_pass_every_test_of_their_exercise(name: str, tmp_path):
    """Other ways to write the functions with gates (dropout by binomial draws, masks by comparison, loops)."""
    (module,) = HONEST_PART_ONE[name]
    runs = run_files(plant(tmp_path / name, HONEST_PART_ONE[name]), PART_ONE_FILES[module])
    assert all(run.failed == [] for run in runs.values()), {file: run.failed for file, run in runs.items()}


# The gates that open every test of a function (its idea checked before its values): {file: {function: gate}}.
GATES = {
    **dict.fromkeys(_files_of("02", "projections"), {"init_weight": "require_draws"}),
    **dict.fromkeys(_files_of("04", "masks"), {"causal_mask": "require_causal_formula"}),
    **dict.fromkeys(_files_of("05", "positional"), {"alibi_bias": "require_alibi_formula",
                                                     "sinusoidal_encoding": "require_sinusoidal_formula"}),
    **dict.fromkeys(_files_of("07", "layer"), {"dropout": "require_independent_draws"}),
    **dict.fromkeys(DECODING_FILES, {"causal_decode": "require_the_cache"}),
    **dict.fromkeys(_files_of("15", "tokenization"), {"bpe_encode": "require_ordered_merges",
                                                       "token_pieces": "require_ordered_pieces"}),
}


@pytest.mark.parametrize("file", sorted(GATES))
def test_every_test_of_a_gated_function_opens_with_its_gate(file: str) -> None:
    """A new test of such a function without its gate would give the values computed without the idea points."""
    import ast

    ungated = []
    for node in ast.parse((ROOT / file).read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")) or "reject" in node.name:
            continue
        called = {sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
                  and isinstance(sub.value, ast.Name) and sub.value.id == "impl"}
        named = {sub.value.split("/")[0] for sub in ast.walk(node) if isinstance(sub, ast.Constant)
                 and isinstance(sub.value, str)}  # probes: "causal_decode/case"
        opening = set()
        for statement in node.body[1:] if ast.get_docstring(node) is not None else node.body:
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
                break
            opening.add(getattr(statement.value.func, "id", ""))
        missing = [gate for function, gate in GATES[file].items() if function in called | named and gate not in opening]
        if missing:
            ungated.append(f"{node.name} (without {', '.join(missing)})")
    assert not ungated, f"{file}: tests that do not open with their gate: {ungated}"


# Answers recorded from a run of the public tests, then looked up (a helper's round: every public test of
# exercise 15 passed so). The recorder is the reference whose API functions write each call's arguments (as they
# were given: a generator before its draws) and answer down, with the state of the generators after the call; the
# table module answers what was recorded, leaves the generators as the draws would have, and rejects the rest,
# naming every argument.
_RECORDER = '''
import functools as _functools
import hashlib as _hashlib
import pickle as _pickle


import inspect as _inspect


def _key(name, values):
    return _hashlib.sha256(_pickle.dumps((name, values))).hexdigest()


def _recorded(function):
    @_functools.wraps(function)
    def call(*args, **kwargs):
        bound = _inspect.signature(function).bind(*args, **kwargs)
        bound.apply_defaults()
        key = _key(function.__name__, tuple(bound.arguments.values()))  # generators as they were given
        result = function(*args, **kwargs)
        after = [value.bit_generator.state for value in bound.arguments.values() if hasattr(value, "bit_generator")]
        with open({path!r}, "ab") as file:
            _pickle.dump((key, (result, after)), file)
        return result
    return call


for _name in {names!r}:
    globals()[_name] = _recorded(globals()[_name])
'''

_TABLE = '''
import base64 as _base64
import hashlib as _hashlib
import pickle as _pickle

_ANSWERS = _pickle.loads(_base64.b64decode({table!r}))
_DEFAULTS = _pickle.loads(_base64.b64decode({defaults!r}))


def _key(name, values):
    return _hashlib.sha256(_pickle.dumps((name, values))).hexdigest()


def _looked_up(name, *values):
    key = _key(name, values)
    if key not in _ANSWERS:
        raise {miss}(f"bad input: {{name}} was not given one of its arguments as asked ({arguments})")
    answer, after = _ANSWERS[key]
    for value, state in zip([v for v in values if hasattr(v, "bit_generator")], after):
        value.bit_generator.state = state  # as if it had drawn (a helper's round: init functions passed so)
    return answer
'''


class _Code:
    """A default written into generated code as a lookup of the table's defaults (its repr is that code)."""

    def __init__(self, function: str, parameter: str) -> None:
        self.text = f"_DEFAULTS[{(function, parameter)!r}]"

    def __repr__(self) -> str:
        return self.text


# A miss raising NotImplementedError is also wrong on the tests' bad input (a helper's first table): the gate once
# stood aside for that, as for a mistake.
# A table may also keep one answer wrong on purpose, that of a fixed input a test asks: the gate once stood aside for a
# function wrong there, as for a mistake (exercise 10: 6 of 18 tests against 0 for the stub).
def _tables() -> list[tuple[str, str, bool, str | None]]:
    """Every exercise's table, whole (a miss raising ValueError), and some with one answer wrong or other misses.

    Part I and II functions whose tests had no input of their own passed so (13.3 of exercise 5's 18 points graded,
    the stub 0: rotary_embedding's tests and the bad-input test), and the sizes gates stood aside for one wrong
    answer as the unseen gate did.
    """
    from grader.curriculum import load

    whole = [(exercise.name, "ValueError", False, None) for exercise in load().exercises]
    return [*whole, ("tokenization", "NotImplementedError", False, None),
            *((name, "ValueError", True, None) for name in ("explain", "distance", "multihead", "positional", "masks",
                                                             "layer")),
            # One function a table, the rest of the module computed, one answer wrong: these passed for a mistake
            # (padding_mask: 16 of exercise 4's 17 tests, its control 11; scaled_dot_product_attention 21 of 23,
            # its control 5; see _SINGLE).
            *((module, "ValueError", True, name) for module, name in _SINGLE)]


# Single functions as tables, the rest of their module computed, one answer wrong (a sweep of all 55 twinned functions
# found these passing more tests than their control; each for a reason of its own kind):
# - inputs that hold no float array, moved by putting their items in another order (tests.moves.reordered), the
#   texts of byte-pair encoding by renaming their letters (moves.relabeled_letters), or a test file's own move;
# - calls the test file's own answer did not take (no mask, a first cache of None, a keyword with its default,
#   float32 answers held to float64's rounding), so that no input it answered was known to the gate;
# - a table that raises on the drawn input and is wrong on the only call a test made of it (a shapes test passes it;
#   compare() calls it inside): nothing to move, and it raised on valid input.
_SINGLE = (("masks", "padding_mask"), ("masks", "combine_masks"), ("negation", "pair_accuracy"),
           ("retrieval", "recall_at_k"), ("tokenization", "sequence_lengths"), ("tokenization", "bpe_decode"),
           ("tokenization", "train_bpe"), ("tokenization", "bpe_encode"), ("tokenization", "token_pieces"),
           ("retrieval", "answer_with_attention"), ("tokenization", "attention_cost"),
           ("attention", "scaled_dot_product_attention"), ("decoding", "kv_cache_append"), ("retrieval", "evaluate"),
           ("training", "model_forward"), ("negation", "pooled_features"), ("negation", "pooled_forward"),
           ("negation", "negation_attention"))


@pytest.mark.parametrize(("module", "miss", "one_wrong", "only"), _tables())
def test_answers_recorded_from_the_public_tests_score_what_a_stub_scores(module: str, miss: str, one_wrong: bool,
                                                                         only: str | None, tmp_path):
    import base64
    import inspect
    import pickle

    from grader.curriculum import load
    from grader.tests.cheats import _raising

    exercise = load().exercise(module)
    names = [only] if only else list(exercise.functions)
    record = tmp_path / "answers.pickle"
    recorder = plant(tmp_path / "recorder", {module: _RECORDER.format(path=str(record), names=names)})
    public = f"tests/{exercise.test_file.split('/')[-1]}"
    assert passed(run_files(recorder, (public,))[public]) > 0
    answers = {}
    with record.open("rb") as file:
        while True:
            try:
                key, value = pickle.load(file)
            except EOFError:
                break
            answers.setdefault(key, value)
    assert answers, "the recorder saw no call"
    import importlib

    reference = importlib.import_module(f"solutions.{module}")
    if one_wrong:
        _one_asked_answer_wrong(answers, module, names, reference)
    arguments = ", ".join(sorted({p for n in names for p in inspect.signature(getattr(reference, n)).parameters}))
    functions, defaults = "", {}
    for name in names:  # the reference's signatures, answered from the table
        signature = inspect.signature(getattr(reference, name))
        # Defaults by reference, not by repr: ``dtype=<class 'numpy.float64'>`` is no code (the masks table was a
        # syntax error, and scored the stub's 0 without a lookup).
        plain = signature.replace(return_annotation=inspect.Signature.empty, parameters=[
            parameter.replace(annotation=inspect.Parameter.empty, default=parameter.default
                              if parameter.default is inspect.Parameter.empty else _Code(name, parameter.name))
            for parameter in signature.parameters.values()])
        defaults.update({(name, parameter.name): parameter.default for parameter in signature.parameters.values()
                         if parameter.default is not inspect.Parameter.empty})
        call = ", ".join(signature.parameters)  # every argument, defaults applied, in order
        functions += f"\n\ndef {name}{plain}:\n    return _looked_up({name!r}, {call})\n"
    code = _TABLE.format(table=base64.b64encode(pickle.dumps(answers)).decode(), arguments=arguments, miss=miss,
                         defaults=base64.b64encode(pickle.dumps(defaults)).decode()) + functions
    compile(code, f"{module}-table", "exec")  # code, or the comparison proves nothing
    table = run_files(plant(tmp_path / "table", {module: code}), (public,))[public]
    control = _raising(module, "NotImplementedError")
    if only:  # the rest of the module computed, that function a stub
        signature = inspect.signature(getattr(reference, only))
        stub_signature = signature.replace(return_annotation=inspect.Signature.empty, parameters=[
            parameter.replace(annotation=inspect.Parameter.empty, default=None
                              if parameter.default is not inspect.Parameter.empty else parameter.default)
            for parameter in signature.parameters.values()])
        control = (f"\n\ndef {only}{stub_signature}:\n"
                   f"    raise NotImplementedError({', '.join(signature.parameters)!r})\n")
    compile(control, f"{module}-control", "exec")
    stub = run_files(plant(tmp_path / "stub", {module: control}), (public,))[public]
    assert passed(table) <= passed(stub), (f"answers looked up from the public tests pass {passed(table)} tests, "
                                           f"the stub {passed(stub)}: {table.output[-2000:]}")


def _one_asked_answer_wrong(answers: dict, module: str, names: list[str], reference) -> None:
    """Make wrong, for each function, the recorded answer to the first fixed input a test asks that was recorded.

    A single function's table whose tests ask none of its fixed inputs: the first call a test made of it.
    """
    import hashlib
    import inspect
    import pickle

    import numpy as np

    from tests.diagnosis import asked_by_a_test
    from tests.probes import load_all_probes

    def wrong(value):
        if isinstance(value, np.ndarray):
            return value + 1 if value.dtype.kind in "fiu" else value[::-1].copy()
        if isinstance(value, tuple):
            return (wrong(value[0]), *value[1:])
        if isinstance(value, list):
            return [*value[::-1], *value[:1]]
        if isinstance(value, (float, int)) and not isinstance(value, bool):
            return value + 1
        if isinstance(value, dict):
            key = next(iter(value))
            return {**value, key: wrong(value[key])}
        return value

    registry = load_all_probes()
    made = 0
    for name in names:
        for probe in sorted(p for p, e in registry.items() if e.function == name and e.rejects is None):
            if not asked_by_a_test(probe):
                continue
            args, kwargs = registry[probe].arguments()
            bound = inspect.signature(getattr(reference, name)).bind(*args, **kwargs)
            bound.apply_defaults()
            key = hashlib.sha256(pickle.dumps((name, tuple(bound.arguments.values())))).hexdigest()
            if key in answers:
                answers[key] = (wrong(answers[key][0]), answers[key][1])
                made += 1
                break
    if not made and len(names) == 1:  # one function's table whose tests ask no fixed input: a test's own call
        first = next(iter(answers))
        answers[first] = (wrong(answers[first][0]), answers[first][1])
        made = 1
    assert made, f"no recorded answer of {module} is that of a fixed input a test asks"


def test_every_generated_rejecter_and_stub_is_code():
    # A default whose repr is not code (masks' dtype=<class 'numpy.float64'>) once made the masks module a syntax
    # error: its rejects-every-input cheat and its control scored 0 alike, and the comparison proved nothing.
    from grader.curriculum import load
    from grader.tests.cheats import _raising

    for exercise in load().exercises:
        for error in ("ValueError", "NotImplementedError"):
            compile(_raising(exercise.name, error), f"{exercise.name} ({error})", "exec")
