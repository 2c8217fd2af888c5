"""``attention-kit release OUT_DIR``: build the repository students get (instructors).

The release holds exactly what a student needs and nothing an instructor
keeps: the exercise stubs (generated from ``solutions/`` by ``grader.authoring.sync``
at build time, so they always match the reference), the public graded tests
of the manifest with their data, the student-facing commands, a README
written from the manifest, a ``pyproject.toml`` without instructor extras,
the GitHub Classroom autograding workflow and a ``.gitignore``.

The work is in three modules, one job each:

* ``release_allowlist``: what may ship (the allow-lists, the import check,
  the instructor-only paths) and the :class:`Plan` of one release;
* ``release_contents``: the files written for the release (README,
  ``pyproject.toml``, the Classroom workflow, the manifest with its part);
* this module: the command, which plans the release (:func:`plan_release`),
  writes it (:func:`write_release`) and makes it a git repository.

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
import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from grader import course
from grader.authoring.release_allowlist import (
    INSTRUCTOR_ONLY,
    OPTIONAL_FILES,
    RELEASE_ENTRIES,
    STUDENT_DOCS,
    STUDENT_FILES,
    Plan,
    ReleaseError,
    check_imports,
    check_reference_lines,
    instructor_only,
    linked_files,
    source_tree,
)
from grader.authoring.release_contents import (
    TEMPLATES,
    classroom_workflow,
    manifest_for_course,
    manifest_with_part,
    student_pyproject,
    student_readme,
)
from grader.authoring.release_given import NoGivenCode, given_files
from grader.curriculum import PART_ENV, ROOT, parse_part


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit release``."""
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", nargs="?",
                        help="folder to write the student repository to (not needed with --list)")
    parser.add_argument("--force", action="store_true",
                        help="rebuild into a folder holding an earlier release (keeps .git and other files)")
    parser.add_argument("--list", action="store_true", help="print the files of the release, write nothing")
    parser.add_argument("--no-git", action="store_true",
                        help="write the folder only (default: make it a git repository with one commit)")


