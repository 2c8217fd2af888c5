"""``attention-kit similarity``: which students' modules look alike (instructors).

::

    attention-kit similarity SUBMISSIONS --out OUT [--exercise NAME ...] [--top N] [--threshold T]

The submissions are found and read exactly as ``attention-kit grade`` reads
them (``grader.grading.submissions``: folders, zips, notebooks, with the same
refusals); student code is only read as text, never imported or run. What is
compared for an exercise is what grading runs of it
(``grader.grading.graded_source``): its module, the submission's modules it
imports (private helpers ``_name.py``, transitively), and the code its constant
data decodes to; code built at run time (``exec``, ``marshal``, ``importlib``...)
is listed as "code built at run time: review by hand". A module Python would
not read as text is left out with a line; the report is always written. For each
exercise of the course, every pair of students' modules is compared with
copydetect (winnowed fingerprints of the tokenized code: names, comments and
layout do not count), the stub (``exercises/<module>``) and the reference
(``solutions/<module>``, with the exercise's graded test file, whose own
implementations students can read) given as boilerplate, so that the code every student
starts from, or would write the reference's way, does not make two students
alike. A class that copied a leaked reference would then look unlike each
other: a second table lists the submissions closest to the reference itself
(the stub alone as boilerplate).

A pair's score is the larger of two shares: the part of one module's
fingerprinted code (what is left once the boilerplate is removed) found in the
other. ``OUT`` receives ``similarity.md`` (the tables, then one line per
submission), ``similarity.csv`` (the same rows), ``submissions.csv`` (one row
per entry of SUBMISSIONS: what was compared, or why not) and, per exercise,
copydetect's side-by-side HTML reports ``html/<exercise>.html`` (the pairs)
and ``html/<exercise>-reference.html`` (each student against the reference),
showing the rows the tables list. Equal scores are ordered by shared tokens,
then by name, so two runs on the same submissions give the same files.

copydetect is optional (``pip install 'attention-kit[similarity]'``) and
imported only when the command runs.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.curriculum import load as load_curriculum
from grader.grading.graded_source import BUILT, graded_source, kit_texts, runs_with

DEFAULT_OUT = "attention-kit-similarity"
DEFAULT_TOP = 10
DEFAULT_THRESHOLD = 0.5
# copydetect's noise threshold: a match shorter than this many characters of tokenized code does not count
# (its default). The guarantee threshold is the same, so every k-gram is a fingerprint (a winnowing window of
# one): the scores then do not depend on Python's per-process string hashing.
NOISE = 25
REFERENCE = "(reference)"
EXTRA = "pip install 'attention-kit[similarity]'"


class MissingLibrary(RuntimeError):
    """copydetect (or one of its own dependencies) is not installed: one line naming the extra."""


def load_copydetect() -> Any:
    """The ``copydetect`` module, imported now; :class:`MissingLibrary` if it cannot be."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # its report draws with matplotlib: never a window
    try:
        import copydetect
        import copydetect.detector  # noqa: F401 - the module with CopyDetector, imported with its dependencies
        import copydetect.utils  # noqa: F401
    except ModuleNotFoundError as error:
        missing = error.name or "copydetect"
        raise MissingLibrary(f"the similarity report needs {missing}, which is not installed: {EXTRA}") from None
    return copydetect


@dataclass(frozen=True)
class Pair:
    """Two modules of one exercise and how alike they are.

    Attributes
    ----------
    exercise : str
        The exercise.
    first, second : str
        The students (``first < second``), or a student and :data:`REFERENCE`.
    score : float
        The larger of ``shares``.
    shares : tuple of float
        For ``first`` and for ``second``: the share of its fingerprinted code found in the other.
    tokens : int
        Characters of tokenized code they share (copydetect's token overlap).
    """

    exercise: str
    first: str
    second: str
    score: float
    shares: tuple[float, float]
    tokens: int


