"""Courses choose their exercises: Part I, Part II or all, from one option or the manifest's [course] part.

A copy of the kit gets a small Part II exercise (``doubled``, which builds on
softmax); every tool then runs in that copy, as an instructor would, with
``--part`` or the manifest's setting.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load, parse_part
from grader.tests.waiting import HANG_SECONDS

FAKE_SOLUTION = '''"""Exercise 8: doubled softmax (a stand-in for a Part II exercise in the kit's own tests).

The function uses exercise 1, so fair grading must serve softmax from the reference.
"""

from __future__ import annotations

import numpy as np

from .softmax import softmax


def doubled(x: np.ndarray) -> np.ndarray:
    """Twice the softmax of ``x`` along the last axis.

    Parameters
    ----------
    x : numpy.ndarray
        Scores.

    Returns
    -------
    numpy.ndarray
        ``2 * softmax(x)``.
    """
    return 2.0 * softmax(np.asarray(x, dtype=float))
'''

FAKE_TESTS = '''"""Exercise 8: doubled (test of the part selection)."""

import numpy as np

from tests.feedback import expect_close


def test_rows_sum_to_two(impl):
    x = np.random.default_rng(8).normal(size=(3, 4))
    expect_close(impl.doubled(x).sum(axis=-1), np.full(3, 2.0), what="rows of doubled(x)", idea="2 * softmax")


def test_is_positive(impl):
    x = np.random.default_rng(9).normal(size=(2, 5))
    expect_close(np.minimum(impl.doubled(x), 0.0), np.zeros((2, 5)), what="negative entries", idea="softmax > 0")
'''

FAKE_ENTRY = '''
[[exercise]]
name = "doubled"
title = "Doubled softmax (Part II stand-in)"
test_file = "tests/test_08_doubled.py"
functions = ["doubled"]
depends = ["softmax"]
points = 50
part = 2
hints = ["Twice the softmax."]
'''


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("parts") / "kit"
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
    for entry in ("grader", "tests", "solutions", "exercises", "docs"):
        shutil.copytree(ROOT / entry, root / entry, ignore=ignore)
    shutil.rmtree(root / "grader" / "tests")
    for entry in ("conftest.py", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copyfile(ROOT / entry, root / entry)
    (root / "solutions" / "doubled.py").write_text(FAKE_SOLUTION, encoding="utf-8")
    (root / "tests" / "test_08_doubled.py").write_text(FAKE_TESTS, encoding="utf-8")
    manifest = root / "grader" / "curriculum.toml"
    # The copy's Part II is the stand-in alone: the kit's own exercises after Part I (Part II, and Part III and on
    # when there are any) are taken out of its manifest, so the figures below (Part I 100 + 20 hidden, the stand-in
    # 50) do not change when the later parts grow.
    tables = re.split(r"(?m)^(?=\[\[exercise\]\])", manifest.read_text(encoding="utf-8"))
    kept = [table for table in tables if not re.search(r"(?m)^part = (?!1$)\d+$", table)]
    manifest.write_text("".join(kept).rstrip() + "\n" + FAKE_ENTRY, encoding="utf-8")
    for exercise in load().exercises:
        if exercise.part != 1:  # its graded and hidden tests go with it
            (root / exercise.test_file).unlink()
            for hidden in (root / "grader" / "hidden_tests").glob(f"test_hidden_*_{exercise.name}.py"):
                hidden.unlink()
    synced = kit_command(root, "-m", "grader.authoring.sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    return root


def kit_command(root: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ATTENTION_KIT_PART")}
    environment.update(env)
    return subprocess.run([sys.executable, *arguments], cwd=root, env=environment, capture_output=True, text=True,
                          timeout=HANG_SECONDS)


@pytest.fixture(scope="module")
def part_one_class(kit: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two students who did Part I only (the seven modules, no doubled.py); one made a masks mistake."""
    folder = tmp_path_factory.mktemp("class")
    for student in ("ada", "bo"):
        shutil.copytree(ROOT / "solutions", folder / student, ignore=shutil.ignore_patterns("__pycache__"))
    masks = folder / "bo" / "masks.py"
    masks.write_text(masks.read_text(encoding="utf-8").replace("np.tril(", "np.triu(", 1), encoding="utf-8")
    return folder


def grades(out: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}


def test_parse_part_names_the_choices() -> None:
    assert [parse_part(v) for v in (1, "2", " ALL ")] == ["1", "2", "all"]
    beyond = str(int(load().parts[-1]) + 1)
    with pytest.raises(ValueError, match=f"one of {', '.join(load().parts)}, all, not '{beyond}'"):
        parse_part(beyond)


def test_a_new_part_number_in_the_manifest_is_a_part(tmp_path: Path) -> None:
    manifest = tmp_path / "curriculum.toml"
    text = (ROOT / "grader" / "curriculum.toml").read_text(encoding="utf-8")
    new = str(int(load().parts[-1]) + 1)  # 3, while the kit has Parts I and II
    manifest.write_text(text.replace("[course]\n", f'[course]\npart = "{new}"\n', 1)
                        + FAKE_ENTRY.replace("part = 2", f"part = {new}"), encoding="utf-8")
    curriculum = load(manifest)
    assert curriculum.parts == (*load().parts, new) and curriculum.part == new
    assert curriculum.selected_names() == ("doubled",)
    assert parse_part(f" {new} ", curriculum.parts) == new
    assert [e.name for e in curriculum.selection("all")] == [e.name for e in curriculum.exercises]
    with pytest.raises(ValueError, match=f"one of {', '.join(curriculum.parts)}, all, not '{int(new) + 1}'"):
        parse_part(str(int(new) + 1), curriculum.parts)


def test_part_one_graded_for_part_one_is_not_missing_part_two(kit: Path, part_one_class: Path, tmp_path: Path) -> None:
    done = kit_command(kit, "-m", "grader", "grade", str(part_one_class), "--out", str(tmp_path / "p1"),
                       "--part", "1", "--jobs", "2")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = grades(tmp_path / "p1")
    assert rows["ada"]["status"] == "ok" and "doubled" not in rows["ada"]
    part_one = load().selection("1")
    assert float(rows["ada"]["max_score"]) == sum(e.points + e.hidden_points for e in part_one)
    assert float(rows["ada"]["score"]) == float(rows["ada"]["max_score"])
    assert float(rows["bo"]["masks"]) < float(rows["ada"]["masks"])


def test_all_parts_marks_the_missing_part_two_module(kit: Path, part_one_class: Path, tmp_path: Path) -> None:
    done = kit_command(kit, "-m", "grader", "grade", str(part_one_class), "--out", str(tmp_path / "all"),
                       "--part", "all", "--jobs", "2")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    row = grades(tmp_path / "all")["ada"]
    assert row["status"] == "missing module doubled" and float(row["doubled"]) == 0


def test_part_two_grades_part_two_only_with_the_reference_underneath(kit: Path, tmp_path: Path) -> None:
    student = tmp_path / "class" / "cy"
    student.mkdir(parents=True)
    shutil.copyfile(kit / "solutions" / "doubled.py", student / "doubled.py")  # no Part I modules at all
    (student / "softmax.py").write_text("def softmax(x, axis=-1):\n    raise RuntimeError('broken')\n")
    # The manifest's own choice, no option: [course] part = "2".
    manifest = kit / "grader" / "curriculum.toml"
    original = manifest.read_text(encoding="utf-8")
    manifest.write_text(original.replace('[course]\n', '[course]\npart = "2"\n', 1), encoding="utf-8")
    try:
        done = kit_command(kit, "-m", "grader", "grade", str(student.parent), "--out", str(tmp_path / "p2"))
    finally:
        manifest.write_text(original, encoding="utf-8")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    row = grades(tmp_path / "p2")["cy"]
    assert row["status"] == "ok", row  # Part I modules are not asked for
    assert float(row["score"]) == float(row["max_score"]) == 50  # fair: softmax comes from the reference
    assert "softmax" not in row


def test_release_status_and_classroom_follow_the_part(kit: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    done = kit_command(kit, "-m", "grader", "release", str(out), "--part", "1")
    assert done.returncode == 0, done.stderr
    assert not (out / "tests" / "test_08_doubled.py").exists()
    assert tomllib.loads((out / "grader" / "curriculum.toml").read_text())["course"]["part"] == "1"
    workflow = (out / ".github" / "workflows" / "classroom.yml").read_text()
    assert "classroom doubled" not in workflow and "classroom layer" in workflow
    readme = (out / "README.md").read_text()
    assert "doubled" not in readme and "Total: 100 points." in readme
    status = kit_command(out, "-m", "grader", "status", "--impl", str(kit / "solutions"))
    assert status.returncode == 0, status.stderr
    assert "doubled" not in status.stdout and "/100 points" in status.stdout
    both = kit_command(kit, "-m", "grader", "status", "--impl", "solutions", "--part", "all")
    assert "doubled" in both.stdout and "150/150 points" in both.stdout
    two = kit_command(kit, "-m", "grader", "status", "--impl", "solutions", "--part", "2")
    # Part II builds on softmax, which it does not assign: listed as given (no counts, no points), not as work.
    rows = [line for line in two.stdout.split("Progress")[0].splitlines() if "softmax" in line]
    assert rows and all("done given" in line and "/" not in line for line in rows), two.stdout
    assert "50/50 points" in two.stdout


def test_gradescope_bundle_keeps_the_part(kit: Path, tmp_path: Path) -> None:
    import zipfile

    done = kit_command(kit, "-m", "grader", "gradescope", str(tmp_path / "ag.zip"), "--part", "1")
    assert done.returncode == 0, done.stderr
    assert "Total points to set on Gradescope: 120 (100 public" in done.stdout
    with zipfile.ZipFile(tmp_path / "ag.zip") as archive:
        assert 'PART="1"' in archive.read("run_autograder").decode()


def test_notebooks_follow_the_part(kit: Path, tmp_path: Path) -> None:
    pytest.importorskip("nbformat")
    import nbformat

    done = kit_command(kit, "-m", "grader", "notebooks", str(tmp_path / "course"), "--part", "2")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "course" / "source").iterdir()) == ["08-doubled"]
    single = kit_command(kit, "-m", "grader", "notebooks", str(tmp_path / "one"), "--part", "2", "--layout", "single")
    assert single.returncode == 0, single.stderr
    (path,) = (tmp_path / "one" / "source").glob("*/*.ipynb")
    cells = nbformat.read(str(path), as_version=4).cells
    text = "\n".join(cell.source for cell in cells)
    assert "def doubled(" in text and "def softmax(" in text  # softmax given as reference code
    assert "def causal_mask(" not in text
    graded = [c for c in cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert sum(c.metadata["nbgrader"]["points"] for c in graded) == pytest.approx(50)


def test_a_part_two_module_may_import_the_student_s_own_part_one_module(tmp_path: Path) -> None:
    # A layer_norm_backward that recomputes the forward pass with the student's own layer_norm (exercise 7, not one
    # exercise 8 builds on), graded with --part 2: its own run finds layer.py beside it, and so must the grading
    # (it found none and lost every layer_norm_backward test).
    from grader.tests.cheats import plant

    plant(tmp_path / "class" / "reuse", {"backward": (
        "_given_layer_norm_backward = layer_norm_backward\n\n\n"
        "def layer_norm_backward(grad_out, x, gamma, eps=1e-5):\n"
        "    from .layer import layer_norm  # the student's own forward pass\n\n"
        "    layer_norm(np.asarray(x), np.asarray(gamma), np.zeros(np.shape(gamma)), eps)\n"
        "    return _given_layer_norm_backward(grad_out, x, gamma, eps)\n")})
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "--out",
                           str(tmp_path / "out"), "--part", "2", "--jobs", "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    row = grades(tmp_path / "out")["reuse"]
    assert row["status"] == "ok" and float(row["backward"]) == load().exercise("backward").points + \
        load().exercise("backward").hidden_points, row
