"""The files a student release writes rather than copies: README, pyproject.toml, the Classroom workflow.

Each is written from the manifest and the kit's own files: the student
README (set-up, the loop, the exercises in order), a ``pyproject.toml``
without the reference package or the instructors' extras, the GitHub
Classroom autograding workflow (one step per exercise, its points from the
manifest, from the template in ``grader/release_files/``) and the manifest
with the course's part when one is chosen. Nothing here reads or writes the
release folder.

Called by ``grader.authoring.release``. Imports only the standard library.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from grader.authoring.release_allowlist import STUDENT_EXTRAS, instructor_only
from grader.curriculum import PACKAGE, kit_manifest

TEMPLATES = PACKAGE / "release_files"
PYTHON_FOR_CLASSROOM = "3.11"
EXERCISE_TIMEOUT_MINUTES = 5


def manifest_with_part(text: str, part: str) -> str:
    """The manifest's text with ``part = "..."`` set in its ``[course]`` table (everything else unchanged)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == "[course]"), None)
    if start is None:
        return f'[course]\npart = "{part}"\n\n' + text
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    for index in range(start + 1, end):
        if re.match(r"\s*part\s*=", lines[index]):
            lines[index] = f'part = "{part}"\n'
            break
    else:
        lines.insert(start + 1, f'part = "{part}"\n')
    result = "".join(lines)
    tomllib.loads(result)  # still valid TOML
    return result


def manifest_for_course(text: str, curriculum: Any, part: str | None = None) -> str:
    """The manifest's text as the active course folder sees it (``grader/course.py``), for a release.

    The exercises the course drops leave, the others carry the course's points
    and hidden points, ``[course]`` its title and part (``part``, the command's ``--part``, when given:
    else the course's); comments and the rest stay.
    A student's copy then has no course folder to find: its manifest is the course.
    """
    chunks = re.split(r"(?m)^(?=\[\[exercise\]\]\s*$)", text)
    kept = [chunks[0]]
    for chunk in chunks[1:]:
        name = tomllib.loads(chunk)["exercise"][0]["name"]
        if name in curriculum.dropped:
            continue
        exercise = curriculum.exercise(name)
        for key, value in (("points", exercise.points), ("hidden_points", exercise.hidden_points)):
            chunk, found = re.subn(rf"(?m)^{key}\s*=.*$", f"{key} = {_points(value)}", chunk, count=1)
            if not found and value:
                chunk = chunk.replace("[[exercise]]\n", f"[[exercise]]\n{key} = {_points(value)}\n", 1)
        if curriculum.dropped:  # the kit's numbers stay (those of the test files, and of `hint N`)
            chunk = chunk.replace("[[exercise]]\n", f"[[exercise]]\nnumber = {exercise.number}\n", 1)
        kept.append(chunk)
    kept += [own_manifest_entry(exercise) for exercise in curriculum.exercises if exercise.home]
    result = manifest_with_part("".join(kept), part or curriculum.part)
    if curriculum.given_exercises:  # needed by kept exercises, not assigned: the release's status agrees
        given = json.dumps(list(curriculum.given_exercises))
        result = result.replace("\n[course]\n", f"\n[course]\ngiven_exercises = {given}\n", 1)
    result = re.sub(r'(?m)^title\s*=.*$', lambda _: f"title = {json.dumps(curriculum.title)}", result, count=1)
    tomllib.loads(result)  # still valid TOML
    return result


