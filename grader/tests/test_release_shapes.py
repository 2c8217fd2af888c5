"""Every shape of release works on its own, installed as its README says (issue 35).

A release of Part I, II, III, all, or a course folder's own choice is built,
installed editable (``python -m pip install -e .``) into a fresh virtual
environment, and used from its own folder as a new student would:

- ``pytest`` fails only on the assigned exercises' stubs ("not implemented
  yet"); every test of a given exercise (working code that ships, marked given)
  runs and passes, so ``pytest -m training`` in a Part III release passes;
- ``attention-kit status`` lists each given exercise as done and given;
- every demo either runs (all it needs is given), or names the assigned
  exercises to finish first (never a given one, never "0/0"), or says the
  course does not hold the exercise;
- no line of the reference ships in it.

One more test finishes the assigned exercises of a Part III release (with the
reference, in the test's own copy only) and runs every demo there: each prints
its figures.

The environments see this interpreter's packages through a ``.pth`` line
(``test_install.Environment``), so nothing is downloaded; the kit comes only from
the release. Slow (a release and a venv per shape, under a minute each).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.curriculum import PART_ENV, ROOT, load
from grader.student import demo, demo_distance, demo_explain, demo_negation, demo_retrieval, demo_tokenization
from grader.tests.reference_lines import find_leaks, folder_texts, reference_lines
from grader.tests.test_install import Environment, _pip
from grader.tests.waiting import HANG_SECONDS

pytestmark = pytest.mark.slow
# The finished Part III release is built once and shared: its tests run in one xdist worker (--dist loadgroup);
# each shape builds its own release and venv, so those spread over the workers.
FINISHED = pytest.mark.xdist_group("finished_part_3")
SCREEN = 40  # lines: the first run of a fresh copy fits on one screen (grader/tests/test_first_run.py)

# Every demo a student can ask for, with the exercises it runs (what they build on is added).
DEMOS = {
    "demo": demo.NEEDS,
    "demo --heads 2": demo.NEEDS + demo.NEEDS_HEADS,
    "demo --causal": demo.NEEDS,
    "demo --trained": demo.NEEDS_TRAINED,
    "demo --explain": demo_explain.NEEDS,
    "demo --measure negation": demo_negation.NEEDS,
    "demo --measure distance": demo_distance.NEEDS,
    "demo --measure retrieval": demo_retrieval.NEEDS,
    "demo --measure tokenization": demo_tokenization.NEEDS,
}
PART_I, PART_III = load().selected_names("1"), load().selected_names("3")
# name -> (environment of the release command, course.toml or None)
SHAPES = {
    "part-1": ({PART_ENV: "1"}, None),
    "part-2": ({PART_ENV: "2"}, None),
    "part-3": ({PART_ENV: "3"}, None),
    "all": ({}, None),
    # A course folder's own choice: Part III, without the exercises it neither assigns nor builds on.
    "course-part-3": ({}, '[course]\ntitle = "Meaning and context"\npart = "3"\nexercises = '
                      + json.dumps([n for n in load().names if n not in ("layer", "explain", "decoding")]) + "\n"),
    # A mix of parts: I and III (what III builds on in Part II is given).
    "course-parts-1-3": ({}, '[course]\ntitle = "Attention, then meaning"\nexercises = '
                         + json.dumps([*PART_I, *PART_III]) + "\n"),
}


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", PART_ENV, "CI",
                                                               "ATTENTION_KIT_COURSE", "NO_COLOR")
           and not k.startswith("PYTEST_")}  # pytest as a student runs it: its own settings only
    return env | (extra or {})


def build_release(shape: str, tmp: Path) -> Path:
    """``attention-kit release`` of ``shape``, as the instructor runs it (from the checkout)."""
    environment, course_toml = SHAPES[shape]
    environment = dict(environment)
    if course_toml is not None:
        course = tmp / "course"
        course.mkdir()
        (course / "course.toml").write_text(course_toml, encoding="utf-8")
        environment["ATTENTION_KIT_COURSE"] = str(course)
    out = tmp / "student-repo"
    done = subprocess.run([sys.executable, "-m", "grader", "release", str(out), "--no-git"], cwd=ROOT,
                          env=_env(environment) | {"PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=HANG_SECONDS)
    if course_toml is not None and "which it depends on" in done.stderr:
        pytest.xfail("[course] exercises cannot yet leave out what its exercises build on (issue 36, the ownex "
                     f"branch): {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    return out


class Student:
    """A fresh venv with the release installed editable; commands run in the release's folder."""

    def __init__(self, release: Path, tmp: Path) -> None:
        self.release = release
        self.environment = Environment(tmp / "student")
        self.cache = {"ATTENTION_KIT_CACHE": str(tmp / "cache")}  # status's and the demos' results: not the user's
        _pip("--python", str(self.environment.python), "install", "--no-deps", "--no-build-isolation", "--no-index",
             "-q", "-e", str(release))
        where = self.python("-c", "import grader, sys; print(grader.__file__)")
        assert Path(where.stdout.strip()).is_relative_to(release), where.stdout + where.stderr
        shape = self.python("-c", "import json; from grader.curriculum import load; c = load(); "
                                  "print(json.dumps([c.selected_names(), c.given_names()]))")
        assert shape.returncode == 0, shape.stderr
        self.assigned, self.given = (tuple(names) for names in json.loads(shape.stdout))

    def python(self, *arguments: str, timeout: float = 300,
               extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.environment.python), *arguments], cwd=self.release, capture_output=True,
                              text=True, timeout=timeout, env=_env(self.cache | (extra or {})))

    def kit(self, command: str, timeout: float = 300) -> subprocess.CompletedProcess:
        script = self.environment.python.parent / "attention-kit"
        return subprocess.run([str(script), *command.split()], cwd=self.release, capture_output=True, text=True,
                              timeout=timeout, env=_env(self.cache))

    def pytest(self, *arguments: str) -> tuple[subprocess.CompletedProcess, dict[str, list[str]]]:
        """``pytest`` in the release; its outcome and, per test file, each test's failure message ("": passed)."""
        report = self.release.parent / "junit.xml"
        done = self.python("-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}", *arguments,
                           extra={"COLUMNS": "80"})
        outcomes: dict[str, list[str]] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            path = (case.get("file") or case.get("classname", "").replace(".", "/") + ".py").split("/")[-1]
            problem = case.find("failure") if case.find("failure") is not None else case.find("error")
            message = "" if problem is None else (problem.get("message") or "") + (problem.text or "") or "failed"
            outcomes.setdefault(path, []).append(message)
        return done, outcomes


