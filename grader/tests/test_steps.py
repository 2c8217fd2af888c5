"""The step whose output first differs: named when no known mistake explains a failure (tests/steps.py).

Each mistake below is written as a student would, in a copy of the reference, and is in no catalogue: the
failure must name the function and, for a pipeline, the step whose output first differs, with that step's
idea as the revisit line. The reference gets no step.
"""

from __future__ import annotations

import pytest

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants.report import run_tests
from grader.tests.test_families import plant
from tests.diagnosis import diagnose, diagnose_family, observe_everything
from tests.kit import LocalImplementation
from tests.probes import load_all_probes
from tests.steps import PIPELINES, first_step

MISTAKES = {
    # the accuracy where the evidence was retrieved averaged over every question
    "evaluate-retrieved-over-all": ("retrieval.py",
                                    '"accuracy_retrieved": float(np.mean(correct[hit])) if hit.any()',
                                    '"accuracy_retrieved": float(np.mean(correct & hit)) if hit.any()',
                                    "retrieval", "evaluate", "the accuracy where the evidence was retrieved",
                                    "accuracy_retrieved: the mean of correct over the questions whose evidence"),
    # ties broken by the right id first
    "bpe-tie-right-id-first": ("tokenization.py", "best = min(counts, key=lambda pair: (-counts[pair], pair))",
                               "best = min(counts, key=lambda pair: (-counts[pair], pair[1], pair[0]))",
                               "tokenization", "train_bpe", "the merges", "the first merge: count every pair"),
    # the score memory counted for the keys too (two (n, n) arrays)
    "cost-memory-doubled": ("tokenization.py", "return int(flops), int(n * n * itemsize)",
                            "return int(flops), int(2 * n * n * itemsize)", "tokenization", "attention_cost",
                            "the memory", "the memory: one (n, n) array of scores"),
    # the ReLU's gradient multiplied by its output rather than by its derivative
    "relu-times-its-output": ("negation.py", "grad_before = grad_hidden * (before > 0)",
                              "grad_before = grad_hidden * hidden", "negation", "pooled_gradients",
                              "the gradient through the ReLU to the hidden layer", "the ReLU passes the gradient"),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_mistake_no_catalogue_explains_is_told_its_first_step(name, tmp_path):
    file, replace, with_, exercise, function, stage, idea = MISTAKES[name]
    implementation = LocalImplementation(plant(tmp_path, file, replace, with_))
    assert diagnose(implementation, exercise) == [] and diagnose_family(implementation, exercise) is None
    step = first_step(implementation, [function], observe_everything(implementation))
    assert step is not None and step.function == function, step
    assert f"your {function}() in {file}" in step.text and f"the first step whose output differs is {stage}" \
        in step.text, step.text
    assert step.revisit.startswith(idea), step.revisit
    run = run_tests(ROOT / load_curriculum().exercise(exercise).test_file, implementation.path, tb="short")
    first = run.output.split("= FAILURES =", 1)[1].split("\n", 2)[2]
    assert first.startswith("Diagnosis (the step whose output first differs): "), first[:400]
    revisits = [line for line in first.split("\n_____")[0].splitlines() if line.strip().startswith("revisit:")]
    assert revisits and all(step.revisit in line for line in revisits), revisits


def test_the_reference_gets_no_step():
    implementation = LocalImplementation(ROOT / "solutions")
    observation = observe_everything(implementation)
    every = [f for e in load_curriculum().exercises for f in e.functions]
    assert first_step(implementation, every, observation) is None


def test_every_pipeline_names_outputs_its_probes_return():
    from tests.probes import golden

    registry = load_all_probes()
    for function, plan in PIPELINES.items():
        probes = [p for p, entry in registry.items() if entry.function == function and entry.rejects is None]
        assert probes, function
        for name in probes:
            stored = golden(name)
            stored = stored if isinstance(stored, tuple) else (stored,)
            parts = plan.derive(stored) if plan.derive is not None else stored
            assert len(parts) == len(plan.outputs), (function, name)


def test_every_declared_name_list_matches_what_its_probes_return():
    from tests.probes import golden
    from tests.steps import NAMES

    registry = load_all_probes()
    assert {"linear_backward", "init_model", "init_transformer_layer"} <= set(NAMES)
    for function, names in NAMES.items():
        probes = [p for p, entry in registry.items() if entry.function == function and entry.rejects is None]
        assert probes, function
        for name in probes:
            stored = golden(name)
            assert len(stored if isinstance(stored, tuple) else (stored,)) == len(names), (function, name)


# One relation of the called function's outputs to the right ones on every deviating probe (a scale, a sign) explains
# all that is wrong: it is named before any step inside the function, whose idea may be another (a blind round:
# pooled_gradients' grad_logits divided by n again, or with its sign flipped, was told the read-out's input).
_LOSS = '    loss, grad_logits = cross_entropy(hidden @ params["w_out"] + params["b_out"], target)'
RELATED = {
    "grad-logits-averaged-twice": (_LOSS, _LOSS + "\n    grad_logits = grad_logits / len(target)", "a scale"),
    "grad-logits-sign-flipped": (_LOSS, _LOSS + "\n    grad_logits = -grad_logits", "sign flip"),
}


@pytest.mark.parametrize("name", sorted(RELATED))
def test_a_relation_of_every_output_comes_before_a_step_inside(name, tmp_path):
    replace, with_, family = RELATED[name]
    implementation = LocalImplementation(plant(tmp_path, "negation.py", replace, with_))
    step = first_step(implementation, ["pooled_gradients"], observe_everything(implementation))
    assert step is not None and step.function == "pooled_gradients", step
    assert step.text.startswith(f"Diagnosis (a family of mistakes: {family}): "), step.text
    assert "the first step whose output differs" not in step.text and "ReLU's output" not in step.revisit, step