@dataclass
class Entry:
    """One entry of SUBMISSIONS: what of it was compared, or why not."""

    student: str
    source: str
    compared: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # exercise -> why its module was not compared
    error: str | None = None
    built: dict[str, list[str]] = field(default_factory=dict)  # exercise -> where code is built at run time
    left_out: list[str] = field(default_factory=list)  # imported modules not compared, each with why
    texts: dict[str, str] = field(default_factory=dict, repr=False)  # exercise -> the text compared
    files: dict[str, list[str]] = field(default_factory=dict)  # exercise -> the modules its text holds

    @property
    def status(self) -> str:
        """``ok``, or which exercises were not compared and why (or why nothing was), then what to review."""
        if self.error:
            return f"not compared: {self.error}"
        if not self.compared:
            status = "no readable modules: " + "; ".join(dict.fromkeys(self.skipped.values()))
        elif self.skipped:
            status = f"compared {len(self.compared)} of {len(self.compared) + len(self.skipped)}: " + "; ".join(
                self.skipped.values())
        else:
            status = "ok"
        notes = list(self.left_out) + [f"{exercise}: {BUILT} ({len(where)} place{'s' * (len(where) > 1)})"
                                       for exercise, where in self.built.items()]
        return "; ".join([status, *notes]) if notes else status


@dataclass
class ExerciseResult:
    """The comparisons of one exercise."""

    exercise: str
    students: int
    pairs: list[Pair]  # every pair with a score above zero, most similar first
    closest: list[Pair]  # every student with a share above zero against the reference, closest first
    html_pairs: str = ""
    html_reference: str = ""
    error: str | None = None  # why the comparison failed, if it did


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``attention-kit similarity``."""
    parser.description = (
        "Compare the students' modules pairwise, exercise by exercise, with copydetect (winnowing over "
        "tokenized code: renamed variables and changed comments do not hide a copy). The stubs and the "
        "reference are boilerplate: code every student starts from does not count. Also lists the submissions "
        "closest to the reference itself. Student code is only read, never run. Needs the extra: " + EXTRA + ".")
    parser.add_argument("submissions", metavar="SUBMISSIONS", type=Path,
                        help="folder of submissions, read as `attention-kit grade` reads it "
                             "(one folder, .zip or notebook per student)")
    parser.add_argument("--out", type=Path, default=Path(DEFAULT_OUT),
                        help=f"output folder: similarity.md, similarity.csv, submissions.csv, html/ "
                             f"(default: ./{DEFAULT_OUT})")
    parser.add_argument("--exercise", dest="exercises", action="append", default=None, metavar="NAME",
                        help="compare only this exercise (repeat for several; default: every exercise of the course)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                        help=f"list at most N pairs per exercise, and N students closest to the reference "
                             f"(default: {DEFAULT_TOP})")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, metavar="T",
                        help="list only scores of at least T, between 0 and 1; a score is the larger share of "
                             "one module's own code (not boilerplate) found in the other "
                             f"(default: {DEFAULT_THRESHOLD:g})")


# ---------------------------------------------------------------- comparing


def _label_paths(report: str, root: Path, labels: dict[str, str]) -> str:
    """The HTML ``report`` with the scratch paths under ``root`` replaced by students' names (escaped)."""
    from grader.grading.escaping import html_text

    pattern = re.compile(re.escape(str(root)) + r"/(s\d+|reference)/[\w.]+")
    report = pattern.sub(lambda match: html_text(labels.get(match[1], match[1])), report)
    return report.replace(str(root) + "/", "")  # its settings name the output file it would have saved


def _render(detector: Any, ranked: list[Pair], top: int, threshold: float) -> str:
    """The HTML report of a copydetect ``detector``, showing the ``top`` of ``ranked`` at or above ``threshold``.

    copydetect shows every comparison above its display threshold: it is raised to the score of the last row
    the tables list (a tie may show a few more), so that a class of 300 does not give pages of thousands.
    """
    shown = _shown(ranked, top, threshold)
    # copydetect shows shares strictly above display_t; each pair appears once, by its larger share.
    detector.conf.display_t = min(1.0, max(0.0, (shown[-1].score if shown else 1.0) - 1e-9))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return detector.generate_html_report(output_mode="return")


def _reuse_tokens(detector: Any, fingerprints: dict[str, Any], stub: str, paths: list[str]) -> None:
    """Give ``detector`` the students' fingerprints, from ``fingerprints`` with the stub alone as boilerplate.

    Tokenizing is most of copydetect's work; the comparison with the reference needs the same tokens with
    other boilerplate, so only the (cheap) fingerprint selection is redone. Through copydetect's documented
    attributes of ``CodeFingerprint``; if they are not as expected, the detector tokenizes again itself.
    """
    import copy

    import numpy as np

    copydetect = load_copydetect()
    utils = copydetect.utils
    try:
        removed = np.unique(np.array(list(copydetect.detector.CodeFingerprint(
            stub, k=NOISE, win_size=1, language="python").hashes)))
        for path in paths:
            fingerprint = copy.copy(fingerprints.pop(path))  # the original's fingerprints are freed as we go
            hashes, where = utils.get_document_fingerprints(fingerprint.filtered_code, NOISE, 1, removed)
            fingerprint.hashes, fingerprint.hash_idx = hashes, where
            fingerprint.token_coverage = utils.get_token_coverage(where, NOISE, len(fingerprint.filtered_code))
            detector.file_data[path] = fingerprint
    except (AttributeError, KeyError, TypeError):
        detector.file_data.clear()
    fingerprints.clear()


