"""Name the misconception: compare a failing implementation with known mistakes.

The instructors' catalogue of mistakes (``grader/mutants/``) is not shipped;
what ships is ``tests/data/fingerprints.npz``: for every mistake, the
outputs it produces on the suite's fixed probe inputs wherever they differ
from the reference, with a description and a hint, but no code. When a
graded test fails, the plugin runs the exercise's probes through the
student's functions once and, if every stored output of a mistake is
reproduced, puts its description and hint before the failure.

The file holds a JSON document (key ``"meta"``, a 0-d unicode array) and
one array per stored output, keyed ``"<mistake id>|<probe>|<i>"``. It is
written by ``python -m grader.authoring.fingerprints``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grader.curriculum import load as load_curriculum
from tests.probes import as_arrays, load_all_probes

FINGERPRINT_FILE = Path(__file__).parent / "data" / "fingerprints.npz"

# Outputs differ from the reference beyond DIFFER_*; a student matches a mistake within MATCH_*,
# which is much tighter, so a correct implementation never matches by rounding.
DIFFER_RTOL, DIFFER_ATOL = 1e-5, 1e-8
MATCH_RTOL, MATCH_ATOL = 1e-6, 1e-9

RAISED = None  # a probe output recorded as "the call raised an exception"


@dataclass(frozen=True)
class KnownMistake:
    """One catalogued mistake and the probe outputs that give it away.

    ``outputs`` maps a probe name to the arrays the mistake returns for it,
    or to ``None`` when the mistaken code raises on that probe.
    """

    id: str
    exercise: str
    description: str
    hint: str
    outputs: dict[str, tuple[np.ndarray, ...] | None]

    @property
    def recognisable(self) -> bool:
        """True when at least one probe gives an output (raising alone proves little)."""
        return any(value is not RAISED for value in self.outputs.values())


def same_outputs(
    observed: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...], *, rtol: float, atol: float
) -> bool:
    """True when two results have the same arrays: count, shapes, dtypes and values."""
    if len(observed) != len(expected):
        return False
    for a, b in zip(observed, expected, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return True


def fingerprint_key(mistake_id: str, probe: str, index: int) -> str:
    """The key of one stored output array in the fingerprint file."""
    return f"{mistake_id}|{probe}|{index}"


@functools.cache
def load_fingerprints(path: Path = FINGERPRINT_FILE) -> tuple[KnownMistake, ...]:
    """Read the known mistakes from ``path`` (empty when the file is missing)."""
    if not Path(path).is_file():
        return ()
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"][()]))
        mistakes = []
        for entry in meta["mistakes"]:
            outputs: dict[str, tuple[np.ndarray, ...] | None] = {}
            for probe, count in entry["probes"].items():
                outputs[probe] = (
                    RAISED if count is None
                    else tuple(data[fingerprint_key(entry["id"], probe, i)] for i in range(count))
                )
            mistakes.append(KnownMistake(entry["id"], entry["exercise"], entry["description"], entry["hint"],
                                         outputs))
    return tuple(mistakes)


class NotWrittenYet(Exception):
    """The implementation raised NotImplementedError: nothing to diagnose."""


def call_quietly(function: Any, args: tuple, kwargs: dict) -> tuple[np.ndarray, ...] | None:
    """Call ``function`` without warnings or printing; ``None`` if it raises.

    Raises
    ------
    NotWrittenYet
        If the function is still a stub.
    """
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return as_arrays(function(*args, **kwargs))
    except NotImplementedError:
        raise NotWrittenYet from None
    except Exception:  # student code may raise anything; that is an observation, not a crash
        return RAISED


def observe(implementation: Any, exercise: str, probes: list[str]) -> dict[str, tuple[np.ndarray, ...] | None]:
    """Run the named probes through the implementation's functions for ``exercise``."""
    registry = load_all_probes()
    observed: dict[str, tuple[np.ndarray, ...] | None] = {}
    for name in probes:
        entry = registry.get(name)
        if entry is None:
            continue
        try:
            function = implementation.function(exercise, entry.function)
        except Exception:
            raise NotWrittenYet from None  # a module that does not load: the tests already say so
        observed[name] = call_quietly(entry.call, (function,), {})
    return observed


def matches(mistake: KnownMistake, observed: dict[str, tuple[np.ndarray, ...] | None]) -> bool:
    """True when ``observed`` reproduces every stored output of ``mistake``."""
    if not mistake.recognisable:
        return False
    for probe, expected in mistake.outputs.items():
        if probe not in observed:
            return False
        got = observed[probe]
        if expected is RAISED or got is RAISED:
            if expected is not got:
                return False
        elif not same_outputs(got, expected, rtol=MATCH_RTOL, atol=MATCH_ATOL):
            return False
    return True


def diagnose(implementation: Any, exercise: str) -> list[KnownMistake]:
    """The known mistakes of ``exercise`` whose outputs the implementation reproduces.

    Never raises: any problem (a missing file, a stub, a crash in student
    code) gives an empty list, and the failing test speaks for itself.
    """
    try:
        candidates = [m for m in load_fingerprints() if m.exercise == exercise and m.recognisable]
        if not candidates:
            return []
        probes = sorted({probe for mistake in candidates for probe in mistake.outputs})
        observed = observe(implementation, exercise, probes)
        return [mistake for mistake in candidates if matches(mistake, observed)]
    except Exception:
        return []


def describe(exercise: str, mistakes: list[KnownMistake]) -> str:
    """The diagnosis text put before a failure ('' when nothing matched)."""
    if not mistakes:
        return ""
    try:
        module = load_curriculum().exercise(exercise).module_file
    except ValueError:
        module = f"{exercise}.py"
    if len(mistakes) == 1:
        (mistake,) = mistakes
        return (f"Diagnosis: your {module} gives exactly the outputs of a known mistake:\n"
                f"  \"{mistake.description}\"\nHint: {mistake.hint}")
    # Several matches: mistakes that look alike on the suite's inputs, or more than one mistake at once.
    # Each hint stays with its own description, so the student can tell which is which.
    lines = [f"Diagnosis: your {module} gives exactly the outputs of {len(mistakes)} known mistakes "
             "(they look alike on the suite's inputs, or you made more than one):"]
    for mistake in mistakes:
        lines += [f"  - \"{mistake.description}\"", f"    Hint: {mistake.hint}"]
    return "\n".join(lines)
