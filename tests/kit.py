"""Load the implementation under test and call its functions for the tests.

The graded tests never import ``exercises`` or ``solutions`` directly. They
ask the ``impl`` fixture for a function by name (``impl.softmax(x)``) and
this module finds it in the folder chosen with ``--impl DIR``. The same
tests run unchanged against a different backend (the grader's isolated
worker) because both provide ``function(exercise, name)``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest
from pytest_check import check

from grader.curriculum import load as load_curriculum
from grader.curriculum import misnamed


class ImplementationError(Exception):
    """A module of the implementation could not be loaded."""


class Implementation(Protocol):
    """What the tests need from an implementation: its functions by name."""

    def function(self, exercise: str, name: str) -> Callable[..., Any]:
        """Return the callable ``name`` for a test of ``exercise``."""


def describe_import_error(module_file: str, error: BaseException) -> str:
    """Say in one line why ``module_file`` could not be imported."""
    if isinstance(error, SyntaxError):
        where = Path(error.filename or module_file).name
        return f"syntax error in {where} line {error.lineno}: {error.msg}"
    frames = traceback.extract_tb(error.__traceback__)
    inside = [frame for frame in frames if frame.filename.endswith(".py") and "importlib" not in frame.filename]
    where = f" ({Path(inside[-1].filename).name} line {inside[-1].lineno})" if inside else ""
    return f"importing {module_file} raised {type(error).__name__}: {error}{where}"


class LocalImplementation:
    """The modules of a folder, imported in this process (a student's run).

    The folder is imported as a package under a private name, so the
    relative imports between the modules (``from .softmax import softmax``)
    work for ``exercises/``, ``solutions/`` and any submission folder alike.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        if not self.path.is_dir():
            raise ImplementationError(f"--impl {path}: no such folder")
        digest = hashlib.sha1(str(self.path).encode()).hexdigest()[:10]
        self.package = f"_attention_kit_impl_{digest}"
        if self.package not in sys.modules:
            package = types.ModuleType(self.package)
            package.__path__ = [str(self.path)]
            package.__package__ = self.package
            sys.modules[self.package] = package
        self._failures: dict[str, str] = {}

    def module(self, name: str) -> types.ModuleType:
        """Import ``name.py`` from the folder, or raise ImplementationError."""
        if name in self._failures:
            raise ImplementationError(self._failures[name])
        if not (self.path / f"{name}.py").is_file():
            other = misnamed(self.path, f"{name}.py")
            rename = f" (found {other}: rename it to {name}.py)" if other else ""
            self._failures[name] = f"missing module {name}: {name}.py not found in {self.path}{rename}"
            raise ImplementationError(self._failures[name])
        try:
            return importlib.import_module(f"{self.package}.{name}")
        except Exception as error:  # any failure of student code at import
            self._failures[name] = describe_import_error(f"{name}.py", error)
            raise ImplementationError(self._failures[name]) from None

    def function(self, exercise: str, name: str) -> Callable[..., Any]:
        """Return ``name`` from the module that the manifest says defines it."""
        module_name = load_curriculum().exercise_of_function(name).name
        module = self.module(module_name)
        found = getattr(module, name, None)
        if not callable(found):
            raise ImplementationError(f"{module_name}.py defines no function {name}()")
        return found


def _arrays(value: Any, label: str) -> Iterator[tuple[str, np.ndarray]]:
    """Every array inside ``value`` (through dicts, lists and tuples), labelled."""
    if isinstance(value, np.ndarray):
        yield label, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _arrays(item, f"{label}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _arrays(item, f"{label}[{index}]")


def _labelled_arguments(function: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    """Name the arguments of a call by the function's parameter names."""
    try:
        bound = inspect.signature(function).bind_partial(*args, **kwargs)
        return dict(bound.arguments)
    except (TypeError, ValueError):
        return {f"argument {i + 1}": a for i, a in enumerate(args)} | kwargs


def _snapshot(arguments: dict[str, Any]) -> dict[str, np.ndarray]:
    """Copies of every array among the arguments, to notice in-place changes."""
    return {label: array.copy() for name, value in arguments.items() for label, array in _arrays(value, name)}


def _changed_in_place(arguments: dict[str, Any], before: dict[str, np.ndarray]) -> list[str]:
    """The labels of arrays that differ from their copies taken before the call."""
    after = dict(item for name, value in arguments.items() for item in _arrays(value, name))
    return [
        label
        for label, old in before.items()
        if label not in after
        or old.shape != after[label].shape
        or not np.array_equal(old, after[label], equal_nan=True)
    ]


class Kit:
    """The functions of the implementation under test, for one exercise's tests.

    ``kit.softmax(x)`` calls the implementation's ``softmax``. A stub that
    is not written yet, or a module that does not import, fails the test with
    a one-line message instead of a traceback. Every call also checks that
    array arguments come back unchanged.
    """

    def __init__(self, implementation: Implementation, exercise: str) -> None:
        self._implementation = implementation
        self._exercise = exercise

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        implementation, exercise = self._implementation, self._exercise

        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            failure = None
            try:
                function = implementation.function(exercise, name)
            except ImplementationError as error:
                failure = str(error)
            if failure is not None:  # raised outside `except`, so no chained traceback
                pytest.fail(failure, pytrace=False)
            arguments = _labelled_arguments(function, args, kwargs)
            before = _snapshot(arguments)
            try:
                result = function(*args, **kwargs)
            except NotImplementedError as error:
                failure = str(error) or f"{name}: not implemented yet"
            if failure is not None:
                pytest.fail(failure, pytrace=False)
            changed = _changed_in_place(arguments, before)
            if changed:
                check.fail(
                    f"{name}() changed its input {', '.join(changed)} in place.\n"
                    "  expected: the arguments are left exactly as they were\n"
                    "  observed: different values (or keys) after the call\n"
                    "  revisit:  no mutation of inputs: build new arrays (x = x - m, "
                    "not x -= m) and new dicts, so the caller's data stays intact"
                )
            return result

        call.__name__ = name
        return call