def compare_exercise(exercise: str, modules: dict[str, str], stub: str, reference: str, work: Path,
                     threshold: float = DEFAULT_THRESHOLD, html_reports: bool = True,
                     top: int = DEFAULT_TOP) -> ExerciseResult:
    """Compare every pair of ``modules`` (student -> source text), and each with the reference.

    Parameters
    ----------
    exercise : str
        The exercise (names the files in the reports).
    modules : dict
        Student -> the source text of their module.
    stub, reference : str
        The source texts of the stub and of the reference: boilerplate for the pairs (the stub alone for
        the comparison with the reference).
    work : Path
        A scratch folder of the caller's (the texts are written there for copydetect).
    threshold : float
        The pairs at or above it are shown side by side in the HTML reports ...
    html_reports : bool
        Whether to render copydetect's HTML reports.
    top : int
        ... at most ``top`` of them (more where scores tie), the rows the tables list.

    Returns
    -------
    ExerciseResult
        The pairs and the students with a score above zero, most similar first, ties by name.
    """
    detector_module = load_copydetect().detector
    students = sorted(modules)
    folder = work / exercise
    module_file = f"{exercise}.py"
    paths: list[str] = []
    labels = {"reference": REFERENCE}
    for index, student in enumerate(students):
        path = folder / f"s{index}" / module_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(modules[student], encoding="utf-8", errors="backslashreplace")
        paths.append(str(path))
        labels[f"s{index}"] = student  # escaped for HTML where it is written (_label_paths)
    boilerplate = {}
    for name, text in (("stub", stub), ("reference", reference)):
        path = folder / name / module_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", errors="backslashreplace")
        boilerplate[name] = str(path)

    def detector(display: float) -> Any:
        return detector_module.CopyDetector(
            noise_t=NOISE, guarantee_t=NOISE, display_t=display, extensions=["py"], force_language="python",
            autoopen=False, silent=True, out_file=str(folder / "report.html"))

    result = ExerciseResult(exercise=exercise, students=len(students), pairs=[], closest=[])
    tokens: dict[str, Any] = {}
    if len(students) >= 2:
        pairs = detector(threshold)
        for path in paths:
            pairs.add_file(path)
        pairs.add_file(boilerplate["stub"], "boilerplate")
        pairs.add_file(boilerplate["reference"], "boilerplate")
        pairs.run()
        shares, overlap = pairs.similarity_matrix, pairs.token_overlap_matrix
        for i in range(len(students)):
            for j in range(i + 1, len(students)):
                first, second = float(shares[i, j, 0]), float(shares[i, j, 1])
                if max(first, second) > 0:
                    result.pairs.append(Pair(exercise, students[i], students[j], max(first, second),
                                             (first, second), int(overlap[i, j])))
        result.pairs.sort(key=lambda pair: (-pair.score, -pair.tokens, pair.first, pair.second))
        if html_reports:
            result.html_pairs = _label_paths(_render(pairs, result.pairs, top, threshold), folder, labels)
        tokens = pairs.file_data
        del pairs, shares, overlap  # the fingerprints of every pair's overlap: freed before the next comparison
    if students:
        against = detector(threshold)
        for path in paths:
            against.add_file(path, "test")
        against.add_file(boilerplate["reference"], "ref")
        against.add_file(boilerplate["stub"], "boilerplate")
        if tokens:
            _reuse_tokens(against, tokens, boilerplate["stub"], paths)
        against.run()
        shares, overlap = against.similarity_matrix, against.token_overlap_matrix
        for i, student in enumerate(students):
            first, second = float(shares[i, 0, 0]), float(shares[i, 0, 1])
            if first > 0:
                result.closest.append(Pair(exercise, student, REFERENCE, first, (first, second), int(overlap[i, 0])))
        result.closest.sort(key=lambda pair: (-pair.score, -pair.tokens, pair.first))
        if html_reports:
            result.html_reference = _label_paths(_render(against, result.closest, top, threshold), folder, labels)
    return result