def own_manifest_entry(exercise: Any) -> str:
    """The ``[[exercise]]`` table of an instructor's own exercise in a release's manifest (its files are there)."""
    fields = {"number": exercise.number, "name": exercise.name, "title": exercise.title,
              "test_file": exercise.test_file, "functions": list(exercise.functions),
              "depends": list(exercise.depends), "part": exercise.part, "points": exercise.points,
              "hidden_points": exercise.hidden_points, "hint_step": exercise.hint_step,
              "hint_functions": list(exercise.hint_functions), "hints": list(exercise.hints),
              "reading": list(exercise.reading)}
    lines = [f"{key} = {_points(value) if isinstance(value, float) else json.dumps(value, ensure_ascii=False)}"
             for key, value in fields.items()]
    return "\n[[exercise]]\n" + "\n".join(lines) + "\n"


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _shift_headings(markdown: str, top: int = 2) -> str:
    """Shift Markdown headings so the highest one has level ``top`` (code blocks untouched)."""
    lines = markdown.splitlines()
    fenced = False
    levels = []
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#+) ", line)):
            levels.append(len(match.group(1)))
    if not levels:
        return markdown
    shift = top - min(levels)
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#+) ", line)):
            line = "#" * max(1, len(match.group(1)) + shift) + line[len(match.group(1)):]
        out.append(line)
    return "\n".join(out) + "\n"


def _earlier_modules(curriculum: object, exercises: tuple) -> list[str]:
    """A paragraph on the earlier exercises the selection builds on and the course gives (or none)."""
    given = curriculum.given_names()  # type: ignore[attr-defined]
    if not given:
        return []
    ordered = [curriculum.exercise(name) for name in given]  # type: ignore[attr-defined]
    files = ", ".join(f"`exercises/{e.module_file}` ({e.number}, {e.name})" for e in ordered)
    return [f"These exercises build on earlier ones that this course gives you as working code: {files}. Each "
            "says at its top that it is given: read it, you need not write it. Its public tests ship and pass "
            f"(`pytest -m {ordered[-1].name}`), `attention-kit status` lists it as given, and the demos use it. "
            "When the instructor grades your work, those modules come from the instructor's own copy, so a change "
            "you make to them costs no points and earns none.\n"]


NEEDS = re.compile(r"<!-- needs(?P<any> any)?: (?P<names>[\w ]+) -->\n(?P<body>.*?)<!-- end needs -->\n?", re.S)


def for_course(markdown: str, kept: set[str]) -> str:
    """``markdown`` without the passages marked ``<!-- needs: NAMES -->`` whose exercises the course lacks.

    ``<!-- needs any: NAMES -->`` keeps a passage when the course has one of them.

    The student's loop describes every demo; a Part III release's README does not promise ``demo --explain``
    (exercise 10 is not in it), nor a Part I release the measurements of Part III.
    """
    def keep(match: re.Match[str]) -> str:
        names = set(match["names"].split())
        return match["body"] if (names & kept if match["any"] else names <= kept) else ""

    return re.sub(r"\n{3,}", "\n\n", NEEDS.sub(keep, markdown))


def _name_word(exercise: Any) -> str:
    """A word that names some of ``exercise``'s tests, for the README's ``-k`` example ("" if none is found).

    "stable" suits softmax only: ``pytest -m negation -k stable`` in a Part III release selected no test.
    """
    try:
        names = re.findall(r"^def test_(\w+)", exercise.test_path.read_text(encoding="utf-8"), re.M)
    except OSError:
        return ""
    words = [word for name in names for word in name.split("_")]
    return next((word for word in ("stable", "rejects", "shape") if word in words), words[0] if words else "")


