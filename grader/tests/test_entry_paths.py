"""Every entry path as safe as ``attention-kit grade`` (issue 24): links, hidden inputs, ids and statuses.

The attacks of a hostile tester, and new ones in the same spirit: a submission
that is a link (to the kit's solutions, to one solution file, to a hidden test,
to a root-only file), a hard link, a zip with a link member, a zip slip path, a
notebook or module that reads the kit at run time, code that remembers the
hidden tests' inputs, ids that pass for a roster id (``Alice``, `` bob``,
full-width letters) or carry terminal escapes, and inputs whose status hid what
happened. Each must score what its control scores (a submission that did not do
the exercise), leak nothing, and say what happened.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest

from grader.curriculum import ROOT
from grader.grading import export, links, submissions
from grader.grading.grade import grade_batch
from grader.grading.gradescope import CONTAINER_ENV
from grader.sandbox.limits import SIMULATE_NO_BWRAP, UNPRIVILEGED_GID, fresh_uid
from grader.tests.test_gradescope import bundle, check_results  # noqa: F401 - the bundle is a fixture here too
from grader.tests.waiting import HANG_SECONDS

# One xdist worker runs this file: the batches of every entry path (module fixtures) are graded once, not once per
# worker.
pytestmark = pytest.mark.xdist_group("test_entry_paths")

SOLUTIONS = ROOT / "solutions"
STUBS = ROOT / "exercises"
EXERCISES = ["softmax", "attention"]
SECRET = "LEAK-" + "5d1e0b7a93"  # planted in every target an attack may try to read; must reach no feedback
HIDDEN_SHAPE = (11, 29)  # only the hidden test below uses it


def copy_modules(source: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.py"):
        if path.name != "__init__.py":
            shutil.copyfile(path, target / path.name)
    return target


def root_only(path: Path, text: str) -> Path:
    """A file only root may read (mode 600), holding ``text`` and the planted secret."""
    path.write_text(text + f"\n# {SECRET}\n", encoding="utf-8")
    os.chmod(path, 0o600)
    return path


def leaks(text: str, secret: bytes) -> list[str]:
    """The pieces of ``secret`` found in ``text``: the planted marker, and any 16 characters of its base64
    (at each of the three byte alignments, so that a secret split into chunks is found too)."""
    found = [SECRET] if SECRET in text else []
    for shift in range(3):
        encoded = base64.b64encode(secret[shift:]).decode()
        found += [encoded[i:i + 16] for i in range(0, max(len(encoded) - 16, 0), 4) if encoded[i:i + 16] in text]
    return found


def test_the_leak_check_finds_a_secret_split_into_base64_chunks() -> None:
    secret = (SOLUTIONS / "softmax.py").read_bytes()[200:900]
    encoded = base64.b64encode(secret[1:]).decode()  # off the first byte: another alignment
    text = "raised ValueError: " + " ".join(encoded[i:i + 50] for i in range(0, len(encoded), 50))
    assert leaks(text, secret)
    assert not leaks(base64.b64encode(b"an honest student's own output " * 20).decode(), secret)


def read_grades(out: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text("utf-8")))}


# ------------------------------------------------------------------ one rule for links (prepare only, fast)


def test_the_one_rule_refuses_symbolic_and_hard_links(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    (tmp_path / "soft.py").symlink_to(plain)
    os.link(plain, tmp_path / "hard.py")
    assert links.refusal(tmp_path / "soft.py") == "a symbolic link (not followed)"
    assert links.refusal(tmp_path / "hard.py") == "a hard link (not read)"
    assert links.refusal(tmp_path) is None
    (tmp_path / "hard.py").unlink()
    assert links.refusal(plain) is None  # one name again: an ordinary file


def test_the_kits_own_reference_may_be_hard_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installer (uv) may hard-link the kit's files from its cache: the reference is never refused."""
    monkeypatch.setattr(links, "ROOT", tmp_path)
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "softmax.py").write_text("x = 1\n")
    os.link(tmp_path / "solutions" / "softmax.py", tmp_path / "cache-copy.py")
    assert links.refusal(tmp_path / "solutions" / "softmax.py") is None
    assert links.refusal(tmp_path / "cache-copy.py") == "a hard link (not read)"


def test_the_kits_reference_hard_linked_is_still_read(tmp_path: Path) -> None:
    """A hard link to a file of solutions/ (an installer's cache, or a student's hard link to it) leaves it the
    reference's own file: reading the reference copies it, where every row had been 'not graded: the kit's
    reference (solutions/) is broken: softmax.py changed while it was read' (a hostile round)."""
    reference = ROOT / "solutions" / "softmax.py"
    try:
        os.link(reference, tmp_path / "cache-copy.py")
    except OSError:
        pytest.skip("no hard link from here to the kit's solutions/")
    read = submissions.prepare(ROOT / "solutions", tmp_path / "work", "reference")
    assert read.error is None and read.status == "ok", read.status
    assert (read.folder / "softmax.py").read_bytes() == reference.read_bytes()


