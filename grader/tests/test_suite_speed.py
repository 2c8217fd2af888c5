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
