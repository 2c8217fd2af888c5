"""Write the fingerprints of the known mistakes, for the students' diagnosis.

Usage::

    python -m grader.authoring.fingerprints           # rewrite tests/data/fingerprints.npz
    python -m grader.authoring.fingerprints --check   # exit 1 if the file is out of date

Every mutant of the catalogue (``grader/mutants/``) is planted in a copy of
``solutions/`` and its exercise's probes (the seeded inputs declared in the
graded test files) are run through it. Where an output differs from the
golden one, or the call raises, it becomes part of the mutant's fingerprint.
``tests/diagnosis.py`` reads the file; see there for the format. Rerun this
after changing the catalogue, the probes or the golden values.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import Mutant, apply, load_catalogue
from tests.diagnosis import (
    DIFFER_ATOL,
    DIFFER_RTOL,
    FINGERPRINT_FILE,
    RAISED,
    NotWrittenYet,
    call_quietly,
    fingerprint_key,
    same_outputs,
)
from tests.kit import LocalImplementation
from tests.probes import golden, load_all_probes

FORMAT = 1


def exercise_probes(exercise: str) -> list[str]:
    """The names of the probes of ``exercise``'s functions, sorted."""
    functions = set(load_curriculum().exercise(exercise).functions)
    return sorted(name for name, entry in load_all_probes().items() if entry.function in functions)


def fingerprint(mutant: Mutant, workdir: Path) -> dict[str, tuple[np.ndarray, ...] | None]:
    """The probe outputs of ``mutant`` that differ from the golden ones (``None``: it raised)."""
    implementation = LocalImplementation(apply(mutant, workdir / mutant.id))
    registry = load_all_probes()
    outputs: dict[str, tuple[np.ndarray, ...] | None] = {}
    for name in exercise_probes(mutant.exercise):
        entry = registry[name]
        try:
            result = call_quietly(entry.call, (implementation.function(mutant.exercise, entry.function),), {})
        except NotWrittenYet:
            result = RAISED
        if result is RAISED:
            outputs[name] = RAISED
            continue
        expected = golden(name)
        expected = expected if isinstance(expected, tuple) else (expected,)
        if any(array.dtype == object for array in result):
            continue  # not an array of numbers: cannot be stored without pickle, and no student output equals it
        if not same_outputs(result, expected, rtol=DIFFER_RTOL, atol=DIFFER_ATOL):
            outputs[name] = result
    return outputs


def compute() -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and the arrays of the fingerprint file, from the current catalogue."""
    mistakes = []
    arrays: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-fingerprints-") as workdir:
        for mutant in load_catalogue():
            try:
                outputs = fingerprint(mutant, Path(workdir))
            except ValueError as error:  # its `replace` text is gone; grader/tests reports it too
                print(f"skipped: {error}", file=sys.stderr)
                continue
            probes: dict[str, int | None] = {}
            for name, result in outputs.items():
                probes[name] = None if result is RAISED else len(result)
                for index, array in enumerate(result or ()):
                    arrays[fingerprint_key(mutant.id, name, index)] = array
            mistakes.append({"id": mutant.id, "exercise": mutant.exercise, "description": mutant.description,
                             "hint": mutant.hint, "probes": probes})
    return {"format": FORMAT, "mistakes": mistakes}, arrays


def serialise(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """The fingerprint file's bytes: arrays plus the metadata as a 0-d unicode array (no pickles)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, meta=np.array(json.dumps(meta, indent=1, sort_keys=True)), **arrays)
    return buffer.getvalue()


def is_current(path: Path = FINGERPRINT_FILE) -> bool:
    """True when ``path`` holds the fingerprints of the current catalogue, probes and golden values."""
    if not path.is_file():
        return False
    meta, arrays = compute()
    with np.load(path, allow_pickle=False) as stored:
        if json.loads(str(stored["meta"][()])) != json.loads(json.dumps(meta)):
            return False
        if sorted(stored.files) != sorted([*arrays, "meta"]):
            return False
        # A tight tolerance rather than equality: the last bit of a float may differ between machines.
        return all(same_outputs((stored[key],), (value,), rtol=1e-9, atol=1e-12) for key, value in arrays.items())


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.fingerprints",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the file is current")
    args = parser.parse_args(argv)
    if args.check:
        if is_current():
            return 0
        print(f"{FINGERPRINT_FILE.relative_to(ROOT)} is out of date: run `python -m grader.authoring.fingerprints`")
        return 1
    meta, arrays = compute()
    FINGERPRINT_FILE.parent.mkdir(parents=True, exist_ok=True)
    FINGERPRINT_FILE.write_bytes(serialise(meta, arrays))
    hidden = [entry["id"] for entry in meta["mistakes"]
              if all(count is None for count in entry["probes"].values())]
    print(f"wrote {FINGERPRINT_FILE.relative_to(ROOT)}: {len(meta['mistakes'])} mistakes, "
          f"{len(meta['mistakes']) - len(hidden)} recognisable on the probes")
    if hidden:
        # Not an error: some mistakes (a missing input check, an in-place update) change no probe output.
        print("not recognisable (no probe output differs): " + ", ".join(hidden))
    return 0


if __name__ == "__main__":
    sys.exit(main())
