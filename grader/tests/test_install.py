"""The kit installed as instructors and students install it: built wheels, outside the source tree.

Two fresh virtual environments serve every test here, built once per run:

- ``instructor``: the kit's wheel (``attention-kit``, the student-safe package: no
  reference, no hidden tests) plus a course folder made by ``attention-kit course
  init . --kit CHECKOUT``, which copies the reference and the hidden tests from the
  instructor's checkout; it then grades the samples, builds a release, a Gradescope
  bundle and a course, and runs the graded suite, all from a folder outside the checkout;
- ``student``: the wheel of the release that kit built, installed non-editable, as in
  a JupyterHub image: its check cells, ``attention-kit status`` and the suite.

The kit's wheel is built from its sdist, as an index would build it. The sdist and both wheels are
inspected: by file list, and every line of every file (data files and archives inside included) against
every line of the reference (``grader/tests/reference_lines.py``): none holds one, nor a hidden test.

The environments get the kit with ``--no-deps`` and see this interpreter's
third-party packages (numpy, pytest, nbformat ...) through a ``.pth`` line, so no
package index is needed and nothing is downloaded twice; the kit itself comes only
from the wheel (each test checks where ``grader`` was imported from). The tests
carry ``xdist_group("install")``: with ``-n auto --dist loadgroup`` they all run in
one worker, so the environments are built once, while other tests run beside them.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from grader.curriculum import ROOT, load
from grader.tests.reference_lines import archive_texts, find_leaks, reference_lines
from grader.tests.waiting import HANG_SECONDS

pytestmark = [pytest.mark.install, pytest.mark.xdist_group("install")]


def _pip(*arguments: str, cwd: Path | None = None) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_SECONDS, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ATTENTION_KIT_PART", "ATTENTION_KIT_COURSE",
                         "PIP_REQUIRE_VIRTUALENV")}


class Environment:
    """A fresh venv with one install of the kit; commands run in a folder outside the checkout."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True,
                       timeout=HANG_SECONDS)
        self.python = folder / "venv" / "bin" / "python"
        site = Path(subprocess.run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        # This interpreter's site folders, and those a layered venv adds to its path (a base venv's packages).
        dependencies = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"),
                        *(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())}
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

    def kit(self, *arguments: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
        script = self.python.parent / "attention-kit"
        return subprocess.run([str(script), *arguments], cwd=cwd or self.work, capture_output=True, text=True,
                              timeout=timeout, env=_clean_env())


def _warnings(output: str) -> list[str]:
    # MANIFEST.in's guards say so when they had nothing to remove: the state they keep, not a problem.
    return [line for line in output.splitlines() if "warn" in line.lower() and "byte-compil" not in line
            and "no previously-included files" not in line]


def build_wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of the project at ``source`` (a folder or an sdist) into ``out``, warning-free; the wheel."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-v", "-w", str(out), str(source)], capture_output=True, text=True,
                          timeout=HANG_SECONDS, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    warnings = _warnings(done.stdout + done.stderr)
    assert not warnings, "\n".join(warnings)
    (built,) = out.glob("*.whl")
    return built


def build_sdist(source: Path, out: Path) -> Path:
    """The sdist of the project at ``source`` into ``out`` (setuptools' PEP 517 hook, as ``python -m build``)."""
    hook = f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", hook], cwd=source, capture_output=True, text=True,
                          timeout=HANG_SECONDS, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    warnings = _warnings(done.stdout + done.stderr)
    assert not warnings, "\n".join(warnings)
    return out / done.stdout.split()[-1]


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source") / "kit"  # a clean copy: no build/ or egg-info in the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build",
                                                                 ".pytest_cache", ".ruff_cache", ".venv"))
    built = build_sdist(source, tmp_path_factory.mktemp("sdist"))
    assert built.name.startswith("attention_kit-") and built.name.endswith(".tar.gz")
    return built


@pytest.fixture(scope="session")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = build_wheel(sdist, tmp_path_factory.mktemp("wheel"))  # from the sdist, as an index builds it
    assert built.name.startswith("attention_kit-")
    return built


