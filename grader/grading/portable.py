"""Jobs and results as they cross between machines: paths named against the kit's and the course's roots.

Run by: the batch's process (``grader.grading.cluster``) and a Dask worker
(``grader.grading.cluster_worker``). A job names its test files by absolute
paths of the batch's machine; a worker's checkout (or course folder) may lie
elsewhere. :func:`portable` names them against the roots (``<kit>``,
``<course>``), :func:`localized` puts them under this machine's roots, and
:func:`convert_result` does the same for the test files a result's records
name. :func:`kit_fingerprint` is the fingerprint of the kit and course a
batch grades with, the same on every machine that holds them: the workers are
checked against it, and shards graded on different machines merge by it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

from grader.grading.records import Job, Result

KIT, COURSE = "<kit>", "<course>"  # the roots a portable path starts with


def roots() -> list[tuple[str, Path]]:
    """The roots of this machine that paths are made portable against, longest first (a course inside the kit)."""
    from grader import course
    from grader.curriculum import ROOT

    found = [(KIT, ROOT)]
    folder = course.active_folder()
    if folder is not None:
        found.append((COURSE, folder))
    return sorted(found, key=lambda pair: len(str(pair[1])), reverse=True)


def portable_text(text: str, here: list[tuple[str, Path]]) -> str:
    """``text`` with this machine's roots replaced by their names (``<kit>``, ``<course>``)."""
    for name, root in here:  # a whole path component only: the kit at /srv/kit leaves /srv/kit-hidden alone
        text = re.sub(re.escape(str(root)) + r"(?![\w.-])", name, text)
    return text


def local_text(text: str, here: list[tuple[str, Path]]) -> str:
    """``text`` with the roots' names replaced by this machine's roots."""
    for name, root in here:
        text = text.replace(name, str(root))
    return text


def _map_strings(record: Any, convert: Any) -> Any:
    """``record`` (a frozen dataclass) with every text field, and every text in a tuple field, converted."""
    changes = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if isinstance(value, str):
            changes[field.name] = convert(value)
        elif isinstance(value, tuple) and all(isinstance(item, str) for item in value):
            changes[field.name] = tuple(convert(item) for item in value)
    return dataclasses.replace(record, **changes)


def portable(job: Job, here: list[tuple[str, Path]] | None = None) -> Job:
    """``job`` as it crosses to another machine: its test files named against the kit's and the course's roots."""
    here = roots() if here is None else here

    def convert(text: str) -> str:
        return portable_text(text, here)

    # The check's answers file is a path of this machine's cache: a worker names its own (cluster_worker).
    return dataclasses.replace(job, files=tuple(convert(f) for f in job.files),
                               suite=tuple(_map_strings(f, convert) for f in job.suite), answers="")


def localized(job: Job, here: list[tuple[str, Path]] | None = None, **changes: Any) -> Job:
    """A portable ``job`` on this machine: its test files under this machine's roots (``changes`` applied)."""
    here = roots() if here is None else here

    def convert(text: str) -> str:
        return local_text(text, here)

    return dataclasses.replace(job, files=tuple(convert(f) for f in job.files),
                               suite=tuple(_map_strings(f, convert) for f in job.suite), **changes)


def convert_result(result: Result, convert: Any) -> Result:
    """``result`` with ``convert`` applied to each record's test file and id (which test, so which points).

    Messages are left as they are: the recorder already took the grader's paths out of them, and a student's
    output that happens to hold a root's name must not be turned into a path of the batch's machine.
    """
    return dataclasses.replace(result, records=tuple(
        dataclasses.replace(record, file=convert(record.file), nodeid=convert(record.nodeid))
        for record in result.records))


def submission_files(folder: str) -> tuple[tuple[str, bytes], ...]:
    """The prepared submission's regular files, ``(relative path, content)``: what a worker grades."""
    base = Path(folder)
    files = []
    for path in sorted(base.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            files.append((path.relative_to(base).as_posix(), path.read_bytes()))
    return tuple(files)


def kit_fingerprint(template: Job) -> str:
    """The fingerprint of the kit and course a batch grades with, the same on every machine that holds them.

    ``grader.grading.fingerprint.suite_fingerprint`` hashes the same things (the grade-deciding options, the
    content of the tests, the reference, the sandbox, the grading modules), but names files as this machine's
    paths; here they are named against the kit's and the course's roots, so that workers whose checkout lies
    elsewhere still compare equal, and shards graded on different machines merge.
    """
    from grader.grading.fingerprint import fingerprinted_files, grade_deciding, kit_version
    from grader.grading.report import RESULTS_FORMAT

    here = roots()
    digest = hashlib.sha256(f"{kit_version()}|{RESULTS_FORMAT}".encode())
    digest.update(repr(sorted(grade_deciding(portable(template, here)).items())).encode())
    for path in fingerprinted_files(template):
        digest.update(portable_text(str(path), here).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
