"""Every line of the reference, and where a package or a release holds one (issue 32: no reference line ships).

A *reference line* is a stripped line of ``solutions/*.py`` of 25 characters or
more that the stubs (``exercises/*.py``) do not also hold: a line of what a
student must write, or of a helper the reference keeps to itself. Whatever a
student can install or clone (the kit's wheel and sdist, the student release
and its wheel) holds none, in any file: not as a line, not inside a longer line,
not inside a string (a ``replace =`` of the mistake catalogue, a constant of a
module), not inside a data file (the string arrays and JSON of an ``.npz``).

:func:`find_leaks` names each file and line; the install and release tests use it.
"""

from __future__ import annotations

import ast
import io
import json
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from grader.curriculum import ROOT

MIN_LENGTH = 25


def reference_lines(root: Path = ROOT) -> dict[str, str]:
    """Every reference line of ``root`` (a checkout), with where it is: ``{line: "solutions/x.py:12"}``."""
    stubs = "\n".join(path.read_text(encoding="utf-8") for path in sorted((root / "exercises").glob("*.py")))
    found: dict[str, str] = {}
    for path in sorted((root / "solutions").glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = line.strip()
            if len(text) >= MIN_LENGTH and text not in stubs:
                found.setdefault(text, f"solutions/{path.name}:{number}")
    return found


def _strings(value: object) -> Iterator[str]:
    """Every string of a parsed TOML or JSON document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _decoded(name: str, data: bytes) -> Iterator[tuple[str, str]]:
    """The texts of one file, each with where it is: the file's own lines, and the strings it encodes.

    The strings are those an escape could hide from a plain reading (``"x[\\"a\\"]"``, ``\\n`` in a JSON
    value, the UTF-32 of a numpy string array): a Python file's string constants, a TOML or JSON file's
    values, an ``.npz`` member's string arrays (and the JSON they hold). A zip inside (``.npz``, ``.zip``,
    ``.whl``) is read member by member.
    """
    if name.endswith((".npz", ".zip", ".whl")):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.namelist():
                yield from _decoded(f"{name}!{member}", archive.read(member))
        return
    if name.endswith(".npy"):
        try:
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as error:  # an object array: it could hold anything
            yield name, f"<unreadable without unpickling: {error}>"
            return
        if array.dtype.kind in "US":
            for item in array.ravel().tolist():
                text = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
                yield name, text
                try:
                    yield f"{name} (JSON)", "\n".join(_strings(json.loads(text)))
                except ValueError:
                    pass
        return
    text = data.decode("utf-8", errors="replace")
    yield name, text
    try:
        if name.endswith(".py"):
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value not in text:
                    yield f"{name}:{node.lineno} (a string)", node.value  # one written with escapes
        elif name.endswith(".toml"):
            yield f"{name} (TOML values)", "\n".join(_strings(tomllib.loads(text)))
        elif name.endswith((".json", ".ipynb")):
            yield f"{name} (JSON values)", "\n".join(_strings(json.loads(text)))
    except (SyntaxError, ValueError):
        pass  # not parseable: its plain text was read above


def archive_texts(path: Path) -> dict[str, bytes]:
    """Every member of a wheel/zip or an sdist (``.tar.gz``), by name."""
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as archive:
            return {member.name: archive.extractfile(member).read() for member in archive.getmembers()
                    if member.isfile()}
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}


def folder_texts(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` (a release), by its path inside, ``.git`` left out."""
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and ".git" not in path.relative_to(folder).parts}


def find_leaks(files: dict[str, bytes], lines: dict[str, str] | None = None) -> list[str]:
    """Every place in ``files`` that holds a reference line: ``"file:line: solutions/x.py:12 'the line'"``."""
    lines = reference_lines() if lines is None else lines
    leaks = []
    for name, data in sorted(files.items()):
        named: set[str] = set()  # lines already named in this file's own text: its strings need not repeat them
        for where, text in _decoded(name, data):
            found = [line for line in lines if line in text and line not in named]
            if where == name:
                named.update(found)
            if not found:
                continue
            plain = text.splitlines()
            for line in found:
                numbers = [str(n) for n, row in enumerate(plain, 1) if line in row]
                at = f"{where}:{','.join(numbers)}" if numbers and where == name else where
                leaks.append(f"{at}: holds {lines[line]} {line!r}")
    return leaks
