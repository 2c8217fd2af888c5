"""Start a new exercise: its reference, graded tests, hidden tests and catalogue, registered in the manifest.

Usage::

    python -m grader.authoring.new_exercise NAME [--title TITLE] [--part N] [--function FUNCTION]
                                                 [--reading SECTION] [--points P] [--hidden-points H]

With ``NN`` the next exercise number, this writes, from the templates in
``grader/authoring/templates/``:

* ``solutions/NAME.py``: the reference, with a teaching module docstring and
  one function ``FUNCTION`` (default: ``NAME``) with its numpydoc docstring;
* ``tests/test_NN_NAME.py``: the graded tests (properties, a rejected bad
  input and a probe compared with its golden value);
* ``grader/hidden_tests/test_hidden_NN_NAME.py``: the instructors' hidden tests;
* ``grader/mutants/NAME.toml``: the catalogue of known mistakes, with one;

and appends an ``[[exercise]]`` table to ``grader/curriculum.toml`` (as text:
the file's comments and layout stay), then loads the manifest to check it.
The templates hold a small working exercise (centring scores), so after the
regeneration commands it prints (``sync``, ``golden``, ``fingerprints``,
``mutants.docs``, ``readme``) the new exercise passes on the reference and
fails as "not implemented yet" on its stub; then replace the example by the
real exercise. CONTRIBUTING.md ("Adding an exercise") lists every step.

A bad or taken NAME (or another bad argument) stops the command with one
line naming the argument, before anything is written.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.curriculum import INSTALLED, MANIFEST, PACKAGE, ROOT, Curriculum, ManifestError, load

TEMPLATES = Path(__file__).resolve().parent / "templates"
NAME_RULE = re.compile(r"[a-z][a-z0-9_]*")
READING = ROOT / "docs" / "reading.md"
# Names that would shadow a module or a marker the kit already uses.
RESERVED = frozenset({"tests", "solutions", "exercises", "grader", "numpy", "conftest", "slow", "install"})

# The hints of the template's example: a question, then the idea, then a precise pointer; no code (the kit's own
# tests check that, in grader/tests/test_student_loop.py).
EXAMPLE_HINT_STEP = "subtracting each slice's own mean"
EXAMPLE_HINTS = (
    "Which entries should the mean go over: all of x, or only the entries of one slice along the axis? "
    "And what shape must it have to line up with x?",
    "Every slice along the axis gets its own mean, and subtracting it moves that slice's mean to zero while its "
    "differences stay; the other slices are shifted by their own means, not by this one.",
    "Take the mean along the given axis, keeping that axis with length one so it broadcasts against x, and "
    "subtract it from x. Reject an input without axes first, with a message that names x.",
)


class NewExerciseError(ValueError):
    """An argument of ``new_exercise`` is bad: one line naming it and what is wrong."""


@dataclass(frozen=True)
class NewExercise:
    """What one new exercise is called and where its files go (all decided before anything is written)."""

    name: str
    """The exercise's name: its module ``NAME.py``, its marker ``pytest -m NAME``."""
    number: int
    """Its position in the curriculum: the exercise after the manifest's last one."""
    title: str
    """The title of the README table, the status view and the notebooks."""
    part: int
    """The course part it belongs to (``--part``); a new number makes a new part."""
    function: str
    """The public function of the template's example."""
    reading: str
    """The anchor of the section of docs/reading.md it relies on."""
    points: float
    """The public tests' points, split equally between them."""
    hidden_points: float
    """The hidden tests' points, on top."""

    @property
    def files(self) -> dict[str, Path]:
        """Template file name -> the kit file it becomes."""
        return {
            "solution.py.tmpl": ROOT / "solutions" / f"{self.name}.py",
            "test.py.tmpl": ROOT / "tests" / f"test_{self.number:02d}_{self.name}.py",
            "hidden_test.py.tmpl": PACKAGE / "hidden_tests" / f"test_hidden_{self.number:02d}_{self.name}.py",
            "mutants.toml.tmpl": PACKAGE / "mutants" / f"{self.name}.toml",
        }

    @property
    def test_file(self) -> str:
        """The graded test file as the manifest names it."""
        return f"tests/test_{self.number:02d}_{self.name}.py"