def test_a_submission_of_linked_modules_only_says_they_were_refused(tmp_path: Path) -> None:
    """Modules that are all links are refused, not 'found deeper: softmax.py: put the modules at most two folders
    down' (where they were at the top): the status names the link (a hostile round)."""
    entry = tmp_path / "subs" / "mallory"
    entry.mkdir(parents=True)
    (tmp_path / "outside.py").write_text("x = 1\n")
    os.link(tmp_path / "outside.py", entry / "softmax.py")
    (entry / "masks.py").symlink_to(tmp_path / "outside.py")
    status = submissions.prepare(entry, tmp_path / "work").status
    assert "found deeper" not in status, status
    assert "softmax.py is a hard link (not read)" in status and "masks.py is a symbolic link" in status, status


def test_a_folder_that_is_a_link_inside_the_submission_is_refused(tmp_path: Path) -> None:
    entry = tmp_path / "subs" / "mallory"
    entry.mkdir(parents=True)
    (entry / "exercises").symlink_to(SOLUTIONS)  # the hostile tester's 240/240 upload
    submission = submissions.prepare(entry, tmp_path / "work")
    assert submission.status.startswith("no modules found")
    assert "refused: exercises is a symbolic link (not followed)" in submission.status
    assert not list(submission.folder.glob("*.py"))


def test_a_link_that_could_not_hold_a_submission_is_passed_over(tmp_path: Path) -> None:
    entry = copy_modules(SOLUTIONS, tmp_path / "subs" / "honest")
    (entry / "env" / "bin").mkdir(parents=True)
    (entry / "env" / "bin" / "python").symlink_to("/usr/bin/python3")  # a virtual environment in the repository
    (entry / "README").symlink_to("docs/README.md")
    assert submissions.prepare(entry, tmp_path / "work").status == "ok"


def test_a_module_that_is_a_link_is_refused_and_not_read(tmp_path: Path) -> None:
    entry = copy_modules(STUBS, tmp_path / "subs" / "mallory")
    (entry / "softmax.py").unlink()
    (entry / "softmax.py").symlink_to(SOLUTIONS / "softmax.py")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert "missing module softmax" in submission.status
    assert "refused: softmax.py is a symbolic link (not followed)" in submission.status
    assert not (submission.folder / "softmax.py").exists()


def test_new_attack_a_hard_link_to_a_root_only_file_is_not_read(tmp_path: Path) -> None:
    secret = root_only(tmp_path / "reference_softmax.py", (SOLUTIONS / "softmax.py").read_text(encoding="utf-8"))
    entry = copy_modules(STUBS, tmp_path / "mallory")
    (entry / "softmax.py").unlink()
    os.link(secret, entry / "softmax.py")  # the same file under the student's name
    submission = submissions.prepare(entry, tmp_path / "work")
    assert "refused: softmax.py is a hard link (not read)" in submission.status
    assert "missing module softmax" in submission.status
    copied = "".join(p.read_text(encoding="utf-8") for p in submission.folder.glob("*.py"))
    assert SECRET not in copied


def test_new_attack_a_whole_entry_that_is_a_hard_link(tmp_path: Path) -> None:
    archive = tmp_path / "private.zip"
    with zipfile.ZipFile(archive, "w") as bundle_zip:
        bundle_zip.write(SOLUTIONS / "softmax.py", "softmax.py")
    folder = tmp_path / "subs"
    folder.mkdir()
    os.link(archive, folder / "mallory.zip")
    submission = submissions.prepare(folder / "mallory.zip", tmp_path / "work")
    assert submission.status == "unreadable submission: mallory.zip is a hard link (not read)"


def test_new_attack_a_zip_with_a_link_member(tmp_path: Path) -> None:
    entry = tmp_path / "subs" / "mallory"
    entry.mkdir(parents=True)
    with zipfile.ZipFile(entry / "work.zip", "w") as archive:
        for path in STUBS.glob("*.py"):
            if path.name not in ("softmax.py", "__init__.py"):
                archive.write(path, path.name)
        link = zipfile.ZipInfo("softmax.py")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, str(SOLUTIONS / "softmax.py"))
    submission = submissions.prepare(entry, tmp_path / "work")
    assert "refused: work.zip:softmax.py is a symbolic link (not followed)" in submission.status
    assert "missing module softmax" in submission.status
    assert not (submission.folder / "softmax.py").exists()


def test_new_attack_a_zip_slip_path_writes_nothing_outside(tmp_path: Path) -> None:
    archive = tmp_path / "subs" / "mallory.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as bundle_zip:
        bundle_zip.writestr("../../escaped.py", "print('out')\n")
        bundle_zip.writestr("softmax.py", "x = 1\n")
    submission = submissions.prepare(archive, tmp_path / "work" / "deep" / "er")
    assert submission.status.startswith("unreadable submission: mallory.zip has an unsafe path: ../../escaped.py")
    assert not list(tmp_path.rglob("escaped.py"))


