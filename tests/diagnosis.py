"""Name the misconception: compare a failing implementation with known mistakes.

The instructors' catalogue of mistakes (``grader/mutants/``) is not shipped;
what ships is ``tests/data/fingerprints.npz``: for every mistake, the
outputs it produces on the suite's fixed probe inputs wherever they differ
from the reference, with a description and a hint, but no code. When a
graded test fails, the plugin runs every probe through the student's
functions once per session (:func:`observe_everything`). Two things follow:

* blame by call (:func:`blame`): when a failing test's calls went through
  another function of the student's that fails its own probes (an earlier
  exercise, or earlier in the same one; ``tests/reach.py`` traces the calls),
  the failure leads with the one whose own output was wrong first, and "fix
  it first";
* a diagnosis (:func:`explain`) only when known mistakes of the exercise, one
  or a combination, account for every probe on which the student's functions
  deviate, and nothing else: never a mistake that explains part of it.

The file holds a JSON document (key ``"meta"``, a 0-d unicode array) and
one array per stored output, keyed ``"<mistake id>|<probe>|<i>"``. It is
written by ``python -m grader.authoring.fingerprints``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import itertools
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from grader.curriculum import load as load_curriculum
from tests import conventions
from tests.probes import as_arrays, golden, golden_kind, load_all_probes, result_kind
from tests.reach import Reached, package_of, recorded_function, tracing

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


SKETCH_SIZE = 8


def sketch(array: np.ndarray) -> np.ndarray:
    """A few numbers that stand for an output array (pairs of mistakes are stored this way, not in full).

    Strings (the outcome of a bad-input probe) are kept as they are. Numbers are flattened (NaN and
    infinities replaced by fixed stand-ins) and projected on ``SKETCH_SIZE`` fixed random directions;
    the last entry is the array's norm, which scales the tolerance of a comparison.
    """
    array = np.asarray(array)
    if array.dtype.kind in "US":
        return array
    flat = np.nan_to_num(array.astype(np.float64).ravel(), nan=7.25, posinf=1e6, neginf=-3e6)
    basis = np.random.default_rng(flat.size).normal(size=(SKETCH_SIZE, flat.size))
    return np.concatenate([basis @ flat, [np.linalg.norm(flat)]])


def same_sketch(array: np.ndarray, stored: np.ndarray, rtol: float) -> bool:
    """True when ``array`` sketches to ``stored`` (within ``rtol`` of its norm)."""
    mine = sketch(array)
    if stored.dtype.kind in "US" or mine.dtype.kind in "US":
        return mine.dtype.kind == stored.dtype.kind and bool(np.array_equal(mine, stored))
    if mine.shape != stored.shape:
        return False
    scale = max(float(stored[-1]), 1e-12) * np.sqrt(SKETCH_SIZE)
    return bool(np.all(np.abs(mine - stored) <= rtol * scale))


PAIR_SKETCHES = "pair_sketches"  # the fingerprint file's array of every pair's sketches, one per row


@dataclass(frozen=True)
class KnownPair:
    """Two catalogued mistakes planted together, where they change the same outputs.

    ``outputs`` maps a probe to ``(shape, dtype, sketch)`` per array, or to ``None`` (it raises).
    """

    mistakes: tuple[KnownMistake, KnownMistake]
    exercise: str
    outputs: dict[str, tuple[tuple[tuple[int, ...], str, np.ndarray], ...] | None]

    def reproduced_by(self, got: Any, probe: str) -> bool:
        """True when the student's output on ``probe`` is this pair's."""
        stored = self.outputs[probe]
        if stored is RAISED or got is RAISED or got is WRONG_TYPE:
            return stored is got
        if not isinstance(got, tuple) or len(got) != len(stored):
            return False
        for array, (shape, dtype, sketched) in zip(got, stored, strict=True):
            if tuple(array.shape) != tuple(shape) or str(array.dtype) != dtype:
                return False
            low = array.dtype.kind == "f" and array.dtype.itemsize < 8
            if not same_sketch(array, sketched, rtol=5e-4 if low else 1e-6):
                return False
        return True


@functools.cache
def load_pairs(path: Path = FINGERPRINT_FILE) -> tuple[KnownPair, ...]:
    """The pairs of known mistakes stored with the fingerprints (empty when there are none)."""
    if not Path(path).is_file():
        return ()
    # The mistakes as read by load_fingerprints() (the file is read and decompressed once per process, ~0.1 s),
    # but as objects of their own, as when this function read the file a second time: two KnownMistake objects
    # compare their arrays, and explain() looks a pair's mistakes up among the single ones by equality.
    by_id = {mistake.id: _copy_of(mistake) for mistake in load_fingerprints(*(() if path == FINGERPRINT_FILE
                                                                             else (path,)))}
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"][()]))
        rows = data[PAIR_SKETCHES] if PAIR_SKETCHES in data.files else np.zeros((0, SKETCH_SIZE + 1))
    pairs = []
    for entry in meta.get("pairs", []):
        first, second = entry["ids"]
        if first not in by_id or second not in by_id:
            continue
        outputs = {}
        for probe, arrays in entry["probes"].items():
            outputs[probe] = RAISED if arrays is None else tuple(
                (tuple(shape), dtype, rows[where] if isinstance(where, int) else np.array(where))
                for shape, dtype, where in arrays)
        pairs.append(KnownPair((by_id[first], by_id[second]), entry["exercise"], outputs))
    return tuple(pairs)


def _copy_of(mistake: KnownMistake) -> KnownMistake:
    """``mistake`` with copies of its arrays (what reading the file again gives, without reading it)."""
    outputs = {probe: RAISED if arrays is RAISED else tuple(array.copy() for array in arrays)
               for probe, arrays in mistake.outputs.items()}
    return KnownMistake(mistake.id, mistake.exercise, mistake.description, mistake.hint, outputs)


def fingerprint_key(mistake_id: str, probe: str, index: int) -> str:
    """The key of one stored output array in the fingerprint file."""
    return f"{mistake_id}|{probe}|{index}"


def load_fingerprints(path: Path = FINGERPRINT_FILE) -> tuple[KnownMistake, ...]:
    """Read the known mistakes from ``path`` (empty when the file is missing).

    The kit's file comes with those of the active course's own exercises (their
    ``data/fingerprints.npz``, written by ``attention-kit course check``).
    """
    from grader import course

    own = course.own_data(course.OWN_FINGERPRINTS, FINGERPRINT_FILE.parent) if path == FINGERPRINT_FILE else None
    return _read_fingerprints(path) + (_read_fingerprints(own) if own is not None else ())


@functools.cache
def _read_fingerprints(path: Path) -> tuple[KnownMistake, ...]:
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


class ObservationCut(Exception):
    """The implementation's time for the diagnosis ran out (the grader's budget of its own).

    What was observed is incomplete, and a diagnosis read off it could be wrong, so none is made.
    """


class NotWrittenYet(Exception):
    """The implementation raised NotImplementedError: nothing to diagnose."""


# A probe output recorded as "not numpy arrays" (a list, a float, ...): it equals no stored output.
WRONG_TYPE = "not numpy arrays"


def _all_arrays(result: Any) -> bool:
    """Whether ``result`` is made of numpy arrays and numbers only (in tuples and dicts, as the API returns).

    Used where the reference's structure is not known. A list is not: converted, a list of floats would
    look like a float64 array.
    """
    if isinstance(result, tuple):
        return all(_all_arrays(item) for item in result)
    if isinstance(result, dict):
        return all(_all_arrays(item) for item in result.values())
    return isinstance(result, (np.ndarray, np.generic, float, int)) and not isinstance(result, bool)


def call_quietly(function: Any, args: tuple, kwargs: dict, *, strict: bool = False,
                 kind: str | None = None) -> Any:
    """Call ``function`` without warnings or printing; ``None`` if it raises.

    ``strict``: a result whose structure is not the reference's (``kind``, from the golden file), or
    without one not made of numpy arrays and numbers, gives ``WRONG_TYPE`` (converted, a list of floats
    would look like a float64 array, and match a mistake it is not).

    Raises
    ------
    NotWrittenYet
        If the function is still a stub.
    """
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            result = function(*args, **kwargs)
            if strict and (result_kind(result) != kind if kind is not None else not _all_arrays(result)):
                return WRONG_TYPE
            return as_arrays(result)
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


# ----------------------------------------------------------------------------- every function's own probes


@dataclass
class Observation:
    """What one implementation does on every probe of every function, in manifest order.

    ``outputs[probe]`` is the result (``RAISED`` when the call raised), ``deviates[probe]`` whether it
    differs from the golden output. ``unwritten`` holds the functions that are still stubs or whose
    module does not load (their probes are not run).
    """

    outputs: dict[str, tuple[np.ndarray, ...] | None]
    deviates: dict[str, bool]
    unwritten: set[str]
    # What each function's probes reached of the student's functions (``tests/reach.py``; in grading, what the
    # isolated worker reported with each reply, ``grader/sandbox/reached.py``); empty where nothing was traced.
    reached: dict[str, Reached] = field(default_factory=dict)
    # deviating_functions' answers: asked at every failure of a session (blame), they depend only on the
    # observation, which is never changed once made.
    _deviating: dict[bool, list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def deviating_functions(self, behaviour_only: bool = False) -> list[str]:
        """The functions with at least one deviating probe, in manifest order.

        ``behaviour_only``: bad-input probes do not count.
        """
        if behaviour_only not in self._deviating:
            registry = load_all_probes()
            bad = {registry[p].function for p, d in self.deviates.items()
                   if d and p in registry and not (behaviour_only and registry[p].rejects is not None)}
            self._deviating[behaviour_only] = [f for e in load_curriculum().exercises for f in e.functions
                                               if f in bad]
        return list(self._deviating[behaviour_only])


def _deviates(name: str, result: Any) -> bool:
    if result is RAISED or result is WRONG_TYPE:
        return True
    try:
        expected = golden(name)
    except (KeyError, FileNotFoundError):
        return False  # a probe without a golden value (being written): no evidence either way
    expected = expected if isinstance(expected, tuple) else (expected,)
    # A float32 (float16) probe: within that precision's rounding, as the tests' own checks (expect_close) are. A
    # blind round: an einsum attention, right and passing every test, differed from the float32 golden output by
    # 2.4e-7 (one rounding of an entry of 0.01) and was blamed ("First fix scaled_dot_product_attention()") for
    # the mistakes of multi_head_attention and model_gradients that went through it.
    low = [a for a in expected if getattr(a, "dtype", np.dtype(float)).kind == "f" and a.dtype.itemsize < 8]
    eps = max((float(np.finfo(a.dtype).eps) for a in low), default=0.0)
    rtol, atol = max(DIFFER_RTOL, 50 * eps), max(DIFFER_ATOL, 10 * eps)
    try:
        return not same_outputs(result, expected, rtol=rtol, atol=atol)
    except (TypeError, ValueError):  # an array of objects, strings against numbers ...
        return True


def observe_everything(implementation: Any) -> Observation:
    """Run every probe of every function of the manifest once, in manifest order.

    An implementation that bounds the diagnosis's time (the grader's, ``observing``: a submission whose every
    function sleeps or loops) may cut it short; then ObservationCut: nothing is observed, nothing is diagnosed.
    Raises nothing else.
    """
    observing = getattr(implementation, "observing", None)
    with observing() if callable(observing) else contextlib.nullcontext(lambda: False) as spent:
        return _observe_everything(implementation, spent)


def _observe_everything(implementation: Any, spent: Callable[[], bool]) -> Observation:
    registry = load_all_probes()
    outputs: dict[str, tuple[np.ndarray, ...] | None] = {}
    deviates: dict[str, bool] = {}
    unwritten: set[str] = set()
    reached: dict[str, Reached] = {}
    package = package_of(implementation)
    for exercise in load_curriculum().exercises:
        for function_name in exercise.functions:
            try:
                function = recorded_function(implementation, exercise.name, function_name)
            except Exception:
                if spent():  # its module was not imported for want of time: not a stub
                    raise ObservationCut(f"the diagnosis ran out of time at {function_name}") from None
                unwritten.add(function_name)
                continue
            went = reached.setdefault(function_name, Reached())
            names = sorted(p for p, entry in registry.items() if entry.function == function_name)
            for name in names:
                try:
                    result = _observed(registry, name, function, went, package)
                except NotWrittenYet:
                    unwritten.add(function_name)
                    break
                if spent():  # a call of this probe may have been refused: its result is not the function's
                    raise ObservationCut(f"the diagnosis ran out of time at {name}")
                outputs[name] = result
                deviates[name] = _deviates(name, result)
            _asked_afresh(implementation, exercise.name, function_name, [n for n in names if deviates.get(n)],
                          outputs, deviates, registry, went, package)
            if spent():
                raise ObservationCut(f"the diagnosis ran out of time at {function_name}")
    return Observation(outputs, deviates, unwritten, {f: went for f, went in reached.items() if went.calls})


def _observed(registry: dict, name: str, function: Any, went: Reached, package: str | None) -> Any:
    """The result of probe ``name`` through ``function`` (``RAISED``, ``WRONG_TYPE``); NotWrittenYet for a stub."""
    try:
        with tracing(went, package):
            result = call_quietly(registry[name].call, (function,), {}, strict=True, kind=golden_kind(name))
    except NotWrittenYet:
        raise
    except Exception:  # noqa: BLE001 - the isolated worker may fail in its own ways
        return RAISED
    if result is not RAISED and result is not WRONG_TYPE and any(a.dtype == object for a in result):
        return WRONG_TYPE  # not numbers: it cannot equal anything stored
    return result


def _asked_afresh(implementation: Any, exercise: str, function_name: str, deviating: list[str], outputs: dict,
                  deviates: dict, registry: dict, went: Reached, package: str | None) -> None:
    """Ask a function's deviating probes again as first calls, where its first one is right so asked.

    A function that keeps something between calls (a cache keyed on part of its input, a counter) deviates on a
    probe for what earlier probes left, not for the probe: a family or a known mistake read off those outputs
    would be a wrong diagnosis (a blind round: a positional table cached by n_positions alone was told "an odd
    size"). Its fresh answers stand instead; the tests' own checks and the unseen-input gate tell it that it keeps
    state. One fresh worker (graded) or import (a student's run) for a function that deviates, more only for one
    that keeps state.
    """
    forget = getattr(implementation, "forget", None)
    if not deviating or not callable(forget):
        return
    for index, name in enumerate(deviating):
        forget()
        try:
            function = recorded_function(implementation, exercise, function_name)
            result = _observed(registry, name, function, went, package)
        except Exception:  # noqa: BLE001 - a module that no longer loads: what was observed stands
            return
        if index == 0 and _deviates(name, result):
            return  # a mistake of the input's: wrong when asked first too
        outputs[name], deviates[name] = result, _deviates(name, result)


def _test_files_text() -> str:
    """The text of the manifest's test files (where the probes are defined, and named where a test asks them)."""
    paths = tuple(exercise.test_path if exercise.home else Path(__file__).parent / Path(exercise.test_file).name
                  for exercise in load_curriculum().exercises)
    return _texts_of(paths)


@functools.cache
def _texts_of(paths: tuple[Path, ...]) -> str:
    """The files' texts, joined, read once per set of files.

    A course's manifest has its own set: a process that ran a course's tests (an xdist worker) kept that course's
    texts for the kit's tests after it.
    """
    texts = []
    for path in paths:
        with contextlib.suppress(OSError):
            texts.append(path.read_text(encoding="utf-8"))
    return "\n".join(texts)


def asked_by_a_test(probe_name: str) -> bool:
    """Whether a test asks the probe ``probe_name`` (``fn/name``) itself, rather than only the diagnosis.

    Read from the test files' text: the probe named in quotes, whole (``"softmax/mixed_scores"``) or by its own
    name (a table of cases whose keys make the name: ``f"scaled_dot_product_attention/{name}"``), or its function
    called by name (``fifth_position()``, outside its ``def``). A probe no test names this way is one the
    diagnosis alone asks (its answer is in no test's checks, nor in a table recorded from the tests' calls).
    When in doubt a probe counts as asked.
    """
    return _asked_in(probe_name, _test_files_text())


@functools.cache
def _asked_in(probe_name: str, text: str) -> bool:
    short = probe_name.split("/", 1)[-1]
    pattern = (rf"[\"']{re.escape(probe_name)}[\"']|[\"']{re.escape(short)}[\"']"
               rf"|(?<!def ){re.escape(short)}\(")
    return re.search(pattern, text) is not None


def right_on_its_probes(implementation: Any, exercise: str, name: str, *, asked_only: bool = False) -> bool:
    """Whether ``name`` gives the reference's output (golden) on every probe of it, bad-input ones included.

    Its probes are the fixed inputs the kit knows the answers to; a known mistake differs on one of them
    (256 of 260 catalogued ones do), so a function right on all of them is either right, or right on known
    inputs only (``tests/unseen.py`` asks which). No probes: True. With ``asked_only``, only the probes of good
    input a test asks (:func:`asked_by_a_test`): a function wrong on one of them fails that test, for a reason of the
    kind the input drawn for the submission shows (wrong bad-input handling says nothing of good input's answers).
    """
    registry = load_all_probes()
    probes = sorted(p for p, entry in registry.items() if entry.function == name)
    asked = [p for p in probes if registry[p].rejects is None and asked_by_a_test(p)]
    try:
        function = implementation.function(exercise, name)
        for probe_name in asked if asked_only else probes:
            result = call_quietly(registry[probe_name].call, (function,), {}, strict=True,
                                  kind=golden_kind(probe_name))
            if result is not RAISED and result is not WRONG_TYPE and any(a.dtype == object for a in result):
                return False
            if _deviates(probe_name, result):
                return False
    except Exception:  # noqa: BLE001 - a stub (NotWrittenYet), a module that does not load: not right
        return False
    return True


def asked_probes_answered(implementation: Any, exercise: str, name: str) -> list[str]:
    """The probes of good input a test asks (:func:`asked_by_a_test`) that ``name`` answers as the reference does.

    For a function wrong on another of them (``tests/unseen.py`` asks whether it is right on these only as asked).
    Empty for a stub or a module that does not load.
    """
    registry = load_all_probes()
    answered = []
    try:
        function = implementation.function(exercise, name)
        for probe_name in sorted(p for p, entry in registry.items() if entry.function == name
                                 and entry.rejects is None and asked_by_a_test(p)):
            result = call_quietly(registry[probe_name].call, (function,), {}, strict=True,
                                  kind=golden_kind(probe_name))
            if result is not RAISED and result is not WRONG_TYPE and any(a.dtype == object for a in result):
                continue
            if not _deviates(probe_name, result):
                answered.append(probe_name)
    except Exception:  # noqa: BLE001 - a stub (NotWrittenYet), a module that does not load: none answered
        return []
    return answered


# ----------------------------------------------------------------------------- who calls whom


def _api_functions() -> set[str]:
    return {f for e in load_curriculum().exercises for f in e.functions}


def _referenced(function: Any, api: set[str], depth: int = 0) -> set[str] | None:
    """The API functions that ``function``'s code names (through its own helpers); None if not inspectable."""
    try:
        function = inspect.unwrap(function)  # a student's run wraps each function in its CPU budget (tests.kit)
    except ValueError:  # a cycle of __wrapped__ (the student's own doing): not inspectable
        return None
    code = getattr(function, "__code__", None)
    module = getattr(function, "__module__", "") or ""
    if code is None or module.startswith(("grader.", "tests.")) or module in ("grader", "tests"):
        return None  # a proxy (the isolated worker): the code is not here
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(const for const in current.co_consts if hasattr(const, "co_names"))
    found = names & api
    scope = getattr(function, "__globals__", {})
    for name in names - api:
        helper = scope.get(name)
        if not (callable(helper) and hasattr(helper, "__code__")):
            continue
        if getattr(helper, "__name__", "") in api:  # an API function under another name (import ... as sm)
            found.add(helper.__name__)
        elif depth < 3 and getattr(helper, "__module__", None) == module:  # a helper of the student's own
            found |= _referenced(helper, api, depth + 1) or set()
    found.discard(getattr(function, "__name__", ""))
    return found


def reference_calls(implementation: Any) -> dict[str, list[str]]:
    """Which API functions each API function calls, from ``implementation``'s code (the reference's)."""
    api = _api_functions()
    calls = {}
    for exercise in load_curriculum().exercises:
        for name in exercise.functions:
            try:
                found = _referenced(implementation.function(exercise.name, name), api)
            except Exception:
                found = None
            calls[name] = sorted(found or ())
    return calls


@functools.cache
def _stored_calls(path: Path = FINGERPRINT_FILE) -> dict[str, list[str]]:
    if not Path(path).is_file():
        return {}
    with np.load(path, allow_pickle=False) as data:
        return json.loads(str(data["meta"][()])).get("calls", {})


def callees(implementation: Any, name: str, observation: Observation | None = None) -> set[str]:
    """The API functions of the student's that ``name`` relies on, directly or not.

    What its probes' calls reached (``observation.reached``) when they were traced; else the names in the
    student's own code when it is here (a local run, a notebook), else the reference's call graph stored
    with the fingerprints (a worker that reported no calls). Under fair grading (``implementation.fair``) the other
    exercises' functions are the reference's, so only functions of the same exercise count.
    """
    curriculum = load_curriculum()
    fair = bool(getattr(implementation, "fair", False))
    home = curriculum.exercise_of_function(name).name
    went = observation.reached.get(name) if observation is not None else None
    if went is not None:
        return {c for c in went.callees(name) if not fair or curriculum.exercise_of_function(c).name == home}
    api = _api_functions()
    stored = _stored_calls()
    found: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        try:
            direct = _referenced(implementation.function(curriculum.exercise_of_function(current).name, current), api)
        except Exception:
            direct = None
        if direct is None:
            direct = set(stored.get(current, ()))
        for callee in direct:
            if fair and curriculum.exercise_of_function(callee).name != home:
                continue
            if callee not in found and callee != name:
                found.add(callee)
                pending.append(callee)
    return found


def blame(implementation: Any, called: list[str], observation: Observation,
          reached: Reached | None = None) -> tuple[str, str, tuple[str, ...]] | None:
    """What to fix first: ``(dependency, caller, also)``, or None.

    ``also``: the other functions found wrong the same way (in manifest order), said beside the first: of two
    mistakes at once, the first alone may explain nothing this test found (a blind round: an unscaled
    attention_scores led a multi-head test that only merge_heads, also wrong, could fail).

    The dependency is a function that a function the test called went through and that fails its own probes
    (bad input aside: a missing check breaks no caller). With ``reached`` (what the test's calls reached, traced:
    ``tests/reach.py``), the one whose own output was wrong first: it reached no other function that fails its
    probes (of several, the earliest in manifest order). Untraced (no calls reported), the earliest in manifest
    order of the functions the caller relies on (:func:`callees`).
    """
    order = {f: i for i, f in enumerate(f for e in load_curriculum().exercises for f in e.functions)}
    bad = set(observation.deviating_functions(behaviour_only=True))  # a missing input check breaks no caller
    traced = reached is not None and bool(reached.calls)
    best: tuple[int, str, str] | None = None
    every: set[str] = set()
    for caller in dict.fromkeys(called):
        if caller not in order:
            continue
        below = reached.callees(caller) if traced else callees(implementation, caller, observation)
        found = below & bad
        if traced:  # wrong first: not only passing on the mistake of a function it went through
            found = {f for f in found if not reached.callees(f) & bad} or found
        for dependency in found:
            if dependency in order and (best is None or order[dependency] < best[0]):
                best = (order[dependency], dependency, caller)
            every |= {dependency} & set(order)
    if best is None:
        return None
    return best[1], best[2], tuple(sorted(every - {best[1]}, key=order.__getitem__))


def describe_blame(dependency: str, caller: str, observation: Observation | None = None,
                   also: tuple[str, ...] = ()) -> str:
    """The first line(s) of a failure whose cause is an earlier function of the student's.

    ``observation``: where given, "pytest -m <exercise> shows them" is said only if a test asks one of the
    dependency's deviating probes; else its wrong outputs are the kit's fixed inputs' alone (a blind round: a
    linear that transposed square weights passed every test of exercise 2, which the line sent the student to).
    """
    exercise = load_curriculum().exercise_of_function(dependency)
    shown = f"pytest -m {exercise.name} shows them"
    if observation is not None:
        registry = load_all_probes()
        deviating = [probe for probe, wrong in observation.deviates.items()
                     if wrong and probe in registry and registry[probe].function == dependency]
        if deviating and not any(asked_by_a_test(probe) for probe in deviating):
            # (not "which no test asks": its tests may fail on inputs of their own, a blind round)
            shown = (f"on the kit's fixed input{'s' if len(deviating) > 1 else ''} "
                     f"{', '.join(probe.split('/', 1)[-1] for probe in deviating[:3])}, the diagnosis's own; "
                     f"the tests of exercise {exercise.number} ask inputs of theirs: pytest -m {exercise.name} "
                     "shows what they find")
    return (f"First fix {dependency}() in {exercise.module_file} (exercise {exercise.number}, {exercise.name}): "
            f"its own outputs are wrong ({shown}), and this test's call of your "
            f"{caller}() went through it, so {caller}() may only be passing its mistake on (the failure below may "
            "be its echo)." + (f" It also went through {_listed(also)}, whose own outputs are wrong too: fix "
                               f"{'it' if len(also) == 1 else 'them'} next." if also else ""))


def _listed(functions: tuple[str, ...]) -> str:
    """``a()``, ``a() and b()``, ``a(), b() and c()``."""
    named = [f"{function}()" for function in functions]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def revisit_dependency(dependency: str) -> str:
    """The revisit line that replaces the caller's ideas while its dependency is wrong."""
    exercise = load_curriculum().exercise_of_function(dependency)
    return (f"fix {dependency}() first (exercise {exercise.number}, {exercise.module_file}): this result goes "
            "through it; run this test again afterwards")


# ----------------------------------------------------------------------------- known mistakes


def functions_of(mistakes: list[KnownMistake]) -> frozenset[str]:
    """The functions a diagnosis naming ``mistakes`` can be about.

    Those whose probe outputs they change, and the functions those call or are called by (in the reference's call
    graph), where probes blind to a mistake hide it.
    """
    registry = load_all_probes()
    touched = {registry[probe].function for mistake in mistakes for probe in mistake.outputs if probe in registry}
    calls = _stored_calls()
    near = set(touched)
    for name in touched:
        near |= _reach(name, calls)  # what it calls, directly or not
        near |= {caller for caller in calls if name in _reach(caller, calls)}  # what calls it
    return frozenset(near)


def _reach(name: str, calls: dict[str, list[str]]) -> set[str]:
    """The API functions ``name`` calls in the reference, directly or not."""
    seen: set[str] = set()
    todo = list(calls.get(name, ()))
    while todo:
        callee = todo.pop()
        if callee not in seen:
            seen.add(callee)
            todo.extend(calls.get(callee, ()))
    return seen


def changes(mistakes: list[KnownMistake]) -> frozenset[str]:
    """What ``mistakes`` change besides values on some probe: ``"dtype"``, ``"shape"``, ``"input check"``.

    (An input check: a bad input accepted, or another error.) A failure of such a kind is theirs only if they
    change it.
    """
    registry, found = load_all_probes(), set()
    for mistake in mistakes:
        for probe, outputs in mistake.outputs.items():
            entry = registry.get(probe)
            if entry is not None and entry.rejects is not None:
                found.add("input check")
            if outputs is RAISED or outputs is WRONG_TYPE:
                # (raising where the contract answers, it may answer other inputs in any form: a kv ignored raises
                # on a mask shaped for kv's keys, and gives weights of another shape elsewhere)
                found |= {"shape", "dtype"} if entry is None or entry.rejects is None else set()
                continue
            try:
                want = golden(probe)
            except (KeyError, FileNotFoundError):
                continue
            want = want if isinstance(want, tuple) else (want,)
            pairs = list(zip(outputs, want, strict=False))
            if len(outputs) != len(want) or any(np.shape(a) != np.shape(b) for a, b in pairs):
                found.add("shape")
            if any(np.asarray(a).dtype != np.asarray(b).dtype for a, b in pairs):
                found.add("dtype")
    return frozenset(found)


def matches(mistake: KnownMistake, observed: dict[str, tuple[np.ndarray, ...] | None]) -> bool:
    """True when ``observed`` reproduces every stored output of ``mistake``."""
    if not mistake.recognisable:
        return False
    return all(probe in observed and _same(observed[probe], expected) for probe, expected in mistake.outputs.items())


def _same(got: tuple[np.ndarray, ...] | None, expected: tuple[np.ndarray, ...] | None) -> bool:
    """The student's output is the mistake's (float32: within its rounding, which differs between formulas)."""
    if got is WRONG_TYPE or expected is WRONG_TYPE:
        return False
    if expected is RAISED or got is RAISED:
        return expected is got
    low = [a for a in expected if a.dtype.kind == "f" and a.dtype.itemsize < 8]
    if low:
        eps = max(float(np.finfo(a.dtype).eps) for a in low)
        return same_outputs(got, expected, rtol=max(MATCH_RTOL, 500 * eps), atol=max(MATCH_ATOL, 10 * eps))
    return same_outputs(got, expected, rtol=MATCH_RTOL, atol=MATCH_ATOL)


def _same_dtypes(got: Any, expected: Any) -> bool:
    if not isinstance(got, tuple) or not isinstance(expected, tuple) or len(got) != len(expected):
        return False
    return all(a.dtype == b.dtype and a.shape == b.shape for a, b in zip(got, expected, strict=True))


def _dtype_only_ids() -> frozenset[str]:
    """The known mistakes whose every stored output has the reference's values in another dtype."""
    from grader import course

    return _dtype_only_of(course.own_data(course.OWN_FINGERPRINTS, FINGERPRINT_FILE.parent))


@functools.cache
def _dtype_only_of(own: Path | None) -> frozenset[str]:
    """:func:`_dtype_only_ids` for the course whose own fingerprints are ``own`` (None: the kit's alone).

    Kept per course: a process that ran a course's check first (an xdist worker) kept that course's set for the
    kit's tests after it, and a broken softmax's attention was named a known mistake of attention's.
    """
    found = set()
    for mistake in load_fingerprints():
        ok = bool(mistake.outputs)
        for probe, outputs in mistake.outputs.items():
            try:
                want = golden(probe)
            except (KeyError, FileNotFoundError):
                ok = False
                break
            want = want if isinstance(want, tuple) else (want,)
            if outputs is RAISED or len(outputs) != len(want) or not all(
                    a.dtype != b.dtype and a.shape == b.shape and a.dtype.kind == b.dtype.kind == "f"
                    and np.allclose(a.astype(b.dtype), b, rtol=1e-5, atol=1e-6, equal_nan=True)
                    or a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
                    for a, b in zip(outputs, want, strict=True)):
                ok = False
                break
        if ok:
            found.add(mistake.id)
    return frozenset(found)


def _dtype_only(mistake: KnownMistake) -> bool:
    return mistake.id in _dtype_only_ids()


def _is_input_check(probe: str) -> bool:
    entry = load_all_probes().get(probe)
    return entry is not None and entry.rejects is not None


@dataclass(frozen=True)
class Candidate:
    """Known mistakes (or pairs of them planted together) that look the same on the probes: one explanation.

    Mistakes look alike only when the student reproduces all their outputs: then they share a candidate.
    """

    probes: frozenset[str]
    """The probes the mistakes change."""
    exact: frozenset[str]
    """Those of them on which the student's output is exactly theirs."""
    weight: int
    """How many mistakes each member is: 1, or 2 for a pair planted together."""
    label: str | None
    """None when the student reproduces every output (look-alikes share the candidate), else the member's id."""

    @classmethod
    def of(cls, probes: set[str], exact: frozenset[str], weight: int, label: str) -> Candidate:
        """The candidate of mistakes that change ``probes``, the student reproducing ``exact`` of them."""
        return cls(frozenset(probes), exact, weight, None if exact == frozenset(probes) else label)

    @property
    def input_check(self) -> bool:
        """A single mistake seen only in bad-input outcomes (a missing check)."""
        return self.weight == 1 and all(_is_input_check(p) for p in self.probes)


Members = dict[Candidate, list[tuple[KnownMistake, ...]]]


@dataclass(frozen=True)
class Rule:
    """One condition a catalogued mistake must meet to be a candidate for the student's outputs.

    ``holds(mistake, observation, deviating)``: ``deviating`` holds the probes of the exercise on which the
    student deviates. A new condition is one more entry of :data:`CANDIDATE_RULES`.
    """

    name: str
    why: str
    holds: Callable[[KnownMistake, Observation, frozenset[str]], bool]


def _reproduces_an_output(mistake: KnownMistake, observation: Observation, deviating: frozenset[str]) -> bool:
    exact = [p for p in mistake.outputs if _same(observation.outputs.get(p), mistake.outputs[p])]
    if any(mistake.outputs[p] is not RAISED for p in exact):
        return True
    # Unless it only changes dtypes and the student's dtypes are its dtypes: with another mistake, the values
    # differ too.
    return _dtype_only(mistake) and all(_same_dtypes(observation.outputs.get(p), mistake.outputs[p])
                                        for p in mistake.outputs)


CANDIDATE_RULES: tuple[Rule, ...] = (
    Rule("recognisable", "at least one of its outputs is a result: raising alone proves little",
         lambda mistake, observation, deviating: mistake.recognisable),
    Rule("within the deviations", "it changes no output the student gets right (nor one not observed): "
         "otherwise the student does not make it",
         lambda mistake, observation, deviating: bool(mistake.outputs) and set(mistake.outputs) <= deviating),
    Rule("an output reproduced", "the student gives exactly one of its outputs that is a result (raising where "
         "it raises proves little), or it only changes dtypes and the student's are its dtypes",
         _reproduces_an_output),
)


def candidates(exercise: str, observation: Observation, deviating: frozenset[str]) -> Members:
    """The candidate explanations of ``exercise``'s deviating probes, each with its mistakes (or pairs).

    A single mistake is one when every rule of :data:`CANDIDATE_RULES` holds for it; a pair planted together
    when it changes only deviating probes and the student reproduces one of its results.
    """
    found: Members = {}
    for mistake in load_fingerprints():
        if mistake.exercise == exercise and all(rule.holds(mistake, observation, deviating)
                                                for rule in CANDIDATE_RULES):
            probes = set(mistake.outputs)
            exact = frozenset(p for p in probes if _same(observation.outputs.get(p), mistake.outputs[p]))
            found.setdefault(Candidate.of(probes, exact, 1, mistake.id), []).append((mistake,))
    for pair in load_pairs():
        if pair.exercise != exercise or not set(pair.outputs) <= deviating:
            continue
        exact = frozenset(p for p in pair.outputs if pair.reproduced_by(observation.outputs.get(p), p))
        if any(pair.outputs[p] is not RAISED for p in exact):
            label = "+".join(m.id for m in pair.mistakes)
            found.setdefault(Candidate.of(set(pair.outputs), exact, 2, label), []).append(pair.mistakes)
    return found


def _search(keys: list[Candidate], target: set[str], max_size: int) -> list[Candidate] | None:
    """The unique smallest combination of candidates whose probes are exactly ``target``.

    Each probe of ``target`` must be reproduced exactly by a member, or touched by several members (two
    mistakes together change one output). None when there is no such combination, or more than one.
    """
    for size in range(1, max_size + 1):
        solutions = []
        for combo in itertools.combinations(keys, size):
            covered = set().union(*(set(key.probes) for key in combo))
            if covered != target:
                continue
            exact = set().union(*(set(key.exact) for key in combo))
            if all(p in exact or sum(p in key.probes for key in combo) > 1 for p in target):
                solutions.append(combo)
        if solutions:
            return list(solutions[0]) if len(solutions) == 1 else None
    return None


def explain_behaviour(found: Members, behaviour: set[str], observation: Observation,
                      max_size: int = 3) -> list[Candidate] | None:
    """The fewest mistakes (by count, a pair being two) whose candidates account for every deviating behaviour probe.

    Each probe must be reproduced exactly by one of them, or be the output of several of them made together
    (:func:`_made_together`). None when no set does, or when sets naming different mistakes do (say nothing).
    """
    movers = [key for key in found if not key.input_check]
    for weight in range(1, max_size + 1):
        options: dict[frozenset, list[Candidate]] = {}
        for size in range(1, weight + 1):
            for combo in itertools.combinations(movers, size):
                if sum(key.weight for key in combo) != weight:
                    continue
                ids = [m.id for key in combo for m in found[key][0]]
                if len(set(ids)) != len(ids):
                    continue  # a pair and one of its own mistakes
                if {p for key in combo for p in key.probes if p in behaviour} != behaviour:
                    continue
                exact = set().union(*(set(key.exact) for key in combo))
                if all(p in exact or _made_together(p, combo, found, observation) for p in behaviour):
                    named = frozenset(m.id for key in combo for group in found[key] for m in group)
                    options.setdefault(named, list(combo))
        if options:
            return next(iter(options.values())) if len(options) == 1 else None
    return None


def explain_input_checks(found: Members, rest: set[str], beside_behaviour: bool, observation: Observation,
                         max_size: int = 3) -> list[Candidate]:
    """The missing input checks that account for the deviating bad-input probes ``rest``.

    Each only where a catalogued one gives exactly the student's outcome; beside behaviour mistakes, only where
    the student's function really accepts the bad input (a function that rejects it with numpy's or its own
    message checks it: "I did not check" would be false).
    """
    extra = [key for key in found if key.input_check and set(key.probes) <= rest and key.exact == key.probes
             and (not beside_behaviour or all(_accepts(observation, p) for p in key.probes))]
    if not (rest and extra):
        return []
    chosen = _search(extra, rest, max_size)
    if chosen is None:
        chosen = [key for key in extra if not any(set(key.probes) & set(o.probes) for o in extra if o is not key)]
    return chosen


def explain(exercise: str, observation: Observation, max_size: int = 3) -> list[KnownMistake]:
    """The known mistakes of ``exercise`` that together account for every deviating probe of it.

    In steps: the candidates (:func:`candidates`, each catalogued mistake that passes every rule of
    :data:`CANDIDATE_RULES`, and the pairs planted together); the behaviour probes on which the student
    deviates must be exactly those of the chosen mistakes, the fewest that do and only when no other set of
    mistakes does (:func:`explain_behaviour`: otherwise nothing, a wrong diagnosis is worse than none); then
    the missing input checks, each named only when a catalogued one reproduces the student's outcome exactly
    (:func:`explain_input_checks`; one that none explains is left to :func:`unexplained_input_checks`, which the
    diagnosis says). An input-check mistake is never named alone while behaviour deviates.
    """
    functions = set(load_curriculum().exercise(exercise).functions)
    registry = load_all_probes()
    deviating = frozenset(p for p, entry in registry.items()
                          if entry.function in functions and observation.deviates.get(p, False))
    if not deviating:
        return []
    behaviour = {p for p in deviating if not _is_input_check(p)}
    found = candidates(exercise, observation, deviating)
    chosen: list[Candidate] = []
    if behaviour:
        chosen = explain_behaviour(found, behaviour, observation, max_size) or []
        if not chosen:
            return []
    rest = set(deviating) - set().union(*(set(key.probes) for key in chosen))
    chosen += explain_input_checks(found, rest, bool(behaviour), observation, max_size)
    return _named(found, chosen)


def _named(found: Members, chosen: list[Candidate]) -> list[KnownMistake]:
    """The mistakes of the chosen candidates, those that explain the most first (behaviour before input checks).

    Nothing when a chosen candidate holds several pairs: which two mistakes it is cannot be told.
    """
    named: list[KnownMistake] = []
    for key in sorted(chosen, key=lambda key: (all(_is_input_check(p) for p in key.probes), -len(key.probes))):
        if key.weight > 1 and len(found[key]) > 1:
            return []
        for group in found[key]:
            named += [m for m in group if m not in named]
    return named


def _made_together(probe: str, combo: list[Candidate] | tuple[Candidate, ...], found: Members,
                   observation: Observation) -> bool:
    """Whether the mistakes of ``combo`` that change ``probe`` give, made together, the student's output on it.

    Several mistakes that touch one output say nothing of what they give together: a stored pair of them
    (``load_pairs``) must reproduce the student's output, or they are no explanation of it (two mistakes
    that change the penalty's sign and its origin are not offered for a penalty whose sign is right).
    """
    touching = [key for key in combo if probe in key.probes]
    if len(touching) < 2:
        return False
    ids = {m.id for key in touching for group in found[key] for m in group}
    got = observation.outputs.get(probe)
    return any({m.id for m in pair.mistakes} <= ids and probe in pair.outputs and pair.reproduced_by(got, probe)
               for pair in load_pairs())


def _accepts(observation: Observation, probe: str) -> bool:
    """Whether the student's function accepted the bad input of ``probe`` (returned, raised no exception)."""
    outcome = observation.outputs.get(probe)
    return isinstance(outcome, tuple) and len(outcome) == 1 and str(outcome[0][()]) == "no exception"


def unexplained_input_checks(exercise: str, observation: Observation, mistakes: list[KnownMistake]) -> list[str]:
    """The functions of ``exercise`` whose bad-input probes deviate without a named mistake explaining them."""
    functions = load_curriculum().exercise(exercise).functions
    registry = load_all_probes()
    covered = {p for m in mistakes for p in m.outputs}
    bad = {registry[p].function for p, d in observation.deviates.items()
           if d and p in registry and registry[p].rejects is not None and registry[p].function in functions
           and p not in covered}
    return [f for f in functions if f in bad]


def diagnose(implementation: Any, exercise: str, observation: Observation | None = None) -> list[KnownMistake]:
    """The known mistakes of ``exercise`` that explain everything the implementation gets wrong on the probes.

    Nothing when a function the exercise relies on (of an earlier exercise, served by the student's own
    code) fails its own probes: the fingerprints were taken on the reference's other modules, and that
    function is the first thing to fix. Never raises: any problem gives an empty list.
    """
    try:
        observation = observation or observe_everything(implementation)
        curriculum = load_curriculum()
        functions = curriculum.exercise(exercise).functions
        bad = set(observation.deviating_functions(behaviour_only=True))
        for name in functions:
            outside = {c for c in callees(implementation, name, observation)
                       if curriculum.exercise_of_function(c).name != exercise}
            if outside & bad:
                return []
        return explain(exercise, observation)
    except Exception:
        return []


def describe(exercise: str, mistakes: list[KnownMistake], unchecked: list[str] = ()) -> str:
    """The diagnosis text put before a failure ('' when nothing matched).

    ``unchecked``: functions whose missing input check no named mistake explains (said after the hints).
    """
    if not mistakes:
        return ""
    text = _describe(exercise, mistakes)
    if unchecked:
        names = ", ".join(f"{name}()" for name in unchecked)
        text += (f"\nAlso: {names} does not reject some bad input with a ValueError naming the argument "
                 "(the test about that input says which, and what it did instead).")
    return text


def _describe(exercise: str, mistakes: list[KnownMistake]) -> str:
    """The diagnosis text: no more than the probes show.

    Mistakes that give the same outputs on every probe are look-alikes: "one of these". A mistake whose
    outputs differ from the reference in a single number (a function that returns one number: an accuracy,
    a count) is a look-alike of every mistake that gives that number, catalogued or not: "it may be".
    """
    if not mistakes:
        return ""
    try:
        module = load_curriculum().exercise(exercise).module_file
    except ValueError:
        module = f"{exercise}.py"
    groups = _look_alike_groups(mistakes)
    if len(groups) == 1 and len(groups[0]) == 1 and not _one_number(groups[0]):
        (mistake,) = mistakes
        return (f"Diagnosis: your {module} gives exactly the outputs of a known mistake:\n"
                f"  \"{mistake.description}\"\nHint: {mistake.hint}{_convention(mistake, '')}")
    if len(groups) == 1:
        (group,) = groups
        return "\n".join([f"Diagnosis: your {module} {_group_lead(group)}:", *_items(group, "  ")])
    # More than one mistake at once. Each hint stays with its own description, so the student can tell which
    # is which; a group of look-alikes says so.
    lines = [f"Diagnosis: your {module} gives exactly the outputs of {len(groups)} known mistakes made together:"]
    for group in groups:
        if len(group) == 1 and not _one_number(group):
            lines += _items(group, "  ")
        else:
            lines += [f"  - it {_group_lead(group)}:", *_items(group, "    ")]
    return "\n".join(lines)


def _items(group: list[KnownMistake], indent: str) -> list[str]:
    """Each mistake of ``group`` as two lines: its description, then its hint."""
    lines = []
    for mistake in group:
        lines += [f"{indent}- \"{mistake.description}\"", f"{indent}  Hint: {mistake.hint}"
                                                              f"{_convention(mistake, indent + '  ')}"]
    return lines


def _convention(mistake: KnownMistake, indent: str) -> str:
    """A line naming the library whose convention gives exactly this mistake's outputs ('' for none)."""
    convention = conventions.catalogued(mistake.id)
    return f"\n{indent}Or right code with another convention: {convention}." if convention else ""


def _group_lead(group: list[KnownMistake]) -> str:
    """What the probes show of a group of look-alikes (or of one mistake resting on a single number)."""
    if _one_number(group):
        functions = sorted({load_all_probes()[p].function for m in group for p in m.outputs
                            if p in load_all_probes()})
        where = " or ".join(f"{name}()" for name in functions) or "this exercise"
        which = "a known mistake" if len(group) == 1 else f"each of {len(group)} known mistakes"
        return (f"gives the same single number as {which}; one number cannot tell mistakes apart, so it may be "
                f"{'this one' if len(group) == 1 else 'one of these'}, or another mistake in {where}")
    return (f"gives exactly the outputs of one of {len(group)} known mistakes, which give the same outputs on "
            "every input the suite tries (yours cannot tell which)")


def _look_alike_groups(mistakes: list[KnownMistake]) -> list[list[KnownMistake]]:
    """``mistakes`` grouped by their outputs: a group's mistakes give the same ones on every probe."""
    groups: list[list[KnownMistake]] = []
    for mistake in mistakes:
        for group in groups:
            first = group[0]
            if set(first.outputs) == set(mistake.outputs) and all(
                    _same(mistake.outputs[p], first.outputs[p]) for p in first.outputs):
                group.append(mistake)
                break
        else:
            groups.append([mistake])
    return groups


def _one_number(group: list[KnownMistake]) -> bool:
    """Whether the group's outputs differ from the reference's in one number at most (a bad input aside).

    A mistake seen only in bad-input outcomes is not: the outcome names what was done with the input.
    """
    counts = []
    for mistake in group:
        count, behaviour = 0, False
        for probe, outputs in mistake.outputs.items():
            if outputs is RAISED or _is_input_check(probe):
                continue
            behaviour = True
            try:
                want = golden(probe)
            except (KeyError, FileNotFoundError):
                return False
            count += _numbers_that_differ(outputs, want if isinstance(want, tuple) else (want,))
        if behaviour:
            counts.append(count)
    return bool(counts) and max(counts) <= 1


def _numbers_that_differ(outputs: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> int:
    """How many numbers of ``outputs`` differ from the reference's ``want`` (another shape or dtype: at least 2)."""
    if len(outputs) != len(want):
        return sum(max(np.size(a), 2) for a in outputs)
    count = 0
    for a, b in zip(outputs, want, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            count += max(a.size, 2)  # a shape or a dtype is more than a number
        elif a.dtype.kind in "fc":
            count += int(np.sum(~np.isclose(a, b, rtol=DIFFER_RTOL, atol=DIFFER_ATOL, equal_nan=True)))
        else:
            count += int(np.sum(a != b))
    return count


# ----------------------------------------------------------------------------- families of mistakes


@dataclass(frozen=True)
class KnownFamily:
    """The transformation behind a family of mistakes (a missing scale, a reduction over another axis ...).

    Planted in one function of the reference by the instructors (``grader/mutants/families.toml``); only
    its probe outputs ship, as for a known mistake. ``description`` says what the student's outputs equal,
    ``revisit`` the idea to go back to, ``family`` the kind of transformation.
    """

    id: str
    exercise: str
    family: str
    description: str
    revisit: str
    outputs: dict[str, tuple[np.ndarray, ...] | None]


@functools.cache
def load_families(path: Path = FINGERPRINT_FILE) -> tuple[KnownFamily, ...]:
    """The family transformations stored with the fingerprints (empty when there are none)."""
    if not Path(path).is_file():
        return ()
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"][()]))
        found = []
        for entry in meta.get("families", []):
            outputs = {probe: RAISED if count is None
                       else tuple(data[fingerprint_key(entry["id"], probe, i)] for i in range(count))
                       for probe, count in entry["probes"].items()}
            found.append(KnownFamily(entry["id"], entry["exercise"], entry["family"], entry["description"],
                                     entry["revisit"], outputs))
    return tuple(found)


def explain_family(exercise: str, observation: Observation) -> KnownFamily | None:
    """The family transformation that accounts for every probe on which ``exercise`` deviates, or None.

    Named only when the transformation's probes are exactly the deviating ones (behaviour and bad input
    alike: a missing input check it does not have is not explained by it), the student reproduces every
    output of it exactly and at least one of them is a result (raising alone proves little), and no other
    family does: never a family that explains part of it.
    """
    functions = set(load_curriculum().exercise(exercise).functions)
    registry = load_all_probes()
    deviating = {p for p, entry in registry.items()
                 if entry.function in functions and observation.deviates.get(p, False)}
    if not deviating:
        return None
    found, precisions = [], set()
    for family in load_families():
        if family.exercise != exercise or set(family.outputs) != deviating or all(
                family.outputs[p] is RAISED for p in deviating):
            continue
        # The family's outputs exactly, or in another float precision (an adapter that computes in float64, as
        # torch's LinearBackward adapted: the family's transpose, and float64 where float32 was given).
        seen = [_same(observation.outputs.get(p), family.outputs[p])
                or _precision(observation.outputs.get(p), family.outputs[p]) for p in deviating]
        if all(seen):
            found.append(family)
            precisions |= {pair for pair in seen if isinstance(pair, tuple)}
    if len({family.description for family in found}) != 1 or len(precisions) > 1:
        return None
    if precisions:
        ((mine, want),) = precisions
        return replace(found[0], description=f"{found[0].description}; and it returns {mine} where the "
                                                         f"contract gives {want} (dtype in = dtype out)")
    return found[0]


def _precision(got: Any, expected: Any) -> tuple[str, str] | None:
    """(got's float dtype, expected's) when ``got`` is ``expected`` in another float precision only, else None."""
    if not isinstance(got, tuple) or not isinstance(expected, tuple) or len(got) != len(expected):
        return None
    changed = set()
    for a, b in zip(got, expected, strict=True):
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return None
        if a.dtype != b.dtype:
            if a.dtype.kind != "f":
                return None
            changed.add((a.dtype.name, b.dtype.name))
        low = min(a.dtype.itemsize, b.dtype.itemsize)
        eps = float(np.finfo(np.dtype(f"f{low}")).eps) if a.dtype.kind == "f" else 0.0
        if not np.allclose(a, b, rtol=max(MATCH_RTOL, 500 * eps), atol=max(MATCH_ATOL, 10 * eps), equal_nan=True):
            return None
    return changed.pop() if len(changed) == 1 else None


def diagnose_family(implementation: Any, exercise: str, observation: Observation | None = None) -> KnownFamily | None:
    """The family of mistakes that explains everything ``exercise`` gets wrong on the probes, or None.

    As :func:`diagnose`: nothing while a function of an earlier exercise that the exercise relies on fails
    its own probes. Never raises.
    """
    try:
        observation = observation or observe_everything(implementation)
        curriculum = load_curriculum()
        bad = set(observation.deviating_functions(behaviour_only=True))
        for name in curriculum.exercise(exercise).functions:
            if {c for c in callees(implementation, name, observation)
                    if curriculum.exercise_of_function(c).name != exercise} & bad:
                return None
        return explain_family(exercise, observation)
    except Exception:
        return None


def describe_family(exercise: str, family: KnownFamily | None) -> str:
    """The diagnosis text of a family of mistakes put before a failure ('' for None)."""
    if family is None:
        return ""
    try:
        module = load_curriculum().exercise(exercise).module_file
    except ValueError:
        module = f"{exercise}.py"
    return (f"Diagnosis (a family of mistakes: {family.family}): on every input where your {module} goes "
            f"wrong, {family.description}.\nRevisit: {family.revisit}")


_CRASH_LINE = re.compile(r"\bat (?P<file>[\w.-]+\.py) line (?P<line>\d+):")


def crashed_in(implementation: Any, observed: str) -> str | None:
    """The API function of the student's whose code holds the line a crash's ``observed`` text names, or None.

    ``observed`` is a crash failure's observed line (``... at backward.py line 12: ...``, the innermost line
    of the student's that raised). None when no line is named, the code is not here (the isolated worker)
    or the line lies in no API function (a helper of the student's).
    """
    found = _CRASH_LINE.findall(observed)
    if not found:
        return None
    file, line = found[-1][0], int(found[-1][1])
    for exercise in load_curriculum().exercises:
        if exercise.module_file != file:
            continue
        for name in exercise.functions:
            try:
                code = inspect.unwrap(implementation.function(exercise.name, name)).__code__
            except Exception:  # noqa: BLE001 - a proxy, a missing function: not known here
                continue
            lines = [number for _, _, number in code.co_lines() if number is not None]
            inside = bool(lines) and min(lines + [code.co_firstlineno]) <= line <= max(lines)
            if inside and Path(code.co_filename).name == file:
                return name
    return None
