"""The roster of a class: who each submission is, for the LMS exports (read by ``grader.grading.formats``).

A CSV with a header row and the columns ``folder`` (the submission's name in
SUBMISSIONS), ``lms_id``, ``name`` and ``email``, optionally ``sis_id``,
``login_id`` and ``section``. Matching is exact: ids that differ only in case,
spaces or Unicode form are flagged, never matched (``attention-kit export``'s
documentation, ``grader.grading.export``, says more).
"""

from __future__ import annotations

import csv
import io
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import scoring
from grader.grading.escaping import csv_cell

ROSTER_COLUMNS = ("folder", "lms_id", "name", "email")
ROSTER_FILE = "roster.csv"
"""The roster a gradebook keeps (``OUT/roster.csv``), as it keeps ``times.csv`` and ``adjustments.csv``."""
OPTIONAL_ROSTER_COLUMNS = ("sis_id", "login_id", "section")


class ExportError(Exception):
    """The export cannot be made as asked; the message says why."""


@dataclass
class Roster:
    """Roster rows by submission folder, and what did not match."""

    rows: dict[str, dict[str, str]]
    unmatched_submissions: list[str] = field(default_factory=list)
    unmatched_roster: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)  # ids alike but not equal (see match_roster): lines to show


def cell(value: Any) -> str:
    """A CSV cell a spreadsheet will not run as a formula (roster names and emails are untrusted text)."""
    return csv_cell("" if value is None else value)


