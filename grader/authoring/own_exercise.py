"""``attention-kit course exercise new NAME --course DIR``: an exercise of the instructor's own, in the course folder.

It writes, into the course folder only (never the kit), from the templates
``grader/authoring/templates/own_*.tmpl`` (a small working example: centring
scores):

* ``solutions/NAME.py``: the reference, beside the kit's (private);
* ``tests/test_NAME.py``: its graded public tests, with the kit's helpers;
* ``hidden_tests/test_hidden_NAME.py``: its hidden tests (private);
* ``mutants/NAME.toml``: its catalogue of known mistakes, with one (private);

registers it in ``course.toml`` (an ``[[exercise]]`` table, its name in
``[course] exercises``; as text, so the file's comments stay) and runs
``attention-kit course check`` on it, which writes what the files imply (the
stub ``exercises/NAME.py``, the probes' reference outputs and the mistakes'
fingerprints in ``data/``) and proves it. From then on every command that
takes ``--course DIR`` grades, releases and builds it like the kit's own.

A bad or taken NAME stops the command with one line naming it, before
anything is written; if course.toml no longer loads afterwards, every file
written is taken back.
"""

from __future__ import annotations

import json
import keyword
import os
import re
from dataclasses import dataclass
from pathlib import Path

from grader import course
from grader.authoring.new_exercise import EXAMPLE_HINT_STEP, EXAMPLE_HINTS, RESERVED, TEMPLATES
from grader.curriculum import kit_manifest, load

NAME_RULE = re.compile(r"[a-z][a-z0-9_]*")
# As the course's private folders of ``course init`` (grader/authoring/course_init.py, which runs this command):
# the reference, the hidden tests and the catalogue are the instructor's alone.
PRIVATE_FOLDER, PRIVATE_FILE = 0o700, 0o600
EXAMPLE_FUNCTION_SEED = 7001  # the template's seeds: fixed, so every run of a new exercise sees the same numbers


class OwnExerciseError(ValueError):
    """An argument of ``course exercise new`` is bad: one line naming it and what is wrong."""


@dataclass(frozen=True)
class OwnExercise:
    """One new exercise of the instructor's own and where its files go (decided before anything is written)."""

    folder: Path
    """The course folder."""
    name: str
    """Its name: its module ``NAME.py`` and its marker."""
    title: str
    function: str
    """The public function of the example."""
    part: int
    points: float
    hidden_points: float

    @property
    def files(self) -> dict[str, tuple[Path, bool]]:
        """Template file name -> (the course file it becomes, whether it is private to the instructor)."""
        return {
            "own_solution.py.tmpl": (self.folder / course.REFERENCE_FOLDER / f"{self.name}.py", True),
            "own_test.py.tmpl": (self.folder / course.TESTS_FOLDER / f"test_{self.name}.py", False),
            "own_hidden_test.py.tmpl": (self.folder / course.HIDDEN_FOLDER / f"test_hidden_{self.name}.py", True),
            "own_mutants.toml.tmpl": (self.folder / course.CATALOGUE_FOLDER / f"{self.name}.toml", True),
        }


def _identifier(value: str, what: str) -> str:
    if not NAME_RULE.fullmatch(value) or keyword.iskeyword(value):
        raise OwnExerciseError(f"{what} {value!r}: use lower-case letters, digits and _, starting with a letter "
                               "(a Python module and function name that is not a keyword)")
    return value


def plan(folder: Path, name: str, *, title: str | None = None, function: str | None = None,
         part: int | None = None, points: float = 10, hidden_points: float = 2) -> OwnExercise:
    """Check the arguments against the course and decide the new exercise (writes nothing).

    Raises
    ------
    OwnExerciseError
        Naming the argument, if one is bad or ``name`` (or one of its files) is taken, or the course folder
        holds no reference to grade beside (``attention-kit course init DIR --kit CHECKOUT`` copies it).
    """
    folder = Path(folder).resolve()
    if not (folder / course.COURSE_FILE).is_file():
        raise OwnExerciseError(f"--course {folder}: no {course.COURSE_FILE} there "
                               f"(create one with `attention-kit course init {folder}`)")
    if not (folder / course.REFERENCE_FOLDER / "__init__.py").is_file():
        raise OwnExerciseError(f"--course {folder}: no copy of the kit's reference in {course.REFERENCE_FOLDER}/ "
                               "(your exercise's reference goes beside it): run `attention-kit course init "
                               f"{folder} --kit CHECKOUT --force` first")
    name = _identifier(name, "NAME")
    curriculum = load()
    kit = kit_manifest()
    if name in (*kit.names, *curriculum.names):
        raise OwnExerciseError(f"NAME {name!r}: an exercise of the kit or of course.toml already has that name")
    if name in set(kit.given_modules) | RESERVED | {"_checks", "_tasks"}:
        raise OwnExerciseError(f"NAME {name!r}: the kit already uses that name (a module or a marker)")
    function = _identifier(function if function is not None else name, "--function")
    owner = next((e.name for e in curriculum.exercises if function in e.functions), None)
    if owner is not None:
        raise OwnExerciseError(f"--function {function!r}: exercise {owner} already defines a function so named")
    if part is None:  # the course's part, else its last
        part = int(curriculum.part) if curriculum.part != "all" else max(int(p) for p in curriculum.parts)
    if isinstance(part, bool) or not isinstance(part, int) or part < 1:
        raise OwnExerciseError(f"--part {part!r}: a part is a positive whole number (1, 2, 3 ...)")
    for option, value in (("--points", points), ("--hidden-points", hidden_points)):
        if not value > 0 or not float(value * 16).is_integer():
            raise OwnExerciseError(f"--{option.strip('-')} {value!r}: more than 0, in sixteenths (10, 2.5, 0.0625)")
    title = (title if title is not None else name.replace("_", " ").capitalize()).strip()
    if not title or "\n" in title:
        raise OwnExerciseError(f"--title {title!r}: one line of text, not empty")
    new = OwnExercise(folder, name, title, function, part, float(points), float(hidden_points))
    taken = [path for path, _ in new.files.values() if path.exists()]
    if taken:
        raise OwnExerciseError(f"NAME {name!r}: {', '.join(str(p) for p in taken)} already exists")
    return new


