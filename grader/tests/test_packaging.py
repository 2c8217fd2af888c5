"""What the kit's pyproject.toml installs, and that CI runs exactly the README's command."""

from __future__ import annotations

import re
import tomllib

from grader.curriculum import PACKAGE, ROOT, kit_path


def test_ci_runs_exactly_the_readme_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The test command CI runs", 1)[1]
    command = re.search(r"```bash\n(.+?)\n```", section, flags=re.DOTALL).group(1).strip()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("python -m pytest")]
    assert ci == [command]


def test_every_package_of_the_kit_is_installed_and_nothing_generic() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(setuptools["packages"])
    assert all(package == "grader" or package.startswith("grader.") for package in packages)
    found = {".".join(("grader", *path.parent.relative_to(PACKAGE).parts)).rstrip(".")
             for path in PACKAGE.rglob("__init__.py") if "_kit" not in path.parts}
    # The kit's own tests stay out of the wheel, and so do the reference and the hidden tests: the wheel is the
    # student-safe package (grader/tests/test_install.py checks the built wheel's files and contents).
    assert found - packages == {"grader.tests", "grader.hidden_tests"}
    assert not [p for p in packages if "solutions" in p or "hidden" in p]
    assert "solutions" not in setuptools["package-dir"].values()
    for folder, package in (("tests", "grader._kit.tests"), ("exercises", "grader._kit.exercises")):
        assert setuptools["package-dir"][package] == folder and package in packages


def test_license_metadata_is_an_spdx_expression_with_its_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_kit_paths_name_the_package_and_the_data_tree() -> None:
    assert kit_path("grader/cli.py") == PACKAGE / "cli.py"
    assert kit_path("tests/kit.py") == ROOT / "tests" / "kit.py" and kit_path("tests/kit.py").is_file()


def test_an_xdist_group_runs_on_one_worker(tmp_path) -> None:
    """The README's test command groups tests (``--dist loadgroup``) so that a group's module fixtures are built once.

    Some pytest and pytest-xdist releases together drop the group silently (pytest-dev/pytest-xdist#1386): every
    worker then builds the fixture again, and the suite is minutes slower with nothing failing. Two files of one
    group, each with a module fixture, run on two workers: one worker must take both.
    """
    import subprocess
    import sys

    from grader.tests.waiting import HANG_SECONDS

    body = ('import os, pytest\npytestmark = pytest.mark.xdist_group("one")\n\n'
            '@pytest.fixture(scope="module")\ndef built():\n'
            '    with open("built.log", "a") as log:\n        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")\n\n')
    body += "".join(f"def test_{n}(built):\n    pass\n\n" for n in range(6))
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text(body, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-q", "-p", "xdist"], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = (tmp_path / "built.log").read_text().split()
    assert len(workers) == 2 and len(set(workers)) == 1, (
        f"the group's two module fixtures were built on workers {workers}, not twice on one: this pytest and "
        "pytest-xdist do not keep a group together (see the pin of pytest in pyproject.toml's dev extra)")
