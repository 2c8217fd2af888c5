"""The kit installed as instructors and students install it: a built wheel, outside the source tree.

Two fresh virtual environments serve every test here, built once per run:

- ``instructor``: the kit's wheel (with the reference and the hidden tests), which
  then grades the samples, builds a release, a Gradescope bundle and a course, and
  runs the graded suite, all from a folder outside the checkout;
- ``student``: the release that wheel built, installed non-editable, as in a
  JupyterHub image: its check cells, ``attention-kit status`` and the suite.

The environments get the kit with ``--no-deps`` and see this interpreter's
third-party packages (numpy, pytest, nbformat ...) through a ``.pth`` line, so no
package index is needed and nothing is downloaded twice; the kit itself comes only
from the wheel (each test checks where ``grader`` was imported from). The tests
carry ``xdist_group("install")``: with ``-n auto --dist loadgroup`` they all run in
one worker, so the environments are built once, while other tests run beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load

pytestmark = [pytest.mark.install, pytest.mark.xdist_group("install")]


def _pip(*arguments: str, cwd: Path | None = None) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ATTENTION_KIT_PART", "PIP_REQUIRE_VIRTUALENV")}


class Environment:
    """A fresh venv with one install of the kit; commands run in a folder outside the checkout."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True, timeout=120)
        self.python = folder / "venv" / "bin" / "python"
        site = Path(subprocess.run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        dependencies = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
        (site / "zz_kit_dependencies.pth").write_text("\n".join(sorted(dependencies)) + "\n")
        self.site = site
        self.work = folder / "work"
        self.work.mkdir()

    def install(self, target: Path) -> None:
        _pip("--python", str(self.python), "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
             str(target))

    def run(self, *arguments: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), *arguments], cwd=self.work, capture_output=True, text=True,
                              timeout=timeout, env=_clean_env())

    def kit(self, *arguments: str, timeout: float = 600) -> subprocess.CompletedProcess:
        script = self.python.parent / "attention-kit"
        return subprocess.run([str(script), *arguments], cwd=self.work, capture_output=True, text=True,
                              timeout=timeout, env=_clean_env())


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source") / "kit"  # a clean copy: no build/ or egg-info in the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build",
                                                                 ".pytest_cache", ".ruff_cache", ".venv"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-v", "-w", str(out), str(source)], capture_output=True, text=True, timeout=600,
                          env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    warnings = [line for line in (done.stdout + done.stderr).splitlines()
                if "warn" in line.lower() and "byte-compil" not in line]
    assert not warnings, "\n".join(warnings)
    (built,) = out.glob("attention_kit-*.whl")
    return built


