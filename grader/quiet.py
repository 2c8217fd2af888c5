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
from collections.abc import Iterator


@contextlib.contextmanager
def _no_plugin_autoload() -> Iterator[None]:
    saved = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = saved


def run_pytest(arguments: list[str], plugin: object) -> tuple[int, str]:
    """Run ``pytest.main(arguments)`` with ``plugin``; return its exit code and what it printed.

    Only plugins named with ``-p`` in ``arguments`` (and ``plugin``) are loaded.
    """
    import pytest

    sink = io.StringIO()
    with _no_plugin_autoload(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = pytest.main(arguments, plugins=[plugin])
    return int(code), sink.getvalue()