# ---------------------------------------------------------------- writing


def _shown(pairs: list[Pair], top: int, threshold: float) -> list[Pair]:
    return [pair for pair in pairs if pair.score >= threshold][:top]


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def summary_lines(results: list[ExerciseResult], top: int, threshold: float) -> list[str]:
    """The terminal summary: per exercise, the most similar pairs and the students closest to the reference."""
    from grader.grading.escaping import escape_text

    lines = []
    for result in results:
        pairs, closest = _shown(result.pairs, top, threshold), _shown(result.closest, top, threshold)
        compared = result.students * (result.students - 1) // 2
        lines.append(f"{result.exercise} ({result.students} modules, {compared} pairs):")
        if pairs:
            lines.append("  most similar pairs:")
            width = max(len(escape_text(pair.first)) for pair in pairs)
            for pair in pairs:
                lines.append(f"    {pair.score:.2f}  {escape_text(pair.first):<{width}}  {escape_text(pair.second)}"
                             f"  ({_percent(pair.shares[0])} / {_percent(pair.shares[1])}, {pair.tokens} tokens)")
        else:
            lines.append(f"  most similar pairs: none with a score of at least {threshold:g}")
        if closest:
            lines.append("  closest to the reference:")
            width = max(len(escape_text(pair.first)) for pair in closest)
            for pair in closest:
                lines.append(f"    {pair.score:.2f}  {escape_text(pair.first):<{width}}  ({pair.tokens} tokens)")
        else:
            lines.append(f"  closest to the reference: none with a score of at least {threshold:g}")
    return lines


def markdown(results: list[ExerciseResult], entries: list[Entry], top: int, threshold: float) -> str:
    """``similarity.md``: per exercise the tables, the code built at run time, the HTML reports; then every entry.

    Every text from a submission goes through ``grader.grading.escaping.md_text``.
    """
    from grader.grading.escaping import md_text

    out = ["# Similarity report", "",
           "Scores from copydetect (winnowing over tokenized code), the stub and the reference as boilerplate. "
           "A pair's score is the larger of its two shares: the part of one module's own code found in the "
           f"other. Listed: at most {top} per table, scores of at least {threshold:g}.", ""]
    for result in results:
        out += [f"## {result.exercise}", "",
                f"{result.students} modules compared. Side by side: [pairs](html/{result.exercise}.html), "
                f"[against the reference](html/{result.exercise}-reference.html).", ""]
        pairs = _shown(result.pairs, top, threshold)
        if pairs:
            out += ["| rank | student | student | score | shares | tokens |", "|---|---|---|---|---|---|"]
            out += [f"| {rank} | {md_text(p.first)} | {md_text(p.second)} | {p.score:.2f} | {_percent(p.shares[0])} / "
                    f"{_percent(p.shares[1])} | {p.tokens} |" for rank, p in enumerate(pairs, start=1)]
        else:
            out.append(f"No pair at or above {threshold:g}.")
        out += ["", "Closest to the reference (the stub alone as boilerplate):", ""]
        closest = _shown(result.closest, top, threshold)
        if closest:
            out += ["| rank | student | score | tokens |", "|---|---|---|---|"]
            out += [f"| {rank} | {md_text(p.first)} | {p.score:.2f} | {p.tokens} |"
                    for rank, p in enumerate(closest, start=1)]
        else:
            out.append(f"Nobody at or above {threshold:g}.")
        if result.error:
            out += ["", f"Not compared: the comparison failed ({md_text(result.error)})."]
        built = [entry for entry in entries if result.exercise in entry.built]
        if built:
            out += ["", f"{BUILT[0].upper()}{BUILT[1:]} (the scores above include what constant data decodes "
                        "to, nothing else of what these places build):", ""]
            for entry in built:
                where = entry.built[result.exercise]
                more = f" ... and {len(where) - 8} more" if len(where) > 8 else ""
                out.append(f"- {md_text(entry.student)}: {md_text('; '.join(where[:8]) + more)}")
        out.append("")
    out += ["## Submissions", "", "| student | compared | status |", "|---|---|---|"]
    out += [f"| {md_text(entry.student)} | {len(entry.compared)} | {md_text(entry.status)} |" for entry in entries]
    return "\n".join(out) + "\n"


