"""The run of a demo that measures something with the student's code: check, compute, print, draw.

Shared by ``attention-kit demo --explain`` and every ``demo --measure NAME``
(``grader/student/demo_NAME.py``): each says what it needs and how it
computes, prints and draws; this module resolves the folder (``--impl``, or
the reference with ``--reference``), refuses with the list of exercises that
do not pass yet, and writes the picture where ``--out`` says (the demo's own
file name when ``--out`` is left at the heatmap's default).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.student.picture import picture_target
from grader.student.status import DONE, SuiteResult, display_path, resolve_impl, run_suite

HEATMAP_OUT = "attention-demo.png"  # demo.py's default --out: the heatmap's


@dataclass(frozen=True)
class Measurement:
    """What one measuring demo needs and does."""

    command: str  # as the student typed it, e.g. "demo --measure negation"
    needs: tuple[str, ...]  # the exercises it runs (what they build on must pass too)
    uses: str  # what it does with them, e.g. "trains your models of exercise 12"
    compute: Callable[[Path, str], Any]  # (the folder, "your code" or "reference solution") -> a result
    summary_lines: Callable[[Any], list[str]]
    plot: Callable[[Any, Path], None]
    default_out: str  # the picture's file name when --out is left at the heatmap's
    caption: str


def outside_course(needs: tuple[str, ...]) -> list[str]:
    """Lines naming the exercises of ``needs`` (and what they build on) that this course neither assigns nor gives.

    A release ships the exercises it assigns and, as working code marked given, those they build on
    (``Curriculum.given_names``); a demo of another exercise has nothing to run (empty: all are here).
    """
    curriculum = load_curriculum()
    absent = [name for name in needs if name not in curriculum.names]
    if absent:  # a course folder's release leaves out what it neither assigns nor builds on
        return [f"  {name} is not part of this course (it has {_course_names(curriculum)})" for name in absent]
    here = set(curriculum.assigned_or_given())
    needed = dict.fromkeys([d for name in needs for d in curriculum.dependencies(name)] + list(needs))
    return [f"  {e.number}. {e.name} is not part of this course (it has {_course_names(curriculum)})"
            for e in curriculum.exercises if e.name in needed and e.name not in here]


def _course_names(curriculum: Any) -> str:
    """The exercises of the course, as a student reads them: "exercises 12-15, and 1-3, 5, 6, 8, 9 given"."""
    given = curriculum.given_names()
    numbers = ", ".join(str(e.number) for e in curriculum.selection())
    given_numbers = ", ".join(str(curriculum.exercise(name).number) for name in given)
    return f"exercises {numbers}" + (f", and {given_numbers} given" if given else "")


def missing_exercises(impl: Path, needs: tuple[str, ...]) -> list[str]:
    """Lines naming the exercises of ``needs`` (and what they build on) that do not pass yet (empty: all pass)."""
    curriculum = load_curriculum()
    outside = outside_course(needs)
    if outside:
        return outside
    needed = tuple(dict.fromkeys([d for name in needs for d in curriculum.dependencies(name)] + list(needs)))
    suite = run_suite(impl, needed, cached=True)  # an unchanged tree: the last results, in a tenth of a second
    return unfinished(suite, needed)


def unfinished(suite: SuiteResult, needed: Sequence[str]) -> list[str]:
    """Lines naming the exercises of ``needed`` whose tests do not all pass (empty: all pass).

    A given exercise (working code the course ships, ``Curriculum.given_names``) is the student's to finish
    only through what it builds on: while an assigned exercise under it fails, only that one is named; when
    none does, a failing given module was changed, and the line says to restore it.
    """
    curriculum = load_curriculum()
    given = set(curriculum.given_names())
    failing = {name for name in needed if suite[name].state != DONE}
    lines = []
    for name in needed:
        item = suite[name]
        if name not in failing:
            continue
        where = display_path(suite.impl / item.exercise.module_file)
        if name not in given:
            lines.append(f"  {item.exercise.number}. {name}: {item.passed}/{item.total} tests pass  ({where})")
        elif not failing & (set(curriculum.dependencies(name)) - given):
            lines.append(f"  {item.exercise.number}. {name} (given): {item.passed}/{item.total} tests pass: {where} "
                         "was changed; restore the given file (`git checkout -- "
                         f"exercises/{item.exercise.module_file}`)")
    return lines


def run_measurement(args: argparse.Namespace, measurement: Measurement) -> int:
    """Check that the needed exercises pass, compute, print the figures and draw them; the exit status."""
    reference = getattr(args, "reference", False)
    try:
        impl = resolve_impl(ROOT / "solutions" if reference else args.impl)
    except ValueError as error:
        print(f"attention-kit demo: {error}", file=sys.stderr)
        return 2
    outside = outside_course(measurement.needs)
    if outside:
        print(f"{measurement.command} {measurement.uses}, which this course does not hold:")
        print("\n".join(outside))
        return 1
    if not reference:
        try:
            missing = missing_exercises(impl, measurement.needs)
        except RuntimeError as error:
            print(f"attention-kit demo: {error}", file=sys.stderr)
            return 2
        if missing:
            print(f"{measurement.command} {measurement.uses}. Finish these first:")
            print("\n".join(missing))
            print("See where you are with `attention-kit status`.")
            return 1
    try:
        result = measurement.compute(impl, "reference solution" if reference else "your code")
    except Exception as error:  # the student's code passed its tests but failed here
        print(f"attention-kit {measurement.command} failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print("\n".join(measurement.summary_lines(result)))
    out, status = picture_target(args.out if args.out != HEATMAP_OUT else measurement.default_out, "picture")
    if out is None:
        return status
    measurement.plot(result, out)
    print(f"picture: {display_path(out.resolve())}")
    print(textwrap.fill(measurement.caption, width=100))
    return 0