def test_new_attack_a_linked_zip_or_notebook_inside_a_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with zipfile.ZipFile(outside / "solutions.zip", "w") as archive:
        for path in SOLUTIONS.glob("*.py"):
            archive.write(path, path.name)
    entry = tmp_path / "subs" / "mallory"
    entry.mkdir(parents=True)
    (entry / "mine.zip").symlink_to(outside / "solutions.zip")
    (entry / "nb").mkdir()
    (entry / "nb" / "attention.ipynb").symlink_to(outside / "solutions.zip")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert "mine.zip is a symbolic link (not followed)" in submission.status
    assert "nb/attention.ipynb is a symbolic link (not followed)" in submission.status
    assert not list(submission.folder.glob("*.py"))


def test_copy_upload_copies_links_as_links_and_never_reads_them(tmp_path: Path) -> None:
    secret = root_only(tmp_path / "secret.txt", "root only")
    upload = tmp_path / "upload"
    (upload / "exercises").mkdir(parents=True)
    (upload / "exercises" / "masks.py").write_text("def causal_mask(n):\n    return n\n")
    (upload / "exercises" / "softmax.py").symlink_to(secret)
    (upload / "solutions").symlink_to(SOLUTIONS)
    os.link(secret, upload / "exercises" / "attention.py")
    os.mkfifo(upload / "exercises" / "pipe.py")  # a copy that reads it would hang
    (upload / ".git").mkdir()
    (upload / ".git" / "config").write_text("[core]\n")
    target = tmp_path / "copy"
    submissions.copy_upload(upload, target, skipped=(".git",))
    assert (target / "exercises" / "masks.py").read_text().startswith("def causal_mask")
    assert (target / "exercises" / "softmax.py").is_symlink() and (target / "solutions").is_symlink()
    assert os.readlink(target / "solutions") == str(SOLUTIONS)
    hard = target / "exercises" / "attention.py"
    assert not hard.exists() or hard.stat().st_nlink > 1  # linked again (refused when read), or left out
    assert not (target / "exercises" / "pipe.py").exists() and not (target / ".git").exists()
    submission = submissions.prepare(target, tmp_path / "work")
    assert "exercises/softmax.py is a symbolic link (not followed)" in submission.status
    assert "solutions is a symbolic link (not followed)" in submission.status


def test_new_attack_an_upload_nested_deeper_than_grading_looks_is_copied_bounded(tmp_path: Path) -> None:
    upload = tmp_path / "upload"
    deep = upload
    for level in range(60):  # a copy that recursed per level, or had no bound, would not stop here
        deep = deep / f"d{level}"
    deep.mkdir(parents=True)
    (deep / "softmax.py").write_text("x = 1\n")
    copy_modules(STUBS, upload / "exercises")
    copied = submissions.copy_upload(upload, tmp_path / "copy")
    assert (tmp_path / "copy" / "exercises" / "softmax.py").is_file()
    assert not list((tmp_path / "copy").rglob("d20")) and copied < 100