def student_readme(curriculum: object, docs: dict[str, str]) -> str:
    """The student README: set-up, the loop, the exercises in order, one exercise at a time."""
    exercises = curriculum.selection()  # type: ignore[attr-defined]
    first = exercises[0]
    total = sum(exercise.points for exercise in exercises)
    hidden = sum(exercise.hidden_points for exercise in exercises)
    rows = "\n".join(
        f"| {e.number} | `{e.name}` | {e.title} | `exercises/{e.module_file}` | `{e.test_file}` | {_points(e.points)} |"
        for e in exercises
    )
    parts = [
        f"# {curriculum.title}\n",  # type: ignore[attr-defined]
        # Not "from softmax to a full Transformer layer": a Part III release assigns neither.
        f"You write self-attention in numpy, one small function at a time, from exercise {first.number}, "
        f"{first.name}, to exercise {exercises[-1].number}, {exercises[-1].name}. Every exercise has a graded "
        "test suite: a failing test says what was "
        "expected, what your code did, which idea to revisit and where the reading explains it.\n",
        *(["[docs/reading.md](docs/reading.md) is the reading the exercises are built on. Each exercise "
           "names its section: the docstring at the top of its module says `Read first: the reading "
           "(docs/reading.md#<section>)`.\n"] if "docs/reading.md" in docs else []),
        "## Set up\n",
        "You need Python 3.11 or newer.\n",
        "```bash\n"
        "python3 -m venv .venv\n"
        "source .venv/bin/activate          # Windows: .venv\\Scripts\\activate\n"
        "python -m pip install -e .         # numpy, pytest, pytest-check and the `attention-kit` command\n"
        "python -m pip install -e \".[cli,plot]\"   # optional: colour, progress bars and heatmaps\n"
        "pytest                             # at first: a NOT STARTED line for each exercise of yours, with its "
        "command\n"
        "```\n",
        "## The exercises, in order\n",
        "Work through them in this order: later exercises use the earlier ones. Fill in the function "
        "bodies in `exercises/`; the docstrings say what each function must do. Do not edit `tests/`.\n",
        "| # | exercise | topic | your file | its tests | points |\n|---|---|---|---|---|---|\n" + rows + "\n",
        f"Total: {_points(total)} points.\n",
        *_earlier_modules(curriculum, exercises),
        "## Run one exercise\n",
        "".join([
        "```bash\n",
        f"pytest -m {first.name}                 # only the tests of exercise {first.number}\n",
        f"pytest -m {first.number}                       # the same, by its number\n",
        f"pytest {first.test_file}      # the same, by file\n",
        f"pytest -m {first.name} -x              # stop at the first failure (the most basic one)\n",
        *([f"pytest -m {first.name} -k {word}       # only its tests whose name contains \"{word}\"\n"]
          if (word := _name_word(first)) else []),
        f"attention-kit test -m {first.name}     # the same from any folder, also where the kit is installed\n",
        "attention-kit status                # where you are, and what to do next\n",
        f"attention-kit hint {first.name}        # a hint, one level at a time (--level 2, 3, ...)\n",
        "```\n"]),
        "Tests run in curriculum order and, within an exercise, from the basic property to the subtle "
        "one: read the first failure first.\n",
    ]
    if "docs/student-loop.md" in docs:
        kept = set(curriculum.assigned_or_given())  # type: ignore[attr-defined]
        whole = kit_manifest().exercises
        if {exercise.name for exercise in whole} - kept:  # the examples are the whole kit's runs: say so
            parts.append(f"*The examples below were made with the whole kit (all {len(whole)} of its exercises); "
                         "in this course `status` lists its own exercises, and every command works the same.*\n")
        parts.append(_shift_headings(for_course(docs["docs/student-loop.md"], kept)))
    if "docs/common-mistakes.md" in docs:
        parts.append("## Common mistakes\n")
        parts.append("[docs/common-mistakes.md](docs/common-mistakes.md) lists the mistakes students often "
                     "make in each exercise, in their own words, with a hint towards the idea.\n")
    parts += [
        "## Handing in\n",
        "Commit and push your `exercises/` folder. On every push GitHub runs the graded tests of each "
        "exercise (the *Actions* tab shows the run) and counts the points as `attention-kit status` does"
        + (f", out of {_points(total)}" if total else "") + ". "
        + (f"Your instructor also grades with hidden tests of the same functions, worth {_points(hidden)} more "
           f"points (a total of {_points(total + hidden)}), so make your code correct, not only the visible "
           "tests green.\n" if hidden else
           "Your instructor may grade with further tests of the same functions, so make your code correct, "
           "not only the visible tests green.\n"),
    ]
    return "\n".join(parts)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_tables(data: dict, prefix: tuple[str, ...] = ()) -> list[str]:
    """Write ``data`` as TOML: plain values first, then one [table] per nested dict."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = []
    if lines and prefix:
        out.append("[" + ".".join(_toml_key(part) for part in prefix) + "]")
    out += lines
    for key, value in data.items():
        if isinstance(value, dict):
            block = _toml_tables(value, (*prefix, key))
            if block:
                out += ([""] if out else []) + block
    return out


def _package_folder(package: str, package_dir: dict[str, str]) -> str:
    """The folder (relative to the project) setuptools builds ``package`` from, given its package-dir map."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        mapped = package_dir.get(".".join(parts[:cut]))
        if mapped is not None:
            return "/".join(p for p in [mapped.strip("/").removeprefix("."), *parts[cut:]] if p and p != ".")
    return "/".join(parts)


