"""The step whose output first differs: what a failure says when no known mistake explains it.

A catalogued mistake or a family names the misconception, but only for mistakes someone wrote down. For
every other mistake the probes still say *where* the student's code first goes wrong: of the functions a
failing test reached, the first (in the order one calls the other) whose own outputs on its fixed inputs
differ from the contract's while everything it calls agrees. For a pipeline (``evaluate``, a training
loop, BPE's merges) the probe's result is cut further into its steps, declared next to the probes with
:func:`pipeline`, and the failure names the first step whose output differs and that step's idea; the
revisit line follows it, instead of restating the whole pipeline.

Only facts observed are stated: which function, on which fixed input, which output (or which entry of a
sequence) differs first, and what it is against what it should be. No misconception is guessed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tests.probes import golden

RAISED = None  # as tests.diagnosis.RAISED: a probe output recorded as "the call raised"


@dataclass(frozen=True)
class Stage:
    """One step of a pipeline function, known by the output it produces.

    ``idea`` is what to revisit when this output is the first to differ. For an output that is a sequence
    built step by step (the losses of a training loop, BPE's merges), ``first`` is the idea when its very
    first entry already differs, ``stop`` when every entry agrees as far as both go but the lengths differ;
    ``idea`` covers a later entry.
    """

    output: str
    name: str
    idea: str
    first: str = ""
    stop: str = ""


@dataclass(frozen=True)
class Pipeline:
    """A function's result cut into steps.

    ``outputs`` names its arrays (in ``as_arrays`` order), ``stages`` lists them in the order the function
    computes them. ``derive``, if given, first cuts the result's arrays into the named parts (the two halves
    of a concatenation ...), the same way for the student's result and the contract's.
    """

    outputs: tuple[str, ...]
    stages: tuple[Stage, ...]
    derive: Callable[[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]] | None = None


PIPELINES: dict[str, Pipeline] = {}
NAMES: dict[str, tuple[str, ...]] = {}
"""The names of a function's result arrays (``as_arrays`` order), declared with :func:`names` or a pipeline."""


def names(function: str, *outputs: str) -> None:
    """Declare the names of ``function``'s result arrays, in ``as_arrays`` order (dict keys sorted)."""
    NAMES[function] = tuple(outputs)


def pipeline(function: str, outputs: tuple[str, ...], *stages: Stage,
             derive: Callable[[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]] | None = None) -> None:
    """Declare the steps of ``function``'s result (next to its probes, in its test file)."""
    unknown = [stage.output for stage in stages if stage.output not in outputs]
    if unknown:
        raise ValueError(f"pipeline {function}: stages name outputs {unknown} that are not among {outputs}")
    PIPELINES[function] = Pipeline(tuple(outputs), tuple(stages), derive)
    if derive is None:
        NAMES.setdefault(function, tuple(outputs))


@dataclass(frozen=True)
class FirstStep:
    """Where a student's code first differs.

    ``text`` leads the failure, ``revisit`` (or '') replaces its revisit lines.
    """

    function: str
    probe: str
    text: str
    revisit: str = ""
    claim: tuple = ()
    """What a family named by its inputs says of them (``relations.Found.claim``), () otherwise."""
    general: str = ""
    """``text`` without the fixed inputs' numbers (a factor), for a failure whose own numbers differ ('': none)."""


# ----------------------------------------------------------------------------- one probe's first difference


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        try:
            return bool(np.allclose(a.astype(float), b.astype(float), rtol=1e-5, atol=1e-8, equal_nan=True))
        except (TypeError, ValueError):
            return False
    return bool(np.array_equal(a, b))


