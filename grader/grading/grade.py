"""``attention-kit grade``: grade a folder of submissions (instructors).

::

    attention-kit grade SUBMISSIONS --out OUT [--jobs N] [--force] [--no-fair] [--hidden DIR] [--cluster ADDRESS]
    attention-kit grade                 # grades bundled sample submissions

This module is the command (``add_arguments``, ``run``) and the batch
(``grade_batch``: its stages in order, in one place). The parts, one module
each, and the process each runs in:

- ``submissions`` (this process): finds and statically checks each submission;
- ``records``: the typed records that cross between the parts (a ``Job`` per student, a ``TestRecord`` per test,
  a ``Result``);
- ``fingerprint`` (this process): what decides whether a student is regraded;
- ``kit_check`` (this process): the kit's own check, the reference graded beside the students, and its verdict;
- ``pool`` (this process, and the grading processes it starts): long-lived grading processes, jobs in and results
  out; ``cluster`` (this process; ``cluster_worker`` on each Dask worker) does the same on a Dask cluster
  (``--cluster``), and ``shard`` picks a slice of the class (``--shard I/N``) and merges slices;
- ``session`` (a grading process): the graded pytest suite, collected once per process and rerun for each
  student; ``recorder`` (its pytest plugin) records each test and renders failures, ``secrets`` scrubs them,
  ``speedups`` holds its speed-ups of private pytest code (they change no grade);
- ``implementation`` (a grading process): the one seam to ``grader.sandbox.proxy.IsolatedImplementation``: the
  student's code runs in an isolated worker, never in the process that checks the results;
- ``scored`` and ``report`` (this process): score the worker's result into a typed row (``rows``) and write
  ``OUT/<student>/results.json`` (Gradescope format) and ``OUT/<student>/feedback.md`` as each student finishes;
- ``outputs`` (this process, at the end): the term's rules (``term_stage``: manual points, late penalties) applied
  to every row, kept or graded, then every format of ``formats`` written from the typed rows (``rows``): grades.csv,
  grades-long.csv, canvas.csv, report.html, each student's files; ``run_log`` appends the run to ``OUT/grading.log``.

Resuming: a student's results carry a fingerprint of the submission's
content and of everything else that can change a grade (``fingerprint``: the
kit version, the tests, the reference, the sandbox, the options). A rerun
skips every student whose fingerprint is unchanged and whose results are
complete; ``--force`` regrades everyone. The gradebook is always rebuilt from
the per-student results, so a run killed halfway and rerun gives the same
``grades.csv`` as an uninterrupted one.

Hidden tests: every ``test_*.py`` in ``--hidden DIR`` (default
``grader/hidden_tests`` if it exists) runs after the visible tests of its
exercise. A hidden file says which exercise it belongs to with a module-level
``EXERCISE = "masks"`` (or by naming an exercise in its file name, e.g.
``test_hidden_masks.py``). Its tests share the exercise's ``hidden_points``
from the manifest, on top of the exercise's points; a file may set its own
with ``POINTS = 5``. With neither, they share the exercise's manifest points
with its visible tests.

Trust: every entry of SUBMISSIONS is one row, whatever it is, and the
gradebook is always written. Student code runs only where it can be isolated
(``grader.sandbox.limits.choose``): without namespaces the grader refuses,
unless ``--accept-no-isolation`` (then every output says so) or
``--container`` (the Gradescope runner). When the grader itself fails (the
worker does not start, pytest stops, ...), the affected tests get no score,
the row says ``not graded: <reason>``, the command exits 1 and a rerun grades
those students again. Failures of hidden tests reach students as their name
and message only; no source line of the hidden tests or of ``solutions/``
appears in anything a student receives (``grader.grading.secrets``).

This module imports only the standard library and the kit's base modules at
the top (``cli.py`` imports it to build ``--help``); its parts are imported
when a batch runs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grader import course
from grader.curriculum import PART_ENV, ROOT, make_importable, parse_part, reference_dir
from grader.grading.cluster import add_engine_arguments, connect_cluster
from grader.grading.draw_key import draw_key
from grader.grading.progress import progress_display
from grader.grading.records import CALL_BUDGET, MEMORY_MIB, STUDENT_BUDGET, Job, Result, suite_files
from grader.grading.roster import ExportError, kept_roster
from grader.grading.scratch import new_folder
from grader.grading.shard import parse_shard, shard_entries
from grader.grading.term_stage import check_inputs, finalize, load_inputs
from grader.suite import graded_suite, hidden_folders

DEFAULT_OUT = "attention-kit-grades"
# How long a grading process may go without finishing a test (wall time, far above any test's CPU budget): a
# stall, the machine's (retried, then "not graded: the machine was too busy") or the grader's, never the student's.
STUDENT_TIMEOUT = 300.0


def limit_defaults() -> tuple[float, float, int]:
    """``(budget, call_budget, memory)`` unless told otherwise: the course folder's [limits], else the kit's.

    The one place these defaults are chosen: ``attention-kit grade``'s options and nbgrader's autograde
    (``grader.grading.nbgrader_autograde``) both take them from here.
    """
    limits = course.limits()
    return (limits.submission_seconds or STUDENT_BUDGET, limits.call_seconds or CALL_BUDGET,
            limits.memory_mib or MEMORY_MIB)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit grade``."""
    parser.add_argument(
        "submissions", nargs="?", metavar="SUBMISSIONS", type=Path,
        help="folder of submissions (one folder, .zip or .ipynb per student); omit it to grade bundled samples",
    )
    parser.add_argument("--out", type=Path, default=Path(DEFAULT_OUT),
                        help=f"output folder (default: ./{DEFAULT_OUT})")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="grading processes (default: the number of CPU cores)")
    parser.add_argument("--force", action="store_true", help="regrade students whose results are up to date")
    parser.add_argument("--no-fair", dest="fair", action="store_false",
                        help="test each exercise on the student's own earlier exercises, not the reference")
    parser.add_argument("--hidden", type=Path, default=None, metavar="DIR",
                        help="folder of hidden (instructor-only) test files (default: the kit's hidden tests of "
                             "your checkout or course folder, and the course folder's own hidden_tests/)")
    parser.add_argument("--exercise", dest="exercises", action="append", default=None, metavar="NAME",
                        help="grade only this exercise (repeat for several; default: all)")
    budget, call_budget, memory = limit_defaults()
    parser.add_argument("--budget", type=float, default=budget, metavar="SECONDS",
                        help="CPU seconds of student code per exercise of a submission; past it that exercise's "
                             "remaining tests fail "
                             f"(default: {budget:g}, the course's [limits] submission_seconds)")
    parser.add_argument("--call-budget", type=float, default=call_budget, metavar="SECONDS",
                        help=f"CPU seconds of one call to a student's function (default: {call_budget:g}, the "
                             "course's [limits] call_seconds)")
    parser.add_argument("--memory", type=int, default=memory, metavar="MiB",
                        help=f"memory of each student's worker, in MiB (default: {memory}, the course's [limits] "
                             "memory_mib)")
    parser.add_argument("--roster", type=Path, default=None, metavar="CSV",
                        help="roster (folder, lms_id, name, email) for OUT/canvas.csv; see `attention-kit export`")
    parser.add_argument("--only", action="append", default=None, metavar="ID",
                        help="regrade this student whatever their fingerprint says (repeat for several; the others "
                             "are kept or graded as usual)")
    parser.add_argument("--times", type=Path, default=None, metavar="CSV",
                        help="submission times (columns id,submitted_at, ISO 8601 with an offset) for the course's "
                             "[late] penalty; kept as OUT/times.csv for later runs (docs/term.md)")
    parser.add_argument("--adjustments", type=Path, default=None, metavar="CSV",
                        help="manual points (columns id,exercise,points,reason), added to the tests' score and shown "
                             "with their reason; kept as OUT/adjustments.csv, never lost on a regrade (docs/term.md)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="the longest a grading process may go without finishing a test (wall time): a stall, "
                             "retried when the machine was too busy, else the student is not graded "
                             f"(default: {STUDENT_TIMEOUT:g}, or twice --budget plus 100 s where that is more: a "
                             "test may use --budget and the diagnosis's 20 s)")
    parser.add_argument("--accept-no-isolation", dest="isolation", action="store_const", const="none",
                        default="require",
                        help="grade even where student code cannot be isolated (no bubblewrap, no user namespaces): "
                             "student code can then read and write what you can; every output says so")
    parser.add_argument("--container", dest="isolation", action="store_const", const="container",
                        help="this machine is a throw-away container holding one submission (the Gradescope runner): "
                             "without namespaces, the container is the isolation")
    add_engine_arguments(parser)  # --cluster ADDRESS, --shard I/N


