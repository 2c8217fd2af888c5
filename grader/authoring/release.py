"""``attention-kit release OUT_DIR``: build the repository students get (instructors).

The release holds exactly what a student needs and nothing an instructor
keeps: the exercise stubs (generated from ``solutions/`` by ``grader.authoring.sync``
at build time, so they always match the reference), the public graded tests
of the manifest with their data, the student-facing commands, a README
written from the manifest, a ``pyproject.toml`` without instructor extras,
the GitHub Classroom autograding workflow and a ``.gitignore``.

What ships is decided by an allow-list (``STUDENT_FILES``, ``OPTIONAL_FILES``
and the manifest's test files), never by leaving things out. Every shipped
Python file's imports are then followed: a shipped file that imports a kit
module which is not on the allow-list stops the build, so a new helper cannot
be forgotten and an instructor module cannot slip in. ``INSTRUCTOR_ONLY``
is a last check on the finished folder.

``OUT_DIR`` must be empty or new. ``--force`` rebuilds into a folder that
already holds a release: it replaces the entries a release consists of and
keeps everything else (such as a ``.git`` folder of the template repository).

A new release is a git repository with one commit (``main``, by a neutral
author, ``attention-kit release``), ready to push as the GitHub Classroom
template; ``--no-git`` writes the folder only. A rebuild into an existing
repository commits nothing: the instructor reviews and commits the change.
The command ends by printing the next steps for GitHub Classroom.

This module imports only the standard library.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.curriculum import PACKAGE, PART_ENV, ROOT, kit_path, parse_part

TEMPLATES = PACKAGE / "release_files"

# Always shipped (paths relative to the kit's root).
STUDENT_FILES = (
    "conftest.py",
    "grader/__init__.py",
    "grader/__main__.py",
    "grader/cli.py",
    "grader/curriculum.py",
    "grader/curriculum.toml",
    "grader/quiet.py",
    "grader/suite.py",
    "grader/scoring.py",
    "LICENSE",
    "tests/__init__.py",
    "tests/effort.py",
    "tests/feedback.py",
    "tests/kinds.py",
    "tests/kit.py",
    "tests/plugin.py",
    "tests/probes.py",
)
# Shipped when present: the student commands, the diagnosis of known mistakes and the test data.
OPTIONAL_FILES = (
    "grader/student/__init__.py",
    "grader/student/status.py",
    "grader/student/hints.py",
    "grader/student/watch.py",
    "grader/student/demo.py",
    "grader/student/demo_explain.py",
    "grader/student/testing.py",
    "grader/student/notebook.py",
    "grader/student/classroom.py",
    "tests/diagnosis.py",
    "tests/data/golden.npz",
    "tests/data/fingerprints.npz",
)
# Student documentation, shipped when present (and folded into the README).
STUDENT_DOCS = ("docs/student-loop.md", "docs/common-mistakes.md", "docs/reading.md")
# Extras of pyproject.toml that make sense without the reference.
STUDENT_EXTRAS = ("cli", "plot")
# Never in a release, whatever imports them (checked on the finished folder).
INSTRUCTOR_ONLY = (
    "solutions",
    "benchmarks",
    "grader/hidden_tests",
    "grader/mutants",
    "grader/tests",
    "grader/release_files",
    # Whole rooms: grading a class, the sandbox, authoring (see grader/__init__.py).
    "grader/grading",
    "grader/sandbox",
    "grader/authoring",
)
# The top-level entries a release consists of (what --force may replace).
RELEASE_ENTRIES = (
    "exercises", "tests", "grader", "docs", "conftest.py", "pyproject.toml", "README.md", ".gitignore", "LICENSE",
    ".github/workflows/classroom.yml",
)
PYTHON_FOR_CLASSROOM = "3.11"
EXERCISE_TIMEOUT_MINUTES = 5


@dataclass
class Plan:
    """What a release holds: files copied from the kit and files written for it."""

    copies: dict[str, Path] = field(default_factory=dict)  # release path -> kit file
    texts: dict[str, str] = field(default_factory=dict)  # release path -> content
    notes: list[str] = field(default_factory=list)

    def paths(self) -> set[str]:
        """Every release path of the plan."""
        return set(self.copies) | set(self.texts)


class ReleaseError(Exception):
    """The release cannot be built as asked; the message says why."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit release``."""
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="folder to write the student repository to")
    parser.add_argument("--force", action="store_true",
                        help="rebuild into a folder holding an earlier release (keeps .git and other files)")
    parser.add_argument("--list", action="store_true", help="print the files of the release, write nothing")
    parser.add_argument("--no-git", action="store_true",
                        help="write the folder only (default: make it a git repository with one commit)")


