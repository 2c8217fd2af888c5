"""The student's loop stays cheap: what the graded suite's plugin does to keep a run's CPU time down (issue 33.4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader.curriculum import ROOT

# After numpy's first matrix product (OpenBLAS starts its threads by then): the threads of this process, and the
# thread variables of its environment.
PROBE = """
import json, os, sys
{imports}
import numpy
a = numpy.ones((300, 300))
for _ in range(20):
    a @ a
print(json.dumps({{"threads": len(os.listdir("/proc/self/task")),
                  "environment": {{k: v for k, v in os.environ.items() if k.endswith("_NUM_THREADS")}}}}))
"""


def _probe(imports: str, **environment: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")} | environment
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports)], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="counts threads in /proc on a machine where BLAS would start several")
def test_the_plugin_puts_numpys_blas_on_one_thread_and_leaves_the_environment_as_it_was():
    assert _probe("")["threads"] > 1, "numpy alone starts BLAS threads here: the check below can see them"
    seen = _probe("import tests.plugin")
    assert seen == {"threads": 1, "environment": {}}  # nothing this process starts inherits the setting
    # A user's own setting is theirs.
    assert _probe("import tests.plugin", OPENBLAS_NUM_THREADS="2") == {
        "threads": 2, "environment": {"OPENBLAS_NUM_THREADS": "2"}}


def test_a_call_through_the_kit_reads_the_signature_and_imports_once(monkeypatch):
    """Each kit call labels its arguments by the function's signature: read once per function, not per call.

    The function the kit calls is the student's under the suite's own wrappers (the budget, the reach recorder),
    which ``inspect.signature`` looks through; and a module imported already is not imported again under a budget.
    """
    import inspect

    import numpy as np

    from tests import kit as kit_module

    implementation = kit_module.LocalImplementation(ROOT / "solutions", call_seconds=kit_module.CALL_BUDGET)
    kit = kit_module.Kit(implementation, "softmax")
    x = np.arange(12.0).reshape(3, 4)
    kit.softmax(x)  # imports softmax.py, under its budget
    asked, budgets = [], []
    real_signature, real_budget = inspect.signature, kit_module.call_budget
    monkeypatch.setattr(inspect, "signature", lambda f, *a, **k: asked.append(f) or real_signature(f, *a, **k))
    monkeypatch.setattr(kit_module, "call_budget", lambda what, s: budgets.append(what) or real_budget(what, s))
    for _ in range(3):
        kit.softmax(x, axis=0)
    assert asked == []
    assert budgets == ["softmax()"] * 3  # each call under its budget; no import
    assert kit_module._labelled_arguments(implementation.function("softmax", "softmax"), (x,), {"axis": 0}) == {
        "x": x, "axis": 0}


def test_a_wrapper_of_the_students_own_is_still_asked_for_its_signature():
    """Only the suite's wrappers are looked through: a student's decorator may change the signature."""
    import functools
    import inspect

    from tests import kit as kit_module
    from tests.reach import kit_wrapper

    def softmax(x, axis=-1):
        return x

    @functools.wraps(softmax)
    def decorated(*args, **kwargs):
        return softmax(*args, **kwargs)

    decorated.__signature__ = inspect.Signature([inspect.Parameter("logits", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    ours = kit_wrapper(functools.wraps(decorated)(lambda *a, **k: decorated(*a, **k)))
    assert kit_module._labelled_arguments(ours, (1,), {}) == {"logits": 1}
    assert kit_module._labelled_arguments(kit_wrapper(functools.wraps(softmax)(lambda *a: 0)), (1, 2), {}) == {
        "x": 1, "axis": 2}


def test_a_measured_call_runs_torch_on_one_thread(monkeypatch):
    """torch's own threads spin beside the work: a correct torch backward was told a numerical estimate under load."""
    import sys
    import types

    from tests import effort

    threads = [2]
    fake = types.SimpleNamespace(get_num_threads=lambda: threads[0],
                                 set_num_threads=lambda n: threads.__setitem__(0, n))
    monkeypatch.setitem(sys.modules, "torch", fake)
    result, seconds = effort._limited(lambda: threads[0], None)
    assert result == 1 and threads == [1] and seconds >= 0
