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
        code = pytest.main(arguments, plugins=[plugin])
    return int(code), sink.getvalue()
