"""Run the graded suite against a submission in the isolated worker.

Load with ``-p grader.sandbox.plugin`` and switch on with ``--isolated``::

    python -m pytest tests --impl path/to/submission -p grader.sandbox.plugin --isolated [--no-fair]

The ``impl`` fixture then calls the submission through
``grader.sandbox.proxy.IsolatedImplementation`` instead of importing it in the pytest
process. ``--no-fair`` grades every exercise with the student's own
dependencies (by default they come from the reference).
"""

from __future__ import annotations

from pathlib import Path

import pytest

_OPEN = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--isolated`` and ``--no-fair``."""
    group = parser.getgroup("attention-kit isolation")
    group.addoption("--isolated", action="store_true", default=False,
                    help="run the implementation under test in an isolated, resource-limited worker process")
    group.addoption("--no-fair", action="store_true", default=False,
                    help="with --isolated: use the student's own modules for each exercise's dependencies")


def pytest_configure(config: pytest.Config) -> None:
    """With ``--isolated``, make the ``impl`` fixture use the isolated worker."""
    if not config.getoption("--isolated"):
        return
    fair = not config.getoption("--no-fair")
    opened: list = []
    config.stash[_OPEN] = opened

    def factory(path: Path):
        from grader.sandbox.proxy import IsolatedImplementation

        implementation = IsolatedImplementation(path, fair=fair)
        opened.append(implementation)
        return implementation

    config.attention_kit_implementation = factory


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say how the implementation is isolated."""
    if not config.getoption("--isolated"):
        return None
    from grader.sandbox.limits import plan

    return f"attention-kit: isolated worker, {plan().summary}, fair={not config.getoption('--no-fair')}"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the workers."""
    for implementation in config.stash.get(_OPEN, []):
        implementation.close()