@pytest.fixture(scope="session")
def instructor(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Environment:
    environment = Environment(tmp_path_factory.mktemp("instructor"))
    environment.install(wheel)
    # The instructor's course folder, with the reference and the hidden tests of the instructor's own checkout.
    made = environment.kit("course", "init", ".", "--kit", str(ROOT))
    assert made.returncode == 0, made.stdout + made.stderr
    return environment


@pytest.fixture(scope="session")
def student_wheel(instructor: Environment, tmp_path_factory: pytest.TempPathFactory) -> Path:
    release = instructor.work / "student-release"
    built = instructor.kit("release", str(release))
    assert built.returncode == 0, built.stderr
    return build_wheel(release, tmp_path_factory.mktemp("student-wheel"))


@pytest.fixture(scope="session")
def student(instructor: Environment, student_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Environment:
    environment = Environment(tmp_path_factory.mktemp("student"))
    environment.install(student_wheel)
    shutil.copytree(instructor.work / "student-release" / "exercises", environment.work / "exercises")
    return environment


def reference_bodies() -> dict[str, str]:
    """The body of every function of the reference (its lines after the docstring), by ``module.function``.

    What a student must write; a body of one line is left out (``return softmax(x)`` may be anyone's), and so
    are the modules students are given as they are (the manifest's ``given``).
    """
    given = set(load().given_modules) | {"__init__"}
    return function_bodies(path for path in sorted((ROOT / "solutions").glob("*.py")) if path.stem not in given)


def wheel_texts(wheel: Path) -> dict[str, str]:
    return {name: data.decode("utf-8", errors="replace") for name, data in archive_texts(wheel).items()}


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
        assert f"grader/_kit/exercises/{exercise.module_file}" in names
        assert f"grader/_kit/{exercise.test_file}" in names
    assert {"grader/_kit/pyproject.toml", "grader/_kit/conftest.py", "grader/_kit/tests/data/golden.npz",
            "grader/curriculum.toml", "grader/course.py", "grader/_kit/docs/reading.md",
            "grader/release_files/gradescope/run_autograder"} <= set(names)
    assert not any(name.startswith("grader/tests/") or name.startswith("grader/_kit/grader/") for name in names)
    assert not any(name.startswith("grader/_kit/__init__") for name in names)  # pytest's rootdir, not a package
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(metadata).decode()
    assert "License-Expression: MIT" in text


@pytest.mark.parametrize("which", ["sdist", "wheel", "student_wheel"])
def test_no_package_holds_the_reference_or_the_hidden_tests(which: str, request: pytest.FixtureRequest) -> None:
    built: Path = request.getfixturevalue(which)
    texts = wheel_texts(built)
    assert not [n for n in texts if "/solutions/" in n or "hidden_tests" in n or n.startswith("solutions/")]
    hidden_names = [p.name for p in (ROOT / "grader" / "hidden_tests").glob("test_*.py")]
    assert not [n for n in texts if Path(n).name in hidden_names]
    bodies = reference_bodies()
    assert len(bodies) > 30, sorted(bodies)  # the check below has something to find
    leaked = sorted({function for function, body in bodies.items() for text in texts.values() if body in text})
    assert not leaked, f"{built.name} holds the body of {leaked}"
    hidden_tests = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "grader" / "hidden_tests").glob("test_*")}
    for name, source in hidden_tests.items():  # nor a hidden test's code under another name
        first = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
        snippet = "\n".join(source.splitlines()[first.lineno - 1:first.end_lineno])
        assert not any(snippet in text for text in texts.values()), f"{built.name} holds {name}'s {first.name}"


def given_bodies() -> dict[str, str]:
    """The body of every function of the kit's given implementations of two lines or more, by ``module.function``.

    They are working answers (``grader/release_files/given``, bit for bit the reference's values), instructor-side
    like the reference: only a release that gives an exercise rather than assigning it ships its given code.
    """
    return function_bodies(sorted((ROOT / "grader" / "release_files" / "given").glob("*.py")))


def function_bodies(paths: Iterable[Path]) -> dict[str, str]:
    """The body (lines after the docstring) of every function of two lines or more in ``paths``, by
    ``module.function``."""
    bodies = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if body and node.end_lineno - body[0].lineno >= 1:
                    bodies[f"{path.stem}.{node.name}"] = "\n".join(lines[body[0].lineno - 1:node.end_lineno])
    return bodies


@pytest.mark.parametrize("which", ["sdist", "wheel", "student_wheel"])
def test_no_package_holds_the_given_implementations(which: str, request: pytest.FixtureRequest) -> None:
    # A Part I student who installs the kit must not find a working softmax, attention ... in it.
    built: Path = request.getfixturevalue(which)
    texts = wheel_texts(built)
    shipped = [name for name in texts if "release_files/given/" in name or name.endswith("/given/verified.json")]
    assert not shipped, f"{built.name} holds {shipped}"
    bodies = given_bodies()
    assert len(bodies) > 20 and {"softmax", "attention", "training"} <= {n.split(".")[0] for n in bodies}
    released = set(load().given_names()) if which == "student_wheel" else set()  # what that release gives
    leaked = sorted({function for function, body in bodies.items() if function.split(".")[0] not in released
                     for text in texts.values() if body in text})
    assert not leaked, f"{built.name} holds the given code of {leaked}"


def test_the_sdist_holds_the_kit_and_nothing_of_the_instructors(sdist: Path) -> None:
    names = {name.split("/", 1)[1] for name in archive_texts(sdist) if "/" in name}
    assert {"pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "conftest.py", "grader/cli.py",
            "grader/curriculum.toml", "grader/mutants/__init__.py", "tests/test_01_softmax.py",
            "tests/data/fingerprints.npz", "exercises/softmax.py"} <= names
    for banned in ("solutions/", "grader/hidden_tests/", "grader/tests/", "benchmarks/", ".ci/"):
        assert not [name for name in names if name.startswith(banned)], banned
    assert not [name for name in names if name.startswith("grader/mutants/") and name.endswith(".toml")]


