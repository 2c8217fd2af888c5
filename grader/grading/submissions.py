"""Find the submissions in a folder and check them without running any code.

A submission is one entry of the SUBMISSIONS folder:

- a folder holding the seven modules (``alice/softmax.py`` ...), or holding
  them one level down (``alice/exercises/softmax.py``, ``alice/hw1/...``);
- a ``.zip`` of such a folder, extracted safely into a private temp folder;
- a ``.ipynb`` notebook, or a folder of notebooks (the nbgrader courses of
  ``attention-kit notebooks``): the code of their solution cells becomes the
  modules (``grader.student.notebook.extract_modules``);
- any other format registered in ``LOADERS``.

Every entry of SUBMISSIONS is one row of the gradebook, whatever it is: an
entry that cannot be read (a symbolic or hard link, which is never followed nor
read; a FIFO or a device; an unknown format; a broken zip or notebook) gets a
row whose status says why, and any exception while reading one entry costs
that entry only. Links inside an entry (a folder, a module, a zip member) are
refused by the same rule (:func:`refusal`) and listed in the status
(``refused: exercises is a symbolic link (not followed)``); so are they in a
Gradescope upload, copied by :func:`copy_upload` with its links as links.

The student id is the entry's name without its extension; an id that would
collide with the grader's own output files (``grades.csv``) is replaced by a
safe one (:func:`safe_student_id`), and the grader reports the mapping. Entries
that share an id (``alice/`` beside ``alice.zip``) are all refused, each in its
own row (:func:`duplicates`): the grader never chooses one. Every submission
is copied (only its top-level ``.py`` files) into a fresh folder of the
grader's own, so grading never writes into a student's folder and the
content hash describes exactly what was graded.

The static checks (``grader.grading.static_checks``) find what would make an
exercise ungradable before any student code runs: a missing module, a syntax
error and a file that is not UTF-8 text. Such an exercise scores 0; the other
exercises are graded as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.curriculum import load as load_curriculum
from grader.grading.entry_kinds import JUNK, is_submission  # noqa: F401 (grade and similarity use them from here)
from grader.grading.escaping import escape_text
from grader.grading.links import (
    collect_refusals,
    in_kit_reference,
    note,
    one_line,
    refusal,
    refused,
    refused_line,
    skipped_link,
    stop_collecting,
)
from grader.grading.static_checks import no_modules, static_problems

# Limits for one submission: far above any honest solution, far below a zip bomb.
MAX_FILE_BYTES = 1_000_000
MAX_TOTAL_BYTES = 20_000_000
MAX_FILES = 2_000
MAX_ARCHIVE_BYTES = 200_000_000
# Folders that archivers and editors add and that never hold a submission.
# The files the grader itself writes at the top of its output folder: no student id may take these names, nor
# end like one of them (grades.csv, grades-long.csv, canvas.csv, report.html, grading.log, unmatched.txt, ...): a
# folder called report.html had made the exports fail for the whole class.
OUTPUT_FILES = ("grades.csv", "report.html", "grading.log", "unmatched.txt")
RESERVED_SUFFIXES = (".csv", ".tmp", ".json", ".md", ".html", ".htm", ".log", ".txt")


class SubmissionError(Exception):
    """A submission that cannot be read at all (bad zip, too big, unsafe paths)."""

    kind = "submission"


class RefusedEntry(SubmissionError):
    """An entry the grader will not choose for its student (another entry has the same id): never read."""


class NotebookError(SubmissionError):
    """A notebook submission that cannot be read (not JSON, cells that are not as nbformat says, ...)."""

    kind = "notebook"


@dataclass
class Submission:
    """One student's submission, prepared for grading.

    Attributes
    ----------
    student : str
        The student id (the entry's name without extension).
    source : Path
        The entry in SUBMISSIONS (folder, zip, ...).
    folder : Path or None
        The grader's private copy holding the modules (None if unreadable).
    problems : dict
        Exercise name -> why that exercise cannot be graded (static checks).
    details : dict
        Exercise name -> a longer explanation for the feedback, where there is one.
    error : str or None
        Why the whole submission could not be read, if it could not.
    digest : str
        sha256 of the graded files' names and contents.
    """

    student: str
    source: Path
    folder: Path | None = None
    problems: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    digest: str = ""
    refused: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``"ok"`` or the static problems, e.g. ``"missing module positional"``; then the links refused."""
        return self.status_of(None)

    def status_of(self, graded: set[str] | None) -> str:
        """:attr:`status` told of the exercises in ``graded`` only (None: all); ``grade --exercise`` grades some."""
        if self.error:
            parts = [self.error]
        else:
            parts = [self.problems[name] for name in load_curriculum().names
                     if name in self.problems and (graded is None or name in graded)]
        if self.refused:
            parts.append(refused_line(self.refused))
        return "; ".join(parts) or "ok"


# What of an upload is copied at most: deeper than any folder grading looks into, more than any submission; and
# how many entries are looked at in all (a folder of millions of files is listed no further).
UPLOAD_DEPTH = 8
UPLOAD_ENTRIES = 5 * MAX_FILES
UPLOAD_LOOKED = 50 * UPLOAD_ENTRIES
# What grading reads of an upload, copied before anything else: the modules, then other sources, notebooks, zips.
GRADED_SUFFIXES = (".py", ".ipynb", ".zip")


def copy_upload(source: Path, target: Path, skipped: tuple[str, ...] = ()) -> int:
    """Copy the folder ``source`` to ``target`` without following or reading any link (the Gradescope upload).

    Symbolic links are copied as links (never their targets), so that reading the copy refuses them with the
    status it gives any link; a hard-linked file is linked again (the copy refuses it too), or left out where
    it cannot be. FIFOs, devices and sockets are left out; so are the folders named in ``skipped``, what lies
    deeper than ``UPLOAD_DEPTH`` and files above ``MAX_ARCHIVE_BYTES``.

    At most ``UPLOAD_ENTRIES`` entries are copied, what grading reads first: the files named like the
    exercises' modules, wherever they lie, then other ``.py``, notebooks and zips, then the rest (so an upload
    of the modules beside 60,000 stray files is graded as the modules alone). Returns the number copied.
    """
    modules = {exercise.module_file for exercise in load_curriculum().exercises}
    found: list[tuple[int, int, str, Path, Path, os.stat_result]] = []
    pending, looked = [(Path(source), Path(target), 0)], 0
    while pending and looked < UPLOAD_LOOKED:
        here, there, depth = pending.pop(0)
        with os.scandir(here) as entries:
            for entry in entries:
                looked += 1
                if looked > UPLOAD_LOOKED:
                    break
                if entry.name in skipped:
                    continue
                status = entry.stat(follow_symlinks=False)
                origin, copy = Path(entry.path), there / entry.name
                if stat.S_ISDIR(status.st_mode):
                    if depth < UPLOAD_DEPTH:
                        pending.append((origin, copy, depth + 1))
                    continue
                rank = 0 if entry.name in modules else 1 if entry.name.endswith(GRADED_SUFFIXES) else 2
                found.append((rank, depth, str(copy), origin, copy, status))
    found.sort(key=lambda item: item[:3])
    for _, _, _, origin, copy, status in found[:UPLOAD_ENTRIES]:
        copy.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISLNK(status.st_mode):
            os.symlink(os.readlink(origin), copy)
        elif stat.S_ISREG(status.st_mode) and status.st_size <= MAX_ARCHIVE_BYTES:
            if status.st_nlink > 1:
                with contextlib.suppress(OSError):  # across file systems: left out, never read
                    os.link(origin, copy, follow_symlinks=False)
            else:
                _copy_file(origin, copy)
    Path(target).mkdir(parents=True, exist_ok=True)
    return min(len(found), UPLOAD_ENTRIES)


def _copy_file(source: Path, target: Path, limit: int | None = None) -> None:
    """Copy the regular file ``source`` (opened without following a link) to ``target``; at most ``limit`` bytes."""
    descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with open(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or (status.st_nlink > 1 and not in_kit_reference(source)):
            raise SubmissionError(f"{source.name} changed while it was read")  # (the reference may be hard-linked)
        if limit is not None and status.st_size > limit:
            raise SubmissionError(f"{source.name} is too large ({status.st_size} bytes)")
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise SubmissionError(f"{source.name} is too large (more than {limit} bytes)")
    target.write_bytes(data)


# A loader turns one SUBMISSIONS entry into a folder of .py files inside `workdir`.
# Extension point: LOADERS (below) maps a file suffix to its loader (.zip, .ipynb, ...).
Loader = Callable[[Path, Path], Path]


def _load_folder(entry: Path, workdir: Path) -> Path:
    from grader.grading.notebook_reader import course_notebooks, find_notebooks

    notebooks = find_notebooks(entry)
    # A submission of the kit's nbgrader course (``submitted/<student>/``): its assignments' notebooks, as
    # nbgrader's autograde grades them; a module or another notebook beside them is not graded there either.
    if course_notebooks(notebooks):
        return _notebooks_folder(entry, course_notebooks(notebooks), workdir)
    if find_module_folder(entry) is None:
        if notebooks:  # a folder of notebooks of the student's own
            return _notebooks_folder(entry, notebooks, workdir)
        # A folder holding a zip of the modules (what Gradescope keeps of an upload, or a student's folder):
        # open it with the same rules as a zip entry. The zip with the most modules wins; then its name.
        best: tuple[int, str] | None = None
        for index, archive in enumerate(_zips_in(entry)):
            unpacked = _load_zip(archive, workdir / f"zip-{index}")
            found = find_module_folder(unpacked)
            count = _count_modules(found) if found is not None else 0
            if count and (best is None or count > best[0]):
                best = (count, str(unpacked))
        if best is not None:
            return Path(best[1])
    return entry


def _zips_in(folder: Path, depth: int = 2) -> list[Path]:
    """The ``.zip`` files in ``folder`` and up to ``depth`` levels below it (no symlinks, no junk folders)."""
    found, pending = [], [(folder, 0)]
    while pending:
        current, level = pending.pop(0)
        try:
            children = sorted(current.iterdir())
        except OSError:
            continue
        for child in children:
            if child.name in JUNK or skipped_link(child):
                continue
            if child.is_file() and child.suffix.lower() == ".zip" and not refused(child):
                found.append(child)
            elif child.is_dir() and level < depth:
                pending.append((child, level + 1))
    return found[:10]  # a submission with more zips than this is not a submission of modules


def _notebooks_folder(entry: Path, notebooks: list[Path], workdir: Path) -> Path:
    """The modules of ``notebooks`` (the first defining an exercise wins), written into a folder of ``workdir``."""
    from grader.grading.notebook_reader import MAX_NOTEBOOKS_BYTES, notebooks_to_folder

    if sum(path.lstat().st_size for path in notebooks) > MAX_NOTEBOOKS_BYTES:
        raise SubmissionError(f"{entry.name}: its notebooks hold more than {MAX_NOTEBOOKS_BYTES} bytes")
    problems: list[str] = []
    folder = notebooks_to_folder(notebooks, workdir / "notebooks", problems)
    if problems and not any(folder.glob("*.py")):
        raise NotebookError(problems[0])
    return folder


def _load_notebook(entry: Path, workdir: Path) -> Path:
    """The modules defined in a notebook's solution cells (``grader.student.notebook.extract_modules``)."""
    from grader.grading.notebook_reader import MAX_NOTEBOOK_BYTES, extract_modules

    if entry.lstat().st_size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{entry.name} is too large ({entry.lstat().st_size} bytes)")
    try:
        modules = extract_modules(entry)
    except (ValueError, RecursionError, MemoryError) as error:
        raise NotebookError(str(error) or type(error).__name__) from None
    target = workdir / "notebook"
    target.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (target / f"{name}.py").write_text(source, encoding="utf-8")
    return target


def _safe_member(name: str) -> PurePosixPath | None:
    """The member's relative path, or None if it would escape the target folder."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        return None
    return path


def _load_zip(entry: Path, workdir: Path) -> Path:
    """Extract only the ``.py`` files of a zip, refusing unsafe or oversized archives."""
    target = workdir / "unzipped"
    target.mkdir(parents=True, exist_ok=True)
    if entry.lstat().st_size > MAX_ARCHIVE_BYTES:
        raise SubmissionError(f"{entry.name} is too large ({entry.lstat().st_size} bytes)")
    try:
        with zipfile.ZipFile(entry) as archive:
            members = archive.infolist()
            if len(members) > MAX_FILES:
                raise SubmissionError(f"{entry.name} holds {len(members)} files (limit {MAX_FILES})")
            total, seen = 0, set()
            for member in members:
                if member.is_dir() or not member.filename.endswith(".py"):
                    continue  # only modules are graded; skip data, notebooks, caches
                relative = _safe_member(member.filename)
                if relative is None:
                    raise SubmissionError(f"{entry.name} has an unsafe path: {member.filename}")
                if relative in seen or seen.add(relative):  # (no zip tool writes that: the last copy won, unsaid)
                    raise SubmissionError(f"{entry.name} holds {relative.as_posix()} twice: make the archive again")
                if any(part in JUNK for part in relative.parts):
                    continue
                if stat.S_ISLNK(member.external_attr >> 16):
                    note(f"{entry.name}:{relative.as_posix()}", "a symbolic link (not followed)")
                    continue  # a symlink could point anywhere on the grading machine
                if member.file_size > MAX_FILE_BYTES:
                    raise SubmissionError(f"{entry.name}: {member.filename} is too large ({member.file_size} bytes)")
                total += member.file_size
                if total > MAX_TOTAL_BYTES:
                    raise SubmissionError(f"{entry.name} unpacks to more than {MAX_TOTAL_BYTES} bytes")
                destination = target.joinpath(*relative.parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source:  # at most the declared size + 1 byte: a header cannot lie
                    data = source.read(member.file_size + 1)
                if len(data) > member.file_size:
                    raise SubmissionError(f"{entry.name}: {member.filename} is larger than its header says")
                destination.write_bytes(data)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, RuntimeError,
            ValueError) as error:  # RuntimeError: an encrypted member; ValueError: a name the disk cannot hold
        raise SubmissionError(f"{entry.name} is not a readable zip file ({error})") from None
    return target


LOADERS: dict[str, Loader] = {".zip": _load_zip, ".ipynb": _load_notebook}


def student_id(entry: Path) -> str:
    """The student id of a SUBMISSIONS entry: its name without extension (a link's own name, never its target's)."""
    try:
        is_folder = stat.S_ISDIR(entry.lstat().st_mode)
    except OSError:
        is_folder = False
    return entry.name if is_folder else (entry.stem or entry.name)


def reserved(student: str) -> bool:
    """Whether ``student`` cannot be used as it is: a name the grader writes, or one it would confuse."""
    lowered = student.lower()
    return (student in ("", ".", "..") or student.startswith(".") or lowered in OUTPUT_FILES
            or lowered.endswith(RESERVED_SUFFIXES) or len(os.fsencode(student)) > 200)


def safe_student_id(student: str, taken: set[str]) -> str:
    """A usable id for ``student`` that is in ``taken`` or ``reserved``: the name with a suffix (shortened if long)."""
    shown = escape_text(student)  # an id shown escaped must not show as another's (a newline, a literal "\x0a")
    if not reserved(student) and student not in taken and (shown == student or shown not in {
            escape_text(other) for other in taken}):
        return student
    stem = shown.lstrip(".")
    if len(os.fsencode(stem)) > 150:
        stem = os.fsdecode(os.fsencode(stem)[:150]).rstrip("\udcff") + "-" + hashlib.sha256(
            os.fsencode(student)).hexdigest()[:8]
    for number in range(1, 100_000):
        candidate = f"{stem or 'student'}-renamed{'' if number == 1 else number}"
        if candidate not in taken and not reserved(candidate):
            return candidate
    raise ValueError("no free student id")  # unreachable: 100 000 entries with the same name


def _module_names() -> list[str]:
    return [exercise.module_file for exercise in load_curriculum().selection()]


def _count_modules(folder: Path) -> int:
    """How many of the modules ``folder`` holds, counting names that differ only in case (reported later).

    Only files that would be graded count: a symbolic or hard link (:func:`refusal`) is never read, so a folder
    of links (a cloned repository keeps its symbolic links) never outvotes the student's own modules.
    """
    wanted = {name.lower() for name in _module_names()}
    try:
        with os.scandir(folder) as entries:  # only a module's name is looked at closer (lstat): a folder may be huge
            present = {entry.name.lower() for entry in entries if entry.name.lower() in wanted
                       and entry.is_file(follow_symlinks=False) and refusal(Path(entry.path)) is None}
    except OSError:
        return 0
    return len(present)


MAX_FOLDERS = 2_000


def find_module_folder(root: Path, depth: int = 2) -> Path | None:
    """The folder under ``root`` (itself or up to ``depth`` levels down) holding the most modules.

    At most ``MAX_FOLDERS`` folders are looked at (breadth first, so the shallow ones always are). SubmissionError
    if ``root`` holds none itself and several side by side: several submissions in one entry (a whole Classroom
    assignment's clones were graded as the one with the most modules, silently), never one chosen.
    """
    holding: list[tuple[tuple[int, int, str], Path]] = []  # most modules, then the shallowest, then the name
    pending = [(root, 0)]
    for _ in range(MAX_FOLDERS):
        if not pending:
            break
        folder, level = pending.pop(0)
        if count := _count_modules(folder):
            holding.append(((-count, level, str(folder)), folder))  # (the choice never depends on the disk)
        with contextlib.suppress(OSError):
            pending.extend((child, level + 1) for child in (sorted(folder.iterdir()) if level < depth else ())
                           if child.name not in JUNK and not skipped_link(child) and child.is_dir())
    folders = [folder for _, folder in holding]
    apart = [folder for folder in folders if not any(other in folder.parents for other in folders)]
    if root not in folders and len(apart) > 1:
        named = ", ".join(str(folder.relative_to(root)) for folder in apart[:3]) + (", ..." if len(apart) > 3 else "")
        raise SubmissionError(f"{root.name} holds {len(apart)} folders of modules side by side ({named}): one "
                              "submission per entry; grade the folder that holds one folder per student")
    return min(holding)[1] if holding else None


def _copy_modules(folder: Path, target: Path) -> None:
    """Copy every exercise's module and the private helpers (``_name.py``) of ``folder`` into ``target``.

    Not only the selection's: a graded module may import another of the student's, as its own run does.
    """
    target.mkdir(parents=True, exist_ok=True)
    total = 0
    wanted = {exercise.module_file for exercise in load_curriculum().exercises}
    names = [entry.name for entry in os.scandir(folder)
             if entry.name in wanted or (entry.name.startswith("_") and entry.name.endswith(".py")
                                         and entry.name != "__init__.py" and entry.name.isascii())]
    if len(names) > 100:
        raise SubmissionError(f"{folder.name} holds {len(names)} helper modules (limit 100)")
    for path in sorted(folder / name for name in names):
        if refused(path) or not stat.S_ISREG(path.lstat().st_mode):
            continue
        size = path.lstat().st_size
        total += size
        if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
            raise SubmissionError(f"{path.name} is too large ({size} bytes)")
        _copy_file(path, target / path.name, MAX_FILE_BYTES)


def folder_digest(folder: Path) -> str:
    """sha256 over the names and contents of the ``.py`` files in ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link (not followed)"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "neither a folder nor a file"


def prepare(entry: Path, workdir: Path, student: str | None = None, refused_as: str | None = None) -> Submission:
    """Read one entry into a private folder under ``workdir`` and check it statically.

    Never raises for what the entry holds: whatever goes wrong becomes the
    submission's ``error`` (its status), one line that names the problem.
    An entry refused by the caller (``refused_as``: why, e.g. from
    :func:`duplicates`) is not read at all and has that line as its error.
    """
    submission = Submission(student=student or student_id(entry), source=entry)
    token = collect_refusals(entry, submission.refused)
    try:
        if refused_as:
            raise RefusedEntry(refused_as)
        return _prepare(entry, workdir, submission)
    except RefusedEntry as error:
        submission.error = one_line(str(error))
    except SubmissionError as error:
        submission.error = f"unreadable {error.kind}: {one_line(str(error))}"
    except Exception as error:  # noqa: BLE001 - one entry, however broken, costs its own row only
        submission.error = f"unreadable submission: {type(error).__name__}: {one_line(str(error))}"
    finally:
        stop_collecting(token)
    submission.folder = None
    submission.problems = {name: submission.error for name in load_curriculum().selected_names()}
    submission.digest = hashlib.sha256(submission.error.encode("utf-8", "backslashreplace")).hexdigest()
    return submission


def _prepare(entry: Path, workdir: Path, submission: Submission) -> Submission:
    private = workdir / hashlib.sha256(os.fsencode(submission.student)).hexdigest()[:16]
    if private.exists():
        shutil.rmtree(private)
    mode = entry.lstat().st_mode
    why = refusal(entry)
    if why is not None:
        raise SubmissionError(f"{entry.name} is {why}")
    if stat.S_ISDIR(mode):
        loader: Loader | None = _load_folder
    elif stat.S_ISREG(mode):
        loader = LOADERS.get(entry.suffix.lower())
        if loader is None:
            known = ", ".join(sorted(LOADERS))
            raise SubmissionError(f"{entry.name}: unsupported format (expected a folder, or one of {known})")
    else:
        raise SubmissionError(f"{entry.name} is {_kind(mode)}")
    unpacked = loader(entry, private / "raw")
    modules = find_module_folder(unpacked)
    folder = private / "modules"
    if modules is not None:
        _copy_modules(modules, folder)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        submission.error = no_modules(unpacked, _module_names(), entry)  # (said before raw/ goes: where they were)
    submission.folder = folder
    submission.problems = static_problems(folder, submission.details, modules)  # before raw/ goes: Softmax.py
    if not stat.S_ISDIR(mode) and (private / "raw").exists():
        shutil.rmtree(private / "raw", ignore_errors=True)  # keep only what is graded
    submission.digest = folder_digest(folder)
    return submission


def argument_problem(submissions: Path) -> str | None:
    """Why ``submissions`` (the SUBMISSIONS argument) cannot be graded at all, or None.

    It must exist and be a folder (of submissions, or one submission's), or one submission in a format of
    ``LOADERS`` (``.zip``, ``.ipynb``): a stray file is never graded as a student at 0.
    """
    submissions = Path(submissions)
    if not submissions.exists():
        return f"{submissions}: no such file or folder"
    if submissions.is_dir():
        return None
    if submissions.is_file() and submissions.suffix.lower() in LOADERS:
        return None
    known = ", ".join(sorted(LOADERS))
    return (f"{submissions}: not a folder and not a submission file ({known}): give the folder of submissions, "
            "one student's folder, or one .zip or notebook")


def discover(submissions: Path, exclude: tuple[Path, ...] = ()) -> list[tuple[str, Path]]:
    """The (student id, entry) pairs in SUBMISSIONS, sorted by student id.

    If ``submissions`` itself holds modules, it is one submission. Entries
    in ``exclude`` (e.g. the output folder) are skipped. When entries share
    an id (``alice/`` and ``alice.zip``), none gets it: each is listed under
    its own name (``alice.zip``, a folder as ``alice-folder``) and
    :func:`duplicates` says why all of them are refused. No result
    overwrites another, and none takes the id's roster row.
    """
    submissions = Path(submissions)
    if not submissions.exists():
        raise FileNotFoundError(f"{submissions}: no such file or folder")
    problem = argument_problem(submissions)
    if problem is not None:
        raise ValueError(problem)
    if not submissions.is_dir() or _count_modules(submissions):
        return [(safe_student_id(student_id(submissions), set()), submissions)]
    excluded = {os.path.realpath(path) for path in exclude}
    kept = [entry for entry in sorted(submissions.iterdir(), key=lambda p: (student_id(p), p.name))
            if is_submission(entry) and (entry.is_symlink() or os.path.realpath(entry) not in excluded)]
    shared = _shared_ids(kept)
    found: list[tuple[str, Path]] = []
    taken = {student_id(entry) for entry in kept if student_id(entry) not in shared}
    for entry in kept:
        student = student_id(entry)
        if student in shared:  # a name of its own, never the id they all want
            student = entry.name if entry.name != student else f"{student}-{'folder' if entry.is_dir() else 'file'}"
        else:
            taken.discard(student)  # its own reservation
        student = safe_student_id(student, taken)
        taken.add(student)
        found.append((student, entry))
    return found


def _shared_ids(entries: list[Path]) -> dict[str, list[Path]]:
    """The ids that more than one of ``entries`` maps to, with those entries."""
    by_id: dict[str, list[Path]] = {}
    for entry in entries:
        by_id.setdefault(student_id(entry), []).append(entry)
    return {student: group for student, group in by_id.items() if len(group) > 1}


def _shown_entry(entry: Path) -> str:
    try:
        folder = stat.S_ISDIR(entry.lstat().st_mode)
    except OSError:
        folder = False
    return escape_text(entry.name) + ("/" if folder else "")


def duplicates(listed: list[tuple[str, Path]]) -> dict[str, str]:
    """The students of :func:`discover`'s list that are refused: another entry maps to the same id.

    Returns
    -------
    dict
        Student (as listed) -> the line of their row, e.g. ``two submissions for alice: alice/ and alice.zip;
        keep one``. Every entry of a shared id is refused: the grader never chooses one.
    """
    shared = _shared_ids([entry for _, entry in listed])
    lines = {}
    for student, entry in listed:
        group = shared.get(student_id(entry))
        if group and len(listed) > 1:
            names = [_shown_entry(other) for other in group]
            count = {2: "two", 3: "three"}.get(len(names), str(len(names)))
            listing = " and ".join(names) if len(names) == 2 else ", ".join(names[:-1]) + " and " + names[-1]
            lines[student] = f"{count} submissions for {escape_text(student_id(entry))}: {listing}; keep one"
    return lines