def student_pyproject(text: str, shipped: set[str] | None = None) -> str:
    """The kit's pyproject.toml for students: no reference package, no instructor extras.

    ``shipped`` (the release's paths) decides which of the kit's packages the
    student's install builds: a package whose folder the release does not hold
    (``solutions``, ``grader/hidden_tests``, the instructors' rooms) is dropped
    with its package-dir and package-data entries.
    """
    data = tomllib.loads(text)
    project = data.setdefault("project", {})
    project["readme"] = "README.md"
    extras = project.get("optional-dependencies", {})
    project["optional-dependencies"] = {name: deps for name, deps in extras.items() if name in STUDENT_EXTRAS}
    setuptools = data.get("tool", {}).get("setuptools", {})
    packages = setuptools.get("packages")
    if isinstance(packages, list) and shipped is not None:
        package_dir = setuptools.get("package-dir", {})

        def ships(package: str) -> bool:
            folder = _package_folder(package, package_dir)
            return any(path.startswith(folder + "/") if folder else "/" not in path for path in shipped)

        setuptools["packages"] = kept = [package for package in packages if ships(package)]
        for table in ("package-dir", "package-data"):
            if table in setuptools:
                setuptools[table] = {k: v for k, v in setuptools[table].items() if k in kept or k == ""}
    find = setuptools.get("packages", {}).get("find", {}) if isinstance(packages, dict) else {}
    if "include" in find:
        find["include"] = [pattern for pattern in find["include"] if not pattern.startswith("solutions")]
    ignores = data.get("tool", {}).get("ruff", {}).get("lint", {}).get("per-file-ignores")
    if ignores is not None:
        for pattern in list(ignores):
            if instructor_only(pattern.split("*")[0].rstrip("/")) or pattern.startswith("grader/tests"):
                del ignores[pattern]
    header = "# The student copy of the kit, written by `attention-kit release`.\n\n"
    return header + "\n".join(_toml_tables(data)) + "\n"


def classroom_workflow(curriculum: object) -> str:
    """The GitHub Classroom workflow: one command-grader step per exercise, points from the manifest."""
    steps, env = [], []
    for exercise in curriculum.selection():  # type: ignore[attr-defined]
        steps.append(
            f"      - name: \"Exercise {exercise.number}: {exercise.name} ({_points(exercise.points)} points)\"\n"
            f"        id: {exercise.name}\n"
            # Every exercise is scored even when an earlier one failed or ran out of time: one loop costs only
            # its own exercise's points (its calls are stopped past their CPU budget; the timeout is a backstop).
            "        if: always()\n"
            f"        timeout-minutes: {EXERCISE_TIMEOUT_MINUTES}\n"
            f"        run: python -m grader.student.classroom {exercise.name}"
        )
        env.append(f"          {exercise.name.upper()}_RESULTS: \"${{{{ steps.{exercise.name}.outputs.result }}}}\"")
    runners = ",".join(exercise.name for exercise in curriculum.selection())  # type: ignore[attr-defined]
    text = (TEMPLATES / "classroom.yml").read_text(encoding="utf-8")
    for marker, value in (("@@PYTHON_VERSION@@", PYTHON_FOR_CLASSROOM), ("@@STEPS@@", "\n".join(steps)),
                          ("@@REPORTER_ENV@@", "\n".join(env)), ("@@RUNNERS@@", runners)):
        text = text.replace(marker, value)
    return text
