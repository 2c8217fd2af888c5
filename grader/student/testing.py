"""``attention-kit test``: the graded pytest suite, wherever the kit is installed.

::

    attention-kit test                                   # your exercises/ folder
    attention-kit test -m softmax -x                     # one exercise, stop at the first failure
    attention-kit test --impl path/to/submission         # any folder holding the modules
    attention-kit test --impl solutions --hidden         # instructors: the reference, hidden tests too

Options the kit does not know (``-m``, ``-k``, ``-x``, ``-q`` ...) go to pytest
unchanged. This is the same run as ``pytest tests --impl DIR`` in a checkout of
the kit, but it also works from an installed kit (a wheel, a JupyterHub image,
Gradescope), where the suite lives inside the package: the command names the
kit's test folder, its configuration and its root for pytest.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.curriculum import ROOT, load, make_importable, reference_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attention-kit test`` (every other option goes to pytest)."""
    parser.add_argument("--impl", default="exercises", metavar="DIR",
                        help="folder holding the modules to test (default: exercises)")
    parser.add_argument("--hidden", action="store_true",
                        help="also run the instructors' hidden tests (the checkout's or the course folder's, "
                             "and the course folder's own)")
    parser.set_defaults(accepts_extra_arguments=True)


def pytest_arguments(impl: str, hidden: bool, extra: list[str]) -> list[str]:
    """The arguments of the pytest run: the kit's tests, config and root, then ``extra``."""
    folder = Path(impl)
    if not folder.is_dir() and impl == "solutions" and reference_dir() is not None:
        folder = reference_dir()  # the instructor's own reference: the course folder's, else the checkout's
    elif not folder.is_dir() and (ROOT / impl).is_dir():
        folder = ROOT / impl
    from grader.suite import graded_suite, hidden_folders

    hidden_dirs = hidden_folders() if hidden else []
    if hidden and not hidden_dirs:
        raise FileNotFoundError("--hidden: this copy of the kit has no hidden tests (the student package has none; "
                                "an instructor's are in the checkout or the course folder: --course DIR)")
    curriculum = load()
    if curriculum.selection() == curriculum.exercises and not curriculum.dropped:
        paths = [str(ROOT / "tests"), *map(str, hidden_dirs)]
    else:  # the course grades some exercises only: their test files, and those of the exercises it gives
        given = [curriculum.exercise(name).test_file for name in curriculum.given_names()]
        paths = [str(ROOT / path) for path in given if (ROOT / path).is_file()]
        paths += [test_file.path for test_file in graded_suite(hidden_dirs)[0]]
    return [*paths, "-c", str(ROOT / "pyproject.toml"), f"--rootdir={ROOT}", f"--impl={folder.resolve()}", *extra]


def run(args: argparse.Namespace) -> int:
    """Run pytest on the graded suite; returns pytest's exit status."""
    import os
    import shlex

    import pytest

    make_importable()
    # The command the suite's lines suggest for one exercise (tests/first_run.py): this one, not plain pytest, which
    # knows neither the kit's options nor where an installed kit keeps its tests.
    os.environ["ATTENTION_KIT_TEST_COMMAND"] = "attention-kit test" + (
        f" --impl {shlex.quote(args.impl)}" if args.impl != "exercises" else "") + (" --hidden" if args.hidden else "")
    try:
        arguments = pytest_arguments(args.impl, args.hidden, list(getattr(args, "extra_arguments", [])))
    except (FileNotFoundError, ValueError) as error:
        print(f"attention-kit test: {error}")
        return 4
    return int(pytest.main(arguments))
