"""Measuring one call of student code from outside its worker: its peak memory and its CPU time; the diagnosis's calls.

Run by: the grading process, as part of ``grader.sandbox.proxy.IsolatedImplementation``
(this mixin's methods use the facade's worker, group and budget). The numbers
come from the kernel (the worker's memory control group, its CPU counters),
never from the worker, so the student's code cannot change them.
"""

from __future__ import annotations

import ast
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from grader.sandbox import cgroup
from grader.sandbox.budget import BudgetExhausted
from grader.sandbox.server import STARTUP_TIMEOUT


class Measuring:
    """The measuring methods of the isolated implementation (``tests.kit.Kit.measure``, ``tests.effort``)."""

    def measure(self, exercise: str, name: str, *args: Any, **kwargs: Any) -> tuple[Any, int | None]:
        """Call ``name`` in the worker and return ``(result, peak bytes its processes held beyond their usage before)``.

        The call runs in a fresh worker (its module imported within the call) and the peak is read from outside
        it, from its memory control group (``cgroup.WorkerGroup.peak``): every page its processes touch counts
        (malloc, mmap, memfd and shared memory, children, what the import holds), and the student's code cannot
        change the number. Where there is no group, or its peak cannot be read, the call is not measured:
        SandboxError, and the test is not graded (never a measurement the code could fool). See
        ``tests.kit.Kit.measure``.
        """
        call = self.function(exercise, name)  # imports the module, or raises ImplementationError
        # A fresh worker, its module imported during the call: what the student's code held before (at import,
        # in earlier calls) is not free for it, and a group's peak counts that code's every page since. The
        # libraries it imports are imported before the baseline: their pages are not the student's.
        self._stop()
        view = self.curriculum.exercise_of_function(name).name
        libraries = installed_imports(self.path / f"{view}.py")
        for _ in range(2):  # once more if the machine's load had the call run again on a fresh worker
            self._ready()
            # The view's sealed answers (the kit's bytes, not the student's) are given before the baseline, and the
            # libraries imported: the preload's reply says the worker has read both.
            try:
                self._send_sealed(view, time.monotonic() + STARTUP_TIMEOUT)
                self._request({"op": "preload", "modules": libraries}, [], "importing libraries", counted=False)
            except Exception:  # noqa: BLE001, S110 - then they come within the call, as before
                pass
            group = self._group
            baseline = group.start_peak() if group is not None else None
            if group is None or baseline is None:
                break
            result = call(*args, **kwargs)
            peak = group.peak() if self._group is group else None
            if peak is not None:
                return result, max(0, peak - baseline)
        raise self._internal(cgroup.unmeasured(f"{name}()", group))

    def forget(self) -> None:
        """Replace the worker by a fresh one at the next call: nothing the student's code kept in memory survives.

        Asked by the unseen-input gate (``tests.unseen``) of a function wrong on its drawn input, before the calls
        that tell a mistake from a table: code that keeps state could turn wrong on purpose once it met that input.
        """
        self._stop()

    def observing(self) -> AbstractContextManager[Callable[[], bool]]:
        """Inside, the calls are the kit's diagnosis (``tests.diagnosis.observe_everything``), on a budget of its own.

        Charged to ``budget.DIAGNOSIS`` (``Limits.diagnosis_seconds``), never to an exercise's budget: the feedback
        spends no test's time. Yields a function that tells whether that budget is spent (what was observed is
        incomplete: the diagnosis names nothing).
        """
        return self._budget.observing()

    def measure_cpu(self, exercise: str, name: str, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        """Call ``name`` in the worker and return ``(result, CPU seconds its processes used for the call)``.

        The seconds are read from outside the worker (its control group, or ``/proc``), as its budget is
        charged, so the student's code cannot change them; a call stopped at its CPU limit gives
        ``(None, inf)``. See ``tests.effort.cpu_call``.
        """
        try:
            result = self.function(exercise, name)(*args, **kwargs)
        except TimeoutError as error:
            if isinstance(error, BudgetExhausted):
                raise
            return None, math.inf
        return result, self._budget.last_cpu


def installed_imports(path: Path) -> list[str]:
    """The absolute imports of the student's module at ``path`` that are not files of their folder: libraries.

    Read as text, never run (``import asyncio``, ``from scipy.special import logsumexp``: ``asyncio``,
    ``scipy.special``). A relative import, or a name that a file or folder beside the module has, is the
    student's own and is never among them; a module that does not parse gives none.
    """
    try:
        stat = path.stat()
        key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
        names = _IMPORTS.get(key)
        if names is None:  # parsed once per version of the file (each measured call asks: 15 ms a parse)
            if len(_IMPORTS) >= 64:  # a few submissions' files: a grading process's memory is not the class's
                _IMPORTS.clear()
            names = _IMPORTS[key] = _absolute_imports(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    folder = path.parent
    return [name for name in names if not ((folder / f"{name.split('.')[0]}.py").exists()
                                           or (folder / name.split(".")[0]).exists())][:64]


_IMPORTS: dict[tuple[str, int, int, int], tuple[str, ...]] = {}  # (path, inode, size, mtime) -> its imports


def _absolute_imports(source: str) -> tuple[str, ...]:
    """The modules ``source`` imports by absolute name, in order of first appearance (raises if it does not parse)."""
    names: dict[str, None] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(dict.fromkeys(alias.name for alias in node.names))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names[node.module] = None
    return tuple(names)