@pytest.mark.parametrize("which", ["sdist", "wheel", "student_wheel"])
def test_no_file_of_a_package_holds_a_line_of_the_reference(which: str, request: pytest.FixtureRequest) -> None:
    """Every line of every file, strings and data included, against every line of solutions/ not in the stubs."""
    built: Path = request.getfixturevalue(which)
    lines = reference_lines()
    assert len(lines) > 300, len(lines)  # the check below has something to find
    leaks = find_leaks(archive_texts(built), lines)
    assert not leaks, f"{built.name} holds {len(leaks)} line(s) of the reference:\n" + "\n".join(leaks[:60])


def test_the_line_check_names_every_file_and_line_a_reference_line_hides_in(tmp_path: Path) -> None:
    import io
    import tarfile

    import numpy as np

    lines = reference_lines()
    scaled = next(line for line in lines if '"' not in line and "\\" not in line and "scores" in line)
    quoted = next(line for line in lines if '"' in line)  # written with escapes in a TOML or Python string
    catalogue = f'[[mutant]]\nreplace = {json.dumps(quoted)}\nwith = "x"\n'
    module = f'"""Nothing."""\n\nA = 1\nB = f(2)  # {scaled} here\nC = {json.dumps(quoted)}\n'
    data = io.BytesIO()
    np.savez(data, meta=np.array(json.dumps({"code": [quoted]})))
    planted = tmp_path / "planted.whl"
    with zipfile.ZipFile(planted, "w") as archive:
        archive.writestr("grader/mutants/softmax.toml", catalogue)
        archive.writestr("grader/_kit/tests/helper.py", module)
        archive.writestr("grader/_kit/tests/data/fingerprints.npz", data.getvalue())
        archive.writestr("grader/clean.py", "print('nothing of the reference')\n")
    leaks = find_leaks(archive_texts(planted), lines)
    assert any(leak.startswith("grader/_kit/tests/helper.py:4: ") and repr(scaled) in leak for leak in leaks), leaks
    assert any(leak.startswith("grader/_kit/tests/helper.py:5 (a string): ") for leak in leaks), leaks
    assert any(leak.startswith("grader/mutants/softmax.toml (TOML values): ") for leak in leaks), leaks
    assert any(leak.startswith("grader/_kit/tests/data/fingerprints.npz!meta.npy (JSON): ") for leak in leaks), leaks
    assert not any("clean.py" in leak for leak in leaks)
    sdist = tmp_path / "planted.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(tmp_path / "planted.whl", arcname="kit-0.1/dist/planted.whl")
    assert any(leak.startswith("kit-0.1/dist/planted.whl!grader/mutants/softmax.toml") for leak in
               find_leaks(archive_texts(sdist), lines))


def test_the_body_check_finds_a_planted_reference(tmp_path: Path) -> None:
    bodies = reference_bodies()
    planted = tmp_path / "planted.whl"
    with zipfile.ZipFile(planted, "w") as archive:
        archive.writestr("grader/_kit/exercises/softmax.py", (ROOT / "solutions" / "softmax.py").read_text())
    texts = wheel_texts(planted)
    assert any(body in text for body in bodies.values() for text in texts.values())


def test_the_installed_kit_without_a_course_refuses_to_grade(instructor: Environment) -> None:
    elsewhere = instructor.folder / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    for command in (["grade", "--out", "g"], ["gradescope", "a.zip"]):
        done = instructor.kit(*command, cwd=elsewhere)
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
        (line,) = [text for text in done.stderr.splitlines() if text.strip()]
        assert "no reference solutions (looked in" in line and "course init DIR --kit CHECKOUT" in line
    suite = instructor.kit("test", "--impl", "solutions", cwd=elsewhere)
    assert suite.returncode != 0 and "/solutions: no such folder" in suite.stdout + suite.stderr
    mutants = instructor.kit("mutants", cwd=elsewhere)  # the catalogue is the course folder's, like the reference
    assert mutants.returncode == 2 and "no catalogue of known mistakes (looked in" in mutants.stdout, mutants.stdout


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
    # The sample class plants mistakes from the catalogue that course init copied into the course folder.
    assert sorted((instructor.work / "mutants").glob("*.toml"))
    assert [path for path in (instructor.work / "grades").iterdir() if path.name.startswith("mistake-")]


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
    assert {"setup.sh", "run_autograder", "README.md", "kit/pyproject.toml", "kit/LICENSE", "kit/course.toml",
            "kit/grader/grading/grade.py", "kit/solutions/softmax.py", "kit/tests/test_01_softmax.py",
            "kit/kit_hidden_tests/test_hidden_01_softmax.py"} <= names  # the reference: the course folder's
    assert {"kit/given/softmax.py", "kit/given/verified.json"} <= names  # so is the given code fair grading runs
    assert not any(name.startswith("kit/grader/release_files/given/") for name in names)
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
    # Its lines suggest a command that works where the kit is installed (plain pytest knows no --impl there).
    assert "attention-kit test -m softmax" in suite.stdout and "pytest -m softmax --impl" not in suite.stdout, (
        suite.stdout[-3000:])
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