def _csv(rows: list[list[object]]) -> str:
    from grader.grading.escaping import csv_cell

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in rows:
        writer.writerow([cell if isinstance(cell, int | float) else csv_cell(cell) for cell in row])
    return buffer.getvalue()


def pairs_csv(results: list[ExerciseResult], top: int, threshold: float) -> str:
    """``similarity.csv``: the rows of the tables (``table`` is ``pair`` or ``reference``)."""
    rows: list[list[object]] = [["exercise", "table", "rank", "student", "other", "score", "share_student",
                                 "share_other", "tokens"]]
    for result in results:
        for table, pairs in (("pair", result.pairs), ("reference", result.closest)):
            for rank, pair in enumerate(_shown(pairs, top, threshold), start=1):
                rows.append([result.exercise, table, rank, pair.first, pair.second, round(pair.score, 4),
                             round(pair.shares[0], 4), round(pair.shares[1], 4), pair.tokens])
    return _csv(rows)


def submissions_csv(entries: list[Entry]) -> str:
    """``submissions.csv``: one row per entry of SUBMISSIONS."""
    rows: list[list[object]] = [["student", "entry", "compared", "status"]]
    rows += [[entry.student, entry.source, " ".join(entry.compared), entry.status] for entry in entries]
    return _csv(rows)


# ---------------------------------------------------------------- the command


def read_entry(student: str, path: Path, work: Path, chosen: list[Any], refusal: str | None = None) -> Entry:
    """Read one entry of SUBMISSIONS as ``grade`` reads it: per exercise, the text of what its module runs.

    Never raises for what the entry holds: whatever goes wrong is the entry's ``error`` (its row).
    """
    from grader.grading import submissions as found

    submission = found.prepare(path, work / "submissions", student, refusal)
    entry = Entry(student=student, source=path.name, error=submission.error if submission.folder is None else None)
    analysed: dict[tuple[str, str], Any] = {}  # a helper several exercises import is analysed once
    try:
        for exercise in chosen:
            if entry.error or submission.folder is None:
                break
            source = graded_source(submission.folder, exercise.module_file, runs_with(exercise.name), analysed)
            if not source.files:
                present = (submission.folder / exercise.module_file).is_file()  # else: the static checks say
                entry.skipped[exercise.name] = (source.skipped[0] if present and source.skipped else None) or \
                    submission.problems.get(exercise.name) or f"{exercise.module_file} cannot be read"
                continue
            entry.texts[exercise.name] = source.text
            entry.files[exercise.name] = source.files
            entry.compared.append(exercise.name)
            entry.left_out += [f"{exercise.name}: {why}" for why in source.skipped]
            if source.built:
                entry.built[exercise.name] = source.built
    except Exception as error:  # noqa: BLE001 - one entry, however odd, costs its own row only
        entry.error = f"could not be read ({type(error).__name__}: {error})"[:300]
        entry.texts.clear()
    finally:
        if submission.folder is not None:
            shutil.rmtree(submission.folder.parent, ignore_errors=True)  # only the texts are kept
    return entry