# ---------------------------------------------------------------- the batch


def grade_batch(
    submissions: Path,
    out: Path,
    *,
    jobs: int | None = None,
    force: bool = False,
    fair: bool = True,
    hidden: Path | list[Path] | None = None,
    timeout: float | None = None,
    budget: float = STUDENT_BUDGET,
    call_budget: float = CALL_BUDGET,
    memory: int = MEMORY_MIB,
    isolation: str = "require",
    exercises: list[str] | None = None,
    echo: Any = print,
    roster: Path | None = None,
    only: list[str] | None = None,
    times: Path | None = None,
    adjustments: Path | None = None,
    cluster: str | None = None,
    shard: tuple[int, int] | None = None,
) -> int:
    """Grade every submission in ``submissions`` into ``out``; returns the exit status.

    The stages, in order: choose the isolation (no student code without it);
    load the suite; find the submissions; grade them (each prepared just in
    time, kept if its fingerprint is unchanged, graded in the pool beside the
    kit's own check, scored and written); write the gradebooks; sum up.
    """
    from grader.grading.outputs import write_gradebooks
    from grader.grading.report import summary
    from grader.grading.run_log import append as append_log
    from grader.grading.run_log import header, row_line
    from grader.sandbox.limits import IsolationUnavailable, choose, course_limits

    start = time.monotonic()
    try:
        plan = choose(isolation)  # before anything else: no student code without isolation
    except IsolationUnavailable as error:
        echo(f"error: {error}")
        return 2
    limits = course_limits(budget, call_budget, memory, course.limits().cpu_seconds)
    # A test may use its exercise's budget and the diagnosis's (a course may raise --budget): by default, no stall
    # before that; a --timeout given is the instructor's.
    timeout = max(STUDENT_TIMEOUT, 2 * limits.longest_test() + 60.0) if timeout is None else timeout
    _say_isolation(plan, limits, echo)
    suite, kit_failure = _load_suite(hidden, exercises, echo)
    if not suite and kit_failure is None:
        echo("error: the graded suite has no test files")
        return 2
    out = out.resolve()
    entries = _find_submissions(submissions, out, echo)
    if not entries:
        return 2
    unknown = sorted(set(only or ()) - {student for student, _ in entries})
    if unknown:
        echo(f"error: --only {unknown[0]}: no such submission in {submissions}")
        return 2
    try:  # the term's inputs (late policy, times, manual points, the roster kept in OUT): read before any grading
        inputs = load_inputs(out, times, adjustments, _course_names(), {student for student, _ in entries})
        roster = kept_roster(out, roster)  # the one given, else the one kept: canvas.csv follows every run's grades
    except (ValueError, ExportError) as error:
        echo(f"error: {error}")
        return 2
    log = header(limits=limits.describe(), isolation=plan.summary,
                 options={"jobs": jobs, "force": force or None, "only": ", ".join(only or ()) or None,
                          "exercises": ", ".join(exercises or ()) or None, "fair": None if fair else "no",
                          "times": times, "adjustments": adjustments, "roster": roster, "cluster": cluster,
                          "shard": f"{shard[0]}/{shard[1]}" if shard else None})
    work = new_folder("grade")  # (a killed run's folders are removed by the next: grading.scratch)
    # The workers' scratch folders, in a folder of this run removed below whatever happens to the grading
    # processes (a killed one cannot remove its own).
    scratch = new_folder("run", listable=False)
    # What every student's job shares (and the fingerprint hashes); the kit's check starts from it too.
    template = Job(student="", folder="", files=(), suite=suite_files(suite), fair=fair, policy=isolation,
                   budget=budget, call_budget=call_budget, memory=memory, course=course.settings(),
                   part=_graded_part(), scratch=str(scratch), draw_key=draw_key())
    entries = shard_entries(entries, shard, out, template, echo)  # --shard I/N: this slice, and OUT/shard.json
    engine = None
    try:
        if (engine := connect_cluster(cluster, template, echo, jobs)) is None:  # the pool's run_jobs without --cluster
            return 2  # the cluster cannot be reached, or refused every worker: said in one line, nobody graded
        batch = _Batch(out, suite, template, force=force, kit_failure=kit_failure, isolated=plan.isolated)
        batch.only, batch.inputs = set(only or ()), inputs
        with progress_display(len(entries)) as progress:
            batch.progress = progress
            batch.grade(entries, work, processes=jobs or os.cpu_count() or 1, timeout=timeout, engine=engine)
        batch.say_verdict(echo)
        written, rows = write_gradebooks(out, batch.rows([s for s, _ in entries]), roster, inputs, echo)
        kept = {student for student in batch.done if student not in batch.prepared}
        append_log(out, [*log, *(row_line(row, row.student in kept) for row in rows),
                         f"   {len(rows)} row(s), {time.monotonic() - start:.1f} s"])
        if written == 2:
            return 2
    finally:
        if callable(close := getattr(engine, "close", None)):  # a cluster's, even if its stream never started
            close()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    echo("")
    echo(summary(rows, graded=batch.graded, reused=batch.reused, seconds=time.monotonic() - start))
    echo(f"Limits: {limits.describe()}")
    echo(f"\nGradebook: {out / 'grades.csv'}; class report: {out / 'report.html'}; log: {out / 'grading.log'}; "
         f"per student: {out}/<student>/results.json, feedback.md")
    return 0 if all(row.graded for row in rows) and written == 0 else 1


