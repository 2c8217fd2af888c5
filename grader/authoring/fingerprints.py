"""Write the fingerprints of the known mistakes, for the students' diagnosis.

Usage::

    python -m grader.authoring.fingerprints                  # rewrite tests/data/fingerprints.npz
    python -m grader.authoring.fingerprints --check          # exit 1 if the file is out of date (seconds)
    python -m grader.authoring.fingerprints --check --full   # the same, recomputing every fingerprint (minutes)

Every mutant of the catalogue (``grader/mutants/``) is planted in a copy of
``solutions/`` and its exercise's probes (the seeded inputs declared in the
graded test files) are run through it. Where an output differs from the
golden one, or the call raises, it becomes part of the mutant's fingerprint.
``tests/diagnosis.py`` reads the file; see there for the format. Rerun this
after changing the catalogue, the probes or the golden values.

Recomputing every fingerprint costs 25 CPU-s (over 1,000 s of wall time on a
busy CI machine), so the check does not: beside the file lies the digest of
everything it was computed from (``fingerprints.inputs.json``: the reference,
the catalogue and families as loaded, the probes' inputs, the golden values,
the code that computes them), and the check compares that digest, then
recomputes a sample of the fingerprints (:data:`SAMPLE` mutants, a family,
the list of mistakes and the reference's call graph) against the file. A
changed input or a file edited by hand fails it; ``--full`` recomputes
everything.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import itertools
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from grader.authoring.golden import CURRENT_ATOL as GOLDEN_ATOL
from grader.authoring.golden import same_to_the_machine
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
# Beside the fingerprint file: the digest of what it was computed from (see the module's docstring).
INPUTS_FILE = FINGERPRINT_FILE.with_name("fingerprints.inputs.json")
# The code whose change can change a fingerprint (text files: line ends are normalised).
CODE_FILES = ("grader/authoring/fingerprints.py", "grader/mutants/__init__.py", "tests/diagnosis.py",
              "tests/probes.py", "tests/crash.py", "grader/curriculum.toml")
# Mutants recomputed by the quick check, besides the catalogue's first and last (about 0.1 CPU-s each).
SAMPLE = 8


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


def store_outputs(owner: str, outputs: dict, arrays: dict[str, np.ndarray]) -> dict[str, int | None]:
    """Put a mutant's or family's probe outputs into ``arrays``; per probe, how many arrays it gave (None: raised)."""
    probes: dict[str, int | None] = {}
    for name, result in outputs.items():
        probes[name] = None if result is RAISED else len(result)
        for index, array in enumerate(result or ()):
            arrays[fingerprint_key(owner, name, index)] = array
    return probes


def mistake_fingerprints(mutants: Iterable[Mutant], workdir: Path, skipped: Callable[[Mutant, ValueError], Any],
                         ) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Each mutant's entry of the fingerprint file and its stored outputs (a mutant that cannot apply: ``skipped``)."""
    mistakes: list[dict] = []
    arrays: dict[str, np.ndarray] = {}
    for mutant in mutants:
        try:
            outputs = fingerprint(mutant, workdir)
        except ValueError as error:  # its `replace` text is not in the reference
            skipped(mutant, error)
            continue
        mistakes.append({"id": mutant.id, "exercise": mutant.exercise, "description": mutant.description,
                         "hint": mutant.hint, "probes": store_outputs(mutant.id, outputs, arrays)})
    return mistakes, arrays