def _number(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc" and value.size:
        shown = ", ".join(f"{float(x):.4g}" for x in value.ravel()[:4])
        return f"[{shown}{', ...' if value.size > 4 else ''}]"
    if isinstance(value, np.ndarray) and value.size > 8:
        return str(value.ravel()[:8].tolist())[:-1] + ", ...]"
    return str(value.tolist() if isinstance(value, np.ndarray) else value)


def _entries(array: np.ndarray) -> np.ndarray:
    """The entries of a sequence along its first axis (rows of a 2-D array, numbers of a 1-D one)."""
    return array.reshape(array.shape[0], -1) if array.ndim else array.reshape(1, 1)


def _where(mine: np.ndarray, want: np.ndarray) -> tuple[str, str, int]:
    """How one output differs: in words, its kind and the first entry that differs.

    The kind is 'first', 'later', 'stop' or 'whole' (the entry is 0 for a whole output).
    """
    if mine.ndim == 0 and want.ndim == 0:
        words = f"{_number(mine[()])} instead of {_number(want[()])}"
        try:
            ratio = float(mine) / float(want)
        except (TypeError, ValueError, ZeroDivisionError):
            ratio = float("nan")
        if np.isfinite(ratio) and ratio != 0:
            words += f" ({ratio:.4g} times it)"
        return words, "whole", 0
    numeric = "biufc"
    if (mine.dtype.kind in numeric) != (want.dtype.kind in numeric) or (
            mine.dtype.kind not in numeric and mine.dtype.kind != want.dtype.kind):
        first = f": the first is {_number(mine.ravel()[0])!r} instead of {_number(want.ravel()[0])!r}" \
            if mine.size and want.size else ""
        return f"values of dtype {mine.dtype} instead of {want.dtype}{first}", "whole", 0
    # The right numbers with the two axes swapped (a blind round: sequence_lengths returning (texts, sizes) was told
    # the step's formula, which was right): said as a transpose, whatever the step.
    if mine.ndim == 2 and want.ndim == 2 and mine.shape == want.shape[::-1] and mine.dtype.kind not in "USO" \
            and _same(mine, want.T) and not _same(mine, want):
        return (f"the right values transposed, shape {mine.shape} where the contract's is {want.shape}",
                "transposed", 0)
    if mine.ndim != want.ndim or mine.shape[1:] != want.shape[1:] or mine.dtype.kind in "USO":
        return f"shape {mine.shape} instead of {want.shape}", "whole", 0
    mine_rows, want_rows = _entries(mine), _entries(want)
    common = min(len(mine_rows), len(want_rows))
    for i in range(common):
        if not _same(mine_rows[i], want_rows[i]):
            got, expected = mine[i], want[i]
            agree = ("entry 0 already differs" if i == 0 else f"entry 0 agrees; entry {i} differs" if i == 1
                     else f"entries 0..{i - 1} agree; entry {i} differs")
            return f"{agree}: {_number(got)} instead of {_number(expected)}", "first" if i == 0 else "later", i
    return (f"its first {common} entries agree, then it has {len(mine_rows)} entries instead of {len(want_rows)}",
            "stop", common)


LAST = (10**6, 10**6)  # the rank of a difference no step accounts for


def _first_difference(function: str, observed: Any, expected: Any) -> tuple[str, str, tuple[int, int]]:
    """(what differs, the revisit idea or '', how early it comes) for one deviating probe's result."""
    if observed is RAISED:
        return "it raised an exception", "", LAST
    if not isinstance(observed, tuple):
        return "its result is not of the type the contract returns (see the docstring's Returns)", "", LAST
    expected = expected if isinstance(expected, tuple) else (expected,)
    if len(observed) != len(expected):
        return f"it returned {len(observed)} arrays instead of {len(expected)}", "", LAST
    differing = [i for i, (a, b) in enumerate(zip(observed, expected, strict=True)) if not _same(a, b)]
    if not differing:
        return "", "", LAST
    swapped = _swapped(observed, expected)
    if swapped:  # (before any step: a member in another's place is no step's wrong value, nor a scale of it)
        return (f"its result holds the right values in another order: {swapped}",
                "return the items in the order the docstring's Returns lists them", (0, 0))
    plan = PIPELINES.get(function)
    if plan is not None and plan.derive is not None:
        try:
            observed, expected = tuple(plan.derive(observed)), tuple(plan.derive(expected))
        except Exception:  # noqa: BLE001 - a result of another shape: no steps to cut it into
            plan = None
        else:
            differing = [i for i, (a, b) in enumerate(zip(observed, expected, strict=True)) if not _same(a, b)]
    if plan is not None and len(plan.outputs) == len(expected) == len(observed) and differing:
        for position, stage in enumerate(plan.stages):
            index = plan.outputs.index(stage.output)
            if index in differing:
                words, kind, entry = _where(observed[index], expected[index])
                idea = {"first": stage.first, "stop": stage.stop}.get(kind, "") or stage.idea
                if kind == "transposed":
                    idea = (f"{stage.name} hold the right numbers with their two axes swapped: the docstring's "
                            "Returns gives which axis comes first (row i of yours is column i of the contract's)")
                return (f"the first step whose output differs is {stage.name} ({stage.output!r}: {words})", idea,
                        (position, entry))
    index = differing[0]
    words, _, entry = _where(observed[index], expected[index])
    name = "its result" if len(expected) == 1 else f"item {index} of its result"
    return f"{name} differs first: {words}", "", (index, entry)


def _swapped(observed: tuple, expected: tuple) -> str:
    """Which items of ``observed`` are ``expected``'s in another order ('' when it is not that).

    A blind round: pair_accuracy returning (both_right, accuracy) was told its accuracy was "0.5 times it", and
    attention_cost returning (bytes, flops) that its flops were "0.2 times" the formula's.
    """
    if not 1 < len(expected) <= 4:
        return ""
    for order in itertools.permutations(range(len(expected))):
        if list(order) != sorted(order) and all(
                _same(np.asarray(observed[i]), np.asarray(expected[j])) for i, j in enumerate(order)):
            moved = [f"item {i} is what item {j} should be" for i, j in enumerate(order) if i != j]
            return "; ".join(moved)
    return ""


# ----------------------------------------------------------------------------- the function to look at first

# A test that recognised a convention (ALiBi's slope * j, GPT-2's pre-tokenization, float32 ...) says more than
# any step: its own message stands, alone.
CONVENTION_WORDS = ("a convention, not a misconception", "a question of precision",
                    "a lower precision, not a wrong formula")


def names_a_convention(message: str) -> bool:
    """True when a failure's message already tells a convention or a question of precision."""
    return any(words in message for words in CONVENTION_WORDS)



def first_step(implementation: Any, called: list[str], observation: Any, reached: Any = None) -> FirstStep | None:
    """The first step of the student's code that differs among the functions a failing test reached, or None.

    The function is the earliest (manifest order) of those the test called, and of what they call, whose
    behaviour probes deviate while nothing it calls does. What they call: what the test's calls reached
    (``reached``, ``tests/reach.py``; in grading, what the worker saw) when they were traced, else the names in
    their code (``diagnosis.callees``). Never raises.
    """
    try:
        return _first_step(implementation, called, observation, reached)
    except Exception:  # noqa: BLE001 - feedback must never break the run
        return None


def _first_step(implementation: Any, called: list[str], observation: Any, traced: Any = None) -> FirstStep | None:
    from grader.curriculum import load as load_curriculum
    from tests.diagnosis import callees
    from tests.probes import load_all_probes

    curriculum = load_curriculum()
    order = {f: i for i, f in enumerate(f for e in curriculum.exercises for f in e.functions)}
    bad = set(observation.deviating_functions(behaviour_only=True))
    if traced is not None and traced.calls:  # by call: what the test's calls went through, not names
        def below(name: str) -> set[str]:
            return traced.callees(name)
    else:
        def below(name: str) -> set[str]:
            return callees(implementation, name)
    reached: set[str] = set()
    for name in dict.fromkeys(called):
        if name in order:
            reached |= {name} | below(name)
    own = sorted((f for f in reached & bad if not below(f) & bad), key=order.__getitem__)
    if not own:
        return None
    function = own[0]
    registry = load_all_probes()
    probes = sorted(p for p, entry in registry.items() if entry.function == function and entry.rejects is None
                    and observation.deviates.get(p, False))
    exercise = curriculum.exercise_of_function(function)
    if function in called and probes and _relation(function, probes, observation, registry) is not None:
        # One relation of its outputs to the right ones on every deviating input (a scale, a sign) explains all that
        # is wrong; a step inside it explains where it starts only, and its idea may be another (a blind round:
        # pooled_gradients' grad_logits divided by n again, or its sign flipped, was told the read-out's input).
        return _related(function, probes, observation, registry, exercise.module_file)
    findings = [(p, *_first_difference(function, observation.outputs.get(p), golden(p))) for p in probes]
    findings = [finding for finding in findings if finding[1]]
    alone = "" if function in called else f" (your {', '.join(sorted(set(called) & set(order)))} relies on it)"
    if not findings:  # the values agree (another dtype ...): only a relation of its outputs can say how
        if function in called:
            return _related(function, probes, observation, registry, exercise.module_file)
        found = _relation(function, probes, observation, registry)
        if found is None:
            return None
        return FirstStep(function, probes[0], _first_function(function, exercise.module_file, alone)
                         + f": on every fixed input where it goes wrong, {found.words}.")
    # Among several probes, the one whose difference comes earliest (the step, then the entry of a sequence).
    probe, words, idea, _ = min(findings, key=lambda finding: finding[3])
    if function in called and not idea:
        # The function the test called, with no step inside it to name: a relation of its outputs to the right
        # ones names the family (tests/relations.py), else the test's message says it all.
        return _related(function, probes, observation, registry, exercise.module_file)
    text = _first_function(function, exercise.module_file, alone) + f". On {probe}, {words}."
    if idea:
        text += f"\nRevisit: {idea}"
    return FirstStep(function, probe, text, idea)


def _first_function(function: str, module_file: str, alone: str) -> str:
    return (f"Diagnosis (the step whose output first differs): your {function}() in {module_file} is the first "
            f"function this test reached{alone} that gives other outputs than the contract on its own fixed inputs "
            "while what it calls agrees")


def _related(function: str, probes: list[str], observation: Any, registry: Any, module_file: str) -> FirstStep | None:
    """The family ``function``'s outputs show on all ``probes`` (``tests/relations.py``), or which output differs.

    First what the probes themselves tell (another probe's right result), then a relation of two arrays, random
    draws, and last the inputs on which the call raises or gives another shape (their number of axes, an odd size,
    an optional argument). The inputs are named for raises and shapes only: named for wrong values they misled (the
    annotated transformer's attention, failing on float masks, was told "other outputs only on bool mask with a
    blocked query"; a float32 numerical gradient failing its eps check was told a probe's float32 rounding).
    """
    from tests import relations

    names = parameters(function)
    own = [p for p, entry in registry.items() if entry.function == function and entry.rejects is None]
    passing = [p for p in own if p in observation.outputs and not observation.deviates.get(p, False)]
    expected = {p: _as_tuple(golden(p)) for p in own}

    def arguments(probe: str) -> tuple[tuple, dict]:
        return registry[probe].arguments()

    found = (relations.argument_not_used(probes, own, observation.outputs, expected, arguments, names)
             or relations.relation(function, probes, observation.outputs, expected, arguments, NAMES.get(function, ()))
             or relations.other_draws(function, probes, observation.outputs, expected, arguments,
                                      NAMES.get(function, ())))
    found = found or relations.by_inputs(probes, passing, observation.outputs, expected, arguments, names)
    if found is not None:
        general = relations.describe(function, module_file, replace(found, words=found.general)) if found.general \
            else ""
        return FirstStep(function, probes[0], relations.describe(function, module_file, found), claim=found.claim,
                         general=general)
    return _outputs_that_differ(function, probes, observation, module_file)


def _outputs_that_differ(function: str, probes: list[str], observation: Any, module_file: str) -> FirstStep | None:
    """Which of ``function``'s named result arrays differ, when the others are right on every deviating probe."""
    outputs = NAMES.get(function, ())
    differing: set[int] = set()
    for probe in probes:
        mine, want = observation.outputs.get(probe), _as_tuple(golden(probe))
        if not isinstance(mine, tuple) or len(mine) != len(want) or len(want) != len(outputs):
            return None
        differing |= {i for i, (a, b) in enumerate(zip(mine, want, strict=True))
                      if not (a.shape == b.shape and a.dtype == b.dtype and _same(a, b))}
    if not differing or 2 * len(differing) > len(outputs):
        # Nothing (a dtype ...), or most outputs differ: the few that agree may do so by chance (a bias whose
        # gradient is always 0 stays right in a training loop that is wrong throughout), no output to point at.
        return None
    wrong = _listed([outputs[i] for i in sorted(differing)])
    right = _listed([name for i, name in enumerate(outputs) if i not in differing])
    one, rest = len(differing) == 1, len(outputs) - len(differing) == 1
    return FirstStep(function, probes[0], f"Diagnosis (the output that differs): on every fixed input where your "
                     f"{function}() in {module_file} goes wrong, of the arrays it returns {right} "
                     f"{'is' if rest else 'are'} right and {wrong} {'differs' if one else 'differ'}: the mistake lies "
                     f"in how {wrong} {'is' if one else 'are'} computed.")


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _relation(function: str, probes: list[str], observation: Any, registry: Any) -> Any:
    """The one relation (``tests/relations.py``) of ``function``'s outputs to the right ones on ``probes``, or None."""
    from tests import relations

    return relations.relation(function, probes, observation.outputs, {p: _as_tuple(golden(p)) for p in probes},
                              lambda p: registry[p].arguments(), NAMES.get(function, ()))


def parameters(function: str) -> tuple[str, ...]:
    """The parameter names of ``function`` in the contract (``tests.kit.contract_function``), or () where unknown."""
    from tests.kit import contract_function

    node = contract_function(function)
    return () if node is None else tuple(a.arg for a in node.args.posonlyargs + node.args.args)


def _as_tuple(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)