def similarity_report(submissions: Path, out: Path, exercises: list[str] | None = None, top: int = DEFAULT_TOP,
                      threshold: float = DEFAULT_THRESHOLD, echo: Callable[[str], Any] = print,
                      html_reports: bool = True) -> int:
    """Compare the modules of every submission in ``submissions``, writing the report into ``out``.

    Returns the exit status: 0 when the report was written, 2 when it could not start (copydetect missing,
    no submissions, ``out`` overlapping ``submissions``). Raises ValueError for an unknown exercise name.
    """
    from grader.grading import submissions as found
    from grader.grading.escaping import escape_text
    from grader.grading.report import atomic_write

    start = time.monotonic()
    curriculum = load_curriculum()
    course = curriculum.selection()
    chosen = [curriculum.exercise(name) for name in dict.fromkeys(exercises)] if exercises else list(course)
    outside = [exercise.name for exercise in chosen if exercise not in course]
    if outside:  # submissions are read for the course's exercises only, as `grade` reads them
        raise ValueError(f"--exercise {outside[0]}: not an exercise of this course's part (its exercises: "
                         f"{', '.join(exercise.name for exercise in course)}); add --part all")
    try:
        load_copydetect()
    except MissingLibrary as error:
        echo(f"error: {error}")
        return 2
    shown, out = out, out.resolve()
    inside = Path(os.path.realpath(submissions))
    if out == inside or inside in out.parents or out in inside.parents:
        echo(f"error: --out {out} and SUBMISSIONS {submissions} overlap: choose an --out folder outside SUBMISSIONS")
        return 2
    listed = found.discover(submissions, exclude=(out,))
    if submissions.is_dir() and listed and listed[0][1] != submissions:
        for skipped in sorted(submissions.iterdir()):
            if not found.is_submission(skipped):  # what `grade` skips too, and says so
                why = ("it is hidden and holds no .py, .ipynb or .zip file" if skipped.name.startswith(".")
                       else "tools make such folders")
                echo(f"note: {escape_text(skipped.name)!s} was skipped ({why}); rename it to compare it")
    if not listed:
        echo(f"error: no submissions in {submissions} (expected folders, .zip files or notebooks)")
        return 2
    work = Path(tempfile.mkdtemp(prefix="attention-kit-similarity-"))
    try:
        entries = [read_entry(student, path, work, chosen, found.duplicates(listed).get(student))
                   for student, path in listed]
        results = []
        for exercise in chosen:
            texts = {entry.student: entry.texts.pop(exercise.name) for entry in entries
                     if exercise.name in entry.texts}
            imported = {name for entry in entries for name in entry.files.get(exercise.name, ())}
            # The graded tests hold their own implementations (to compute what they expect): a module pasted
            # from them is as close to the kit's code as one copied from the reference, so it counts as such.
            stub, reference = kit_texts(exercise.module_file, imported, exercise.test_file)
            try:
                results.append(compare_exercise(exercise.name, texts, stub, reference, work / "compare",
                                                threshold, html_reports, top))
            except Exception as error:  # noqa: BLE001 - one exercise that copydetect fails on costs itself only
                results.append(ExerciseResult(exercise.name, len(texts), [], [],
                                              error=f"{type(error).__name__}: {error}"[:300]))
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "similarity.md", markdown(results, entries, top, threshold))
        atomic_write(out / "similarity.csv", pairs_csv(results, top, threshold))
        atomic_write(out / "submissions.csv", submissions_csv(entries))
        if html_reports:
            for result in results:
                atomic_write(out / "html" / f"{result.exercise}.html", result.html_pairs or _empty_report(result))
                atomic_write(out / "html" / f"{result.exercise}-reference.html",
                             result.html_reference or _empty_report(result))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    readable = sum(bool(entry.compared) for entry in entries)
    echo(f"Similarity of {len(entries)} submissions ({readable} with modules to compare), "
         f"{len(results)} exercise(s); stubs and reference as boilerplate; scores of at least {threshold:g}, "
         f"at most {top} per table:")
    for line in summary_lines(results, top, threshold):
        echo(line)
    for result in results:
        if result.error:
            echo(f"{result.exercise}: not compared (the comparison failed: {escape_text(result.error)})")
    incomplete = [entry for entry in entries if entry.status != "ok"]
    if incomplete:
        echo(f"Not compared in full, or to review by hand ({len(incomplete)}):")
        for entry in incomplete:
            echo(f"  {escape_text(entry.student)}: {escape_text(entry.status)[:300]}")
    echo(f"\nReport: {shown / 'similarity.md'}, similarity.csv, submissions.csv"
         + (", html/<exercise>.html" if html_reports else "") + f" ({time.monotonic() - start:.1f} s)")
    return 0


def _empty_report(result: ExerciseResult) -> str:
    from grader.grading.escaping import html_text

    return (f"<!DOCTYPE html><html><body><p>{html_text(result.exercise)}: {result.students} module(s), "
            "nothing to compare.</p></body></html>\n")


def run(args: argparse.Namespace) -> int:
    """Run ``attention-kit similarity``."""
    if not args.submissions.exists():
        print(f"error: {args.submissions}: no such file or folder", file=sys.stderr)
        return 2
    if args.top < 1:
        print(f"error: --top must be at least 1, not {args.top}", file=sys.stderr)
        return 2
    if not 0 <= args.threshold <= 1:
        print(f"error: --threshold must be between 0 and 1, not {args.threshold:g}", file=sys.stderr)
        return 2
    try:
        load_copydetect()
    except MissingLibrary as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        return similarity_report(args.submissions, args.out, exercises=args.exercises, top=args.top,
                                 threshold=args.threshold)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