def _toml(value: object) -> str:
    """``value`` (a string, number or list of strings) as a TOML value (JSON's strings are TOML basic strings)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, ensure_ascii=False)


def manifest_entry(new: NewExercise) -> str:
    """The ``[[exercise]]`` table of ``new``, in the manifest's own layout."""
    hints = "".join(f"  {_toml(hint)},\n" for hint in EXAMPLE_HINTS)
    return (
        "\n[[exercise]]\n"
        f"name = {_toml(new.name)}\n"
        f"title = {_toml(new.title)}\n"
        f"test_file = {_toml(new.test_file)}\n"
        f"functions = {_toml([new.function])}\n"
        "depends = []\n"
        f"part = {new.part}\n"
        f"reading = {_toml([new.reading])}\n"
        f"points = {_toml(new.points)}\n"
        f"hidden_points = {_toml(new.hidden_points)}\n"
        f"hint_step = {_toml(EXAMPLE_HINT_STEP)}\n"
        f"hints = [\n{hints}]\n"
    )


def render(template: str, new: NewExercise) -> str:
    """The text of the template file ``template`` for ``new`` (every ``@@MARKER@@`` replaced)."""
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    for marker, value in (("@@NAME@@", new.name), ("@@TITLE@@", new.title), ("@@NUMBER@@", str(new.number)),
                          ("@@FUNCTION@@", new.function), ("@@READING@@", new.reading),
                          ("@@SEED@@", str(new.number * 100 + 1))):
        text = text.replace(marker, value)
    left = sorted(set(re.findall(r"@@\w+@@", text)))
    if left:
        raise NewExerciseError(f"template {template}: unknown markers {', '.join(left)} (the kit is broken)")
    return text


def reading_sections() -> tuple[str, ...]:
    """The anchors of docs/reading.md's sections, in order."""
    return tuple(re.findall(r'<a id="([\w-]+)"></a>', READING.read_text(encoding="utf-8")))


def _identifier(value: str, what: str) -> str:
    if not NAME_RULE.fullmatch(value) or keyword.iskeyword(value):
        raise NewExerciseError(f"{what} {value!r}: use lower-case letters, digits and _, starting with a letter "
                               "(a Python module and function name that is not a keyword)")
    return value


def plan(curriculum: Curriculum, name: str, *, title: str | None = None, part: str | int | None = None,
         function: str | None = None, reading: str | None = None, points: float = 10,
         hidden_points: float = 2) -> NewExercise:
    """Check the arguments against the kit and decide the new exercise (writes nothing).

    Parameters
    ----------
    curriculum : Curriculum
        The kit's manifest as loaded now.
    name : str
        The exercise's name.
    title, part, function, reading, points, hidden_points
        As the command's options; None takes the default (a title from the
        name, the last exercise's part, ``name``, ``attention``).

    Raises
    ------
    NewExerciseError
        Naming the argument, if one is bad or ``name`` (or one of its files) is taken.
    """
    name = _identifier(name, "NAME")
    if name in curriculum.names:
        raise NewExerciseError(f"NAME {name!r}: exercise {curriculum.exercise(name).number} of the manifest "
                               "already has that name")
    taken = set(curriculum.given_modules) | RESERVED | {"_checks", "_tasks"}
    if name in taken:
        raise NewExerciseError(f"NAME {name!r}: the kit already uses that name (a module or a marker)")
    function = _identifier(function if function is not None else name, "--function")
    try:
        owner = curriculum.exercise_of_function(function)
    except ValueError:
        owner = None
    if owner is not None:
        raise NewExerciseError(f"--function {function!r}: exercise {owner.name} already defines a function so named")
    text = str(part if part is not None else curriculum.exercises[-1].part).strip()
    if not text.isdigit() or int(text) < 1:
        raise NewExerciseError(f"--part {part!r}: a part is a positive whole number (1, 2, 3 ...)")
    reading = reading if reading is not None else "attention"
    sections = reading_sections()
    if reading not in sections:
        raise NewExerciseError(f"--reading {reading!r}: not a section of docs/reading.md (its sections: "
                               f"{', '.join(sections)})")
    for option, value in (("--points", points), ("--hidden-points", hidden_points)):
        if not value > 0:
            raise NewExerciseError(f"{option} {value!r}: must be more than 0")
    title = (title if title is not None else name.replace("_", " ").capitalize()).strip()
    if not title or "\n" in title:
        raise NewExerciseError(f"--title {title!r}: one line of text, not empty")
    new = NewExercise(name=name, number=len(curriculum.exercises) + 1, title=title, part=int(text),
                      function=function, reading=reading, points=float(points), hidden_points=float(hidden_points))
    existing = [path for path in new.files.values() if path.exists()]
    existing += sorted((ROOT / "tests").glob(f"test_{new.number:02d}_*.py"))
    if existing:
        raise NewExerciseError(f"NAME {name!r}: {', '.join(p.relative_to(ROOT).as_posix() for p in existing)} "
                               "already exists")
    return new


