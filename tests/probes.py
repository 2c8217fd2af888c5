"""Fixed, seeded inputs ("probes") and their reference outputs ("golden" values).

Probes are declared next to the tests that use them, with the ``@probe``
decorator. A probe is a named call: a function of the API and a builder that returns
its arguments, always from a seeded generator, so every run sees the same
numbers. Tests use probes where the expected values cannot be derived from a
property (a whole multi-head output, the worked example). The reference
outputs live in ``tests/data/golden.npz``, written from ``solutions/`` by
``python -m grader.authoring.golden``; a check in ``grader/tests`` keeps them current.
The diagnosis of known mistakes runs the same probes.

Keys in the golden file are ``"<probe>"`` for a single array and
``"<probe>/<i>"`` for the i-th array of a tuple result.
"""

from __future__ import annotations

import functools
import importlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

GOLDEN_FILE = Path(__file__).parent / "data" / "golden.npz"


@dataclass(frozen=True)
class Probe:
    """A named, seeded call of one API function.

    A probe of bad input names the argument (``rejects``) that the function's
    ValueError must name; its output is then the outcome of the call, as a
    0-d string array (see :func:`rejection`), not the call's result.
    """

    name: str
    function: str
    build: Callable[[], tuple[tuple, dict]]
    rejects: str | None = None

    def arguments(self) -> tuple[tuple, dict]:
        """Fresh ``(args, kwargs)`` for the call (new arrays every time)."""
        return self.build()

    def call(self, function: Callable[..., Any]) -> Any:
        """Call ``function`` with fresh arguments: its result, or for bad input the outcome."""
        args, kwargs = self.arguments()
        if self.rejects is None:
            return function(*args, **kwargs)
        return rejection(function, args, kwargs, self.rejects)


def rejection(function: Callable[..., Any], args: tuple, kwargs: dict, argument: str) -> np.ndarray:
    """How ``function`` treats bad input, as a 0-d string array (NotImplementedError passes through).

    The reference gives "ValueError naming '<argument>'"; a missing check gives "no exception",
    "ValueError not naming ..." (numpy's own message) or another exception's type.
    """
    from tests.crash import raising_through

    try:
        with raising_through():
            function(*args, **kwargs)
    except NotImplementedError:
        raise
    except ValueError as error:
        named = "naming" if argument in str(error) else "not naming"
        return np.array(f"ValueError {named} {argument!r}")
    except Exception as error:  # student code may raise anything: the outcome is what we record
        return np.array(f"{type(error).__name__} instead of ValueError")
    return np.array("no exception")


PROBES: dict[str, Probe] = {}


def probe(
    function: str, *, rejects: str | None = None
) -> Callable[[Callable[[], tuple[tuple, dict]]], Callable[[], tuple[tuple, dict]]]:
    """Register the decorated builder as probe ``<function>/<builder name>``.

    ``rejects`` marks bad input: the probe records whether the call raises a
    ValueError naming that argument.
    """

    def register(build: Callable[[], tuple[tuple, dict]]) -> Callable[[], tuple[tuple, dict]]:
        name = f"{function}/{build.__name__}"
        if name in PROBES:
            raise ValueError(f"probe {name} is registered twice")
        PROBES[name] = Probe(name, function, build, rejects)
        return build

    return register


def _leaves(value: Any) -> list[np.ndarray]:
    """The arrays of an item of a tuple result; a dict gives its values in key order, nested dicts too."""
    if type(value) is dict:
        return [array for key in sorted(value) for array in _leaves(value[key])]
    return [np.asarray(value)]


def as_arrays(result: Any) -> tuple[np.ndarray, ...]:
    """A function's result as a tuple of arrays (dict results in key order).

    A tuple item that is a dict (the gradients of ``multi_head_attention_backward``,
    ``model_gradients``) contributes its arrays in key order, nested dicts included.
    """
    if isinstance(result, tuple):
        return tuple(array for item in result for array in _leaves(item))
    if isinstance(result, dict):
        return tuple(np.asarray(result[key]) for key in sorted(result) if not isinstance(result[key], dict))
    return (np.asarray(result),)


