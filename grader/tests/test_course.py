"""An instructor's course folder (grader/course.py): course.toml, its checks, and a whole course graded from it."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from grader import cli, course
from grader.curriculum import MANIFEST, ROOT, kit_manifest, load
from grader.grading.formats.grades_csv import TERM_COLUMNS
from grader.grading.samples import break_syntax
from grader.suite import graded_suite, hidden_folders
from grader.tests.waiting import HANG_SECONDS

EXTRA_HIDDEN = '''"""The instructor's own hidden tests of attention."""

import numpy as np

EXERCISE = "attention"
POINTS = 3


def test_one_key_gets_all_the_weight(impl):
    q, k, v = np.ones((1, 2)), np.ones((1, 2)), np.array([[5.0, -1.0]])
    np.testing.assert_allclose(impl.scaled_dot_product_attention(q, k, v)[0], [[5.0, -1.0]])


def test_equal_keys_average_the_values(impl):
    q, k, v = np.ones((1, 2)), np.ones((2, 2)), np.array([[1.0, 0.0], [3.0, 2.0]])
    np.testing.assert_allclose(impl.scaled_dot_product_attention(q, k, v)[0], [[2.0, 1.0]])
'''


@pytest.fixture(autouse=True)
def no_course(monkeypatch):
    """Every test starts without a course and leaves none behind (``main`` sets the variable for its children)."""
    monkeypatch.setenv(course.COURSE_ENV, "")
    monkeypatch.delenv(course.COURSE_ENV)
    monkeypatch.chdir(ROOT)


def make_course(folder: Path, settings: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "course.toml").write_text(settings, encoding="utf-8")
    return folder


def run_kit(capsys, *arguments: str) -> tuple[int, str, str]:
    status = cli.main(list(arguments))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_course_init_writes_every_setting_of_the_kit(tmp_path, capsys):
    status, out, _ = run_kit(capsys, "course", "init", str(tmp_path / "c"))
    assert status == 0 and "keep this folder private" in out
    folder = tmp_path / "c"
    assert {p.name for p in folder.iterdir()} == {"course.toml", "hidden_tests", "solutions", "kit_hidden_tests",
                                                  "mutants", "given"}
    assert (folder / "solutions" / "softmax.py").read_bytes() == (ROOT / "solutions" / "softmax.py").read_bytes()
    # The catalogue of known mistakes too: the package leaves it out, as it leaves out the reference it quotes.
    catalogue = sorted(p.name for p in (ROOT / "grader" / "mutants").glob("*.toml"))
    assert sorted(p.name for p in (folder / "mutants").glob("*.toml")) == catalogue and "families.toml" in catalogue
    assert len(list((folder / "kit_hidden_tests").glob("test_*.py"))) == len(kit_manifest().names)
    parsed = course.read(folder.resolve())
    kit = kit_manifest()
    assert parsed.exercises == kit.names
    assert parsed.points == {e.name: e.points for e in kit.exercises}
    assert parsed.points["attention"] == 20 and parsed.hidden_points["layer"] == 3
    assert parsed.limits == course.Limits(call_seconds=5, submission_seconds=60, cpu_seconds=10, memory_mib=1024)
    assert parsed.visibility == "after_published" and parsed.canvas_id is None
    again, _, err = run_kit(capsys, "course", "init", str(folder))
    assert again == 2 and "exists" in err and "--force" in err


def test_the_catalogue_is_the_course_folders_else_the_checkouts(tmp_path, monkeypatch):
    from grader import mutants

    monkeypatch.delenv(course.COURSE_ENV, raising=False)
    assert course.catalogue(ROOT / "grader") == ROOT / "grader" / "mutants"  # the checkout's
    installed = tmp_path / "site-packages" / "grader"  # an installed kit: its mutants/ holds code, no catalogue
    (installed / "mutants").mkdir(parents=True)
    (installed / "mutants" / "__init__.py").write_text("")
    assert course.catalogue(installed) is None
    folder = tmp_path / "c"
    (folder / "mutants").mkdir(parents=True)
    (folder / "course.toml").write_text("")
    (folder / "mutants" / "softmax.toml").write_text(
        (ROOT / "grader" / "mutants" / "softmax.toml").read_text(encoding="utf-8"))
    monkeypatch.setenv(course.COURSE_ENV, str(folder))
    assert course.catalogue(installed) == folder.resolve() / "mutants"
    assert course.catalogue(ROOT / "grader") == folder.resolve() / "mutants"  # the course's first
    loaded = mutants.load_catalogue()
    assert loaded and {mutant.exercise for mutant in loaded} == {"softmax"}
    (folder / "mutants" / "softmax.toml").unlink()
    monkeypatch.setattr(mutants, "PACKAGE", installed)
    with pytest.raises(mutants.CatalogueError, match="no catalogue of known mistakes \\(looked in .*c/mutants and"):
        mutants.load_catalogue()


@pytest.mark.parametrize(("settings", "message"), [
    ('[course]\nexercises = ["softmax", "attentoin"]\n',
     "[course] exercises names 'attentoin', which is not an exercise of the kit"),
    ("[points]\nsoftmax = 10.1\n", "[points] softmax must be a multiple of 0.0625"),
    ("[points]\nsoftmax = -1\n", "[points] softmax must be a number of at least 0"),
    ("[limits]\nsubmission_seconds = 0\n", "[limits] submission_seconds"),
    ('[limits]\nmemory_mib = "lots"\n', "[limits] memory_mib"),
    ("[limits]\nwall_seconds = 3\n", "unknown setting [limits] wall_seconds"),
    ('[hidden]\nvisibility = "sometimes"\n', "[hidden] visibility must be one of hidden, after_due_date"),
    ('[canvas]\nassignment_id = "12a"\n', "[canvas] assignment_id must be the number"),
    ('[course]\npart = "9"\n', "[course] part must be one of 1, 2, 3, all"),
    ("[course\n", "not valid TOML"),
])
def test_a_course_that_does_not_fit_the_kit_is_refused_in_one_line(tmp_path, capsys, settings, message):
    folder = make_course(tmp_path / "c", settings)
    for command in (["status"], ["grade", str(tmp_path)], ["hint", "1"], ["export", str(tmp_path)]):
        status, out, err = run_kit(capsys, *command, "--course", str(folder))
        assert status == 2, (command, out, err)
        assert len(err.strip().splitlines()) == 1 and message in err and str(folder / "course.toml") in err, err


def test_the_course_is_found_by_option_variable_or_working_folder(tmp_path, capsys, monkeypatch):
    folder = make_course(tmp_path / "c", '[course]\nexercises = ["softmax", "masks"]\n')
    status, out, _ = run_kit(capsys, "status", "--course", str(folder))
    assert status == 0 and "masks" in out and "multihead" not in out
    monkeypatch.setenv(course.COURSE_ENV, str(folder))
    status, out, _ = run_kit(capsys, "status")
    assert status == 0 and "multihead" not in out
    monkeypatch.delenv(course.COURSE_ENV)
    monkeypatch.chdir(folder)
    status, out, _ = run_kit(capsys, "status")
    assert status == 0 and "multihead" not in out
    status, _, err = run_kit(capsys, "status", "--course", str(tmp_path / "none"))
    assert status == 2 and "no course.toml there" in err and "course init" in err


def test_the_overlay_is_what_every_tool_reads(tmp_path, monkeypatch):
    folder = make_course(tmp_path / "c", '[course]\ntitle = "Attention, week 3"\n'
                                         'exercises = ["softmax", "projections", "attention", "masks", "multihead", '
                                         '"layer"]\n[points]\nsoftmax = 12\n[hidden_points]\nmasks = 4\n')
    (folder / "hidden_tests").mkdir()
    (folder / "hidden_tests" / "test_extra_attention.py").write_text(EXTRA_HIDDEN, encoding="utf-8")
    assert len(kit_manifest().names) == len(tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["exercise"])
    course.activate(folder)
    curriculum = load()
    assert curriculum.title == "Attention, week 3"
    assert curriculum.names == ("softmax", "projections", "attention", "masks", "multihead", "layer")
    kept = ("softmax", "projections", "attention", "masks", "multihead", "layer")
    assert curriculum.dropped == tuple(name for name in kit_manifest().names if name not in kept)
    assert curriculum.dropped[:5] == ("positional", "backward", "training", "explain", "decoding")
    assert curriculum.exercise("softmax").points == 12 and curriculum.exercise("masks").hidden_points == 4
    assert curriculum.lookup("6").name == "multihead"  # the kit's numbers, those of the test files
    with pytest.raises(ValueError, match=r"their numbers, 1, 2, 3, 4, 6, 7\)"):
        curriculum.lookup("5")
    assert load(MANIFEST) is curriculum and load(Path(MANIFEST)) is curriculum
    suite, warnings = graded_suite(hidden_folders())
    assert not warnings
    names = [Path(f.path).name for f in suite]
    assert not any("positional" in name or "explain" in name for name in names)  # dropped: not graded, no error
    assert "test_extra_attention.py" in names and "test_hidden_03_attention.py" in names
    extra = next(f for f in suite if f.path.endswith("test_extra_attention.py"))
    assert extra.points == 3 and extra.hidden


def test_the_course_feeds_canvas_the_budget_and_the_fingerprint(tmp_path, monkeypatch):
    from grader.grading import export
    from grader.grading.fingerprint import suite_fingerprint
    from grader.grading.records import Job

    def fingerprint() -> str:  # as the batch makes its template: the course's settings are a field of the job
        return suite_fingerprint(Job(student="", folder="", files=(), suite=(), course=course.settings()))

    plain = fingerprint()
    folder = make_course(tmp_path / "c", '[limits]\nsubmission_seconds = 30\ncall_seconds = 2\nmemory_mib = 512\n'
                                         '[canvas]\nassignment_name = "HW 3"\nassignment_id = 987654\n')
    course.activate(folder)
    assert export.canvas_assignment() == export.CanvasAssignment("HW 3", "987654")
    assert export.canvas_assignment("Other", "11") == export.CanvasAssignment("Other", "11")  # the options win
    assert course.limits() == course.Limits(call_seconds=2, submission_seconds=30, memory_mib=512)
    parser = cli.build_parser()
    options = parser.parse_args(["grade"])
    assert (options.budget, options.call_budget, options.memory) == (30, 2, 512)
    with_budget = fingerprint()
    other = make_course(tmp_path / "d", "[limits]\nsubmission_seconds = 31\ncall_seconds = 2\nmemory_mib = 512\n"
                                        '[canvas]\nassignment_name = "HW 3"\nassignment_id = 987654\n')
    course.activate(other)
    assert len({plain, with_budget, fingerprint()}) == 3


def test_the_student_package_says_where_it_looked_for_the_reference(tmp_path, capsys, monkeypatch):
    from grader import cli, curriculum  # noqa: F401
    from grader.authoring import course_init  # noqa: F401 - bound to the real ROOT before it is patched below
    from grader.grading import grade

    # Every module the command imports binds ROOT when first imported: imported now, they keep the real one after
    # this test (a first import under the patch kept the fake ROOT for the rest of the worker's tests).

    monkeypatch.setattr(curriculum, "ROOT", tmp_path / "site-packages" / "grader" / "_kit")
    folder = make_course(tmp_path / "c", "")
    monkeypatch.setattr(grade, "reference_dir", lambda: course.reference(curriculum.ROOT))
    monkeypatch.setattr(grade, "ROOT", curriculum.ROOT)
    status, _, err = run_kit(capsys, "grade", str(tmp_path), "--course", str(folder))
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"looked in {folder / 'solutions'} and {curriculum.ROOT / 'solutions'}" in err
    assert "attention-kit course init DIR --kit CHECKOUT" in err


# ------------------------------------------------------------------ a whole course, graded from its folder

COURSE = """\
[course]
exercises = ["softmax", "projections", "attention", "masks", "multihead", "layer"]  # positional dropped
[points]
softmax = 12
[hidden_points]
masks = 4
[limits]
submission_seconds = 30
[hidden]
visibility = "hidden"
"""
# Every number by hand from the kit's manifest (points + hidden_points) and the course above:
# softmax 12 + 2, projections 10 + 2, attention 20 + 4 + 3 (the extra file), masks 10 + 4, multihead 20 + 4,
# layer 15 + 3; positional (15 + 3) and Part II are dropped.
MAXIMA = {"softmax": 14, "projections": 12, "attention": 27, "masks": 14, "multihead": 24, "layer": 18}
TOTAL = 109


def test_a_whole_course_is_graded_from_its_folder(tmp_path, capsys):
    folder = make_course(tmp_path / "course", COURSE)
    (folder / "hidden_tests").mkdir()
    (folder / "hidden_tests" / "test_extra_attention.py").write_text(EXTRA_HIDDEN, encoding="utf-8")
    subs = tmp_path / "submissions"
    for student in ("correct", "no-positional", "no-masks", "broken-softmax"):
        shutil.copytree(ROOT / "solutions", subs / student, ignore=shutil.ignore_patterns("__pycache__"))
    (subs / "no-positional" / "positional.py").unlink()  # the dropped exercise's module is not missing
    (subs / "no-masks" / "masks.py").unlink()
    break_syntax(subs / "broken-softmax", "softmax.py")
    out = tmp_path / "grades"
    status, printed, err = run_kit(capsys, "grade", str(subs), "--course", str(folder), "--out", str(out),
                                   "--jobs", "2")
    assert status == 0, printed[-3000:] + err[-3000:]
    assert "30 CPU s per exercise" in printed  # [limits] submission_seconds is grade's --budget
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    header = next(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    assert header == ["student", "status", "score", "max_score", *MAXIMA, *TERM_COLUMNS]
    expected = {
        "correct": ("ok", 109, MAXIMA),
        "no-positional": ("ok", 109, MAXIMA),
        "no-masks": ("missing module masks", 95, MAXIMA | {"masks": 0}),
        "broken-softmax": (None, 95, MAXIMA | {"softmax": 0}),
    }
    for student, (state, score, cells) in expected.items():
        row = rows[student]
        if state is not None:
            assert row["status"] == state, row
        else:
            assert row["status"].startswith("syntax error in softmax.py line "), row
        assert (float(row["score"]), float(row["max_score"])) == (score, TOTAL), row
        assert {name: float(row[name]) for name in MAXIMA} == cells, row
    results = json.loads((out / "correct" / "results.json").read_text())
    assert results["score"] == TOTAL and results["extra_data"]["max_score"] == TOTAL
    extra = [t for t in results["tests"] if "test_extra_attention" in t["name"] or "one_key_gets_all" in t["name"]
             or "equal_keys_average" in t["name"]]
    assert [t["score"] for t in extra] == [1.5, 1.5], [t["name"] for t in results["tests"]]
    hidden = [t for t in results["tests"] if "hidden" in t.get("tags", [])]
    assert hidden and {t["visibility"] for t in hidden} == {"hidden"}  # [hidden] visibility
    assert not any("positional" in t["name"] for t in results["tests"])


def test_a_release_of_the_course_carries_its_exercises_points_and_numbers(tmp_path):
    import tomllib

    from grader.authoring.release import plan_release

    folder = make_course(tmp_path / "c", '[course]\ntitle = "Week 3"\nexercises = ["softmax", "attention", '
                                         '"masks", "decoding"]\n[points]\nsoftmax = 12.5\n')
    course.activate(folder)
    plan = plan_release()
    manifest = tomllib.loads(plan.texts["grader/curriculum.toml"])
    assert manifest["course"]["title"] == "Week 3"
    assert [(e["name"], e.get("number"), e["points"]) for e in manifest["exercise"]] == [
        ("softmax", 1, 12.5), ("attention", 3, 20), ("masks", 4, 10), ("decoding", 11, 25)]
    tests = sorted(path for path in plan.paths() if path.startswith("tests/test_"))
    assert tests == ["tests/test_01_softmax.py", "tests/test_03_attention.py", "tests/test_04_masks.py",
                     "tests/test_11_decoding.py"]
    assert not any("solutions" in path or "hidden" in path for path in plan.paths())


def test_a_gradescope_bundle_of_the_course_carries_it(tmp_path):
    import zipfile

    from grader.grading import gradescope

    folder = make_course(tmp_path / "c", '[course]\nexercises = ["softmax", "attention"]\n[points]\nsoftmax = 12\n'
                                         '[hidden]\nvisibility = "hidden"\n')
    (folder / "hidden_tests").mkdir()
    (folder / "hidden_tests" / "test_extra_attention.py").write_text(EXTRA_HIDDEN, encoding="utf-8")
    course.activate(folder)
    # By hand: public softmax 12 + attention 20; hidden softmax 2 + attention 4 (the kit's) + 3 (the course's).
    assert gradescope.total_points() == (32, 9)
    names = gradescope.build_bundle(tmp_path / "a.zip")
    assert {"kit/course.toml", "kit/hidden_tests/test_extra_attention.py", "kit/solutions/softmax.py"} <= set(names)
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        readme = archive.read("README.md").decode()
        assert archive.read("kit/course.toml").decode() == (folder / "course.toml").read_text()
    assert "**41**" in readme and "visibility `hidden`: students never see them" in readme
    # Gradescope shows the total at once under `hidden` (its specification), and the total holds the hidden points.
    assert "total score at once, hidden points included" in readme
    # Gradescope's run: the bundle's kit/ is the course folder (its course.toml is in the working folder).
    import os
    import subprocess
    import sys

    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        archive.extractall(root / "source")
    for script in ("run_autograder", "setup.sh"):
        (root / "source" / script).chmod(0o755)
    shutil.copytree(ROOT / "solutions", root / "submission", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", course.COURSE_ENV)}
    env |= {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    done = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, capture_output=True,
                          text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 41, results.get("output")
    assert {t["visibility"] for t in results["tests"] if "hidden" in t.get("tags", [])} == {"hidden"}
    assert sum(t["score"] for t in results["tests"] if "equal_keys_average" in t["name"]) == 1.5


def test_course_init_makes_its_private_folders_the_instructors_alone(tmp_path, capsys):
    import os
    import stat

    old = os.umask(0o000)  # the widest umask a shared machine may have; restored below
    try:
        status, out, _ = run_kit(capsys, "course", "init", str(tmp_path / "c"))
        status_again, _, _ = run_kit(capsys, "course", "init", str(tmp_path / "c"), "--force")  # over a copy
    finally:
        os.umask(old)
    assert status == status_again == 0, out
    folder = tmp_path / "c"
    for name in (course.REFERENCE_FOLDER, course.KIT_HIDDEN_FOLDER, course.HIDDEN_FOLDER, course.CATALOGUE_FOLDER,
                 course.GIVEN_FOLDER):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o700, name
        files = [path for path in (folder / name).rglob("*") if path.is_file()]
        assert files, name
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # The given implementations, which the wheel leaves out, as the checkout has them: code and its verification.
    kit_given = ROOT / "grader" / "release_files" / "given"
    copied = {path.name: path.read_bytes() for path in (folder / course.GIVEN_FOLDER).iterdir()}
    assert copied == {path.name: path.read_bytes() for path in kit_given.iterdir() if path.is_file()}
    assert {"softmax.py", "training.py", "verified.json"} <= set(copied)


def test_pytest_m_takes_the_kits_numbers_in_a_course_that_drops_exercises(tmp_path):
    # status lists "11. decoding"; `pytest -m 11` ran nothing (and `-m 12` in a Parts I+III release ran exercise
    # 13): the numbers were positions in the course's list.
    from tests import plugin

    folder = make_course(tmp_path / "c", '[course]\nexercises = ["softmax", "attention", "masks", "decoding"]\n')
    course.activate(folder)

    class Config:
        def getini(self, name: str) -> list[str]:
            return [f"{exercise.name}: tests of it" for exercise in load().exercises]

    assert [plugin.check_mark_expression(Config(), text) for text in ("11", "4", "1 or 3")] == [
        "decoding", "masks", "softmax or attention"]
    with pytest.raises(pytest.UsageError, match=r"no exercise named '2'; .* \(or their numbers, 1, 3, 4, 11;"):
        plugin.check_mark_expression(Config(), "2")


def test_pytest_m_names_an_exercise_the_part_does_not_hold(monkeypatch):
    # `pytest -m masks` in a Part III release said only "no tests ran" (exit 5): it ships no tests of exercise 4.
    from grader.curriculum import PART_ENV
    from tests import plugin

    monkeypatch.setenv(PART_ENV, "3")

    class Config:
        def getini(self, name: str) -> list[str]:
            return [f"{exercise.name}: tests of it" for exercise in load().exercises] + ["slow: takes long"]

    assert [plugin.check_mark_expression(Config(), text) for text in ("negation", "3", "not slow")] == [
        "negation", "attention", "not slow"]  # assigned, given (its tests ship), another marker
    for text in ("masks", "4 or negation"):
        with pytest.raises(pytest.UsageError, match=r"exercise 4, masks is not part of this course \(it has exercises "
                                                    r"12, 13, 14, 15, and 1, 2, 3, 5, 6, 8, 9 given\)"):
            plugin.check_mark_expression(Config(), text)
    # A typo lists the course's exercises only, with their kit numbers: not masks, layer, explain or decoding.
    with pytest.raises(pytest.UsageError) as typo:
        plugin.check_mark_expression(Config(), "negaton")
    message = str(typo.value)
    assert message.startswith("-m negaton: no exercise named 'negaton'; the exercises are negation, ")
    assert not {"masks", "layer", "explain", "decoding"} & set(re.findall(r"[a-z]+", message)), message
    assert "(or their numbers, 1, 2, 3, 5, 6, 8, 9, 12, 13, 14, 15;" in message


def test_building_a_bundle_whose_hidden_tests_are_hidden_warns_that_the_total_shows_them(tmp_path, capsys):
    from grader.grading import gradescope

    for visibility, warned in (("hidden", True), ("after_published", False)):
        folder = make_course(tmp_path / visibility, '[course]\nexercises = ["softmax"]\n'
                                                    f'[hidden]\nvisibility = "{visibility}"\n')
        course.activate(folder)
        assert gradescope.main([str(tmp_path / f"{visibility}.zip")]) == 0
        error = capsys.readouterr().err
        assert ("the total includes the hidden tests' points" in error) is warned, (visibility, error)
        if warned:
            assert 'visibility = "after_published"' in error  # what to write instead
