"""A student's worker describing its function's signature never has numpy parse its text in the grading process.

When a test fails, the kit asks the student's worker for the failing function's signature (``tests.api_signatures``:
a default that is not the API's); a default that is a numpy scalar type travels as ``{"dtype": name}`` and the
grading side read it back with ``np.dtype(name)``. Student code can make its worker describe any text
(``codec.described_default`` is the worker's, in the student's process), and numpy's dtype parser dies of a
division by zero on ``"m8[Y/0]"``: SIGFPE in the grading process, so a submission with a wrong ``softmax`` had its
row "not graded: the grading process was killed by signal 8" on every run (the run exits non-zero, the student
never gets the zero). The name is now looked up among numpy's own scalar types' names, never parsed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from grader.curriculum import ROOT
from grader.sandbox.signatures import ShownDefault, signature_from
from grader.tests.test_trust import copy_reference
from grader.tests.waiting import HANG_SECONDS

# The student's softmax module: a worker that describes every default as a dtype numpy cannot parse.
DESCRIBES = '''
import sys as _sys
_sys.modules["__main__"].codec.described_default = lambda value, empty: {"dtype": "m8[Y/0]"}
'''
READS_IT = """
import sys
import numpy as np
from pathlib import Path
from grader.sandbox.proxy import IsolatedImplementation, Limits
impl = IsolatedImplementation(Path(sys.argv[1]), limits=Limits(call_timeout=5))
try:
    assert impl.function("softmax", "softmax")(np.zeros(2)).shape == (2,)
    print(impl.signature_of("softmax", "softmax"))
finally:
    impl.close()
"""


READS_TEXTS = """
from grader.sandbox.signatures import ShownDefault, signature_from
for text in ("m8[Y/0]", "timedelta64[Y/0]", "i4,", "(2,)f8"):
    described = signature_from([["axis", 1, {"dtype": text}]])
    assert described is not None and isinstance(described.parameters["axis"].default, ShownDefault), text
print("shown")
"""


def test_a_dtype_text_numpy_cannot_parse_is_shown_not_parsed() -> None:
    found = signature_from([["x", 1, {"empty": True}], ["dtype", 1, {"dtype": "float32"}]])
    assert found is not None and found.parameters["dtype"].default is np.float32  # a real one still reads back
    assert isinstance(signature_from([["axis", 1, {"dtype": "i4,"}]]).parameters["axis"].default, ShownDefault)
    # In a process of its own: parsed, the first text kills the process that reads it (SIGFPE).
    done = subprocess.run([sys.executable, "-c", READS_TEXTS], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_SECONDS, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "shown", (done.returncode, done.stderr[-2000:])


def test_a_worker_that_describes_such_a_dtype_leaves_the_grading_process_running(tmp_path: Path) -> None:
    folder = copy_reference(tmp_path / "student", softmax=DESCRIBES)
    done = subprocess.run([sys.executable, "-c", READS_IT, str(folder)], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_SECONDS, check=False)
    assert done.returncode == 0, f"the grading process ended with {done.returncode}: {done.stderr[-2000:]}"
    assert "m8[Y/0]" in done.stdout
