"""The term's settings and inputs: late penalties, extensions, submission times, manual points.

None of them decides how a submission is graded, so none is part of a grade's
fingerprint (``grader.grading.fingerprint``): changing them regrades nobody;
the batch recomputes every output from the stored results
(``grader.grading.term_stage``). The score rule that uses them is one
function, :func:`grader.scoring.final_score`.

- ``course.toml``'s ``[late]`` (``deadline``: ISO 8601 with an offset,
  ``per_day``: the fraction of the score lost per started day late,
  ``max_days``: later than that the score is 0) and ``[extensions]``
  (``ID = DAYS``, added to the deadline of that student);
- ``grade --times CSV``: columns ``id,submitted_at`` (ISO 8601 with an
  offset, as LMS exports give them; an empty cell: no time, not late);
- ``grade --adjustments CSV``: columns ``id,exercise,points,reason``
  (``exercise`` empty for the whole submission; ``points`` may be negative;
  the reason is required: the student reads it).

Every bad value stops with one line naming the file, the row and the column.
Standard library only (``grader.course`` parses ``[late]`` with it).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

TIMES_COLUMNS = ("id", "submitted_at")
ADJUSTMENT_COLUMNS = ("id", "exercise", "points", "reason")
DAY = timedelta(days=1)


class TermError(ValueError):
    """A term setting or input file that cannot be used: one line naming the file, the row and the column."""


@dataclass(frozen=True)
class LatePolicy:
    """``[late]``: the deadline, the fraction lost per started day late, and the last day that still scores."""

    deadline: datetime
    per_day: float
    max_days: int


@dataclass(frozen=True)
class Adjustment:
    """One manual change of a student's points, with the reason the student reads."""

    exercise: str
    """The exercise it belongs to, or "" for the whole submission."""
    points: float
    """Points added (negative: taken away)."""
    reason: str
    """Why (a rubric item, an override): shown in feedback.md."""


@dataclass(frozen=True)
class Lateness:
    """How late one submission was and what it costs."""

    submitted_at: str
    deadline: str
    """The student's own deadline (the course's plus their extension), ISO 8601."""
    extension_days: float
    days_late: int
    """Started days after the student's deadline (0: on time)."""
    fraction: float
    """The fraction of the score lost (1.0: the score is 0)."""


def parse_time(value: str, where: str) -> datetime:
    """An ISO 8601 time with an offset (``2026-10-01T23:59:00+02:00``, ``...Z``).

    Raises
    ------
    TermError
        If it is not one, or has no offset (a time without one means something else on every machine).
    """
    text = str(value).strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise TermError(f"{where}: {value!r} is not an ISO 8601 time such as 2026-10-01T23:59:00+02:00") from None
    if when.tzinfo is None:
        raise TermError(f"{where}: {value!r} has no offset; write it with one (+02:00, Z), "
                        "e.g. 2026-10-01T23:59:00+02:00")
    return when


def parse_late(path: Path, table: Any) -> LatePolicy | None:
    """``[late]`` of ``path`` (None if absent); raises :class:`TermError` naming the setting."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TermError(f"{path}: late must be a table ([late])")
    unknown = sorted(set(table) - {"deadline", "per_day", "max_days"})
    if unknown:
        raise TermError(f"{path}: unknown setting [late] {unknown[0]} (the settings are deadline, per_day, max_days)")
    if "deadline" not in table:
        raise TermError(f"{path}: [late] needs deadline (ISO 8601 with an offset, e.g. 2026-10-01T23:59:00+02:00)")
    raw = table["deadline"]
    if isinstance(raw, datetime):  # TOML's own date-time: it must carry an offset too
        raw = raw.isoformat()
    deadline = parse_time(raw, f"{path}: [late] deadline")
    for key in ("per_day", "max_days"):
        if key not in table:
            raise TermError(f"{path}: [late] needs {key} (per_day = 0.1: a tenth of the score per started day late; "
                            "max_days = 3: later than 3 days scores 0)")
    per_day = table["per_day"]
    if isinstance(per_day, bool) or not isinstance(per_day, (int, float)) or not 0 <= per_day <= 1:
        raise TermError(f"{path}: [late] per_day must be a fraction between 0 and 1 (0.1: 10% per started day), "
                        f"not {per_day!r}")
    max_days = table["max_days"]
    if isinstance(max_days, bool) or not isinstance(max_days, int) or max_days < 0:
        raise TermError(f"{path}: [late] max_days must be a whole number of days, 0 or more, not {max_days!r}")
    return LatePolicy(deadline, float(per_day), max_days)


def parse_extensions(path: Path, table: Any) -> dict[str, float]:
    """``[extensions]`` of ``path``: student id -> extra days; raises :class:`TermError` naming the entry."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise TermError(f"{path}: extensions must be a table ([extensions] with lines ID = DAYS)")
    extensions = {}
    for student, days in table.items():
        if isinstance(days, bool) or not isinstance(days, (int, float)) or not 0 <= days < 3660:
            raise TermError(f"{path}: [extensions] {student} must be a number of days, 0 or more, not {days!r}")
        extensions[str(student)] = float(days)
    return extensions