def create(new: NewExercise, manifest: Path = MANIFEST) -> list[Path]:
    """Write the files of ``new`` and append its entry to ``manifest``; returns the files written.

    The manifest is loaded afterwards; if it no longer loads, or does not list
    ``new`` last, every file is taken back and the error raised.

    Raises
    ------
    NewExerciseError
        If the manifest does not load with the new entry.
    """
    texts = {path: render(template, new) for template, path in new.files.items()}
    original = manifest.read_text(encoding="utf-8")
    written: list[Path] = []
    try:
        for path, text in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
        manifest.write_text(original.rstrip("\n") + "\n" + manifest_entry(new), encoding="utf-8")
        try:
            checked = load.__wrapped__(manifest)  # not the cached manifest of before
        except ManifestError as error:
            raise NewExerciseError(str(error)) from None
        if checked.names[-1] != new.name or checked.exercises[-1].number != new.number:
            raise NewExerciseError(f"{manifest.name}: the new entry is not its last exercise (the kit is broken)")
    except BaseException:
        manifest.write_text(original, encoding="utf-8")
        for path in written:
            path.unlink(missing_ok=True)
        raise
    load.cache_clear()
    return [*written, manifest]


NEXT_STEPS = """
Next (CONTRIBUTING.md, "Adding an exercise", says why each step is there):
  python -m grader.authoring.sync            # exercises/{name}.py, the stub
  python -m grader.authoring.golden          # the probes' reference values
  python -m grader.authoring.fingerprints    # the catalogue's mistakes on the probes
  python -m grader.mutants.docs              # docs/common-mistakes.md
  python -m grader.authoring.readme          # the README's exercise table
  pytest tests grader/hidden_tests --impl solutions -m {name}   # passes on the reference
  pytest tests grader/hidden_tests -m {name}                    # fails on the stub: "not implemented yet"
Then replace the example (centring scores) by the exercise: the reference and its docstrings, the tests, the
hidden tests, the mistakes, the hints and the title in grader/curriculum.toml; and rerun the commands above."""


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.new_exercise",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("name", metavar="NAME", help="the exercise's name: its module NAME.py and its marker")
    parser.add_argument("--title", help="its title (default: from NAME)")
    parser.add_argument("--part", metavar="N",
                        help="its part of the course (default: the last exercise's); a new number makes a new part")
    parser.add_argument("--function", help="the example function's name (default: NAME)")
    parser.add_argument("--reading", help="the section of docs/reading.md it relies on (default: attention)")
    parser.add_argument("--points", type=float, default=10, help="the public tests' points (default: 10)")
    parser.add_argument("--hidden-points", type=float, default=2, help="the hidden tests' points (default: 2)")
    args = parser.parse_args(argv)
    prog = "new_exercise"
    if INSTALLED:
        print(f"{prog}: this kit is an installed copy; add exercises in a checkout of the repository",
              file=sys.stderr)
        return 2
    try:
        new = plan(load(), args.name, title=args.title, part=args.part, function=args.function,
                   reading=args.reading, points=args.points, hidden_points=args.hidden_points)
        written = create(new)
    except (NewExerciseError, ManifestError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    print(f"Exercise {new.number}, {new.name} (part {new.part}):")
    for path in written:
        print(f"  {'registered in' if path == MANIFEST else 'wrote'} {path.relative_to(ROOT).as_posix()}")
    print(NEXT_STEPS.format(name=new.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