def needed(names: tuple[str, ...]) -> list[str]:
    curriculum = load()
    return [n for n in curriculum.names if n in names or any(n in curriculum.dependencies(m) for m in names)]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_release_works_on_its_own_from_a_fresh_venv(shape: str, tmp_path: Path) -> None:
    release = build_release(shape, tmp_path)
    leaks = find_leaks(folder_texts(release), reference_lines())
    assert not leaks, "\n".join(leaks)
    student = Student(release, tmp_path)
    kit = load()
    if shape == "part-3":  # the case: Part III builds on exercises 1-3, 5, 6, 8 and 9, given
        assert student.given == ("softmax", "projections", "attention", "positional", "multihead", "backward",
                                 "training")
    if shape == "course-parts-1-3":
        assert student.given == ("backward", "training")
    for name in student.given:
        head = (release / "exercises" / kit.exercise(name).module_file).read_text(encoding="utf-8")[:200]
        assert "GIVEN. This course does not assign it; you need not write it." in head, name

    # pytest: the assigned exercises' tests fail on their stubs; the given exercises' tests run and pass (those
    # of a given exercise built on an assigned one, a mix's, fail only on that exercise's stubs until it is done).
    done, outcomes = student.pytest()
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    # The first run fits on a screen: one line per exercise not started, one per given exercise whose tests wait
    # on the student's stubs (a mix), and no failure report (tests/first_run.py).
    lines = [line for line in done.stdout.splitlines() if "generated xml file" not in line]
    assert len(lines) <= SCREEN and "FAILURES" not in done.stdout, f"{len(lines)} lines:\n{done.stdout[:4000]}"
    for name in student.assigned:
        assert re.search(rf"(?m)^NOT STARTED +{kit.exercise(name).number}\. {name} ", done.stdout), name
    files = {Path(kit.exercise(name).test_file).name: name for name in student.assigned + student.given}
    assert set(outcomes) == set(files), (sorted(outcomes), sorted(files))
    for file, failures in outcomes.items():
        name = files[file]
        assert failures and all("not implemented yet" in failure for failure in failures if failure), file
        if name in student.assigned:
            assert all(failures), (file, "a test of an assigned exercise passed on the stubs")
        elif not set(kit.dependencies(name)) & set(student.assigned):
            assert not any(failures), (file, [failure for failure in failures if failure][:1])
        elif any(failures):
            assert re.search(rf"(?m)^GIVEN +{kit.exercise(name).number}\. {name}: working code", done.stdout), name
    if "training" in student.given and not set(kit.dependencies("training")) & set(student.assigned):
        done, outcomes = student.pytest("-m", "training", "-q")
        assert done.returncode == 0 and sum(map(len, outcomes.values())) > 10, done.stdout[-2000:]

    # status: the given exercises are marked given, done unless they call the student's stubs (then they say
    # which); the first assigned one is next.
    status = student.kit("status")
    assert status.returncode == 0, status.stderr
    for name in student.given:
        number = kit.exercise(name).number
        waits = set(kit.dependencies(name)) & set(student.assigned)
        shown = r"given: .*; its tests pass once your exercise" if waits else "done given"
        assert re.search(rf"^\s+{number}\. {name}\s+{shown}", status.stdout, re.M), status.stdout
    first = kit.exercise(student.assigned[0])
    assert f"Next: exercise {first.number}, {first.name}" in status.stdout, status.stdout

    # Every demo runs, or names what to finish first, or says the course does not hold it.
    course = set(student.assigned) | set(student.given)
    for command, needs in DEMOS.items():
        runs = needed(needs)
        done = student.kit(f"{command} --out {tmp_path / 'picture.png'}")
        printed = done.stdout + done.stderr
        if not set(runs) <= course:
            assert done.returncode == 1 and "is not part of this course" in printed, (command, printed)
            assert "0/0" not in printed, (command, printed)
        elif set(runs) & set(student.assigned):
            assert done.returncode == 1 and "first" in printed, (command, printed)
            named = re.findall(r"^\s+\d+\. (\w+): \d+/\d+ tests pass", printed, re.M)
            assert named and set(named) <= set(student.assigned), (command, printed)
            assert "0/0" not in printed, (command, printed)
        else:
            assert done.returncode == 0, (command, printed)
            assert "heatmap:" in printed or "picture:" in printed, (command, printed)