def run(args: argparse.Namespace) -> int:
    """Build the release; returns the exit status."""
    try:
        plan = plan_release()
        if args.list:
            print("\n".join(sorted(plan.paths())))
            return 0
        had_git = (args.out_dir / ".git").exists()
        write_release(plan, args.out_dir, force=args.force)
        committed = False
        if not args.no_git and not had_git:
            committed = make_repository(args.out_dir)
            if not committed:
                plan.notes.append("git is not installed, so the folder is not a repository yet (see the next steps)")
    except ReleaseError as error:
        print(f"attention-kit release: {error}", file=sys.stderr)
        return 1
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"Wrote the student repository ({len(plan.paths())} files) to {args.out_dir}")
    print(next_steps(args.out_dir, committed=committed, existing=had_git))
    return 0


# A neutral author for the release's one commit: not the instructor's git identity, not a machine's.
RELEASE_AUTHOR = ("attention-kit release", "release@attention-kit.invalid")
RELEASE_MESSAGE = "Starter code for the self-attention exercises (written by `attention-kit release`)"


def make_repository(out_dir: Path) -> bool:
    """Make ``out_dir`` a git repository on branch ``main`` with one commit of everything in it.

    Returns False (and writes nothing) when git is not installed.

    Raises
    ------
    ReleaseError
        If a git command fails (its message is included).
    """
    git = shutil.which("git")
    if git is None:
        return False
    name, email = RELEASE_AUTHOR
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env |= {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email, "GIT_CONFIG_NOSYSTEM": "1"}
    # No hooks, templates or signing from the instructor's configuration in the students' history.
    options = ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "init.templateDir="]
    for command in (["init", "-q"], ["symbolic-ref", "HEAD", "refs/heads/main"], ["add", "-A"],
                    ["commit", "-q", "--no-verify", "-m", RELEASE_MESSAGE]):
        done = subprocess.run([git, *options, *command], cwd=out_dir, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise ReleaseError(f"git {' '.join(command)} failed in {out_dir}: {(done.stderr or done.stdout).strip()}")
    return True


def next_steps(out_dir: Path, *, committed: bool, existing: bool = False) -> str:
    """What the instructor does next to hand the release out with GitHub Classroom."""
    lines = ["", "Next, to hand it out with GitHub Classroom:"]
    if existing:
        lines += [f"  cd {out_dir} && git add -A && git commit -m 'Update the exercises'   # review the change first",
                  "  git push"]
    else:
        if not committed:
            lines += [f"  cd {out_dir} && git init -b main && git add -A && git commit -m 'Starter code'"]
        else:
            lines += [f"  cd {out_dir}                 # a git repository with one commit on main"]
        lines += [
            "  gh repo create YOUR-ORG/attention-kit-template --private --source . --push",
            "      (or make an empty repository on GitHub, then: git remote add origin URL && git push -u origin main)",
            "  on GitHub: the repository's Settings > General > Template repository",
            "  in GitHub Classroom: New assignment > starter code: that template repository; the autograding tests",
            "      come from .github/workflows/classroom.yml, one test per exercise with its points",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plan


def _tree(root: Path | None) -> Callable[[str], Path]:
    """Where the kit's file ``grader/cli.py``, ``tests/kit.py`` ... lies: in ``root``, or in this kit."""
    if root is None:
        return lambda path: kit_path(path)
    return lambda path: Path(root) / path


def plan_release(root: Path | None = None) -> Plan:
    """Decide every file of the release from the manifest and the allow-list.

    ``root`` is a kit's folder laid out as the repository; default: this kit,
    a checkout or an installed wheel (see ``grader.curriculum.kit_path``).

    Raises
    ------
    ReleaseError
        If a required file is missing or a shipped module imports a kit module
        that is not on the allow-list.
    """
    from grader.authoring import sync
    from grader.curriculum import load

    curriculum = load()
    source = _tree(root)
    data_root = ROOT if root is None else Path(root)
    plan = Plan()
    selected = curriculum.selection()
    wanted = list(STUDENT_FILES) + [exercise.test_file for exercise in selected]
    missing = [path for path in wanted if not source(path).is_file()]
    if missing:
        raise ReleaseError(f"missing from the kit: {', '.join(missing)}")
    wanted += [path for path in OPTIONAL_FILES if source(path).is_file()]
    for path in wanted:
        plan.copies[path] = source(path)

    # The stubs come from the reference now, whatever state exercises/ is in.
    for path, text in sync.expected_stubs().items():
        plan.texts[path.relative_to(sync.ROOT).as_posix()] = text
    stale = sync.out_of_date()
    if stale:
        plan.notes.append(f"exercises/ in the kit is out of date ({', '.join(stale)}); the release uses fresh stubs "
                          "(run `python -m grader.authoring.sync` to update the kit too)")

    docs = [path for path in STUDENT_DOCS if source(path).is_file()]
    for path in docs:
        plan.copies[path] = source(path)
        for linked in _linked_files(source(path), data_root):
            plan.copies[linked] = data_root / linked

    check_imports(plan, root)
    part = os.environ.get(PART_ENV)
    if part:  # the course's choice goes with the release: status and the tests count these exercises only
        plan.copies.pop("grader/curriculum.toml")
        plan.texts["grader/curriculum.toml"] = manifest_with_part(source("grader/curriculum.toml")
                                                                  .read_text(encoding="utf-8"), parse_part(part))
    plan.texts["README.md"] = student_readme(curriculum, {path: source(path).read_text(encoding="utf-8")
                                                          for path in docs})
    plan.texts["pyproject.toml"] = student_pyproject(source("pyproject.toml").read_text(encoding="utf-8"),
                                                     plan.paths() | {"pyproject.toml", "README.md"})
    plan.texts[".github/workflows/classroom.yml"] = classroom_workflow(curriculum)
    plan.texts[".gitignore"] = (TEMPLATES / "gitignore").read_text(encoding="utf-8")
    forbidden = sorted(path for path in plan.paths() if _instructor_only(path))
    if forbidden:
        raise ReleaseError(f"instructor-only files in the plan: {', '.join(forbidden)}")
    return plan


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


def _instructor_only(path: str) -> bool:
    return any(path == banned or path.startswith(banned + "/") for banned in INSTRUCTOR_ONLY)


def _linked_files(markdown: Path, root: Path) -> list[str]:
    """Kit files that a Markdown document links to by a relative path (images, other docs)."""
    found = []
    for target in re.findall(r"\]\(([^)\s#]+)", markdown.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("/"):
            continue
        for candidate in (root / target, markdown.parent / target):
            if candidate.is_file() and candidate.resolve().is_relative_to(root.resolve()):
                found.append(candidate.resolve().relative_to(root.resolve()).as_posix())
                break
    return found


def _kit_imports(source: str) -> list[tuple[str, bool]]:
    """The ``grader``/``tests`` modules a source imports, each with whether it is imported at top level."""
    tree = ast.parse(source)
    top_level = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] in ("grader", "tests"):
                found.append((name, id(node) in top_level))
    return found


def _module_file(name: str, root: Path | None) -> str | None:
    """The kit file that defines module ``name`` (None for a name that is not a module)."""
    parts = name.split(".")
    source = _tree(root)
    for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if source(candidate).is_file():
            return candidate
    return None


def check_imports(plan: Plan, root: Path | None = None) -> None:
    """Refuse a release whose shipped code imports a kit module that does not ship.

    A module imported inside a function (e.g. an instructor-only path of a
    shared helper) only gives a note when it is instructor-only; at top level
    it stops the build, as does any import of a module on neither list.
    """
    shipped = plan.paths()
    problems = []
    for path in sorted(shipped):
        if not path.endswith(".py") or path not in plan.copies:
            continue
        for name, top_level in _kit_imports(plan.copies[path].read_text(encoding="utf-8")):
            module = _module_file(name, root)
            if module is None or module in shipped:
                continue
            if _instructor_only(module) and not top_level:
                plan.notes.append(f"{path} imports {name} inside a function; it is instructor-only and not shipped")
            elif _instructor_only(module):
                problems.append(f"{path} imports {name} ({module}), which is instructor-only")
            else:
                problems.append(f"{path} imports {name} ({module}), which is not on the release allow-list "
                                "(add it to STUDENT_FILES or OPTIONAL_FILES in grader/authoring/release.py)")
    if problems:
        raise ReleaseError("; ".join(problems))


# ----------------------------------------------------------------------- contents


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
        "You write self-attention in numpy, one small function at a time, from softmax to a full "
        "Transformer layer. Every exercise has a graded test suite: a failing test says what was "
        "expected, what your code did, and which idea to revisit.\n",
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
        "pytest                             # at the start every test fails: \"not implemented yet\"\n"
        "```\n",
        "## The exercises, in order\n",
        "Work through them in this order: later exercises use the earlier ones. Fill in the function "
        "bodies in `exercises/`; the docstrings say what each function must do. Do not edit `tests/`.\n",
        "| # | exercise | topic | your file | its tests | points |\n|---|---|---|---|---|---|\n" + rows + "\n",
        f"Total: {_points(total)} points.\n",
        "## Run one exercise\n",
        "```bash\n"
        f"pytest -m {first.name}                 # only the tests of exercise {first.number}\n"
        f"pytest -m {first.number}                       # the same, by its number\n"
        f"pytest {first.test_file}      # the same, by file\n"
        f"pytest -m {first.name} -x              # stop at the first failure (the most basic one)\n"
        f"pytest -m {first.name} -k stable       # only its tests whose name contains \"stable\"\n"
        f"attention-kit test -m {first.name}     # the same from any folder, also where the kit is installed\n"
        "attention-kit status                # where you are, and what to do next\n"
        f"attention-kit hint {first.name}        # a hint, one level at a time (--level 2, 3, ...)\n"
        "```\n",
        "Tests run in curriculum order and, within an exercise, from the basic property to the subtle "
        "one: read the first failure first.\n",
    ]
    if "docs/student-loop.md" in docs:
        parts.append(_shift_headings(docs["docs/student-loop.md"]))
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
            if _instructor_only(pattern.split("*")[0].rstrip("/")) or pattern.startswith("grader/tests"):
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


# ------------------------------------------------------------------------ writing


def write_release(plan: Plan, out_dir: Path, force: bool = False) -> None:
    """Write ``plan`` into ``out_dir`` (new or empty; with ``force``, an earlier release).

    Raises
    ------
    ReleaseError
        If ``out_dir`` holds other files and ``force`` is not set, or the
        written folder contains an instructor-only path.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReleaseError(f"{out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not force:
            raise ReleaseError(f"{out_dir} is not empty; choose a new folder, or --force to rebuild a release there")
        if out_dir.resolve() == ROOT.resolve() or ROOT.resolve().is_relative_to(out_dir.resolve()):
            raise ReleaseError(f"{out_dir} holds the kit itself; refusing to overwrite it")
        for entry in RELEASE_ENTRIES:
            target = out_dir / entry
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, source in sorted(plan.copies.items()):
        target = out_dir / PurePosixPath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for path, text in sorted(plan.texts.items()):
        target = out_dir / PurePosixPath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    leaked = [path for path in INSTRUCTOR_ONLY if (out_dir / path).exists()]
    if leaked:
        raise ReleaseError(f"instructor-only paths in {out_dir}: {', '.join(leaked)}")


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.authoring.release OUT_DIR`` (the same as ``attention-kit release``)."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.release", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
