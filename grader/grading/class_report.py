"""``OUT/report.html``: the class report, a static page an instructor opens in a browser (the batch's process).

What it shows, from the typed rows (:class:`grader.grading.rows.StudentRow`):
the score distribution of the course and of each exercise (inline SVG bars: no
script, no file beside it, no package needed), the misconceptions the kit
diagnosed across the class, most frequent first, with how many students and
who, the tests most failed, the late submissions and manual points, and the
rows not graded and why.

Safe: every text that comes from a student or their code (ids, statuses,
test messages) goes through :func:`grader.grading.escaping.escape_text` (control
and bidirectional characters) and :func:`html.escape`; the page's Content
Security Policy allows no script and no resource from outside, so even a
text that slipped through could not run.
"""

from __future__ import annotations

import datetime
import html
import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from grader import scoring
from grader.curriculum import load as load_curriculum
from grader.grading.escaping import escape_text
from grader.grading.rows import StudentRow

BINS = 10
TOP_TESTS = 15
MAX_NAMES = 30
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { border: 1px solid #ddd; padding: 0.25em 0.6em;
text-align: left; vertical-align: top; } th { background: #f4f4f4; } .num { text-align: right; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; } figure { margin: 0; } figcaption { font-size: 0.9em; }
.names { font-size: 0.9em; color: #444; } .warn { color: #a00; }
"""


def text(value: object) -> str:
    """A student's (or anyone's) text as HTML: control and bidi characters shown escaped, markup escaped."""
    return html.escape(escape_text(str(value)), quote=True)


def histogram_svg(percentages: list[float], title: str) -> str:
    """An inline SVG bar chart of ``percentages`` in :data:`BINS` bins of 0-100%."""
    counts = [0] * BINS
    for value in percentages:
        counts[min(BINS - 1, max(0, int(value * BINS / 100)))] += 1
    peak = max(counts) or 1
    width, height, bar = 300, 140, 300 // BINS
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 44}" role="img" '
             f'aria-label="{text(title)}"><g transform="translate(0,14)">']
    for index, count in enumerate(counts):
        tall = round(count * height / peak)
        label = f"{index * 100 // BINS}-{(index + 1) * 100 // BINS}%: {count}"
        parts.append(f'<rect x="{index * bar + 1}" y="{height - tall}" width="{bar - 2}" height="{tall}" '
                     f'fill="#4a7ebb"><title>{label}</title></rect>')
        if count:
            parts.append(f'<text x="{index * bar + bar // 2}" y="{height - tall - 2}" font-size="10" '
                         f'text-anchor="middle">{count}</text>')
    parts.append(f'<line x1="0" y1="{height}" x2="{width}" y2="{height}" stroke="#333"/>')
    parts += [f'<text x="{x}" y="{height + 14}" font-size="10" text-anchor="middle">{label}</text>'
              for x, label in ((6, "0"), (width // 2, "50%"), (width - 14, "100%"))]
    return "".join(parts) + "</g></svg>"


# The diagnosis in front of a failure (tests/diagnosis.py): its quoted descriptions, or a family's sentence.
_DIAGNOSIS = re.compile(r"^Diagnosis\b")
_QUOTED = re.compile(r'^\s*(?:- )?"(?P<description>.+)"\s*$')
_FAMILY = re.compile(r"^Diagnosis \(a family of mistakes: (?P<family>[^)]+)\): .*? goes wrong, "
                     r"(?P<description>.+?)\.?$")


def diagnoses(output: str) -> list[str]:
    """The misconceptions a test's failure text names (its Diagnosis lines), in order."""
    found: list[str] = []
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if (family := _FAMILY.match(line)) is not None:
            found.append(f"{family['family']}: {family['description']}")
            continue
        if not _DIAGNOSIS.match(line):
            continue
        for following in lines[index + 1:]:
            if following.strip().startswith("Hint:") or following.strip().startswith("- it "):
                continue
            if (quoted := _QUOTED.match(following)) is None:
                break
            found.append(quoted["description"])
    return found


def misconceptions(rows: Iterable[StudentRow]) -> list[tuple[str, str, list[str]]]:
    """``(exercise, misconception, students)`` across the class, the most students first."""
    who: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        for test in row.tests:
            if not test.passed:
                for description in diagnoses(test.output):
                    who[(test.exercise, description)].add(row.student)
    return sorted(((exercise, description, sorted(students)) for (exercise, description), students in who.items()),
                  key=lambda item: (-len(item[2]), item[0], item[1]))


def names(students: list[str]) -> str:
    """Up to :data:`MAX_NAMES` ids, escaped, and how many more."""
    shown = ", ".join(text(s) for s in students[:MAX_NAMES])
    return shown + (f" and {len(students) - MAX_NAMES} more" if len(students) > MAX_NAMES else "")


def percent(score: float | None, worth: float) -> float | None:
    """``score`` as a percentage of ``worth`` (None without a score)."""
    return None if score is None else (100 * score / worth if worth else 0.0)


def report_html(rows: list[StudentRow]) -> str:
    """The whole page."""
    curriculum = load_curriculum()
    graded = [row for row in rows if row.graded]
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    body = [f"<h1>Class report: {text(curriculum.title)}</h1>",
            f"<p>{len(rows)} submission(s): {len(graded)} graded, {len(rows) - len(graded)} not graded. "
            f"Written {now} by <code>attention-kit grade</code>; scores are final (manual points and late "
            "penalties applied).</p>"]
    body += ["<h2>Score distribution</h2>", '<div class="charts">']
    totals = [p for row in graded if (p := percent(row.score, row.max_score)) is not None]
    body.append(_figure(totals, "Course total"))
    exercise_names = [n for n in curriculum.names if any(n in row.maxima for row in rows)]
    for name in exercise_names:
        values = [p for row in graded if name in row.maxima
                  if (p := percent(row.exercises.get(name), row.maxima[name])) is not None]
        exercise = curriculum.exercise(name)
        body.append(_figure(values, f"{exercise.number}. {exercise.title}"))
    body.append("</div>")
    body += _misconception_section(rows) + _failed_tests_section(graded) + _term_section(rows)
    body += _not_graded_section(rows)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>Class report: {text(curriculum.title)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _figure(values: list[float], title: str) -> str:
    mean = f"mean {sum(values) / len(values):.1f}%" if values else "no graded score"
    return (f"<figure>{histogram_svg(values, title)}<figcaption>{text(title)}: {len(values)} student(s), "
            f"{mean}</figcaption></figure>")


def _misconception_section(rows: list[StudentRow]) -> list[str]:
    found = misconceptions(rows)
    lines = ["<h2>Misconceptions diagnosed</h2>"]
    if not found:
        return lines + ["<p>None: no failure matched a known mistake of the catalogue.</p>"]
    lines.append("<table><tr><th>Exercise</th><th>Misconception</th><th>Students</th><th>Who</th></tr>")
    lines += [f'<tr><td>{text(exercise)}</td><td>{text(description)}</td><td class="num">{len(students)}</td>'
              f'<td class="names">{names(students)}</td></tr>' for exercise, description, students in found]
    return [*lines, "</table>"]


def _failed_tests_section(graded: list[StudentRow]) -> list[str]:
    failed = Counter(test.shown_name for row in graded for test in row.tests
                     if not test.passed and test.graded and test.nodeid)
    lines = ["<h2>Most failed tests</h2>"]
    if not failed:
        return lines + ["<p>No test failed.</p>"]
    lines.append("<table><tr><th>Test</th><th>Students who failed it</th></tr>")
    lines += [f'<tr><td>{text(name)}</td><td class="num">{count} of {len(graded)}</td></tr>'
              for name, count in failed.most_common(TOP_TESTS)]
    return [*lines, "</table>"]


def _term_section(rows: list[StudentRow]) -> list[str]:
    late = [row for row in rows if row.late is not None and row.late.days_late]
    adjusted = [row for row in rows if row.adjustments]
    if not late and not adjusted:
        return []
    lines = ["<h2>Late submissions and manual points</h2>",
             "<table><tr><th>Student</th><th>Score from the tests</th><th>Manual points</th><th>Days late</th>"
             "<th>Final score</th></tr>"]
    for row in sorted({r.student: r for r in (*late, *adjusted)}.values(), key=lambda r: r.student):
        reasons = "; ".join(f"{scoring.number(a.points)}: {text(a.reason)}" for a in row.adjustments)
        days = row.late.days_late if row.late is not None else 0
        lines.append(f'<tr><td>{text(row.student)}</td><td class="num">{scoring.number(row.computed)}</td>'
                     f'<td>{reasons}</td><td class="num">{days}</td><td class="num">{scoring.number(row.score)}'
                     f"</td></tr>")
    return [*lines, "</table>"]


def _not_graded_section(rows: list[StudentRow]) -> list[str]:
    lines = ["<h2>Rows not graded, and rows with problems</h2>"]
    troubled = [row for row in rows if row.status != "ok"]
    if not troubled:
        return lines + ["<p>None: every submission was graded and had no problem.</p>"]
    lines.append("<table><tr><th>Student</th><th>Graded</th><th>Why</th></tr>")
    for row in sorted(troubled, key=lambda r: (r.graded, r.student)):
        mark = "yes" if row.graded else '<span class="warn">NOT GRADED</span>'
        lines.append(f"<tr><td>{text(row.student)}</td><td>{mark}</td><td>{text(row.status)}</td></tr>")
    return [*lines, "</table>"]