def _say_isolation(plan: Any, limits: Any, echo: Any) -> None:
    """Stage 1: say how student code will run, and warn if it is not isolated."""
    echo(f"Isolation: {plan.summary}")
    echo(f"Limits: {limits.describe()}")
    if not plan.isolated:
        echo("WARNING: grading is NOT ISOLATED: student code can read and change what this user can.")


def _load_suite(hidden: Path | list[Path] | None, exercises: list[str] | None,
                echo: Any) -> tuple[list[Any], str | None]:
    """Stage 2: the graded suite, and why the kit is broken (None if it is not).

    An unknown ``--exercise`` is the caller's mistake (ValueError). A hidden test file that cannot be read,
    parsed or placed, or a test file of the manifest that is missing, is the kit's failure: nobody is graded.
    """
    from grader.curriculum import load as load_curriculum

    for name in exercises or ():
        load_curriculum().exercise(name)  # --exercise NAME unknown: the caller's mistake, said as such (ValueError)
    try:
        suite, warnings = graded_suite(hidden, exercises)
    except ValueError as error:  # a hidden test file that cannot be read, parsed or placed: the kit's failure
        suite, warnings = [], [f"the kit is broken: {str(error).splitlines()[0][:400]}"]
    for warning in warnings:
        echo(f"warning: {warning}")
    # A test file of the manifest that is missing is the kit's failure: nobody is graded without it.
    kit_failure = next((w if w.startswith("the kit is broken") else f"the kit is broken: {w}"
                        for w in warnings if " is missing" in w or w.startswith("the kit is broken")), None)
    return suite, kit_failure


