"""Run the graded suite with ``pytest.main`` in this process, quietly.

``status``, ``watch``, the notebook checks and the batch grader all run
pytest in-process and read the results through a recording plugin. They
want the same thing: no output on the terminal, and none of the third-party
plugins that happen to be installed (each costs start-up time on every run).
"""

from __future__ import annotations

import contextlib
import io
import os
import types
from collections.abc import Callable, Iterator
from typing import Any

# What pytest reads from the environment besides its arguments: plugins found by their entry points, modules to
# load as plugins, and options added to every run (a shell's PYTEST_ADDOPTS=-x would stop a status table or a
# mutant's run at its first failure). The runs here take only the arguments they are given.
_ENVIRONMENT = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": None, "PYTEST_ADDOPTS": None}


@contextlib.contextmanager
def only_given_options() -> Iterator[None]:
    """Within: pytest loads no plugin it was not named with ``-p`` and adds no option from the environment."""
    saved = {key: os.environ.get(key) for key in _ENVIRONMENT}
    for key, value in _ENVIRONMENT.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_pytest(arguments: list[str], plugin: object) -> tuple[int, str]:
    """Run ``pytest.main(arguments)`` with ``plugin``; return its exit code and what it printed.

    Only plugins named with ``-p`` in ``arguments`` (and ``plugin``) are loaded, and no option comes from the
    environment (``PYTEST_ADDOPTS``).
    """
    import pytest

    sink = io.StringIO()
    with only_given_options(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = _in_a_chunk_of_its_own(lambda: pytest.main(arguments, plugins=[plugin]))
    return int(code), sink.getvalue()


def _room(call: Callable[[], Any]) -> Any:
    return call()


# CPython (3.11, 3.12) keeps a thread's frames in chunks of 16 KiB that it maps when a call does not fit in the
# current one and unmaps as soon as that call returns: a loop whose calls cross a chunk's end maps and unmaps one on
# every call. Nested in another pytest (a test's own run of the suite), a numerical-gradient training spent more
# time in the kernel doing that than in Python (16 of 26 CPU-s). A first frame of _ROOM_SLOTS slots (288 KB) gets a
# chunk of 512 KB of its own, and every frame of the run under it (a few dozen KB) fits in what it leaves.
# (An interpreter whose code objects take no such change runs the call as it is.)
_ROOM_SLOTS = 36_000
try:
    _in_a_chunk_of_its_own = types.FunctionType(
        _room.__code__.replace(co_varnames=_room.__code__.co_varnames + tuple(f"_{i}" for i in range(_ROOM_SLOTS)),
                               co_nlocals=_room.__code__.co_nlocals + _ROOM_SLOTS), globals(), "_in_a_chunk_of_its_own")
except (TypeError, ValueError):
    _in_a_chunk_of_its_own = _room
