"""Write the golden outputs of every probe from the reference solutions.

Usage::

    python -m grader.authoring.golden           # rewrite tests/data/golden.npz
    python -m grader.authoring.golden --check   # exit 1 if the file is out of date

The probes (seeded inputs) are declared in the graded test files. Their
outputs under ``solutions/`` are the expected values that tests cannot
derive from a property. Beside them, the API's signatures (``tests/api_signatures.py``),
read from the reference's: a failing test that met a function whose parameters or
defaults are not the API's is told so first.
"""

from __future__ import annotations

import argparse
import io
import json
import sys

import numpy as np

from grader.curriculum import ROOT, load
from tests import api_signatures
from tests.kit import LocalImplementation
from tests.probes import GOLDEN_FILE, KIND_SUFFIX, as_arrays, golden_keys, load_all_probes, result_kind


def compute(impl_dir: str = "solutions") -> dict[str, np.ndarray]:
    """Run every probe through the implementation in ``impl_dir``."""
    implementation = LocalImplementation(ROOT / impl_dir)
    values: dict[str, np.ndarray] = {}
    for name, entry in sorted(load_all_probes().items()):
        result = entry.call(implementation.function("", entry.function))
        arrays = as_arrays(result)
        values.update(zip(golden_keys(name, len(arrays)), arrays, strict=True))
        values[name + KIND_SUFFIX] = np.array(result_kind(result))
    functions = {exercise.name: list(exercise.functions) for exercise in load().exercises}
    signatures = api_signatures.recorded(implementation, functions)
    values[api_signatures.KEY] = np.array(json.dumps(signatures, sort_keys=True))
    return values


def serialise(values: dict[str, np.ndarray]) -> bytes:
    """The golden file's bytes (deterministic for the same values)."""
    buffer = io.BytesIO()
    np.savez(buffer, **values)
    return buffer.getvalue()


# Floats are current to these tolerances, not to the bit: another machine's BLAS kernels (an AVX-512 machine, one
# with FMA, one without) change the last bits. A parameter whose gradient is zero in theory (the key bias: softmax
# ignores a shift shared by all keys) holds rounding noise, which Adam divides by its eps: after a training probe's
# three steps it is about 1e-10 and differs between machines by up to 1e-9 (seen: its sign flipped, 3.7e-10 here
# and 9.2e-10 in a mutant's fingerprint), so the absolute tolerance is 1e-8. Float32 values: 16 of float32's eps,
# relative to the largest value. The tests compare with the golden values at a relative 1e-9 or looser (float32:
# to float32's precision); a stale file differs by far more.
CURRENT_RTOL, CURRENT_ATOL = 1e-10, 1e-8


def same_to_the_machine(stored: np.ndarray, value: np.ndarray, rtol: float = CURRENT_RTOL,
                        atol: float = CURRENT_ATOL) -> bool:
    """Whether ``value`` computed here is ``stored``, whatever the machine's BLAS kernels.

    Same dtype and shape; floats to ``rtol`` and ``atol`` (a lower precision: to 16 of its eps); anything else
    exactly.
    """
    if stored.dtype != value.dtype or stored.shape != value.shape:
        return False
    if value.dtype.kind not in "fc":
        return bool(np.array_equal(stored, value))  # strings, integers, booleans: exactly
    low = 16 * float(np.finfo(value.dtype).eps)
    if low > rtol:
        with np.errstate(all="ignore"):
            finite = np.abs(value[np.isfinite(value)])
        rtol, atol = low, max(atol, low * (float(finite.max()) if finite.size else 0.0))
    return bool(np.allclose(stored, value, rtol=rtol, atol=atol, equal_nan=True))


def is_current() -> bool:
    """True when the golden file holds the reference's current outputs (floats to :data:`CURRENT_RTOL`)."""
    if not GOLDEN_FILE.is_file():
        return False
    with np.load(GOLDEN_FILE, allow_pickle=False) as stored:
        current = compute()
        if sorted(stored.files) != sorted(current):
            return False
        return all(same_to_the_machine(stored[key], value) for key, value in current.items())


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.golden", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the file is current")
    args = parser.parse_args(argv)
    if args.check:
        if is_current():
            return 0
        print(f"{GOLDEN_FILE.relative_to(ROOT)} is out of date: run `python -m grader.authoring.golden`")
        return 1
    if is_current():  # np.savez stamps the time: rewrite only when values change
        print(f"{GOLDEN_FILE.relative_to(ROOT)} is already current")
        return 0
    GOLDEN_FILE.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN_FILE.write_bytes(serialise(compute()))
    print(f"wrote {GOLDEN_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