def compute() -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and the arrays of the fingerprint file, from the current catalogue."""
    with tempfile.TemporaryDirectory(prefix="attention-kit-fingerprints-") as workdir:
        # a mutant whose `replace` text is gone: grader/tests reports it too
        mistakes, arrays = mistake_fingerprints(load_catalogue(), Path(workdir),
                                                lambda _mutant, error: print(f"skipped: {error}", file=sys.stderr))
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
        families.append({"id": family.id, "exercise": family.exercise, "family": family.family,
                         "description": family.description, "revisit": family.revisit,
                         "probes": store_outputs(family.id, outputs, arrays)})
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


def _text_digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"\0{path.relative_to(ROOT).as_posix()}\0".encode())
        digest.update(path.read_bytes().replace(b"\r\n", b"\n"))
    return digest.hexdigest()


# The probes' arguments are hashed to 2**-20 of each array's largest value (about 6 digits): inputs built with
# matrix products (QR, @) differ in their last bits between machines whose BLAS picks other kernels (an AVX-512
# machine and one without), and a value that is zero on one may be 1e-17 on another; neither is a change of the
# probes.
_KEPT_BITS = 20


def _float_bits(values: np.ndarray) -> np.ndarray:
    """``values`` (float or complex) as int64: a common exponent, then each value in steps of 2**-20 of it."""
    parts = np.stack([values.real, values.imag]) if values.dtype.kind == "c" else values[None]
    parts = parts.astype(np.float64)
    finite = np.isfinite(parts)
    scale = float(np.max(np.abs(parts[finite]))) if finite.any() else 0.0
    exponent = int(np.frexp(scale)[1]) if scale > 0 else 0
    with np.errstate(all="ignore"):
        kept = np.where(finite, np.round(np.where(finite, parts, 0.0) * 2.0 ** (_KEPT_BITS - exponent)), 0)
    special = np.where(np.isnan(parts), 1, np.where(np.isposinf(parts), 2, np.where(np.isneginf(parts), 3, 0)))
    return np.concatenate([[exponent], kept.astype(np.int64).ravel(), special.astype(np.int64).ravel()])


def _value_digest(digest: Any, value: object) -> None:
    """Feed a probe's arguments (arrays, numbers, strings, nested tuples, lists and dicts) to ``digest``."""
    if isinstance(value, np.ndarray):
        digest.update(f"a{value.shape}{value.dtype.str}".encode())
        if value.dtype == object:
            digest.update(repr(value.tolist()).encode())
        elif value.dtype.kind in "fc":
            digest.update(_float_bits(value).tobytes())
        else:
            digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (float, np.floating)):
        digest.update(f"{type(value).__name__}:".encode() + _float_bits(np.asarray(value)).tobytes())
    elif isinstance(value, (tuple, list)):
        digest.update(f"{type(value).__name__}{len(value)}".encode())
        for item in value:
            _value_digest(digest, item)
    elif isinstance(value, dict):
        digest.update(f"d{len(value)}".encode())
        for key in sorted(value, key=repr):
            _value_digest(digest, key)
            _value_digest(digest, value[key])
    elif isinstance(value, np.random.Generator):  # its state, not its repr (which holds an address)
        digest.update(b"rng")
        _value_digest(digest, value.bit_generator.state)
    elif hasattr(value, "__dict__") and not callable(value):  # a model object: its fields
        digest.update(f"o{type(value).__qualname__}".encode())
        _value_digest(digest, dict(vars(value)))
    elif callable(value):
        name = getattr(value, "__qualname__", type(value).__name__)
        digest.update(f"f{getattr(value, '__module__', '')}.{name}".encode())
    else:
        digest.update(f"{type(value).__name__}:{value!r}".encode())


def inputs() -> dict[str, str]:
    """The digests of what the fingerprints are computed from, by kind (a change names its kind)."""
    from tests.probes import GOLDEN_FILE

    probes = hashlib.sha256()
    for name, entry in sorted(load_all_probes().items()):
        probes.update(f"\0{name}\0{entry.function}\0{entry.rejects}\0".encode())
        _value_digest(probes, entry.arguments())
    return {
        "format": str(FORMAT),
        "reference": _text_digest(sorted((ROOT / "solutions").glob("*.py"))),
        "catalogue": hashlib.sha256(repr((load_catalogue(), load_families())).encode()).hexdigest(),
        "probes": probes.hexdigest(),
        "golden values": hashlib.sha256(GOLDEN_FILE.read_bytes()).hexdigest() if GOLDEN_FILE.is_file() else "",
        "code": _text_digest([ROOT / name for name in CODE_FILES]),
    }


