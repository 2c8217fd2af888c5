"""``attention-kit course init DIR``: make an instructor's course folder (``grader/course.py`` reads it).

It writes ``DIR/course.toml`` (every setting, commented, with the kit's values),
``DIR/hidden_tests/`` for the instructor's own extra hidden tests, and copies
the reference (``DIR/solutions/``), the kit's hidden tests
(``DIR/kit_hidden_tests/``), the catalogue of known mistakes
(``DIR/mutants/``) and the kit's given implementations (``DIR/given/``, working
code of the exercises a release gives rather than assigns) from the
instructor's checkout (``--kit PATH``, or the running kit when it is one),
so that the grader, installed from the
student-safe package, grades from the instructor's own copy. Those folders
(and ``hidden_tests/``) are the instructor's alone: mode 0700, their files 0600
(:func:`private_folder`, :func:`private_copy`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from grader import course
from grader.authoring import own_exercise
from grader.curriculum import PACKAGE, ROOT, Curriculum, kit_manifest

HIDDEN_README = """\
# Your own hidden tests

Every `test_*.py` file here is graded with the kit's hidden tests, after the
public tests of its exercise. The conventions are those of the kit's hidden
tests (`grader/hidden_tests/__init__.py` in the kit's repository):

```python
EXERCISE = "softmax"   # the exercise whose tests these are (a name of course.toml's exercises)
POINTS = 2             # what the file's tests share, on top of the exercise's points (multiples of 1/16)


def test_rows_of_one_sum_to_one(impl):
    ...
```

Use the `impl` fixture (`impl.softmax(x)`) and the helpers of the public
suite (`tests.kit`). A file of an exercise that course.toml drops is not graded.
Run them on the reference with `attention-kit test --course .. --impl solutions --hidden`.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit course``."""
    actions = parser.add_subparsers(dest="course_action", metavar="ACTION", required=True)
    init = actions.add_parser("init", help="write DIR/course.toml and DIR/hidden_tests/, copy the reference",
                              description="Make a course folder: a commented course.toml with the kit's settings, "
                                          "a folder for your own hidden tests, and a copy of the reference and the "
                                          "kit's hidden tests from your checkout.")
    init.add_argument("folder", type=Path, metavar="DIR", help="the course folder (made if missing)")
    init.add_argument("--kit", type=Path, default=None, metavar="PATH",
                      help="your checkout of the kit, whose solutions/, hidden tests, mistakes and given code are "
                           "copied (default: the running kit, when it is a checkout)")
    init.add_argument("--force", action="store_true", help="overwrite an existing course.toml")
    where = {"default": None, "metavar": "DIR",
             "help": "the course folder (default: $ATTENTION_KIT_COURSE, else the working folder's course.toml)"}
    exercise = actions.add_parser("exercise", help="add an exercise of your own to the course folder",
                                  description="Exercises of your own, in the course folder (never the kit).")
    new = exercise.add_subparsers(dest="exercise_action", metavar="ACTION", required=True).add_parser(
        "new", help="write a working example exercise (reference, tests, hidden tests, a mistake) and register it",
        description="Write a working example exercise of your own into the course folder: its reference "
                    "(solutions/NAME.py), public tests (tests/test_NAME.py), hidden tests, a catalogued mistake "
                    "(mutants/NAME.toml); register it in course.toml; then check it (course check).")
    new.add_argument("name", metavar="NAME", help="its name: its module NAME.py (lower case, digits, _)")
    new.add_argument("--course", **where)
    new.add_argument("--title", help="its title (default: from NAME)")
    new.add_argument("--function", help="the example function's name (default: NAME)")
    new.add_argument("--part", type=int, default=None, dest="exercise_part", metavar="N",  # not the selection's
                     help="its part (default: the course's, else its last)")
    new.add_argument("--points", type=float, default=10, help="its public tests' points (default: 10)")
    new.add_argument("--hidden-points", type=float, default=2, help="its hidden tests' points (default: 2)")
    check = actions.add_parser("check", help="prove every exercise: reference passes, stub fails, mistakes caught",
                               description="Prove every exercise of the course (yours and the kit's): the reference "
                                           "passes its public and hidden tests, the stub fails cleanly, every "
                                           "catalogued mistake is caught; name what to fix otherwise (exit 1).")
    check.add_argument("--course", **where)
    check.add_argument("--exercise", action="append", default=[], metavar="NAME",
                       help="only this exercise (repeatable)")
    check.add_argument("--full", action="store_true",
                       help="prove every exercise again, also those unchanged since the last check")


def course_toml(curriculum: Curriculum) -> str:
    """The commented ``course.toml`` with the kit's own settings (what a course starts from)."""
    from grader.sandbox.limits import Limits

    limits = Limits()
    width = max(len(name) for name in curriculum.names) + 5
    parts = ", ".join(f'"{part}"' for part in curriculum.parts) + ' or "all"'
    lines = [
        "# An attention-kit course: the settings every command reads when run with --course DIR,",
        "# with ATTENTION_KIT_COURSE=DIR, or in this folder. What this file leaves out is the kit's own",
        "# (grader/curriculum.toml). A setting that does not fit the kit stops every command with one line.",
        "",
        "[course]",
        f"title = {_quote(curriculum.title)}",
        f'part = "{curriculum.part}"  # {parts}: the part graded, listed and counted ("--part" overrides)',
        "# The exercises of the course, any mix of parts. Delete a line to drop an exercise: its tests,",
        "# hidden tests and points go with it (its [points] lines below are then ignored). What a kept",
        "# exercise needs and this list leaves out is given: served from the reference, neither graded nor counted.",
        "exercises = [",
    ]
    for exercise in curriculum.exercises:
        needs = f", needs {', '.join(exercise.depends)}" if exercise.depends else ""
        lines.append(f"  {_quote(exercise.name) + ',':<{width}}# {exercise.number}: {exercise.title} "
                     f"(part {exercise.part}{needs})")
    lines += ["]", "", "# The points of each exercise's public tests (multiples of 1/16, split between its tests).",
              "[points]"]
    lines += [f"{exercise.name} = {exercise.points:g}" for exercise in curriculum.exercises]
    lines += ["", "# The points of the kit's hidden tests of each exercise, on top (your own hidden tests in",
              "# hidden_tests/ carry theirs in POINTS).", "[hidden_points]"]
    lines += [f"{exercise.name} = {exercise.hidden_points:g}" for exercise in curriculum.exercises]
    lines += [
        "",
        "# What student code may use.",
        "[limits]",
        f"submission_seconds = {limits.student_seconds:g}  # CPU seconds of student code for each exercise of one "
        "submission (grade --budget)",
        f"call_seconds = {limits.call_timeout:g}  # CPU seconds one call may use (grade --call-budget)",
        f"cpu_seconds = {limits.cpu_seconds:g}  # CPU seconds of one worker process",
        f"memory_mib = {limits.memory_bytes >> 20}  # memory of one worker process, in MiB",
        "",
        "[hidden]",
        "# When students see the hidden tests' results on Gradescope: " + ", ".join(course.VISIBILITIES) + ".",
        f'visibility = "{course.DEFAULT_VISIBILITY}"',
        "",
        "# The assignment of canvas.csv (attention-kit export, grade --roster); the options of export override it.",
        "[canvas]",
        f"assignment_name = {_quote(curriculum.title or 'attention-kit')}",
        '# assignment_id = "123456"  # the number ending the assignment\'s address: imports into that column',
        "# One Canvas column per exercise, each filling an existing assignment (its id); with this table,",
        "# grade --roster writes the per-exercise columns. Changing [canvas] regrades nobody.",
        "# [canvas.exercise_ids]",
        f"# {curriculum.names[0]} = 123457",
        "",
        "# Late penalties (docs/term.md): every started day after the deadline costs per_day of the score;",
        "# later than max_days days scores 0. Submission times come from grade --times CSV (id,submitted_at).",
        "# Changing [late] or [extensions] regrades nobody: every output is recomputed from the stored results.",
        "# [late]",
        '# deadline = "2026-10-01T23:59:00+02:00"  # ISO 8601, with the offset',
        "# per_day = 0.1",
        "# max_days = 3",
        "",
        "# Extra days for some students: their deadline moves by that many days.",
        "# [extensions]",
        '# "student-id" = 2',
        "",
    ]
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# The course's private folders (the reference, the hidden tests, the catalogue) are the instructor's alone: not
# even their group reads them (a worker's user, a teaching assistant's account, a shared JupyterHub image).
PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600


def private_folder(folder: Path) -> None:
    """Make ``folder`` (and its parents) if missing, then readable, writable and listable by its owner alone.

    The mode is set before anything is copied in, so no file of it is ever readable by others on its way in.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    folder.chmod(PRIVATE_FOLDER)


def private_copy(source: Path, target: Path) -> None:
    """Copy the file ``source`` to ``target``, readable and writable by its owner alone (never the source's mode)."""
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(source.read_bytes())
    os.chmod(target, PRIVATE_FILE)  # a file that was there keeps no other mode


def reference_source(kit: Path | None) -> tuple[Path, Path, Path, Path] | None:
    """The ``solutions/``, hidden tests, catalogue and given code folders to copy: of ``kit`` (a checkout), else ours.

    Raises
    ------
    ValueError
        If ``kit`` is given but holds no reference.
    """
    if kit is not None:
        solutions, hidden = Path(kit) / "solutions", Path(kit) / "grader" / "hidden_tests"
        if not (solutions / "__init__.py").is_file():
            raise ValueError(f"--kit {kit}: no solutions/ there (give your checkout of the kit's repository)")
        return solutions, hidden, Path(kit) / "grader" / "mutants", Path(kit).joinpath("grader", *course.KIT_GIVEN)
    if (ROOT / "solutions" / "__init__.py").is_file():
        return ROOT / "solutions", PACKAGE / "hidden_tests", PACKAGE / "mutants", PACKAGE.joinpath(*course.KIT_GIVEN)
    return None


def init(folder: Path, kit: Path | None = None, force: bool = False, echo=print) -> int:
    """Make the course folder ``folder``; returns the exit status."""
    target = Path(folder)
    if (target / course.COURSE_FILE).exists() and not force:
        echo(f"error: {target / course.COURSE_FILE} exists; edit it, or pass --force to write it anew")
        return 2
    try:
        source = reference_source(kit)
    except ValueError as error:
        echo(f"error: {error}")
        return 2
    try:  # the instructor's own exercises stay: their tables in course.toml, their files in the copied folders
        own = course.read(target.resolve()).own if (target / course.COURSE_FILE).exists() else ()
    except course.CourseError:
        own = ()
    course.read.cache_clear()
    text = course_toml(kit_manifest())
    for entry in own:
        text = own_exercise.registered(text, entry["name"], entry["title"], own_exercise.table_of(entry))
    private_folder(target / course.HIDDEN_FOLDER)
    (target / course.COURSE_FILE).write_text(text, encoding="utf-8")
    readme = target / course.HIDDEN_FOLDER / "README.md"
    if not readme.exists():
        readme.write_text(HIDDEN_README, encoding="utf-8")
        readme.chmod(PRIVATE_FILE)
    echo(f"Wrote {target / course.COURSE_FILE} and {target / course.HIDDEN_FOLDER}/ (your own hidden tests).")
    if source is None:
        echo(f"No reference copied: this kit has none (it is the student-safe package). Grading needs it: "
             f"rerun with --kit CHECKOUT (your checkout of the kit) to copy it into {target}.")
        return 0
    solutions, hidden, catalogue, given = source
    for name, origin, patterns in ((course.REFERENCE_FOLDER, solutions, ("*.py",)),
                                   (course.KIT_HIDDEN_FOLDER, hidden, ("test_*.py",)),
                                   (course.CATALOGUE_FOLDER, catalogue, ("*.toml",)),
                                   (course.GIVEN_FOLDER, given, ("*.py", "verified.json"))):
        destination = target / name
        if destination.exists() and not own:
            shutil.rmtree(destination)
        elif destination.exists():  # the kit's files go, those of the instructor's own exercises stay
            for path in destination.iterdir():
                if path.is_file() and path.stem not in {entry["name"] for entry in own}:
                    path.unlink()
        private_folder(destination)
        for path in sorted(path for pattern in patterns for path in origin.glob(pattern)):
            private_copy(path, destination / path.name)
    echo(f"Copied the reference ({solutions}) into {target / course.REFERENCE_FOLDER}/, the kit's hidden tests "
         f"into {target / course.KIT_HIDDEN_FOLDER}/, its catalogue of known mistakes into "
         f"{target / course.CATALOGUE_FOLDER}/ and its given implementations into {target / course.GIVEN_FOLDER}/: "
         "keep this folder private.")
    echo(f"Use it: attention-kit grade SUBMISSIONS --course {target} (or run the commands in {target}).")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``attention-kit course``."""
    if args.course_action == "init":
        return init(args.folder, args.kit, args.force, echo=lambda line: print(line, file=sys.stderr)
                    if line.startswith("error:") else print(line))
    folder = course.active_folder()  # activated from --course by the command line, as for every command
    if folder is None:
        print("error: --course DIR: no course folder given (nor $ATTENTION_KIT_COURSE, nor ./course.toml)",
              file=sys.stderr)
        return 2
    from grader.authoring import course_check

    if args.course_action == "check":
        try:
            return course_check.main_check(folder, tuple(args.exercise), args.full)
        except ValueError as error:
            print(f"error: --exercise: {error}", file=sys.stderr)
            return 2
    from grader.authoring import own_exercise

    try:
        new = own_exercise.plan(folder, args.name, title=args.title, function=args.function, part=args.exercise_part,
                                points=args.points, hidden_points=args.hidden_points)
        written = own_exercise.create(new)
    except own_exercise.OwnExerciseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"Exercise {new.name} (part {new.part}), yours, in {folder}:")
    for path in written:
        print(f"  {'registered in' if path.name == course.COURSE_FILE else 'wrote'} {path.relative_to(folder)}")
    status = course_check.main_check(folder, (new.name,))
    print(f"Now make it yours: edit solutions/{new.name}.py, tests/test_{new.name}.py, "
          f"hidden_tests/test_hidden_{new.name}.py, mutants/{new.name}.toml and its [[exercise]] in course.toml, "
          f"then run `attention-kit course check --course {folder}` (docs/own-exercise.md).")
    return status