def render(template: str, new: OwnExercise) -> str:
    """The text of the template ``template`` for ``new`` (every ``@@MARKER@@`` replaced)."""
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    for marker, value in (("@@NAME@@", new.name), ("@@TITLE@@", new.title), ("@@FUNCTION@@", new.function),
                          ("@@SEED@@", str(EXAMPLE_FUNCTION_SEED))):
        text = text.replace(marker, value)
    left = sorted(set(re.findall(r"@@\w+@@", text)))
    if left:
        raise OwnExerciseError(f"template {template}: unknown markers {', '.join(left)} (the kit is broken)")
    return text


def _toml(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, ensure_ascii=False)  # JSON's strings and lists are TOML's


def entry(new: OwnExercise) -> str:
    """The ``[[exercise]]`` table of ``new`` in course.toml."""
    hints = "".join(f"  {_toml(hint)},\n" for hint in EXAMPLE_HINTS)
    return (
        f"\n# An exercise of your own (attention-kit course exercise new): its reference is solutions/{new.name}.py,\n"
        f"# its tests tests/test_{new.name}.py and hidden_tests/test_hidden_{new.name}.py, its mistakes "
        f"mutants/{new.name}.toml.\n"
        "[[exercise]]\n"
        f"name = {_toml(new.name)}\n"
        f"title = {_toml(new.title)}\n"
        f"functions = {_toml([new.function])}  # the module's public functions, in the order they are taught\n"
        "depends = []  # the exercises (the kit's or yours) whose modules it imports: served from the reference\n"
        f"part = {new.part}\n"
        f"points = {_toml(new.points)}\n"
        f"hidden_points = {_toml(new.hidden_points)}\n"
        f"hint_step = {_toml(EXAMPLE_HINT_STEP)}\n"
        f"hints = [  # three levels: a question, the idea, a precise pointer (never code)\n{hints}]\n"
    )


def registered(text: str, name: str, title: str, table: str) -> str:
    """course.toml's ``text`` with an exercise registered: its ``table`` at the end, ``name`` in its exercises."""
    multi = re.search(r"(?ms)^exercises\s*=\s*\[[ \t]*(?:#[^\n]*)?\n(.*?)^\]", text)
    one = re.search(r"(?m)^exercises\s*=\s*\[([^\]\n]*?)\s*\]", text)
    if multi is not None:
        at = multi.end(1)
        text = text[:at] + f'  "{name}",  # yours: {title}\n' + text[at:]
    elif one is not None:
        at = one.end(1)
        text = text[:at] + ("" if one.group(1).rstrip().endswith(",") else ",") + f' "{name}"' + text[at:]
    return text.rstrip("\n") + "\n" + table


def table_of(entry: dict) -> str:
    """The ``[[exercise]]`` table of an own exercise as ``grader.course`` parsed it (to write course.toml anew)."""
    lines = [f"{key} = {_toml(float(value) if key.endswith('points') else value)}" for key, value in entry.items()]
    return "\n[[exercise]]\n" + "\n".join(lines) + "\n"


def create(new: OwnExercise) -> list[Path]:
    """Write the files of ``new`` and register it in course.toml; returns the files written.

    Raises
    ------
    OwnExerciseError
        If course.toml does not load with it (every file is then taken back).
    """
    texts = {path: (render(template, new), private) for template, (path, private) in new.files.items()}
    settings = new.folder / course.COURSE_FILE
    original = settings.read_text(encoding="utf-8")
    written: list[Path] = []
    try:
        for path, (text, private) in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER if private else 0o777)
            if private:
                path.parent.chmod(PRIVATE_FOLDER)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE if private else 0o644)
            with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
                stream.write(text)
            written.append(path)
        settings.write_text(registered(original, new.name, new.title, entry(new)), encoding="utf-8")
        course.read.cache_clear()
        load.cache_clear()
        try:
            curriculum = load()
        except ValueError as error:
            raise OwnExerciseError(f"{settings} does not load with the new exercise: {error}") from None
        if new.name not in curriculum.selected_names():
            raise OwnExerciseError(f"{settings}: the new exercise is not among the course's exercises "
                                   "(is [course] part another part?)")
    except BaseException:
        settings.write_text(original, encoding="utf-8")
        for path in written:
            path.unlink(missing_ok=True)
        course.read.cache_clear()
        load.cache_clear()
        raise
    return [*written, settings]