def changed_inputs(path: Path = FINGERPRINT_FILE) -> list[str]:
    """The kinds of input (:func:`inputs`) that changed since ``path`` was written (all: no digest beside it)."""
    current = inputs()
    try:
        recorded = json.loads(path.with_name(INPUTS_FILE.name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return list(current)
    return [kind for kind, value in current.items() if not isinstance(recorded, dict) or recorded.get(kind) != value]


# A stored fingerprint is current when it is this close to the one computed now: a hundredth of what the diagnosis
# matches by (tests/diagnosis.py's MATCH_RTOL), not equality. The last bits of a float differ between machines
# (another BLAS kernel), and a training probe's three Adam steps turn a parameter that is rounding noise (the key
# bias) into values near 1e-10 that differ between machines by up to about 1e-9: the absolute tolerance is that of
# the golden values (``golden.CURRENT_ATOL``).
CURRENT_RTOL, CURRENT_ATOL = 1e-8, GOLDEN_ATOL


def _same_arrays(stored: Any, arrays: dict[str, np.ndarray]) -> bool:
    return all(key in stored.files and same_to_the_machine(stored[key], value, CURRENT_RTOL, CURRENT_ATOL)
               for key, value in arrays.items())


def sample_is_current(path: Path = FINGERPRINT_FILE, size: int = SAMPLE) -> bool:
    """Whether a sample of the fingerprints, recomputed now, is what ``path`` holds.

    Parameters
    ----------
    path : pathlib.Path
        The fingerprint file.
    size : int
        How many mutants to recompute besides the catalogue's first and last, drawn with a seed from the
        file's own digest (each new file is sampled anew); the first family too.

    Returns
    -------
    bool
        True when the file lists the catalogue's mistakes in order, holds the reference's call graph, and
        the sampled fingerprints (their probes and arrays) are the ones computed now.
    """
    catalogue, families = load_catalogue(), load_families()
    with np.load(path, allow_pickle=False) as stored:
        meta = json.loads(str(stored["meta"][()]))
        if meta.get("format") != FORMAT or [entry["id"] for entry in meta["mistakes"]] != [m.id for m in catalogue]:
            return False
        kept = [entry["id"] for entry in meta["families"]]
        if any(identifier not in {family.id for family in families} for identifier in kept):
            return False
        if meta["calls"] != json.loads(json.dumps(reference_calls(LocalImplementation(ROOT / "solutions")))):
            return False
        seed = int(hashlib.sha256(path.read_bytes()).hexdigest()[:8], 16)
        chosen = {0, len(catalogue) - 1, *random.Random(seed).sample(range(len(catalogue)), min(size, len(catalogue)))}
        recorded = {entry["id"]: entry["probes"] for entry in [*meta["mistakes"], *meta["families"]]}
        checked = [catalogue[index] for index in sorted(chosen)]
        checked += [family for family in families if family.id in kept][:1]
        with tempfile.TemporaryDirectory(prefix="attention-kit-fingerprints-") as workdir:
            for mutant in checked:
                outputs = fingerprint(mutant, Path(workdir))
                probes = {name: None if result is RAISED else len(result) for name, result in outputs.items()}
                arrays = {fingerprint_key(mutant.id, name, index): array
                          for name, result in outputs.items() for index, array in enumerate(result or ())}
                if probes != recorded.get(mutant.id) or not _same_arrays(stored, arrays):
                    return False
    return True


def is_current(path: Path = FINGERPRINT_FILE, *, full: bool = False) -> bool:
    """True when ``path`` holds the fingerprints of the current catalogue, probes and golden values.

    Parameters
    ----------
    path : pathlib.Path
        The fingerprint file; the digest of its inputs lies beside it (``fingerprints.inputs.json``).
    full : bool
        Recompute every fingerprint and compare (minutes). By default the digest of the inputs must be the
        one recorded when the file was written, and a sample recomputed now must match (seconds).

    Returns
    -------
    bool
        Whether the file is current.
    """
    if not path.is_file():
        return False
    if not full:
        return not changed_inputs(path) and sample_is_current(path)
    meta, arrays = compute()
    with np.load(path, allow_pickle=False) as stored:
        if json.loads(str(stored["meta"][()])) != json.loads(json.dumps(meta)):
            return False
        if sorted(stored.files) != sorted([*arrays, "meta"]):
            return False
        return _same_arrays(stored, arrays)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.fingerprints",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the file is current")
    parser.add_argument("--full", action="store_true", help="with --check: recompute every fingerprint (minutes)")
    args = parser.parse_args(argv)
    if args.check:
        if is_current(full=args.full):
            return 0
        changed = changed_inputs()
        print(f"{FINGERPRINT_FILE.relative_to(ROOT)} is out of date"
              + (f" (changed since it was written: {', '.join(changed)})" if changed else "")
              + ": run `python -m grader.authoring.fingerprints`")
        return 1
    meta, arrays = compute()
    FINGERPRINT_FILE.parent.mkdir(parents=True, exist_ok=True)
    FINGERPRINT_FILE.write_bytes(serialise(meta, arrays))
    INPUTS_FILE.write_text(json.dumps(inputs(), indent=1) + "\n", encoding="utf-8")
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