def number_cell(value: float | None) -> str:
    """A score cell; empty when there is no score (a test the grader could not run: never a 0)."""
    return "" if value is None else scoring.number(value)


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """The roster at ``path``: folder -> its row (column names lower-cased, cells stripped).

    Raises
    ------
    ExportError
        If a required column is missing, a row has no folder, or a folder appears twice.
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ExportError(f"--roster {path}: {error.strerror or error}") from None
    reader = csv.DictReader(io.StringIO(text))
    columns = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in ROSTER_COLUMNS if name not in columns]
    if missing:
        raise ExportError(f"--roster {path}: missing column(s) {', '.join(missing)}; the header must name "
                          f"{', '.join(ROSTER_COLUMNS)} (optional: {', '.join(OPTIONAL_ROSTER_COLUMNS)})")
    rows: dict[str, dict[str, str]] = {}
    for number, raw in enumerate(reader, start=2):
        if raw.get(None):  # more cells than the header: an unquoted comma would shift a name into the email
            raise ExportError(f"--roster {path} line {number}: {len(columns) + len(raw[None])} cells, but the "
                              f"header has {len(columns)}; a cell holding a comma (\"Martin, Alice\") goes in "
                              "double quotes")
        row = {key.strip().lower(): (value or "").strip() for key, value in raw.items() if key is not None}
        if not any(row.values()):
            continue
        folder = row.get("folder", "")
        if not folder:
            raise ExportError(f"--roster {path} line {number}: the folder column is empty")
        if folder in rows:
            raise ExportError(f"--roster {path} line {number}: folder {folder!r} appears twice")
        rows[folder] = row
    return rows


def kept_roster(out: Path, given: Path | None) -> Path | None:
    """Return the roster of the gradebook in ``out``: the file given (kept as ``OUT/roster.csv``), else the kept one.

    None when neither is there.

    So a rerun without ``--roster`` (after a change of ``[late]``, say) rewrites ``canvas.csv`` with the scores
    of this run, never leaving the last run's in it beside a ``grades.csv`` that disagrees.

    Raises
    ------
    ExportError
        If the roster given cannot be used (the copy kept is then unchanged).
    """
    from grader.grading.files import atomic_write

    kept = Path(out) / ROSTER_FILE
    if given is None:
        return kept if kept.is_file() else None
    read_roster(given)
    if Path(given).resolve() != kept.resolve():
        Path(out).mkdir(parents=True, exist_ok=True)
        atomic_write(kept, Path(given).read_text(encoding="utf-8-sig"))
    return kept


def id_key(student: str) -> str:
    """What two ids share when they differ only in case, whitespace, invisible characters or Unicode form (NFKC).

    Invisible characters are those of Unicode's categories Cf, Cc, Cs, Co and Cn (a zero-width
    space, a joiner, a bidi mark): ``alice`` followed by U+200B shows as ``alice`` in a file manager.
    """
    folded = "".join(unicodedata.normalize("NFKC", student).split()).casefold()
    return "".join(char for char in folded if unicodedata.category(char) not in _INVISIBLE)


_INVISIBLE = frozenset({"Cf", "Cc", "Cs", "Co", "Cn"})


def match_roster(students: list[str], roster: dict[str, dict[str, str]]) -> Roster:
    """Match gradebook students to roster rows, exactly (``Alice`` is not ``alice``).

    Ids that differ only in case, whitespace or Unicode normal form (:func:`id_key`) from a roster folder or
    from each other are never matched on that likeness: they are listed in ``flagged``, so that a submission
    named ``Alice`` or `` bob`` can neither take nor hide the row of ``alice`` or ``bob``.
    """
    matched = {student: roster[student] for student in students if student in roster}
    unmatched = [student for student in students if student not in roster]
    used = set(matched)
    folders: dict[str, list[str]] = {}
    for folder in roster:
        folders.setdefault(id_key(folder), []).append(folder)
    flagged = []
    for student in unmatched:
        for folder in folders.get(id_key(student), []):
            flagged.append(f"submission {show_id(student)} is not roster folder {show_id(folder)} (they differ only "
                           "in case, spaces or Unicode form): not matched; rename the submission or fix the roster")
    unused = [folder for folder in roster if folder not in used]
    return Roster(matched, unmatched, unused, flagged + alike_ids(students))


def alike_ids(students: list[str]) -> list[str]:
    """A line per group of ids that differ only in case, whitespace or Unicode normal form (:func:`id_key`)."""
    alike: dict[str, list[str]] = {}
    for student in students:
        alike.setdefault(id_key(student), []).append(student)
    return [f"submissions {', '.join(show_id(s) for s in group)} differ only in case, spaces or Unicode form: "
            "each is graded on its own; check that they are different students"
            for group in alike.values() if len(group) > 1] + [
        f"submission {show_id(student)} mixes {' and '.join(sorted(scripts))} letters, as a look-alike of another "
        "id does (a Cyrillic а in a Latin name): it is graded on its own; check whose it is"
        for student in students if len(scripts := mixed_scripts(student)) > 1]


# Scripts that Unicode's restriction levels (UTS #39, "highly restrictive") allow together in one identifier.
_TOGETHER = (frozenset({"Latin", "Cjk", "Hiragana", "Katakana"}), frozenset({"Latin", "Cjk", "Bopomofo"}),
             frozenset({"Latin", "Cjk", "Hangul"}))


def mixed_scripts(student: str) -> frozenset[str]:
    """The scripts of an id's letters when they do not belong together (empty: one script, or a usual mix).

    One letter of another script (Cyrillic ``а`` for Latin ``a``) makes an id that looks like another but is not
    equal to it under :func:`id_key`; that is how such a look-alike shows. The script is the first word of the
    letter's Unicode name (after NFKC, so full-width Latin is Latin). A name wholly in another script (all
    Cyrillic) is one script and is not flagged: that needs Unicode's confusable tables.
    """
    scripts = set()
    for char in unicodedata.normalize("NFKC", student):
        if char.isalpha():
            name = unicodedata.name(char, "")
            scripts.add(name.split(" ", 1)[0].capitalize() if name else "Unknown")
    if len(scripts) < 2 or any(scripts <= allowed for allowed in _TOGETHER):
        return frozenset()
    return frozenset(scripts)


def show_id(student: str) -> str:
    """An id as the terminal and ``unmatched.txt`` show it: quoted, control and bidi characters escaped."""
    from grader.grading.escaping import escape_text

    shown = escape_text(student)
    return f"'{shown}'" if student != student.strip() or not student else shown


def unmatched_report(roster: Roster) -> list[str]:
    """Lines about the entries of either side that found no partner."""
    lines = []
    if roster.unmatched_submissions:
        lines.append(f"{len(roster.unmatched_submissions)} submission(s) not in the roster (not in canvas.csv): "
                     + ", ".join(show_id(s) for s in roster.unmatched_submissions))
    if roster.unmatched_roster:
        lines.append(f"{len(roster.unmatched_roster)} roster student(s) without a submission (blank in canvas.csv): "
                     + ", ".join(show_id(s) for s in roster.unmatched_roster))
    lines += [f"flagged: {line}" for line in roster.flagged]
    return lines
