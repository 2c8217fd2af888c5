"""The ``attention-kit`` command line (also ``python -m grader``).

Each subcommand lives in its own module of ``grader`` with two functions,
``add_arguments(parser)`` and ``run(args) -> int``; this file only wires them
up and imports a module when its command runs, so ``attention-kit hint``
does not pay for what ``attention-kit grade`` needs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator

# command -> (module in grader, one-line help). Order = order in --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "status": ("student.status", "show your progress through the exercises"),
    "test": ("student.testing", "run the graded pytest suite (pytest's own output; works installed or in a checkout)"),
    "hint": ("student.hints", "show a hint for an exercise, one level at a time"),
    "watch": ("student.watch", "rerun the current exercise's tests whenever you save"),
    "demo": ("student.demo", "reproduce the reading's worked example with your code, with a heatmap "
                             "(docs/reading.md#worked-example)"),
    "grade": ("grading.grade", "grade a folder of submissions (instructors)"),
    "export": ("grading.export", "export a graded class for LMS gradebooks: Canvas CSV, long CSV (instructors)"),
    "similarity": ("grading.similarity", "find the students whose modules look alike, with side-by-side reports "
                                         "(instructors; the extra [similarity])"),
    "release": ("authoring.release", "build the student repository (instructors)"),
    "gradescope": ("grading.gradescope", "build a Gradescope autograder bundle (instructors)"),
    "notebooks": ("authoring.notebooks", "build an nbgrader course from the exercises (instructors)"),
    "mutants": ("mutants.report", "run the catalogue of known mistakes against the suite (instructors)"),
    "course": ("authoring.course_init", "make a course folder: course.toml, your hidden tests, the reference "
                                        "(instructors)"),
}


# Commands that grade, list or build for the course's selection of exercises (`--part`).
PART_COMMANDS = ("status", "watch", "test", "grade", "similarity", "release", "gradescope", "notebooks")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(prog="attention-kit", description="The self-attention exercise kit.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from grader.curriculum import load as load_curriculum

    parts = load_curriculum().parts  # from the manifest: a new part needs no change here
    for command, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(f"grader.{module_name}")
        except ModuleNotFoundError as error:
            if error.name and error.name.startswith("grader."):
                continue  # a command not shipped in this release (e.g. the student copy)
            raise
        sub = commands.add_parser(command, help=help_text, description=help_text)
        module.add_arguments(sub)
        if command in PART_COMMANDS:
            sub.add_argument("--part", default=None, metavar="|".join((*parts, "all")),
                             help="the exercises of the course: one part of the manifest, or all "
                                  "(default: the manifest's [course] part)")
        if command != "course":
            sub.add_argument("--course", default=None, metavar="DIR",
                             help="the course folder (its course.toml); default: $ATTENTION_KIT_COURSE, "
                                  "else ./course.toml if there is one, else the kit's own manifest")
        sub.set_defaults(handler=module.run)
    return parser


def course_option(argv: list[str]) -> str | None:
    """The value of ``--course DIR`` (or ``--course=DIR``) in ``argv``, read before the parser exists.

    The course changes the manifest every command's options are built from, so it
    is found first (``grader/course.py``); the parser then accepts the same option.
    """
    for index, word in enumerate(argv):
        if word == "--":
            break
        if word == "--course" and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--course="):
            return word.split("=", 1)[1]
    return None


def argv_is_grade(argv: list[str] | None) -> bool:
    """Whether the command line is ``grade`` (its failures are said as "not graded")."""
    words = sys.argv[1:] if argv is None else argv
    return bool(words) and words[0] == "grade"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Every command runs inside :func:`quiet_exit`: a closed pipe
    (``attention-kit watch --once | head``) or Ctrl-C ends it without a traceback.
    """
    from grader.curriculum import make_importable

    make_importable()  # the commands import the graded suite's helpers (`tests.kit` ...) from the kit
    from grader import course
    from grader.curriculum import ManifestError, load

    words = sys.argv[1:] if argv is None else list(argv)
    try:
        if words[:2] != ["course", "init"]:  # `course init` makes a course; it reads none
            course.activate(course.find(course_option(words)))
        load()  # every command reads the manifest: a broken one is said in one line, never a traceback
    except (ManifestError, course.CourseError) as error:
        print(f"error: not graded: {error}" if argv_is_grade(argv) else f"error: {error}", file=sys.stderr)
        return 2
    with quiet_exit() as status:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "accepts_extra_arguments", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.extra_arguments = extra
        if getattr(args, "part", None) is not None:
            from grader.curriculum import select_part

            try:
                select_part(args.part)
            except ValueError as error:
                parser.error(f"--part: {error}")
        if getattr(args, "handler", None) is None:
            parser.print_help()
            return 0
        status.code = int(args.handler(args) or 0)
    return status.code


class _Status:
    code = 0


# Exit statuses of a process ended by a signal, as a shell reports them (128 + signal number).
EXIT_BROKEN_PIPE = 128 + 13
EXIT_INTERRUPTED = 128 + 2


@contextlib.contextmanager
def quiet_exit() -> Iterator[_Status]:
    """End a command quietly on a closed pipe or Ctrl-C, with the exit status a shell expects.

    A reader that stops early (``| head``) closes the pipe: the rest of the
    output is dropped (stdout is pointed at ``os.devnull`` so that Python's
    final flush does not fail again) and the status is 141. Ctrl-C prints
    ``interrupted`` on stderr and gives 130. Used by ``main`` for every
    command, so no command needs its own handler.
    """
    status = _Status()
    try:
        yield status
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        status.code = EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        with contextlib.suppress(OSError, ValueError):
            print("\ninterrupted", file=sys.stderr)
        status.code = EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