def test_new_attack_stray_files_before_the_modules_do_not_push_them_out_of_the_copy(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    # An upload of the modules beside 60,000 stray files, scaled down: at most 40 entries copied, 300 strays whose
    # names sort first (``_h0.txt``, ``_a0.py``), some beside the modules, some in a folder that is listed first.
    monkeypatch.setattr(submissions, "UPLOAD_ENTRIES", 40)
    upload = tmp_path / "upload"
    copy_modules(SOLUTIONS, upload / "exercises")
    for folder in (upload, upload / "exercises", upload / "_aaa"):
        folder.mkdir(exist_ok=True)
        for index in range(50):
            (folder / f"_h{index}.txt").write_text("stray\n")
            (folder / f"_a{index}.py").write_text("x = 1\n")
    copied = submissions.copy_upload(upload, tmp_path / "copy")
    assert copied == 40
    modules = sorted(path.name for path in (tmp_path / "copy" / "exercises").glob("*.py") if not path.name[0] == "_")
    assert modules == sorted(path.name for path in SOLUTIONS.glob("*.py") if not path.name[0] == "_")
    assert not list((tmp_path / "copy").rglob("*.txt"))  # the other sources came next, the strays last
    submission = submissions.prepare(tmp_path / "copy", tmp_path / "work")
    assert not submission.problems, submission.status


# ------------------------------------------------------------------------------------------- statuses


def test_grading_some_exercises_says_nothing_of_the_others_missing_modules(tmp_path: Path) -> None:
    from grader.grading.records import Result
    from grader.grading.report import student_status

    entry = tmp_path / "ada"
    entry.mkdir()
    shutil.copy(SOLUTIONS / "softmax.py", entry / "softmax.py")
    (entry / "masks.py").write_text("def causal_mask(:\n", encoding="utf-8")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert "missing module attention" in submission.status  # the whole course: every other module is missing
    result = Result(records=(), seconds=1.0)
    assert student_status(submission, result, (), {"softmax"}) == "ok"  # grade --exercise softmax
    assert student_status(submission, result, (), {"softmax", "masks"}) == "syntax error in masks.py line 1"
    assert "missing module attention" not in student_status(submission, result, (), {"softmax", "masks"})


def test_a_capitalised_module_says_rename_it(tmp_path: Path) -> None:
    entry = copy_modules(SOLUTIONS, tmp_path / "carol")
    (entry / "softmax.py").rename(entry / "Softmax.py")
    submission = submissions.prepare(entry, tmp_path / "work")
    assert "missing module softmax (found Softmax.py: rename it to softmax.py)" in submission.status


def test_a_capitalised_module_in_a_zip_says_rename_it_too(tmp_path: Path) -> None:
    archive = tmp_path / "carol.zip"
    with zipfile.ZipFile(archive, "w") as bundle_zip:
        for path in SOLUTIONS.glob("*.py"):
            bundle_zip.write(path, f"hw/{'Softmax.py' if path.name == 'softmax.py' else path.name}")
    submission = submissions.prepare(archive, tmp_path / "work")
    assert "missing module softmax (found Softmax.py: rename it to softmax.py)" in submission.status


@pytest.mark.parametrize("name", ["notes.txt", "grades", "softmax.py"])
def test_a_stray_file_as_submissions_is_refused_with_one_line(tmp_path: Path, name: str) -> None:
    stray = tmp_path / name
    stray.write_text("not a submission\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(stray), "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().count("\n") == 0 and "not a folder and not a submission file" in done.stderr
    assert not out.exists()


def test_a_zip_or_notebook_file_is_still_one_submission(tmp_path: Path) -> None:
    for name in ("alice.zip", "alice.ipynb", "ALICE.ZIP"):
        (tmp_path / name).write_bytes(b"")
        assert submissions.argument_problem(tmp_path / name) is None
    assert submissions.argument_problem(tmp_path) is None
    assert "no such file or folder" in submissions.argument_problem(tmp_path / "absent")


# ---------------------------------------------------------------------------------------------- ids


ROSTER = "folder,lms_id,name,email\nalice,101,Alice A,a@x\nbob,102,Bob B,b@x\neve,103,Eve E,e@x\n"


def test_roster_matching_is_exact_and_near_ids_are_flagged() -> None:
    roster = {folder: {"folder": folder} for folder in ("alice", "bob", "eve")}
    matched = export.match_roster(["Alice", " bob", "\uff45\uff56\uff45", "alice"], roster)  # full-width "eve"
    assert set(matched.rows) == {"alice"}
    assert matched.unmatched_submissions == ["Alice", " bob", "\uff45\uff56\uff45"]
    assert matched.unmatched_roster == ["bob", "eve"]
    flagged = "\n".join(matched.flagged)
    assert "submission Alice is not roster folder alice" in flagged
    assert "submission ' bob' is not roster folder bob" in flagged
    assert "is not roster folder eve" in flagged  # equal under NFKC only
    assert "submissions Alice, alice differ only in case" in flagged


def test_without_a_roster_ids_alike_are_still_flagged_on_the_terminal(tmp_path: Path) -> None:
    printed: list[str] = []
    rows = [write_row(student, 1.0) for student in ("dave", "Dave", "d\u0430ve", "erin", "\u5c71\u7530taro")]
    export.export(tmp_path, rows, None, echo=printed.append)
    assert printed == ["flagged: submissions dave, Dave differ only in case, spaces or Unicode form: each is graded "
                       "on its own; check that they are different students",
                       "flagged: submission d\u0430ve mixes Cyrillic and Latin letters, as a look-alike of another id "
                       "does (a Cyrillic \u0430 in a Latin name): it is graded on its own; check whose it is"]


def test_the_does_not_import_status_reads_public_tests_only() -> None:
    from grader.grading.records import TestRecord
    from grader.grading.report import import_failures

    line = "importing softmax.py raised ValueError: seen (11, 29) (softmax.py line 3)"
    hidden = TestRecord(nodeid="test_hidden_01_softmax.py::t", exercise="softmax", outcome="failed", message=line,
                        file="/kit/grader/hidden_tests/test_hidden_01_softmax.py")
    public = dataclasses.replace(hidden, file="/kit/tests/test_01_softmax.py")
    assert import_failures([hidden]) == []  # shown before grades are published: nothing of a hidden test
    assert import_failures([public, public]) == [f"does not import: {line}"]


def write_row(student: str, score: float) -> dict:
    """A graded student's results.json, as the grader writes it (enough for the exports)."""
    return {"score": score, "tests": [], "extra_data": {"student": student, "status": "ok", "exercises": {},
                                                        "max_exercises": {}, "max_score": 10.0}}


def test_new_attack_ids_with_terminal_escapes_are_neutralised_everywhere(tmp_path: Path) -> None:
    hostile = ["\x1b]0;owned\x07\x1b[2Jclear", "new\nline", "car\rriage", "bidi\u202etxt.exe", "c1\x9bx"]
    rows = [write_row(student, 5.0) for student in [*hostile, "Alice"]]
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    printed: list[str] = []
    export.export(tmp_path, rows, roster, echo=printed.append)
    texts = {"terminal": "\n".join(printed)}
    texts.update({name: (tmp_path / name).read_text(encoding="utf-8")
                  for name in ("unmatched.txt", "canvas.csv", "grades-long.csv")})
    for where, text in texts.items():
        for character in ("\x1b", "\r", "\x07", "\x9b", "\u202e"):
            assert character not in text, (where, character)
        for student in hostile:
            assert student not in text, (where, student)
    assert "new\\x0aline" in texts["unmatched.txt"] and "\\x1b]0;owned" in texts["terminal"]
    assert "flagged: submission Alice is not roster folder alice" in texts["unmatched.txt"]
    canvas = list(csv.reader(io.StringIO(texts["canvas.csv"])))
    assert [row[-1] for row in canvas if row[1] == "101"] == [""]  # Alice's 5 points never go to alice


# ------------------------------------------------------------ one graded batch: hidden inputs, imports, roster


HIDDEN_TEST = f"""import numpy as np

EXERCISE = "softmax"


def test_secret_softmax_shape(impl):
    out = impl.softmax(np.zeros({HIDDEN_SHAPE}))  # {SECRET}
    assert out.shape == {HIDDEN_SHAPE}
"""
# Remembers every input shape it is given and prints them all when one is new; attention (run after softmax)
# raises with them, so its failures would show what softmax saw before. The list lives in the worker's
# process (on ``sys``), not in a module: fair grading imports each exercise's modules apart.
STASH = "import sys\n\nSEEN = sys.__dict__.setdefault('_attention_kit_seen', [])\n"
STASHING_SOFTMAX = """

import gc as _gc
import __main__ as _main

from ._stash import SEEN as _SEEN

_reference_softmax = softmax


def _ask(name):
    # A callback the channel refuses: the grader lists refused requests, with their names, in the feedback.
    try:
        worker = next(o for o in _gc.get_objects() if isinstance(o, _main.Worker))
        worker.forwarder("attention", name)()
    except Exception:
        pass


def softmax(x, axis=-1):
    if tuple(np.shape(x)) not in _SEEN:  # a new shape only: the output stays short enough to be shown whole
        _SEEN.append(tuple(np.shape(x)))
        print("seen so far:", _SEEN)
        _ask("seen_" + "x".join(map(str, np.shape(x))))
    return _reference_softmax(x, axis=axis)
"""
STASHING_ATTENTION = """

from ._stash import SEEN as _SEEN


def scaled_dot_product_attention(q, k, v, mask=None):
    raise ValueError(f"softmax saw {_SEEN}")
"""
READER = f"""

def softmax(x, axis=-1):
    # Reads the reference from the kit at run time: the worker's user must not be able to.
    namespace = {{}}
    exec(open({str(SOLUTIONS / "softmax.py")!r}).read(), namespace)
    return namespace["softmax"](x, axis=axis)
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("entry_paths")
    folder = root / "submissions"
    folder.mkdir()
    copy_modules(STUBS, folder / "stub")  # the control: a submission that did none of the exercises
    stasher = copy_modules(SOLUTIONS, folder / "stasher")
    (stasher / "_stash.py").write_text(STASH, encoding="utf-8")
    with open(stasher / "softmax.py", "a", encoding="utf-8") as handle:
        handle.write(STASHING_SOFTMAX)
    with open(stasher / "attention.py", "a", encoding="utf-8") as handle:
        handle.write(STASHING_ATTENTION)
    broken = copy_modules(SOLUTIONS, folder / "noimport")
    with open(broken / "softmax.py", "a", encoding="utf-8") as handle:
        handle.write("\nimport attention_kit_no_such_module_xyz\n")  # parses, does not import
    reader = copy_modules(STUBS, folder / "reader")
    with open(reader / "softmax.py", "a", encoding="utf-8") as handle:
        handle.write(READER)
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": f"%run {SOLUTIONS / 'softmax.py'}\n%load {SOLUTIONS / 'softmax.py'}\nimport numpy as np\n"
                      + READER}
    (folder / "reader-notebook.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                               "nbformat_minor": 5}), encoding="utf-8")
    copy_modules(SOLUTIONS, folder / "alice")
    copy_modules(STUBS, folder / "Alice")
    copy_modules(STUBS, folder / " bob")
    copy_modules(SOLUTIONS, folder / "bob")
    copy_modules(SOLUTIONS, folder / "esc\x1b[2J\x1b]0;owned\x07\nline")
    hidden = root / "hidden"
    hidden.mkdir()
    (hidden / "test_secret_softmax.py").write_text(HIDDEN_TEST, encoding="utf-8")
    roster = root / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    out = root / "out"
    printed: list[str] = []
    status = grade_batch(folder, out, jobs=2, hidden=hidden, exercises=EXERCISES, budget=20.0, roster=roster,
                         echo=lambda *args: printed.append(" ".join(map(str, args))))
    return {"out": out, "status": status, "grades": read_grades(out), "printed": "\n".join(printed)}


def visible_feedback(out: Path, student: str) -> str:
    """What a student sees before grades are published: the visible tests, the summary and feedback.md."""
    results = json.loads((out / student / "results.json").read_text(encoding="utf-8"))
    visible = [test for test in results["tests"] if test.get("visibility", "visible") == "visible"]
    return "\n".join([results["output"], *(test.get("output", "") for test in visible),
                      (out / student / "feedback.md").read_text(encoding="utf-8")])


def test_hidden_inputs_never_reach_public_feedback(batch: dict) -> None:
    shown = visible_feedback(batch["out"], "stasher")
    assert "softmax saw [" in shown and "seen so far:" in shown  # the attack prints and raises what it saw
    assert "Refused requests to the reference" in shown and "seen_" in shown  # a callback named by a shape
    assert str(HIDDEN_SHAPE) not in shown and f"{HIDDEN_SHAPE[0]}, {HIDDEN_SHAPE[1]}" not in shown
    assert f"{HIDDEN_SHAPE[0]}x{HIDDEN_SHAPE[1]}" not in shown
    results = json.loads((batch["out"] / "stasher" / "results.json").read_text(encoding="utf-8"))
    hidden = [test for test in results["tests"] if test.get("visibility") == "after_published"]
    assert hidden and all(test["status"] == "passed" for test in hidden)  # the hidden test did run


def test_public_tests_run_before_every_hidden_test(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_secret_softmax.py").write_text(HIDDEN_TEST, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_01_softmax.py", "tests/test_03_attention.py",
                           str(hidden), "--impl", "solutions", "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    first_hidden = next(i for i, line in enumerate(ids) if "test_secret_softmax" in line)
    assert first_hidden == len(ids) - 1 and any("test_03_attention" in line for line in ids), ids[-3:]


def test_a_module_that_does_not_import_says_so(batch: dict) -> None:
    status = batch["grades"]["noimport"]["status"]
    assert status.startswith("does not import: importing softmax.py raised ModuleNotFoundError: "), status
    assert "attention_kit_no_such_module_xyz" in status
    assert batch["grades"]["stub"]["status"] == "ok"


def test_new_attack_code_that_reads_the_kit_at_run_time_scores_like_the_control(batch: dict) -> None:
    grades = batch["grades"]
    assert float(grades["reader"]["softmax"]) == float(grades["stub"]["softmax"])
    # A notebook that names the reference's path (magics, which are dropped; a read at run time, which fails).
    assert float(grades["reader-notebook"]["softmax"]) == float(grades["stub"]["softmax"])
    assert "missing module softmax" not in grades["reader-notebook"]["status"]  # its softmax ran, and read nothing
    shown = visible_feedback(batch["out"], "reader-notebook")
    assert "def softmax" not in shown.split("Output of your code")[0] and SECRET not in shown
    assert float(grades["stasher"]["softmax"]) > 0  # the same grading gives points where they are earned


def test_roster_hijack_by_case_and_spaces_fails(batch: dict) -> None:
    canvas = list(csv.reader(io.StringIO((batch["out"] / "canvas.csv").read_text(encoding="utf-8"))))
    scores = {row[1]: row[5] for row in canvas[2:]}
    assert scores["101"] == batch["grades"]["alice"]["score"] and float(scores["101"]) > 0
    assert scores["102"] == batch["grades"]["bob"]["score"] and float(scores["102"]) > 0
    unmatched = (batch["out"] / "unmatched.txt").read_text(encoding="utf-8")
    assert "submission Alice is not roster folder alice" in unmatched
    assert "submission ' bob' is not roster folder bob" in unmatched
    assert "flagged:" in batch["printed"]


def test_new_attack_an_id_with_escapes_and_a_newline_is_neutralised(batch: dict) -> None:
    everything = batch["printed"] + "".join(
        path.read_text(encoding="utf-8", errors="replace") for path in batch["out"].rglob("*") if path.is_file())
    assert "\x1b" not in everything and "\x07" not in everything
    assert "esc\\x1b[2J\\x1b]0;owned\\x07\\x0aline" in batch["printed"]
    assert batch["status"] == 0


# ------------------------------------------------------------------------------- the Gradescope bundle


def kit_targets(root: Path) -> dict[str, Path]:
    """The files an attack aims at, in the unpacked bundle, each with the secret planted in it."""
    kit = root / "source" / "kit"
    targets = {"solution": kit / "solutions" / "softmax.py",
               "hidden test": kit / "grader" / "hidden_tests" / "test_hidden_03_attention.py"}
    for path in targets.values():
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n# {SECRET}\n")
    targets["root-only file"] = root_only(root / "private.txt", "the instructor's notes")
    return targets


def autograde(bundle_zip: Path, upload: Path, root: Path, **env: str) -> tuple[dict, dict[str, Path]]:
    """run_autograder on ``upload`` (copied with its links as links) in a folder every user may traverse."""
    shutil.copytree(bundle_zip.parent / "template", root)
    for folder in (root, root.parent):  # so that only the kit's own permissions keep the worker's user out of it
        os.chmod(folder, 0o755)
    targets = kit_targets(root)
    shutil.copytree(upload(targets) if callable(upload) else upload, root / "submission", symlinks=True)
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable, **env)
    environment.pop("PYTHONPATH", None)
    done = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    if env.get(SIMULATE_NO_BWRAP) and "cannot be read by an unprivileged user" in results["output"]:
        # As root with an interpreter no other user can read (under /root), --container refuses to run student
        # code at all: nothing was graded, so nothing can have leaked; the mode cannot be tried here.
        assert "score" not in results and not any(leaks(results_text(results), path.read_bytes())
                                                  for path in targets.values())
        pytest.skip("--container refuses here: the interpreter is unreadable to other users")
    assert "score" in results, results["output"] + done.stdout[-3000:] + done.stderr[-3000:]
    check_results(results)
    assert stat.S_IMODE((root / "source" / "kit").stat().st_mode) & 0o077 == 0  # run_autograder closed it
    return results, targets


def results_text(results: dict) -> str:
    return json.dumps(results, ensure_ascii=False) + "\n".join(
        [results.get("output", ""), *(test.get("output", "") for test in results["tests"])])


@pytest.fixture(scope="module")
def control_score(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> float:  # noqa: F811
    root = Path(tempfile.mkdtemp(prefix="attention-kit-control-"))
    try:
        results, _ = autograde(bundle, copy_modules(STUBS, tmp_path_factory.mktemp("stub") / "exercises"),
                               root / "autograder")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results["score"]


def link_uploads(tmp_path: Path) -> dict[str, object]:
    """Uploads that are links: to the kit's solutions folder; a stub whose modules link to the targets."""
    def whole_folder(targets: dict[str, Path]) -> Path:
        upload = tmp_path / "folder-link"
        upload.mkdir()
        (upload / "exercises").symlink_to(targets["solution"].parent)
        return upload

    def modules(targets: dict[str, Path]) -> Path:
        upload = copy_modules(STUBS, tmp_path / "module-links")
        for name, target in (("softmax.py", "solution"), ("attention.py", "hidden test"),
                             ("masks.py", "root-only file")):
            (upload / name).unlink()
            (upload / name).symlink_to(targets[target])
        return upload

    return {"folder": whole_folder, "modules": modules}


@pytest.mark.parametrize("mode", ["bwrap", "container"])
@pytest.mark.parametrize("kind", ["folder", "modules"])
def test_gradescope_uploads_that_are_links_score_like_a_stub(bundle: Path, control_score: float,  # noqa: F811
                                                              tmp_path: Path, kind: str, mode: str) -> None:
    env = {SIMULATE_NO_BWRAP: "1", CONTAINER_ENV: "1"} if mode == "container" else {}
    root = Path(tempfile.mkdtemp(prefix="attention-kit-links-"))
    try:
        results, targets = autograde(bundle, link_uploads(tmp_path)[kind], root / "autograder", **env)
        if mode == "container" and "no modules found" not in results["output"]:  # (a folder link: nothing ran)
            assert "the container" in results["output"], results["output"]
        text = results_text(results)
        assert results["score"] <= control_score
        assert "is a symbolic link (not followed)" in results["output"]
        for name, target in targets.items():
            with open(target, "rb") as handle:
                assert not leaks(text, handle.read()), name
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Reads each target at import and raises its content (base64, in chunks) from every call: what a worker's
# user can read reaches public feedback.
RUNTIME_READER = """
import base64

_PATHS = {paths!r}
_SEEN = []
for _path in _PATHS:
    try:
        with open(_path, "rb") as _handle:
            _data = base64.b64encode(_handle.read()).decode()
        _SEEN.extend(_data[i:i + 60] for i in range(0, len(_data), 60))
    except OSError as _error:
        _SEEN.append(type(_error).__name__)


def softmax(x, axis=-1):
    raise ValueError(" ".join(_SEEN))
"""


def test_a_trial_run_without_bubblewrap_refuses_instead_of_trusting_a_container(bundle: Path,  # noqa: F811
                                                                               tmp_path: Path) -> None:
    """Outside Gradescope's container, student code could read this machine's other copies of the reference.

    A trial run (``AUTOGRADER_ROOT`` elsewhere) used ``--container`` too: without bubblewrap, a submission that
    read a world-readable checkout's solutions/ scored what the reference scores. It now needs bubblewrap, as
    ``grade`` does, and refuses without it: no score, and a line saying why.
    """
    from grader.grading.gradescope import isolation_options

    assert isolation_options(Path("/autograder")) == ["--container"]
    assert isolation_options(tmp_path) == []
    root = Path(tempfile.mkdtemp(prefix="attention-kit-trial-"))
    try:
        shutil.copytree(bundle.parent / "template", root / "autograder")
        shutil.copytree(copy_modules(SOLUTIONS, tmp_path / "whole"), root / "autograder" / "submission")
        environment = dict(os.environ, AUTOGRADER_ROOT=str(root / "autograder"), AUTOGRADER_PYTHON=sys.executable,
                           **{SIMULATE_NO_BWRAP: "1"})
        environment.pop("PYTHONPATH", None)
        environment.pop(CONTAINER_ENV, None)
        done = subprocess.run([str(root / "autograder" / "source" / "run_autograder")], cwd=root / "autograder",
                              env=environment, capture_output=True, text=True, timeout=HANG_SECONDS)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        results = json.loads((root / "autograder" / "results" / "results.json").read_text(encoding="utf-8"))
        assert "score" not in results and "bubblewrap" in results["output"], results["output"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("mode", ["bwrap", "container"])
def test_gradescope_worker_cannot_read_the_kit_or_root_only_files(bundle: Path, control_score: float,  # noqa: F811
                                                                  tmp_path: Path, mode: str) -> None:
    env = {SIMULATE_NO_BWRAP: "1", CONTAINER_ENV: "1"} if mode == "container" else {}

    def upload(targets: dict[str, Path]) -> Path:
        folder = copy_modules(STUBS, tmp_path / "reader")
        paths = [str(path) for path in targets.values()]
        (folder / "softmax.py").write_text(RUNTIME_READER.format(paths=paths), encoding="utf-8")
        return folder

    root = Path(tempfile.mkdtemp(prefix="attention-kit-reader-"))
    try:
        results, targets = autograde(bundle, upload, root / "autograder", **env)
        text = results_text(results)
        assert "Error" in text  # the reader ran and said why it read nothing
        assert results["score"] <= control_score
        for name, target in targets.items():
            with open(target, "rb") as handle:
                assert not leaks(text, handle.read()), name
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root")
def test_gradescope_kit_and_root_only_files_are_unreadable_to_a_worker_user(bundle: Path,  # noqa: F811
                                                                             tmp_path: Path) -> None:
    """What --container's worker user (a fresh uid, group nogroup) can read after run_autograder: none of it.

    Checked with cat, which any user can run (the grading interpreter may not be: see the tests above).
    """
    root = Path(tempfile.mkdtemp(prefix="attention-kit-perms-"))
    try:
        results, targets = autograde(bundle, copy_modules(STUBS, tmp_path / "stub"), root / "autograder")
        cat = shutil.which("cat") or "/bin/cat"
        for name, target in targets.items():
            seen = subprocess.run([cat, str(target)], user=fresh_uid(), group=UNPRIVILEGED_GID,
                                  capture_output=True, timeout=HANG_SECONDS)
            assert seen.returncode != 0 and SECRET.encode() not in seen.stdout, name
            assert b"Permission denied" in seen.stderr, (name, seen.stderr)
        assert root.stat().st_mode & 0o005  # the folders above are open to others: the kit's mode is what counts
    finally:
        shutil.rmtree(root, ignore_errors=True)



def test_no_modules_says_where_they_were_found_deeper(tmp_path: Path) -> None:
    # A hostile round's honest case: modules three folders down were "no modules found" and nothing more.
    import zipfile

    deep = tmp_path / "deep.zip"
    with zipfile.ZipFile(deep, "w") as archive:
        archive.write(SOLUTIONS / "softmax.py", "a/b/c/softmax.py")
    said = submissions.prepare(deep, tmp_path / "work").status
    assert said.startswith("no modules found") and "found deeper: a/b/c/softmax.py" in said, said


def test_a_zip_inside_the_zip_is_named_as_not_opened(tmp_path: Path) -> None:
    # A zip of a zip of the modules: "no modules found" and nothing more, as though the student had sent nothing.
    import zipfile

    inner = tmp_path / "inner.zip"
    with zipfile.ZipFile(inner, "w") as archive:
        archive.write(SOLUTIONS / "softmax.py", "softmax.py")
    outer = tmp_path / "carol.zip"
    with zipfile.ZipFile(outer, "w") as archive:
        archive.write(inner, "hw/inner.zip")
    said = submissions.prepare(outer, tmp_path / "work").status
    assert said.startswith("no modules found") and "it holds an archive, which grading does not open: hw/inner.zip" \
        in said and "not a zip of a zip" in said, said


def test_a_zip_that_holds_a_module_twice_is_refused_saying_so(tmp_path: Path) -> None:
    # Two members of one name (no zip tool writes that; zipfile in append mode does): the last one was graded,
    # unsaid, so which copy counted was the archive's order; the row now says why it is not graded.
    archive = tmp_path / "subs" / "twice.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as bundle_zip, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name" warning
        bundle_zip.writestr("work/softmax.py", "x = 1\n")
        bundle_zip.writestr("work/softmax.py", "x = 2\n")
    submission = submissions.prepare(archive, tmp_path / "work")
    assert submission.status == "unreadable submission: twice.zip holds work/softmax.py twice: make the archive again"