def result_kind(result: Any) -> str:
    """The structure of a function's result, for telling a list from an array: ``"t(a,d{a,a})"``, ``"s"`` ...

    ``a`` an array of at least one axis, ``s`` a number (0-d arrays included), ``l[...]`` a list,
    ``t(...)`` a tuple, ``d{...}`` a dict (in key order); anything else is its type's name.
    """
    if isinstance(result, tuple):
        return "t(" + ",".join(result_kind(item) for item in result) + ")"
    if isinstance(result, dict):
        return "d{" + ",".join(result_kind(result[key]) for key in sorted(result, key=str)) + "}"
    if isinstance(result, list):
        return "l[" + ",".join(sorted({result_kind(item) for item in result})) + "]"
    if isinstance(result, np.ndarray):
        return "a" if result.ndim else "s"
    if isinstance(result, (np.generic, float, int)):
        return "s"
    return type(result).__name__


KIND_SUFFIX = "/#kind"  # golden key of a probe's result structure (see result_kind)


def golden_kind(name: str) -> str | None:
    """The structure of the reference's result of probe ``name`` (None where the golden file has none)."""
    where = _golden_keys().get(name + KIND_SUFFIX)
    return None if where is None else str(_golden_array(where, name + KIND_SUFFIX))


def golden_keys(name: str, count: int) -> list[str]:
    """The keys of a probe's result arrays in the golden file."""
    return [name] if count == 1 else [f"{name}/{i}" for i in range(count)]


def golden_files() -> tuple[Path, ...]:
    """The golden files: the kit's, then that of the active course's own exercises (``grader/course.py``)."""
    from grader import course

    own = course.own_data(course.OWN_GOLDEN, GOLDEN_FILE.parent)
    return (GOLDEN_FILE,) if own is None else (GOLDEN_FILE, own)


@functools.cache
def _golden_file(path: Path = GOLDEN_FILE) -> Any:
    """A golden file, read once into memory; its arrays are decoded when a probe first asks for them."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python -m grader.authoring.golden` (instructors)")
    return np.load(io.BytesIO(path.read_bytes()), allow_pickle=False)  # an NpzFile: lazy, no open file


def _golden_keys() -> dict[str, Path]:
    return _keys_of(golden_files())


@functools.cache
def _keys_of(files: tuple[Path, ...]) -> dict[str, Path]:
    """Each key of the golden files -> the file holding it (the kit's first)."""
    found: dict[str, Path] = {}
    for path in reversed(files):
        found.update(dict.fromkeys(_golden_file(path).files, path))
    return found


@functools.cache
def _golden_array(path: Path, key: str) -> np.ndarray:
    return _golden_file(path)[key]


def golden_entry(key: str) -> np.ndarray | None:
    """The golden files' array under ``key`` (not a probe's: ``tests.api_signatures.KEY``), None where none holds it."""
    where = _golden_keys().get(key)
    return None if where is None else _golden_array(where, key)


def golden(name: str) -> np.ndarray | tuple[np.ndarray, ...]:
    """The reference output of probe ``name`` (a tuple for tuple results)."""
    keys = _golden_keys()
    if name in keys:
        return _golden_array(keys[name], name)
    parts = []
    while f"{name}/{len(parts)}" in keys:
        parts.append(_golden_array(keys[f"{name}/{len(parts)}"], f"{name}/{len(parts)}"))
    if not parts:
        raise KeyError(f"no golden value for probe {name}: run `python -m grader.authoring.golden` "
                       "(an exercise of your own: `attention-kit course check`)")
    return tuple(parts)


def forget_other(path: Path, always: bool = False) -> None:
    """Forget a test module named as ``path`` but imported from another file, and its probes.

    An instructor's own test files are imported by their names (as pytest
    imports them); one process that reads two course folders (``course check``
    after ``course exercise new``, the kit's own tests) must not keep the first's.
    ``always``: forget it even if it is that file (it may have been edited since).
    """
    import sys

    module = sys.modules.get(path.stem)
    if module is not None and (always or Path(getattr(module, "__file__", "") or "").resolve() != path.resolve()):
        del sys.modules[path.stem]
        for name in [name for name, entry in PROBES.items() if entry.build.__module__ == path.stem]:
            del PROBES[name]


def load_all_probes() -> dict[str, Probe]:
    """Import every graded test file (probes are defined next to their tests).

    An instructor's own exercise's test file (in its course folder) is imported
    as pytest imports it: by its name, from its folder put first on the path.
    """
    import sys

    from grader.curriculum import load

    here = Path(__file__).parent
    for exercise in load().exercises:
        path = exercise.test_path if exercise.home else here / Path(exercise.test_file).name
        if not path.is_file():
            continue
        if path.parent == here:  # the kit's tests package (a course folder that is the kit's, a Gradescope bundle)
            importlib.import_module(f"tests.{path.stem}")
        else:
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))
            forget_other(path)
            importlib.import_module(path.stem)
    # The probes of this manifest's functions only: a course's own exercise imported earlier in this process (an
    # xdist worker that ran a course's tests) stays registered, and read the kit's fingerprints as out of date.
    key = (id(load()), len(PROBES))
    if _CURRENT.get("key") != key:
        functions = {name for exercise in load().exercises for name in exercise.functions}
        _CURRENT.update(key=key, probes={name: entry for name, entry in PROBES.items() if entry.function in functions})
    return _CURRENT["probes"]