@pytest.fixture(scope="session")
def instructor(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Environment:
    environment = Environment(tmp_path_factory.mktemp("instructor"))
    environment.install(wheel)
    return environment


@pytest.fixture(scope="session")
def student(instructor: Environment, tmp_path_factory: pytest.TempPathFactory) -> Environment:
    release = instructor.work / "student-release"
    built = instructor.kit("release", str(release))
    assert built.returncode == 0, built.stderr
    environment = Environment(tmp_path_factory.mktemp("student"))
    environment.install(release)
    shutil.copytree(release / "exercises", environment.work / "exercises")  # the student's working copy
    return environment


def _imported_from(environment: Environment) -> Path:
    done = environment.run("-c", "import grader.curriculum as c; print(c.__file__); print(c.ROOT)")
    assert done.returncode == 0, done.stderr
    module, root = done.stdout.split()
    assert Path(module).is_relative_to(environment.site), module
    return Path(root)


def test_the_wheel_holds_only_grader(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"grader"}
    for exercise in load().exercises:
        assert f"grader/_kit/solutions/{exercise.module_file}" in names
        assert f"grader/_kit/{exercise.test_file}" in names
    assert {"grader/_kit/pyproject.toml", "grader/_kit/conftest.py", "grader/_kit/tests/data/golden.npz",
            "grader/curriculum.toml", "grader/release_files/gradescope/run_autograder"} <= set(names)
    assert any(name.startswith("grader/hidden_tests/test_") for name in names)
    assert not any(name.startswith("grader/tests/") or name.startswith("grader/_kit/grader/") for name in names)
    assert not any(name.startswith("grader/_kit/__init__") for name in names)  # pytest's rootdir, not a package
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(metadata).decode()
    assert "License-Expression: MIT" in text


def test_installed_kit_grades_the_samples(instructor: Environment) -> None:
    assert _imported_from(instructor).is_relative_to(instructor.site)
    done = instructor.kit("grade", "--out", "grades", "--jobs", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    correct = json.loads((instructor.work / "grades" / "correct" / "results.json").read_text())
    assert correct["extra_data"]["status"] == "ok"
    assert correct["score"] == pytest.approx(correct["extra_data"]["max_score"])
    curriculum = load()
    assert correct["extra_data"]["max_score"] == sum(e.points + e.hidden_points for e in curriculum.selection())
    assert (instructor.work / "grades" / "grades-long.csv").is_file()


def test_installed_kit_runs_the_graded_suite(instructor: Environment) -> None:
    done = instructor.kit("test", "--impl", "solutions", "--hidden", "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    tests = instructor.run("-c", "import tests")
    assert tests.returncode != 0 and "No module named 'tests'" in tests.stderr  # nothing generic in site-packages


def test_installed_kit_builds_a_bundle_and_a_course(instructor: Environment) -> None:
    bundle = instructor.kit("gradescope", "autograder.zip")
    assert bundle.returncode == 0, bundle.stderr
    assert "Total points to set on Gradescope" in bundle.stdout
    with zipfile.ZipFile(instructor.work / "autograder.zip") as archive:
        names = set(archive.namelist())
    assert {"setup.sh", "run_autograder", "README.md", "kit/pyproject.toml", "kit/LICENSE",
            "kit/grader/grading/grade.py", "kit/solutions/softmax.py", "kit/tests/test_01_softmax.py"} <= names
    assert not any("/_kit/" in name for name in names)
    pytest.importorskip("nbformat")
    course = instructor.kit("notebooks", "course")
    assert course.returncode == 0, course.stderr
    assert len(list((instructor.work / "course" / "source").glob("*/*.ipynb"))) == len(load().selection())


def test_student_release_installed_has_nothing_of_the_instructors(student: Environment) -> None:
    root = _imported_from(student)
    package = root.parent
    assert not (root / "solutions").exists() and not (package / "hidden_tests").exists()
    assert not (package / "mutants").exists() and not (package / "grading").exists()
    assert (root / "tests" / "test_01_softmax.py").is_file()
    commands = student.kit("--help")
    assert "status" in commands.stdout and "grade " not in commands.stdout


def test_student_release_installed_runs_status_and_the_suite(student: Environment) -> None:
    status = student.kit("status")
    assert status.returncode == 0, status.stderr
    assert "not started" in status.stdout and "run:   attention-kit test -m softmax" in status.stdout
    report = student.work / "junit.xml"
    suite = student.kit("test", "-q", "-p", "no:cacheprovider", f"--junitxml={report}")
    assert suite.returncode == 1, suite.stdout[-2000:] + suite.stderr[-2000:]
    cases = list(ET.parse(report).getroot().iter("testcase"))
    assert len(cases) > 50
    for case in cases:  # every graded test fails on the stubs, and says why
        failure = case.find("failure")
        assert failure is not None, f"{case.get('name')} did not fail on the stubs"
        assert "not implemented yet" in (failure.get("message") or ""), (case.get("name"), failure.get("message"))


def test_student_release_installed_runs_a_notebook_check(student: Environment) -> None:
    code = (
        "import numpy as np\n"
        "def softmax(x, axis=-1):\n"
        "    x = np.asarray(x, dtype=float)\n"
        "    top = np.max(x, axis=axis, keepdims=True)\n"
        "    e = np.exp(x - np.where(np.isfinite(top), top, 0.0))\n"
        "    total = e.sum(axis=axis, keepdims=True)\n"
        "    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)\n"
        "from grader.student.notebook import check\n"
        "check('softmax', 'test_rows_sum_to_one')\n"
        "softmax = lambda x, axis=-1: np.exp(np.asarray(x, dtype=float))\n"
        "try:\n"
        "    check('softmax', 'test_rows_sum_to_one')\n"
        "except AssertionError as error:\n"
        "    print('FAILED AS EXPECTED', str(error).splitlines()[0])\n"
    )
    done = student.run("-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "passed: test_rows_sum_to_one" in done.stdout
    assert "FAILED AS EXPECTED softmax: test_rows_sum_to_one failed" in done.stdout