def _course_names() -> tuple[str, ...]:
    """The exercises this batch grades (the course's part): what an ``exercise`` cell of ``--adjustments`` may name.

    Not every exercise of the manifest: points for one the gradebook has no column for were added to the total
    alone, and the exercises' columns no longer summed to it (a README walk).
    """
    from grader.curriculum import load as load_curriculum

    return load_curriculum().selected_names()


def _graded_part() -> str:
    """The course's part this process grades (``--part``, else the manifest's)."""
    from grader.curriculum import load as load_curriculum

    return parse_part(os.environ.get(PART_ENV) or load_curriculum().part)


def _find_submissions(submissions: Path, out: Path, echo: Any) -> list[tuple[str, Path]]:
    """Stage 3: the entries to grade, ``(student, entry)`` (none, after an error said why: exit 2)."""
    from grader.grading import submissions as found
    from grader.grading.report import escape_text

    inside = Path(os.path.realpath(submissions))
    if out == inside or inside in out.parents or out in inside.parents:
        echo(f"error: --out {out} and SUBMISSIONS {submissions} overlap: the results would land among the "
             "submissions (or the submissions among the results); choose an --out folder outside SUBMISSIONS")
        return []
    entries = found.discover(submissions, exclude=(out,))
    if submissions.is_dir() and entries and entries[0][1] != submissions:
        for skipped in sorted(submissions.iterdir()):
            if not found.is_submission(skipped):
                why = ("it is hidden and holds no .py, .ipynb or .zip file" if skipped.name.startswith(".")
                       else "tools make such folders")
                echo(f"note: {escape_text(skipped.name)!s} was skipped, not graded ({why}); rename it to grade it")
    if not entries:
        echo(f"error: no submissions in {submissions} (expected folders or .zip files)")
        return []
    refused = found.duplicates(entries)
    for line in dict.fromkeys(refused.values()):
        echo(f"refused: {line} (every one of them is refused; each has its row)")
    for student, entry in entries:
        if student not in refused and student != found.student_id(entry) and entry.name != student:
            echo(f"note: {escape_text(entry.name)!s} is graded as {escape_text(student)!s} "
                 "(its own name would collide with the grader's files or another entry)")
    return entries


