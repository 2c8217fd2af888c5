"""``attention-kit watch``: rerun the current exercise's tests every time you save.

The current exercise is the first unfinished one in curriculum order (or the
one named: ``attention-kit watch masks``, ``attention-kit watch 4``). The
watcher polls the size and modification time of the files in your folder
(polling works everywhere, also on WSL and network drives where change
notifications do not arrive). A saved module reruns its exercise, every
exercise that imports it (the manifest's ``depends``, followed through) and
the current one; a saved helper that is no exercise's module reruns
everything. An exercise that passed before and fails now is a regression: it
is shown first, with its first failure. Then the current exercise: how many
of its tests pass and its first failure. When all of them pass the watcher
checks the whole suite again and moves on to the next unfinished exercise.
Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from grader.curriculum import load as load_curriculum
from grader.scoring import number
from grader.student.hints import not_in_course
from grader.student.status import (
    DONE,
    ExerciseResult,
    SuiteResult,
    display_path,
    resolve_impl,
    run_command,
    run_suite,
)

Snapshot = dict[str, tuple[int, int]]


def snapshot(folder: Path) -> Snapshot:
    """Modification time and size of every file in ``folder`` (caches and hidden files left out)."""
    files: Snapshot = {}
    for directory, subdirectories, names in os.walk(folder):
        subdirectories[:] = [d for d in subdirectories if d != "__pycache__" and not d.startswith(".")]
        for name in names:
            if name.startswith(".") or name.endswith((".pyc", "~", ".swp")):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.stat(path)
            except OSError:  # deleted between listing and stat (an editor's temporary file)
                continue
            files[os.path.relpath(path, folder)] = (info.st_mtime_ns, info.st_size)
    return files


def changed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """Files added, removed or modified between two snapshots, sorted."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def describe(result: ExerciseResult, impl: Path) -> list[str]:
    """The status line of one exercise and, unless it passes, its first failure."""
    exercise = result.exercise
    line = f"exercise {exercise.number}, {exercise.name}: {result.passed}/{result.total} tests pass"
    if result.state == DONE:
        return [line + " - done"]
    lines = [line + f" ({result.label})"]
    failure = result.first_failure
    if failure is not None:
        lines.append(f"  first failing test: {failure.name}")
        lines.extend("    " + text if text else text for text in failure.message.splitlines())
    lines += [
        f"  edit:  {display_path(impl / exercise.module_file)}",
        f"  run:   {run_command(exercise, impl)}",
        f"  stuck? attention-kit hint {exercise.name}",
    ]
    return lines


def course_exercise(typed: str) -> str:
    """The name of the exercise ``typed`` (a name or number) if this course assigns it.

    Raises
    ------
    ValueError
        One line: the kit has no such exercise (the names, closest first), or the course gives it as working
        code, or the course does not hold it (a Part III release has no exercise 4 to watch).
    """
    curriculum = load_curriculum()
    exercise = curriculum.lookup(typed)
    assigned = curriculum.selection()
    if exercise in assigned:
        return exercise.name
    numbers = ", ".join(str(item.number) for item in assigned)
    given = curriculum.given_names()
    if exercise.name in given:
        raise ValueError(f"exercise {exercise.number}, {exercise.name} is given in this course: working code to "
                         f"read, not yours to write (its tests: pytest -m {exercise.name}); watch one of "
                         f"exercises {numbers}")
    raise ValueError(not_in_course(typed))


