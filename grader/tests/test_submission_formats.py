"""Submissions as students really hand them in: other encodings, names in the wrong case, zips in folders."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load
from grader.grading import static_checks, submissions


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def test_a_coding_line_is_honoured_as_python_honours_it(reference: Path) -> None:
    layer = reference / "layer.py"
    layer.write_bytes(b"# -*- coding: latin-1 -*-\n" + layer.read_bytes() + "# café\n".encode("latin-1"))
    assert static_checks.static_problems(reference) == {}
    compile(layer.read_bytes(), "layer.py", "exec")  # Python agrees


def test_latin1_without_a_coding_line_names_the_line(reference: Path) -> None:
    masks = reference / "masks.py"
    lines = masks.read_bytes().split(b"\n")
    lines[5] += " # é".encode("latin-1")
    masks.write_bytes(b"\n".join(lines))
    problems = static_checks.static_problems(reference)
    assert problems["masks"].startswith("masks.py is not UTF-8: line 6"), problems
    assert set(problems) == {"masks"}


def test_an_unknown_coding_is_reported(reference: Path) -> None:
    (reference / "softmax.py").write_bytes(b"# coding: no-such-codec\nx = 1\n")
    assert "unusable coding line" in static_checks.static_problems(reference)["softmax"]


def test_a_module_named_in_the_wrong_case_says_how_to_rename_it(reference: Path) -> None:
    (reference / "softmax.py").rename(reference / "Softmax.py")
    problems = static_checks.static_problems(reference)
    assert problems["softmax"] == "missing module softmax (found Softmax.py: rename it to softmax.py)"
    # Every module capitalised: the folder is still found, and each one is named.
    for exercise in load().exercises[1:]:
        (reference / exercise.module_file).rename(reference / exercise.module_file.capitalize())
    assert submissions.find_module_folder(reference.parent) == reference
    assert all("rename it to" in problem for problem in static_checks.static_problems(reference).values())


def test_the_local_implementation_names_the_rename_too(reference: Path) -> None:
    from tests.kit import ImplementationError, LocalImplementation

    (reference / "masks.py").rename(reference / "MASKS.py")
    with pytest.raises(ImplementationError, match=r"found MASKS\.py: rename it to masks\.py"):
        LocalImplementation(reference).module("masks")


def test_a_zip_inside_a_folder_is_opened(reference: Path, tmp_path: Path) -> None:
    upload = tmp_path / "upload"
    (upload / "notes").mkdir(parents=True)
    (upload / "notes" / "readme.txt").write_text("my work")
    with zipfile.ZipFile(upload / "exercises.zip", "w") as archive:
        for path in sorted(reference.glob("*.py")):
            archive.write(path, f"exercises/{path.name}")
    prepared = submissions.prepare(upload, tmp_path / "work", "alice")
    assert prepared.error is None and prepared.problems == {}
    assert {e.module_file for e in load().exercises} <= {p.name for p in prepared.folder.glob("*.py")}


def test_an_entry_holding_several_submissions_is_refused_and_none_chosen(reference: Path, tmp_path: Path) -> None:
    # A hostile round: a whole Classroom assignment's clones given as one entry (gh classroom clone's layout) was
    # graded as whichever clone held the most modules, silently, with no row for the others.
    entry = tmp_path / "hw1-submissions"
    shutil.copytree(reference, entry / "c_ok")
    shutil.copytree(reference, entry / "c_other")
    prepared = submissions.prepare(entry, tmp_path / "work", "hw1-submissions")
    assert prepared.error is not None and "2 folders of modules side by side (c_ok, c_other)" in prepared.error
    # A student's own folder with a copy inside it (modules at its top): graded, as before.
    shutil.copytree(reference, reference / "backup")
    kept = submissions.prepare(reference, tmp_path / "work2", "alice")
    assert kept.error is None and kept.problems == {}


def test_an_unsafe_zip_inside_a_folder_is_refused(reference: Path, tmp_path: Path) -> None:
    upload = tmp_path / "upload"
    upload.mkdir()
    with zipfile.ZipFile(upload / "evil.zip", "w") as archive:
        archive.writestr("../../escape.py", "x = 1\n")
    prepared = submissions.prepare(upload, tmp_path / "work", "mallory")
    assert prepared.error is not None and "unsafe path" in prepared.error
    assert not (tmp_path / "escape.py").exists()


@pytest.mark.parametrize("others", [("alice.zip",), ("alice.ipynb",), ("alice.zip", "alice.ipynb")])
def test_entries_that_share_an_id_are_all_refused_and_none_chosen(tmp_path: Path, reference: Path,
                                                                   others: tuple[str, ...]) -> None:
    """``alice/`` beside ``alice.zip``: neither takes alice's id (nor her roster row); each row says why."""
    root = tmp_path / "subs"
    shutil.copytree(reference, root / "alice")
    shutil.copytree(reference, root / "bob")
    for name in others:
        with zipfile.ZipFile(root / name, "w") as archive:
            archive.writestr("hw/softmax.py", "x = 1\n")
    listed = submissions.discover(root)
    assert len(listed) == 2 + len(others) and "alice" not in [student for student, _ in listed], listed
    refused = submissions.duplicates(listed)
    names = " and ".join(["alice/", *others]) if len(others) == 1 else "alice/, alice.ipynb and alice.zip"
    count = "two" if len(others) == 1 else "three"
    expected = f"{count} submissions for alice: {names}; keep one"
    assert set(refused) == {student for student, entry in listed if entry.name.startswith("alice")}, refused
    assert set(refused.values()) == {expected}, refused
    for student, entry in listed:
        submission = submissions.prepare(entry, tmp_path / "work", student, refused.get(student))
        assert submission.status == (expected if student in refused else "ok"), (student, submission.status)


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_folder_of_links_never_outvotes_the_students_own_modules(tmp_path: Path, reference: Path, link: str) -> None:
    # A cloned repository (GitHub Classroom) keeps its symbolic links: a folder whose modules all link elsewhere
    # (the reference, a classmate's clone) held more modules than the student's own exercises/, so it was chosen,
    # its links refused, and the student's real work graded as "missing module ..." (0 points for every exercise).
    entry = tmp_path / "self-attention-alice"
    own = entry / "exercises"
    shutil.copytree(ROOT / "exercises", own, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(reference / "softmax.py", own / "softmax.py")  # the student's own work
    (own / "decoding.py").unlink()  # one module short of a full set
    mirror = entry / "vendor" / "exercises"
    mirror.mkdir(parents=True)
    for exercise in load().exercises:
        target = reference / exercise.module_file
        if link == "symbolic":
            (mirror / exercise.module_file).symlink_to(target)
        else:
            (mirror / exercise.module_file).hardlink_to(target)
    assert submissions.find_module_folder(entry) == own
    prepared = submissions.prepare(entry, tmp_path / "work")
    assert prepared.folder is not None
    assert (prepared.folder / "softmax.py").read_bytes() == (reference / "softmax.py").read_bytes()
    assert set(prepared.problems) == {"decoding"}, prepared.problems


@pytest.mark.parametrize("name", ["grades.csv", "grades-long.csv", "canvas.csv", "report.html", "grading.log",
                                  "unmatched.txt", "REPORT.HTML", "results.json", "feedback.md", "x.tmp"])
def test_no_student_takes_the_name_of_a_file_the_grader_writes(name: str) -> None:
    # A Classroom clone folder called report.html (or grading.log, unmatched.txt) made the exports fail for the class.
    from grader.grading import run_log

    assert run_log.LOG_FILE == "grading.log"
    assert submissions.reserved(name)
    renamed = submissions.safe_student_id(name, set())
    assert renamed != name and not submissions.reserved(renamed)


def test_two_entries_never_show_as_the_same_id(tmp_path: Path) -> None:
    # A folder "bob<newline>line" shows escaped as bob\x0aline, the very name of another folder: two rows that read
    # alike in grades.csv, the terminal and unmatched.txt. The one that needs escaping is renamed, and says so.
    from grader.grading.escaping import escape_text

    for name in ("bob\nline", "bob\\x0aline", "ada"):
        (tmp_path / name).mkdir()
        shutil.copy(ROOT / "solutions" / "softmax.py", tmp_path / name / "softmax.py")
    found = dict(submissions.discover(tmp_path))
    shown = [escape_text(student) for student in found]
    assert len(set(shown)) == len(shown) == 3, shown
    assert found["bob\\x0aline"] == tmp_path / "bob\\x0aline" and found["ada"] == tmp_path / "ada"
    assert any(student.endswith("-renamed") and found[student] == tmp_path / "bob\nline" for student in found)
