"""``OUT/<student>/feedback.html``: each student's feedback as a page, beside feedback.md (the same text).

Made from feedback.md's own text (:func:`grader.grading.formats.feedback_md.feedback_markdown`), which the
kit writes in a small subset of Markdown (headings, paragraphs, list items, fenced text blocks): every line is
escaped for HTML, so nothing a student's code printed or named becomes markup, and the page's Content Security Policy
allows no script and nothing from elsewhere. For an LMS that shows HTML, or a student without a Markdown viewer.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from grader.grading.formats import Context, write_changed
from grader.grading.formats.feedback_md import feedback_markdown
from grader.grading.rows import StudentRow

NAME = "feedback.html"
ORDER = 5
PER_STUDENT = True  # each student's own file, from that student's row alone
CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
         "pre{background:#f6f6f6;padding:0.8em;overflow-x:auto;white-space:pre-wrap}")
_MARKDOWN_ESCAPE = re.compile(r"\\(.)")  # feedback.md's escaped characters (md_text), shown as themselves


def _inline(line: str) -> str:
    """One line of feedback.md's prose as HTML: its escapes undone, then escaped for HTML, bold kept."""
    text = html.escape(_MARKDOWN_ESCAPE.sub(r"\1", line), quote=True)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)


def markdown_to_html(markdown: str) -> str:
    """feedback.md's subset of Markdown as the body of a page."""
    body: list[str] = []
    in_code = in_list = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            body.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
            continue
        if in_code:
            body.append(html.escape(line, quote=True))
            continue
        if in_list and not line.startswith("- "):
            body.append("</ul>")
            in_list = False
        if (heading := re.match(r"^(#{1,3}) (.*)$", line)) is not None:
            level = len(heading[1])
            body.append(f"<h{level}>{_inline(heading[2])}</h{level}>")
        elif line.startswith("- "):
            if not in_list:
                body.append("<ul>")
                in_list = True
            body.append(f"<li>{_inline(line[2:])}</li>")
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
    body += ["</pre>"] if in_code else []
    body += ["</ul>"] if in_list else []
    return "\n".join(body)


def page(row: StudentRow) -> str:
    """The whole page of ``row``'s feedback."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>Feedback</title>'
            f"<style>{STYLE}</style></head>\n<body>\n{markdown_to_html(feedback_markdown(row))}\n</body></html>\n")


def write(out: Path, rows: list[StudentRow], context: Context) -> list[Path]:
    """Write each student's feedback.html (beside their feedback.md), when its text changed."""
    written = []
    for row in rows:
        if not row.stored:
            continue  # a row the grader could not write: no folder of its own to write into
        path = out / row.student / "feedback.html"
        if write_changed(path, page(row)):
            written.append(path)
    return written