@pytest.fixture(scope="module")
def finished_part_3(tmp_path_factory: pytest.TempPathFactory) -> Student:
    """A Part III release whose student has finished 12-15 (played by the reference, in this copy only)."""
    tmp = tmp_path_factory.mktemp("finished")
    release = build_release("part-3", tmp)
    student = Student(release, tmp)
    for name in (*student.assigned, "_checks"):
        shutil.copyfile(ROOT / "solutions" / f"{name}.py", release / "exercises" / f"{name}.py")
    return student


@FINISHED
def test_a_finished_part_3_release_passes_every_test(finished_part_3: Student) -> None:
    done, outcomes = finished_part_3.pytest("-q")
    assert done.returncode == 0 and not any(any(failures) for failures in outcomes.values()), done.stdout[-3000:]
    assert len(outcomes) == len(finished_part_3.assigned) + len(finished_part_3.given)
    status = finished_part_3.kit("status")
    assert "All exercises pass" in status.stdout, status.stdout


PART_3_DEMOS = [command for command, needs in DEMOS.items()
                if set(needed(needs)) <= set(PART_III) | set(load().given_names("3"))]


def test_every_demo_of_part_3_is_offered() -> None:
    assert {"demo", "demo --trained", "demo --measure negation", "demo --measure distance",
            "demo --measure retrieval", "demo --measure tokenization"} <= set(PART_3_DEMOS)
    assert "demo --explain" not in PART_3_DEMOS  # exercise 10 is neither assigned nor given in Part III


@FINISHED
@pytest.mark.parametrize("command", PART_3_DEMOS)
def test_a_finished_part_3_release_draws_every_demo(finished_part_3: Student, command: str, tmp_path: Path) -> None:
    done = finished_part_3.kit(f"{command} --out {tmp_path / 'picture.png'}")
    assert done.returncode == 0, (command, done.stdout + done.stderr)
    assert (tmp_path / "picture.png").is_file(), (command, done.stdout)
