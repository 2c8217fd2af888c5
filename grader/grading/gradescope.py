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
(``AUTOGRADER_PYTHON`` picks the interpreter if ``setup.sh`` was not run).

A submission is whatever the student uploaded: the seven modules, a folder
holding them (e.g. their repository with ``exercises/``) or a zip of either;
``grader.grading.submissions`` finds them.

This module imports only the standard library at the top.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath

from grader.curriculum import ROOT

TEMPLATES = ROOT / "grader" / "release_files" / "gradescope"

# What of the kit goes into the bundle (relative to the kit's root); folders are copied whole.
KIT_ENTRIES = ("pyproject.toml", "conftest.py", "README.md", "grader", "tests", "solutions", "exercises")
# Left out of the copied folders: the project's own tests, caches, build leftovers.
SKIPPED = ("grader/tests",)
SKIPPED_NAMES = ("__pycache__", ".pytest_cache", ".ruff_cache")
SKIPPED_SUFFIXES = (".pyc", ".pyo")
STUDENT_ID = "submission"
# Gradescope stops a run after its own timeout (set per assignment); stay below the default 10 minutes.
GRADE_TIMEOUT = 540.0


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
    names = build_bundle(zip_path)
    print(f"Wrote the Gradescope autograder bundle ({len(names)} files) to {zip_path}.")
    print("Upload it as the assignment's autograder (Configure Autograder > Zip file upload). "
          "It holds the reference solutions and hidden tests: keep it away from students.")
    return 0


# ---------------------------------------------------------------------- building


def bundle_files(root: Path = ROOT) -> dict[str, Path]:
    """The kit files of the bundle: zip path (under ``kit/``) -> file on disk."""
    files: dict[str, Path] = {}
    for entry in KIT_ENTRIES:
        path = root / entry
        if path.is_file():
            files[f"kit/{entry}"] = path
        elif path.is_dir():
            for item in sorted(path.rglob("*")):
                relative = item.relative_to(root).as_posix()
                if (
                    not item.is_file()
                    or any(relative == skip or relative.startswith(skip + "/") for skip in SKIPPED)
                    or any(part in SKIPPED_NAMES for part in item.relative_to(root).parts)
                    or item.suffix in SKIPPED_SUFFIXES
                ):
                    continue
                files[f"kit/{relative}"] = item
    return files


def build_bundle(zip_path: Path, root: Path = ROOT) -> list[str]:
    """Write the bundle to ``zip_path`` (atomically); returns the names in it."""
    files = bundle_files(root)
    zip_path = Path(zip_path)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(suffix=".zip", dir=zip_path.parent)
    os.close(handle)
    names = []
    try:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
            for script in ("setup.sh", "run_autograder"):
                _add(bundle, script, (TEMPLATES / script).read_bytes(), executable=True)
                names.append(script)
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


def failure_results(message: str, seconds: float = 0.0) -> dict:
    """A results.json for a submission that could not be graded at all."""
    return {
        "score": 0.0,
        "execution_time": round(seconds, 1),
        "output": message,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def autograde(root: Path, kit: Path = ROOT, python: str = sys.executable) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; returns the results.

    The grading itself is ``attention-kit grade`` in a child process, with
    its defaults (isolated, fair, hidden tests of the kit). Whatever goes
    wrong, a results.json is written, so Gradescope always shows the student
    something.
    """
    start = time.monotonic()
    root = Path(root)
    results_file = root / "results" / "results.json"
    results_file.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="attention-kit-gradescope-"))
    try:
        submission = root / "submission"
        if not submission.is_dir() or not any(submission.iterdir()):
            results = failure_results("The submission is empty: upload your seven modules (softmax.py ...) or "
                                      "your repository.", time.monotonic() - start)
        else:
            folder = work / "submissions" / STUDENT_ID
            shutil.copytree(submission, folder, ignore=shutil.ignore_patterns(*SKIPPED_NAMES, ".git"))
            out = work / "out"
            # --container: each Gradescope submission runs alone in a throw-away container, which is the isolation
            # where bubblewrap cannot start; the worker still runs as an unprivileged user there.
            command = [python, "-m", "grader", "grade", str(folder.parent), "--out", str(out), "--jobs", "1",
                       "--force", "--container"]
            completed = subprocess.run(command, cwd=kit, capture_output=True, text=True, timeout=GRADE_TIMEOUT)
            # Gradescope keeps run_autograder's stdout for instructors only.
            print(completed.stdout)
            print(completed.stderr, file=sys.stderr)
            graded = out / STUDENT_ID / "results.json"
            if graded.is_file():
                results = json.loads(graded.read_text(encoding="utf-8"))
            else:
                results = failure_results(
                    "The autograder could not grade this submission (exit status "
                    f"{completed.returncode}); please tell your instructor.", time.monotonic() - start)
    except subprocess.TimeoutExpired:
        results = failure_results(f"Grading took longer than {GRADE_TIMEOUT:.0f} s and was stopped: look for an "
                                  "endless loop or very slow code.", time.monotonic() - start)
    except Exception as error:  # the autograder must still write a result for Gradescope
        print(f"autograder error: {type(error).__name__}: {error}", file=sys.stderr)
        results = failure_results("The autograder failed on this submission; please tell your instructor.",
                                  time.monotonic() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["execution_time"] = round(time.monotonic() - start, 1)
    results.setdefault("visibility", "visible")
    results.setdefault("stdout_visibility", "hidden")
    temporary = results_file.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(results, indent=2), encoding="utf-8")
    os.replace(temporary, results_file)
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