def lateness(policy: LatePolicy, submitted_at: datetime, extension_days: float = 0.0) -> Lateness:
    """How late ``submitted_at`` is against ``policy``'s deadline plus ``extension_days``.

    Every started day after the student's deadline costs ``per_day`` of the score (one second late is one
    day); later than ``max_days`` days the whole score is lost.
    """
    deadline = policy.deadline + timedelta(days=extension_days)
    late = submitted_at - deadline
    days = 0 if late <= timedelta(0) else math.ceil(late / DAY)
    fraction = 0.0 if days == 0 else 1.0 if days > policy.max_days else min(1.0, policy.per_day * days)
    return Lateness(submitted_at.isoformat(), deadline.isoformat(), extension_days, days, round(fraction, 6))


_POINTS = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
MAX_POINTS = 10_000.0


def _read_csv(path: Path, columns: tuple[str, ...], option: str) -> list[tuple[int, dict[str, str]]]:
    """The rows of a CSV with ``columns`` (header names case-insensitive), numbered as a spreadsheet shows them."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise TermError(f"{option} {path}: cannot be read ({getattr(error, 'strerror', None) or error})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [(name or "").strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in columns if name not in header]
    if missing:
        raise TermError(f"{option} {path} row 1: missing column {missing[0]!r}; the header must be "
                        f"{','.join(columns)}")
    rows = []
    for number, raw in enumerate(reader, start=2):
        if raw.get(None):  # more cells than the header: an unquoted comma (a reason's, a decimal comma's 1,5)
            raise TermError(f"{option} {path} row {number}: {len(header) + len(raw[None])} cells, but the header "
                            f"has {len(header)}; a cell holding a comma (a reason, a decimal comma) goes in double "
                            'quotes ("1.5", "good, clear docstring")')
        row = {(key or "").strip().lower(): (value or "").strip() for key, value in raw.items() if key is not None}
        if any(row.values()):
            if not row.get("id"):
                raise TermError(f"{option} {path} row {number} column id: empty")
            rows.append((number, row))
    return rows


def _known(student: str, students: set[str] | None, where: str) -> None:
    """Refuse an id that is no submission of the batch (a typo would otherwise go unnoticed, its row unused)."""
    if students is not None and student not in students:
        close = sorted(s for s in students if s.lower() == student.lower())
        raise TermError(f"{where} id: {student!r} is not a submission of this batch"
                        + (f" (did you mean {close[0]!r}?)" if close else " (ids are the entries' names)"))


def read_times(path: Path, students: set[str] | None = None) -> dict[str, datetime]:
    """``--times CSV``: student id -> when they submitted (a row with an empty time is left out).

    ``students``: the batch's ids, when known; a row of another id is refused.
    """
    times: dict[str, datetime] = {}
    for number, row in _read_csv(path, TIMES_COLUMNS, "--times"):
        where = f"--times {path} row {number} column submitted_at"
        _known(row["id"], students, f"--times {path} row {number} column")
        if row["id"] in times:
            raise TermError(f"--times {path} row {number} column id: {row['id']!r} appears twice")
        if row["submitted_at"]:
            times[row["id"]] = parse_time(row["submitted_at"], where)
    return times


def read_adjustments(path: Path, exercises: tuple[str, ...],
                     students: set[str] | None = None) -> dict[str, tuple[Adjustment, ...]]:
    """``--adjustments CSV``: student id -> their manual points, in the file's order.

    ``exercises``: the names an ``exercise`` cell may hold (empty: the whole submission). ``students``: the
    batch's ids, when known; a row of another id is refused.
    """
    found: dict[str, list[Adjustment]] = {}
    for number, row in _read_csv(path, ADJUSTMENT_COLUMNS, "--adjustments"):
        where = f"--adjustments {path} row {number} column"
        _known(row["id"], students, where)
        exercise = row["exercise"]
        if exercise and exercise not in exercises:
            raise TermError(f"{where} exercise: {exercise!r} is not an exercise of the course "
                            f"({', '.join(exercises)}; empty for the whole submission)")
        # Written as a person writes points: digits, one sign, one decimal point (not 1e308, 1_5, nan or 0x10),
        # and no more than any course's total could need.
        if not _POINTS.fullmatch(row["points"]):
            raise TermError(f"{where} points: {row['points']!r} is not a number of points (e.g. 2, -1.5)")
        points = float(row["points"])
        if abs(points) > MAX_POINTS:
            raise TermError(f"{where} points: {row['points']!r} is more than {MAX_POINTS:g} points either way")
        if not row["reason"]:
            raise TermError(f"{where} reason: empty; the student reads why their points changed")
        found.setdefault(row["id"], []).append(Adjustment(exercise, points, row["reason"]))
    return {student: tuple(items) for student, items in found.items()}
