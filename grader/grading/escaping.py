r"""One escaping helper per output format, for every text a student or a course folder gives the grader.

A student id, a status naming an entry, a test's name, the course's title or
Canvas assignment: whatever the grader did not write itself reaches the
instructor's files only through these helpers.

- :func:`escape_text`: plain text (the terminal, ``unmatched.txt``):
  control, bidirectional, zero-width and unassigned characters escaped;
- :func:`csv_cell`: a CSV cell or header: escaped, and a text a spreadsheet
  would run as a formula prefixed with ``'`` (the OWASP rule);
- :func:`md_text`: Markdown (``feedback.md``, ``similarity.md``, notebook
  cells), inline: escaped, and every character that starts inline markup
  backslash-escaped (CommonMark allows it for any ASCII punctuation), so no
  link, image, emphasis, code span, table cell, HTML tag, entity or GFM
  autolink (``http:\\/\\/``, ``www\\.``, ``a\\@b``) starts in it;
- :func:`html_text`: HTML (reports): escaped, then ``&<>"'`` as entities.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Characters that start a formula in a spreadsheet (OWASP, CSV injection), with their full-width forms.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
# The characters that start inline markup (links, images, emphasis, code, HTML, entities, tables, math,
# strikethrough) or a GFM autolink ("http://", "a@b"): "www." is broken apart on its own.
_MARKDOWN = str.maketrans({ch: "\\" + ch for ch in "\\`*_{}[]()<>#|!~&$=^@/"})
_WWW = re.compile(r"(?i)\b(www)\.")


def escape_text(text: object, keep: str = "") -> str:
    r"""``text`` with control, format (bidi, zero-width), separator and unassigned characters escaped.

    Parameters
    ----------
    text : object
        What to show (``str()`` of it).
    keep : str, optional
        Characters to leave as they are (a newline for multi-line feedback).

    Returns
    -------
    str
        The text, with an undecodable byte of a file name (a lone surrogate) shown as ``\xNN``.
    """
    text = str(text)
    if text.isprintable() and not any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in text):
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in keep or unicodedata.category(ch) not in _UNSAFE_CATEGORIES:
            out.append(ch)
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def csv_cell(text: object) -> str:
    """A text cell (or header) of a CSV file: escaped, and prefixed with ``'`` if a spreadsheet would run it.

    Parameters
    ----------
    text : object
        The cell's text.

    Returns
    -------
    str
        The cell, never starting with one of :data:`FORMULA_STARTS`. A text that starts with ``'`` itself gets
        the prefix too, so two texts never share a cell (``=eve`` is ``'=eve``, ``'=eve`` is ``''=eve``).
    """
    value = escape_text(text)
    return "'" + value if value.startswith((*FORMULA_STARTS, "'")) else value


def md_text(text: object) -> str:
    r"""Text for Markdown, shown as it is written: nothing in it is markup (links, tables, HTML, emphasis).

    Parameters
    ----------
    text : object
        The text (one line: control characters, newlines among them, are escaped).

    Returns
    -------
    str
        The escaped text (``\&`` too: no entity is read either).
    """
    return _WWW.sub(r"\1\\.", escape_text(text).translate(_MARKDOWN))


def html_text(text: object) -> str:
    """Text for HTML: escaped (:func:`escape_text`), then every character HTML reads as markup as an entity.

    Parameters
    ----------
    text : object
        The text.

    Returns
    -------
    str
        The text, safe in an element or a quoted attribute.
    """
    return html.escape(escape_text(text), quote=True)