def run(args: argparse.Namespace) -> int:
    """Build the release; returns the exit status."""
    from grader.curriculum import reference_dir

    if reference_dir() is None:  # the stubs are made from the reference: the instructor's own copy
        print(f"error: {course.no_reference(ROOT)}", file=sys.stderr)
        return 2
    if course.stale_own_data():  # an own exercise's stub, golden values and fingerprints ship: never stale ones
        print(f"error: {course.stale_own_data()}", file=sys.stderr)
        return 2
    if args.out_dir is None and not args.list:  # only --list writes nothing and needs no folder
        print("attention-kit release: error: the following arguments are required: OUT_DIR (or --list)",
              file=sys.stderr)
        return 2
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
    except NoGivenCode as error:  # the install lacks instructor material, as with no reference above
        print(f"error: {error}", file=sys.stderr)
        return 2
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
    lines += [
        "Classroom's score is advisory: it is computed in each student's own repository, by code the student can",
        "  change (a conftest.py or an edited tests/ gets full marks). Grade with `attention-kit grade` on the",
        "  cloned repositories (docs/courses.md).",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plan


def plan_release(root: Path | None = None) -> Plan:
    """Decide every file of the release from the manifest and the allow-list.

    ``root`` is a kit's folder laid out as the repository; default: this kit,
    a checkout or an installed wheel (see ``grader.curriculum.kit_path``).

    Raises
    ------
    ReleaseError
        If a required file is missing, a shipped module imports a kit module
        that is not on the allow-list, or a shipped text holds a line of the reference.
    """
    from grader.authoring import sync
    from grader.curriculum import load, reference_dir

    curriculum = load()
    source = source_tree(root)
    data_root = ROOT if root is None else Path(root)
    plan = Plan()
    selected = curriculum.selection()
    kit_source, own = source, own_files(selected)  # an instructor's own exercise's files are its course folder's
    source = lambda path: own.get(path) or kit_source(path)  # noqa: E731
    wanted = list(STUDENT_FILES) + [exercise.test_file for exercise in selected]
    missing = [path for path in wanted if not source(path).is_file()]
    if missing:
        raise ReleaseError(f"missing from the kit: {', '.join(missing)}")
    wanted += [path for path in OPTIONAL_FILES if source(path).is_file()]
    wanted += [path for path in own if path not in wanted and source(path).is_file()]
    for path in wanted:
        plan.copies[path] = source(path)

    # The stubs come from the reference now, whatever state exercises/ is in.
    for path, text in sync.expected_stubs().items():
        plan.texts[path.relative_to(sync.ROOT).as_posix()] = text
    # What the course builds on and does not assign: working code marked given, with its public tests.
    given_texts, given_tests = given_files(curriculum)
    plan.texts.update(given_texts)
    missing = [path for path in given_tests if not source(path).is_file()]
    if missing:
        raise ReleaseError(f"missing from the kit: {', '.join(missing)}")
    plan.copies.update({path: source(path) for path in given_tests})
    # A maintainer's note on the checkout's own exercises/; a course folder's stubs are never written into the kit.
    stale = sync.out_of_date() if course.active_folder() is None else []
    if stale:
        plan.notes.append(f"exercises/ in the kit is out of date ({', '.join(stale)}); the release uses fresh stubs "
                          "(run `python -m grader.authoring.sync` to update the kit too)")

    docs = [path for path in STUDENT_DOCS if source(path).is_file()]
    for path in docs:
        plan.copies[path] = source(path)
        for linked in linked_files(source(path), data_root):
            plan.copies[linked] = data_root / linked

    check_imports(plan, root)
    part = os.environ.get(PART_ENV)
    if part:  # the course's choice goes with the release: status and the tests count these exercises only
        plan.copies.pop("grader/curriculum.toml")
        plan.texts["grader/curriculum.toml"] = manifest_with_part(source("grader/curriculum.toml")
                                                                  .read_text(encoding="utf-8"), parse_part(part))
    if course.active() is not None:  # the course folder's view (exercises, points, title) becomes the manifest
        manifest = plan.texts.pop("grader/curriculum.toml", None)
        manifest = manifest or plan.copies.pop("grader/curriculum.toml").read_text(encoding="utf-8")
        plan.copies.pop("grader/curriculum.toml", None)
        chosen = parse_part(part) if part else None  # --part wins over the course's [course] part, as everywhere
        plan.texts["grader/curriculum.toml"] = manifest_for_course(manifest, curriculum, chosen)
    plan.texts["README.md"] = student_readme(curriculum, {path: source(path).read_text(encoding="utf-8")
                                                          for path in docs})
    plan.texts["pyproject.toml"] = student_pyproject(source("pyproject.toml").read_text(encoding="utf-8"),
                                                     plan.paths() | {"pyproject.toml", "README.md"})
    plan.texts[".github/workflows/classroom.yml"] = classroom_workflow(curriculum)
    plan.texts[".gitignore"] = (TEMPLATES / "gitignore").read_text(encoding="utf-8")
    forbidden = sorted(path for path in plan.paths() if instructor_only(path))
    if forbidden:
        raise ReleaseError(f"instructor-only files in the plan: {', '.join(forbidden)}")
    reference = reference_dir() if root is None else Path(root) / "solutions"
    if reference is not None and reference.is_dir():
        check_reference_lines(plan, *_reference_and_stubs(reference, source("exercises")))
    return plan


def own_files(selected: tuple) -> dict[str, Path]:
    """Release path -> course file, of the instructor's own exercises among ``selected``.

    Their public tests, and their probes' reference outputs and mistakes'
    fingerprints (beside the kit's, as ``tests/data/course_*``).
    """
    files = {exercise.test_file: exercise.test_path for exercise in selected if exercise.home}
    if files:
        data = Path(next(exercise.home for exercise in selected if exercise.home)) / course.DATA_FOLDER
        files[f"tests/data/{course.RELEASED_PREFIX}{course.OWN_GOLDEN}"] = data / course.OWN_GOLDEN
        files[f"tests/data/{course.RELEASED_PREFIX}{course.OWN_FINGERPRINTS}"] = data / course.OWN_FINGERPRINTS
    for exercise in (exercise for exercise in selected if exercise.home):
        files.update(_reading_files(exercise))
    return files


def _reading_files(exercise: Any) -> dict[str, Path]:
    """Release path -> course file of the text an own exercise's ``reading`` links to, where it is a path.

    Every failure's ``read:`` line points there, so the release carries it (an instructor's round: the link went
    to ``notes/centring.md``, which no release held). A URL is left as it is.

    Raises
    ------
    ReleaseError
        If the path is not a file inside the course folder.
    """
    home = Path(exercise.home).resolve()
    files = {}
    for link in exercise.reading:
        path = link.split("#", 1)[0]
        if not path or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", path):
            continue  # an anchor alone, or a URL
        found = (home / path).resolve()
        if not found.is_relative_to(home) or not found.is_file():
            raise ReleaseError(f"[[exercise]] {exercise.name}: reading = {link!r}: {path} is not a file of the course "
                               f"folder {home}, and every failure's read: line points there; write it, or give a URL")
        files[PurePosixPath(found.relative_to(home)).as_posix()] = found
    return files


def _reference_and_stubs(reference: Path, exercises: Path) -> tuple[dict[str, str], list[str]]:
    """The kit's reference modules (its exercises' and private helpers'), and every stub students may get.

    The stubs: of every exercise of the kit's own manifest, whichever a course
    keeps, its given modules (students get them whole), and the given modules of
    the kit's ``exercises/`` folder.
    """
    from grader.authoring import sync
    from grader.curriculum import kit_manifest, load

    kit = kit_manifest()
    own = [e for e in load().exercises if e.home]  # an instructor's own exercises: their reference is a reference
    kit = dataclasses.replace(kit, exercises=(*kit.exercises, *own))
    given = set(kit.given_modules)
    sources = {path.name: path.read_text(encoding="utf-8") for path in sorted(reference.glob("*.py"))
               if path.stem in {e.module_file.removesuffix(".py") for e in kit.exercises}
               or (path.stem.startswith("_") and path.stem not in given and path.stem != "__init__")}
    stubs = [sync.build_stub(sources[e.module_file], e.number, e.name) for e in kit.exercises
             if e.module_file in sources]
    stubs += [(reference / f"{name}.py").read_text(encoding="utf-8") for name in sorted(given)
              if (reference / f"{name}.py").is_file()]
    # The given modules a stub folder holds (a kit whose manifest lacks an exercise may still give its task).
    stubs += [path.read_text(encoding="utf-8") for path in sorted(exercises.glob("_*.py"))]
    return sources, stubs


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
        # Before anything is removed: --force rebuilds a release, never a kit's copy or a course folder (a hostile
        # round: a copy of the kit lost its hidden tests and grading code, a course its own files, then the refusal).
        held = [path for path in (*INSTRUCTOR_ONLY, course.COURSE_FILE) if (out_dir / path).exists()]
        if held:
            raise ReleaseError(f"{out_dir} is not a release (it holds {', '.join(held)}): --force rebuilds only an "
                               "earlier release; nothing was changed")
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
