"""``attention-kit gradescope OUT.zip``: a Gradescope autograder bundle (instructors).

The zip holds, at its root (as Gradescope requires,
https://gradescope-autograders.readthedocs.io/en/latest/specs/):

- ``setup.sh``: run once when Gradescope builds the image; installs the kit
  from ``kit/`` into a virtual environment and checks that the reference
  passes the public and hidden tests;
- ``run_autograder``: run for each submission; grades
  ``/autograder/submission`` with ``attention-kit grade`` (isolated, fair,
  with the hidden tests) and writes ``/autograder/results/results.json``;
- ``kit/``: the kit's source, including ``solutions/`` (fair grading serves
  earlier exercises from it) and ``grader/hidden_tests/``. The bundle is
  instructor-side: upload it to Gradescope, never give it to students.

For a trial run, unzip the bundle into ``ROOT/source``, put a submission in
``ROOT/submission`` and run ``AUTOGRADER_ROOT=ROOT ./source/run_autograder``
(``AUTOGRADER_PYTHON`` picks the interpreter if ``setup.sh`` was not run). A
trial run isolates student code with bubblewrap, as ``grade`` does (and
refuses without it): only Gradescope's own container (``/autograder``) is
trusted as the isolation (:func:`isolation_options`).

A submission is whatever the student uploaded: the seven modules, a folder
holding them (e.g. their repository with ``exercises/``) or a zip of either,
also a zip that lies inside the upload (opened with the grader's zip rules);
``grader.grading.submissions`` finds them. The upload is copied as root, so it
is copied without following any link (``submissions.copy_upload``): a link
to the kit's solutions, a hidden test or a root-only file stays a link, which
grading refuses with a status line. ``run_autograder`` (like ``setup.sh``)
makes the kit readable by root only: the worker's user cannot read it; nor
Gradescope's ``submission_metadata.json`` (the student's earlier results,
hidden tests' messages among them), which the runner reads first.

Points: ``attention-kit gradescope`` prints the total to set on the assignment
(public plus hidden, from the manifest and the hidden test files) and writes
it into the bundle's ``README.md``; each results.json's tests add up to it.
Gradescope's format has per-test visibility but one total score: hidden tests
are ``after_published``, and the visible text gives the public score only.

This module imports only the standard library at the top.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from grader import scoring
from grader.curriculum import PACKAGE, PART_ENV, ROOT, kit_path, load, reference_dir

if TYPE_CHECKING:
    from grader.grading.rows import StudentRow

TEMPLATES = PACKAGE / "release_files" / "gradescope"

# What of the kit goes into the bundle (relative to the kit's root); folders are copied whole.
KIT_ENTRIES = ("pyproject.toml", "conftest.py", "README.md", "LICENSE", "grader", "tests", "solutions", "exercises",
               "docs")
# Left out of the copied folders: the project's own tests, the packaged data tree of an installed kit
# (its files are the other entries), caches, build leftovers.
SKIPPED = ("grader/tests", "grader/_kit")
SKIPPED_NAMES = ("__pycache__", ".pytest_cache", ".ruff_cache")
SKIPPED_SUFFIXES = (".pyc", ".pyo")
STUDENT_ID = "submission"
# What Gradescope writes beside the upload: the submission time and the students (for the course's [late]).
METADATA = "submission_metadata.json"
# Gradescope stops a run after its own timeout (set per assignment); stay below the default 10 minutes where the
# course's budgets allow it (``run_seconds``).
GRADE_TIMEOUT = 540.0
GRADESCOPE_TIMEOUT = 600.0  # Gradescope's own default
# What a run needs besides the student code's budgets: the grader's start-up, the tests' own work, the writing.
RUN_SLACK = 120.0


def run_seconds() -> float:
    """The longest one submission's run may take: every graded exercise's budget, the diagnosis's, and the rest.

    A submission slow in every exercise spends each exercise's budget (``--budget``, the course's [limits]); a run
    stopped before its end would lose the points of the tests it passed. At least ``GRADE_TIMEOUT``.
    """
    from grader.grading.grade import limit_defaults
    from grader.sandbox.limits import Limits
    from grader.suite import graded_suite, hidden_folders

    suite, _ = graded_suite(hidden_folders(), None)
    exercises = len({f.exercise for f in suite})
    return max(GRADE_TIMEOUT, exercises * limit_defaults()[0] + Limits().diagnosis_seconds + RUN_SLACK)


def number(value: float) -> str:
    """Points for people: ``120``, ``12.5`` (the scoring rule's format)."""
    return scoring.number(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit gradescope``."""
    parser.add_argument("zip_path", type=Path, metavar="OUT.zip", help="the autograder bundle to write")
    parser.add_argument("--force", action="store_true", help="replace OUT.zip if it exists")


def run(args: argparse.Namespace) -> int:
    """Build the bundle; returns the exit status."""
    zip_path: Path = args.zip_path
    if zip_path.suffix != ".zip":
        print(f"attention-kit gradescope: {zip_path}: the bundle's name must end in .zip", file=sys.stderr)
        return 2
    if zip_path.exists() and not args.force:
        print(f"attention-kit gradescope: {zip_path} exists; use --force to replace it", file=sys.stderr)
        return 1
    if reference_dir() is None:  # the student-safe package: the bundle needs the instructor's own copy
        from grader import course

        print(f"attention-kit gradescope: {course.no_reference(ROOT)}", file=sys.stderr)
        return 2
    from grader import course

    if course.stale_own_data():  # an own exercise's golden values and fingerprints go in: never stale ones
        print(f"attention-kit gradescope: {course.stale_own_data()}", file=sys.stderr)
        return 2
    names = build_bundle(zip_path)
    public, hidden = total_points()
    print(f"Wrote the Gradescope autograder bundle ({len(names)} files) to {zip_path}.")
    print(f"Total points to set on Gradescope: {number(public + hidden)} "
          f"({number(public)} public tests + {number(hidden)} hidden tests; see README.md in the bundle).")
    print("Upload it as the assignment's autograder (Configure Autograder > Zip file upload). "
          "It holds the reference solutions and hidden tests: keep it away from students.")
    if hidden and course.hidden_visibility() == "hidden":
        print(HIDDEN_TOTAL_WARNING, file=sys.stderr)
    if (needed := run_seconds()) > GRADESCOPE_TIMEOUT:
        print(f"Set the autograder's timeout on Gradescope (the assignment's settings) to at least "
              f"{math.ceil(needed / 60)} minutes: a submission slow in every exercise may use each exercise's "
              f"budget, {needed:.0f} s in all, and Gradescope's default of 10 minutes would stop it and lose the "
              "points of the tests it passed.")
    return 0


# ---------------------------------------------------------------------- building


def bundle_files(root: Path | None = None) -> dict[str, Path]:
    """The kit files of the bundle: zip path (under ``kit/``) -> file on disk.

    ``root`` is a kit laid out as the repository; default: this kit, a
    checkout or an installed wheel (``grader/`` is then the package and the
    rest its packaged data tree), so the bundle is the same source tree either way.
    """
    files: dict[str, Path] = {}
    for entry in KIT_ENTRIES:
        path = kit_path(entry) if root is None else Path(root) / entry
        if entry == "solutions" and root is None:  # the instructor's own reference (course folder or checkout)
            path = reference_dir() or path
        if path.is_file():
            files[f"kit/{entry}"] = path
        elif path.is_dir():
            for item in sorted(path.rglob("*")):
                relative = PurePosixPath(entry, item.relative_to(path).as_posix())
                if (
                    not item.is_file()
                    or any(str(relative) == skip or str(relative).startswith(skip + "/") for skip in SKIPPED)
                    or any(part in SKIPPED_NAMES for part in relative.parts)
                    or item.suffix in SKIPPED_SUFFIXES
                ):
                    continue
                files[f"kit/{relative}"] = item
    if root is None:
        files |= course_files()
    return files


def course_files() -> dict[str, Path]:
    """The active course folder's files for the bundle (zip path -> file); none without a course.

    ``kit/course.toml`` makes ``kit/`` the course folder of the grading run
    (found in the working folder, ``grader/course.py``): its own hidden tests go
    to ``kit/hidden_tests/``, its copy of the kit's hidden tests to ``kit/kit_hidden_tests/``, its copy of the
    given implementations to ``kit/given/``.
    """
    from grader import course

    active = course.active()
    if active is None:
        return {}
    files = {f"kit/{course.COURSE_FILE}": active.file}
    extra = course.extra_hidden_tests()
    for path in sorted(extra.glob("test_*.py")) if extra else ():
        files[f"kit/{course.HIDDEN_FOLDER}/{path.name}"] = path
    for name in (course.OWN_GOLDEN, course.OWN_FINGERPRINTS, course.OWN_INPUTS):  # the own exercises' data
        if (active.folder / course.DATA_FOLDER / name).is_file():
            files[f"kit/{course.DATA_FOLDER}/{name}"] = active.folder / course.DATA_FOLDER / name
    own = [e for e in load().exercises if e.home]
    for exercise in own:  # the own exercises' public tests
        files[f"kit/{exercise.test_file}"] = exercise.test_path
    if own:  # and their mistakes, which their data is derived from: the course's whole catalogue, as it is its own
        for path in sorted((active.folder / course.CATALOGUE_FOLDER).glob("*.toml")):
            files[f"kit/{course.CATALOGUE_FOLDER}/{path.name}"] = path
    kit_hidden = course.kit_hidden_tests(PACKAGE)
    if kit_hidden is not None and kit_hidden != PACKAGE / "hidden_tests":
        for path in sorted(kit_hidden.glob("test_*.py")):
            files[f"kit/{course.KIT_HIDDEN_FOLDER}/{path.name}"] = path
    given = course.given_code(PACKAGE)  # what fair grading runs for the exercises a view builds on (the course's)
    if given is not None and given != PACKAGE.joinpath(*course.KIT_GIVEN):
        for path in sorted([*given.glob("*.py"), *given.glob("verified.json")]):
            files[f"kit/{course.GIVEN_FOLDER}/{path.name}"] = path
    return files


def total_points(hidden: Path | None = None, exercises: list[str] | None = None) -> tuple[float, float]:
    """The points the bundle grades out of: (public, hidden), from the manifest and the hidden test files.

    ``hidden`` default: the hidden tests of the instructor's copy and the course folder (``hidden_folders``).
    """
    from grader.grading.report import max_points
    from grader.suite import graded_suite, hidden_folders

    folders = hidden_folders() if hidden is None else [hidden] if hidden.is_dir() else []
    suite, _ = graded_suite(folders, exercises)
    names = sorted({f.exercise for f in suite})
    public = max_points([f for f in suite if not f.hidden], names)
    everything = max_points(suite, names)
    return sum(public.values()), sum(everything.values()) - sum(public.values())


# What students see of the hidden tests, per Gradescope visibility (the course's [hidden] visibility). Gradescope's
# specification (gradescope-autograders.readthedocs.io, "Controlling Test Case Visibility"): while a test is hidden
# `after_due_date` or `after_published`, students do not see their total score; tests hidden with `hidden` do not
# hide it, being meant for tests worth no points.
VISIBILITY_TEXT = {
    "after_published": "Hidden tests have visibility `after_published`: students see their names, scores and "
                       "messages once grades are published, and until then not their total score either. ",
    "after_due_date": "Hidden tests have visibility `after_due_date`: students see their names, scores and "
                      "messages after the due date, and until then not their total score either. ",
    "hidden": "Hidden tests have visibility `hidden`: students never see them, but Gradescope shows them their "
              "total score at once, hidden points included (it hides the total only for `after_due_date` and "
              "`after_published`). ",
    "visible": "Hidden tests have visibility `visible`: students see them at once. ",
}
# Said when the bundle is built with visibility `hidden`: the one setting under which the total gives them away.
HIDDEN_TOTAL_WARNING = ("note: the course's [hidden] visibility is `hidden`: Gradescope shows each student the total "
                        "score at once, and the total includes the hidden tests' points, so a student can work out "
                        "their hidden score before the deadline. Set visibility = \"after_published\" (or "
                        "\"after_due_date\") in course.toml's [hidden] to keep the total back until then.")


def bundle_readme(public: float, hidden: float) -> str:
    """The README at the bundle's root: what it is, and the total to set on Gradescope."""
    from grader.course import hidden_visibility

    total = public + hidden
    visibility = hidden_visibility()  # the course folder's [hidden] visibility
    return (
        "# attention-kit: Gradescope autograder bundle\n\n"
        f"Set the assignment's total points on Gradescope to **{number(total)}**: "
        f"{number(public)} for the public tests (the ones students run) and {number(hidden)} for the hidden tests.\n\n"
        "Each submission's results.json gives one entry per test, scored by the kit's one rule: an exercise's "
        "points are split between its tests in whole sixteenths of a point (as equally as that allows), so "
        "Gradescope's sum of the tests' scores is exact. "
        + VISIBILITY_TEXT.get(visibility, f"Hidden tests have visibility `{visibility}`. ")
        + "Gradescope's format has one total "
        "score per submission (no separate visible total); the text shown with it states the public tests' "
        "score only and says how many hidden points are to come.\n\n"
        "This bundle holds the reference solutions and the hidden tests: never give it to students.\n"
    )


def build_bundle(zip_path: Path, root: Path | None = None) -> list[str]:
    """Write the bundle to ``zip_path`` (atomically); returns the names in it."""
    files = bundle_files(root)
    zip_path = Path(zip_path)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(suffix=".zip", dir=zip_path.parent)
    os.close(handle)
    names = []
    try:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
            part = os.environ.get(PART_ENV, "")
            for script in ("setup.sh", "run_autograder"):
                text = (TEMPLATES / script).read_text(encoding="utf-8").replace("@@PART@@", part)
                _add(bundle, script, text.encode(), executable=True)
                names.append(script)
            _add(bundle, "README.md", bundle_readme(*total_points()).encode())
            names.append("README.md")
            if "kit/README.md" not in files:  # pyproject.toml names a readme; setuptools needs it
                _add(bundle, "kit/README.md", b"# attention-kit (autograder copy)\n")
                names.append("kit/README.md")
            for name, path in sorted(files.items()):
                _add(bundle, name, path.read_bytes(), executable=os.access(path, os.X_OK))
                names.append(name)
        os.replace(temporary, zip_path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return names


def _add(bundle: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(str(PurePosixPath(name)), date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16  # regular file + mode
    bundle.writestr(info, data)


# -------------------------------------------------------------------- autograding


def failure_results(message: str, seconds: float = 0.0, *, students_fault: bool = True) -> dict:
    """A results.json for a submission that could not be graded at all.

    ``students_fault=False`` (the autograder itself failed): no score at all, never a numeric 0 that would
    look like a grade; the output says that it was not graded.
    """
    results = {
        "score": 0.0,
        "execution_time": round(seconds, 1),
        "output": message,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }
    if not students_fault:
        del results["score"]
        results["output"] = "NOT GRADED (no score): " + message
    return results


def with_late_policy(results: StudentRow | dict, metadata_file: Path) -> StudentRow | dict:
    """``results`` (a typed row, or its results.json: the same comes back) with the course's ``[late]`` applied.

    The submission's time comes from Gradescope's own record of it.
    Gradescope writes ``submission_metadata.json`` beside the upload (read before the student's code runs):
    ``created_at`` is the submission time, ``users`` the students (a group: each of them). A student's
    ``[extensions]`` entry is found by any of their Gradescope ``email`` (whole), ``id`` or ``sid`` (never the
    ``name``, which a student edits, nor an email's part before the ``@``, which students at two domains share);
    a group gets its longest extension. Without ``[late]``, or for results that carry no score (not graded),
    nothing changes. Without a readable submission time the
    score is kept and the output says why no late penalty could be applied (never a guess).
    """
    from grader import course
    from grader.grading.rows import StudentRow
    from grader.term import TermError, parse_time

    policy, extensions = course.late_policy()
    typed = isinstance(results, StudentRow)
    if policy is None or not (results.graded if typed else "score" in results):
        return results
    from grader.grading.term_stage import TermInputs, finalize

    row = results if typed else StudentRow.from_json(results)
    try:
        metadata = json.loads(metadata_file.read_text(encoding="utf-8"))
        submitted = parse_time(metadata["created_at"], f"{metadata_file.name} created_at")
    except (OSError, ValueError, KeyError, TypeError, TermError) as error:
        # Named as Gradescope has it, $AUTOGRADER_ROOT/submission_metadata.json: never the private copy's path (a
        # folder removed when the run ends, a README walk).
        said = (error.strerror or type(error).__name__) if isinstance(error, OSError) else str(error)[:200]
        note = (f"\n\nNo late penalty applied: the submission time could not be read from {METADATA} "
                f"({type(error).__name__}: {said}).")
        row = dataclasses.replace(row, output=row.output + note)
        return row if typed else row.to_json()
    keys: set[str] = set()
    for user in metadata.get("users") or ():
        if isinstance(user, dict):
            email = str(user.get("email") or "")
            # Never the name: a student edits their own (and shares it with others); it must not pick an extension.
            # Nor an email's local part: ada@gmail.example is not ada@uni.example, whose extension "ada" may be.
            keys |= {email, *(str(user.get(k) or "") for k in ("id", "sid"))}
    days = max((extensions[key] for key in keys - {""} if key in extensions), default=0.0)
    row = finalize(row, TermInputs(late=policy, extensions={row.student: days}, times={row.student: submitted}))
    return row if typed else row.to_json()


GRADESCOPE_ROOT = Path("/autograder")
# A trial run's ROOT that is a throw-away container of its own, as Gradescope's is (the tests' seam too).
CONTAINER_ENV = "ATTENTION_KIT_GRADESCOPE_CONTAINER"


def isolation_options(root: Path) -> list[str]:
    """``grade``'s isolation options for a run in ``root``: ``--container`` only in Gradescope's container.

    On Gradescope (``/autograder``) each submission runs alone in a throw-away container, which is the isolation
    where bubblewrap cannot start; the worker still runs as an unprivileged user there, and the kit is the
    container's only copy of the reference (root's alone). A trial run elsewhere (``AUTOGRADER_ROOT``) is on a
    machine whose other files the worker's user may read (a checkout's solutions/): there grading needs
    bubblewrap, as ``grade`` does, and refuses without it, unless :data:`CONTAINER_ENV` says that this machine
    is such a container too.
    """
    inside = Path(root).resolve() == GRADESCOPE_ROOT or os.environ.get(CONTAINER_ENV) == "1"
    return ["--container"] if inside else []


def autograde(root: Path, kit: Path = ROOT, python: str = sys.executable) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; returns the results.

    The grading itself is ``attention-kit grade`` in a child process, with
    its defaults (isolated, fair, hidden tests of the kit). Whatever goes
    wrong, a results.json is written, so Gradescope always shows the student
    something.
    """
    from grader.grading.formats import Context, gradescope_results, write_all
    from grader.grading.rows import StudentRow

    start = time.monotonic()
    root = Path(root)
    row = None
    results_file = root / "results" / "results.json"
    results_file.parent.mkdir(parents=True, exist_ok=True)
    # Beside the upload (same file system: a hard link in it is copied as a hard link, which grading refuses).
    work = Path(tempfile.mkdtemp(prefix=".attention-kit-gradescope-", dir=root))
    try:
        from grader import course

        # The bundle's kit/course.toml is the course of this runner too, not only of the `grade` it starts:
        # its [late] and [extensions] apply to the row below (nothing else names the course here).
        course.activate(course.find(cwd=Path(kit)))
        submission = root / "submission"
        if submission.is_symlink() or not submission.is_dir() or not any(submission.iterdir()):
            results = failure_results("The submission is empty: upload your seven modules (softmax.py ...) or "
                                      "your repository.", time.monotonic() - start)
        else:
            from grader.grading.submissions import copy_upload

            # Gradescope's record of the submission (its time, for [late]) as it is before the student's code runs;
            # then root's alone: it holds the student's previous_submissions with their whole results (hidden tests'
            # messages and scores, the total), which the worker's user (no namespaces here) could otherwise read.
            metadata = work / METADATA
            if (root / METADATA).is_file() and not (root / METADATA).is_symlink():
                shutil.copyfile(root / METADATA, metadata)
                try:
                    os.chmod(root / METADATA, 0o600)
                except OSError:  # not this user's file (a trial run): it stays as it is
                    pass
            folder = work / "submissions" / STUDENT_ID
            # As root: never a link's target (a link to the kit's solutions, a hidden test, a root-only file);
            # the links stay links in the copy, and grading refuses them with a status line.
            copy_upload(submission, folder, skipped=(*SKIPPED_NAMES, ".git"))
            out = work / "out"
            command = [python, "-m", "grader", "grade", str(folder.parent), "--out", str(out), "--jobs", "1",
                       "--force", *isolation_options(root)]
            limit = run_seconds()
            completed = subprocess.run(command, cwd=kit, capture_output=True, text=True, timeout=limit)
            # Gradescope keeps run_autograder's stdout for instructors only.
            print(completed.stdout)
            print(completed.stderr, file=sys.stderr)
            graded = out / STUDENT_ID / "results.json"
            if graded.is_file():
                row = with_late_policy(StudentRow.read(graded), metadata)
            else:
                lines = completed.stdout.strip().splitlines()
                last = next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "")[:500]
                results = failure_results(
                    "The autograder could not grade this submission (exit status "
                    f"{completed.returncode}: {last}); please tell your instructor.", time.monotonic() - start,
                    students_fault=False)
    except subprocess.TimeoutExpired:
        # run_seconds is the most a submission can cost (each exercise's budget counts its loops and sleeps): past
        # it, the grader or the machine is at fault, and the points of the tests passed are not the student's loss.
        results = failure_results(f"Grading took longer than {run_seconds():.0f} s, more than any submission's "
                                  "time budgets allow, and was stopped; please tell your instructor.",
                                  time.monotonic() - start, students_fault=False)
    except Exception as error:  # the autograder must still write a result for Gradescope
        print(f"autograder error: {type(error).__name__}: {error}", file=sys.stderr)
        results = failure_results("The autograder failed on this submission; please tell your instructor.",
                                  time.monotonic() - start, students_fault=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = round(time.monotonic() - start, 1)
    if row is not None:  # the format of the registry (``grader.grading.formats.gradescope_results``)
        row = dataclasses.replace(row, seconds=seconds)
        write_all(results_file.parent, [row], Context(), only=(gradescope_results.NAME,))
        return gradescope_results.results(row)
    results["execution_time"] = seconds
    gradescope_results.write_results(results_file, results)
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.grading.gradescope``: build a bundle, or (``--autograde ROOT``) grade inside Gradescope."""
    parser = argparse.ArgumentParser(prog="python -m grader.grading.gradescope", description=__doc__.splitlines()[0])
    parser.add_argument("--autograde", type=Path, metavar="ROOT",
                        help="grade ROOT/submission into ROOT/results/results.json (what run_autograder does)")
    parser.add_argument("zip_path", type=Path, nargs="?", metavar="OUT.zip", help="the autograder bundle to write")
    parser.add_argument("--force", action="store_true", help="replace OUT.zip if it exists")
    args = parser.parse_args(argv)
    if args.autograde is not None:
        autograde(args.autograde)
        return 0  # a written results.json is a finished run, whatever the score
    if args.zip_path is None:
        parser.error("give OUT.zip, or --autograde ROOT")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
