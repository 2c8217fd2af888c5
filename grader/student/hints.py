"""``attention-kit hint EXERCISE [--level N]``: the manifest's hints, one level at a time.

An exercise with a ``hint_step`` in the manifest (all of Part I) has three
hints on that one step, the one students most often get stuck on: a
question, then the idea, then a precise pointer, none of them code (checked
by the kit's tests). Other exercises' hints are tips, one a level, each more
direct than the one before. The command is predictable on
purpose: without ``--level`` it shows level 1, and it always ends by naming
the command for the next level and the exercise's sections of the reading.
EXERCISE is a name or a number (``attention-kit hint 3``).
"""

from __future__ import annotations

import argparse
import sys
import textwrap

from grader.curriculum import load as load_curriculum

# What each of three levels is (the manifest's hints of an exercise, in order).
LEVELS = ("a question", "the idea", "a precise pointer")


def hint_text(name: str, level: int = 1) -> str:
    """The text shown for hint ``level`` of exercise ``name``.

    Parameters
    ----------
    name : str
        An exercise name from the manifest, or its number (``"1"``).
    level : int, optional
        1 for the first hint.

    Returns
    -------
    str
        The hint with its heading, and how to get the next one (or that it was the last).

    Raises
    ------
    ValueError
        If there is no such exercise (the message lists the names) or no hint ``level`` (below 1, or past the
        exercise's last hint: the message names the last).
    """
    curriculum = load_curriculum()
    exercise = curriculum.lookup(name)
    if level < 1:
        raise ValueError(f"--level must be 1 or more, got {level}")
    count = len(exercise.hints)
    heading = f"Exercise {exercise.number}, {exercise.name}: {exercise.title}"
    if exercise.name in curriculum.given_names():  # a Part III student reads softmax's hints to read its code
        heading += (f"\n(given in this course: {exercise.module_file} is working code you may read; "
                    "these hints are for writing it yourself)")
    if count == 0:
        return f"{heading}\nThis exercise has no hints. Read the docstrings in {exercise.module_file}."
    if level > count:
        raise ValueError(f"--level {level}: there is no hint {level}, {exercise.name} has {count} hints; the last "
                         f"one: attention-kit hint {exercise.name} --level {count}")
    body = textwrap.fill(exercise.hints[level - 1], width=88, initial_indent="  ", subsequent_indent="  ")
    kind = f", {LEVELS[level - 1]}" if count == len(LEVELS) else ""
    step = f" (on {exercise.hint_step})" if exercise.hint_step else ""
    lines = [f"{heading}\nHint {level} of {count}{kind}{step}:", body]
    if exercise.reading:
        lines.append("read: " + ", ".join(f"docs/reading.md#{section}" for section in exercise.reading))
    if level < count:
        after = f" ({LEVELS[level]})" if count == len(LEVELS) else ""
        lines.append(f"more{after}: attention-kit hint {exercise.name} --level {level + 1}")
    else:
        lines.append("That was the last hint. The docstrings in "
                     f"{exercise.module_file} and the failing test's message say the rest.")
    return "\n".join(lines)


def not_in_course(typed: str) -> str:
    """One line saying the exercise ``typed`` is not part of this course, or "" if it is (assigned or given).

    A Part III release has no exercise 4: ``attention-kit hint masks`` there hinted at a module it does not hold.
    """
    curriculum = load_curriculum()
    exercise = curriculum.lookup(typed)
    if exercise.name in curriculum.assigned_or_given():
        return ""
    numbers = ", ".join(str(item.number) for item in curriculum.selection())
    given = ", ".join(str(curriculum.exercise(name).number) for name in curriculum.given_names())
    return (f"exercise {exercise.number}, {exercise.name} is not part of this course (it has exercises {numbers}"
            + (f", and {given} given" if given else "") + ")")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attention-kit hint``."""
    parser.add_argument("exercise", metavar="EXERCISE",
                        help=f"the exercise's name or number: {', '.join(load_curriculum().names)}")
    parser.add_argument("--level", type=int, default=1, metavar="N",
                        help="which hint (1 = the gentlest, the default)")


def run(args: argparse.Namespace) -> int:
    """Print the hint; 2 for an unknown exercise or a bad level."""
    try:
        outside = not_in_course(args.exercise)
        if outside:
            raise ValueError(outside)
        print(hint_text(args.exercise, args.level))
    except ValueError as error:
        print(f"attention-kit hint: {error}", file=sys.stderr)
        return 2
    return 0
