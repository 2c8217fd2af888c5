"""An exercise of the instructor's own (course exercise new, course check): graded, released, built as the kit's."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader import cli, course
from grader.curriculum import ROOT, kit_manifest, load
from grader.tests.waiting import HANG_SECONDS

NAME = "centre"
MISTAKE = ("np.mean(x, axis=axis, keepdims=True)", "np.mean(x)")  # the template's catalogued mistake, by hand
KIT_FILES = ("grader/curriculum.toml", "grader/mutants", "solutions", "tests", "grader/hidden_tests", "exercises")


def kit_digest() -> str:
    digest = hashlib.sha256()
    for entry in KIT_FILES:
        path = ROOT / entry
        for file in sorted(path.rglob("*") if path.is_dir() else [path]):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(ROOT)).encode() + file.read_bytes())
    return digest.hexdigest()


def kit(capsys, *arguments: str) -> tuple[int, str, str]:
    status = cli.main(list(arguments))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(autouse=True)
def no_course(monkeypatch, tmp_path_factory):
    """Every test starts without a course and leaves none behind (``main`` sets the variable)."""
    monkeypatch.setenv(course.COURSE_ENV, "")
    monkeypatch.delenv(course.COURSE_ENV)
    monkeypatch.chdir(ROOT)
    load.cache_clear()
    course.read.cache_clear()
    yield
    # ... and nothing of a course in this process either: the next file's tests in it (an xdist worker) must read
    # the kit's manifest, modules and probes (test_diagnosis, run after this file in one process, saw the course's
    # "centre" among the probes and its softmax module in place of a student's).
    import sys

    from tests.probes import PROBES

    temporary = str(tmp_path_factory.getbasetemp())
    gone = {name for name, module in list(sys.modules.items())
            if str(getattr(module, "__file__", None) or "").startswith(temporary)}
    for name in gone:
        del sys.modules[name]
    for name in [name for name, entry in PROBES.items() if entry.build.__module__ in gone]:
        del PROBES[name]
    sys.path[:] = [entry for entry in sys.path if not entry.startswith(temporary)]
    load.cache_clear()
    course.read.cache_clear()


@pytest.fixture
def own(tmp_path, capsys) -> Path:
    """A course of softmax and an exercise of its own, made by the commands an instructor runs."""
    folder = tmp_path / "course"
    before = kit_digest()
    assert kit(capsys, "course", "init", str(folder), "--kit", str(ROOT))[0] == 0
    settings = folder / "course.toml"
    settings.write_text(re.sub(r"(?ms)^exercises = \[.*?^\]", 'exercises = ["softmax"]',
                               settings.read_text(encoding="utf-8"), count=1), encoding="utf-8")
    status, out, err = kit(capsys, "course", "exercise", "new", NAME, "--course", str(folder), "--title",
                           "Centring scores", "--part", "1")
    assert status == 0, out + err
    assert "proven" in out and "Every exercise is proven." in out
    assert kit_digest() == before  # the kit's tree is never written
    for path in (f"solutions/{NAME}.py", f"tests/test_{NAME}.py", f"hidden_tests/test_hidden_{NAME}.py",
                 f"mutants/{NAME}.toml", f"exercises/{NAME}.py", "data/golden.npz", "data/fingerprints.npz"):
        assert (folder / path).is_file(), path
    assert 'exercises = ["softmax", "centre"]' in settings.read_text(encoding="utf-8")
    for private in (f"solutions/{NAME}.py", f"hidden_tests/test_hidden_{NAME}.py", f"mutants/{NAME}.toml"):
        assert (folder / private).stat().st_mode & 0o777 == 0o600, private  # the instructor's alone
    return folder


def submissions(folder: Path, tmp_path: Path) -> Path:
    subs = tmp_path / "subs"
    for student in ("solved", "mistaken"):
        (subs / student).mkdir(parents=True)
        for module in ("softmax", "_checks", NAME):
            shutil.copy(folder / "solutions" / f"{module}.py", subs / student)
    path = subs / "mistaken" / f"{NAME}.py"
    path.write_text(path.read_text(encoding="utf-8").replace(*MISTAKE), encoding="utf-8")
    return subs


def test_course_exercise_new_registers_it_and_refuses_a_taken_name(own, capsys):
    course.activate(own)
    exercise = load().exercise(NAME)
    assert exercise.home == str(own) and exercise.test_path == own / "tests" / f"test_{NAME}.py"
    assert load().selected_names() == ("softmax", NAME)
    for name, message in (("softmax", "already has that name"), (NAME, "already has that name"),
                          ("Bad-Name", "NAME 'Bad-Name'")):
        status, _, err = kit(capsys, "course", "exercise", "new", name, "--course", str(own))
        assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_course_check_names_a_mistake_the_tests_do_not_catch(own, capsys):
    status, out, _ = kit(capsys, "course", "check", "--course", str(own), "--exercise", NAME)
    assert status == 0 and "unchanged since the last check" in out  # proven by `exercise new`: not again
    catalogue = own / "mutants" / f"{NAME}.toml"
    catalogue.write_text(catalogue.read_text(encoding="utf-8") + (
        '\n[[mutant]]\nid = "centre-unseen"\ndescription = "I wrote the same thing differently."\n'
        'hint = "None."\nreplace = "keepdims=True)"\nwith = "keepdims=True, )"\n'
        '\n[[mutant]]\nid = "centre-gone"\ndescription = "A mistake whose text is not in the reference."\n'
        'hint = "None."\nreplace = "no such text"\nwith = "other"\n'), encoding="utf-8")
    status, out, _ = kit(capsys, "course", "check", "--course", str(own), "--exercise", NAME)
    assert status == 1
    fixes = [line for line in out.splitlines() if line.startswith("fix: ")]
    assert len(fixes) == 2, out
    assert "mistake centre-unseen (I wrote the same thing differently.) is not caught" in fixes[0]
    assert "add a test that does" in fixes[0]
    assert "mistake centre-gone" in fixes[1] and "cannot be planted" in fixes[1]


def test_course_check_names_a_reference_that_fails_and_a_stub_that_passes(own, capsys):
    tests = own / "tests" / f"test_{NAME}.py"
    tests.write_text(tests.read_text(encoding="utf-8") + (
        "\n\ndef test_always(impl):\n    assert True\n"
        "\n\ndef test_wrong(impl):\n    assert impl.centre([1.0, 3.0])[0] == 5.0, 'a wrong expectation'\n"),
        encoding="utf-8")
    status, out, _ = kit(capsys, "course", "check", "--course", str(own))
    assert status == 1
    fixes = [line for line in out.splitlines() if line.startswith("fix: ")]
    assert any("fails test_wrong" in line and "fix the reference or the test" in line for line in fixes), out
    assert any("test_always passes on the stub" in line for line in fixes), out
    assert "softmax" in out and "1. softmax" in out  # the kit's exercises are proven too


def test_it_is_graded_with_its_feedback_and_its_mistake_diagnosed(own, tmp_path, capsys):
    out = tmp_path / "out"
    status, printed, err = kit(capsys, "grade", str(submissions(own, tmp_path)), "--course", str(own), "--out",
                               str(out), "--jobs", "1")
    assert status == 0, printed[-2000:] + err[-2000:]
    text = (out / "grades.csv").read_text(encoding="utf-8")
    assert next(csv.reader(io.StringIO(text))) == ["student", "status", "score", "max_score", "softmax", NAME,
                                                    "score_before", "adjustments", "days_late", "late_penalty"]
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(text))}
    assert float(rows["solved"]["score"]) == float(rows["solved"]["max_score"]) == 12 + 12  # 10 + 2 each
    assert float(rows["mistaken"][NAME]) < 12 and float(rows["mistaken"]["softmax"]) == 12
    feedback = (out / "mistaken" / "feedback.md").read_text(encoding="utf-8")
    assert "Centring scores" in feedback
    assert "gives exactly the outputs of a known mistake" in feedback
    assert "I subtracted the mean of the whole array" in feedback  # its catalogue's words
    assert "expected:" in feedback and "observed:" in feedback and "revisit:" in feedback
    assert f"tests/test_{NAME}.py::test_every_slice_has_mean_zero:0:" in feedback  # named as released


def test_it_is_released_with_its_stub_tests_and_diagnosis(own, tmp_path, capsys):
    settings = own / "course.toml"  # the course's own text on it: every failure and the first run link to it
    settings.write_text(settings.read_text(encoding="utf-8").replace(
        f'name = "{NAME}"\n', f'name = "{NAME}"\nreading = "notes/centring.md#why-centre"\n', 1), encoding="utf-8")
    course.read.cache_clear()
    load.cache_clear()
    release = tmp_path / "release"
    # The text the link names must be there: a release that links to a file it lacks is refused, in one line.
    status, out, err = kit(capsys, "release", str(release), "--course", str(own), "--no-git")
    assert status != 0 and "reading = 'notes/centring.md#why-centre': notes/centring.md is not a file of the " \
        "course folder" in out + err, out + err
    (own / "notes").mkdir()
    (own / "notes" / "centring.md").write_text("## Why centre\n\nThe mean carries no information here.\n")
    status, out, err = kit(capsys, "release", str(release), "--course", str(own), "--no-git")
    assert status == 0, out + err
    for path in (f"exercises/{NAME}.py", f"tests/test_{NAME}.py", "tests/data/course_golden.npz",
                 "tests/data/course_fingerprints.npz", "notes/centring.md"):
        assert (release / path).is_file(), path
    assert not (release / "solutions").exists() and not (release / "mutants").exists()
    reference = (own / "solutions" / f"{NAME}.py").read_text(encoding="utf-8")
    assert MISTAKE[0] not in (release / "exercises" / f"{NAME}.py").read_text(encoding="utf-8")
    assert MISTAKE[0] in reference
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", course.COURSE_ENV)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-m", NAME], cwd=release,
                         env=env | {"PYTHONPATH": str(release)}, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert run.returncode == 1 and "not implemented yet" in run.stdout, run.stdout[-2000:]
    first = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"], cwd=release,
                           env=env | {"PYTHONPATH": str(release)}, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert any(line.startswith("NOT STARTED") and NAME in line and line.endswith("notes/centring.md#why-centre")
               for line in first.stdout.splitlines()), first.stdout[-2000:]
    mistaken = (own / "solutions" / f"{NAME}.py").read_text(encoding="utf-8").replace(*MISTAKE)
    (release / "exercises" / f"{NAME}.py").write_text(mistaken, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-m", NAME], cwd=release,
                         env=env | {"PYTHONPATH": str(release)}, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert "I subtracted the mean of the whole array" in run.stdout, run.stdout[-2000:]
    assert "read:     notes/centring.md#why-centre" in run.stdout, run.stdout[-2000:]


def test_it_becomes_a_notebook_with_its_tests(own, tmp_path, capsys):
    status, out, err = kit(capsys, "notebooks", str(tmp_path / "nb"), "--course", str(own))
    assert status == 0, out + err
    notebook = nbformat.read(next((tmp_path / "nb" / "source").glob(f"*-{NAME}/{NAME}.ipynb")), as_version=4)
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in notebook.cells]
    assert f"{NAME}-code" in ids and f"{NAME}-test_every_slice_has_mean_zero" in ids
    assert "course's graded suite" in "".join(cell.source for cell in notebook.cells)


def test_its_gradescope_bundle_grades_it(own, tmp_path, capsys):
    bundle = tmp_path / "autograder.zip"
    status, out, err = kit(capsys, "gradescope", str(bundle), "--course", str(own))
    assert status == 0, out + err
    root = tmp_path / "gs"
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        archive.extractall(root / "source")
        for info in archive.infolist():
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(root / "source" / info.filename, mode)
    assert {f"kit/tests/test_{NAME}.py", f"kit/solutions/{NAME}.py", "kit/data/golden.npz",
            "kit/data/fingerprints.npz", f"kit/hidden_tests/test_hidden_{NAME}.py"} <= names
    shutil.copytree(submissions(own, tmp_path) / "mistaken", root / "submission")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", course.COURSE_ENV)}
    completed = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, capture_output=True, text=True,
                               env=env | {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable},
                               timeout=HANG_SECONDS)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    tests = [test for test in results["tests"] if NAME in test.get("name", "")]
    assert tests and any("I subtracted the mean of the whole array" in test.get("output", "") for test in tests)
    assert 0 < results["score"] < 24


def test_an_exercise_edited_since_course_check_is_not_graded_on_stale_data(own, tmp_path, capsys):
    reference = own / "solutions" / f"{NAME}.py"
    reference.write_text(reference.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    commands = (["grade", str(tmp_path)], ["release", str(tmp_path / "r")], ["gradescope", str(tmp_path / "g.zip")])
    for command in commands:
        status, _, err = kit(capsys, *command, "--course", str(own))
        assert status == 2 and f"your exercise {NAME} changed since" in err and "course check" in err, (command, err)
        assert len(err.strip().splitlines()) == 1, err
    assert kit(capsys, "course", "check", "--course", str(own), "--exercise", NAME)[0] == 0
    course.activate(own)
    assert course.stale_own_data() is None


OWN = '[[exercise]]\nname = "mine"\ntitle = "Mine"\nfunctions = ["mine"]\ndepends = ["attention"]\npart = 4\n'


def test_an_own_exercise_may_build_on_the_kits_which_are_then_given(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "course.toml").write_text('[course]\nexercises = ["softmax", "mine"]\n[points]\nmine = 7\n' + OWN,
                                        encoding="utf-8")
    course.activate(folder)
    curriculum = load()
    assert curriculum.selected_names() == ("softmax", "mine") and curriculum.given_exercises == ("attention",)
    mine = curriculum.exercise("mine")
    assert (mine.part, mine.points, mine.hidden_points, mine.number) == (4, 7, 0, len(kit_manifest().names) + 1)
    assert curriculum.dependencies("mine") == ("softmax", "attention") and "4" in curriculum.parts


@pytest.mark.parametrize(("entry", "message"), [
    (OWN.replace('title = "Mine"\n', ""), "[[exercise]] mine: title is missing"),
    (OWN.replace('"attention"', '"attentoin"'), "[[exercise]] mine: depends names 'attentoin', which is no exercise"),
    (OWN.replace('name = "mine"', 'name = "softmax"'), "[[exercise]] softmax: an exercise of the kit has that name"),
    (OWN.replace('name = "mine"', 'name = "My-Ex"'), "[[exercise]] 1: name must be a module name"),
    (OWN.replace("part = 4", "part = 0"), "[[exercise]] mine: part must be a positive whole number"),
    (OWN + "colour = 3\n", "[[exercise]] mine: unknown setting colour"),
    (OWN + 'reading = "my notes.md"\n', "[[exercise]] mine: reading must be one link"),
])
def test_a_bad_own_exercise_stops_every_command_in_one_line(tmp_path, capsys, entry, message):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "course.toml").write_text(entry, encoding="utf-8")
    for command in (["status"], ["grade", str(tmp_path)], ["course", "check"]):
        status, _, err = kit(capsys, *command, "--course", str(folder))
        assert status == 2 and message in err and len(err.strip().splitlines()) == 1, (command, err)


def test_course_init_force_keeps_the_instructors_own_exercise(own, capsys):
    table = re.search(r"(?ms)^\[\[exercise\]\].*", (own / "course.toml").read_text(encoding="utf-8")).group(0)
    assert kit(capsys, "course", "init", str(own), "--kit", str(ROOT), "--force")[0] == 0
    for path in (f"solutions/{NAME}.py", f"mutants/{NAME}.toml", f"hidden_tests/test_hidden_{NAME}.py",
                 "solutions/softmax.py", "mutants/softmax.toml"):
        assert (own / path).is_file(), path
    course.activate(own)
    again = load().exercise(NAME)
    assert NAME in load().selected_names() and again.hints and again.points == 10 and again.hidden_points == 2
    assert "hints" in table and course.stale_own_data() is None  # the same files: the data is still current