_CURRENT: dict[str, Any] = {}


# The keys a function's dict result must hold, where its docstring names them: others beside them are the
# student's own (a helper's honest round: a cache that also kept its length failed "a dict of 2 arrays").
DOCUMENTED_KEYS = {"kv_cache_append": ("k", "v")}


def expect_probe(impl: Any, name: str, *, what: str, idea: str, rtol: float = 1e-7, atol: float = 1e-9,
                 convention: Callable[..., str] | None = None) -> bool:
    """Run probe ``name`` through ``impl`` and compare with its golden output.

    ``convention(result, *args)``: the convention of another library that a single result follows, or ""
    (``tests/conventions.py``); named before ``idea``, even where the difference is as small as float32's.
    """
    from tests.feedback import expect, expect_close, expect_raises_value_error

    entry = PROBES[name]
    args, kwargs = entry.arguments()
    if entry.rejects is not None:
        return expect_raises_value_error(lambda: getattr(impl, entry.function)(*args, **kwargs),
                                         argument=entry.rejects, what=what, idea=idea)
    result = getattr(impl, entry.function)(*args, **kwargs)
    expected = golden(name)
    if not isinstance(expected, tuple):
        named = convention(result, *args) if convention is not None else ""
        return expect_close(result, expected, what=what, idea=f"{named}; {idea}" if named else idea, rtol=rtol,
                            atol=atol, tiny_term=named)
    if isinstance(result, dict):  # stored as its array values in key order (see as_arrays)
        keys = sorted(key for key, value in result.items() if not isinstance(value, dict))
        documented = DOCUMENTED_KEYS.get(entry.function, ())
        if len(keys) > len(expected) == len(documented) and set(documented) <= set(keys):
            keys = sorted(documented)  # (keys of the student's own beside them: a cache that keeps its length)
        if not expect(len(keys) == len(expected), what=what, expected=f"a dict of {len(expected)} arrays",
                      observed=f"a dict of {len(keys)}: {keys}", idea=idea):
            return False
        return all([
            expect_close(result[key], want, what=f"{what}[{key!r}]", idea=idea, rtol=rtol, atol=atol)
            for key, want in zip(keys, expected, strict=True)
        ])
    if not expect(isinstance(result, tuple) and len(result) == len(expected), what=what,
                  expected=f"a tuple of {len(expected)} arrays", observed=f"{type(result).__name__}"
                  + (f" of length {len(result)}" if isinstance(result, tuple) else ""), idea=idea):
        return False
    return all([
        expect_close(part, want, what=f"{what}, item {i} of the result", idea=idea, rtol=rtol, atol=atol)
        for i, (part, want) in enumerate(zip(result, expected, strict=True))
    ])