class Watcher:
    """The state of a watch session; :meth:`step` is one iteration of the loop.

    Parameters
    ----------
    impl : str or pathlib.Path
        The folder holding the student's modules.
    runner : callable, optional
        ``runner(impl, exercises)`` returning a :class:`~grader.student.status.SuiteResult`; the tests
        pass a fake to count runs.
    """

    def __init__(self, impl: str | Path = "exercises",
                 runner: Callable[..., SuiteResult] = run_suite, exercise: str | None = None) -> None:
        # Pyc files record the source's mtime in whole seconds; two saves in one second could be served
        # from a stale cache. Not writing them avoids that for everything this process imports.
        sys.dont_write_bytecode = True
        self.impl = resolve_impl(impl)
        self.runner = runner
        self.seen: Snapshot = snapshot(self.impl)
        self.current: str | None = None
        self.chosen = course_exercise(exercise) if exercise else None  # ValueError if unknown or not assigned
        self.finished: dict[str, bool] = {}  # exercise -> did all its tests pass at its last run

    def _regressions(self, result: SuiteResult, besides: str | None = None) -> list[str]:
        """Each exercise (but ``besides``) that passed at its last run and fails now, with its first failure.

        Remembers ``result`` as the latest run of its exercises.
        """
        lines: list[str] = []
        for item in result.exercises:
            name = item.exercise.name
            if name != besides and self.finished.get(name) and item.state != DONE:
                lines += [f"REGRESSION: exercise {item.exercise.number}, {name} passed before and fails now"]
                lines += describe(item, self.impl) + [""]
        for item in result.exercises:
            self.finished[item.exercise.name] = item.state == DONE
        return lines

    def check_all(self) -> list[str]:
        """Run the whole suite, pick the current exercise and describe it (regressions first)."""
        result = self.runner(self.impl)
        regressions = self._regressions(result)
        if self.chosen is not None and result[self.chosen].state != DONE:
            self.current = self.chosen
            item = result[self.chosen]
        elif result.current is None:
            self.current = None
            return regressions + [f"All {result.total} tests of every exercise pass. Well done! "
                                  "Try `attention-kit demo` to see your attention at work."]
        else:
            self.chosen = None  # the named exercise passes: from now on, the first unfinished one
            item = result.current
            self.current = item.exercise.name
        overall = (f"overall: {result.passed}/{result.total} tests, "
                   f"{number(result.points)}/{number(result.max_points)} points")
        return regressions + describe(item, self.impl) + [overall]

    def affected(self, changed: list[str]) -> list[str]:
        """The exercises to rerun after ``changed`` files: theirs, those importing them, and the current one."""
        curriculum = load_curriculum()
        modules = {exercise.module_file: exercise.name for exercise in curriculum.exercises}
        touched: set[str] = set()
        for path in changed:
            if not path.endswith(".py"):
                continue  # notes, data: no test reads them
            if path not in modules:  # a helper module (or one in a subfolder): anything may import it
                return list(curriculum.names)
            touched.add(modules[path])
        rerun = {name for name in curriculum.names if touched & {name, *curriculum.dependencies(name)}}
        if self.current is not None:
            rerun.add(self.current)
        return [name for name in curriculum.names if name in rerun]

    def check_changed(self, changed: list[str]) -> list[str]:
        """Rerun what ``changed`` touched: regressions first, then the current exercise.

        When the current exercise passes, the whole suite runs again and the next
        unfinished exercise becomes the current one.
        """
        if self.current is None:
            return self.check_all()
        names = self.affected(changed)
        result = self.runner(self.impl, names)
        lines = self._regressions(result, besides=self.current)
        current = result[self.current]
        if current.state != DONE:
            return lines + describe(current, self.impl)
        # Check everything again: the next exercise, and that nothing earlier broke meanwhile.
        return lines + describe(current, self.impl) + ["", "Moving on."] + self.check_all()

    def check_current(self) -> list[str]:
        """Rerun the current exercise; when it passes, move on to the next unfinished one."""
        return self.check_changed([])

    def poll(self) -> list[str]:
        """Files changed since the last look (and remember the new state)."""
        now = snapshot(self.impl)
        changed = changed_files(self.seen, now)
        self.seen = now
        return changed

    def step(self, settle: float = 0.2) -> list[str] | None:
        """One iteration: if a file changed, rerun the tests and return the lines to show.

        Parameters
        ----------
        settle : float, optional
            Seconds to wait for the files to stop changing (an editor may write in steps).

        Returns
        -------
        list of str or None
            None when nothing changed.
        """
        changed = self.poll()
        if not changed:
            return None
        while settle > 0:
            time.sleep(settle)
            more = self.poll()
            if not more:
                break
            changed = sorted(set(changed) | set(more))
        try:
            report = self.check_changed(changed)
        except RuntimeError as error:  # the suite itself could not run; keep watching
            report = [str(error)]
        return [f"changed: {', '.join(changed)}"] + report


def _show(lines: list[str], stream: TextIO) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"--- {stamp} " + "-" * 60, file=stream)
    print("\n".join(lines), file=stream, flush=True)


def watch(watcher: Watcher, interval: float = 1.0, stream: TextIO | None = None,
          iterations: int | None = None) -> None:
    """Show the current exercise, then poll every ``interval`` seconds until Ctrl-C.

    ``iterations`` bounds the number of polls (for tests); None polls forever.
    """
    stream = stream or sys.stdout
    _show(watcher.check_all(), stream)
    print(f"Watching {display_path(watcher.impl)} for changes (every {interval:g} s). Ctrl-C stops.",
          file=stream, flush=True)
    count = 0
    while iterations is None or count < iterations:
        time.sleep(interval)
        lines = watcher.step()
        if lines is not None:
            _show(lines, stream)
        count += 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attention-kit watch``."""
    parser.add_argument("exercise", nargs="?", metavar="EXERCISE",
                        help="the exercise to watch, by name or number (default: the first unfinished one)")
    parser.add_argument("--impl", default="exercises", metavar="DIR",
                        help="folder holding your modules (default: exercises)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                        help="how often to look for changes (default: 1)")
    parser.add_argument("--once", action="store_true",
                        help="check once, show the current exercise and exit")


def run(args: argparse.Namespace) -> int:
    """Watch until Ctrl-C (or check once with ``--once``)."""
    if args.interval <= 0:
        print(f"attention-kit watch: --interval must be positive, got {args.interval}", file=sys.stderr)
        return 2
    try:
        watcher = Watcher(args.impl, exercise=getattr(args, "exercise", None))
        if args.once:
            _show(watcher.check_all(), sys.stdout)
            return 0
        watch(watcher, args.interval)
    except ValueError as error:
        print(f"attention-kit watch: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nStopped watching.")
    return 0
