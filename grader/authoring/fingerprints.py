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
import itertools
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import Mutant, apply, load_catalogue, load_families
from tests.diagnosis import (
    DIFFER_ATOL,
    DIFFER_RTOL,
    FINGERPRINT_FILE,
    PAIR_SKETCHES,
    RAISED,
    SKETCH_SIZE,
    NotWrittenYet,
    call_quietly,
    fingerprint_key,
    reference_calls,
    same_outputs,
    sketch,
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
    return deviating_outputs(apply(mutant, workdir / mutant.id), mutant.exercise)


def deviating_outputs(folder: Path, exercise: str) -> dict[str, tuple[np.ndarray, ...] | None]:
    """The probe outputs of ``exercise``'s functions in ``folder`` that differ from the golden ones."""
    implementation = LocalImplementation(folder)
    registry = load_all_probes()
    outputs: dict[str, tuple[np.ndarray, ...] | None] = {}
    for name in exercise_probes(exercise):
        entry = registry[name]
        try:
            result = call_quietly(entry.call, (implementation.function(exercise, entry.function),), {})
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
        pairs = pair_fingerprints(mistakes, arrays, Path(workdir))
        families = family_fingerprints(arrays, Path(workdir))
    calls = reference_calls(LocalImplementation(ROOT / "solutions"))  # who calls whom, for the blame
    return {"format": FORMAT, "mistakes": mistakes, "calls": calls, "pairs": pairs, "families": families}, arrays


def family_fingerprints(arrays: dict[str, np.ndarray], workdir: Path) -> list[dict]:
    """The probe outputs of every family transformation (``grader/mutants/families.toml``), as for a mutant.

    Stored under the family's id (``family-...``) in ``arrays``; the metadata keeps its kind, its
    description and its revisit line. A transformation that changes no probe output is left out.
    """
    families = []
    for family in load_families():
        outputs = fingerprint(family, workdir)  # a `replace` text that is gone raises: the file must be fixed
        if not any(result is not RAISED for result in outputs.values()):
            print(f"family {family.id}: changes no probe output (or only raises); left out", file=sys.stderr)
            continue
        probes: dict[str, int | None] = {}
        for name, result in outputs.items():
            probes[name] = None if result is RAISED else len(result)
            for index, array in enumerate(result or ()):
                arrays[fingerprint_key(family.id, name, index)] = array
        families.append({"id": family.id, "exercise": family.exercise, "family": family.family,
                         "description": family.description, "revisit": family.revisit, "probes": probes})
    return families


def pair_fingerprints(mistakes: list[dict], arrays: dict[str, np.ndarray], workdir: Path) -> list[dict]:
    """Two mistakes of one exercise planted together, where they change the same behaviour output.

    Together they give outputs neither gives alone, so the single fingerprints cannot recognise the
    pair. Stored as sketches (:func:`tests.diagnosis.sketch`), a few numbers per array, as the rows of
    one array ``arrays[PAIR_SKETCHES]``; the metadata lists each pair's probes with the shapes, dtypes
    and row numbers (or the text of a bad-input outcome).
    """
    registry = load_all_probes()
    catalogue = {mutant.id: mutant for mutant in load_catalogue()}
    by_exercise: dict[str, list[dict]] = {}
    for entry in mistakes:
        by_exercise.setdefault(entry["exercise"], []).append(entry)
    pairs = []
    rows: list[np.ndarray] = []
    for exercise, entries in by_exercise.items():
        for first, second in itertools.combinations(entries, 2):
            behaviour = {p for p in first["probes"] if registry[p].rejects is None}
            if not behaviour & {p for p in second["probes"] if registry[p].rejects is None}:
                continue  # apart, the two single fingerprints recognise the pair already
            a, b = catalogue[first["id"]], catalogue[second["id"]]
            target = workdir / f"{a.id}+{b.id}"
            try:
                apply(a, target)
            except ValueError:
                continue
            path = target / b.file
            source = path.read_text(encoding="utf-8")
            if source.count(b.replace) != b.count:
                continue  # the two edits overlap: no student makes both in this form
            path.write_text(source.replace(b.replace, b.with_), encoding="utf-8")
            outputs = deviating_outputs(target, exercise)
            singles = [{name: _stored(arrays, entry["id"], name, count) for name, count in entry["probes"].items()}
                       for entry in (first, second)]
            if any(outputs.keys() == single.keys() and all(_equal(outputs[n], single[n]) for n in outputs)
                   for single in singles):
                continue  # one of them hides the other: its own fingerprint says it all
            probes: dict[str, list | None] = {}
            for name, result in outputs.items():
                if result is RAISED:
                    probes[name] = None
                    continue
                probes[name] = []
                for array in result:
                    sketched = sketch(array)
                    if sketched.dtype.kind in "US":  # the outcome of a bad-input probe: kept as text
                        probes[name].append([list(array.shape), str(array.dtype), str(sketched[()])])
                    else:
                        probes[name].append([list(array.shape), str(array.dtype), len(rows)])
                        rows.append(sketched)
            pairs.append({"ids": [a.id, b.id], "exercise": exercise, "probes": probes})
    # One array for every sketch (reading thousands of small arrays from the file is slow).
    arrays[PAIR_SKETCHES] = np.array(rows) if rows else np.zeros((0, SKETCH_SIZE + 1))
    return pairs


def _stored(arrays: dict[str, np.ndarray], mistake_id: str, name: str, count: int | None):
    return RAISED if count is None else tuple(arrays[fingerprint_key(mistake_id, name, i)] for i in range(count))


def _equal(a, b) -> bool:
    if a is RAISED or b is RAISED:
        return a is b
    return same_outputs(a, b, rtol=1e-9, atol=1e-12)


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