class _Batch:
    """Stage 4, grading: every student prepared just in time, graded in the pool beside the kit's check, finished.

    Every student gets a row: kept from the last run (same fingerprint), graded, or not run (nothing
    gradable, or the kit is broken). The students graded before the kit's check ends wait for its verdict.
    """

    def __init__(self, out: Path, suite: list[Any], template: Job, *, force: bool, kit_failure: str | None,
                 isolated: bool) -> None:
        from grader.grading.fingerprint import suite_fingerprint

        self.out, self.suite, self.template, self.force, self.isolated = out, suite, template, force, isolated
        self.fingerprint = suite_fingerprint(template)
        self.progress: Any = None
        self.only: set[str] = set()  # --only: regraded whatever their fingerprints say
        self.inputs: Any = None  # the term's inputs: a row's progress line shows its final score, as every file
        self.graded = self.reused = 0
        # Every student done so far; the rows themselves are on disk (the batch's memory does not grow with the
        # class), but for a row that could not be written, kept here.
        self.done: set[str] = set()
        self.unwritten: dict[str, Any] = {}  # student -> StudentRow
        self.deferred: dict[str, tuple[Any, str, Result]] = {}  # no space (a worker's fill): written in rows()
        self.prepared: dict[str, tuple[Any, str]] = {}  # the students to grade: (submission, fingerprint)
        # The kit's verdict: why nothing can be graded, the tests that cannot be; the check's job while it runs.
        self.kit_failure, self.broken = kit_failure, {}
        self.canary: Job | None = None
        self.kit_key = ""

    def grade(self, entries: list[tuple[str, Path]], work: Path, processes: int, timeout: float,
              engine: Any = None) -> None:
        """Grade ``entries`` (prepared into ``work``) in ``processes`` grading processes (or on ``engine``)."""
        from grader.grading import kit_check
        from grader.grading.pool import run_jobs

        held: list[tuple[Job, Result]] = []
        jobs = list(self.feed(entries, work))  # every student prepared (and the kit's check first) before any runs
        stream = (engine or run_jobs)(jobs, processes, timeout)
        try:
            for job, result in stream:
                if result.interrupted:
                    raise KeyboardInterrupt
                if job is self.canary:
                    self.canary = None
                    self.kit_failure, self.broken = kit_check.verdict(result, self.kit_key)
                    if self.kit_failure is not None:
                        break  # nobody can be graded: the students not finished yet are not run
                    for held_job, held_result in held:
                        self.advance(held_job.student, self.finish(held_job, held_result))
                        self.graded += 1
                    held = []
                    continue
                if self.canary is not None:
                    held.append((job, result))
                    continue
                self.advance(job.student, self.finish(job, result))
                self.graded += 1
        finally:
            stream.close()
        if self.canary is not None and self.kit_failure is None:  # no verdict came: cannot happen
            self.kit_failure = "the kit is broken: the kit's check did not run"
        if self.kit_failure is not None:
            for student in self.prepared:
                if student not in self.done:  # held or dispatched when the kit failed: no result counts
                    self.not_run(dataclasses.replace(self.template, student=student))

    def feed(self, entries: list[tuple[str, Path]], work: Path) -> Iterator[Job]:
        """The students to grade, each prepared just before a grading process is free for it."""
        from grader.grading import kit_check
        from grader.grading import submissions as found
        from grader.grading.fingerprint import student_fingerprint
        from grader.grading.report import stored_row

        refused = found.duplicates(entries)  # entries that share an id: each refused, none chosen
        for student, entry in entries:
            submission = found.prepare(entry, work, student, refused.get(student))  # never raises
            fingerprint = student_fingerprint(self.fingerprint, submission.digest)
            previous = None if self.force or student in self.only else stored_row(self.out, student)
            if previous is not None and previous.fingerprint == fingerprint and previous.graded:
                self.reused += 1
                self.done.add(student)
                self.advance(student, dataclasses.replace(previous, status="unchanged: kept from the last run"))
                continue
            self.prepared[student] = (submission, fingerprint)
            job = dataclasses.replace(self.template, student=student, folder=str(submission.folder),
                                      files=tuple(f.path for f in self.suite if f.exercise not in submission.problems))
            if self.kit_failure is None and job.files and not self.kit_key:
                # The first student to grade: the kit's check goes first, beside the students.
                known, self.canary, self.kit_key = kit_check.plan(self.suite, job, work, self.fingerprint)
                if known is not None:
                    self.kit_failure, self.broken = known
                elif self.canary is not None:
                    yield self.canary
            if self.kit_failure is not None or not job.files:
                self.not_run(job)
                continue
            # The reference's use, if the kit was checked before: each test stopped at its allowance as it runs.
            yield dataclasses.replace(job, reference_use=kit_check.used(self.kit_key))

    def not_run(self, job: Job) -> None:
        """A student nothing can be graded of (no gradable module, or the kit is broken): no code runs."""
        if self.kit_failure is not None:
            job = dataclasses.replace(job, files=(), kit_failure=self.kit_failure)
        self.advance(job.student, self.finish(job, Result(isolation="not run", isolated=self.isolated)))
        self.graded += 1

    def finish(self, job: Job, result: Result) -> Any:
        """Score ``job``'s student and write their files (the kit's verdict applied); returns their row."""
        from grader.grading import kit_check, reference_use

        submission, fingerprint = self.prepared[job.student]
        if job.kit_failure:
            result = dataclasses.replace(result, error=job.kit_failure)
        elif job.reference_use is None and (used := kit_check.used(self.kit_key)) is not None:
            result = reference_use.judged(result, used)  # graded beside the kit's check: judged by its figures now
        if self.broken:
            result = dataclasses.replace(result, records=tuple(
                dataclasses.replace(record, internal=self.broken[record.nodeid])
                if record.nodeid in self.broken and not record.internal else record for record in result.records))
        from grader.grading.report import finish_student, unwritable_row

        try:
            row = finish_student(self.out, submission, fingerprint, self.suite, result)
        except Exception as error:  # noqa: BLE001 - a row for this student whatever happens
            row = self.unwritten[job.student] = unwritable_row(submission, self.suite, error)
            if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
                self.deferred[job.student] = (submission, fingerprint, result)
        self.done.add(job.student)
        return row

    def advance(self, student: str, row: Any) -> None:
        """Show that ``student`` is done, with their score and status (``row``: their StudentRow)."""
        from grader.grading.report import escape_text, number

        if self.inputs is not None:  # graded now or kept: the score of this run's gradebook, never the tests' own
            row = finalize(row, self.inputs)
        score = f"{number(row.score)}/{number(row.max_score)}" if row.graded else "no score"  # as grades.csv's cell
        self.progress.advance(escape_text(f"{student}: {score} ({row.status})")[:400])

    def say_verdict(self, echo: Any) -> None:
        """Say why nothing, or which tests, could not be graded (the kit's failure), if so."""
        from grader.grading.report import escape_text

        if self.kit_failure is not None:
            echo(escape_text(f"not graded: {self.kit_failure}")[:600])
        elif self.broken:
            echo(escape_text(f"not graded ({len(self.broken)} test(s)): {next(iter(self.broken.values()))}")[:600])

    def rows(self, students: list[str]) -> Iterator[Any]:
        """Stage 5: every student's typed row, in order, one at a time (the class's rows are never all in memory).

        Read from their results on disk, as the last stage (``grader.grading.outputs``) asks for them.
        """
        from grader.grading.report import finish_student, stored_row, unwritable_row

        for student in students:
            if (deferred := self.deferred.pop(student, None)) is not None:
                with contextlib.suppress(Exception):  # (the worker that filled the disk is gone now)
                    finish_student(self.out, deferred[0], deferred[1], self.suite, deferred[2])
                    del self.unwritten[student]
            row = self.unwritten.get(student) or stored_row(self.out, student)
            if row is None:  # cannot happen (every student got a row above); still never a lost row
                row = unwritable_row(self.prepared[student][0], self.suite, RuntimeError("no results"))
            yield row


