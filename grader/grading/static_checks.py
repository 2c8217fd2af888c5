"""The static checks of a submission: what makes an exercise ungradable, found without running any code.

Run by: the batch's process (``grader.grading.submissions`` prepares each
entry with them) and the Gradescope runner. A module that is missing (or
misnamed: ``Softmax.py``), not text, not decodable as Python source or not
valid Python (``ast.parse`` only compiles, it never executes) makes its
exercise score 0 with a status that says why; the other exercises are graded
as usual.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import zipfile
from pathlib import Path

from grader.curriculum import load as load_curriculum
from grader.curriculum import misnamed
from grader.grading.links import refused
from grader.sandbox.cell_lines import place


def static_problems(folder: Path, details: dict[str, str] | None = None,
                    original: Path | None = None) -> dict[str, str]:
    """Exercise -> problem for modules that are missing, not text, or not valid Python.

    ``details``, if given, receives a longer explanation per exercise (the
    syntax error's message and the offending line) for the feedback.
    ``original``: the student's folder that ``folder`` copies, where a
    missing module's misnamed file (``Softmax.py``) is looked for.
    """
    problems: dict[str, str] = {}
    details = {} if details is None else details
    for exercise in load_curriculum().selection():  # a Part I course never asks for Part II modules
        path = folder / exercise.module_file
        if not path.is_file():
            other = misnamed(original or folder, exercise.module_file)
            problems[exercise.name] = f"missing module {exercise.name}" + (
                f" (found {other}: rename it to {exercise.module_file})" if other else "")
            continue
        data = path.read_bytes()
        if b"\x00" in data:
            problems[exercise.name] = f"{exercise.module_file} is not a text file"
            continue
        problem = decoding_problem(data)
        if problem:
            problems[exercise.name] = f"{exercise.module_file} {problem}"
            continue
        problem, detail = _parse_problem(exercise.module_file, data)
        if problem:
            problems[exercise.name] = problem
        if detail:
            details[exercise.name] = detail
    return problems


# What parsing found, per (file name, SHA-256 of its bytes): a class hands in many identical files (stubs left
# as they were, helpers shared), and parsing is most of preparing a submission.
_PARSED: dict[tuple[str, str], tuple[str, str]] = {}


def _parse_problem(name: str, data: bytes) -> tuple[str, str]:
    """Why ``data`` (the module ``name``) is not valid Python, and the longer explanation: ``("", "")`` if it is."""
    key = (name, hashlib.sha256(data).hexdigest())
    if key not in _PARSED:
        problem = detail = ""
        try:
            ast.parse(data, filename=name)  # bytes: Python's own rules for the encoding
        except SyntaxError as error:
            problem = f"syntax error in {place(None, error.lineno, name, data[:8192].decode(errors='replace'))}"
            shown = (error.text or "").rstrip()
            detail = f"{problem}: {error.msg}" + (f"\n    {shown}" if shown else "")
        except (ValueError, RecursionError, MemoryError) as error:
            problem = f"{name} cannot be parsed ({type(error).__name__})"
        if len(_PARSED) > 10_000:
            _PARSED.clear()
        _PARSED[key] = (problem, detail)
    return _PARSED[key]


def decoding_problem(data: bytes) -> str | None:
    """Why Python could not read ``data`` as source text, or None.

    The encoding follows Python's rules (PEP 263): a UTF-8 byte-order mark or a
    ``# -*- coding: latin-1 -*-`` line in the first two lines, else UTF-8. A
    file that does not decode is reported with the first line that fails.
    """
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if "invalid or missing encoding declaration" not in str(error):
            return f"has an unusable coding line ({error})"  # an unknown codec, or a BOM against the coding line
        encoding = "utf-8"  # the first lines are not UTF-8 and declare nothing else: find where it fails
    try:
        data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        name = "UTF-8" if encoding in ("utf-8", "utf-8-sig") else encoding
        hint = " (save it as UTF-8, or declare its encoding with a coding line)" if name == "UTF-8" else ""
        return f"is not {name}: line {line}{hint}"
    return None



ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".7z", ".rar")


def no_modules(unpacked: Path, names: list[str], entry: Path | None = None, looked_at: int = 2_000) -> str:
    """Why a submission has no modules to grade: what was looked for, any module found deeper, any archive inside.

    ``unpacked``: the submission as it came (a folder, an unpacked zip); ``names``: the modules' file names,
    looked for at its top and up to two folders down; ``entry``: the submission itself (a zip's archives inside it
    are not unpacked: its list of names is read). At most ``looked_at`` files are looked at, without following
    links.
    """
    wanted = {name.lower() for name in names}
    deeper, archives, seen = [], [], 0
    for folder, folders, files in os.walk(unpacked):  # (links to folders are not followed)
        folders.sort()
        seen += len(files)
        deeper += [(Path(folder) / name).relative_to(unpacked).as_posix() for name in sorted(files)
                   if name.lower() in wanted and not refused(Path(folder) / name)]  # a link: noted, not deeper
        archives += [(Path(folder) / name).relative_to(unpacked).as_posix() for name in sorted(files)
                     if name.lower().endswith(ARCHIVES)]
        if seen > looked_at or len(deeper) >= 3:
            break
    said = (f"no modules found (looked for {', '.join(names[:3])}, ... at the top of the submission or up to two "
            "folders down)")
    if deeper:
        return f"{said}; found deeper: {', '.join(deeper[:3])}: put the modules at most two folders down"
    if entry is not None and not archives and zipfile.is_zipfile(entry):
        with contextlib.suppress(OSError, zipfile.BadZipFile), zipfile.ZipFile(entry) as archive:
            archives = [name for name in archive.namelist()[:looked_at] if name.lower().endswith(ARCHIVES)]
    if archives:  # an archive inside the submission is never opened: one level of zip is the format
        return f"{said}; it holds an archive, which grading does not open: {', '.join(archives[:3])}: submit the " \
               "modules themselves (or one zip of them, not a zip of a zip)"
    return said
