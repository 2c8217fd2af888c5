"""Speed-ups of private pytest code for the grading processes: THEY CHANGE NO GRADE.

Run by: each long-lived grading process (``grader.grading.session``), once
per process for the module-level patches and once per reused pytest session
for the session-level ones.

Every function here replaces a private pytest function or hook with one that
gives the same answer faster (remembered, or skipped where nothing reads it).
None changes what a test checks, how it is scored or what a student reads;
``grader/tests/test_speedups.py`` grades the same class with and without them
and compares the results. Each may stop applying on a pytest release (it then
does nothing, never fails). Each was kept only because
``benchmarks/grade_throughput.py`` showed it saves at least 5% of the grading
time on its own (figures: ``benchmarks/results/NOTES.md``).

Switch them all off with ``ATTENTION_KIT_NO_SPEEDUPS=1`` (the grading
processes read it when they start); a comma-separated list of names of
:data:`SPEEDUPS` switches off only those (used to measure them one by one).
"""

from __future__ import annotations

import os
from typing import Any

OFF_SWITCH = "ATTENTION_KIT_NO_SPEEDUPS"


def enabled(name: str) -> bool:
    """Whether the speed-up ``name`` (a key of :data:`SPEEDUPS`) is on (``ATTENTION_KIT_NO_SPEEDUPS`` unset)."""
    off = os.environ.get(OFF_SWITCH, "").strip()
    if not off or off == "0":
        return True
    return off != "1" and name not in {part.strip() for part in off.split(",")}


def patch_pytest() -> None:
    """Apply the module-level speed-ups that are on (once per process; a second call changes nothing)."""
    for name, patch in MODULE_SPEEDUPS.items():
        if enabled(name):
            patch()


def patch_session(session: Any) -> None:
    """Apply the speed-ups of one collected, reused pytest session that are on."""
    for name, patch in SESSION_SPEEDUPS.items():
        if enabled(name):
            patch(session)


def memoize_statement_ranges() -> None:
    """Make pytest find a traceback line's statement without re-parsing the whole test file each time.

    For every traceback entry of every failure, pytest parses the entry's file
    and walks its whole syntax tree to find where the statement starts and
    ends (``_pytest._code.source.getstatementrange_ast``): ~10 ms per failure,
    which adds up when a grading process formats thousands of failures. The
    answer depends only on the file's text and the line, so it is remembered.
    A private pytest function: if it is not there (another pytest), nothing changes.
    """
    try:
        from _pytest._code import code
    except ImportError:
        return
    original = getattr(code, "getstatementrange_ast", None)
    if original is None or getattr(original, "memoized_by_attention_kit", False):
        return
    answers: dict[tuple[str, int, bool], Any] = {}

    def getstatementrange_ast(lineno: int, source: Any, assertion: bool = False, astnode: Any = None) -> Any:
        key = (str(source), lineno, assertion)
        if key not in answers:
            if len(answers) > 5000:
                answers.clear()
            answers[key] = original(lineno, source, assertion=assertion, astnode=astnode)
        return answers[key]

    getstatementrange_ast.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    code.getstatementrange_ast = getstatementrange_ast


def memoize_request_fixture() -> None:
    """Make pytest's ``request`` fixture stop inspecting the same lambda's signature again and again.

    Each test that asks for ``request`` (the suite's ``impl`` fixture does) gets a fresh
    ``RequestFixtureDef`` three or four times per setup, and each one finds the arguments of its
    ``lambda: request`` with ``inspect.signature`` (~0.1 ms per test, the largest part of fixture
    setup). That lambda never takes any: the answer is remembered (``_pytest.compat.getfuncargnames``,
    as imported by ``_pytest.fixtures``, for that lambda only). Private pytest names: if they are not
    there (another pytest), nothing changes.
    """
    import types

    try:
        from _pytest import fixtures
    except ImportError:
        return
    original = getattr(fixtures, "getfuncargnames", None)
    definition = getattr(fixtures, "RequestFixtureDef", None)
    if original is None or definition is None or getattr(original, "memoized_by_attention_kit", False):
        return
    lambdas = [const for const in getattr(getattr(definition.__init__, "__code__", None), "co_consts", ())
               if isinstance(const, types.CodeType)]
    if len(lambdas) != 1:
        return
    (request_lambda,) = lambdas
    answers: dict[tuple, tuple[str, ...]] = {}

    def getfuncargnames(function: Any, *args: Any, **kwargs: Any) -> tuple[str, ...]:
        if args or getattr(function, "__code__", None) is not request_lambda:
            return original(function, *args, **kwargs)
        key = tuple(sorted(kwargs.items()))
        if key not in answers:
            answers[key] = original(function, **kwargs)
        return answers[key]

    getfuncargnames.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    fixtures.getfuncargnames = getfuncargnames