def _exposed_to_workers(hidden: Path | list[Path] | None) -> str:
    """The first of the kit's secrets (the reference, the hidden tests, the given code) another user can reach, or "".

    Reached: every folder from it up to the root lets others pass (``o+x``); a folder that does not hides all below.
    """
    from grader.sandbox import given

    folders = [reference_dir(), *([hidden] if isinstance(hidden, Path) else hidden or []), given.folder()]
    return next((str(folder) for folder in (Path(f) for f in folders if f is not None) if _reachable(folder)), "")


def _reachable(folder: Path) -> bool:
    """Whether another user can pass every folder from ``folder`` up to the root (``o+x``), so reach what it holds."""
    chain = [folder.resolve(), *folder.resolve().parents]
    return folder.exists() and all(path.stat().st_mode & stat.S_IXOTH for path in chain)


def run(args: argparse.Namespace) -> int:
    """Run ``attention-kit grade``."""
    make_importable()  # the grading processes import `tests` from the kit
    hidden = args.hidden if args.hidden is not None else hidden_folders()
    if args.hidden is not None and not args.hidden.is_dir():
        print(f"error: --hidden {args.hidden}: no such folder", file=sys.stderr)
        return 2
    if reference_dir() is None:  # the student-safe package: the reference is the instructor's own copy
        print(f"error: {course.no_reference(ROOT)}", file=sys.stderr)
        return 2
    if course.stale_own_data():  # an own exercise's golden values and fingerprints are derived from its files
        print(f"error: not graded: {course.stale_own_data()}", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print("error: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.cluster and args.isolation != "require":
        # A cluster's machines grade many submissions each, beside a Dask worker that runs what its scheduler
        # sends: without namespaces a student's code could reach that scheduler (no network namespace) and the
        # other submissions' folders. --container is for one submission per throw-away container.
        print(f"error: --cluster grades only with bubblewrap's namespaces on every worker, not with "
              f"{'--container' if args.isolation == 'container' else '--accept-no-isolation'}: install bubblewrap "
              "on the cluster's machines (docs/cluster.md)", file=sys.stderr)
        return 2
    if args.isolation == "container" and (exposed := _exposed_to_workers(hidden)):
        # Without namespaces a worker sees the machine's files as its user: the kit's secrets must be out of reach.
        print(f"error: --container runs student code without namespaces, as users who could read {exposed}: make "
              "the kit readable by you alone (chmod -R go-rwx on it, as the Gradescope bundle's runner does) or "
              "grade with bubblewrap", file=sys.stderr)
        return 2
    if args.isolation == "container" and args.submissions is not None and _reachable(args.submissions):
        # A hostile round: two students in one --container batch; the second's modules found the first's in
        # SUBMISSIONS (its path is on the grader's command line in /proc) and ran them, for full marks.
        print(f"error: --container runs student code without namespaces, as users who could read the submissions "
              f"in {args.submissions}: one student's code could read (and run) another's; make SUBMISSIONS "
              f"readable by you alone (chmod 700 {args.submissions}; the grader copies each submission for its "
              "worker) or grade with bubblewrap", file=sys.stderr)
        return 2
    if args.roster is not None:  # a broken roster stops the run before anyone is graded
        from grader.grading.export import ExportError, read_roster

        try:
            read_roster(args.roster)
        except ExportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    try:  # a bad CSV of the term stops the run before anyone is graded: one line naming file, row and column
        check_inputs(args.times, args.adjustments, _course_names())
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    samples = None
    from grader.grading.submissions import argument_problem  # why SUBMISSIONS cannot be graded, or None
    try:
        submissions = args.submissions
        if submissions is None:
            from grader.grading.samples import make_samples

            samples = Path(tempfile.mkdtemp(prefix="attention-kit-samples-"))
            make_samples(samples)
            print(f"No SUBMISSIONS given: grading the bundled sample submissions ({samples}).")
        elif (problem := argument_problem(submissions)) is not None:  # missing, or a stray file
            print(f"error: {problem}", file=sys.stderr)
            return 2
        if args.budget <= 0 or (args.timeout is not None and args.timeout <= 0) or args.call_budget <= 0 \
                or args.memory < 64:
            print("error: --budget, --call-budget and --timeout must be positive, --memory at least 64 (MiB)",
                  file=sys.stderr)
            return 2
        return grade_batch(samples or submissions, args.out, jobs=args.jobs, force=args.force, fair=args.fair,
                           hidden=hidden, timeout=args.timeout, budget=args.budget,
                           call_budget=args.call_budget, memory=args.memory, isolation=args.isolation,
                           exercises=args.exercises, roster=args.roster, only=args.only, times=args.times,
                           adjustments=args.adjustments, cluster=args.cluster,
                           shard=parse_shard(args.shard) if args.shard else None)
    except KeyboardInterrupt:
        print("\ninterrupted: finished students are saved; rerun the same command to continue "
              "(the gradebook was not changed)", file=sys.stderr)
        return 130
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if samples is not None:
            shutil.rmtree(samples, ignore_errors=True)
