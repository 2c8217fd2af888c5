"""Notebook submissions: ``nbgrader autograde`` against ``attention-kit grade``, seconds per submission.

    python benchmarks/notebook_vs_grade.py [--n 5] [--keep DIR] [--record]

Builds the single-notebook nbgrader course (``attention-kit notebooks
--layout single``), releases it, and fills N copies of the released notebook
with the reference code: every other one correct, the others each with one
mistake of the mutant catalogue. Then, on the same notebooks:

* ``nbgrader autograde self-attention --student S``, once per student (the
  course's autograde step grades the answer cells in the kit's sandbox:
  ``grader/grading/nbgrader_autograde.py``; figures recorded before 2026-12-03
  were taken when it ran a kernel);
* ``attention-kit grade S.ipynb --no-fair --jobs 1``, once per student (the
  single notebook grades the student's own earlier exercises, as ``--no-fair``
  does; see docs/jupyter.md);
* one ``attention-kit grade`` of all N at once (``--jobs`` = cores), as a batch runs.

Prints a row per student (mistake, seconds and score of each) and the mean
seconds per submission. The scores of the two graders should be equal.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grader.authoring.notebooks import SINGLE_ASSIGNMENT, build_course  # noqa: E402
from grader.mutants import Mutant, load_catalogue  # noqa: E402

# The interpreter's own bin folder first: nbgrader runs helper programs (alembic) by name, which an
# environment that was not activated would not find on PATH.
ENV = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                    "PATH": os.pathsep.join(filter(None, [str(Path(sys.executable).parent), os.environ.get("PATH")]))}


def run(command: list[str], cwd: Path) -> float:
    """Run ``command``; return its wall time in seconds (raise with its output if it fails)."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def fill(course: Path, mutant: Mutant | None) -> dict:
    """The released notebook with the reference code in its answer cells, ``mutant`` planted if given."""
    import nbformat

    name = f"{SINGLE_ASSIGNMENT}.ipynb"
    source = nbformat.read(course / "source" / SINGLE_ASSIGNMENT / name, 4)
    release = nbformat.read(course / "release" / SINGLE_ASSIGNMENT / name, 4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in release.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            code = "\n".join(line for line in answers[grade_id].splitlines() if "SOLUTION" not in line)
            if mutant is not None and grade_id == f"{mutant.exercise}-code":
                code = code.replace(mutant.replace, mutant.with_)
            cell.source = code
    return release


def applicable(course: Path) -> list[Mutant]:
    """Mutants whose text occurs in the notebook's answer cell as often as in the module."""
    import nbformat

    source = nbformat.read(course / "source" / SINGLE_ASSIGNMENT / f"{SINGLE_ASSIGNMENT}.ipynb", 4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    return [m for m in load_catalogue() if answers.get(f"{m.exercise}-code", "").count(m.replace) == m.count]


def nbgrader_score(course: Path, student: str) -> float:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return gradebook.find_submission(SINGLE_ASSIGNMENT, student).score


def grade_score(out: Path, student: str) -> float:
    return json.loads((out / student / "results.json").read_text(encoding="utf-8"))["score"]


def main() -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5, help="number of submissions (default 5)")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="notebook-vs-grade-")).resolve()
    try:
        course, submissions = scratch / "course", scratch / "submissions"
        if course.exists():
            shutil.rmtree(course)
        build_course(course, "single")
        run([sys.executable, "-m", "nbgrader", "generate_assignment", SINGLE_ASSIGNMENT, "--force"], course)
        mutants = applicable(course)
        submissions.mkdir(parents=True, exist_ok=True)
        students = []
        for index in range(args.n):
            mutant = None if index % 2 == 0 or not mutants else mutants[(index // 2) % len(mutants)]
            student = f"student{index:02d}"
            notebook = fill(course, mutant)
            target = course / "submitted" / student / SINGLE_ASSIGNMENT / f"{SINGLE_ASSIGNMENT}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, str(target))
            shutil.copy(target, submissions / f"{student}.ipynb")
            students.append((student, mutant.id if mutant else "correct"))

        print(f"{args.n} notebook submissions of the single-notebook course ({os.cpu_count()} cores)\n")
        print(f"{'student':<10} {'mistake':<34} {'nbgrader s':>10} {'score':>7}   {'grade s':>8} {'score':>7}")
        times = {"nbgrader": [], "grade": []}
        for student, kind in students:
            seconds = run([sys.executable, "-m", "nbgrader", "autograde", SINGLE_ASSIGNMENT, "--force",
                           "--student", student], course)
            times["nbgrader"].append(seconds)
            out = scratch / "grades" / student
            grade_seconds = run([sys.executable, "-m", "grader", "grade", str(submissions / f"{student}.ipynb"),
                                 "--out", str(out), "--no-fair", "--jobs", "1", "--force"], ROOT)
            times["grade"].append(grade_seconds)
            print(f"{student:<10} {kind:<34} {seconds:>10.1f} {nbgrader_score(course, student):>7.2f}   "
                  f"{grade_seconds:>8.1f} {grade_score(out, student):>7.2f}", flush=True)
        batch = run([sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(scratch / "batch"),
                     "--no-fair", "--force"], ROOT)
        print()
        print(f"nbgrader autograde, one student at a time:   {sum(times['nbgrader']) / args.n:6.1f} s per submission")
        print(f"attention-kit grade, one student at a time:  {sum(times['grade']) / args.n:6.1f} s per submission")
        print(f"attention-kit grade, all {args.n} at once:          {batch / args.n:6.1f} s per submission")
        nbgrader_each = sum(times["nbgrader"]) / args.n
        print(f"ratio, nbgrader autograde / attention-kit grade (same notebooks, this run): "
              f"{nbgrader_each / (sum(times['grade']) / args.n):.1f}x one at a time, "
              f"{nbgrader_each / (batch / args.n):.1f}x as a batch")
        if args.record:
            from _record import record

            nbgrader_each, grade_each = sum(times["nbgrader"]) / args.n, sum(times["grade"]) / args.n
            record(__file__, f"`nbgrader autograde` {nbgrader_each:.0f} s per submission, `attention-kit grade` "
                   f"{grade_each:.1f} s one at a time and {batch / args.n:.1f} s each in a batch of {args.n}",
                   {"submissions": args.n, "nbgrader_s_each": round(nbgrader_each, 1),
                    "grade_s_each": round(grade_each, 1), "grade_batch_s_each": round(batch / args.n, 1)})
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