def memoize_code_paths() -> None:
    """Make pytest find the file of a traceback entry's code without a new path and a ``stat`` each time.

    For every failure, pytest cuts its traceback down to the test function
    (``_pytest.python.Function._traceback_filter``), asking every entry from
    its own runner's frames on for its code's file (``Code.path``: an absolute
    ``Path`` and an ``exists()`` check), about twenty per failure. The answer
    depends only on the file name (and, for a relative one, the working
    directory), so it is remembered per name. A private pytest property: if it
    is not there (another pytest), nothing changes.
    """
    try:
        from _pytest._code import code
    except ImportError:
        return
    prop = getattr(getattr(code, "Code", None), "path", None)
    if not isinstance(prop, property) or prop.fget is None or getattr(prop.fget, "memoized_by_attention_kit", False):
        return
    original = prop.fget
    answers: dict[tuple[str, str], Any] = {}

    def path(self: Any) -> Any:
        filename = getattr(self.raw, "co_filename", None)
        if not isinstance(filename, str):
            return original(self)
        key = (filename, "" if os.path.isabs(filename) else os.getcwd())
        if key not in answers:
            if len(answers) > 5000:
                answers.clear()
            answers[key] = original(self)
        return answers[key]

    path.memoized_by_attention_kit = True  # type: ignore[attr-defined]
    code.Code.path = property(path, doc=prop.__doc__)  # type: ignore[method-assign]


def remember_hook_proxies(session: Any) -> None:
    """Make a collected session answer ``item.ihook`` from memory.

    ``item.ihook`` asks the session which conftest files apply to the item's
    path (``Session.gethookproxy``), about ten times per test. Once the suite is
    collected, no conftest comes or goes: the answer per path is remembered.
    """
    original = session.gethookproxy
    proxies: dict[Any, Any] = {}

    def gethookproxy(fspath: Any) -> Any:
        proxy = proxies.get(fspath)
        if proxy is None:
            proxy = proxies[fspath] = original(fspath)
        return proxy

    session.gethookproxy = gethookproxy


# The terminal reporter's hooks that run for every phase of every test: they only print progress (a letter per
# test) and keep statistics for the summary, neither of which a reused session has.
PER_TEST_REPORTING = ("pytest_runtest_logstart", "pytest_runtest_logreport", "pytest_runtest_logfinish")


def quiet_per_test_reporting(config: Any) -> None:
    """Take the terminal reporter's per-test hooks out of a reused session.

    A reused session never prints its progress or a summary (what it prints goes into a buffer that
    nothing reads: ``grader.grading.session.Session.run`` decides the exit code from the recorder). The reporter stays
    registered for everything else (``config.get_terminal_writer()``, which pytest's assertion
    messages use, its warnings and its end of session); only the hooks of ``PER_TEST_REPORTING``
    are left out, by registering it again without them.
    """
    manager = config.pluginmanager
    reporter = manager.get_plugin("terminalreporter")
    if reporter is None:
        return
    manager.unregister(reporter)
    for name in PER_TEST_REPORTING:
        setattr(reporter, name, None)  # an attribute that is no function is no hook
    manager.register(reporter, "terminalreporter")




MODULE_SPEEDUPS = {"statement_ranges": memoize_statement_ranges, "request_fixture": memoize_request_fixture,
                   "code_paths": memoize_code_paths}
SESSION_SPEEDUPS = {"hook_proxies": remember_hook_proxies,
                    "per_test_reporting": lambda session: quiet_per_test_reporting(session.config)}
# Every speed-up by name (the names ATTENTION_KIT_NO_SPEEDUPS may list).
SPEEDUPS = (*MODULE_SPEEDUPS, *SESSION_SPEEDUPS)
