"""A failing test that met a signature that is not the API's is told so first (tests/api_signatures.py).

A blind round's mistakes: Adam with ``eps=1e-6`` was told its update formula, a blockwise attention with
``causal=True`` its online softmax, a rotary embedding with ``base=1000`` the rotation formula; a softmax_backward
whose ``axis`` had no default was told (graded) that it handles a fixed number of axes.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

from grader.curriculum import ROOT, load
from grader.mutants.report import run_tests
from grader.sandbox.signatures import ShownDefault, signature_from
from grader.tests.cheats import plant
from grader.tests.waiting import HANG_SECONDS
from tests import api_signatures
from tests.kit import LocalImplementation

# An API function with one default changed: appended to a copy of the reference (a later def wins), the call
# passed on to the reference's own function, kept under another name.
_CHANGED = '''
_api_{name} = {name}


def {name}({head}):
    return _api_{name}({call})
'''


def _changed(name: str, module: str, parameter: str, value: str) -> dict[str, str]:
    reference = getattr(__import__(f"solutions.{module}", fromlist=[name]), name)
    parameters = inspect.signature(reference).parameters.values()
    head = ", ".join(p.name if p.default is inspect.Parameter.empty else
                     f"{p.name}={value if p.name == parameter else repr(p.default)}" for p in parameters)
    call = ", ".join(f"{p.name}={p.name}" for p in parameters)
    return {module: _CHANGED.format(name=name, head=head, call=call)}


@pytest.mark.parametrize(("name", "module", "parameter", "value", "api"), [
    ("adam_step", "training", "eps", "1e-06", "eps=1e-08"),
    ("rotary_embedding", "positional", "base", "1000.0", "base=10000.0"),
    ("blockwise_attention", "decoding", "causal", "True", "causal=False"),  # a raise: causal needs n_q = n_k
])
def test_a_changed_default_is_said_first(name, module, parameter, value, api, tmp_path):
    folder = plant(tmp_path / name, _changed(name, module, parameter, value))
    test_file = load().exercise(module).test_file
    run = run_tests(ROOT / test_file, folder, tb="short")
    assert run.failed, f"{name} with {parameter}={value} passed {test_file}"
    said = f"First: your {name} has the default {parameter}={value}; the API's is {api}."
    assert said in run.output, run.output[-3000:]
    # The revisit line names the API's signature first, then the check's own (a hidden test shows it alone).
    assert f"revisit:  first the API's signature, parameters and defaults: {name}(" in run.output
    assert "; then, if it still fails: " in run.output


def test_the_reference_s_own_run_names_no_default():
    run = run_tests(ROOT / "tests/test_09_training.py", ROOT / "solutions", tb="short")
    assert not run.failed and "has the default" not in run.output


def test_the_recorded_signatures_are_the_reference_s():
    table = api_signatures.table()
    reference = LocalImplementation(ROOT / "solutions")
    for exercise in load().exercises:
        for name in exercise.functions:
            signature = inspect.signature(reference.function(exercise.name, name))
            parameters = list(signature.parameters.values())
            assert [entry[:2] for entry in table[name]] == [[p.name, int(p.kind)] for p in parameters], name
            # The reference is the API: no difference (combine_masks' *masks was once "not among them").
            assert api_signatures._parameters_differ(signature, table[name]) == "", name
            for (_, _, default), parameter in zip(table[name], parameters, strict=True):
                assert (default == api_signatures.EMPTY) == (parameter.default is inspect.Parameter.empty), name
                if default != api_signatures.EMPTY:
                    assert api_signatures.same(parameter.default, default), (name, parameter.name)
    assert {name: default for name, _, default in table["adam_step"]}["eps"] == 1e-8
    assert {name: default for name, _, default in table["blockwise_attention"]}["causal"] is False


@pytest.mark.parametrize(("name", "module", "head", "call", "said"), [
    # axis made required: graded, a family diagnosis read the probes' raises as "a fixed number of axes"
    ("softmax_backward", "backward", "grad_weights, weights, axis", "grad_weights, weights, axis",
     "axis has no default; the API's is axis=-1"),
    ("linear", "projections", "x, weight, *, bias=None", "x, weight, bias", "bias is keyword-only"),
    ("blockwise_attention", "decoding", "q, k, v, block_size, **options",
     "q, k, v, block_size, options.get('causal_mask', False)", "causal is not among them"),
    ("scaled_dot_product_attention", "attention", "q, v, k, mask=None", "q, k, v, mask",
     "they come in another order: (q, v, k, mask)"),
])
def test_parameters_that_are_not_the_api_s_are_said_first(name, module, head, call, said, tmp_path):
    folder = plant(tmp_path / name, {module: _CHANGED.format(name=name, head=head, call=call)})
    run = run_tests(ROOT / load().exercise(module).test_file, folder, tb="short")
    assert run.failed and f"First: the parameters of your {name} are not the API's: {said}" in run.output, \
        run.output[-3000:]


@pytest.mark.parametrize(("head", "call"), [
    ("x, axis=-1, temperature=1.0", "x, axis"),  # a parameter added with a default: every API call binds alike
    ("x, axis=-1, *rest, **options", "x, axis"),
])
def test_a_parameter_added_with_a_default_is_not_a_difference(head, call, tmp_path):
    # A softmax without the max shift (a catalogued mistake) with a parameter added: its diagnosis stays.
    code = _CHANGED.format(name="softmax", head=head, call=call).replace("return _api_softmax(", "return _unshifted(")
    code += ("\n\ndef _unshifted(x, axis=-1):\n    e = np.exp(np.asarray(x, dtype=float))\n"
             "    return e / e.sum(axis=axis, keepdims=True)\n")
    run = run_tests(ROOT / "tests/test_01_softmax.py", plant(tmp_path / "added", {"softmax": code}), tb="short")
    assert run.failed and "are not the API's" not in run.output and "has the default" not in run.output


def test_code_that_answers_otherwise_every_time_is_not_told_its_default(tmp_path):
    # training=1 is True; its answers differ from call to call as it draws from numpy's global generator.
    code = _CHANGED.format(name="dropout", head="x, rate, rng, training=1",
                           call="x, rate, np.random.default_rng(np.random.randint(1 << 30)), training")
    run = run_tests(ROOT / "tests/test_07_layer.py", plant(tmp_path / "global", {"layer": code}), tb="short")
    assert run.failed and "has the default" not in run.output, run.output[-3000:]


@pytest.mark.parametrize(("default", "api", "same"), [
    (16, 16, True), (16.0, 16, True), (1e-6, 1e-8, False), (True, True, True), (1, True, False),
    (True, 1, False), (False, None, False), (None, None, True), ("relu", "relu", True), ("gelu", "relu", False),
    (np.float64, {"dtype": "float64"}, True), (float, {"dtype": "float64"}, True),
    (np.float32, {"dtype": "float64"}, False), ("float64", {"dtype": "float64"}, True), (3, "3", False),
])
def test_same_tells_a_changed_default(default, api, same):
    assert api_signatures.same(default, api) is same


def test_graded_the_lead_is_the_same(tmp_path):
    # Graded, the student's code runs in its worker: the signature comes from there as data (the proxies' own is
    # the API's), and the lead reads as in the student's own run.
    plant(tmp_path / "class" / "eps", _changed("adam_step", "training", "eps", "1e-06"))
    subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
                    "--jobs", "1", "--part", "2"], cwd=ROOT, check=True, capture_output=True, timeout=HANG_SECONDS)
    feedback = (tmp_path / "out" / "eps" / "feedback.md").read_text(encoding="utf-8")
    assert "First: your adam_step has the default eps=1e-06; the API's is eps=1e-08." in feedback, feedback[:3000]


@pytest.mark.parametrize("described", [
    None, "x", [["a", 1]], [["a", 9, None]], [["not a name", 1, None]], [["a", 1, {"empty": True, "x": 1}]],
    [["a", 1, [1, 2]]], [["a", 1, {"code": "import os"}]], [["a", 1, 1.0], ["b", 1, {"empty": True}]],
    [["a", 1, None], ["a", 1, None]], [["a", True, None]], [["x", 1, None]] * 65,
])
def test_a_described_signature_that_is_not_one_is_none(described):
    # What a worker sends is untrusted: anything but [[name, kind, default], ...] in a valid order gives no
    # signature, and so no claim (a required parameter after one with a default is not a signature either).
    assert signature_from(described) is None


def test_a_described_signature_reads_back():
    signature = signature_from([["x", 1, {"empty": True}], ["eps", 1, 1e-06], ["dtype", 3, {"dtype": "float32"}],
                                ["how", 3, {"repr": "<object at 0x1>"}], ["name", 3, "relu"], ["on", 3, True]])
    defaults = {name: p.default for name, p in signature.parameters.items()}
    assert defaults["x"] is inspect.Parameter.empty and defaults["eps"] == 1e-06 and defaults["dtype"] is np.float32
    assert isinstance(defaults["how"], ShownDefault) and repr(defaults["how"]) == "<object at 0x1>"
    assert defaults["name"] == "relu" and defaults["on"] is True


def test_a_default_is_written_short_whatever_its_repr():
    class Long:
        def __repr__(self) -> str:
            return "x" * 1_000_000

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert len(api_signatures._plain(Long(), None)) <= 80
    assert api_signatures._plain(Broken(), None) == "<a default without a repr>"
    assert api_signatures._plain(np.float32, {"dtype": "float32"}) == "np.float32"
