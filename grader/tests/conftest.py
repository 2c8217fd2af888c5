"""Shared by the kit's own tests: the commands they start see a user's environment, not this run's options.

Options given to this pytest run through ``PYTEST_ADDOPTS`` (CI's ``--durations``, a developer's ``-x``) are
this run's own. The pytest runs that the tests start (a student's, a release's, the grader's) must not get
them: a ``-x`` would stop a run whose failures a test counts, a ``-v`` change an output a test reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_options_of_this_run_in_the_commands_it_starts() -> Iterator[None]:
    saved = os.environ.pop("PYTEST_ADDOPTS", None)
    yield
    if saved is not None:
        os.environ["PYTEST_ADDOPTS"] = saved
